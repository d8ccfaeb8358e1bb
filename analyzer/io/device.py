"""Device facts (core counts, clock, model, CANN version, rank) and chip selection (formats doc §9).

Sources, strongest first: `PROF_*/device_{N}/info.json.{M}`, SQLite NPU_INFO, `msprof op`
OpBasicInfo frequencies, torch_npu `profiler_info*.json` / `profiler_metadata.json`, and as a last
resort inference from the kernel table itself (formats doc §10.1/§10.2), recorded as a warning.
"""

from __future__ import annotations

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
    catalogue_match,
    family_chip,
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

    def infer(self, clock_mhz: float | None = None) -> tuple[DeviceInfo, list[str]]:
        """Core count and clock, with the arithmetic as notes; `clock_mhz` when the profile records it.

        Clock, first that applies: `clock_mhz`; the rated clock of a catalogued chip that rows
        fitting on the cores give (cycles / (blocks x time) within 1.5 % of 1650, 1800 or 1850 MHz;
        the most common wins); the rated clock at which `cube_utilization(%)`'s clock x cores is a
        whole number of cores; nothing (the chip default is then assumed and said so).
        Cores: clock x cores / clock when the profiler's utilisation gives it; else the largest
        grid that fitted on the cores (a lower bound) raised to the catalogued variant at that clock.
        Never a clock outside [idle clock, 2000 MHz] nor a core count outside 1..64.
        """
        info = DeviceInfo()
        notes: list[str] = []
        product, fit = _product_and_tolerance(self._cat(self.product))
        mhz = np.concatenate([self._cat(self.cube_mhz), self._cat(self.vector_mhz)])
        clock = clock_mhz
        if clock is None:
            clock, note = _clock_from_rows(mhz)
            if note:
                notes.append(note)
        if clock is None and product is not None:
            clock, note = _clock_from_product(product, fit)
            if note:
                notes.append(note)
        if clock is not None:
            info.aic_frequency_mhz = float(clock)
        cores = _cores_from_product(product, clock, notes) if clock else None
        if cores is None and clock is not None:
            cores = self._cores_from_grids(clock, notes)
        if cores is not None:
            info.ai_core_num = cores
            info.aiv_num = 2 * cores
        return info, notes

    def _cores_from_grids(self, clock: float, notes: list[str]) -> int | None:
        """The largest Block Dim among rows whose cycles give the clock (their grid fitted on the
        cores), per side; AIC >= AIV / 2. A lower bound, raised to a catalogued variant's count."""
        def fitted(mhz: list[np.ndarray], blocks: list[np.ndarray]) -> int:
            m, b = self._cat(mhz), self._cat(blocks)
            ok = np.abs(m - clock) <= CLOCK_SNAP * clock
            return int(b[ok].max()) if ok.any() else 0

        cube, vector = fitted(self.cube_mhz, self.cube_blocks), fitted(self.vector_mhz, self.vector_blocks)
        bound = max(cube, (vector + 1) // 2)
        if bound <= 0 or bound > 64:  # no grid bounds it, or the grid ran in waves after all
            return None
        variant = catalogue_match(None, clock)
        cores = bound
        if variant.aic_count and variant.aic_count >= bound:
            cores = variant.aic_count
        if cores != bound:
            self.cores_lower_bound = bound
        side = (
            f"a Cube grid of {cube} blocks" if cube * 2 >= vector else f"a Vector grid of {vector} blocks"
        )
        notes.append(
            f"{cores} AI Cores ({2 * cores} Vector cores) assumed: {side} ran in one wave at {clock:g} MHz, "
            f"so the device has at least {bound} AI Cores"
            + (f"; {variant.name} (rated {clock:g} MHz) has {cores}" if cores != bound else "")
        )
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
    """The rated clock the profile records, strongest source first: `msprof op` OpBasicInfo's Rated
    Freq, then `aic_frequency_mhz` (info.json's aic_frequency, or OpBasicInfo's Current Freq when
    that is all the profile has), then the highest value of the timeline's AI Core Freq counter."""
    for value, source in (
        (device.rated_frequency_mhz, "OpBasicInfo Rated Freq"),
        (device.aic_frequency_mhz, "the profile's device info"),
        (device.timeline_max_frequency_mhz, "the highest AI Core Freq counter value of the timeline"),
    ):
        if value and IDLE_CLOCK_MHZ <= value <= MAX_CLOCK_MHZ:
            return float(value), source
    return None, None


def choose_chip(
    requested: str | None,
    device: DeviceInfo,
    kernels: pd.DataFrame | pa.Table | ChipEvidence,
    warnings: list[str],
) -> ChipSpec:
    """The chip for a profile: --chip, else the device facts, else inference from the data
    (`kernels`: the kernel table, or the evidence gathered from it group by group).

    An explicit --chip wins over inferred figures (inference is a guess) but not over measured ones
    from info.json / OpBasicInfo, which describe the device the profile really ran on. What the
    profile does not record (often the core count, sometimes the clock) is inferred from the data;
    every figure that was neither recorded nor inferred is the chip default, and a note says so.
    """
    clock, clock_source = recorded_clock(device)
    exact = family_chip(device.model_name) if device.model_name else None
    if requested:
        return resolve_chip(requested, device.ai_core_num, device.aiv_num, clock, None)
    cores = device.ai_core_num
    aiv = device.aiv_num
    if clock is not None and clock_source:
        warnings.append(f"clock {clock:g} MHz from {clock_source}")
    raised = False  # the core count is a lower bound from the grids, raised to a catalogued one
    if exact is None and (cores is None or clock is None):
        evidence = kernels if isinstance(kernels, ChipEvidence) else ChipEvidence.of(kernels)
        inferred, notes = evidence.infer(clock)
        warnings.extend(notes)
        clock = clock or inferred.aic_frequency_mhz
        if cores is None and inferred.ai_core_num:
            cores, aiv = inferred.ai_core_num, aiv or inferred.aiv_num
            raised = evidence.cores_lower_bound is not None
    chip = resolve_chip(None, cores, aiv, clock, device.model_name if exact else None)
    figures = [*(("clock_mhz",) if clock is None and chip.clock_mhz else ()),
               *(("aic_count", "aiv_count") if (cores is None or raised) and chip.aic_count else ())]
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
