"""Input detection and loading: any Ascend profiler output -> list[Profile] (one per rank).

Accepted (reported in `profile.source.format`):
  torch_npu        a `*_ascend_pt` dir, or its ASCEND_PROFILER_OUTPUT/
  msprof           a `PROF_*` dir, or its mindstudio_profiler_output/ (old: device_N/summary/)
  msprof_op        an `OPPROF_*` single-operator dir; msprof_op_multi for {Op}/{launch}/ layouts
  kernel_csv       a single kernel_details.csv / op_summary_*.csv
  timeline_json    a single trace_view.json / msprof_*.json (kernels taken from the timeline)
  sqlite           a single ascend_pytorch_profiler*.db / msprof_*.db
  bundle           manifest.json + profile/ (+ ir/); several metric-group runs under profile/ merge
A parent dir of several of the above (e.g. one `*_ascend_pt` per rank) gives one Profile each.
"""

from __future__ import annotations

import contextlib
import json
import sys
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from analyzer.columns import KERNEL_CONTRACT, metric_groups_of
from analyzer.errors import NoProfileFoundError, ProfileFormatError, UsageError
from analyzer.gcpause import gc_paused

# The readers, pandas and the profile model are imported inside the functions that use them:
# `load_profiles` first starts reading the timeline on a second thread (DuckDB needs neither),
# and only then pays for those imports (~0.15 s, pandas most of it) on the main thread.
if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa

    from analyzer.profile import DeviceInfo, Profile, Timeline

TORCH_OUT = "ASCEND_PROFILER_OUTPUT"
MSPROF_OUT = "mindstudio_profiler_output"
TIMELINE_CORE_TYPES = frozenset(
    {"AI_CORE", "AI_VECTOR_CORE", "MIX_AIC", "MIX_AIV", "AI_CPU", "HCCL", "DSA_SQE"}
)


def _new_device_info() -> DeviceInfo:
    from analyzer.profile import DeviceInfo

    return DeviceInfo()


@dataclass
class Detected:
    format: str
    path: Path
    rank: int | None = None
    children: list[Detected] = field(default_factory=list)  # bundle: one per metric-group run


@dataclass
class _Parts:
    """What one profile root yielded before the chip and derived metrics are applied."""

    kernels: pd.DataFrame
    producer: str | None
    files: list[Path] = field(default_factory=list)
    metric_groups: list[str] = field(default_factory=list)
    device: DeviceInfo = field(default_factory=_new_device_info)
    blocks: pd.DataFrame | None = None
    launches: pd.DataFrame | None = None
    timeline: Timeline | None = None
    rank: int | None = None
    warnings: list[str] = field(default_factory=list)
    # a timeline still being read, for the caller to resolve on first use (`lazy_timeline`)
    pending_timeline: Callable[[], Timeline | None] | None = None


# ---- detection -------------------------------------------------------------------------------------


def _is_kernel_csv(p: Path) -> bool:
    from analyzer.io.kernel_csv import OP_SUMMARY_RE, detect_producer
    from analyzer.io.tables import read_header

    if p.suffix.lower() != ".csv":
        return False
    if p.name == "kernel_details.csv" or OP_SUMMARY_RE.match(p.name):
        return True
    try:
        return detect_producer(read_header(p)) is not None
    except ProfileFormatError:
        return False


def _is_timeline(p: Path) -> bool:
    return p.name == "trace_view.json" or (p.name.startswith("msprof_") and p.suffix == ".json")


def _detect_file(p: Path) -> Detected | None:
    from analyzer.io.kernel_csv import OP_SUMMARY_RE
    from analyzer.io.sqlite import is_sqlite_file

    if p.suffix.lower() == ".db" or is_sqlite_file(p):
        return Detected("sqlite", p)
    if _is_timeline(p):
        return Detected("timeline_json", p)
    if p.name == "kernel_details.csv" or OP_SUMMARY_RE.match(p.name) or p.suffix.lower() == ".csv":
        return Detected("kernel_csv", p)
    return None


def _is_torch_root(d: Path) -> bool:
    return d.name.endswith("_ascend_pt") or (d / TORCH_OUT).is_dir()


def _is_msprof_root(d: Path) -> bool:
    return (
        d.name.startswith("PROF_")
        or (d / MSPROF_OUT).is_dir()
        or any(d.glob("device_*/summary/op_summary_*.csv"))
    )


def _detect_dir(d: Path) -> list[Detected]:
    from analyzer.io.msprof_op import is_msprof_op_dir
    from analyzer.io.sqlite import is_sqlite_file

    if (d / "manifest.json").is_file() and ((d / "profile").is_dir() or (d / "ir").is_dir()):
        inner: list[Detected] = []
        if (d / "profile").is_dir():
            inner = _detect_dir(d / "profile")
            if not inner:
                groups = sorted(p for p in (d / "profile").iterdir() if p.is_dir())
                inner = [x for g in groups for x in _detect_dir(g)]
        if not inner and not (d / "ir" / "ir.json").is_file():
            raise NoProfileFoundError(d, "bundle holds neither profiler output in profile/ nor ir/ir.json")
        # An IR-only bundle (`collect --ir-only`, `lint --out`) has no children: static analysis only.
        return [Detected("bundle", d, children=inner)]
    if d.name == TORCH_OUT:
        return [Detected("torch_npu", d.parent if _is_torch_root(d.parent) else d)]
    if d.name == MSPROF_OUT:
        return [Detected("msprof", d.parent)]
    if _is_torch_root(d) or ((d / "kernel_details.csv").is_file() and (d / "trace_view.json").is_file()):
        return [Detected("torch_npu", d)]
    if is_msprof_op_dir(d):
        single = any(d.glob("OpBasicInfo*.csv"))
        return [Detected("msprof_op" if single else "msprof_op_multi", d)]
    if _is_msprof_root(d):
        return [Detected("msprof", d)]
    subdirs = sorted(p for p in d.iterdir() if p.is_dir())
    found: list[Detected] = []
    for s in subdirs:
        if _is_torch_root(s) or s.name.startswith(("PROF_", "OPPROF_")):
            found.extend(_detect_dir(s))
    if found:
        return found
    files = sorted(p for p in d.iterdir() if p.is_file())
    for p in files:
        if _is_kernel_csv(p) or (p.suffix == ".db" and is_sqlite_file(p)):
            det = _detect_file(p)
            if det:
                found.append(det)
    if not found:
        found.extend(Detected("timeline_json", p) for p in files if _is_timeline(p))
    return found


def detect(path: str | Path) -> list[Detected]:
    """What profile(s) a path holds; NoProfileFoundError when none."""
    p = Path(path)
    if not p.exists():
        raise NoProfileFoundError(p, "path does not exist")
    if p.is_file():
        det = _detect_file(p)
        if det is None:
            raise NoProfileFoundError(p, "not a kernel table, timeline or profiler database")
        return [det]
    try:
        found = _detect_dir(p)
    except PermissionError as exc:
        raise ProfileFormatError(p, None, "cannot read directory (permission denied)") from exc
    if not found:
        raise NoProfileFoundError(p, "no kernel_details.csv, op_summary_*.csv, OPPROF_*, *.db or timeline")
    return found


# ---- loading one root --------------------------------------------------------------------------------


# Timelines whose reading `load_profiles` started before importing the readers, by path.
_PREFETCHED: dict[Path, Future[Timeline]] = {}


def _read_timeline(path: Path, parts: _Parts) -> Timeline | None:
    prefetched = _PREFETCHED.pop(path, None)  # a directory holding only a trace_view.json
    if prefetched is not None:
        parts.files.append(path)
        return prefetched.result()
    try:
        from analyzer.io.timeline import read_timeline
    except ImportError:
        parts.warnings.append(f"{path.name}: timeline reader not available; timeline skipped")
        return None
    parts.files.append(path)
    return read_timeline(path)


def _start_timeline(path: Path, before_build: Callable[[], object] | None = None) -> Future[Timeline] | None:
    """Read the timeline on a second thread while the kernel table is parsed: both readers spend
    their time in C++ (DuckDB's JSON scan, Arrow's CSV reader) with the GIL released."""
    prefetched = _PREFETCHED.pop(path, None)
    if prefetched is not None:
        return prefetched
    try:
        from analyzer.io.timeline import read_timeline
    except ImportError:
        return None
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tilescope-timeline")
    future = pool.submit(read_timeline, path, before_build)
    pool.shutdown(wait=False)
    return future


def _prefetch_timeline(p: Path, imported: threading.Event) -> None:
    """Start reading the trace_view.json of a torch_npu directory before pandas is imported.

    Only the plain layouts `_load_torch` reads (the `*_ascend_pt` root or its
    ASCEND_PROFILER_OUTPUT); `_load_torch` takes the future over. The scan runs while the main
    thread imports pandas and the readers; the frames are built once `imported` is set.
    """
    if not p.is_dir() or (p / "manifest.json").is_file():
        return
    for tv in (p / TORCH_OUT / "trace_view.json", p / "trace_view.json"):
        if tv.is_file():
            future = _start_timeline(tv, imported.wait)
            if future is not None:
                _PREFETCHED[tv] = future
            return


def _import_readers() -> None:
    """What loading imports anyway, at once: the prefetch thread builds frames only after this."""
    import analyzer.io.kernel_csv
    import analyzer.io.timeline_links
    import analyzer.metrics
    import analyzer.profile  # noqa: F401


def _finish_timeline(path: Path, future: Future[Timeline] | None, parts: _Parts) -> Timeline | None:
    if future is None:
        return _read_timeline(path, parts)  # reports the missing reader as a warning
    parts.files.append(path)
    return future.result()


def _kernels_from_timeline(tl: Timeline) -> pd.DataFrame:
    import pandas as pd

    src = tl.kernels
    k = pd.DataFrame(
        {c: src[c] for c in ("name", "start_ns", "duration_us", "stream_id", "task_id") if c in src}
    )
    if "task_type" in src:
        tt = src["task_type"].astype("str")
        k["core_type"] = tt.where(tt.isin(TIMELINE_CORE_TYPES))
    return _ensure_contract(k)


def _ensure_contract(k: pd.DataFrame) -> pd.DataFrame:
    import pandas as pd

    from analyzer.columns import dtype_of

    for col in KERNEL_CONTRACT:
        if col not in k:
            dt = dtype_of(col)
            k[col] = pd.Series(
                pd.NA if dt in ("Int64", "int64_ns") else None,
                index=k.index,
                dtype={"string": "str", "Int64": "Int64", "int64_ns": "Int64"}.get(dt, "float64"),
            )
    return k


def _kernel_csv(paths: Path | list[Path], parts_files: list[Path]) -> tuple[pd.DataFrame, str, list[str]]:
    from analyzer.io.kernel_csv import read_kernel_table

    kt = read_kernel_table(paths)
    parts_files.extend(kt.files)
    return kt.kernels, kt.producer, kt.metric_groups


def _load_sqlite(p: Path) -> _Parts:
    from analyzer.io.sqlite import read_sqlite
    from analyzer.io.tables import null_unused_side

    data = read_sqlite(p)
    parts = _Parts(
        null_unused_side(_ensure_contract(data.kernels)),
        "torch_npu" if "pytorch" in p.name else "msprof",
        list(data.files),
        data.metric_groups,
        rank=data.rank,
    )
    parts.device.model_name = data.model_name
    parts.device.cann_version = data.cann_version
    return parts


def _load_torch(root: Path, lazy_timeline: bool = False) -> _Parts:
    import pandas as pd

    from analyzer.io import device as dev

    out = root / TORCH_OUT if (root / TORCH_OUT).is_dir() else root
    parts = _Parts(pd.DataFrame(), "torch_npu")
    kd = out / "kernel_details.csv"
    dbs = sorted(out.glob("ascend_pytorch_profiler*.db"))
    slices = sorted(root.glob(f"PROF_*/{MSPROF_OUT}/op_summary_*.csv"))
    tv = out / "trace_view.json"
    timeline = _start_timeline(tv) if tv.is_file() else None
    if kd.is_file():
        parts.kernels, parts.producer, parts.metric_groups = _kernel_csv(kd, parts.files)
    elif dbs:
        parts = _load_sqlite(dbs[0])
    elif slices:
        parts.kernels, parts.producer, parts.metric_groups = _kernel_csv(slices, parts.files)
    if timeline is not None and lazy_timeline and len(parts.kernels.columns):
        parts.files.append(tv)  # still being read: the profile resolves it on first use
        parts.pending_timeline = timeline.result
    elif timeline is not None:
        parts.timeline = _finish_timeline(tv, timeline, parts)
    if not len(parts.kernels.columns):
        if parts.timeline is None:
            raise NoProfileFoundError(root, "no kernel_details.csv, op_summary, database or trace_view.json")
        parts.kernels = _kernels_from_timeline(parts.timeline)
    rank, cann, files = dev.read_profiler_info(root)
    parts.files.extend(files)
    parts.rank = parts.rank if parts.rank is not None else rank
    parts.device.cann_version = parts.device.cann_version or cann
    _add_info_json(root, parts)
    return parts


def _add_info_json(root: Path, parts: _Parts) -> None:
    from analyzer.io import device as dev

    for info in dev.find_info_json(root):
        parts.files.append(info)
        dev.merge_device(parts.device, dev.read_info_json(info))


def _load_msprof(root: Path) -> _Parts:
    import pandas as pd

    parts = _Parts(pd.DataFrame(), "msprof")
    out = root / MSPROF_OUT
    slices = sorted(out.glob("op_summary_*.csv")) or sorted(root.glob("device_*/summary/op_summary_*.csv"))
    dbs = sorted(root.glob("msprof_*.db"))
    timelines = sorted(out.glob("msprof_*.json")) or sorted(root.glob("device_*/timeline/msprof_*.json"))
    if slices:
        parts.kernels, parts.producer, parts.metric_groups = _kernel_csv(slices, parts.files)
    elif dbs:
        parts = _load_sqlite(dbs[0])
    if timelines:
        if len(timelines) > 1:
            parts.warnings.append(f"{len(timelines)} timeline files; only {timelines[0].name} was read")
        parts.timeline = _read_timeline(timelines[0], parts)
    if not len(parts.kernels.columns):
        if parts.timeline is None:
            raise NoProfileFoundError(root, "no op_summary_*.csv, msprof_*.db or msprof_*.json")
        parts.kernels = _kernels_from_timeline(parts.timeline)
    _add_info_json(root, parts)
    return parts


def _load_msprof_op(root: Path) -> _Parts:
    import pandas as pd

    from analyzer.io.msprof_op import read_msprof_op

    data = read_msprof_op(root)
    parts = _Parts(
        data.kernels,
        "msprof_op",
        list(data.files),
        data.metric_groups,
        blocks=data.blocks,
        launches=data.launches,
    )
    la = data.launches
    if len(la):
        first = la.iloc[0]
        for col, attr in (
            ("current_freq_mhz", "aic_frequency_mhz"),
            ("rated_freq_mhz", "rated_frequency_mhz"),
        ):
            if col in la and pd.notna(first[col]):
                setattr(parts.device, attr, float(first[col]))
        if "device_id" in la and pd.notna(first["device_id"]):
            parts.device.device_id = int(first["device_id"])
    return parts


def _load_single(det: Detected, lazy_timeline: bool = False) -> _Parts:
    import pandas as pd

    if det.format == "torch_npu":
        return _load_torch(det.path, lazy_timeline)
    if det.format == "msprof":
        return _load_msprof(det.path)
    if det.format in ("msprof_op", "msprof_op_multi"):
        return _load_msprof_op(det.path)
    if det.format == "sqlite":
        return _load_sqlite(det.path)
    if det.format == "kernel_csv":
        parts = _Parts(pd.DataFrame(), None)
        parts.kernels, parts.producer, parts.metric_groups = _kernel_csv(det.path, parts.files)
        return parts
    if det.format == "timeline_json":
        parts = _Parts(pd.DataFrame(), "torch_npu" if det.path.name == "trace_view.json" else "msprof")
        tl = _read_timeline(det.path, parts)
        if tl is None:
            raise NoProfileFoundError(det.path, "timeline reader not available")
        parts.timeline = tl
        parts.kernels = _kernels_from_timeline(tl)
        return parts
    raise NoProfileFoundError(det.path, f"unsupported format {det.format}")


def _load_bundle(det: Detected) -> _Parts:
    import pandas as pd

    from analyzer.io import device as dev
    from analyzer.io.merge import merge_blocks, merge_kernel_tables

    if not det.children:
        empty = _ensure_contract(pd.DataFrame(index=pd.RangeIndex(0)))
        return _Parts(empty, None, warnings=["bundle has no profiler output: runtime metrics are absent"])
    loaded = [_load_single(c) for c in det.children]
    parts = loaded[0]
    if len(loaded) > 1:
        parts.kernels, notes = merge_kernel_tables([p.kernels for p in loaded])
        parts.warnings.extend(notes)
        blocks = [p.blocks for p in loaded if p.blocks is not None]
        parts.blocks = merge_blocks(blocks) if blocks else None
        for other in loaded[1:]:
            parts.files.extend(other.files)
            parts.warnings.extend(other.warnings)
            dev.merge_device(parts.device, other.device)
            parts.timeline = parts.timeline or other.timeline
            parts.launches = parts.launches if parts.launches is not None else other.launches
        parts.metric_groups = metric_groups_of(list(parts.kernels.columns))
    return parts


def _read_json_file(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ProfileFormatError(path, None, f"expected a JSON object ({exc})") from exc
    return data if isinstance(data, dict) else None


def _build(
    det: Detected, chip: str | None, manifest_dir: Path | None, lazy_timeline: bool = False
) -> Profile:
    from analyzer.io import device as dev
    from analyzer.metrics import add_derived_metrics
    from analyzer.profile import Profile, SourceInfo

    parts = _load_bundle(det) if det.format == "bundle" else _load_single(det, lazy_timeline)
    warnings = list(parts.warnings)
    selected = dev.choose_chip(chip, parts.device, parts.kernels, warnings)
    kernels = add_derived_metrics(_ensure_contract(parts.kernels), selected)
    source = SourceInfo(det.path, det.format, parts.producer, parts.files, parts.metric_groups)
    profile = Profile(
        source=source,
        kernels=kernels,
        chip=selected,
        device=parts.device,
        blocks=parts.blocks,
        launches=parts.launches,
        timeline=parts.timeline,
        rank=parts.rank if det.rank is None else det.rank,
        warnings=warnings,
    )
    if parts.pending_timeline is not None:
        profile.defer_timeline(parts.pending_timeline)
    bundle = det.path if det.format == "bundle" else manifest_dir
    if bundle is not None:
        if (bundle / "manifest.json").is_file():
            profile.manifest = _read_json_file(bundle / "manifest.json")
            profile.source.files.append(bundle / "manifest.json")
        if (bundle / "ir").is_dir():
            profile.ir_dir = bundle / "ir"
            if (bundle / "ir" / "ir.json").is_file():
                profile.ir = _read_json_file(bundle / "ir" / "ir.json")
                profile.source.files.append(bundle / "ir" / "ir.json")
    return profile


@contextlib.contextmanager
def _progress(enabled: bool, total: int) -> Iterator[Callable[[str], None]]:
    """A rich progress bar on stderr, only when asked for and stderr is a terminal."""
    if not enabled or not sys.stderr.isatty():
        yield lambda _desc: None
        return
    from rich.console import Console
    from rich.progress import Progress

    with Progress(console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task("loading", total=total)

        def step(desc: str) -> None:
            bar.update(task, advance=1, description=desc)

        yield step


def load_profiles(
    path: str | Path, chip: str | None = None, progress: bool = False, lazy_timeline: bool = False
) -> list[Profile]:
    """Every profile under `path` (one per rank / profiler directory), fully parsed.

    With `lazy_timeline` a torch_npu directory's trace_view.json may still be being read when this
    returns (its kernels come from kernel_details.csv or a database): `profile.timeline` waits for
    it, and raises its ProfileFormatError, on first use. The caller must use it before reporting
    (`analyze` does), or a broken timeline would go unnoticed.
    """
    p = Path(path)
    imported = threading.Event()
    # Importing the readers creates ~100,000 objects: without a pause their allocation triggers
    # full collections over everything loaded so far (~0.03 s of ~0.17 s).
    try:
        with gc_paused():
            _prefetch_timeline(p, imported)
            _import_readers()
    finally:
        imported.set()
    try:
        return _load_found(p, chip, progress, lazy_timeline)
    finally:
        _PREFETCHED.clear()  # a prefetched timeline that detection did not pick is dropped


def _load_found(p: Path, chip: str | None, progress: bool, lazy_timeline: bool = False) -> list[Profile]:
    found = detect(p)
    # a plain directory with a manifest.json next to the profiler output (sample dirs) keeps it
    manifest_dir = p if p.is_dir() and (p / "manifest.json").is_file() else None
    profiles: list[Profile] = []
    with _progress(progress, len(found)) as step:
        for det in found:
            profiles.append(_build(det, chip, manifest_dir, lazy_timeline))
            step(det.path.name)
    ranks = [pr.rank for pr in profiles]
    if len(profiles) > 1 and all(r is None for r in ranks):
        for i, pr in enumerate(profiles):
            pr.rank = i
    return profiles


def single_kernel_csv(path: str | Path) -> Path | None:
    """The file, when `path` is exactly one kernel CSV (kernel_details.csv / op_summary_*.csv)."""
    found = detect(path)
    if len(found) != 1 or found[0].format != "kernel_csv":
        return None
    return found[0].path


def load_kernels_arrow(csv_path: Path, chip: str | None = None) -> pa.Table:
    """The canonical kernel table with derived metrics as Arrow, for one kernel CSV file (as found
    by `single_kernel_csv`).

    The file-output path of `tilescope kernels`: the same columns and values as
    `load_profiles(csv_path)[0].kernels` without building a DataFrame.
    """
    from analyzer.io import device as dev
    from analyzer.io.kernel_csv import read_kernel_arrow
    from analyzer.metrics import add_derived_metrics_arrow
    from analyzer.profile import DeviceInfo

    table, _producer, _files = read_kernel_arrow(csv_path)
    selected = dev.choose_chip(chip, DeviceInfo(), table, [])
    return add_derived_metrics_arrow(table, selected)


def load_profile(path: str | Path, chip: str | None = None, progress: bool = False) -> Profile:
    """Exactly one profile; UsageError when the path holds several (pick one rank's directory)."""
    profiles = load_profiles(path, chip, progress)
    if len(profiles) != 1:
        names = ", ".join(str(pr.source.path.name) for pr in profiles[:5])
        raise UsageError(f"{path}: holds {len(profiles)} profiles ({names}); pass one of them")
    return profiles[0]
