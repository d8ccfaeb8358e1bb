"""The communication rows of an SQLite export (`ascend_pytorch_profiler_N.db`, `msprof_*.db`).

The text export's kernel table (`kernel_details.csv`) holds one `HCCL` row per collective
(`hcom_allReduce__586_0_1`, Type `hcom_allReduce_`, its whole span); the summary counts those rows as
communication and the time they cover as busy, not idle (docs/metrics.md §5.1). A database holds
the same collectives in two tables, neither of which the compute join (COMPUTE_TASK_INFO ⋈ TASK)
sees:
  COMMUNICATION_OP         one row per collective: opName, opType (STRING_IDS), startNs, endNs, opId
  COMMUNICATION_TASK_INFO  one row per HCCL task (Notify_Wait, Memcpy, Reduce_Inline …) with its
                           collective's name and opId; its times are TASK's (globalTaskId)
Every collective becomes one `HCCL` row, as in the text export: a COMMUNICATION_OP row as it is,
and the tasks of a collective COMMUNICATION_OP does not list (an msprof export of 2023 has tasks
and no operators) as the span from their first start to their last end. On the real torch_npu
export (`torch_2rank_pipeutil_db` rank 0) the 296 tasks all lie inside the 4 operators, whose union
is 102,108.1 µs, analysis.db's Communication, and idle becomes its Free, 25,258.144 µs.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING

from tilescope.errors import ProfileFormatError
from tilescope.io.sqlite_query import describe_value, query_frame

if TYPE_CHECKING:
    import pandas as pd

OP_TABLE = "COMMUNICATION_OP"
TASK_TABLE = "COMMUNICATION_TASK_INFO"
COMMUNICATION_CORE_TYPE = "HCCL"  # the text export's `Accelerator Core` of these rows
# The columns each table needs to give a row (the others are optional)
OP_COLUMNS = ("opName", "startNs", "endNs")
TASK_COLUMNS = ("name", "globalTaskId")

# ns difference only when both ends are integers (SQLite would subtract text as 0)
_DURATION = (
    "CASE WHEN typeof({a}.startNs) = 'integer' AND typeof({a}.endNs) = 'integer' "
    "THEN {a}.endNs - {a}.startNs END"
)


def communication_rows(con: sqlite3.Connection, path: Path, tables: set[str]) -> pd.DataFrame:
    """One row per collective (module docstring) with the compute query's columns: `name`,
    `op_type`, `core_type` ("HCCL"), `start_ns`, `duration_ns`, `device_id`, `stream_id`; empty
    when the export holds no communication. A collective whose start or end is not an integer is a
    ProfileFormatError naming the table and row."""
    # deferred: pandas (~0.3 s) only when this builds a frame
    import pandas as pd

    op_cols = _columns(con, OP_TABLE) if OP_TABLE in tables else []
    task_cols = _columns(con, TASK_TABLE) if TASK_TABLE in tables else []
    has_ops = all(c in op_cols for c in OP_COLUMNS)
    has_tasks = all(c in task_cols for c in TASK_COLUMNS)
    frames = []
    if has_ops:
        _check_times(con, path)
        frames.append(query_frame(con, _op_query(op_cols, task_cols if has_tasks else [])))
    if has_tasks:
        frames.append(query_frame(con, _task_query(task_cols, op_cols if has_ops else [])))
    frames = [f for f in frames if len(f)]
    if not frames:
        return pd.DataFrame()
    rows = pd.concat(frames, ignore_index=True)
    rows["core_type"] = COMMUNICATION_CORE_TYPE
    return rows


def _columns(con: sqlite3.Connection, table: str) -> list[str]:
    return [r[1] for r in con.execute(f"PRAGMA table_info({table})")]


def _check_times(con: sqlite3.Connection, path: Path) -> None:
    """A COMMUNICATION_OP row whose startNs or endNs is not an integer: one clear line."""
    for column in ("startNs", "endNs"):
        row = con.execute(
            f"SELECT rowid, {column} FROM {OP_TABLE} WHERE typeof({column}) != 'integer' LIMIT 1"
        ).fetchone()
        if row is not None:
            expected = f"column {column} holds {describe_value(row[1])}; expected an integer time in ns"
            raise ProfileFormatError(path, f"table {OP_TABLE}, rowid {row[0]}", expected)


def _stream_of_ops(task_cols: list[str]) -> str:
    """A sub-query giving each opId the device and stream its tasks ran on (TASK's)."""
    return (
        f"LEFT JOIN (SELECT c.opId AS op_id, MIN(t.deviceId) AS device_id, MIN(t.streamId) AS stream_id "
        f"FROM {TASK_TABLE} AS c JOIN TASK AS t ON t.globalTaskId = c.globalTaskId GROUP BY c.opId) "
        "AS q ON q.op_id = o.opId"
        if "opId" in task_cols
        else ""
    )


def _op_query(op_cols: list[str], task_cols: list[str]) -> str:
    """COMMUNICATION_OP's rows, names resolved through STRING_IDS; device and stream from the
    operator's tasks where both tables carry opId."""
    linked = "opId" in op_cols and "opId" in task_cols
    # msprof's default for an unknown type is -1, which names nothing
    op_type = (
        "CASE WHEN o.opType IS NULL OR o.opType < 0 THEN NULL "
        "ELSE COALESCE(ty.value, CAST(o.opType AS TEXT)) END"
        if "opType" in op_cols
        else "NULL"
    )
    type_join = "LEFT JOIN STRING_IDS AS ty ON ty.id = o.opType" if "opType" in op_cols else ""
    return (
        "SELECT COALESCE(s.value, CAST(o.opName AS TEXT)) AS name, "
        f"{op_type} AS op_type, o.startNs AS start_ns, {_DURATION.format(a='o')} AS duration_ns, "
        f"{'q.device_id' if linked else 'NULL'} AS device_id, "
        f"{'q.stream_id' if linked else 'NULL'} AS stream_id "
        f"FROM {OP_TABLE} AS o LEFT JOIN STRING_IDS AS s ON s.id = o.opName {type_join} "
        f"{_stream_of_ops(task_cols) if linked else ''}"
    )


def _task_query(task_cols: list[str], op_cols: list[str]) -> str:
    """The collectives COMMUNICATION_OP does not list, from their tasks: first start to last end.
    A collective is its opId where the table has one, else its name; tasks whose TASK row is
    missing or has no integer times give nothing (they cannot be placed)."""
    key = "c.opId" if "opId" in task_cols else "c.name"
    listed = ""
    if op_cols:
        listed = (
            f"AND c.opId NOT IN (SELECT opId FROM {OP_TABLE} WHERE opId IS NOT NULL)"
            if "opId" in task_cols and "opId" in op_cols
            else f"AND c.name NOT IN (SELECT opName FROM {OP_TABLE} WHERE opName IS NOT NULL)"
        )
    return (
        "SELECT COALESCE(s.value, CAST(c.name AS TEXT)) AS name, NULL AS op_type, "
        "MIN(t.startNs) AS start_ns, MAX(t.endNs) - MIN(t.startNs) AS duration_ns, "
        "MIN(t.deviceId) AS device_id, MIN(t.streamId) AS stream_id "
        f"FROM {TASK_TABLE} AS c JOIN TASK AS t ON t.globalTaskId = c.globalTaskId "
        "LEFT JOIN STRING_IDS AS s ON s.id = c.name "
        f"WHERE typeof(t.startNs) = 'integer' AND typeof(t.endNs) = 'integer' {listed} "
        f"GROUP BY {key}, c.name"
    )
