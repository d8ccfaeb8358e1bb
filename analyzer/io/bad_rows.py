"""Unreadable rows of a kernel table: skipped with one note, or the file refused under `--strict`.

A profiler table with one short row (a field missing: the row has 31 of the header's 32 fields)
is one bad row among thousands; refusing the whole file drops a rank of a multi-rank run and turns
CI red over a row. By default the CSV reader skips such rows (Arrow's `invalid_row_handler`: called
once per bad row, never per good one) and the profile carries one note that counts them and names
the first (file, row, line, what was expected), shown in every report format and counted in the
JSON (`profiles[].rows_skipped`). `--strict` (`strict_rows`) refuses the file instead: exit 2 with
the same row named, as before.

The choice travels in the environment (`TILESCOPE_STRICT`), as `--debug` does, so that per-rank
worker processes read their ranks the same way, and the rank cache keys on it.
"""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tilescope.errors import ProfileFormatError

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa

STRICT_ENV = "TILESCOPE_STRICT"
# the Arrow table metadata key that carries what a read skipped up to the reader that builds the
# profile (the table passes through several helpers that need not know)
METADATA_KEY = b"tilescope.rows_skipped"
# the same for values outside their range made null (io.validate.check_columns)
OUT_OF_RANGE_KEY = b"tilescope.values_out_of_range"


def strict() -> bool:
    """Whether unreadable rows refuse their file (`--strict`)."""
    return os.environ.get(STRICT_ENV) == "1"


@contextmanager
def strict_rows(enabled: bool) -> Iterator[None]:
    """`--strict` for the duration of one command (restored after: commands run in-process in tests)."""
    before = os.environ.get(STRICT_ENV)
    # set either way: a forkserver's worker keeps the environment of the command that started it
    if enabled:
        os.environ[STRICT_ENV] = "1"
    else:
        os.environ.pop(STRICT_ENV, None)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(STRICT_ENV, None)
        else:
            os.environ[STRICT_ENV] = before


@dataclass(frozen=True)
class SkippedRows:
    """What one read of one file skipped: how many rows, and where the first one is."""

    path: str
    count: int
    where: str | None  # "row 16 (line 17)"
    expected: str  # "expected 32 fields as in the header, found 31"

    @property
    def first(self) -> str:
        where = f"{self.where}: " if self.where else ""
        return f"{self.path}: {where}{self.expected}"

    def note(self) -> str:
        """The one warning: how many rows, the first of them, and how to refuse instead."""
        rows = "1 unreadable row" if self.count == 1 else f"{self.count:,} unreadable rows"
        return f"{rows} skipped (first: {self.first}); --strict refuses the file"

    def to_dict(self) -> dict[str, Any]:
        return {"count": self.count, "first": self.first, "note": self.note()}


class RowSkipper:
    """Arrow's `invalid_row_handler`: counts the rows with the wrong number of fields and skips them
    (refuses them under `--strict`). One instance per read attempt."""

    def __init__(self) -> None:
        self.count = 0
        self.refuse = strict()

    def __call__(self, row: Any) -> str:
        if self.refuse:
            return "error"
        self.count += 1
        return "skip"

    def skipped(self, path: Path, n_fields: int) -> SkippedRows | None:
        if not self.count:
            return None
        return SkippedRows(str(path), self.count, *first_bad_row(path, n_fields))


def first_bad_row(path: Path, n_fields: int) -> tuple[str | None, str]:
    """Where the first row whose field count differs from the header's is, and what it holds.

    Walks the file with the csv module (C code, ~100 MB/s): it runs once, only for a file that has
    a bad row; Arrow's threaded reader does not know the row numbers of the rows it skipped."""
    # deferred: io.validate (pyarrow) imports this module's neighbours; only the slow path needs it
    from tilescope.io.validate import csv_data_rows

    try:
        with open(path, newline="", encoding="utf-8", errors="replace") as fh:
            for i, first_line, row in csv_data_rows(fh):
                if len(row) != n_fields:
                    where = f"row {i + 1} (line {first_line})"
                    return where, f"expected {n_fields} fields as in the header, found {len(row)}"
    except (OSError, csv.Error):
        pass
    return None, f"expected {n_fields} fields as in the header"


def with_skipped(table: pa.Table, skipper: RowSkipper, path: Path, n_fields: int) -> pa.Table:
    """`table` with what `skipper` skipped in its metadata; a file with more unreadable rows than
    readable ones is refused: the rest is not sound enough to stand for the file."""
    skipped = skipper.skipped(path, n_fields)
    if skipped is None:
        return table
    if skipped.count >= table.num_rows:
        total = skipped.count + table.num_rows
        raise ProfileFormatError(
            path, skipped.where, f"{skipped.expected} ({skipped.count:,} of {total:,} rows unreadable)"
        )
    return with_skip_metadata(table, skipped.to_dict())


def with_skip_metadata(
    table: pa.Table, skipped: dict[str, Any] | None, key: bytes = METADATA_KEY
) -> pa.Table:
    """`table` carrying `skipped` ({"count", "first", "note"}) in its schema metadata under `key`."""
    if skipped is None:
        return table
    meta = {**(table.schema.metadata or {}), key: json.dumps(skipped).encode()}
    return table.replace_schema_metadata(meta)


def table_notes(table: pa.Table) -> list[str]:
    """The notes a kernel table's metadata carries: unreadable rows skipped, values left out."""
    meta = table.schema.metadata or {}
    return [json.loads(meta[k])["note"] for k in (METADATA_KEY, OUT_OF_RANGE_KEY) if k in meta]


def skipped_rows(table: pa.Table) -> dict[str, Any] | None:
    """What `read_csv_strings(skip_bad_rows=True)` skipped reading `table`: {"count", "first"}."""
    raw = (table.schema.metadata or {}).get(METADATA_KEY)
    return json.loads(raw) if raw else None


def screen_frame(
    df: pd.DataFrame, path: Path, *, where: Callable[[int], str], columns: Mapping[str, str] | None = None
) -> tuple[pd.DataFrame, dict[str, Any] | None, dict[str, Any] | None]:
    """A pandas table (SQLite, timeline) read as the kernel tables are (`validate.screen_frame`):
    the table less its unreadable rows, their entry ({count, first, note}: `SkippedRows`) and the
    entry of the values left out; `--strict` refuses instead."""
    # deferred: io.validate (pyarrow) imports this module's neighbours; only these readers need it
    from tilescope.io import validate

    kept, unreadable, flagged = validate.screen_frame(df, path, where=where, columns=columns, strict=strict())
    skipped = SkippedRows(str(path), *unreadable).to_dict() if unreadable is not None else None
    return kept, skipped, flagged
