"""The cross-rank summaries of torch_npu's database export (`export_type=db`):
`ASCEND_PROFILER_OUTPUT/analysis.db`, read into the tables `cluster_files` reads from the text
export (same columns, same units: µs, MB, GB/s). Schema and provenance: docs/analysis-db.md.

  StepTraceTime         one row per (device,) step: the columns of step_trace_time.csv in µs;
                        `step` is the step id as text ("2"), NULL without step marks
  CommAnalyzerTime      one row per operator: communication.json's "Communication Time Info"
                        (`start_timestamp` µs, the other times ms), `step` "step2", `type`
                        "collective" / "p2p" ('' for torch_npu's own totals)
  CommAnalyzerBandwidth one row per operator, transport and packet size: "Communication Bandwidth
                        Info" (MB, ms, GB/s) repeated for each size; all-zero transports absent
  CommAnalyzerMatrix    one row per operator and link: communication_matrix.json (MB, ms, GB/s)
The operator is `hccl_op_name` + "@" + `group_name`, exactly the text files' key.

Each reader validates its columns' storage classes in SQLite (`typeof`) before reading, so a
damaged or foreign table gives a ProfileFormatError naming table, rowid and column, never a
NaN that looks like data. The tables are small (one row per step, operator, link): the checks
and the reads are one query per column and one per table.
"""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import numpy as np
import pandas as pd

from tilescope.errors import ProfileFormatError
from tilescope.io.cluster_files import AGGREGATE_KEY_RE, STEP_COLUMNS
from tilescope.io.sqlite import connect_readonly
from tilescope.io.sqlite_query import describe_value, query_frame

ANALYSIS_DB = "analysis.db"
STEP_TRACE_TABLE = "StepTraceTime"
TIME_TABLE = "CommAnalyzerTime"
BANDWIDTH_TABLE = "CommAnalyzerBandwidth"
MATRIX_TABLE = "CommAnalyzerMatrix"

# StepTraceTime column -> the step_trace_time.csv header it stands for (µs in both)
DB_STEP_COLUMNS = {
    "computing": "Computing",
    "communication_not_overlapped": "Communication(Not Overlapped)",
    "overlapped": "Overlapped",
    "communication": "Communication",
    "free": "Free",
    "stage": "Stage",
    "bubble": "Bubble",
}
REQUIRED_DB_STEP_COLUMNS = ("step", "computing", "communication_not_overlapped", "free")
_OP_KEY = ("hccl_op_name", "group_name", "step", "type")
_TIME_MS = ("elapse_time", "transit_time", "wait_time", "synchronization_time", "idle_time")

# storage classes a column may hold (SQLite's typeof); NUMERIC affinity stores "1.5" as a real,
# so text left in a number column is not a number
_NUMBER = ("integer", "real")
_NUMBER_OR_NULL = ("integer", "real", "null")
_TEXT = ("text",)
_RANK = ("text", "integer")  # torch_npu writes "0" (text); an integer means the same


def open_analysis_db(path: Path) -> sqlite3.Connection:
    """`path` read-only (sqlite.connect_readonly: never a journal or -shm written beside it), checked to
    be an SQLite database: a file with the magic but a damaged header fails here, once."""
    con = connect_readonly(path)
    try:
        con.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.Error as exc:
        con.close()
        raise ProfileFormatError(path, None, f"expected an SQLite database ({exc})") from None
    return con


def read_db_step_trace(con: sqlite3.Connection, path: Path) -> pd.DataFrame:
    """StepTraceTime as `read_step_trace` gives step_trace_time.csv: `step` and the STEP_COLUMNS
    names of the columns the table has (µs)."""
    cols = _require(con, path, STEP_TRACE_TABLE, REQUIRED_DB_STEP_COLUMNS)
    present = [c for c in DB_STEP_COLUMNS if c in cols]
    _check(con, path, STEP_TRACE_TABLE, "step", ("text", "integer", "null"), "a step id ('2') or NULL")
    _check_digits(con, path, STEP_TRACE_TABLE, "step", "a step id ('2') or NULL", empty_ok=True)
    for c in present:
        _check(con, path, STEP_TRACE_TABLE, c, _NUMBER, "a number (µs)")
    _check_finite(con, path, STEP_TRACE_TABLE, present)
    raw = _read(con, path, STEP_TRACE_TABLE, ["step", *present])
    # without step marks older torch_npu writes one placeholder row: NULL step, every time 0
    # (TraceStepTimeDbParser.generate_view computes nothing then) — not a measurement
    placeholder = raw["step"].isna() & (raw[present] == 0).all(axis=1)
    raw = raw[~placeholder].reset_index(drop=True)
    text = raw["step"].astype("string").str.strip()  # digits, '' or NULL (checked above)
    out = pd.DataFrame({"step": pd.to_numeric(text.where(text != "")).astype("Int64")})
    for c in present:
        out[STEP_COLUMNS[DB_STEP_COLUMNS[c]]] = raw[c].astype(np.float64)
    return out


def read_db_communication(con: sqlite3.Connection, path: Path) -> pd.DataFrame:
    """CommAnalyzerTime with its CommAnalyzerBandwidth rows, as `read_communication` gives
    communication.json: one row per operator and step, times in µs, the busiest transport's
    size (MB) and bandwidth (GB/s)."""
    _require(con, path, TIME_TABLE, (*_OP_KEY, "start_timestamp", *_TIME_MS))
    _require(con, path, BANDWIDTH_TABLE, (*_OP_KEY, "transport_type", "transit_size", "bandwidth"))
    for table in (TIME_TABLE, BANDWIDTH_TABLE):
        for c in _OP_KEY:
            _check(con, path, table, c, _TEXT, "text")
        _check_step_key(con, path, table)
    _check(con, path, TIME_TABLE, "start_timestamp", _NUMBER_OR_NULL, "a number (µs) or NULL")
    for c in _TIME_MS:
        _check(con, path, TIME_TABLE, c, _NUMBER, "a number (ms)")
    _check_finite(con, path, TIME_TABLE, ["start_timestamp", *_TIME_MS])
    _check(con, path, BANDWIDTH_TABLE, "transport_type", _TEXT, "text")
    for c in ("transit_size", "bandwidth"):
        _check(con, path, BANDWIDTH_TABLE, c, _NUMBER, "a number")
    _check_finite(con, path, BANDWIDTH_TABLE, ["transit_size", "bandwidth"])

    # type '' marks torch_npu's own sum rows (names starting "total"), like "Total Op Info" in
    # the JSON, which read_communication leaves out too
    time = _read(con, path, TIME_TABLE, [*_OP_KEY, "start_timestamp", *_TIME_MS], where="type != ''")
    band = _read(con, path, BANDWIDTH_TABLE, [*_OP_KEY, "transport_type", "transit_size", "bandwidth"],
                 where="type != ''")
    key = list(_OP_KEY)
    # a transport has one row per packet size, its operator-level numbers repeated: keep the first.
    # The busiest transport is the first (rowid order = the JSON's order, in which msprof wrote
    # them) with the largest size > 0, as read_communication picks it
    band = band.drop_duplicates([*key, "transport_type"])
    band = band[band["transit_size"] > 0]
    top = band.loc[band.groupby(key, sort=False)["transit_size"].idxmax()] if len(band) else band
    top = top.rename(columns={"transport_type": "transport", "transit_size": "size_mb",
                              "bandwidth": "bandwidth_gbps"})
    joined = time.merge(top, on=key, how="left", sort=False, validate="many_to_one")
    ms = {c: joined[c].astype(np.float64) * 1000.0 for c in _TIME_MS}
    return pd.DataFrame({
        "step": _steps(joined["step"]),
        # lists, as the text readers build these columns: pandas infers the same dtype for both
        "kind": joined["type"].tolist(), "op": (joined["hccl_op_name"] + "@" + joined["group_name"]).tolist(),
        "start_us": joined["start_timestamp"].astype(np.float64),
        "elapse_us": ms["elapse_time"], "transit_us": ms["transit_time"], "wait_us": ms["wait_time"],
        "synchronization_us": ms["synchronization_time"], "idle_us": ms["idle_time"],
        "transport": joined["transport"].astype(object).where(joined["transport"].notna(), None),
        "size_mb": joined["size_mb"].fillna(0.0).astype(np.float64),
        "bandwidth_gbps": joined["bandwidth_gbps"].astype(np.float64),
    })


def read_db_communication_matrix(con: sqlite3.Connection, path: Path) -> pd.DataFrame:
    """CommAnalyzerMatrix as `read_communication_matrix` gives communication_matrix.json: one row
    per (step, operator, link), size (MB), transit time (µs), bandwidth (GB/s)."""
    numbers = ("transit_size", "transit_time", "bandwidth")
    _require(con, path, MATRIX_TABLE, (*_OP_KEY, "src_rank", "dst_rank", "transport_type", *numbers))
    for c in (*_OP_KEY, "transport_type"):
        _check(con, path, MATRIX_TABLE, c, _TEXT, "text")
    _check_step_key(con, path, MATRIX_TABLE)
    for c in ("src_rank", "dst_rank"):
        _check(con, path, MATRIX_TABLE, c, _RANK, "a rank id ('0')")
        _check_digits(con, path, MATRIX_TABLE, c, "a rank id ('0')", empty_ok=False)
    for c in numbers:
        _check(con, path, MATRIX_TABLE, c, _NUMBER, "a number")
    _check_finite(con, path, MATRIX_TABLE, list(numbers))
    named = "op_name" in _columns(con, path, MATRIX_TABLE)  # the collective a summary entry names
    if named:
        _check(con, path, MATRIX_TABLE, "op_name", (*_TEXT, "null"), "text")
    m = _read(con, path, MATRIX_TABLE,
              [*_OP_KEY, "src_rank", "dst_rank", "transport_type", *numbers, *(["op_name"] if named else [])],
              where="type != ''", casts={"src_rank": "INTEGER", "dst_rank": "INTEGER"})
    return pd.DataFrame({
        "step": _steps(m["step"]),
        "kind": m["type"].tolist(), "op": (m["hccl_op_name"] + "@" + m["group_name"]).tolist(),
        "src_rank": m["src_rank"].astype(np.int64), "dst_rank": m["dst_rank"].astype(np.int64),
        "transport": m["transport_type"].tolist(),
        "size_mb": m["transit_size"].astype(np.float64),
        "transit_us": 1000.0 * m["transit_time"].astype(np.float64),
        "bandwidth_gbps": m["bandwidth"].astype(np.float64),
        "collective": pd.Series([_collective(op, name) for op, name in zip(
            m["hccl_op_name"].tolist(), m["op_name"].tolist() if named else [None] * len(m), strict=True)
        ], dtype=object),
    })


def _collective(op: str, named: object) -> str | None:
    """As cluster_files reads a JSON entry: `op_name` where given, None for an aggregate
    (`allreduce-total`, op_name empty), else the operator's own name."""
    if isinstance(named, str) and named.strip():
        return named.strip()
    return None if AGGREGATE_KEY_RE.match(op) else op


# ---- helpers -----------------------------------------------------------------------------------


def _columns(con: sqlite3.Connection, path: Path, table: str) -> list[str]:
    try:
        return [r[1] for r in con.execute(f'PRAGMA table_info("{table}")')]
    except sqlite3.Error as exc:
        raise ProfileFormatError(path, f"table {table}", f"cannot read the table ({exc})") from None


def _require(con: sqlite3.Connection, path: Path, table: str, needed: tuple[str, ...]) -> list[str]:
    cols = _columns(con, path, table)
    if not cols:
        raise ProfileFormatError(path, None, f"expected a table {table} (torch_npu's export_type=db)")
    missing = [c for c in needed if c not in cols]
    if missing:
        raise ProfileFormatError(path, f"table {table}", f"expected columns {', '.join(missing)}")
    return cols


def _first(
    con: sqlite3.Connection, path: Path, table: str, column: str, cond: str
) -> tuple[object, object] | None:
    """(rowid, value) of the first row of `table` where `cond` holds, or None."""
    try:
        try:
            return con.execute(f'SELECT rowid, "{column}" FROM "{table}" WHERE {cond} LIMIT 1').fetchone()
        except sqlite3.OperationalError:  # a WITHOUT ROWID table or a view: no row number to give
            return con.execute(f'SELECT NULL, "{column}" FROM "{table}" WHERE {cond} LIMIT 1').fetchone()
    except sqlite3.Error as exc:
        raise ProfileFormatError(path, f"table {table}", f"cannot read the table ({exc})") from None


def _bad(path: Path, table: str, row: tuple[object, object], expected: str) -> ProfileFormatError:
    where = f"table {table}, rowid {row[0]}" if row[0] is not None else f"table {table}"
    return ProfileFormatError(path, where, expected)


def _check(
    con: sqlite3.Connection, path: Path, table: str, column: str, kinds: tuple[str, ...], meaning: str
) -> None:
    allowed = ", ".join(f"'{k}'" for k in kinds)
    row = _first(con, path, table, column, f'typeof("{column}") NOT IN ({allowed})')
    if row is not None:
        raise _bad(path, table, row, f"column {column} holds {describe_value(row[1])}; expected {meaning}")


def _check_finite(con: sqlite3.Connection, path: Path, table: str, columns: list[str]) -> None:
    """SQLite keeps ±inf as a real (1e999); the text readers refuse a non-finite number too."""
    for c in columns:
        row = _first(con, path, table, c, f'abs("{c}") > 1.7976931348623157e308')
        if row is not None:
            raise _bad(path, table, row, f"expected a finite number in column {c}, found {row[1]!r}")


def _check_digits(
    con: sqlite3.Connection, path: Path, table: str, column: str, meaning: str, empty_ok: bool
) -> None:
    """Text of digits only (around spaces) or a non-negative integer, as the text readers accept a
    CSV step ("2") and a link "SRC-DST"."""
    c = f'trim("{column}")'
    empty = "" if empty_ok else f" OR {c} = ''"
    cond = (f"(typeof(\"{column}\") = 'text' AND ({c} GLOB '*[^0-9]*'{empty}))"
            f" OR (typeof(\"{column}\") = 'integer' AND \"{column}\" < 0)")
    row = _first(con, path, table, column, cond)
    if row is not None:
        raise _bad(path, table, row, f"column {column} holds {describe_value(row[1])}; expected {meaning}")


def _check_step_key(con: sqlite3.Connection, path: Path, table: str) -> None:
    """`step` is "step2" / "step_2" (any case), or "step" for a run without step marks: the
    keys of the JSON files, which torch_npu writes here."""
    s = "lower(trim(step))"
    ok = (f"{s} = 'step' OR ({s} GLOB 'step[0-9]*' AND substr({s}, 5) NOT GLOB '*[^0-9]*')"
          f" OR ({s} GLOB 'step_[0-9]*' AND substr({s}, 6) NOT GLOB '*[^0-9]*')")
    row = _first(con, path, table, "step", f"NOT ({ok})")
    if row is not None:
        said = describe_value(row[1])
        raise _bad(path, table, row, f"column step holds {said}; expected a step like 'step2'")


def _read(
    con: sqlite3.Connection, path: Path, table: str, columns: list[str], where: str = "1",
    casts: dict[str, str] | None = None,
) -> pd.DataFrame:
    """The columns of `table` in rowid order (the order torch_npu inserted them: the text files'
    order), as one DataFrame."""
    casts = casts or {}
    exprs = ", ".join(f'CAST("{c}" AS {casts[c]}) AS "{c}"' if c in casts else f'"{c}"' for c in columns)
    sql = f'SELECT {exprs} FROM "{table}" WHERE {where} ORDER BY rowid'
    try:
        try:
            return query_frame(con, sql)
        except sqlite3.OperationalError:  # a WITHOUT ROWID table or a view: its own order
            return query_frame(con, sql.removesuffix(" ORDER BY rowid"))
    except sqlite3.Error as exc:
        raise ProfileFormatError(path, f"table {table}", f"cannot read the table ({exc})") from None


def _steps(raw: pd.Series) -> pd.Series:
    """"step2" -> 2 and "step" (a run without step marks) -> <NA>, as the JSON keys are read
    (the values were checked by _check_step_key)."""
    number = raw.astype("string").str.strip().str.extract(r"^step_?(\d+)$", flags=re.IGNORECASE, expand=False)
    return pd.to_numeric(number).astype("Int64")
