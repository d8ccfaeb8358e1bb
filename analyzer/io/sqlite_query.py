"""What every reader of a SQLite export shares: a query into a frame with the database's own error,
and a database value in a few words for a one-line refusal. Its own module so that the export's
readers (io.sqlite, io.sqlite_comm, io.analysis_db) import it without importing one another."""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pandas is imported where a frame is built
    import pandas as pd


def query_frame(con: sqlite3.Connection, sql: str) -> pd.DataFrame:
    """pd.read_sql_query, raising the sqlite3 error itself (pandas wraps it in its own
    DatabaseError with the whole statement), for read_sqlite to report in one line."""
    # deferred: pandas (~0.3 s) only when this builds a frame
    import pandas as pd

    try:
        return pd.read_sql_query(sql, con)
    except pd.errors.DatabaseError as exc:
        if isinstance(exc.__cause__, sqlite3.Error):
            raise exc.__cause__ from None
        raise


def describe_value(value: object) -> str:
    """A database value in a few words, on one line (file text is shown escaped and cut short)."""
    if value is None:
        return "NULL"
    if isinstance(value, bytes):
        return f"a {len(value)}-byte blob"
    if isinstance(value, str):
        return f"the text {value[:40]!r}"
    return f"the real number {value!r}"
