"""One detected profile read into `Parts` by its format's reader (`READERS`, keyed by `Detected.format`): a
torch_npu or msprof directory (its kernel table, else its database, and its timeline: `Sources`),
an `msprof op` output, a SQLite export, a plain folder of loose files, one kernel table, one
timeline. The chip and the derived metrics come after, in `tilescope.io.load`.

Kept light at import, as `tilescope.io.load` is: pandas and the readers are imported inside the
functions that use them, so that a timeline read on a second thread overlaps their import
(`tilescope.io.prefetch`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from tilescope.errors import NoProfileFoundError
from tilescope.io.detect import MSPROF_OUT, TORCH_OUT, Detected, FolderSources
from tilescope.io.parts import (
    Parts,
    add_basic_info,
    clock_from_launches,
    ensure_contract,
    file_names,
    kernels_from_timeline,
    read_kernel_csv,
)
from tilescope.io.prefetch import read_timeline_now, start_timeline, take_timeline
from tilescope.text.words import count_text

if TYPE_CHECKING:
    from tilescope.profile import DeviceInfo


@dataclass(frozen=True)
class ReadOptions:
    """What the caller asks of a read: `lazy_timeline`, a torch_npu trace_view.json may still be
    loading when the parts come back (`Profile.defer_timeline`); `defer_csv`, a kernel table that is
    one CSV file is left for `load._build` to stream (torch_npu, msprof and a kernel CSV itself; a
    plain folder's note counts its launches, so it reads its table at once)."""

    lazy_timeline: bool = False
    defer_csv: bool = False


def _load_sqlite(p: Path) -> Parts:
    # deferred: io.sqlite and io.tables (pyarrow) only where used
    from tilescope.io.sqlite import read_sqlite
    from tilescope.io.tables import null_unused_side
    data = read_sqlite(p)
    parts = Parts(
        null_unused_side(ensure_contract(data.kernels)),
        "torch_npu" if "pytorch" in p.name else "msprof",
        list(data.files),
        data.metric_groups,
        rank=data.rank,
    )
    parts.device.model_name = data.model_name
    parts.device.cann_version = data.cann_version
    parts.rows_skipped, parts.values_out_of_range = data.rows_skipped, data.values_out_of_range
    return parts


@dataclass
class Sources:
    """Where a torch_npu or msprof directory keeps its kernel table and timeline: `tables` (one
    kernel CSV or the slices of one op_summary) and else `database`, for the loaders below and
    `load.kernel_csv_profile` alike, so that both read a directory the same way."""

    tables: list[Path]
    database: Path | None
    timelines: list[Path]


def torch_sources(root: Path) -> Sources:
    """kernel_details.csv, else the profiler database, else the op_summary slices of a PROF_* dir."""
    out = root / TORCH_OUT if (root / TORCH_OUT).is_dir() else root
    kd = out / "kernel_details.csv"
    dbs = sorted(out.glob("ascend_pytorch_profiler*.db"))
    tv = out / "trace_view.json"
    timelines = [tv] if tv.is_file() else []
    if kd.is_file():
        return Sources([kd], None, timelines)
    if dbs:
        return Sources([], dbs[0], timelines)
    return Sources(sorted(root.glob(f"PROF_*/{MSPROF_OUT}/op_summary_*.csv")), None, timelines)


def msprof_sources(root: Path) -> Sources:
    """The op_summary slices, else the msprof database; the msprof_*.json timelines."""
    out = root / MSPROF_OUT
    slices = sorted(out.glob("op_summary_*.csv")) or sorted(root.glob("device_*/summary/op_summary_*.csv"))
    dbs = sorted(root.glob("msprof_*.db"))
    timelines = sorted(out.glob("msprof_*.json")) or sorted(root.glob("device_*/timeline/msprof_*.json"))
    return Sources(slices, None if slices or not dbs else dbs[0], timelines)


def _read_torch(det: Detected, o: ReadOptions) -> Parts:
    # deferred: pandas (~0.3 s) and io.device (pyarrow) only where used
    import pandas as pd

    from tilescope.io import device as dev

    root = det.path
    parts = Parts(pd.DataFrame(), "torch_npu")
    src = torch_sources(root)
    tv = src.timelines[0] if src.timelines else None
    timeline = start_timeline(tv) if tv is not None else None
    if src.tables:
        read_kernel_csv(parts, src.tables, o.defer_csv)
    elif src.database is not None:
        parts = _load_sqlite(src.database)
    if tv is not None:  # deferred only when the kernels come from elsewhere
        take_timeline(parts, tv, timeline, o.lazy_timeline and parts.has_kernel_table)
    if not parts.has_kernel_table:
        if parts.timeline is None:
            raise NoProfileFoundError(root, "no kernel_details.csv, op_summary, database or trace_view.json")
        parts.kernels = kernels_from_timeline(parts.timeline, parts.warnings)
    rank, cann, files = dev.read_profiler_info(root)
    parts.files.extend(files)
    parts.rank = parts.rank if parts.rank is not None else rank
    parts.device.cann_version = parts.device.cann_version or cann
    add_info_json(root, parts.device, parts.files)
    return parts


def add_info_json(root: Path, device: DeviceInfo, files: list[Path]) -> None:
    """The `info.json.N` files below a torch_npu or msprof directory into `device`; an msprof
    `PROF_*` run without one takes its sibling runs' (`sibling_info_json`), which the chip
    choice keeps only where the run's own data agrees."""
    # deferred: io.device (pyarrow) only where used
    from tilescope.io import device as dev

    found = dev.find_info_json(root)
    for info in found:
        files.append(info)
        dev.merge_device(device, dev.read_info_json(info))
    if found or device.ai_core_num is not None:
        return
    sibling = sibling_info_json(root)
    if sibling is not None:
        borrowed, used = sibling
        own = device.rated_frequency_mhz or device.aic_frequency_mhz  # OpBasicInfo's, if any
        if own and borrowed.aic_frequency_mhz and abs(own - borrowed.aic_frequency_mhz) > 0.015 * own:
            return  # another device's record: this run's own clock says so (1.5 %: CLOCK_SNAP)
        files.extend(used)
        dev.merge_device(device, borrowed)
        device.borrowed_from = borrowed.borrowed_from


def sibling_info_json(run: Path) -> tuple[DeviceInfo, list[Path]] | None:
    """Device facts for an msprof `PROF_*` run that has no info.json of its own, or an `msprof op`
    `OPPROF_*` run (which never writes one), from the msprof runs beside it in the same parent
    folder (`PARENT/PROF_*/device_*/info.json.*`, one level, nothing else read): msprof and msprof
    op write one folder per collection into one output folder, so those ran on the same machine.
    Sibling `OPPROF_*` folders are no source: they hold OpBasicInfo (a clock, no core count),
    per-block CSVs and `dump/`, nothing that names the device's cores (formats doc §2.3, §9).
    Only when every such file names the same core counts and clock (else which one is this run's
    device?); None when there is none or they differ."""
    # deferred: io.device (pyarrow) and the profile model only where used
    from tilescope.io import device as dev
    from tilescope.profile import DeviceInfo

    if not run.name.startswith(("PROF_", "OPPROF_")):
        return None
    try:
        files = sorted(
            p
            for p in run.parent.glob("PROF_*/device_*/info.json.*")
            if p.parent.parent != run
            and dev.INFO_JSON_RE.match(p.name)
            and dev.DEVICE_DIR_RE.match(p.parent.name)
        )
    except OSError:
        return None
    infos = [dev.read_info_json(p) for p in files[:64]]
    facts = {(i.ai_core_num, i.aiv_num, i.aic_frequency_mhz) for i in infos}
    if len(facts) != 1 or None in next(iter(facts)):
        return None
    cores, aiv, clock = next(iter(facts))
    first = files[0]
    where = f"{first.parent.parent.name}/{first.parent.name}/{first.name}"
    more = f" and {len(files) - 1} more" if len(files) > 1 else ""
    return DeviceInfo(
        ai_core_num=cores,
        aiv_num=aiv,
        aic_frequency_mhz=clock,
        borrowed_from=f"the info.json of the run beside it ({where}{more}, same parent folder)",
    ), files[:64]


def _read_msprof(det: Detected, o: ReadOptions) -> Parts:
    # deferred: pandas (~0.3 s) only when this builds a frame
    import pandas as pd

    root = det.path
    parts = Parts(pd.DataFrame(), "msprof")
    src = msprof_sources(root)
    timelines = src.timelines
    if src.tables:
        read_kernel_csv(parts, src.tables, o.defer_csv)
    elif src.database is not None:
        parts = _load_sqlite(src.database)
    if timelines:
        if len(timelines) > 1:
            parts.warnings.append(f"{len(timelines)} timeline files; only {timelines[0].name} was read")
        parts.timeline = read_timeline_now(timelines[0], parts)
    if not parts.has_kernel_table:
        if parts.timeline is None:
            raise NoProfileFoundError(root, "no op_summary_*.csv, msprof_*.db or msprof_*.json")
        parts.kernels = kernels_from_timeline(parts.timeline, parts.warnings)
    add_info_json(root, parts.device, parts.files)
    return parts


def _read_msprof_op(det: Detected, o: ReadOptions) -> Parts:
    # deferred: io.msprof_op (pandas) only where used
    from tilescope.io.msprof_op import launch_steps, read_msprof_op, with_declared_core_types

    root = det.path
    if root.is_file():  # one OpBasicInfo file, recognised by its header: one kernel per launch
        # deferred: io.tables (pyarrow) only where used
        from tilescope.io.tables import read_small_table

        launches = read_small_table(root)
        kernels = ensure_contract(launches.copy())
        kernels["core_type"] = with_declared_core_types(kernels)
        kernels["step_id"] = launch_steps(kernels)
        parts = Parts(kernels, "msprof_op", [root], launches=launches)
    else:
        data = read_msprof_op(root)
        launches = data.launches
        parts = Parts(
            data.kernels,
            "msprof_op",
            list(data.files),
            data.metric_groups,
            blocks=data.blocks,
            launches=launches,
        )
        parts.rows_skipped, parts.values_out_of_range = data.rows_skipped, data.values_out_of_range
    clock_from_launches(parts.device, launches)
    if root.is_dir():  # msprof op records no core count: a msprof run beside it may (#26)
        add_info_json(root, parts.device, parts.files)
    return parts


def _timeline_producer(path: Path) -> str:
    return "torch_npu" if path.name == "trace_view.json" else "msprof"


def _read_folder(det: Detected, o: ReadOptions) -> Parts:
    """A plain folder of loose profiler files: kernels from its kernel table (else from its
    timeline), the timeline, the clock from OpBasicInfo; the first note says which gave what."""
    # deferred: pandas (~0.3 s) only when this builds a frame
    import pandas as pd

    src = det.sources or FolderSources()
    parts = Parts(pd.DataFrame(), None)
    said: list[str] = []
    tl_path = src.timelines[0] if src.timelines else None
    future = start_timeline(tl_path) if tl_path is not None else None
    if src.kernel_tables:
        read_kernel_csv(parts, src.kernel_tables)
        groups = ", ".join(parts.metric_groups) or "no PMU columns"
        launches = count_text(len(parts.kernels), "launch", "launches")
        said.append(f"kernels from {file_names(src.kernel_tables)} ({launches}, {groups})")
    if tl_path is not None:
        if len(src.timelines) > 1:
            parts.warnings.append(f"{len(src.timelines)} timeline files; only {tl_path.name} was read")
        take_timeline(parts, tl_path, future, o.lazy_timeline and bool(src.kernel_tables))
        said.append(f"timeline from {tl_path.name}")
    if not src.kernel_tables:
        if tl_path is None or parts.timeline is None:
            raise NoProfileFoundError(det.path, "no kernel table, and no timeline could be read")
        parts.producer = _timeline_producer(tl_path)
        parts.kernels = kernels_from_timeline(parts.timeline, parts.warnings)
        said.insert(0, f"kernels from {tl_path.name} ({len(parts.kernels)} compute tasks)")
    if src.basic_info:
        said.append(add_basic_info(parts, src.basic_info))
    parts.warnings.insert(0, "; ".join(s for s in said if s))
    return parts


def _read_sqlite(det: Detected, o: ReadOptions) -> Parts:
    return _load_sqlite(det.path)


def _read_kernel_csv(det: Detected, o: ReadOptions) -> Parts:
    # deferred: pandas (~0.3 s) only when this builds a frame
    import pandas as pd

    parts = Parts(pd.DataFrame(), None)
    read_kernel_csv(parts, det.path, o.defer_csv)
    return parts


def _read_timeline_json(det: Detected, o: ReadOptions) -> Parts:
    # deferred: pandas (~0.3 s) only when this builds a frame
    import pandas as pd

    parts = Parts(pd.DataFrame(), _timeline_producer(det.path))
    tl = read_timeline_now(det.path, parts)
    if tl is None:
        raise NoProfileFoundError(det.path, "timeline reader not available")
    parts.timeline = tl
    parts.kernels = kernels_from_timeline(tl, parts.warnings)
    return parts


# The reader of each format detection names (`Detected.format`, tilescope.io.detect): one entry a
# format, looked up once per profile. A bundle is several of these (tilescope.io.bundle).
READERS: dict[str, Callable[[Detected, ReadOptions], Parts]] = {
    "torch_npu": _read_torch,
    "msprof": _read_msprof,
    "msprof_op": _read_msprof_op,
    "msprof_op_multi": _read_msprof_op,
    "sqlite": _read_sqlite,
    "folder": _read_folder,
    "kernel_csv": _read_kernel_csv,
    "timeline_json": _read_timeline_json,
}


def load_single(det: Detected, options: ReadOptions | None = None) -> Parts:
    """The parts of one detected profile, read by its format's reader (`READERS`)."""
    reader = READERS.get(det.format)
    if reader is None:
        raise NoProfileFoundError(det.path, f"unsupported format {det.format}")
    return reader(det, options or ReadOptions())
