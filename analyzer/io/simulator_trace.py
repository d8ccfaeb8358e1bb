"""Streamed reading of the msprof op simulator's pipeline traces (formats doc §5, issue #25).

A core's `trace.json` holds one Chrome-trace event per simulated instruction: a run of 1 M
instructions is ~280 MB of JSON over its cores, and `json.loads` makes several times that of Python
objects. Here DuckDB's `read_json` streams the events list and aggregates while it reads (`scan`):
only the result of a query (sums per line and pipe, merged busy intervals) reaches Python, never an
event. The object form `{"traceEvents": [...]}` is read as the bare array is, through the byte
window of tilescope.io.trace_window (the timeline reader's way). Measurements: docs/benchmarks.md,
"Per-line reading of simulator traces (#25)".

What an event means here:
- `X` events are instructions: `args.code` their source line (`path:line`; "" without `-g`),
  `ts` and `dur` in µs (Chrome trace format, whatever `displayTimeUnit` says: it only sets the
  display). Flows and other phases are not instructions and are skipped.
- `B`/`E` pairs sharing an `id` are flags: the `B` is the SET_FLAG, on the setting pipe, with
  `args.code` and `pc_addr`; the `E` is the WAIT_FLAG, on the waiting pipe, with no args (the real
  trimmed output of neo-pan/ascend-msprof-skill). So the pair says which line set a flag and which
  pipe waited for it, never which line waited: that comes from the WAIT_FLAG's address where some
  event or a visualize_data.bin names the address's line (tilescope.lines_sync).
- Its pipe: the `tid` as written when no metadata names it (the real traces: `"tid": "MTE2"`, and
  the summary trace's `"pid": "core3.veccore0"`). With numeric ids, the `M` metadata names the
  lanes: of the thread's name (`thread_name`) and its process's (`process_name`), the one that is a
  pipe's name (a layout that makes each pipe a process and its lanes threads), else the thread's.

Bad input is one ProfileFormatError naming the file and what was expected: not JSON or cut short
(with the byte offset), an event that is not an object, or an `X` event whose `ts` or `dur` is
missing, not a number, or (`dur`) negative (with the event's index, 1 for the first).
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

import pandas as pd
import pyarrow as pa

from tilescope.errors import ProfileFormatError
from tilescope.io.native import native_name
from tilescope.io.trace_errors import EXPECTED, duckdb_json_error
from tilescope.io.trace_window import WINDOW_URL, events_window, exact_window, window_fs, window_url
from tilescope.scratch import scratch_dir

if TYPE_CHECKING:
    import duckdb

SIM_EXPECTED = 'expected an msprof op simulator trace (Chrome-trace events: {"traceEvents": [...]} or [...])'
# Two threads and a memory cap, as the timeline reader's scan: the machine is shared. Each query
# here keeps only its groups; DuckDB's read buffers are the rest (peak RSS: docs/benchmarks.md).
DUCKDB_CONFIG: dict[str, str | int] = {"threads": 2, "memory_limit": "1GB"}
MAX_OBJECT_BYTES = 16 << 20  # DuckDB's default; its read buffers scale with it
# Everything as text: ids are names in some traces and numbers in others, and a bad `ts`/`dur`
# must reach the check below instead of failing the scan with DuckDB's own words.
_COLUMNS = (
    "{'ph': 'VARCHAR', 'name': 'VARCHAR', 'pid': 'VARCHAR', 'tid': 'VARCHAR', 'ts': 'VARCHAR', "
    "'dur': 'VARCHAR', 'id': 'VARCHAR', 'args': 'JSON'}"
)
EVENTS = "__EVENTS__"  # where a query template takes the file's events
# Per (lane, source line, instruction address): the instruction time and count, with the count of
# X events whose ts or dur is unusable; the lane metadata (process_name/thread_name, few) rides along
# as ph 'M' rows; the SET_FLAG `B` events per (lane, line, address) ('B' rows: they name addresses'
# lines too); the flag pairs ('P' rows) per setting lane and line and waiting lane (`wpid`, `wtid`):
# a B names its line and address, its WAIT_FLAG `E` only the waiting lane and the `id` pairing them.
# One read of the file: `g` is the scan's aggregate (one row per flag id for B and E), kept in
# DuckDB (MATERIALIZED: read once, spilled to its temp directory when large); only sums leave it.
_LINE_SQL = f"""
WITH g AS MATERIALIZED (
SELECT ph, pid, tid, code, pc, fid, kind, meta, fsum(dur_us) AS busy_us, count(*) AS n,
       count(*) FILTER (WHERE ph = 'X' AND (ts_us IS NULL OR dur_us IS NULL OR NOT isfinite(ts_us)
                                            OR NOT isfinite(dur_us) OR dur_us < 0)) AS bad
FROM (SELECT ph, pid, tid, TRY_CAST(ts AS DOUBLE) AS ts_us, TRY_CAST(dur AS DOUBLE) AS dur_us,
             CASE WHEN ph IN ('X', 'B') THEN args->>'code' END AS code,
             CASE WHEN ph IN ('X', 'B') THEN args->>'pc_addr' END AS pc,
             CASE WHEN ph IN ('B', 'E') THEN id END AS fid,
             CASE WHEN ph = 'M' THEN name END AS kind,
             CASE WHEN ph = 'M' THEN args->>'name' END AS meta
      FROM {EVENTS} WHERE ph IN ('X', 'B', 'E') OR (ph = 'M' AND name IN ('process_name', 'thread_name')))
GROUP BY ALL)
SELECT ph, pid, tid, code, pc, kind, meta, NULL AS wpid, NULL AS wtid, busy_us, n, bad
FROM g WHERE ph IN ('X', 'M')
UNION ALL
SELECT 'B', pid, tid, code, pc, NULL, NULL, NULL, NULL, NULL, sum(n), 0 FROM g WHERE ph = 'B'
GROUP BY pid, tid, code, pc
UNION ALL
SELECT 'P', b.pid, b.tid, b.code, NULL, NULL, NULL, e.pid, e.tid, NULL, count(*), 0
FROM (SELECT DISTINCT ON (fid) pid, tid, code, fid FROM g WHERE ph = 'B' AND fid IS NOT NULL) b
JOIN (SELECT DISTINCT ON (fid) pid, tid, fid FROM g WHERE ph = 'E' AND fid IS NOT NULL) e USING (fid)
GROUP BY b.pid, b.tid, b.code, e.pid, e.tid
"""
# The first unusable X event, in file order (error path only: a second pass).
_FIRST_BAD_SQL = f"""
SELECT i, name, ts, dur FROM (SELECT row_number() OVER () AS i, ph, name, ts, dur,
       TRY_CAST(ts AS DOUBLE) AS t, TRY_CAST(dur AS DOUBLE) AS d FROM {EVENTS})
WHERE ph = 'X' AND (t IS NULL OR d IS NULL OR NOT isfinite(t) OR NOT isfinite(d) OR d < 0)
ORDER BY i LIMIT 1
"""
LINE_COLUMNS = ("file", "line", "pipe", "busy_us", "instructions")
FLAG_COLUMNS = ("file", "line", "set_pipe", "wait_pipe", "pairs")
# Example: "/tmp/tilelang/kernel_abc.cpp:88" -> ("/tmp/tilelang/kernel_abc.cpp", 88)
CODE_RE = re.compile(r"^(?P<file>.+):(?P<line>\d+)$")
# The pipes the simulator names (formats doc §5, and FIXP for the fix pipe).
_PIPE_NAME = re.compile(r"^(?:CUBE|VECTOR|SCALAR|MTE[123]|FIXP(?:IPE)?)$", re.IGNORECASE)
# DuckDB's glob syntax, escaped where a file is named by its path (no /dev/fd)
_GLOB_CHARS = re.compile(r"([*?\[])")


@dataclass
class TraceFacts:
    """What one core's trace says per source line (`busy`, LINE_COLUMNS), which source line each
    instruction address belongs to (`addr_lines`: addr (int), file, line; from X and SET_FLAG
    events that carry both `pc_addr` and `code`), and its flag pairs (`flags`, FLAG_COLUMNS: per
    setting line and pipe and waiting pipe, the SET_FLAG/WAIT_FLAG pairs matched by `id`)."""

    busy: pd.DataFrame
    addr_lines: pd.DataFrame
    flags: pd.DataFrame


def line_busy(path: Path) -> pd.DataFrame:
    """Instruction time (busy_us) and count (instructions) per (file, line, pipe) of one trace,
    sorted; events without a source line (`code` "" or absent) are not counted."""
    return trace_facts(path).busy


def trace_facts(path: Path) -> TraceFacts:
    """The per-line busy time, the address -> line map and the flag pairs of one trace (one scan)."""
    got = scan(path, _LINE_SQL).to_pandas()
    if got["bad"].sum():
        raise first_bad_event(path)
    meta = got[got["ph"] == "M"]
    x = got[(got["ph"] == "X") & got["code"].notna()]
    where = x["code"].str.extract(CODE_RE)
    frame = pd.DataFrame(
        {
            "file": where["file"],
            "line": pd.to_numeric(where["line"]),
            "pipe": lane_pipes(x, meta),
            "busy_us": x["busy_us"].astype("float64"),
            "instructions": x["n"].astype("float64"),
        }
    ).dropna(subset=["file", "line"])
    if frame.empty:
        busy = pd.DataFrame(columns=list(LINE_COLUMNS))
    else:
        sums = frame.groupby(["file", "line", "pipe"], sort=True)[["busy_us", "instructions"]].sum()
        busy = sums.reset_index()
        busy["line"] = busy["line"].astype("int64")
    return TraceFacts(busy, _addr_lines(got[got["ph"].isin(["X", "B"])]), _flag_pairs(got, meta))


def parse_addr(text: object) -> int | None:
    """An instruction address as the simulator writes it: hex with 0x in the traces
    (`"pc_addr": "0x1130a7b4"`), decimal in the instruction CSV (`288401332`, the same address)."""
    s = str(text).strip().lower() if text is not None else ""
    try:
        return int(s, 16) if s.startswith("0x") else int(s, 10)
    except ValueError:
        return None


def _addr_lines(rows: pd.DataFrame) -> pd.DataFrame:
    """Each address that events name with a source line -> that line (distinct pairs)."""
    where = rows["code"].fillna("").str.extract(CODE_RE)
    out = pd.DataFrame({"addr": rows["pc"].map(parse_addr), "file": where["file"], "line": where["line"]})
    out = out.dropna().drop_duplicates()
    if out.empty:
        return pd.DataFrame({"addr": pd.Series(dtype="int64"), "file": pd.Series(dtype=object),
                             "line": pd.Series(dtype="int64")})
    return out.astype({"addr": "int64", "line": "int64"}).reset_index(drop=True)


def _flag_pairs(got: pd.DataFrame, meta: pd.DataFrame) -> pd.DataFrame:
    """The SET_FLAG (`B`) / WAIT_FLAG (`E`) pairs the scan matched by `id` ('P' rows): per setting
    line (file, line; None without `code`), setting pipe and waiting pipe, how many pairs; a B or E
    without its other half is left out (an output cut short)."""
    pairs = got[got["ph"] == "P"]
    if pairs.empty:
        return pd.DataFrame(columns=list(FLAG_COLUMNS))
    waits = pd.DataFrame({"pid": pairs["wpid"], "tid": pairs["wtid"]}, index=pairs.index)
    where = pairs["code"].fillna("").str.extract(CODE_RE)
    frame = pd.DataFrame(
        {
            "file": where["file"].astype(object).where(where["file"].notna(), None),
            "line": pd.to_numeric(where["line"]).astype("Int64"),
            "set_pipe": lane_pipes(pairs, meta),
            "wait_pipe": lane_pipes(waits, meta),
            "pairs": pairs["n"].astype("float64"),
        }
    )
    g = frame.groupby(["file", "line", "set_pipe", "wait_pipe"], dropna=False, sort=True)["pairs"].sum()
    return g.reset_index().loc[:, list(FLAG_COLUMNS)]


def lane_pipes(lanes: pd.DataFrame, meta: pd.DataFrame) -> pd.Series:
    """The pipe of each (pid, tid) row of `lanes`, from the metadata rows (kind = process_name or
    thread_name, meta = the name given) and the tid (module docstring)."""
    procs: dict[object, str] = {}
    threads: dict[tuple[object, object], str] = {}
    for kind, p, t, n in zip(meta["kind"], meta["pid"], meta["tid"], meta["meta"], strict=True):
        if isinstance(n, str) and kind == "process_name":
            procs[p] = n
        elif isinstance(n, str) and kind == "thread_name":
            threads[(p, t)] = n
    names = []
    for p, t in zip(lanes["pid"], lanes["tid"], strict=True):
        thread, process = threads.get((p, t)), procs.get(p)
        pipe = next((n for n in (thread, process) if n and _PIPE_NAME.match(n)), thread or t)
        names.append(pipe.upper() if isinstance(pipe, str) else "")
    return pd.Series(names, index=lanes.index, dtype="object")


def first_bad_event(path: Path) -> ProfileFormatError:
    """The error for the first X event whose ts or dur is unusable (a second, ordered pass)."""
    row = scan(path, _FIRST_BAD_SQL).to_pylist()
    if not row:  # the aggregate saw one, the ordered pass must too
        return ProfileFormatError(path, None, f"{SIM_EXPECTED}; an X event without a usable ts or dur")
    i, name, ts, dur = (row[0][k] for k in ("i", "name", "ts", "dur"))
    if ts is None or dur is None:
        what = f"no {'ts' if ts is None else 'dur'}"
    elif _number(ts) is None:
        what = f"ts {ts[:40]!r}, not a number"
    else:
        what = f"dur {dur[:40]!r}, not a number >= 0"
    return ProfileFormatError(
        path, f"event {i}", f"{SIM_EXPECTED}; its instruction (X event) {str(name)[:60]!r} has {what}"
    )


def _number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def scan(path: Path, template: str) -> pa.Table:
    """The result of `template` (SQL reading the file's events list where it says `EVENTS`), the
    file streamed once; ProfileFormatError (one line) when it is not a trace."""
    # deferred: DuckDB (~40 ms) only when a trace is read; this module is imported by every
    # command (the rules' per-line data), most of which never read one
    import duckdb

    with scratch_dir("tilescope-duckdb-") as tmp, _open(path) as fh:
        source, window = _source(path, fh)
        with duckdb.connect(config={**DUCKDB_CONFIG, "temp_directory": str(tmp)}) as con:
            if window is None:
                return _fetch(con, path, fh, template, source)
            con.register_filesystem(window_fs())
            try:
                return _fetch(con, path, fh, template, source)
            except ProfileFormatError:
                # the guessed end of the list may be a `]` inside a later key: the exact window
                # settles it (and places the error of a broken file); the same window: it stands
                exact = _reworded(exact_window, path, fh)
                if exact == window:
                    raise
            return _fetch(con, path, fh, template, _read_json(window_url(path, fh, *exact)))


def _open(path: Path) -> BinaryIO:
    try:
        return open(path, "rb")
    except OSError as exc:
        raise ProfileFormatError(path, None, f"{SIM_EXPECTED}; cannot read it ({exc.strerror})") from None


def _read_json(name: str) -> str:
    quoted = "'" + name.replace("'", "''") + "'"
    # compression='none': the content decides how it is read, not the name
    return (
        f"read_json({quoted}, format='array', compression='none', columns={_COLUMNS}, "
        f"maximum_object_size={MAX_OBJECT_BYTES})"
    )


def _source(path: Path, fh: BinaryIO) -> tuple[str, tuple[int, int] | None]:
    """The read_json of the events list, and for the object form the byte window it reads."""
    try:
        size = os.fstat(fh.fileno()).st_size
        head = os.pread(fh.fileno(), 4096, 0)
    except OSError as exc:
        raise ProfileFormatError(path, None, f"{SIM_EXPECTED}; cannot read it ({exc.strerror})") from None
    stripped = head.removeprefix(b"\xef\xbb\xbf").lstrip(b" \t\r\n")
    offset = len(head) - len(stripped)
    if not stripped:
        empty = "the file is empty" if size == 0 else "the file starts with a long run of whitespace"
        raise ProfileFormatError(path, None, f"{SIM_EXPECTED}; {empty}")
    if stripped[:1] == b"[":
        name = native_name(path, fh, escape=lambda n: _GLOB_CHARS.sub(r"[\1]", n))
        return _read_json(name), None
    if stripped[:1] == b"{":
        window = _reworded(lambda p, f: events_window(p, f, size, offset), path, fh)
        return _read_json(window_url(path, fh, *window)), window
    found = repr(stripped[:1].decode("latin-1"))
    raise ProfileFormatError(path, f"byte {offset}", f"{SIM_EXPECTED}; found {found}")


def _reworded(find: Callable[[Path, BinaryIO], tuple[int, int]], path: Path, fh: BinaryIO) -> tuple[int, int]:
    """`find(path, fh)` (a trace_window search), its error said of a simulator trace."""
    try:
        return find(path, fh)
    except ProfileFormatError as exc:
        raise ProfileFormatError(path, exc.where, exc.expected.replace(EXPECTED, SIM_EXPECTED)) from None


def _fetch(con: duckdb.DuckDBPyConnection, path: Path, fh: BinaryIO, template: str, source: str) -> pa.Table:
    # deferred: DuckDB, as in scan (the one caller, which has loaded it)
    import duckdb

    try:
        return con.sql(template.replace(EVENTS, source)).to_arrow_table()
    except (duckdb.Error, OSError) as exc:
        raise _format_error(path, fh, exc) from None


def _format_error(path: Path, fh: BinaryIO, exc: Exception) -> ProfileFormatError:
    """A DuckDB error as one line: where (byte or event) and a short reason, no file names."""
    msg = WINDOW_URL.sub("<file>", str(exc).replace(str(path), "<file>"))
    msg = re.sub(r"/dev/fd/\d+", "<file>", msg)
    first_line = (msg.splitlines() or [type(exc).__name__])[0]
    return duckdb_json_error(path, fh, msg, SIM_EXPECTED, first_line)
