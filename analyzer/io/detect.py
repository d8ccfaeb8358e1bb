"""Input detection: what profile(s) a path holds, by directory layout first and by content second.

The profilers' own layouts are recognised by structure (a `*_ascend_pt` or ASCEND_PROFILER_OUTPUT
dir, `PROF_*` / mindstudio_profiler_output, `OPPROF_*`, a bundle). Every other file is recognised
by what it holds, whatever its name: the first `SNIFF_BYTES` say whether it is an SQLite database
(magic bytes), a Chrome-trace timeline (a JSON array of events with "ph", or an object with
"traceEvents"), an op_summary / kernel_details table or an `msprof op` OpBasicInfo (the CSV
header). No file is read further than that to decide.

A plain folder uses every source it holds (format "folder"): one kernel table (or the slices of
one op_summary) for the kernels, a timeline, and OpBasicInfo for the clock. A folder with
OpBasicInfo and the per-block metric CSVs of `msprof op` is an `msprof op` directory; OpBasicInfo
beside a kernel table or a timeline is a clock source for them. A plain folder with nothing of its
own is searched further down: its loose files one level down (e.g. the parent of a `trace_data/`
folder), profile folders up to three levels down (`PLAIN_DEPTH`), by their layout only.

Only what detection needs is imported here at module level: `tilescope kernels FILE.csv` detects
before anything imports pandas.
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass, field
from pathlib import Path

from tilescope.columns import SPECS
from tilescope.errors import NoProfileFoundError, ProfileFormatError
from tilescope.io.msprof_op_layout import (
    find_simulator,
    has_block_metrics,
    is_msprof_op_dir,
    simulator_core_dirs,
    simulator_holding,
)

TORCH_OUT = "ASCEND_PROFILER_OUTPUT"
MSPROF_OUT = "mindstudio_profiler_output"
# Enough for the header of any kernel table (~2 KB with every PMU group) and the first events of a
# timeline (its lane metadata), small enough to sniff every file of a folder.
SNIFF_BYTES = 16 << 10
SQLITE_MAGIC = b"SQLite format 3\x00"
_UTF8_BOM = b"\xef\xbb\xbf"
_LINE_END = re.compile(rb"\r\n|\r|\n")

# Example: [{"name":"process_name","pid":1463785727,"tid":0,"ph":"M","args":{"name":"CANN"}}, ...
_TRACE_EVENT_RE = re.compile(rb'"ph"\s*:\s*"[A-Za-z]"')
# Example: {"displayTimeUnit":"ns","profilingType":"op","schemaVersion":1,"traceEvents":[
_TRACE_OBJECT_RE = re.compile(rb'"traceEvents"\s*:\s*\[')

# What an `msprof op` OpBasicInfo header has and a kernel table has not: the clock and pid columns
# (formats doc §4) and no start time (OpBasicInfo shares `Op Name` and `Task Duration(us)` with
# op_summary, so the kernel-table test alone would take it for one).
_BASIC_INFO_MARKERS = frozenset(
    s for col in ("current_freq_mhz", "rated_freq_mhz", "pid") for s in SPECS[col].sources["msprof_op"]
)
_START_COLUMNS = frozenset(s for names in SPECS["start_ns"].sources.values() for s in names)


@dataclass
class FolderSources:
    """The files of a plain folder, each used for what it holds."""

    kernel_tables: list[Path] = field(default_factory=list)  # one table, or the slices of one
    timelines: list[Path] = field(default_factory=list)
    basic_info: list[Path] = field(default_factory=list)  # msprof op OpBasicInfo
    databases: list[Path] = field(default_factory=list)


@dataclass
class Detected:
    format: str
    path: Path
    rank: int | None = None
    children: list[Detected] = field(default_factory=list)  # bundle: one per metric-group run
    sources: FolderSources | None = None  # format "folder": the files it combines


# ---- sniffing ----------------------------------------------------------------------------------------


def read_head(path: Path, size: int = SNIFF_BYTES) -> bytes | None:
    """The first `size` bytes of a file; None when it cannot be read (detection never raises)."""
    try:
        with open(path, "rb") as fh:
            return fh.read(size)
    except OSError:
        return None


def looks_like_timeline(head: bytes) -> bool:
    """A Chrome-trace timeline: a JSON array whose first events carry "ph", or an object with a
    "traceEvents" list (formats doc §5, §7). Any other JSON is not a profile."""
    text = head.removeprefix(_UTF8_BOM).lstrip()
    if text.startswith(b"["):
        return _TRACE_EVENT_RE.search(text) is not None
    if text.startswith(b"{"):
        return _TRACE_OBJECT_RE.search(text) is not None
    return False


# Header names that tell the producer apart (formats doc §3.3). `Task Start Time` without the unit
# is the name in msprof's own header mapping (`prof_header_mapping.json`), used by coupled-chip
# op_summary files; its values are µs all the same.
_TORCH_NPU_MARKERS = frozenset({"Name", "Accelerator Core", "Start Time(us)", "Duration(us)"})
_MSPROF_MARKERS = frozenset(
    {"Op Name", "Task Type", "Task Start Time(us)", "Task Start Time", "Task Duration(us)"}
)
# Example: "op_summary_20260606121516.csv", "op_summary_20260606121516_1.csv", "op_summary_slice_0.csv"
OP_SUMMARY_RE = re.compile(r"^op_summary_(?:(?P<slice>slice_)?(?P<a>\d{1,20})(?:_(?P<b>\d+))?)[^/]*\.csv$")


def detect_producer(header: list[str]) -> str | None:
    """ "torch_npu" or "msprof": who wrote a kernel table with this header; None for neither."""
    names = {h.strip() for h in header}
    if len(names & _TORCH_NPU_MARKERS) >= 2:
        return "torch_npu"
    if len(names & _MSPROF_MARKERS) >= 2:
        return "msprof"
    return None


def first_line(head: bytes) -> bytes:
    """The first line of `head`, whichever of LF, CRLF or a lone CR ends it (Arrow's CSV reader
    accepts all three, so the header must be split the same way)."""
    return _LINE_END.split(head, maxsplit=1)[0]


def csv_header(head: bytes) -> list[str] | None:
    """The first CSV record of `head`, or None for binary or empty data."""
    if not head.strip() or b"\x00" in head:
        return None
    line = first_line(head.removeprefix(_UTF8_BOM))
    # a header cut at SNIFF_BYTES may end inside a multi-byte character; its names are ASCII
    return next(csv.reader([line.decode("utf-8", errors="replace")]), None)


def is_op_basic_info_header(header: list[str]) -> bool:
    names = {h.strip() for h in header}
    return (
        {"Op Name", "Task Duration(us)"} <= names
        and bool(names & _BASIC_INFO_MARKERS)
        and not names & _START_COLUMNS
    )


def is_kernel_table_header(header: list[str]) -> bool:
    return detect_producer(header) is not None and not is_op_basic_info_header(header)


def sniff(path: Path) -> str | None:
    """What a file holds, from its first bytes only: one of "sqlite", "timeline", "op_basic_info",
    "kernel_table", or None."""
    head = read_head(path)
    if not head:
        return None
    if head.startswith(SQLITE_MAGIC):
        return "sqlite"
    if looks_like_timeline(head):
        return "timeline"
    header = csv_header(head)
    if header is None:
        return None
    if is_op_basic_info_header(header):
        return "op_basic_info"
    if is_kernel_table_header(header):
        return "kernel_table"
    return None


def _is_timeline_name(p: Path) -> bool:
    return p.name == "trace_view.json" or (p.name.startswith("msprof_") and p.suffix == ".json")


def _is_op_summary_name(p: Path) -> bool:
    return OP_SUMMARY_RE.match(p.name) is not None


def _is_kernel_table_name(p: Path) -> bool:
    return p.name == "kernel_details.csv" or _is_op_summary_name(p)


# ---- files -------------------------------------------------------------------------------------------


def _detect_file(p: Path) -> Detected | None:
    kind = sniff(p)
    # the profilers' own names decide even when the content is broken: a cut trace_view.json or
    # an unreadable kernel_details.csv then gets the reader's error, not "no profile found"
    if p.suffix.lower() == ".db" or kind == "sqlite":
        return Detected("sqlite", p)
    if kind == "timeline" or _is_timeline_name(p):
        return Detected("timeline_json", p)
    if kind == "op_basic_info":
        return Detected("msprof_op", p)
    if kind == "kernel_table" or p.suffix.lower() == ".csv":
        return Detected("kernel_csv", p)
    return None


def _classify(d: Path) -> FolderSources:
    """The profiler files directly in `d`, by content (and by the profilers' own names)."""
    src = FolderSources()
    for p in sorted(x for x in d.iterdir() if x.is_file()):
        kind = sniff(p)
        if kind == "sqlite":
            src.databases.append(p)
        elif kind == "timeline" or (kind is None and _is_timeline_name(p)):
            src.timelines.append(p)
        elif kind == "op_basic_info":
            src.basic_info.append(p)
        elif kind == "kernel_table" or (kind is None and _is_kernel_table_name(p)):
            src.kernel_tables.append(p)
    return src


def _one_table(tables: list[Path]) -> bool:
    """One kernel table, or the slices of one op_summary (read together, in slice order)."""
    return len(tables) == 1 or (bool(tables) and all(map(_is_op_summary_name, tables)))


def _from_files(d: Path, src: FolderSources) -> list[Detected]:
    combined = _one_table(src.kernel_tables) and bool(src.timelines or src.basic_info)
    if combined or (not src.kernel_tables and src.timelines and src.basic_info):
        folder = FolderSources(src.kernel_tables, src.timelines, src.basic_info)
        return [Detected("folder", d, sources=folder), *(Detected("sqlite", p) for p in src.databases)]
    # several unrelated tables: one profile each, as before (which timeline belongs to which?)
    found = [Detected("kernel_csv", p) for p in src.kernel_tables]
    found.extend(Detected("sqlite", p) for p in src.databases)
    if not found:
        found.extend(Detected("timeline_json", p) for p in src.timelines)
    if not found:
        found.extend(Detected("msprof_op", p) for p in src.basic_info)
    return found


# ---- directories -------------------------------------------------------------------------------------

# Plain folders (no profiler layout of their own) are looked through this deep below the path given:
# a profile folder (`PROF_*`, `OPPROF_*`, `*_ascend_pt`, a bundle) is found up to one level further,
# three below the path (`runs/kernel_a/v1/OPPROF_*`). Loose profiler files are sniffed only in the
# path itself and one level down.
PLAIN_DEPTH = 2
PLAIN_FOLDERS = 64


def _is_torch_root(d: Path) -> bool:
    return d.name.endswith("_ascend_pt") or (d / TORCH_OUT).is_dir()


def _is_msprof_root(d: Path) -> bool:
    if (d / MSPROF_OUT).is_dir() or any(d.glob("device_*/summary/op_summary_*.csv")):
        return True
    # A PROF_* name alone: unless the folder only gathers PROF_* runs of its own (one folder per
    # metric group, `PROF_PipeUtilization/PROF_000001_…/`), which are then the runs.
    runs_inside = any(s.name.startswith("PROF_") and s.is_dir() for s in d.iterdir())
    return d.name.startswith("PROF_") and not runs_inside


def _detect_bundle(d: Path) -> list[Detected]:
    inner: list[Detected] = []
    if (d / "profile").is_dir():
        inner = _detect_dir(d / "profile", depth=1)
        if not inner:
            groups = sorted(p for p in (d / "profile").iterdir() if p.is_dir())
            inner = [x for g in groups for x in _detect_dir(g, depth=1)]
    if not inner and not (d / "ir" / "ir.json").is_file():
        raise NoProfileFoundError(d, "bundle holds neither profiler output in profile/ nor ir/ir.json")
    # An IR-only bundle (`collect --ir-only`, `lint --out`) has no children: static analysis only.
    return [Detected("bundle", d, children=inner)]


def _detect_msprof_op(d: Path) -> list[Detected]:
    if not any(d.glob("OpBasicInfo*.csv")):  # {Op}/{launch}/ layout below an OPPROF_* dir
        return [Detected("msprof_op_multi", d)]
    if not has_block_metrics(d):
        # OpBasicInfo beside a kernel table or a timeline: a clock source for them
        src = _classify(d)
        if _one_table(src.kernel_tables) or src.timelines:
            return _from_files(d, src)
    return [Detected("msprof_op", d)]


def _detect_dir(d: Path, depth: int = 0) -> list[Detected]:
    if (d / "manifest.json").is_file() and ((d / "profile").is_dir() or (d / "ir").is_dir()):
        return _detect_bundle(d)
    if d.name == TORCH_OUT:
        return [Detected("torch_npu", d.parent if _is_torch_root(d.parent) else d)]
    if d.name == MSPROF_OUT:
        return [Detected("msprof", d.parent)]
    if _is_torch_root(d) or ((d / "kernel_details.csv").is_file() and (d / "trace_view.json").is_file()):
        return [Detected("torch_npu", d)]
    if simulator_core_dirs(d) or simulator_holding(d):
        # msprof op simulator output holds no kernel table (`tilescope lines` reads it), and its
        # summary trace.json, whose pids and tids are core and pipe names, is no kernel timeline
        return []
    if is_msprof_op_dir(d):
        return _detect_msprof_op(d)
    if _is_msprof_root(d):
        return [Detected("msprof", d)]
    subdirs = sorted(p for p in d.iterdir() if p.is_dir())
    found: list[Detected] = []
    for s in subdirs:
        if _is_torch_root(s) or s.name.startswith(("PROF_", "OPPROF_")):
            found.extend(_detect_dir(s, depth + 1))
    if (
        len(found) > 1
        and all(f.format in ("msprof_op", "msprof_op_multi") for f in found)
        and all(f.path.name.startswith("OPPROF_") for f in found)
    ):
        # msprof op run again and again into one --output: launches of one device's operators, not
        # ranks (msprof op profiles one device; its multi-device layout is inside one OPPROF_*)
        return [Detected("msprof_op_multi", d)]
    groups = _metric_group_runs(found)
    if groups is not None:
        return [Detected("msprof_groups", d, children=groups)]
    if found:
        return found
    if depth <= 1:  # loose files are sniffed here and one level down (the parent of `trace_data/`)
        found = _from_files(d, _classify(d))
        if found:
            return found
    if depth >= PLAIN_DEPTH:
        return found
    # plain folders further down (`runs/kernel_a/v1/OPPROF_*`), recognised by their layout only:
    # below the first level no file is read, hidden folders are skipped, and at most
    # PLAIN_FOLDERS sub-folders of one folder are looked into
    for s in [s for s in subdirs if not s.name.startswith(".")][:PLAIN_FOLDERS]:
        try:
            found.extend(_detect_dir(s, depth + 1))
        except NoProfileFoundError:
            continue  # e.g. an empty bundle beside the profiles: not what the user pointed at
    return found


def _metric_group_runs(found: list[Detected]) -> list[Detected] | None:
    """msprof runs side by side of which each collected a different `--aic-metrics` group: one
    device profiled once per group (msprof takes one group per run), not ranks (#26) — a
    distributed job collects the same group on every rank. Returned with a PipeUtilization run
    first (its durations and pipe times are the merged table's, io.merge), else in folder order;
    None unless every run is a single-device msprof run whose op_summary header names groups that
    no other run has. Reads one header line per run; never raises."""
    if len(found) < 2 or any(f.format != "msprof" for f in found):
        return None
    # deferred: the column names' groups only on this path
    from tilescope.columns import canonical_header, metric_groups_of

    seen: set[str] = set()
    first: list[Detected] = []
    for f in found:
        try:
            if len(list(f.path.glob("device_*"))) > 1:
                return None  # several devices in one run: those are ranks
            tables = sorted((f.path / MSPROF_OUT).glob("op_summary_*.csv")) or sorted(
                f.path.glob("device_*/summary/op_summary_*.csv"))
            head = read_head(tables[0]) if tables else None
            line = first_line(head).decode("utf-8-sig", errors="replace") if head else ""
            header = next(csv.reader([line]), []) if line else []
        except (OSError, csv.Error):
            return None
        groups = set(metric_groups_of(canonical_header(header)))
        if not groups or groups & seen:
            return None
        seen |= groups
        first.append(f) if "PipeUtilization" in groups else None
    return first + [f for f in found if f not in first]


def _per_line_hint(p: Path) -> None:
    """A visualize_data.bin, no per-kernel table: point at the command that reads it (simulator
    CSV folders are `_simulator_hint`'s)."""
    # deferred: the per-line readers (pandas) only on this error path
    from tilescope.io.line_data import find_visualize_bins

    if find_visualize_bins(p):
        raise NoProfileFoundError(p, "a visualize_data.bin holds per-line data, no kernel table: "
                                     f"`tilescope lines {p}` reads it")


# What a NoProfileFoundError says of a path that does not exist where it was looked for (a Dask
# worker that does not mount the ranks' filesystem says it too: rankwork_dask.workers_cannot_see)
PATH_MISSING = "path does not exist"


def detect(path: str | Path) -> list[Detected]:
    """What profile(s) a path holds; NoProfileFoundError when none."""
    p = Path(path)
    if not p.exists():
        raise NoProfileFoundError(p, PATH_MISSING)
    if not (p.is_file() or p.is_dir()):  # a FIFO blocked the read for ever, /dev/zero never ends
        raise ProfileFormatError(p, None, "expected a file or a folder, found a FIFO, device or socket "
                                          "(not read)")
    sim = simulator_holding(p) if p.is_file() else None
    if sim is not None:
        raise _simulator_hint(p, sim)
    if p.is_file():
        det = _detect_file(p)
        if det is None:
            _per_line_hint(p)
            raise NoProfileFoundError(p, "not a kernel table, timeline or profiler database")
        return [det]
    try:
        found = _detect_dir(p)
    except PermissionError as exc:
        raise ProfileFormatError(p, None, "cannot read directory (permission denied)") from exc
    if not found:
        sim = p if find_simulator(p) is not None else simulator_holding(p)
        if sim is not None:
            raise _simulator_hint(p, sim)
        _per_line_hint(p)
        raise NoProfileFoundError(
            p, "no kernel table (kernel_details / op_summary), timeline, OpBasicInfo, OPPROF_* or database"
        )
    return found


def _simulator_hint(p: Path, folder: Path) -> NoProfileFoundError:
    """Per-line data, no per-kernel table: another command reads it (`folder`: what it reads)."""
    what = "an msprof op simulator run holds per-line cycles, no kernel table"
    return NoProfileFoundError(p, f"{what}: `tilescope lines {folder}` reads it")
