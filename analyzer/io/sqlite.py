"""SQLite exports: `msprof_*.db` and `ascend_pytorch_profiler*.db` (formats doc §8).

Kernels = COMPUTE_TASK_INFO joined with TASK (times in ns) and STRING_IDS (interned names), plus
TASK_PMU_INFO pivoted from long (task, metric, value) to wide with the raw metric names renamed to
the canonical ones (`aic_total_time` -> `aic_time_us`, times ns -> µs).
"""

from __future__ import annotations

import os
import re
import sqlite3
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # pandas is imported by the readers below, not at import
    import pandas as pd

from tilescope.columns import KERNEL_CONTRACT, metric_groups_of, sqlite_pmu_canonical
from tilescope.errors import ProfileFormatError
from tilescope.io.bad_rows import screen_frame
from tilescope.io.detect import SQLITE_MAGIC as _SQLITE_MAGIC
from tilescope.io.sqlite_comm import communication_rows
from tilescope.io.sqlite_query import describe_value, query_frame
from tilescope.io.validate import MAX_TEXT_BYTES, TEXT_EXPECTED

REQUIRED_TABLES = ("TASK", "COMPUTE_TASK_INFO", "STRING_IDS")
# The columns each table must have for the join below (TASK_PMU_INFO only when it is there).
REQUIRED_COLUMNS = {
    "TASK": ("globalTaskId", "startNs", "endNs"),
    "COMPUTE_TASK_INFO": ("globalTaskId",),
    "STRING_IDS": ("id", "value"),
    "TASK_PMU_INFO": ("globalTaskId", "name", "value"),
}
# Example: "ascend_pytorch_profiler_3.db" -> rank 3
RANK_DB_RE = re.compile(r"^ascend_pytorch_profiler_(?P<rank>\d+)\.db$")

# COMPUTE_TASK_INFO column -> canonical name; names may be interned in STRING_IDS or plain text
_TEXT_COLUMNS = {
    "name": "name",
    "opType": "op_type",
    "taskType": "core_type",
    "opState": "op_state",
    "inputShapes": "input_shapes",
    "inputDataTypes": "input_dtypes",
    "inputFormats": "input_formats",
    "outputShapes": "output_shapes",
    "outputDataTypes": "output_dtypes",
    "outputFormats": "output_formats",
    "hf32Eligible": "hf32_eligible",
}


@dataclass
class SqliteData:
    kernels: pd.DataFrame
    model_name: str | None = None
    cann_version: str | None = None
    rank: int | None = None
    files: list[Path] = field(default_factory=list)
    metric_groups: list[str] = field(default_factory=list)
    # what the boundary check left out ({count, first, note}, io.validate.screen_frame)
    rows_skipped: dict[str, Any] | None = None
    values_out_of_range: dict[str, Any] | None = None


def connect_readonly(path: Path) -> sqlite3.Connection:
    """`path` opened read-only after its magic bytes are checked (also analysis_db's opener)."""
    try:
        with open(path, "rb") as fh:
            magic = fh.read(16)
    except PermissionError as exc:
        raise ProfileFormatError(path, None, "cannot read file (permission denied)") from exc
    except OSError as exc:
        raise ProfileFormatError(path, None, f"cannot read file ({exc.strerror})") from exc
    if magic != _SQLITE_MAGIC:
        raise ProfileFormatError(path, "byte 0", "not an SQLite database (expected 'SQLite format 3')")
    try:
        return sqlite3.connect(_read_only_uri(path), uri=True)
    except sqlite3.Error as exc:
        raise ProfileFormatError(path, None, f"cannot open the SQLite database ({exc})") from None


def _read_only_uri(path: Path) -> str:
    """A `file:` URI that opens exactly `path`, read-only.

    Every byte of the absolute path but `/` is percent-encoded: in a URI `%41` is `A`, and `?` /
    `#` start the query / fragment, so `pct%41/x.db` would open `pctA/x.db` and `a?b/x.db` the
    file `a` (read-write, created empty). Encoding the bytes (not the str) keeps file names that
    are not UTF-8.
    `immutable=1` makes SQLite take no locks and create nothing: with `mode=ro` alone it still
    writes `-wal` and `-shm` files beside a WAL-mode database (msprof's exports are). It is left
    out when a journal next to the file has content: immutable would ignore that journal, whose
    committed rows a `-wal` holds until they are copied into the database; SQLite then reads it
    and needs (creates) the `-shm` index.
    """
    encoded = urllib.parse.quote(os.fsencode(path.absolute()), safe="/")
    params = "mode=ro" if _has_journal(path) else "mode=ro&immutable=1"
    return f"file://{encoded}?{params}"


def _has_journal(path: Path) -> bool:
    real = os.path.realpath(path)  # SQLite keeps the journal beside the file a symlink points to
    for suffix in ("-wal", "-journal"):
        try:
            if os.stat(f"{real}{suffix}").st_size > 0:
                return True
        except OSError:  # no such journal (or one we cannot see, which SQLite could not read either)
            continue
    return False


def _columns(con: sqlite3.Connection, table: str) -> list[str]:
    return [r[1] for r in con.execute(f"PRAGMA table_info({table})")]


def _scalar(con: sqlite3.Connection, sql: str) -> str | None:
    """An optional value (model, version, rank): None when its table lacks the column. A damaged
    database is not optional: its DatabaseError goes up to read_sqlite."""
    try:
        row = con.execute(sql).fetchone()
    except sqlite3.OperationalError:
        return None
    return str(row[0]) if row and row[0] is not None else None


def read_sqlite(path: Path) -> SqliteData:
    con = connect_readonly(path)
    try:
        return _read(con, path)
    except sqlite3.DatabaseError as exc:
        raise ProfileFormatError(path, None, f"unreadable SQLite database ({exc})") from exc
    except UnicodeDecodeError as exc:
        # Python's sqlite3 decodes SQLite's error messages and TEXT values as UTF-8: on a damaged
        # page either may quote garbage bytes (seen: the schema error of a corrupted sqlite_master)
        raise ProfileFormatError(
            path, None, "damaged SQLite database (it returned bytes that are not UTF-8 text)"
        ) from exc
    finally:
        con.close()


# TASK columns read as integers -> canonical name
_TASK_INTS = {
    "startNs": "start_ns",
    "deviceId": "device_id",
    "streamId": "stream_id",
    "taskId": "task_id",
    "contextId": "context_id",
    "modelId": "model_id",
}
# Result columns that must be an integer in every row; the other integer columns may be NULL.
_NOT_NULL = frozenset({"global_task_id", "start_ns", "duration_ns"})
# What an integer column means, for the message when it holds something else.
_INT_MEANING = {"globalTaskId": "an integer task id", "startNs": "an integer time in ns",
                "endNs": "an integer time in ns"}
# result column -> the (table, column)s it is computed from
IntSources = dict[str, tuple[tuple[str, str], ...]]


def _read(con: sqlite3.Connection, path: Path) -> SqliteData:
    # deferred: pandas (~0.3 s) only when this builds a frame
    import pandas as pd

    tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    missing = [t for t in REQUIRED_TABLES if t not in tables]
    if missing:
        raise ProfileFormatError(
            path,
            None,
            f"missing table(s) {', '.join(missing)}; expected an msprof / "
            "torch_npu profiler database with TASK, COMPUTE_TASK_INFO, STRING_IDS",
        )
    for table, needed in REQUIRED_COLUMNS.items():
        if table in tables:
            _require_columns(con, path, table, needed)
    ctcols = _columns(con, "COMPUTE_TASK_INFO")
    _check_text_sizes(con, path)
    sql, ints = _kernel_query(ctcols, _columns(con, "TASK"))
    k = query_frame(con, sql)
    _check_integers(con, path, k, ints)
    _check_join(con, path, len(k))
    k = _with_communication(k, communication_rows(con, path, tables))
    dur_ns = pd.to_numeric(k.pop("duration_ns"), errors="coerce").astype("Int64")
    k["duration_us"] = dur_ns.astype("float64") / 1000.0
    for col in ints:
        if col in k and col not in _NOT_NULL:  # nullable: Int64 (the others are int64 already)
            k[col] = pd.to_numeric(k[col], errors="coerce").astype("Int64")
    if "model_id" in k:
        k["model_id"] = k["model_id"].mask(k["model_id"] == 4294967295)
    for col in _TEXT_COLUMNS.values():
        if col in k:
            text = k[col].astype("str").str.strip('"')
            k[col] = text.where(~text.isin(["N/A", "NA", ""]))
    k = _add_wait(k, dur_ns)
    if "TASK_PMU_INFO" in tables:
        k = k.merge(_pmu_wide(con, path), left_on="global_task_id", right_index=True, how="left")
    for col in KERNEL_CONTRACT:
        if col not in k:
            k[col] = np.nan
    model = _scalar(con, "SELECT name FROM NPU_INFO LIMIT 1") if "NPU_INFO" in tables else None
    cann = None
    if "META_DATA" in tables:
        cann = _scalar(
            con, "SELECT value FROM META_DATA WHERE lower(name) LIKE '%cann%version%' LIMIT 1"
        ) or _scalar(con, "SELECT value FROM META_DATA WHERE lower(name) LIKE '%version%' LIMIT 1")
    m = RANK_DB_RE.match(path.name)
    rank = int(m.group("rank")) if m else None
    if rank is None and "RANK_DEVICE_MAP" in tables:
        r = _scalar(con, "SELECT rankId FROM RANK_DEVICE_MAP LIMIT 1")
        rank = int(r) if r is not None and r.lstrip("-").isdigit() and int(r) >= 0 else None
    k = k.reset_index(drop=True)
    # the boundary check every reader ends with (analyzer/io/validate.py), naming the task
    # without --strict, a task whose start or duration is outside its range is skipped and any
    # other value outside its range left out and flagged, each with one note (#26 items 10-11)
    checked = k
    k, skipped, out_of_range = screen_frame(k, path, where=lambda i: _row_name(checked, i), columns=_SOURCES)
    return SqliteData(k, model, cann, rank, [path], metric_groups_of(list(k.columns)), skipped, out_of_range)


def _with_communication(k: pd.DataFrame, comm: pd.DataFrame) -> pd.DataFrame:
    """The compute tasks and the collectives (tilescope.io.sqlite_comm) in start order, as the
    text export's kernel table holds both; a collective has no globalTaskId (<NA>)."""
    # deferred: pandas (~0.3 s) only when this builds a frame
    import pandas as pd

    if comm.empty:
        return k
    both = pd.concat([k, comm], ignore_index=True)
    both["global_task_id"] = both["global_task_id"].astype("Int64")
    both["start_ns"] = both["start_ns"].astype("int64")
    return both.sort_values("start_ns", kind="stable", ignore_index=True)


def _row_name(k: pd.DataFrame, i: int) -> str:
    """How the boundary check names row `i`: its task id, or the collective's name."""
    # deferred: pandas (~0.3 s) only when this builds a frame
    import pandas as pd

    task = k["global_task_id"].iloc[i]
    return f"collective {k['name'].iloc[i]!r}" if pd.isna(task) else f"task globalTaskId={task}"


# How the columns checked by the boundary check are spelled in the database, for the error line
_SOURCES = {"start_ns": "TASK.startNs", "duration_us": "TASK.endNs - TASK.startNs"}


def _require_columns(con: sqlite3.Connection, path: Path, table: str, needed: tuple[str, ...]) -> None:
    have = set(_columns(con, table))
    missing = [c for c in needed if c not in have]
    if missing:
        expected = f"missing column(s) {', '.join(missing)}; expected the columns {', '.join(needed)}"
        raise ProfileFormatError(path, f"table {table}", expected)


def _check_text_sizes(con: sqlite3.Connection, path: Path) -> None:
    """No interned string (STRING_IDS: every name, type and shape of the real exports) is longer
    than MAX_TEXT_BYTES, checked in SQL before any reaches Python: a 300 MB kernel name took 28 s
    and 3.8 GB to print, now 2 s and 0.45 GB to refuse. STRING_IDS holds each distinct text once,
    so the scan is short; the plain text some exports keep in COMPUTE_TASK_INFO is checked after
    the read (check_frame), since a scan of its millions of rows took 2.9 s per 2 M."""
    # length() counts characters (at most the bytes: a value over the cap in bytes but not in
    # characters, at most 4 MiB, is refused by check_frame after the read) and loads each value
    # once (selecting its length too loaded it twice; a CAST to BLOB copied it)
    row = con.execute(
        "SELECT id FROM STRING_IDS WHERE typeof(value) IN ('text', 'blob') "
        f"AND length(value) > {MAX_TEXT_BYTES} LIMIT 1"
    ).fetchone()
    if row is not None:
        raise ProfileFormatError(path, f"table STRING_IDS id={row[0]}",
                                 f"column value: expected {TEXT_EXPECTED}, found more")


def _kernel_query(ctcols: list[str], tcols: list[str]) -> tuple[str, IntSources]:
    """The kernel SELECT for these COMPUTE_TASK_INFO / TASK columns, and where each of its integer
    columns comes from (for `_check_integers`). Identifiers are ours, never the file's."""
    # old exports say blockDim/mixBlockDim, newer ones blockNum/mixBlockNum
    blocks = "blockNum" if "blockNum" in ctcols else "blockDim"
    mix = "mixBlockNum" if "mixBlockNum" in ctcols else "mixBlockDim"
    select = ["c.globalTaskId AS global_task_id"]
    ints: IntSources = {"global_task_id": (("COMPUTE_TASK_INFO", "globalTaskId"),)}
    joins = []
    for i, (src, canon) in enumerate(_TEXT_COLUMNS.items()):
        if src in ctcols:
            joins.append(f"LEFT JOIN STRING_IDS AS s{i} ON s{i}.id = c.{src}")
            select.append(f"COALESCE(s{i}.value, CAST(c.{src} AS TEXT)) AS {canon}")
    for src, canon in ((blocks, "block_dim"), (mix, "mix_block_dim")):
        if src in ctcols:
            select.append(f"c.{src} AS {canon}")
            ints[canon] = (("COMPUTE_TASK_INFO", src),)
    for src, canon in _TASK_INTS.items():
        if src in tcols:
            select.append(f"t.{src} AS {canon}")
            ints[canon] = (("TASK", src),)
    # NULL unless both ends are integers: SQLite would read text as 0 and subtract anyway
    select.append(
        "CASE WHEN typeof(t.startNs) = 'integer' AND typeof(t.endNs) = 'integer' "
        "THEN t.endNs - t.startNs END AS duration_ns"
    )
    ints["duration_ns"] = (("TASK", "startNs"), ("TASK", "endNs"))
    sql = (
        f"SELECT {', '.join(select)} FROM COMPUTE_TASK_INFO AS c "
        f"JOIN TASK AS t ON t.globalTaskId = c.globalTaskId {' '.join(joins)} ORDER BY t.startNs"
    )
    return sql, ints


def _check_integers(con: sqlite3.Connection, path: Path, k: pd.DataFrame, ints: IntSources) -> None:
    """Raise on the first row whose integer column holds text, a blob or a real, or NULL where a
    value is needed (ids and times; text would otherwise become NaN or a 0 in a subtraction).

    Free when the data is right: an all-integer column comes back as int64, and only a column
    that did not (a NULL, or anything but an integer) costs a scan to find the row."""
    # deferred: pandas (~0.3 s) only when this builds a frame
    import pandas as pd

    if k.empty:  # no row read (every column is `object` then); a dropped row is _check_join's
        return
    for col, sources in ints.items():
        if col not in k or pd.api.types.is_integer_dtype(k[col].dtype):
            continue
        for table, column in sources:
            _raise_non_integer(con, path, table, column, nullable=col not in _NOT_NULL)


def _check_join(con: sqlite3.Connection, path: Path, joined: int) -> None:
    """Compute tasks the join dropped may have ids of another type than TASK's (text never equals
    an integer): name the first such id rather than silently read fewer kernels."""
    total = con.execute("SELECT count(*) FROM COMPUTE_TASK_INFO").fetchone()[0]
    if joined < total:
        for table in ("COMPUTE_TASK_INFO", "TASK"):
            _raise_non_integer(con, path, table, "globalTaskId", nullable=True)


def _raise_non_integer(con: sqlite3.Connection, path: Path, table: str, column: str, nullable: bool) -> None:
    allowed = "('integer', 'null')" if nullable else "('integer')"
    cond = f"typeof({column}) NOT IN {allowed}"
    try:
        row = con.execute(f"SELECT rowid, {column} FROM {table} WHERE {cond} LIMIT 1").fetchone()
    except sqlite3.OperationalError:  # a WITHOUT ROWID table: no row number to give
        row = con.execute(f"SELECT NULL, {column} FROM {table} WHERE {cond} LIMIT 1").fetchone()
    if row is None:
        return
    where = f"table {table}, rowid {row[0]}" if row[0] is not None else f"table {table}"
    meaning = _INT_MEANING.get(column, "an integer or NULL")
    said = describe_value(row[1])
    raise ProfileFormatError(path, where, f"column {column} holds {said}; expected {meaning}")


def _add_wait(k: pd.DataFrame, dur_ns: pd.Series) -> pd.DataFrame:
    # deferred: pandas (~0.3 s) only when this builds a frame
    import pandas as pd

    """wait_us = gap between the previous task's end and this start on the same device and stream.

    Integer ns arithmetic: float64 cannot subtract two epoch-ns values exactly.
    """
    if not len(k):
        k["wait_us"] = pd.Series(dtype="float64")
        return k
    keys = [c for c in ("device_id", "stream_id") if c in k]
    start = k["start_ns"].astype("Int64")
    end = start + dur_ns
    prev_end = end.groupby([k[c] for c in keys], dropna=False).shift(1) if keys else end.shift(1)
    k["wait_us"] = ((start - prev_end).astype("float64") / 1000.0).clip(lower=0.0)
    return k


def _pmu_wide(con: sqlite3.Connection, path: Path) -> pd.DataFrame:
    # deferred: pandas (~0.3 s) only when this builds a frame
    import pandas as pd

    long = query_frame(
        con,
        "SELECT p.globalTaskId AS global_task_id, COALESCE(s.value, CAST(p.name AS TEXT)) AS metric, "
        "p.value AS value FROM TASK_PMU_INFO AS p LEFT JOIN STRING_IDS AS s ON s.id = p.name",
    )
    if long.empty:
        return pd.DataFrame()
    _check_integers(con, path, long, {"global_task_id": (("TASK_PMU_INFO", "globalTaskId"),)})
    raw = long["metric"].astype("str").unique()
    mapping = {r: sqlite_pmu_canonical(r) for r in raw}
    long["canon"] = long["metric"].map({r: c for r, (c, _) in mapping.items()})
    long["value"] = pd.to_numeric(long["value"], errors="coerce") * long["metric"].map(
        {r: s for r, (_, s) in mapping.items()}
    )
    wide = long.pivot_table(index="global_task_id", columns="canon", values="value", aggfunc="first")
    wide.columns.name = None
    return wide.astype("float64")
