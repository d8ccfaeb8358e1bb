"""Read Chrome-trace timelines (torch_npu `trace_view.json`, msprof `msprof_*.json`) into a `Timeline`.

Spec: ../shared/docs/ascend-profiler-formats.md §7; measured design: ../shared/docs/timeline-ingest.md.

One DuckDB `read_json` scan with explicit columns streams Arrow record batches; each batch is split
into X / flow / counter / metadata rows as it arrives, so the only whole-file state is compact
column data (dictionary-encoded strings, int64 times), never the JSON text or Python objects.
Lanes are classified only after the scan because the lane metadata (`process_name`) sits in the
middle of real files. Links (flow pairs, flow end → kernel) are joins on the small flow table; the
flow start → enclosing host op lookup is a sort-based sweep (`timeline_links`).

Choices worth knowing:
- `ts` is declared DECIMAL(38,3): DuckDB then converts the JSON *text* of the value, so both the
  usual string ts ("1704161511422904.204") and a numeric ts give exact int64 ns. (Declared VARCHAR
  or DOUBLE, a numeric ts goes through a double and loses digits.) Digits past the ns are rounded.
- `id` is VARCHAR: flow ids are integers in some flows and strings in others.
- `args` is JSON, decoded only where needed: a fixed struct of the kernel keys for X events, the
  raw text for counters (their keys vary: "MHz", "Value", ...), `args.name` for metadata. Keys we
  do not read (e.g. `Call stack`) never leave DuckDB's per-chunk buffers.
- SQE lanes are not skipped (msprof-analyze drops a (pid, tid) lane after an `args.name` ending in
  `_SQE`); none of our real samples has one, so they stay in `Timeline.kernels` with their
  `task_type`. That table keeps every hardware task, runtime tasks too; which of them are kernels
  (for a profile that has no kernel table) is `kernel_tasks`, at the end of this module.
- Only `X`, `s`/`f`, `C` and `M` events are read; `B`/`E`, instant and async events are ignored
  (Ascend profilers do not write them). Unpaired flow ends are dropped.
- An empty array, or an object without "traceEvents", is a ProfileFormatError, not empty tables.
- The object form {"traceEvents": [...]} (the msprof op simulator's trace.json, and any other keys
  before or after the list) is streamed like the bare array: DuckDB reads the byte range of the
  list through a window onto the file (see "the object form" below), same time and memory.

Tables beyond the `Timeline` contract: `flows` also has name, end_ns and the start/end pid/tid;
`host_ops.lane` is NaN for a pid without process_name metadata. The `Overlap Analysis` lane is
left out of host_ops and not returned (Timeline has no field for it yet).
"""

from __future__ import annotations

import mmap
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

import duckdb
import numpy as np
import pyarrow as pa

from tilescope.errors import MissingComponentError, ProfileFormatError
from tilescope.interrupt import hold_point
from tilescope.io.native import native_name
from tilescope.io.validate import check_frame
from tilescope.scratch import scratch_dir

# pandas (and the modules that import it) are imported where the frames are built, after the
# scan: `load_profiles` starts the scan on a second thread before the main thread imports pandas.
# pyarrow.compute (which pandas imports too) waits for the first batch, msgspec for an error.
if TYPE_CHECKING:
    import pandas as pd

    from tilescope.profile import Timeline

DuckConfig = dict[str, str | bool | int | float | list[str]]
EXPECTED = "expected a Chrome-trace JSON array of events (trace_view.json / msprof_*.json)"
HARDWARE_LANE = "Ascend Hardware"
OVERLAP_LANE = "Overlap Analysis"
BATCH_ROWS = 1 << 19
# Two threads and 1 GB: the machine is shared and the peak-RSS budget is 1.5 GB for a 1 GB file.
DUCKDB_CONFIG: DuckConfig = {"threads": 2, "memory_limit": "1GB"}
MAX_OBJECT_BYTES = 16 << 20  # DuckDB default; its read buffers scale with it (peak RSS)

_EVENT_COLUMNS = (
    "{'ph': 'VARCHAR', 'name': 'VARCHAR', 'cat': 'VARCHAR', 'pid': 'BIGINT', 'tid': 'BIGINT', "
    "'ts': 'DECIMAL(38,3)', 'dur': 'DOUBLE', 'id': 'VARCHAR', 'args': 'JSON'}"
)
_KERNEL_ARGS = (
    '{"Stream Id": "BIGINT", "Physic Stream Id": "BIGINT", "Task Id": "BIGINT", '
    '"Task Type": "VARCHAR", "connection_id": "BIGINT"}'
)
_PROJECTION = f"""
SELECT ph, name, cat, pid, tid, CAST(ts * 1000 AS BIGINT) AS ts_ns, dur, id,
       k."Stream Id" AS stream_id, k."Physic Stream Id" AS physic_stream_id, k."Task Id" AS task_id,
       k."Task Type" AS task_type, k.connection_id AS connection_id,
       CASE WHEN ph = 'C' THEN CAST(args AS VARCHAR) END AS counter_args,
       CASE WHEN ph = 'M' THEN args->>'name' END AS meta_name
FROM (SELECT *, CASE WHEN ph = 'X' THEN json_transform(args, '{_KERNEL_ARGS}') END AS k FROM __SOURCE__)
"""

# Example: Malformed JSON in file "/t/trace_view.json", at byte 60 in record/value 2: unexpected end of data.
_MALFORMED = re.compile(r"at byte (\d+) in record/value \d+: ([^\n]*)")
# Example: JSON is malformed: invalid character (byte 27)
_MSGSPEC_BYTE = re.compile(r"\(byte (\d+)\)")
# Example: JSON transform error in file "e.json", in record/value 4: Expected OBJECT, but got UBIGINT: 5
_TRANSFORM = re.compile(r"in record/value (\d+): ([^\n]*)")
# Example: Stream 212
_STREAM_THREAD = r"^Stream (?P<stream>\d+)$"

_X_COLS = ["name", "cat", "pid", "tid", "ts_ns", "dur", "stream_id", "physic_stream_id", "task_id",
           "task_type", "connection_id"]
_FLOW_COLS = ["ph", "cat", "id", "name", "pid", "tid", "ts_ns", "seq"]
_DICT_COLS = {"name", "cat", "task_type"}


def read_timeline(path: str | Path, before_build: Callable[[], object] | None = None) -> Timeline:
    """Read a torch_npu trace_view.json or msprof msprof_*.json timeline (bare array or
    `{"traceEvents": [...]}`) into a `Timeline` with exact int64 ns times.

    `before_build` is called between the scan (DuckDB and Arrow only) and the building of the
    pandas frames: the loader's prefetch thread waits there until the main thread has imported
    the profile modules, so that the two threads never import them at once.

    Raises ProfileFormatError (file, byte offset when known) for empty, truncated, binary or
    non-array input.
    """
    path = Path(path)
    # registered: removed even when the process ends with os._exit while this thread still reads
    with scratch_dir("tilescope-duckdb-") as tmp:
        hold_point("timeline")
        config: DuckConfig = {**DUCKDB_CONFIG, "temp_directory": str(tmp)}
        # The file stays open for the scan: DuckDB reads this very handle (`_scan_name`).
        with _open_trace(path) as fh:
            source = _source_clause(path, fh)
            # Closing the scan's connection hands its buffers back before the joins allocate
            # theirs; with one connection the two peaks add up (+0.5 GB on a 1 GB file).
            with duckdb.connect(config=config) as con:
                parts = _scan_source(con, path, source, fh)
        pa.default_memory_pool().release_unused()
        if before_build is not None:
            before_build()
        return _build(config, path, parts)


def _sql_str(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


# DuckDB's glob syntax: `*`, `?`, `[...]` (and `**`); a bracket holding one character matches it.
_GLOB_CHARS = re.compile(r"([*?\[])")


def _unreadable(path: Path, exc: OSError) -> ProfileFormatError:
    return ProfileFormatError(path, None, f"{EXPECTED}; cannot read it ({exc.strerror})")


def _open_trace(path: Path) -> BinaryIO:
    try:
        return open(path, "rb")
    except OSError as exc:
        raise _unreadable(path, exc) from None


def _scan_name(path: Path, fh: BinaryIO) -> str:
    """What read_json opens: the open file (`native_name`), never the path as a glob."""
    return native_name(path, fh, escape=lambda name: _GLOB_CHARS.sub(r"[\1]", name))


def _source_clause(path: Path, fh: BinaryIO) -> str:
    """The read_json source for this file; rejects what is plainly not a JSON array or object."""
    try:
        size = os.fstat(fh.fileno()).st_size
        head = fh.read(4096)
    except OSError as exc:
        raise _unreadable(path, exc) from None
    if size == 0:
        raise ProfileFormatError(path, None, f"{EXPECTED}; the file is empty")
    stripped = head.removeprefix(b"\xef\xbb\xbf").lstrip(b" \t\r\n")
    offset = len(head) - len(stripped)
    if not stripped:
        if size <= len(head):
            raise ProfileFormatError(path, None, f"{EXPECTED}; the file holds only whitespace")
        raise ProfileFormatError(path, f"byte {offset}", f"{EXPECTED}; found a long run of whitespace")
    first = stripped[:1]
    if first == b"[":
        return _array_read(_sql_str(_scan_name(path, fh)))
    if first == b"{":
        return _object_source(path, fh, size, offset)
    shown = repr(first.decode("latin-1"))
    raise ProfileFormatError(path, f"byte {offset}", f"{EXPECTED}; found {shown}")


def _array_read(quoted: str) -> str:
    """read_json of a JSON array of events at `quoted` (an SQL string: a path or a window URL)."""
    # compression='none': the content decides how it is read, not the name (it was sniffed)
    return (f"read_json({quoted}, format='array', compression='none', columns={_EVENT_COLUMNS}, "
            f"maximum_object_size={MAX_OBJECT_BYTES})")


# ---- the {"traceEvents": [...]} object form ---------------------------------------------------------
#
# DuckDB streams a JSON array but materialises any other top-level value (format='unstructured'
# allocated the whole object: "failed to allocate" above ~100 MB). So the object form is read as
# the array form: the byte range of its traceEvents array is found, and DuckDB reads that range
# through a registered read-only filesystem (`_window_fs`) as if it were a file of its own.
#
# Start: the keys before "traceEvents" are parsed from the head of the file (the array is usually
# the first key; Python's json skips the others). End: the array's `]` is the last `]` of the file
# that the rest of the file closes as a valid object (`, "k": v, ...}`); those keys are few.
# When that guess is wrong (a later key holds a `]` followed by valid JSON), the window is not one
# JSON array and DuckDB's scan fails; the exact window then comes from msgspec's validating pass
# over the whole file (`_exact_window`), which also places the error of a broken file.

WINDOW_PROTOCOL = "tilescope-window"
TRACE_EVENTS = "traceEvents"
_HEAD_BYTES = 1 << 20  # keys before traceEvents parsed from at most this much of the file
_TAIL_BYTES = 1 << 20  # keys after it: the `]` is looked for in at most this much of the end
_TAIL_TRIES = 64  # `]` candidates tried from the end
_JSON_WS = b" \t\r\n"
# Example: tilescope-window://81-524436561/%2Ftmp%2Fp%2Ftrace.json
_WINDOW_URL = re.compile(WINDOW_PROTOCOL + r"://(\d+)-(\d+)/([^/'\"\s]+)")


def _object_source(path: Path, fh: BinaryIO, size: int, first: int) -> str:
    """read_json of the traceEvents array of an object-form file (`first`: offset of its `{`);
    every read is of the open file `fh`, as for the bare array."""
    start = _events_start(fh, first)
    end = _events_end(fh, size, start) if start is not None else None
    if start is None or end is None:
        start, end = _exact_window(path, fh)
    return _array_read(_sql_str(window_url(path, fh, start, end)))


def window_url(path: Path, fh: BinaryIO, start: int, end: int) -> str:
    """The URL `_window_fs` serves as bytes [start, end) of the open file `fh` (`native_name`: its
    /dev/fd name, never the path, so that no name is interpreted and a non-UTF-8 one is no error;
    percent-encoded: no glob characters)."""
    from urllib.parse import quote

    return f"{WINDOW_PROTOCOL}://{start}-{end}/{quote(native_name(path, fh), safe='')}"


def _events_start(fh: BinaryIO, first: int) -> int | None:
    """Offset of the `[` that opens the top-level "traceEvents" value, from the keys before it;
    None when they do not parse within the head (a long or broken value: `_exact_window` decides)."""
    import json

    # latin-1: one character per byte, so string positions are file offsets; the structure
    # (all ASCII) and the keys we compare with (ASCII) survive any UTF-8 inside the strings
    head = os.pread(fh.fileno(), _HEAD_BYTES, 0).decode("latin-1")
    decoder = json.JSONDecoder()

    def skip_ws(i: int) -> int:
        while i < len(head) and head[i] in " \t\r\n":
            i += 1
        return i

    pos = skip_ws(first + 1)
    try:
        while pos < len(head) and head[pos] == '"':
            key, pos = json.decoder.scanstring(head, pos + 1)  # type: ignore[attr-defined]
            pos = skip_ws(pos)
            if head[pos : pos + 1] != ":":
                return None
            pos = skip_ws(pos + 1)
            if key == TRACE_EVENTS:
                return pos if head[pos : pos + 1] == "[" else None
            _value, pos = decoder.raw_decode(head, pos)
            pos = skip_ws(pos)
            if head[pos : pos + 1] != ",":
                return None
            pos = skip_ws(pos + 1)
    except (ValueError, RecursionError):  # a broken or absurdly nested value: msgspec will say
        return None
    return None


def _events_end(fh: BinaryIO, size: int, start: int) -> int | None:
    """End (exclusive) of the traceEvents array: the last `]` after which the file closes the
    top-level object validly; None when none does within the tail."""
    import msgspec

    at = max(start + 1, size - _TAIL_BYTES)
    tail = os.pread(fh.fileno(), size - at, at)
    p = len(tail)
    for _ in range(_TAIL_TRIES):
        p = tail.rfind(b"]", 0, p)
        if p < 0:
            return None
        rest = tail[p + 1 :].strip(_JSON_WS)
        if rest == b"}":
            return at + p + 1
        if rest.startswith(b","):
            try:
                msgspec.json.decode(b"{" + rest[1:], type=dict[str, msgspec.Raw])
            except msgspec.DecodeError:
                continue
            return at + p + 1
    return None


def _exact_window(path: Path, fh: BinaryIO) -> tuple[int, int]:
    """[start, end) of the traceEvents array by a validating pass over the whole file (msgspec:
    values are skipped in place, never decoded); ProfileFormatError naming the byte of a syntax
    error, a missing "traceEvents" key or a non-list value."""
    import msgspec

    with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as data:
        try:
            top = msgspec.json.decode(data, type=dict[str, msgspec.Raw])
        except (msgspec.DecodeError, RecursionError) as exc:
            raise _msgspec_error(path, exc, len(data)) from None
        raw = top.pop(TRACE_EVENTS, None)
        del top
        if raw is None:
            raise ProfileFormatError(path, None, f"{EXPECTED}; found no events (an object without a "
                                                 f"\"{TRACE_EVENTS}\" list)")
        # msgspec.Raw is a view into `data`: its address gives the offset
        view = np.frombuffer(raw, np.uint8)
        start = int(view.ctypes.data - np.frombuffer(data, np.uint8).ctypes.data)
        end, opening = start + len(view), bytes(view[:1])
        del view, raw
    if opening != b"[":
        raise ProfileFormatError(path, f"byte {start}", f"{EXPECTED}; \"{TRACE_EVENTS}\" is not a list")
    return start, end


def _msgspec_error(path: Path, exc: Exception, size: int) -> ProfileFormatError:
    """msgspec's syntax error as one line with its file offset, worded as DuckDB's."""
    if isinstance(exc, RecursionError):
        return ProfileFormatError(path, None, f"{EXPECTED}; malformed JSON: values nested too deeply")
    offset = _msgspec_offset(exc, size)
    reason = "unexpected end of data" if offset == size else _MSGSPEC_BYTE.sub("", str(exc))
    reason = reason.replace("JSON is malformed: ", "").strip().rstrip(".")
    where = f"byte {offset}" if offset is not None else None
    return ProfileFormatError(path, where, f"{EXPECTED}; malformed JSON: {reason}")


class _Window:
    """Bytes [start, end) of a file as a read-only, seekable binary file."""

    def __init__(self, path: str, start: int, end: int) -> None:
        self._fh = open(path, "rb", buffering=0)  # noqa: SIM115 (closed by close())
        self._start, self._size, self._pos = start, end - start, 0
        self.closed = False

    def seekable(self) -> bool:
        return True

    def readable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = 0) -> int:
        base = (0, self._pos, self._size)[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def read(self, n: int = -1) -> bytes:
        left = max(0, self._size - self._pos)
        n = left if n is None or n < 0 else min(n, left)
        self._fh.seek(self._start + self._pos)
        data = self._fh.read(n) if n else b""
        self._pos += len(data)
        return data

    def readinto(self, buf: Any) -> int:
        data = self.read(len(memoryview(buf)))
        memoryview(buf).cast("B")[: len(data)] = data
        return len(data)

    def close(self) -> None:
        self._fh.close()
        self.closed = True

    def __enter__(self) -> _Window:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _window_fs() -> Any:
    """An fsspec filesystem serving `window_url`s (DuckDB registers fsspec filesystems only)."""
    from datetime import UTC, datetime
    from urllib.parse import unquote

    try:
        from fsspec.spec import AbstractFileSystem
    except ImportError:
        raise MissingComponentError(
            'reading a {"traceEvents": [...]} timeline needs fsspec (pip install fsspec)'
        ) from None

    class WindowFS(AbstractFileSystem):
        protocol = WINDOW_PROTOCOL

        @staticmethod
        def _parse(url: str) -> tuple[str, int, int]:
            found = _WINDOW_URL.search(url if "://" in url else f"{WINDOW_PROTOCOL}://{url}")
            if found is None:
                raise FileNotFoundError(url)
            return unquote(found[3]), int(found[1]), int(found[2])

        def _open(self, path: str, mode: str = "rb", **kwargs: Any) -> _Window:
            if mode != "rb":
                raise PermissionError(f"{path}: read-only")
            return _Window(*self._parse(path))

        def info(self, path: str, **kwargs: Any) -> dict[str, Any]:
            _file, start, end = self._parse(path)
            return {"name": path, "size": end - start, "type": "file"}

        def ls(self, path: str, detail: bool = True, **kwargs: Any) -> list[Any]:
            return [self.info(path)] if detail else [path]

        def modified(self, path: str) -> datetime:
            return datetime.fromtimestamp(Path(self._parse(path)[0]).stat().st_mtime, UTC)

    return WindowFS()


def _scan_source(
    con: duckdb.DuckDBPyConnection, path: Path, source: str, fh: BinaryIO
) -> dict[str, pa.Table]:
    """`_scan`, and for an object-form file the window's filesystem and the check of its end."""
    found = _WINDOW_URL.search(source)
    if found is None:
        return _scan(con, path, source, fh)
    con.register_filesystem(_window_fs())
    try:
        return _scan(con, path, source, fh)
    except ProfileFormatError:
        # the guessed end may be a `]` inside a later key: the exact window settles it (and raises
        # for a broken file); the same window means the error stands
        start, end = _exact_window(path, fh)
        if (start, end) == (int(found[1]), int(found[2])):
            raise
    return _scan(con, path, _array_read(_sql_str(window_url(path, fh, start, end))), fh)


def _format_error(path: Path, fh: BinaryIO, exc: Exception) -> ProfileFormatError:
    """Map a DuckDB error to one line: where (byte / event) and a short reason."""
    msg = str(exc).replace(_scan_name(path, fh), "<file>").replace(str(path), "<file>")
    msg = _WINDOW_URL.sub("<file>", msg)
    found = _MALFORMED.search(msg)
    if found:
        # DuckDB's "at byte N" counts from the start of the bad record, not of the file.
        offset = _malformed_offset(fh)
        where = f"byte {offset}" if offset is not None else f"event {found[1]}"
        return ProfileFormatError(path, where, f"{EXPECTED}; malformed JSON: {found[2].rstrip('. ')}")
    found = _TRANSFORM.search(msg)
    if found:
        return ProfileFormatError(path, f"event {found[1]}", f"{EXPECTED}; {found[2][:160]}")
    first_line = msg.splitlines()[0] if msg else type(exc).__name__
    first_line = re.sub(r"^[A-Za-z ]+Error: ", "", first_line)
    return ProfileFormatError(path, None, f"{EXPECTED}; {first_line[:160]}")


def _malformed_offset(fh: BinaryIO) -> int | None:
    """File offset of the first JSON syntax error (error path only: a second, validating pass
    over the same open file).

    msgspec validates the whole document into one zero-copy `Raw` view over a memory map, so even
    a 1 GB file (array or object form) costs no decoded document.
    """
    import msgspec

    try:
        with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as data:
            size = len(data)
            msgspec.json.decode(data, type=msgspec.Raw)
    except msgspec.DecodeError as exc:
        return _msgspec_offset(exc, size)
    except (OSError, ValueError, RecursionError):
        return None
    return None


def _msgspec_offset(exc: Exception, size: int) -> int | None:
    """The file offset in a msgspec syntax error (the end of the data when it was truncated)."""
    if "truncated" in str(exc):
        return size
    found = _MSGSPEC_BYTE.search(str(exc))
    return int(found[1]) if found else None


def _encode(table: pa.Table, columns: list[str]) -> pa.Table:
    """Keep `columns`, dictionary-encoding the repeated strings (names, categories, task types)."""
    import pyarrow.compute as pc

    arrays = [pc.dictionary_encode(table[c]) if c in _DICT_COLS else table[c] for c in columns]
    return pa.table(arrays, names=columns)


def _scan(con: duckdb.DuckDBPyConnection, path: Path, source: str, fh: BinaryIO) -> dict[str, pa.Table]:
    """Stream the file once; split each Arrow batch by phase as it arrives."""
    pieces: dict[str, list[pa.Table]] = {"X": [], "flow": [], "C": [], "M": []}
    rows = 0
    try:
        reader = con.sql(_PROJECTION.replace("__SOURCE__", source)).to_arrow_reader(BATCH_ROWS)
        for batch in reader:
            import pyarrow.compute as pc  # once the scan has produced its first batch

            table = pa.Table.from_batches([batch])
            table = table.append_column("seq", pa.array(np.arange(rows, rows + len(table), dtype=np.int64)))
            rows += len(table)
            ph = table["ph"]
            pieces["X"].append(_encode(table.filter(pc.equal(ph, "X")), _X_COLS))
            flow_mask = pc.is_in(ph, pa.array(["s", "f"]))
            pieces["flow"].append(_encode(table.filter(flow_mask), _FLOW_COLS))
            counters = table.filter(pc.equal(ph, "C"))
            pieces["C"].append(counters.select(["name", "pid", "ts_ns", "counter_args"]))
            pieces["M"].append(table.filter(pc.equal(ph, "M")).select(["name", "pid", "tid", "meta_name"]))
    except (duckdb.Error, OSError) as exc:
        # Errors raised while streaming reach us through pyarrow's reader as OSError.
        raise _format_error(path, fh, exc) from None
    parts = {k: pa.concat_tables(v).unify_dictionaries().combine_chunks() for k, v in pieces.items() if v}
    for key, what in (("X", "complete (X)"), ("flow", "flow (s/f)")):
        if key in parts:
            missing = sum(parts[key][c].null_count for c in ("pid", "tid", "ts_ns"))
            if missing:
                raise ProfileFormatError(path, None, f"{EXPECTED}; {what} events without pid, tid or ts")
    known = sum(len(t) for t in parts.values())
    if rows and not known:
        raise ProfileFormatError(path, None, f"{EXPECTED}; none of the {rows} objects has a known \"ph\"")
    if not parts:
        raise ProfileFormatError(path, None, f"{EXPECTED}; found no events (an empty array, or an object "
                                             "without a \"traceEvents\" list)")
    return parts


def _lane_names(meta: pa.Table) -> tuple[dict[int, str], pd.DataFrame]:
    """{pid: process_name} and a (pid, tid, thread_name) frame from the metadata events."""
    df = meta.to_pandas()
    procs = df[df["name"] == "process_name"].dropna(subset=["meta_name"])
    lanes = {int(p): str(n) for p, n in zip(procs["pid"], procs["meta_name"], strict=True)}
    threads = df[df["name"] == "thread_name"][["pid", "tid", "meta_name"]]
    threads = threads.drop_duplicates(["pid", "tid"], keep="last")
    threads = threads.rename(columns={"meta_name": "thread_name"})
    return lanes, threads


def _build(config: DuckConfig, path: Path, parts: dict[str, pa.Table]) -> Timeline:
    import pandas as pd
    import pyarrow.compute as pc

    from tilescope.profile import Timeline

    lanes, threads = _lane_names(parts["M"]) if "M" in parts else ({}, pd.DataFrame())
    # pop, not get: each part is dropped as soon as its tables are built (peak RSS, issue #2)
    x = parts.pop("X", None) or _empty(_X_COLS)
    hw = pa.array([p for p, n in lanes.items() if n == HARDWARE_LANE], pa.int64())
    overlap = pa.array([p for p, n in lanes.items() if n == OVERLAP_LANE], pa.int64())
    on_hw = pc.fill_null(pc.is_in(x["pid"], hw), False)
    on_overlap = pc.fill_null(pc.is_in(x["pid"], overlap), False)
    kernels = _kernels(x.filter(on_hw), threads)
    host_ops = _host_ops(x.filter(pc.and_(pc.invert(on_hw), pc.invert(on_overlap))), lanes)
    del x, on_hw, on_overlap
    pa.default_memory_pool().release_unused()
    flows, counters = _flows(config, parts.pop("flow", None) or _empty(_FLOW_COLS), kernels, host_ops,
                             parts.get("C"))
    for table, what in ((kernels, "device task"), (host_ops, "host event")):
        check_frame(table[["start_ns", "duration_us"]], path, where=_event_at(table, what),
                    columns={"start_ns": "ts", "duration_us": "dur"})
    return Timeline(kernels=kernels, host_ops=host_ops, counters=counters, flows=flows, lanes=lanes,
                    source_file=path)


def _event_at(table: pd.DataFrame, what: str) -> Callable[[int], str]:
    """Where a timeline value is: the event's kind, name and ts as the file writes it (µs)."""

    def where(i: int) -> str:
        row = table.iloc[i]
        return f"{what} {str(row['name'])[:60]!r} at ts {int(row['start_ns']) / 1000:.3f}"

    return where


def _empty(columns: list[str]) -> pa.Table:
    ints = ("pid", "tid", "ts_ns", "seq", "stream_id", "physic_stream_id", "task_id", "connection_id")
    types = {**dict.fromkeys(ints, pa.int64()), "dur": pa.float64()}
    return pa.table({c: pa.array([], types.get(c, pa.string())) for c in columns})


def _nullable_int(col: pa.ChunkedArray | pa.Array) -> pd.Series:
    """Int64 (nullable) whether or not this file happened to have nulls: a stable dtype."""
    import pandas as pd

    return pd.Series(col.to_pandas(types_mapper={pa.int64(): pd.Int64Dtype()}.get))


def _kernels(k: pa.Table, threads: pd.DataFrame) -> pd.DataFrame:
    import pandas as pd
    import pyarrow.compute as pc

    stream = pc.coalesce(k["stream_id"], k["physic_stream_id"])
    df = pd.DataFrame({
        "name": k["name"].to_pandas(),
        "pid": k["pid"].to_numpy(),
        "tid": k["tid"].to_numpy(),
        "stream_id": _nullable_int(stream),
        "task_id": _nullable_int(k["task_id"]),
        "start_ns": k["ts_ns"].to_numpy(),
        "duration_us": k["dur"].to_numpy(zero_copy_only=False),
        "connection_id": _nullable_int(k["connection_id"]),
        "task_type": k["task_type"].to_pandas(),
    })
    if df["stream_id"].isna().any():
        # No stream arg: the lane's thread name says "Stream N"; failing that the tid is the stream.
        from_thread = _thread_streams(threads)
        keys = pd.MultiIndex.from_arrays([df["pid"], df["tid"]])
        named = from_thread.reindex(keys).to_numpy() if len(from_thread) else np.full(len(df), np.nan)
        fallback = pd.array(np.where(pd.isna(named), df["tid"], named).astype(np.int64), dtype="Int64")
        df["stream_id"] = df["stream_id"].fillna(pd.Series(fallback, index=df.index))
    return df


def _thread_streams(threads: pd.DataFrame) -> pd.Series:
    import pandas as pd

    if threads.empty:
        return pd.Series(dtype="float64")
    num = threads["thread_name"].astype(str).str.extract(_STREAM_THREAD)["stream"].astype("float64")
    idx = pd.MultiIndex.from_arrays([threads["pid"], threads["tid"]])
    return pd.Series(num.to_numpy(), index=idx).dropna()


def _host_ops(h: pa.Table, lanes: dict[int, str]) -> pd.DataFrame:
    import pandas as pd

    pid = h["pid"].to_numpy()
    lane = pd.Series(pid).map(lanes).astype("category")
    return pd.DataFrame({
        "lane": lane,
        "name": h["name"].to_pandas(),
        "cat": h["cat"].to_pandas(),
        "pid": pid,
        "tid": h["tid"].to_numpy(),
        "start_ns": h["ts_ns"].to_numpy(),
        "duration_us": h["dur"].to_numpy(zero_copy_only=False),
    })


# A reused (cat, id) pairs its k-th start with its k-th finish in time order. Ids are unique in
# every trace we have seen, and the window (a sort of all flow events) doubles the cost of this
# query, so it runs only when some (ph, cat, id) repeats.
_FLOW_REUSED_IDS = "SELECT EXISTS (SELECT 1 FROM flow_events GROUP BY ph, cat, id HAVING count(*) > 1)"
_FLOW_RANK = "row_number() OVER (PARTITION BY cat, id ORDER BY ts_ns, seq)"
_FLOW_SQL = """
WITH s AS (SELECT *, __RANK__ AS k FROM flow_events WHERE ph = 's'),
     f AS (SELECT *, __RANK__ AS k FROM flow_events WHERE ph = 'f'),
     kk AS (SELECT pid, tid, start_ns, min(idx) AS idx FROM kernel_keys GROUP BY ALL)
SELECT s.cat::VARCHAR AS cat, s.id AS flow_id, s.name::VARCHAR AS name, s.ts_ns AS start_ns,
       f.ts_ns AS end_ns, s.pid AS start_pid, s.tid AS start_tid, f.pid AS end_pid, f.tid AS end_tid,
       coalesce(kk.idx, -1) AS kernel_index
FROM s JOIN f ON s.cat IS NOT DISTINCT FROM f.cat AND s.id = f.id AND s.k = f.k
LEFT JOIN kk ON kk.pid = f.pid AND kk.tid = f.tid AND kk.start_ns = f.ts_ns
ORDER BY s.seq
"""


def _flows(config: DuckConfig, events: pa.Table, kernels: pd.DataFrame, host_ops: pd.DataFrame,
           counter_events: pa.Table | None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Pair s/f by (cat, id) in order of time; link ends to kernels and starts to host ops.

    Returns the flows and the counters (`_counters`, run on the same connection: one connection
    less on the critical path of loading, ~10 ms; counter events are few)."""
    import pandas as pd

    from tilescope.io.timeline_links import innermost_enclosing, lane_codes

    kernel_keys = pa.table({
        "pid": kernels["pid"].to_numpy(), "tid": kernels["tid"].to_numpy(),
        "start_ns": kernels["start_ns"].to_numpy(), "idx": np.arange(len(kernels), dtype=np.int64),
    })
    # A short-lived connection: its join buffers are gone before the interval search allocates.
    with duckdb.connect(config=config) as con:
        con.register("flow_events", events)
        con.register("kernel_keys", kernel_keys)
        reused = bool(con.sql(_FLOW_REUSED_IDS).fetchall()[0][0])
        sql = _FLOW_SQL.replace("__RANK__", _FLOW_RANK if reused else "0")
        table = con.sql(sql).to_arrow_table()
        counters = _counters(con, counter_events)
    del events, kernel_keys
    df = pd.DataFrame({
        "cat": pd.Series(table["cat"].to_pandas(), dtype="category"),
        "flow_id": table["flow_id"].to_pandas(),
        "name": pd.Series(table["name"].to_pandas(), dtype="category"),
        **{c: table[c].to_numpy() for c in ("start_ns", "end_ns", "start_pid", "start_tid", "end_pid",
                                             "end_tid")},
    })
    kernel_index = table["kernel_index"].to_numpy()
    del table
    pa.default_memory_pool().release_unused()
    start_pid = df["start_pid"].to_numpy()
    start_tid = df["start_tid"].to_numpy()
    start_ns = df["start_ns"].to_numpy()
    h_pid, h_tid = host_ops["pid"].to_numpy(), host_ops["tid"].to_numpy()
    h_start = host_ops["start_ns"].to_numpy()
    dur_ns = np.rint(np.nan_to_num(host_ops["duration_us"].to_numpy(dtype=np.float64)) * 1000.0)
    h_end = h_start + dur_ns.astype(np.int64)  # an X event without dur is an instant
    codes = lane_codes(np.concatenate([h_pid, start_pid]), np.concatenate([h_tid, start_tid]))
    df["host_index"] = innermost_enclosing(codes[: len(h_pid)], h_start, h_end, codes[len(h_pid):], start_ns)
    df["kernel_index"] = kernel_index
    return df, counters


_COUNTER_SQL = """
SELECT name::VARCHAR AS name, pid, ts_ns AS start_ns, e.key AS series, TRY_CAST(e.value AS DOUBLE) AS value
FROM (SELECT *, unnest(map_entries(json_transform(counter_args::JSON, '"MAP(VARCHAR, JSON)"'))) AS e
      FROM counter_events)
"""


def _counters(con: duckdb.DuckDBPyConnection, events: pa.Table | None) -> pd.DataFrame:
    """One row per (counter event, args key); a non-numeric value becomes NaN."""
    import pandas as pd

    if events is None or len(events) == 0:
        return pd.DataFrame({"name": pd.Series(dtype="category"), "pid": pd.Series(dtype="int64"),
                             "start_ns": pd.Series(dtype="int64"), "series": pd.Series(dtype="category"),
                             "value": pd.Series(dtype="float64")})
    con.register("counter_events", events)
    table = con.sql(_COUNTER_SQL).to_arrow_table()
    con.unregister("counter_events")
    out: dict[str, Any] = {
        "name": pd.Series(table["name"].to_pandas(), dtype="category"),
        "pid": table["pid"].to_numpy(),
        "start_ns": table["start_ns"].to_numpy(),
        "series": pd.Series(table["series"].to_pandas(), dtype="category"),
        "value": table["value"].to_numpy(zero_copy_only=False).astype(np.float64),
    }
    return pd.DataFrame(out)


# ---- what the timeline says beyond its tables ------------------------------------------------------

FREQ_COUNTER = "AI Core Freq"

# Which `Ascend Hardware` events are kernels (formats doc §3.4, §7). That lane holds every hardware
# task, runtime tasks included: TASK_TIMEOUT_SET, PROFILING_ENABLE/DISABLE in msprof timelines
# (tilelang_sigmoid_app), MEMCPY_ASYNC in torch_npu ones (torch_timeline_3670), EVENT_RECORD,
# notify waits, ... A kernel is an event whose `Task Type`
#   - is a kernel-table type, i.e. a value op_summary's `Task Type` / kernel_details' `Accelerator
#     Core` holds (msprof timelines repeat them), or the runtime's name for one (KERNEL_AICORE, ...);
#   - or is `Other` or absent (torch_npu labels its compute kernels `Other`) while the event is not
#     named after a runtime task.
# Every other type (runtime tasks, SQE tasks, types we have not seen) is not a kernel. The doc's
# warning that the timeline's Task Type does not classify kernels holds for `Other`: such kernels
# get no core type here; a kernel table, when there is one, says more.
KERNEL_TASK_TYPES = frozenset(
    {"AI_CORE", "AI_VECTOR_CORE", "MIX_AIC", "MIX_AIV", "AI_CPU", "HCCL", "DSA_SQE"}
)
_RUNTIME_KERNEL_TYPES = {
    "KERNEL_AICORE": "AI_CORE",
    "KERNEL_AIVEC": "AI_VECTOR_CORE",
    "KERNEL_MIX_AIC": "MIX_AIC",
    "KERNEL_MIX_AIV": "MIX_AIV",
    "KERNEL_AICPU": "AI_CPU",
}
UNTYPED_TASK = "Other"
# The CANN runtime's names of its non-kernel tasks (its task-type name table), which are also the
# names such tasks carry on the timeline.
RUNTIME_TASK_NAMES = frozenset({
    "ACTIVE_AICPU_STREAM", "ADC_PROF", "AICPU_INFO_LOAD", "CAPTURE_CONDITION", "CAPTURE_RECORD",
    "CAPTURE_RECORD_EXTERNAL", "CAPTURE_WAIT", "CAPTURE_WAIT_EXTERNAL", "CCU_LAUNCH", "CMO_TASK",
    "COMMON_CMD", "CREATE_L2_ADDR", "CREATE_STREAM", "DATADUMP_LOADINFO", "DATA_DUMP", "DEBUG_REGISTER",
    "DEBUG_REGISTER_FOR_STREAM", "DEBUG_UNREGISTER", "DEBUG_UNREGISTER_FOR_STREAM",
    "DEVICE_RINGBUFFER_CONTROL", "DIRECT_SEND", "EVENT_RECORD", "EVENT_RESET", "EVENT_WAIT",
    "GET_DEVICE_MSG", "GET_STARS_VERSION", "HOSTFUNC_CALLBACK", "IPC_EVENT_RECORD", "IPC_EVENT_WAIT",
    "IPC_INT_NOTICE", "LABEL_GOTO", "LABEL_SET", "LABEL_SWITCH", "MAINTENANCE", "MEMCPY_ASYNC",
    "MEM_WAIT_VALUE", "MEM_WRITE_VALUE", "MODEL_END_GRAPH", "MODEL_EXECUTE", "MODEL_EXIT_GRAPH",
    "MODEL_LOAD", "MODEL_MAINTAINCE", "MODEL_TASK_UPDATE", "MODEL_TO_AICPU", "MULTIPLE_TASK", "NOP",
    "NOTIFY_RECORD", "NOTIFY_WAIT", "NPU_CLEAR_FLOAT_STATUS", "NPU_GET_FLOAT_STATUS", "ONLINE_PROF_DISABLE",
    "ONLINE_PROF_ENABLE", "OVERFLOW_SWTICH_SET", "PC_TRACE", "PROFILER_DYNAMIC_DISABLE",
    "PROFILER_DYNAMIC_ENABLE", "PROFILER_TRACE", "PROFILER_TRACE_EX", "PROFILING_DISABLE",
    "PROFILING_ENABLE", "RDMA_DB_SEND", "RDMA_PI_VALUE_MODIFY", "RDMA_SEND", "REDUCE_ASYNC_V2",
    "REMOTE_EVENT_WAIT", "SET_STREAM_MODE", "SQE_UPDATE_TASK", "SQ_LOCK_UNLOCK", "STARS_COMMON",
    "STREAM_ACTIVE", "STREAM_LABEL_GOTO", "STREAM_LABEL_SWITCH_BY_INDEX", "STREAM_SWITCH",
    "STREAM_SWITCH_N", "STREAM_TAG_SET", "TASK_FLIP", "TASK_TIMEOUT_SET", "UB_DB_SEND", "UPDATE_ADDRESS",
    "WRITE_VALUE",
})


def kernel_tasks(kernels: pd.DataFrame) -> tuple[np.ndarray, pd.Series]:
    """Which rows of a timeline's kernel table (its hardware lane) are kernels, by the rule above,
    and each row's kernel-table core type (null where the timeline does not say)."""
    import pandas as pd

    if "task_type" not in kernels:
        named = kernels["name"].isin(RUNTIME_TASK_NAMES).to_numpy(dtype=bool)
        return ~named, pd.Series(None, index=kernels.index, dtype="str")
    tt = kernels["task_type"].astype("object")
    typed = tt.isin(KERNEL_TASK_TYPES | _RUNTIME_KERNEL_TYPES.keys())
    untyped = tt.isna() | (tt == UNTYPED_TASK)
    keep = typed | (untyped & ~kernels["name"].isin(RUNTIME_TASK_NAMES))
    return keep.to_numpy(dtype=bool), tt.replace(_RUNTIME_KERNEL_TYPES).where(typed).astype("str")


def counter_max(timeline: Timeline, name: str = FREQ_COUNTER) -> float | None:
    """The highest value of one counter (e.g. `AI Core Freq` in MHz), None when it is absent."""
    c = timeline.counters
    if c is None or not len(c) or "name" not in c:
        return None
    peak = c.loc[(c["name"] == name).to_numpy(dtype=bool), "value"].max()
    return float(peak) if np.isfinite(peak) else None  # NaN: no such counter, or no numeric value
