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

from analyzer.chips import ChipSpec, resolve_chip
from analyzer.profile import DeviceInfo

# Example: "device_0", "device_12"
DEVICE_DIR_RE = re.compile(r"^device_(?P<n>\d{1,2})$")
# Example: "info.json.0"
INFO_JSON_RE = re.compile(r"^info\.json\.\d{1,2}$")
# Example: "profiler_info.json", "profiler_info_3.json" -> rank 3
PROFILER_INFO_RE = re.compile(r"^profiler_info(?:_(?P<rank>\d+))?\.json$")


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
    """What `infer_from_kernels` reads from each kernel row, gathered table by table.

    The inference takes medians over all rows, so a streamed file can only be concluded at its
    end; keeping the per-row inputs (a few float arrays) makes that end cheap, and the whole-table
    inference is the same code with one table.
    """

    def __init__(self) -> None:
        self.mhz: list[np.ndarray] = []
        self.cycles: list[np.ndarray] = []  # the rows usable for the core count: util > 1 %
        self.util: list[np.ndarray] = []
        self.duration: list[np.ndarray] = []
        self.has_util = False
        self.cube_dims: list[np.ndarray] = []
        self.rows = 0

    @classmethod
    def of(cls, kernels: pd.DataFrame | pa.Table) -> ChipEvidence:
        evidence = cls()
        evidence.add(kernels)
        return evidence

    def add(self, kernels: pd.DataFrame | pa.Table) -> None:
        from analyzer.metrics import KernelColumns

        cols = KernelColumns(kernels)
        needed = {"core_type", "aic_total_cycles", "aic_time_us", "block_dim"}
        if not needed.issubset(cols.names) or not cols.n:
            return
        self.rows += cols.n
        cube = cols.text_in("core_type", ["AI_CORE"])
        cycles = cols.floats("aic_total_cycles")
        block_dim = cols.floats("block_dim")
        with np.errstate(divide="ignore", invalid="ignore"):
            mhz = cycles[cube] / (block_dim[cube] * cols.floats("aic_time_us")[cube])
        self.mhz.append(mhz[np.isfinite(mhz)])
        if "cube_utilization_pct" in cols:
            util = cols.floats("cube_utilization_pct")
            self.has_util = self.has_util or not np.isnan(util).all()
            ok = (util > 1.0) & ~np.isnan(cycles)
            self.cycles.append(cycles[ok])
            self.util.append(util[ok])
            self.duration.append(cols.floats("duration_us")[ok])
        dims = block_dim[cols.text_in("core_type", ["AI_CORE", "MIX_AIC"])]
        self.cube_dims.append(dims[~np.isnan(dims)])

    def infer(self) -> tuple[DeviceInfo, list[str]]:
        """Core count and clock, with the arithmetic as notes (see `infer_from_kernels`)."""
        info = DeviceInfo()
        notes: list[str] = []
        mhz = np.concatenate(self.mhz) if self.mhz else np.empty(0)
        if len(mhz) == 0:
            return info, notes
        freq = float(np.round(np.median(mhz) / 10.0) * 10.0)
        info.aic_frequency_mhz = freq
        notes.append(
            f"clock {freq:g} MHz inferred from the data: median of aic_total_cycles / (Block Dim × "
            f"aicore_time) over {len(mhz)} AI_CORE kernels"
        )
        if self.has_util:
            cycles, util = np.concatenate(self.cycles), np.concatenate(self.util)
            with np.errstate(divide="ignore", invalid="ignore"):
                cores = cycles / (freq * (util / 100.0) * np.concatenate(self.duration))
            cores = cores[np.isfinite(cores)]
            if len(cores):
                info.ai_core_num = round(float(np.median(cores)))
                notes.append(
                    f"{info.ai_core_num} AI Cores inferred from the data: cube_utilization(%) = "
                    f"cycles / ({freq:g} MHz × cores × duration) over {len(cores)} kernels"
                )
        if info.ai_core_num is None:
            dims = np.concatenate(self.cube_dims)
            if len(dims) and int(dims.max()) > 0:
                info.ai_core_num = int(dims.max())
                notes.append(
                    f"{info.ai_core_num} AI Cores inferred from the data: the largest Block Dim of a "
                    "Cube kernel (a lower bound)"
                )
        if info.ai_core_num:
            info.aiv_num = 2 * info.ai_core_num
        return info, notes


def infer_from_kernels(kernels: pd.DataFrame | pa.Table) -> tuple[DeviceInfo, list[str]]:
    """Core count and clock from the kernel table alone, with the arithmetic as warnings.

    Clock: on AI_CORE rows `aicore_time(us)` = aic_total_cycles / (MHz × Block Dim) (formats doc
    §10.2), so MHz = cycles / (Block Dim × aic_time_us); the median over rows, rounded to 10 MHz.
    Cores: `cube_utilization(%)` = cycles / (MHz × cores × duration) × 100 (§10.1) solved for cores;
    without that column, the largest Block Dim of a Cube kernel (a lower bound).
    """
    return ChipEvidence.of(kernels).infer()


def choose_chip(
    requested: str | None,
    device: DeviceInfo,
    kernels: pd.DataFrame | pa.Table | ChipEvidence,
    warnings: list[str],
) -> ChipSpec:
    """The chip for a profile: --chip, else the device facts, else inference from the data
    (`kernels`: the kernel table, or the evidence gathered from it group by group).

    An explicit --chip wins over inferred figures (inference is a guess) but not over measured ones
    from info.json / OpBasicInfo, which describe the device the profile really ran on.
    """
    freq = device.aic_frequency_mhz or device.rated_frequency_mhz
    measured = device.ai_core_num is not None or freq is not None or device.model_name is not None
    if not requested and not measured:
        evidence = kernels if isinstance(kernels, ChipEvidence) else ChipEvidence.of(kernels)
        inferred, notes = evidence.infer()
        if inferred.ai_core_num or inferred.aic_frequency_mhz:
            warnings.extend(notes)
            return resolve_chip(
                None, inferred.ai_core_num, inferred.aiv_num, inferred.aic_frequency_mhz, None
            )
        warnings.append("no device information in the profile: chip defaults assumed (use --chip)")
    return resolve_chip(requested, device.ai_core_num, device.aiv_num, freq, device.model_name)
