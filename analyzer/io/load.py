"""Input detection and loading: any Ascend profiler output -> list[Profile] (one per rank).

Accepted (reported in `profile.source.format`):
  torch_npu        a `*_ascend_pt` dir, or its ASCEND_PROFILER_OUTPUT/
  msprof           a `PROF_*` dir, or its mindstudio_profiler_output/ (old: device_N/summary/)
  msprof_op        an `OPPROF_*` single-operator dir (OpBasicInfo + per-block metric CSVs), or one
                   OpBasicInfo.csv; msprof_op_multi for {Op}/{launch}/ layouts
  kernel_csv       a single kernel table (op_summary / kernel_details header, any file name)
  timeline_json    a single timeline (Chrome-trace JSON, any file name; kernels taken from it)
  sqlite           a single SQLite export (by its magic bytes)
  folder           a plain folder of such files, each used for what it holds: kernels from its
                   kernel table (else its timeline), the timeline, the clock from OpBasicInfo.csv
  bundle           manifest.json + profile/ (+ ir/); several metric-group runs under profile/ merge
A parent dir of several of the above (e.g. one `*_ascend_pt` per rank) gives one Profile each; one
that cannot be read is left out and reported in `LoadedProfiles.failures` (detection:
`tilescope.io.detect`).
"""

from __future__ import annotations

import contextlib
import json
import math
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tilescope.columns import metric_groups_of
from tilescope.errors import NoProfileFoundError, ProfileFormatError, TilescopeError, UsageError
from tilescope.gcpause import gc_paused
from tilescope.io.detect import MSPROF_OUT, TORCH_OUT, Detected, detect
from tilescope.io.parts import (
    Parts,
    add_basic_info,
    clock_from_launches,
    ensure_contract,
    file_names,
    kernels_from_timeline,
    read_basic_info,
    read_kernel_csv,
)
from tilescope.text.escape import terminal_text
from tilescope.text.words import count_text

# The readers, pandas and the profile model are imported inside the functions that use them:
# `load_profiles` first starts reading the timeline on a second thread (DuckDB needs neither),
# and only then pays for those imports (~0.15 s, pandas most of it) on the main thread.
if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa

    from tilescope.chips import ChipSpec
    from tilescope.profile import DeviceInfo, Profile, Timeline

__all__ = [
    "Detected",
    "LoadFailure",
    "LoadedProfiles",
    "PartialLoadError",
    "detect",
    "load_profile",
    "load_profiles",
]


# ---- loading one root --------------------------------------------------------------------------------


# Timelines whose reading `load_profiles` started before importing the readers, by path.
_PREFETCHED: dict[Path, Future[Timeline]] = {}


def _read_timeline(path: Path, parts: Parts) -> Timeline | None:
    prefetched = _PREFETCHED.pop(path, None)  # a directory holding only a trace_view.json
    if prefetched is not None:
        parts.files.append(path)
        return prefetched.result()
    try:
        from tilescope.io.timeline import read_timeline
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
        from tilescope.io.timeline import read_timeline
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
    import tilescope.io.kernel_csv
    import tilescope.io.timeline_links
    import tilescope.metrics
    import tilescope.profile  # noqa: F401


def _finish_timeline(path: Path, future: Future[Timeline] | None, parts: Parts) -> Timeline | None:
    if future is None:
        return _read_timeline(path, parts)  # reports the missing reader as a warning
    parts.files.append(path)
    return future.result()


def _take_timeline(parts: Parts, path: Path, future: Future[Timeline] | None, defer: bool) -> None:
    """The timeline into `parts`: left still being read (`pending_timeline`, resolved by the profile
    on first use) when `defer` and a read is under way, else waited for."""
    if future is not None and defer:
        parts.files.append(path)
        parts.pending_timeline = future.result
    else:
        parts.timeline = _finish_timeline(path, future, parts)


def _load_sqlite(p: Path) -> Parts:
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
    return parts


@dataclass
class _Sources:
    """Where a torch_npu or msprof directory keeps its kernel table and timeline: `tables` (one
    kernel CSV or the slices of one op_summary) and else `database`, for the loaders below and
    `kernel_csv_profile` alike, so that both read a directory the same way."""

    tables: list[Path]
    database: Path | None
    timelines: list[Path]


def _torch_sources(root: Path) -> _Sources:
    """kernel_details.csv, else the profiler database, else the op_summary slices of a PROF_* dir."""
    out = root / TORCH_OUT if (root / TORCH_OUT).is_dir() else root
    kd = out / "kernel_details.csv"
    dbs = sorted(out.glob("ascend_pytorch_profiler*.db"))
    tv = out / "trace_view.json"
    timelines = [tv] if tv.is_file() else []
    if kd.is_file():
        return _Sources([kd], None, timelines)
    if dbs:
        return _Sources([], dbs[0], timelines)
    return _Sources(sorted(root.glob(f"PROF_*/{MSPROF_OUT}/op_summary_*.csv")), None, timelines)


def _msprof_sources(root: Path) -> _Sources:
    """The op_summary slices, else the msprof database; the msprof_*.json timelines."""
    out = root / MSPROF_OUT
    slices = sorted(out.glob("op_summary_*.csv")) or sorted(root.glob("device_*/summary/op_summary_*.csv"))
    dbs = sorted(root.glob("msprof_*.db"))
    timelines = sorted(out.glob("msprof_*.json")) or sorted(root.glob("device_*/timeline/msprof_*.json"))
    return _Sources(slices, None if slices or not dbs else dbs[0], timelines)


def _load_torch(root: Path, lazy_timeline: bool = False, defer_csv: bool = False) -> Parts:
    import pandas as pd

    from tilescope.io import device as dev

    parts = Parts(pd.DataFrame(), "torch_npu")
    src = _torch_sources(root)
    tv = src.timelines[0] if src.timelines else None
    timeline = _start_timeline(tv) if tv is not None else None
    if src.tables:
        read_kernel_csv(parts, src.tables, defer_csv)
    elif src.database is not None:
        parts = _load_sqlite(src.database)
    if tv is not None:  # deferred only when the kernels come from elsewhere
        _take_timeline(parts, tv, timeline, lazy_timeline and parts.has_kernel_table)
    if not parts.has_kernel_table:
        if parts.timeline is None:
            raise NoProfileFoundError(root, "no kernel_details.csv, op_summary, database or trace_view.json")
        parts.kernels = kernels_from_timeline(parts.timeline, parts.warnings)
    rank, cann, files = dev.read_profiler_info(root)
    parts.files.extend(files)
    parts.rank = parts.rank if parts.rank is not None else rank
    parts.device.cann_version = parts.device.cann_version or cann
    _add_info_json(root, parts.device, parts.files)
    return parts


def _add_info_json(root: Path, device: DeviceInfo, files: list[Path]) -> None:
    """The `info.json.N` files below a torch_npu or msprof directory into `device`."""
    from tilescope.io import device as dev

    for info in dev.find_info_json(root):
        files.append(info)
        dev.merge_device(device, dev.read_info_json(info))


def _load_msprof(root: Path, defer_csv: bool = False) -> Parts:
    import pandas as pd

    parts = Parts(pd.DataFrame(), "msprof")
    src = _msprof_sources(root)
    timelines = src.timelines
    if src.tables:
        read_kernel_csv(parts, src.tables, defer_csv)
    elif src.database is not None:
        parts = _load_sqlite(src.database)
    if timelines:
        if len(timelines) > 1:
            parts.warnings.append(f"{len(timelines)} timeline files; only {timelines[0].name} was read")
        parts.timeline = _read_timeline(timelines[0], parts)
    if not parts.has_kernel_table:
        if parts.timeline is None:
            raise NoProfileFoundError(root, "no op_summary_*.csv, msprof_*.db or msprof_*.json")
        parts.kernels = kernels_from_timeline(parts.timeline, parts.warnings)
    _add_info_json(root, parts.device, parts.files)
    return parts


def _load_msprof_op(root: Path) -> Parts:
    from tilescope.io.msprof_op import read_msprof_op

    if root.is_file():  # one OpBasicInfo file, recognised by its header: one kernel per launch
        from tilescope.io.tables import read_small_table

        launches = read_small_table(root)
        parts = Parts(ensure_contract(launches.copy()), "msprof_op", [root], launches=launches)
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
    clock_from_launches(parts.device, launches)
    return parts


def _timeline_producer(path: Path) -> str:
    return "torch_npu" if path.name == "trace_view.json" else "msprof"


def _load_folder(det: Detected, lazy_timeline: bool = False) -> Parts:
    """A plain folder of loose profiler files: kernels from its kernel table (else from its
    timeline), the timeline, the clock from OpBasicInfo; the first note says which gave what."""
    import pandas as pd

    from tilescope.io.detect import FolderSources

    src = det.sources or FolderSources()
    parts = Parts(pd.DataFrame(), None)
    said: list[str] = []
    tl_path = src.timelines[0] if src.timelines else None
    future = _start_timeline(tl_path) if tl_path is not None else None
    if src.kernel_tables:
        read_kernel_csv(parts, src.kernel_tables)
        groups = ", ".join(parts.metric_groups) or "no PMU columns"
        launches = count_text(len(parts.kernels), "launch", "launches")
        said.append(f"kernels from {file_names(src.kernel_tables)} ({launches}, {groups})")
    if tl_path is not None:
        if len(src.timelines) > 1:
            parts.warnings.append(f"{len(src.timelines)} timeline files; only {tl_path.name} was read")
        _take_timeline(parts, tl_path, future, lazy_timeline and bool(src.kernel_tables))
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


def _load_single(det: Detected, lazy_timeline: bool = False, defer_csv: bool = False) -> Parts:
    """The parts of one detected profile; with `defer_csv` a kernel table that is one CSV file is
    left for `_build` to stream (torch_npu, msprof and a kernel CSV itself; a plain folder's note
    counts its launches, so it reads its table at once)."""
    import pandas as pd

    if det.format == "torch_npu":
        return _load_torch(det.path, lazy_timeline, defer_csv)
    if det.format == "msprof":
        return _load_msprof(det.path, defer_csv)
    if det.format in ("msprof_op", "msprof_op_multi"):
        return _load_msprof_op(det.path)
    if det.format == "sqlite":
        return _load_sqlite(det.path)
    if det.format == "folder":
        return _load_folder(det, lazy_timeline)
    if det.format == "kernel_csv":
        parts = Parts(pd.DataFrame(), None)
        read_kernel_csv(parts, det.path, defer_csv)
        return parts
    if det.format == "timeline_json":
        parts = Parts(pd.DataFrame(), _timeline_producer(det.path))
        tl = _read_timeline(det.path, parts)
        if tl is None:
            raise NoProfileFoundError(det.path, "timeline reader not available")
        parts.timeline = tl
        parts.kernels = kernels_from_timeline(tl, parts.warnings)
        return parts
    raise NoProfileFoundError(det.path, f"unsupported format {det.format}")


def _load_bundle(det: Detected) -> Parts:
    import pandas as pd

    from tilescope.io import device as dev
    from tilescope.io.merge import merge_blocks, merge_kernel_tables

    if not det.children:
        empty = ensure_contract(pd.DataFrame(index=pd.RangeIndex(0)))
        return Parts(empty, None, warnings=["bundle has no profiler output: runtime metrics are absent"])
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
            parts.coupled = parts.coupled or other.coupled
        parts.metric_groups = metric_groups_of(list(parts.kernels.columns))
    return parts


def _read_json_file(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ProfileFormatError(path, None, f"expected a JSON object ({exc})") from exc
    if not isinstance(data, dict):
        raise ProfileFormatError(path, None, f"expected a JSON object, found a JSON {type(data).__name__}")
    bad = _beyond_int64(data, ())
    if bad is not None:  # found by the fuzzer: a source_line of 2**70 printed as a location
        keys, found = bad
        raise ProfileFormatError(path, _json_path(keys), f"expected a number within 64 bits, found {found}")
    return data


def _json_path(keys: Iterable[str | int]) -> str | None:
    """`kernels[0].versions.s_ub` for the keys ("kernels", 0, "versions", "s_ub"); None for the root."""
    return "".join(f"[{k}]" if isinstance(k, int) else f".{k}" for k in keys).lstrip(".") or None


def _beyond_int64(x: Any, keys: tuple[str | int, ...]) -> tuple[tuple[str | int, ...], str] | None:
    """The keys to, and the text of, the first number no reader can take back: an integer beyond
    int64, or 1e400 (which Python's json reads as inf)."""
    if isinstance(x, dict):
        for k, v in x.items():
            found = _beyond_int64(v, (*keys, str(k)))
            if found:
                return found
    elif isinstance(x, list):
        for i, v in enumerate(x):
            found = _beyond_int64(v, (*keys, i))
            if found:
                return found
    elif isinstance(x, bool):
        return None
    elif isinstance(x, int) and not -(2**63) <= x < 2**63:
        return keys, str(x)[:40]
    elif isinstance(x, float) and not math.isfinite(x):
        return keys, repr(x)
    return None


def _read_ir(path: Path) -> dict[str, Any]:
    """A bundle's ir.json, held to its schema (analyzer/ir/schema/ir.schema.json): the TS5xx rules
    and the IR view trust its types (a buffer's versions of -1e308 became a 300-digit integer in a
    finding), so a value of the wrong type or range is refused here, naming where it is."""
    from tilescope.ir.model import ir_schema_error

    doc = _read_json_file(path)
    error = ir_schema_error(doc)
    if error is not None:
        expected = f"{error.message[:160]}; expected ir.json of schema 1.x"
        raise ProfileFormatError(path, _json_path(error.absolute_path), expected)
    return doc


def _add_launch_lines(ir: dict[str, Any], bundle: Path, manifest: dict[str, Any] | None) -> None:
    """An older ir.json has no grid line (`with T.Kernel(...)`): take it from the bundle's copy of
    the kernel (manifest `kernel.source`, collectors/bundle.py), so grid findings point at it."""
    from tilescope.ir.locate import add_launch_lines

    kernel = (manifest or {}).get("kernel")
    rel = kernel.get("source") if isinstance(kernel, dict) else None
    copy = (bundle / rel).resolve() if isinstance(rel, str) else None
    if copy is not None and not copy.is_relative_to(bundle.resolve()):
        copy = None  # a manifest naming a file outside its bundle
    add_launch_lines(ir, bundle / "ir", copy)


def _build(
    det: Detected,
    chip: str | None,
    manifest_dir: Path | None,
    lazy_timeline: bool = False,
    kernel_columns: Sequence[str] | None = None,
) -> Profile:
    from tilescope.io import device as dev
    from tilescope.io.msprof_op import per_core_times
    from tilescope.metrics import add_derived_metrics
    from tilescope.profile import Profile, SourceInfo

    defer = kernel_columns is not None
    parts = _load_bundle(det) if det.format == "bundle" else _load_single(det, lazy_timeline, defer)
    if parts.timeline is not None and parts.device.timeline_max_frequency_mhz is None:
        # a timeline still being read (`pending_timeline`) is not waited for: no value then
        from tilescope.io.timeline_facts import counter_max

        parts.device.timeline_max_frequency_mhz = counter_max(parts.timeline)
    warnings = list(parts.warnings)
    streamed = _stream_columns(parts, chip, warnings, kernel_columns) if kernel_columns is not None else None
    if streamed is not None:
        kernels, selected = streamed
    else:
        if parts.kernel_csv is not None:  # the stream gave up: the whole file, as without columns
            _read_whole_csv(parts)
        selected = dev.choose_chip(chip, parts.device, parts.kernels, warnings)
        # `msprof op` times are per block until the core count is known (io/msprof_op.py)
        per_core = per_core_times(parts.kernels, selected.aic_count, selected.aiv_count)
        kernels = add_derived_metrics(ensure_contract(per_core), selected, coupled=parts.coupled)
    source = SourceInfo(
        det.path, det.format, parts.producer, parts.files, parts.metric_groups, coupled=parts.coupled
    )
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
                profile.ir = _read_ir(bundle / "ir" / "ir.json")
                profile.source.files.append(bundle / "ir" / "ir.json")
                _add_launch_lines(profile.ir, bundle, profile.manifest)
    return profile


# Kernel columns the loader itself reads after the table is built, whatever the caller asked for:
# split_devices makes one rank of each device of an msprof run by `device_id`.
LOADER_COLUMNS: tuple[str, ...] = ("device_id",)


def _stream_columns(
    parts: Parts, chip: str | None, warnings: list[str], columns: Sequence[str]
) -> tuple[pd.DataFrame, ChipSpec] | None:
    """The deferred kernel CSV of `parts` streamed (`tilescope.io.kernel_stream`) into a table of
    only `columns` (those the file has, after the derived metrics), and the chip; None when there
    is none or the stream gives up (a bad value, a chip the first rows guessed wrong, no rows).

    The columns are the whole-file table's, value for value, as the file output of `kernels` is
    (text as a Categorical: `tables.to_frame(categories=True)`);
    the chip comes from the same device facts and the notes of its inference from all rows, so
    `warnings` gets what `choose_chip` adds on the whole table. Only a group of rows and the kept
    columns are in memory at a time (~16 of ~80 columns for `info`).
    """
    import pyarrow as pa

    from tilescope.io.kernel_stream import StreamFallback, stream_kernel_csv
    from tilescope.io.tables import to_frame

    if parts.kernel_csv is None:
        return None
    names: list[str] = []  # the whole table's columns (the metric groups are read from them)
    kept: list[pa.Table] = []

    def keep(table: pa.Table) -> pa.Table:
        if not names:
            names.extend(table.column_names)
        # each kept column copied into Arrow's pool: the group's derived columns are numpy arrays
        # in the C heap, and held to the end they left ~0.6 GB of holes there (3 M kernels) once
        # `to_frame` had converted them; copied, the next group reuses their memory. The derived
        # labels (`unit`, `sol_bound`: plain strings) are dictionary-encoded as the parsed text is
        wanted = (*columns, *LOADER_COLUMNS)
        return pa.table({c: _pooled(table.column(c)) for c in table.column_names if c in wanted})

    notes: list[str] = []
    try:
        _rows, selected = stream_kernel_csv(
            parts.kernel_csv, chip, kept.append, keep, device=parts.device, notes=notes
        )
    except StreamFallback:
        return None
    table = pa.concat_tables(kept)
    table_rows = table.num_rows
    kept.clear()
    parts.metric_groups = metric_groups_of(names)
    warnings.extend(notes)
    cols = {n: table.column(n) for n in table.column_names}
    del table
    return to_frame(cols, table_rows, categories=True), selected


def _pooled(col: pa.ChunkedArray) -> pa.Array:
    """`col` as one array in Arrow's memory pool, text dictionary-encoded."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
        return pc.dictionary_encode(col.combine_chunks())
    return pa.concat_arrays(col.chunks)


def _read_whole_csv(parts: Parts) -> None:
    """The deferred kernel CSV of `parts` read whole, as `read_kernel_csv` reads it."""
    from tilescope.io.kernel_csv import read_kernel_table

    assert parts.kernel_csv is not None
    kt = read_kernel_table(parts.kernel_csv)
    parts.kernels, parts.metric_groups = kt.kernels, kt.metric_groups
    parts.kernel_csv = None


@contextlib.contextmanager
def _progress(enabled: bool, total: int) -> Iterator[Callable[[str], None]]:
    """A rich progress bar on stderr, only when asked for and stderr is a terminal."""
    if not enabled or not sys.stderr.isatty():
        yield lambda _desc: None
        return
    from rich.console import Console
    from rich.markup import escape
    from rich.progress import Progress

    with Progress(console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task("loading", total=total)

        def step(desc: str) -> None:
            # a file or folder name: the default description column reads markup
            bar.update(task, advance=1, description=escape(terminal_text(desc)))

        yield step


@dataclass
class LoadFailure:
    """One of several profiles under a path that could not be read (the others were loaded)."""

    path: Path | str  # the profile's root (a rank's directory, a database, ...; str: a URL)
    error: TilescopeError  # ProfileFormatError or NoProfileFoundError: file, row, what was expected
    rank: int | None = None

    @property
    def label(self) -> str:
        return f"rank {self.rank}" if self.rank is not None else Path(str(self.path)).name

    def warning_line(self) -> str:
        """`tilescope: warning: <file>: row 16 (line 17): expected ... — rank 0 left out`, for
        stderr: the path and the message may quote the trace, so control characters are shown as
        escapes (`terminal_text`)."""
        return terminal_text(f"tilescope: warning: {self.error.one_line()} — {self.label} left out")


class PartialLoadError(TilescopeError):
    """Raised by a command after it wrote the output of the profiles that loaded, when others
    under the same path could not be read: exit 2, "partial: some inputs could not be read"."""

    def __init__(self, failures: list[LoadFailure], loaded: int) -> None:
        self.failures = failures
        # each named with its path, so that the one error line says which files to look at (the
        # warning lines above it carry each file's row and reason)
        named = [f"{f.label}: {f.path}" if f.rank is not None else str(f.path) for f in failures[:3]]
        labels = ", ".join(named)
        labels += ", …" if len(failures) > 3 else ""
        n, total = len(failures), len(failures) + loaded
        super().__init__(
            f"partial input: {n} of {total} profiles could not be read ({labels}); "
            f"the output covers the other {loaded}"
        )


class LoadedProfiles(list["Profile"]):
    """What `load_profiles` returns: a list of the profiles that loaded, and in `failures` the
    ones under the same path that could not be read (empty unless the path held several)."""

    def __init__(self, profiles: Iterable[Profile] = (), failures: Iterable[LoadFailure] = ()) -> None:
        super().__init__(profiles)
        self.failures: list[LoadFailure] = list(failures)


def load_profiles(
    path: str | Path,
    chip: str | None = None,
    progress: bool = False,
    lazy_timeline: bool = False,
    kernel_columns: Sequence[str] | None = None,
) -> LoadedProfiles:
    """Every profile under `path` (one per rank / profiler directory), fully parsed.

    When the path holds several profiles and some cannot be read (ProfileFormatError,
    NoProfileFoundError), the others are returned: the result's `failures` name the ones left
    out (file, row, what was expected) and every loaded profile carries a note about them. When
    none can be read, or the path holds one, its error is raised as before.

    With `lazy_timeline` a torch_npu directory's trace_view.json (or a folder's timeline beside a
    kernel table) may still be being read when this returns: `profile.timeline` waits for it, and
    raises its ProfileFormatError, on first use. The caller must use it before reporting
    (`analyze` does), or a broken timeline would go unnoticed.

    With `kernel_columns`, a profile whose kernel table is one CSV file gets a kernel table of only
    those columns, streamed from the file (`info` reads its counts and summary from ~16 columns);
    every other part of the profile is read as without them.
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
        return _load_found(p, chip, progress, lazy_timeline, kernel_columns)
    finally:
        _PREFETCHED.clear()  # a prefetched timeline that detection did not pick is dropped


def split_devices(profile: Profile) -> list[Profile]:
    """An msprof `PROF_*` run of several devices (`device_N/`, one op_summary with a Device_id
    column per device) as one profile per device, its rank the device id; any other profile as is.
    The devices share the run's timeline and device facts, each gets its own kernel rows."""
    k = profile.kernels
    if profile.source.format != "msprof" or "device_id" not in k.columns or profile.rank is not None:
        return [profile]
    ids = sorted(int(d) for d in k["device_id"].dropna().unique())
    if len(ids) < 2:
        return [profile]
    out = []
    for dev_id in ids:
        part = profile.with_kernels(k[k["device_id"] == dev_id].reset_index(drop=True))
        part.rank = dev_id
        part.warnings = [*profile.warnings, f"device {dev_id} of {len(ids)} in {profile.source.path.name}"]
        out.append(part)
    return out


def rank_of_failed(det: Detected) -> int | None:
    """The rank of a profile that failed to load, from what names it (no table is read)."""
    from tilescope.io import device as dev

    if det.rank is not None:
        return det.rank
    if det.format == "torch_npu":
        rank = dev.read_profiler_info(det.path)[0]
        return rank if rank is not None else dev.rank_from_name(det.path)
    if det.format in ("folder", "kernel_csv"):
        return dev.rank_from_name(det.path)
    if det.format == "sqlite":
        from tilescope.io.sqlite import RANK_DB_RE

        m = RANK_DB_RE.match(det.path.name)
        return int(m.group("rank")) if m else None
    return None


def manifest_dir_of(p: Path) -> Path | None:
    """A plain directory with a manifest.json next to the profiler output (sample dirs) keeps it."""
    return p if p.is_dir() and (p / "manifest.json").is_file() else None


def load_unit(
    det: Detected,
    chip: str | None,
    manifest_dir: Path | None,
    lazy_timeline: bool = False,
    kernel_columns: Sequence[str] | None = None,
) -> list[Profile]:
    """The profiles of one detected input (one per device of an msprof run of several devices),
    ranks as the input itself names them; raises its ProfileFormatError / NoProfileFoundError."""
    return split_devices(_build(det, chip, manifest_dir, lazy_timeline, kernel_columns))


def resolve_ranks(
    loaded: Sequence[tuple[int, Any]],
    failed: Sequence[tuple[int, LoadFailure]],
    path_of: Callable[[Any], Path] = lambda pr: pr.source.path,
) -> None:
    """Number the ranks of several inputs found under one path (`i` = position among them), in
    place (`loaded` holds Profiles, or anything with `.rank` whose path `path_of` gives): a rank
    named by its input stays; else the folder's name may say it (rank_3); when no
    input names one, ranks follow the position, so a left-out input keeps its number."""
    if len(loaded) + len(failed) <= 1:
        return
    from tilescope.io.device import rank_from_name

    for _, pr in loaded:  # no profiler_info_N.json: the folder's name may say it (rank_3)
        pr.rank = pr.rank if pr.rank is not None else rank_from_name(path_of(pr))
    if all(pr.rank is None for _, pr in loaded) and all(f.rank is None for _, f in failed):
        for i, pr in loaded:
            pr.rank = i
        for i, f in failed:
            f.rank = i


def _load_found(
    p: Path,
    chip: str | None,
    progress: bool,
    lazy_timeline: bool = False,
    kernel_columns: Sequence[str] | None = None,
) -> LoadedProfiles:
    found = detect(p)
    manifest_dir = manifest_dir_of(p)
    loaded: list[tuple[int, Profile]] = []
    failed: list[tuple[int, LoadFailure]] = []
    with _progress(progress, len(found)) as step:
        for i, det in enumerate(found):
            try:
                found_here = load_unit(det, chip, manifest_dir, lazy_timeline, kernel_columns)
                loaded += [(i, pr) for pr in found_here]
            except (ProfileFormatError, NoProfileFoundError) as exc:
                if len(found) == 1:
                    raise
                failed.append((i, LoadFailure(det.path, exc, rank_of_failed(det))))
            step(det.path.name)
    if not loaded:
        raise failed[0][1].error  # nothing could be read: the first error, as for a single input
    resolve_ranks(loaded, failed)
    failures = [f for _, f in failed]
    for _, pr in loaded:
        pr.warnings.extend(left_out_warnings(failures))
    return LoadedProfiles((pr for _, pr in loaded), failures)


def left_out_warnings(failures: Sequence[LoadFailure]) -> list[str]:
    """The note every loaded profile carries about the inputs under the same path left out."""
    return [f"{f.label} left out: {f.error.one_line()}" for f in failures]


@dataclass
class KernelCsv:
    """A profile whose kernels are one CSV file (`kernel_csv_profile`): the file, the profile's
    detected format, and the device facts recorded beside the file, which the chip is chosen from."""

    path: Path
    format: str  # kernel_csv, torch_npu, msprof or folder (as `Profile.source.format` says)
    device: DeviceInfo


def kernel_csv_profile(path: str | Path) -> KernelCsv | None:
    """The kernel CSV of `path` when the one profile there takes its kernels from exactly that file:
    a kernel table itself, a torch_npu `*_ascend_pt` (or msprof `PROF_*`) directory whose kernel
    table is one kernel_details.csv (one op_summary), or a plain folder of loose files with one
    kernel table. None otherwise (several profiles, op_summary slices, a database, msprof op, a
    bundle, kernels taken from a timeline): those are loaded whole by `load_profiles`.

    Of everything beside the file, the kernel table of such a profile depends only on the device
    facts that choose its chip: info.json, OpBasicInfo's clock, and the timeline's AI Core Freq
    counter when nothing else records the clock. They are read here the way the loaders read them,
    so the table streamed from the file equals `load_profiles(path)[0].kernels`; a timeline is read
    only for that counter, and nothing else is read.
    """
    found = detect(path)
    if len(found) != 1 or found[0].format not in ("kernel_csv", "torch_npu", "msprof", "folder"):
        return None
    det = found[0]
    from tilescope.profile import DeviceInfo

    device = DeviceInfo()
    if det.format == "kernel_csv":
        return KernelCsv(det.path, det.format, device)
    if det.format == "folder":
        from tilescope.io.detect import FolderSources

        folder = det.sources or FolderSources()
        src = _Sources(folder.kernel_tables, None, folder.timelines)
    else:
        src = _torch_sources(det.path) if det.format == "torch_npu" else _msprof_sources(det.path)
        _add_info_json(det.path, device, [])
    if len(src.tables) != 1:
        return None
    if det.format == "folder" and det.sources is not None and det.sources.basic_info:
        launches, _used = read_basic_info(det.sources.basic_info, [])
        if launches is not None:
            clock_from_launches(device, launches)
    if src.timelines:
        _add_timeline_clock(device, src.timelines[0])
    return KernelCsv(src.tables[0], det.format, device)


def _add_timeline_clock(device: DeviceInfo, timeline: Path) -> None:
    """The timeline's highest AI Core Freq into `device`, read only when nothing else recorded the
    clock (`device.recorded_clock` prefers those): what `_build` takes from a loaded timeline."""
    from tilescope.io import device as dev

    if dev.recorded_clock(device)[0] is not None:
        return
    try:
        from tilescope.io.timeline import read_timeline
        from tilescope.io.timeline_facts import counter_max
    except ImportError:  # no timeline reader: the loaders skip the timeline too
        return
    device.timeline_max_frequency_mhz = counter_max(read_timeline(timeline))


def load_kernels_arrow(csv_path: Path, chip: str | None = None, device: DeviceInfo | None = None) -> pa.Table:
    """The canonical kernel table with derived metrics as Arrow, for one kernel CSV file (as found
    by `kernel_csv_profile`, with the device facts it found beside the file).

    The file-output path of `tilescope kernels`: the same columns and values as
    `load_profiles(path)[0].kernels` without building a DataFrame.
    """
    from tilescope.columns import is_coupled_header
    from tilescope.io import device as dev
    from tilescope.io.kernel_csv import read_kernel_arrow
    from tilescope.io.tables import read_header
    from tilescope.metrics import add_derived_metrics_arrow
    from tilescope.profile import DeviceInfo

    table, _producer, _files = read_kernel_arrow(csv_path)
    selected = dev.choose_chip(chip, device or DeviceInfo(), table, [])
    return add_derived_metrics_arrow(table, selected, coupled=is_coupled_header(read_header(csv_path)))


def load_profile(path: str | Path, chip: str | None = None, progress: bool = False) -> Profile:
    """Exactly one profile; UsageError when the path holds several (pick one rank's directory),
    the first error when one of them cannot be read."""
    profiles = load_profiles(path, chip, progress)
    if profiles.failures:
        raise profiles.failures[0].error
    if len(profiles) != 1:
        names = ", ".join(str(pr.source.path.name) for pr in profiles[:5])
        raise UsageError(f"{path}: holds {len(profiles)} profiles ({names}); pass one of them")
    return profiles[0]
