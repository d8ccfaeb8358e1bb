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
  (for a profile that has no kernel table) is `kernel_tasks` (tilescope.io.timeline_facts).
- Only `X`, `s`/`f`, `C` and `M` events are read; `B`/`E`, instant and async events are ignored
  (Ascend profilers do not write them). Unpaired flow ends are dropped.
- An empty array, or an object without "traceEvents", is a ProfileFormatError, not empty tables.
- The object form {"traceEvents": [...]} (the msprof op simulator's trace.json, and any other keys
  before or after the list) is streamed like the bare array: DuckDB reads the byte range of the
  list through a window onto the file (tilescope.io.trace_window), same time and memory.

Tables beyond the `Timeline` contract: `flows` also has name, end_ns and the start/end pid/tid;
`host_ops.lane` is NaN for a pid without process_name metadata. The `Overlap Analysis` lane is
left out of host_ops and not returned (Timeline has no field for it yet).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tilescope.errors import ProfileFormatError
from tilescope.interrupt import hold_point
from tilescope.io.bad_rows import screen_frame
from tilescope.io.native import native_name
from tilescope.io.trace_errors import EXPECTED, duckdb_json_error
from tilescope.io.trace_window import WINDOW_URL, events_window, exact_window, window_fs, window_url
from tilescope.profile import Timeline
from tilescope.scratch import scratch_dir

# pandas (and the modules that import it) are imported where the frames are built, after the
# scan: `load_profiles` starts the scan on a second thread before the main thread imports pandas;
# msgspec waits for an error.
if TYPE_CHECKING:
    import pandas as pd


DuckConfig = dict[str, str | bool | int | float | list[str]]
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


def _object_source(path: Path, fh: BinaryIO, size: int, first: int) -> str:
    """read_json of the traceEvents array of an object-form file (`first`: offset of its `{`);
    every read is of the open file `fh`, as for the bare array."""
    start, end = events_window(path, fh, size, first)
    return _array_read(_sql_str(window_url(path, fh, start, end)))


def _scan_source(
    con: duckdb.DuckDBPyConnection, path: Path, source: str, fh: BinaryIO
) -> dict[str, pa.Table]:
    """`_scan`, and for an object-form file the window's filesystem and the check of its end."""
    found = WINDOW_URL.search(source)
    if found is None:
        return _scan(con, path, source, fh)
    con.register_filesystem(window_fs())
    try:
        return _scan(con, path, source, fh)
    except ProfileFormatError:
        # the guessed end may be a `]` inside a later key: the exact window settles it (and raises
        # for a broken file); the same window means the error stands
        start, end = exact_window(path, fh)
        if (start, end) == (int(found[1]), int(found[2])):
            raise
    return _scan(con, path, _array_read(_sql_str(window_url(path, fh, start, end))), fh)


def _format_error(path: Path, fh: BinaryIO, exc: Exception) -> ProfileFormatError:
    """Map a DuckDB error to one line: where (byte / event) and a short reason."""
    msg = str(exc).replace(_scan_name(path, fh), "<file>").replace(str(path), "<file>")
    msg = WINDOW_URL.sub("<file>", msg)
    first_line = msg.splitlines()[0] if msg else type(exc).__name__
    first_line = re.sub(r"^[A-Za-z ]+Error: ", "", first_line)
    return duckdb_json_error(path, fh, msg, EXPECTED, first_line)


def _encode(table: pa.Table, columns: list[str]) -> pa.Table:
    """Keep `columns`, dictionary-encoding the repeated strings (names, categories, task types)."""
    arrays = [pc.dictionary_encode(table[c]) if c in _DICT_COLS else table[c] for c in columns]
    return pa.table(arrays, names=columns)


def _scan(con: duckdb.DuckDBPyConnection, path: Path, source: str, fh: BinaryIO) -> dict[str, pa.Table]:
    """Stream the file once; split each Arrow batch by phase as it arrives."""
    pieces: dict[str, list[pa.Table]] = {"X": [], "flow": [], "C": [], "M": []}
    rows = 0
    try:
        reader = con.sql(_PROJECTION.replace("__SOURCE__", source)).to_arrow_reader(BATCH_ROWS)
        for batch in reader:
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
    # deferred: pandas (~0.3 s) only when this builds a frame
    import pandas as pd

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
    # the events' times against their ranges, their names against MAX_TEXT_BYTES (DuckDB's own cap
    # is per event, 16 MiB); without --strict an event with a time outside is skipped with one
    # note (#26 item 11), before the flows index the tables
    kernels, left_k = _screened(kernels, path, "device task")
    host_ops, left_h = _screened(host_ops, path, "host event")
    flows, counters = _flows(config, parts.pop("flow", None) or _empty(_FLOW_COLS), kernels, host_ops,
                             parts.get("C"))
    left = [e for e in (left_k, left_h) if e is not None]
    skipped = None
    if left:
        count = sum(int(e["count"]) for e in left)
        note = left[0]["note"] if len(left) == 1 else f"{count:,} unreadable events; {left[0]['note']}"
        skipped = {"count": count, "first": left[0]["first"], "note": note}
    rows = threads.dropna().itertuples(index=False) if len(threads) else ()
    names = {(int(p), int(t)): str(n) for p, t, n in rows}
    return Timeline(kernels=kernels, host_ops=host_ops, counters=counters, flows=flows, lanes=lanes,
                    source_file=path, threads=names, rows_skipped=skipped)


def _screened(table: pd.DataFrame, path: Path, what: str) -> tuple[pd.DataFrame, dict[str, Any] | None]:
    """`table` less the events `validate.screen_frame` finds unreadable, and its entry for them."""
    checked = [c for c in ("start_ns", "duration_us", "name") if c in table.columns]
    sub = table[checked].assign(_event=np.arange(len(table)))
    kept, skipped, _ = screen_frame(sub, path, where=_event_at(table, what),
                                    columns={"start_ns": "ts", "duration_us": "dur"})
    if skipped is None:
        return table, None
    return table.iloc[kept["_event"].to_numpy()].reset_index(drop=True), skipped


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
    # deferred: pandas (~0.3 s) only when this builds a frame
    import pandas as pd

    return pd.Series(col.to_pandas(types_mapper={pa.int64(): pd.Int64Dtype()}.get))


def _kernels(k: pa.Table, threads: pd.DataFrame) -> pd.DataFrame:
    # deferred: pandas (~0.3 s) only when this builds a frame
    import pandas as pd

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
    # deferred: pandas (~0.3 s) only when this builds a frame
    import pandas as pd

    if threads.empty:
        return pd.Series(dtype="float64")
    num = threads["thread_name"].astype(str).str.extract(_STREAM_THREAD)["stream"].astype("float64")
    idx = pd.MultiIndex.from_arrays([threads["pid"], threads["tid"]])
    return pd.Series(num.to_numpy(), index=idx).dropna()


def _host_ops(h: pa.Table, lanes: dict[int, str]) -> pd.DataFrame:
    # deferred: pandas (~0.3 s) only when this builds a frame
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
        # msprof links a CANN launch to its task by this id alone when it writes no flow start
        "connection_id": _nullable_int(h["connection_id"]),
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
    # deferred: pandas (~0.3 s) (and io.timeline_links) only when this builds a frame
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
    # deferred: pandas (~0.3 s) only when this builds a frame
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
