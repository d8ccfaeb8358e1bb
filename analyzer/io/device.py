"""Device facts (core counts, clock, model, CANN version, rank) and chip selection (formats doc §9).

Sources, strongest first: `PROF_*/device_{N}/info.json.{M}`, SQLite NPU_INFO, `msprof op`
OpBasicInfo frequencies, torch_npu `profiler_info*.json` / `profiler_metadata.json`, and as a last
resort inference from the kernel table itself (formats doc §10.1/§10.2), recorded as a warning.
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

if TYPE_CHECKING:
    import pandas as pd

from tilescope.chips import (
    IDLE_CLOCK_MHZ,
    MAX_CLOCK_MHZ,
    VARIANTS_BY_CLOCK,
    ChipSpec,
    family_chip,
    fewest_cores_at_least,
    resolve_chip,
)
from tilescope.columns import MIX_AIC, MIX_AIV
from tilescope.profile import DeviceInfo

# Example: "device_0", "device_12"
DEVICE_DIR_RE = re.compile(r"^device_(?P<n>\d{1,2})$")
# Example: "info.json.0"
INFO_JSON_RE = re.compile(r"^info\.json\.\d{1,2}$")
# Example: "profiler_info.json", "profiler_info_3.json" -> rank 3
PROFILER_INFO_RE = re.compile(r"^profiler_info(?:_(?P<rank>\d+))?\.json$")
# A rank written into a folder name, when no profiler_info_N.json says it.
# Example: "rank_3", "rank3", "test_rank_1", "node0_rank-12_ascend_pt", "RANK7"
RANK_NAME_RE = re.compile(r"(?:^|[^a-z0-9])rank[_-]?(?P<rank>\d+)(?![0-9])", re.IGNORECASE)


def _load_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return None  # device facts are optional; a broken side file must not fail the load


def _num(value: Any) -> float | None:
    try:
        f = float(str(value).strip())
    except (TypeError, ValueError):
        return None
    return f if np.isfinite(f) and f > 0 else None


def read_info_json(path: Path) -> DeviceInfo:
    """`info.json.{N}`: DeviceInfo[0].ai_core_num, aiv_num, aic_frequency (MHz string)."""
    data = _load_json(path)
    info = DeviceInfo()
    if not isinstance(data, dict):
        return info
    devs = data.get("DeviceInfo") or []
    dev = devs[0] if isinstance(devs, list) and devs and isinstance(devs[0], dict) else {}
    core = _num(dev.get("ai_core_num"))
    aiv = _num(dev.get("aiv_num"))
    freq = _num(dev.get("aic_frequency"))
    info.ai_core_num = int(core) if core else None
    info.aiv_num = int(aiv) if aiv else None
    info.aic_frequency_mhz = freq
    did = dev.get("id")
    info.device_id = int(did) if isinstance(did, int | str) and str(did).isdigit() else None
    return info


def find_info_json(root: Path) -> list[Path]:
    """Every `device_{N}/info.json.{M}` below a torch_npu or msprof directory (max depth 3)."""
    out: list[Path] = []
    for pattern in ("device_*/info.json.*", "PROF_*/device_*/info.json.*", "*/PROF_*/device_*/info.json.*"):
        out.extend(
            p for p in root.glob(pattern) if INFO_JSON_RE.match(p.name) and DEVICE_DIR_RE.match(p.parent.name)
        )
    return sorted(set(out))


def rank_from_name(path: Path) -> int | None:
    """The rank a folder's name (or, for ASCEND_PROFILER_OUTPUT / a file, its parent's) spells, e.g.
    `rank_3`; None when it spells none."""
    for name in (path.name, path.parent.name):
        m = RANK_NAME_RE.search(name)
        if m:
            return int(m.group("rank"))
    return None


def read_profiler_info(root: Path) -> tuple[int | None, str | None, list[Path]]:
    """(rank, CANN version, files) from torch_npu `profiler_info*.json` and `profiler_metadata.json`."""
    rank: int | None = None
    cann: str | None = None
    files: list[Path] = []
    for p in sorted(root.glob("profiler_info*.json")):
        m = PROFILER_INFO_RE.match(p.name)
        if not m:
            continue
        files.append(p)
        if m.group("rank") is not None:
            rank = int(m.group("rank"))
        data = _load_json(p)
        if isinstance(data, dict):
            rank = rank if rank is not None else _int_or_none(data.get("rank_id"))
            cann = cann or _find_version(data)
    meta = root / "profiler_metadata.json"
    if meta.is_file():
        files.append(meta)
        data = _load_json(meta)
        if isinstance(data, dict):
            cann = cann or _find_version(data)
            dist = data.get("distributed_args")
            if rank is None and isinstance(dist, dict):
                rank = _int_or_none(dist.get("rank"))
    return rank, cann, files


def _int_or_none(v: Any) -> int | None:
    try:
        i = int(v)
    except (TypeError, ValueError):
        return None
    return i if i >= 0 else None


def _find_version(data: dict[str, Any]) -> str | None:
    for key, value in data.items():
        k = str(key).lower()
        if "cann" in k and "version" in k and isinstance(value, str | int | float):
            return str(value)
        if isinstance(value, dict):
            found = _find_version(value)
            if found:
                return found
    return None


def merge_device(base: DeviceInfo, other: DeviceInfo) -> DeviceInfo:
    """Fill the gaps of `base` with `other` (base wins where both know a value)."""
    for f in (
        "device_id",
        "ai_core_num",
        "aiv_num",
        "aic_frequency_mhz",
        "rated_frequency_mhz",
        "timeline_max_frequency_mhz",
        "model_name",
        "cann_version",
    ):
        if getattr(base, f) is None:
            setattr(base, f, getattr(other, f))
    return base


class ChipEvidence:
    """What the chip inference reads from each kernel row, gathered table by table.

    The inference takes medians and votes over all rows, so a streamed file can only be concluded
    at its end; keeping the per-row inputs (a few float arrays) makes that end cheap, and the
    whole-table inference is the same code with one table.

    Per row and side (Cube: `aic_*`, Vector: `aiv_*`) it keeps the clock the row would imply if all
    its blocks ran at once, cycles / (blocks x side time) (formats doc §10.2): right when the grid
    fits on the cores, a fraction of the clock when the blocks run in waves (Block Dim > cores,
    usual for Triton and TileLang grids), which is why no single row is trusted. With
    `cube_utilization(%)` it keeps the product clock x cores the profiler divided by (§10.1).
    """

    def __init__(self) -> None:
        self.cube_mhz: list[np.ndarray] = []  # per Cube-side row: cycles / (blocks x aic time)
        self.cube_blocks: list[np.ndarray] = []
        self.vector_mhz: list[np.ndarray] = []
        self.vector_blocks: list[np.ndarray] = []
        self.product: list[np.ndarray] = []  # per row with cube_utilization: MHz x AIC cores
        self.rows = 0
        # set by infer() when the core count is a lower bound raised to a catalogued variant's
        self.cores_lower_bound: int | None = None
        # set by infer(): the fewest AI Cores the device can have, from grids that ran in one wave
        self.grid_bound: int | None = None

    @classmethod
    def of(cls, kernels: pd.DataFrame | pa.Table) -> ChipEvidence:
        evidence = cls()
        evidence.add(kernels)
        return evidence

    def add(self, kernels: pd.DataFrame | pa.Table) -> None:
        # deferred: metrics (pyarrow) only where used
        from tilescope.metrics import KernelColumns

        cols = KernelColumns(kernels)
        if "core_type" not in cols or not cols.n:
            return
        self.rows += cols.n
        block = cols.floats("block_dim")
        mix = cols.floats("mix_block_dim")
        mix_aic = cols.text_in("core_type", [MIX_AIC])
        mix_aiv = cols.text_in("core_type", [MIX_AIV])
        # blocks on each side: a MIX_AIC launch's Vector side runs `Mix Block Dim` sub-blocks, a
        # MIX_AIV launch's Cube side likewise; every other row runs Block Dim on whichever side did
        # the work (older CANN types vector kernels AI_CORE with their cycles in aiv_*)
        cube_blocks = np.where(mix_aiv, mix, block)
        vector_blocks = np.where(mix_aic, mix, block)
        cube_cycles, vector_cycles = cols.floats("aic_total_cycles"), cols.floats("aiv_total_cycles")
        # `msprof op` launch rows are aggregated from per-block rows (io/msprof_op.py): their time is
        # the mean block's, so cycles / (block rows x time) is the clock whatever the waves, and the
        # grid bounds no core count (a 96-block launch on 20 cores gives 96 otherwise)
        per_block = "cube_block_rows" in cols or "vector_block_rows" in cols
        if per_block:
            cube_blocks = cols.floats("cube_block_rows")
            vector_blocks = cols.floats("vector_block_rows")
        sides = (
            (cube_cycles, cols.floats("aic_time_us"), cube_blocks, self.cube_mhz, self.cube_blocks),
            (vector_cycles, cols.floats("aiv_time_us"), vector_blocks, self.vector_mhz, self.vector_blocks),
        )
        with np.errstate(divide="ignore", invalid="ignore"):
            for cycles, time, blocks, mhz_out, blocks_out in sides:
                ok = (cycles > 0) & (time > 0) & (blocks > 0)
                mhz_out.append(cycles[ok] / (blocks[ok] * time[ok]))
                # 0: the row votes for the clock but bounds no core count
                blocks_out.append(np.zeros(int(ok.sum())) if per_block else blocks[ok])
            util = cols.floats("cube_utilization_pct")
            dur = cols.floats("duration_us")
            # below ~0.3 % the file's three decimals leave too few digits for the product
            ok = (util >= 0.3) & (cube_cycles > 0) & (dur > 0)
            self.product.append(cube_cycles[ok] / (util[ok] / 100.0 * dur[ok]))

    def _cat(self, parts: list[np.ndarray]) -> np.ndarray:
        return np.concatenate(parts) if parts else np.empty(0)

    def infer(self, clock_mhz: float | None = None, coupled: bool = False) -> tuple[DeviceInfo, list[str]]:
        """Core count and clock, with the arithmetic as notes; `clock_mhz` when the profile records it.

        Clock, first that applies: `clock_mhz`; the rated clock of a catalogued chip that rows
        fitting on the cores give (cycles / (blocks x time) within 1.5 % of 1650, 1800 or 1850 MHz;
        the most common wins); the rated clock at which `cube_utilization(%)`'s clock x cores is a
        whole number of cores; nothing (the chip default is then assumed and said so).
        Cores: clock x cores / clock when the profiler's utilisation gives it; else the largest
        grid that fitted on the cores (a lower bound) raised to the catalogued variant at that clock.
        Never a clock outside [idle clock, 2000 MHz] nor a core count outside 1..64.
        `coupled`: a coupled chip's table (one AI Core with Cube and Vector inside), whose rated
        clocks are not catalogued: the clock is the one its fitted rows agree on, whatever it is.
        """
        info = DeviceInfo()
        notes: list[str] = []
        self.cores_lower_bound = self.grid_bound = None
        product, fit = _product_and_tolerance(self._cat(self.product))
        mhz = np.concatenate([self._cat(self.cube_mhz), self._cat(self.vector_mhz)])
        clock = clock_mhz
        if clock is None:
            clock, note = _clock_of_coupled_rows(mhz) if coupled else _clock_from_rows(mhz)
            if note:
                notes.append(note)
        if clock is None and product is not None and not coupled:
            clock, note = _clock_from_product(product, fit)
            if note:
                notes.append(note)
        if clock is not None:
            info.aic_frequency_mhz = float(clock)
        cores = _cores_from_product(product, clock, notes) if clock else None
        if cores is None and clock is not None:
            cores = self._cores_from_grids(clock, notes, coupled)
        if cores is not None:
            info.ai_core_num = cores
            info.aiv_num = None if coupled else 2 * cores
        return info, notes

    def _cores_from_grids(self, clock: float, notes: list[str], coupled: bool = False) -> int | None:
        """The largest Block Dim among rows whose cycles give the clock (their grid fitted on the
        cores), per side; AIC >= AIV / 2. A lower bound, raised to the fewest AI Cores a catalogued
        chip rated at that clock has at or above it: the smallest count the data allows, so a grid
        the data shows fitting is never called short of cores on a guess."""

        def fitted(mhz: list[np.ndarray], blocks: list[np.ndarray]) -> int:
            m, b = self._cat(mhz), self._cat(blocks)
            ok = np.abs(m - clock) <= CLOCK_SNAP * clock
            return int(b[ok].max()) if ok.any() else 0

        cube, vector = fitted(self.cube_mhz, self.cube_blocks), fitted(self.vector_mhz, self.vector_blocks)
        bound = cube if coupled else max(cube, (vector + 1) // 2)
        if bound <= 0 or bound > 64:  # no grid bounds it, or the grid ran in waves after all
            return None
        self.grid_bound = bound
        variant = fewest_cores_at_least(bound, None if coupled else clock, coupled)
        cores = variant.aic_count if variant is not None and variant.aic_count else bound
        # more cores than the bound stay possible (a catalogued chip at the clock has more, or a
        # coupled chip, whose catalogue is thin): the count is assumed, and findings say "if"
        bigger = fewest_cores_at_least(cores + 1, clock, coupled) if not coupled else variant
        if coupled or bigger is not None:
            self.cores_lower_bound = bound
        side = (
            f"a Cube grid of {cube} blocks"
            if coupled or cube * 2 >= vector
            else f"a Vector grid of {vector} blocks"
        )
        counted = f"{cores} AI Cores" + ("" if coupled else f" ({2 * cores} Vector cores)")
        said = f"{side} ran in one wave at {clock:g} MHz, so the device has at least {bound} AI Cores"
        if self.cores_lower_bound is None:
            notes.append(
                f"{counted} inferred from the data: {said}, the most of any catalogued chip rated "
                f"{clock:g} MHz"
            )
            return cores
        if variant is not None and cores != bound:
            rated = "" if coupled else f" rated {clock:g} MHz"
            said += f"; {variant.name} has {cores}, the fewest of the catalogued chips{rated}"
        notes.append(f"{counted} assumed: {said}")
        return cores


# A row's implied clock within this fraction of a rated clock votes for it (profiler rounding of
# the side time to 0.01 µs on µs-long kernels).
CLOCK_SNAP = 0.015
# The profiler's clock x cores divided by a candidate clock must be this close to a whole number:
# six times the rows' relative spread (the utilisation's three decimals), within these bounds.
CORE_FIT_MIN, CORE_FIT_MAX = 2e-4, 5e-3


def _product_and_tolerance(values: np.ndarray) -> tuple[float | None, float]:
    """Median of the rows' clock x cores and how close to a whole core count a fit must come."""
    values = values[np.isfinite(values) & (values > 0)]
    if not len(values):
        return None, CORE_FIT_MAX
    median = float(np.median(values))
    spread = float(np.median(np.abs(values - median))) / median
    return median, min(CORE_FIT_MAX, max(CORE_FIT_MIN, 6.0 * spread))


def _rated_clocks() -> list[float]:
    return sorted(VARIANTS_BY_CLOCK)


def _clock_from_rows(mhz: np.ndarray) -> tuple[float | None, str | None]:
    """The rated clock most rows vote for (rows whose grid fitted on the cores give it exactly)."""
    mhz = mhz[np.isfinite(mhz) & (mhz >= IDLE_CLOCK_MHZ) & (mhz <= MAX_CLOCK_MHZ)]
    if not len(mhz):
        return None, None
    votes = {c: int((np.abs(mhz - c) <= CLOCK_SNAP * c).sum()) for c in _rated_clocks()}
    best = max(votes, key=lambda c: (votes[c], c == 1800.0))
    if votes[best] == 0:
        return None, None
    names = "/".join(VARIANTS_BY_CLOCK[best])
    return best, (
        f"clock {best:g} MHz (rated clock of {names}) inferred from the data: aic/aiv_total_cycles / "
        f"(blocks x side time) gives it within {100 * CLOCK_SNAP:g} % on {votes[best]} of the {len(mhz)} "
        f"kernel sides (Cube and Vector counted apart) that imply a clock between "
        f"{IDLE_CLOCK_MHZ:g} and {MAX_CLOCK_MHZ:g} MHz"
    )


def _clock_of_coupled_rows(mhz: np.ndarray) -> tuple[float | None, str | None]:
    """A coupled chip's clock from its own cycles: no catalogued rated clock to vote for, so the
    highest value the rows agree on (rows whose grid fitted on the cores give the clock; rows that
    ran in waves give a fraction of it), when at least two rows, or the only one, give it."""
    mhz = mhz[np.isfinite(mhz) & (mhz >= IDLE_CLOCK_MHZ) & (mhz <= MAX_CLOCK_MHZ)]
    if not len(mhz):
        return None, None
    top = mhz[mhz >= float(mhz.max()) * (1 - CLOCK_SNAP)]
    if len(top) < min(2, len(mhz)):
        return None, None
    clock = float(np.round(np.median(top)))
    return clock, (
        f"clock {clock:g} MHz inferred from the coupled table's own cycles: total_cycles / (blocks x "
        f"aicore_time) gives it within {100 * CLOCK_SNAP:g} % on {len(top)} of the {len(mhz)} kernels "
        "(no rated clock of a coupled chip is catalogued to compare with)"
    )


def _clock_from_product(product: float, fit: float) -> tuple[float | None, str | None]:
    """The rated clock at which the profiler's clock x cores is a whole number of cores (within `fit`)."""
    fits = []
    for clock in _rated_clocks():
        cores = product / clock
        whole = round(cores)
        if 1 <= whole <= 64:
            fits.append((abs(cores - whole) / whole, clock, whole))
    fits.sort()
    if not fits or fits[0][0] > fit:
        return None, (
            f"cube_utilization(%) implies clock x AI Cores = {product:,.0f} MHz, which gives a whole "
            "number of cores at no catalogued rated clock (1650, 1800, 1850 MHz)"
        )
    err, clock, whole = fits[0]
    runner = next((f for f in fits[1:] if f[0] <= fit), None)
    note = (
        f"clock {clock:g} MHz inferred from the data: cube_utilization(%) = cycles / (clock x AI Cores x "
        f"duration) gives clock x cores = {product:,.0f} MHz, {whole} cores at {clock:g} MHz "
        f"(off by {100 * err:.3f} %)"
    )
    if runner is not None:
        note += f"; {runner[2]} cores at {runner[1]:g} MHz fits too (off by {100 * runner[0]:.3f} %)"
    return clock, note


def _cores_from_product(product: float | None, clock: float, notes: list[str]) -> int | None:
    if product is None:
        return None
    cores = product / clock
    whole = round(cores)
    if not 1 <= whole <= 64:
        notes.append(
            f"cube_utilization(%) gives clock x cores = {product:,.0f} MHz: {cores:.1f} cores at "
            f"{clock:g} MHz is no device's core count; core count not inferred from it"
        )
        return None
    off = abs(cores - whole) / whole
    notes.append(
        f"{whole} AI Cores inferred from the data: cube_utilization(%) gives clock x cores = "
        f"{product:,.0f} MHz, {cores:.3f} cores at {clock:g} MHz"
        + (f" (off by {100 * off:.1f} %: the profiler divided by other figures)" if off > 0.01 else "")
    )
    return whole


def infer_from_kernels(
    kernels: pd.DataFrame | pa.Table, clock_mhz: float | None = None
) -> tuple[DeviceInfo, list[str]]:
    """Core count and clock from the kernel table alone, with the arithmetic as notes
    (`ChipEvidence.infer`)."""
    return ChipEvidence.of(kernels).infer(clock_mhz)


def recorded_clock(device: DeviceInfo) -> tuple[float | None, str | None]:
    """The rated clock the profile records: `msprof op` OpBasicInfo's Rated Freq, then
    `aic_frequency_mhz` (info.json's aic_frequency, a sibling run's when this run has none, or
    OpBasicInfo's Current Freq when that is all the profile has). The timeline's AI Core Freq
    counter is `timeline_clock`'s: used only where the kernels' own cycles do not give a clock, so
    the choice does not depend on whether the timeline was read before the chip was chosen (`info`
    reads it first, `analyze` reads it beside the rules)."""
    for value, source in (
        (device.rated_frequency_mhz, "OpBasicInfo Rated Freq"),
        (device.aic_frequency_mhz, device.borrowed_from or "the profile's device info"),
    ):
        if value and IDLE_CLOCK_MHZ <= value <= MAX_CLOCK_MHZ:
            return float(value), source
    return None, None


def timeline_clock(device: DeviceInfo) -> float | None:
    """The highest value of the timeline's AI Core Freq counter, when it is a plausible clock."""
    value = device.timeline_max_frequency_mhz
    return float(value) if value and IDLE_CLOCK_MHZ <= value <= MAX_CLOCK_MHZ else None


def _checked_borrowed(
    device: DeviceInfo, evidence: ChipEvidence, warnings: list[str], coupled: bool
) -> DeviceInfo:
    """Facts borrowed from a sibling run (`sibling_info_json`), kept only where this run's own data
    agrees: the clock its cycles give (if any) and the fewest cores its grids prove. Said either way."""
    if not device.borrowed_from:
        return device
    probe, _ = evidence.infer(None, coupled)
    clock, cores = device.aic_frequency_mhz, device.ai_core_num
    said = f"{cores} AI Cores / {device.aiv_num} Vector cores @ {clock:g} MHz from {device.borrowed_from}"
    data_clock, bound = probe.aic_frequency_mhz, evidence.grid_bound
    if (data_clock is not None and clock and abs(data_clock - clock) > CLOCK_SNAP * clock) or (
        bound is not None and cores is not None and bound > cores
    ):
        warnings.append(
            f"{said} not used: this run's own data disagrees ("
            + (f"its cycles give {data_clock:g} MHz" if data_clock is not None else "")
            + (f", a grid of {bound} blocks ran in one wave" if bound is not None else "")
            + ")"
        )
        return dataclasses.replace(
            device, ai_core_num=None, aiv_num=None, aic_frequency_mhz=None, borrowed_from=None
        )
    checks = [
        f"its cycles give {data_clock:g} MHz too" if data_clock is not None else None,
        f"its grids prove at least {bound} AI Cores" if bound is not None else None,
    ]
    agreed = "; ".join(c for c in checks if c) or "its data neither confirms nor contradicts it"
    warnings.append(f"{said}: this run records none ({agreed})")
    return device


def choose_chip(
    requested: str | None,
    device: DeviceInfo,
    kernels: pd.DataFrame | pa.Table | ChipEvidence,
    warnings: list[str],
    coupled: bool = False,
) -> ChipSpec:
    """The chip for a profile: --chip, else the device facts, else inference from the data
    (`kernels`: the kernel table, or the evidence gathered from it group by group). The one place
    that decides a profile's chip, core counts and clock, and which of them are assumed.

    An explicit --chip wins over inferred figures (inference is a guess) but not over measured ones
    from info.json / OpBasicInfo, which describe the device the profile really ran on. What the
    profile does not record (often the core count, sometimes the clock) is inferred from the data
    (the kernels' cycles first, then the timeline's AI Core Freq counter for the clock); every
    figure that was neither recorded nor inferred is the chip default, marked in
    `ChipSpec.assumed_figures`, and a note says so. A coupled table (`coupled`: one AI Core with
    Cube and Vector inside) gets a coupled chip, never a split 910B's figures.
    """
    evidence: ChipEvidence | None = kernels if isinstance(kernels, ChipEvidence) else None

    def gathered() -> ChipEvidence:
        nonlocal evidence
        if evidence is None:
            evidence = ChipEvidence.of(kernels)
        return evidence

    if device.borrowed_from and not requested:
        device = _checked_borrowed(device, gathered(), warnings, coupled)
    clock, clock_source = recorded_clock(device)
    exact = family_chip(device.model_name) if device.model_name else None
    if exact is not None and coupled != (not exact.split):
        exact = None  # the table's layout outweighs a family name
    if requested:
        return resolve_chip(requested, device.ai_core_num, device.aiv_num, clock, None)
    cores = device.ai_core_num
    aiv = device.aiv_num
    if clock is not None and clock_source and not device.borrowed_from:
        warnings.append(f"clock {clock:g} MHz from {clock_source}")
    raised = False  # the core count is a lower bound from the grids, raised to a catalogued one
    if exact is None and (cores is None or clock is None):
        ev = gathered()
        counter = timeline_clock(device) if clock is None else None
        if counter is not None and ev.infer(None, coupled)[0].aic_frequency_mhz is None:
            clock = counter  # the kernels' cycles do not tell
            warnings.append(
                f"clock {counter:g} MHz from the highest AI Core Freq counter value "
                "of the timeline (the kernels' cycles give none)"
            )
        inferred, notes = ev.infer(clock, coupled)
        warnings.extend(notes)
        clock = clock or inferred.aic_frequency_mhz
        if cores is None and inferred.ai_core_num:
            cores, aiv = inferred.ai_core_num, aiv or inferred.aiv_num
            raised = ev.cores_lower_bound is not None
    chip = resolve_chip(None, cores, aiv, clock, device.model_name if exact else None, coupled=coupled)
    if coupled:
        warnings.append(
            f"{chip.name}: the catalogue's coupled chip (a 910A is coupled too), not a split 910B"
        )
    figures = [
        *(("clock_mhz",) if clock is None and chip.clock_mhz else ()),
        *(("aic_count", "aiv_count") if (cores is None or raised) and chip.aic_count else ()),
    ]
    if figures:
        chip = chip.with_overrides(assumed_figures=tuple(figures))
    assumed = []
    if clock is None and chip.clock_mhz:
        assumed.append(f"clock {chip.clock_mhz:g} MHz")
    if cores is None and chip.aic_count:
        assumed.append(f"{chip.aic_count} AI Cores")
    if assumed:
        family = f" (device model {device.model_name}: variant not recorded)" if device.model_name else ""
        what = (
            "records neither"
            if len(assumed) > 1
            else f"does not record the {'clock' if clock is None else 'core count'}"
        )
        warnings.append(
            f"{' and '.join(assumed)} assumed: {chip.base_name} defaults{family}; the profile {what} "
            "and its data does not tell (use --chip)"
        )
    return chip
