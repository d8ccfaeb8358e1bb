"""The boundary check: every reader's table against the canonical columns' documented ranges.

Readers convert a file's text to typed canonical columns; before any of it reaches a total, a
rule or a report, `check_columns` (Arrow, the CSV family: op_summary, kernel_details, `msprof op`)
or `check_frame` (pandas: SQLite, timelines) holds each numeric column to the range its unit
implies (docs/reliability.md lists them):

  durations and times (µs)      finite, 0 .. MAX_DURATION_US
  timestamps (ns)               0 .. the last ns whose end still fits in int64
  ratios                        0 .. 1 + RATIO_SLACK
  percentages                   0 .. 100 × (1 + RATIO_SLACK)
  cycles, counts, GB/s, KB, MHz finite, >= 0
  integer ids                   >= 0

A value outside is a ProfileFormatError naming the file, the row and the column (exit 2) under
`--strict`. Without it (#26 items 10-11) the readers leave it out with one counted note: the CSV
family through `check_columns(flagged=...)` and the row skipper (io.bad_rows), the pandas tables
(SQLite, timelines) through `screen_frame` — a start or duration outside its range makes the row
unreadable and skipped, any other value is made null and its row flagged in `out_of_range`.
Columns tilescope does not know are held to the range their name's unit implies (`*_ratio`,
`*_us`, `*_gbps`, ...) and are otherwise shown as written.

Text columns (names, op types, shapes, dtypes, unknown text) are held to one cap, MAX_TEXT_BYTES
per value, the same for every reader (docs/reliability.md §2): the CSV family here and in its
header (`csv_header.read_header`, and Python's csv module through `csv.field_size_limit`), SQLite
strings in SQL before any is read (`sqlite._check_text_sizes`), timeline names here.

The common case costs two Arrow reductions per column (min/max and a NaN test, or the longest
text: over a dictionary's values only); the row is looked up only when a column fails.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tilescope.columns import SPECS
from tilescope.errors import ProfileFormatError

if TYPE_CHECKING:
    import pandas as pd

# A kernel, a pipe's busy time or a wait longer than a day is not a measurement (the longest real
# task we have read is 0.5 s); the bound also keeps every start + duration inside int64 ns.
MAX_DURATION_US = 86_400e6
# msprof rounds ratios and times to 3 decimals and computes some ratios from rounded times, so a
# true 1.0 can be written as 1.001; 1 % of slack accepts that and nothing a real overload would give
RATIO_SLACK = 0.01
INT64_MAX = 2**63 - 1
_MAX_START_NS = INT64_MAX - int(MAX_DURATION_US * 1000)
# One cap on any one text value read from a profile: a kernel name, op type, shape, dtype list,
# header field or SQLite string. Real ones are a few hundred bytes (the longest shape list read:
# ~2 KB; generated kernel names ~5,000 characters); past 1 MiB a value is no name, and every copy
# of it (terminal, JSON, HTML, dashboard) multiplies it. Python's csv module holds fields to the
# same number (it counts characters: the byte check below is the one the error names).
MAX_TEXT_BYTES = 1 << 20
TEXT_EXPECTED = "at most 1 MiB of text (MAX_TEXT_BYTES)"
csv.field_size_limit(MAX_TEXT_BYTES)


@dataclass(frozen=True)
class Range:
    lo: float
    hi: float
    expected: str  # "a duration 0 .. 86,400 s in µs", as the error line says it


DURATION = Range(0.0, MAX_DURATION_US, "a duration in µs, 0 .. 8.64e10 (one day)")
TIMESTAMP = Range(0.0, float(_MAX_START_NS), "a timestamp in ns, 0 .. 9.2e18")
RATIO = Range(0.0, 1.0 + RATIO_SLACK, f"a ratio 0 .. {1 + RATIO_SLACK:g}")
PERCENT = Range(0.0, 100.0 * (1.0 + RATIO_SLACK), f"a percentage 0 .. {100 * (1 + RATIO_SLACK):g}")
NON_NEGATIVE = Range(0.0, math.inf, "a finite value >= 0")
ID = Range(0.0, float(INT64_MAX), "an integer >= 0")

_BY_UNIT: dict[str, Range] = {
    "us": DURATION,
    "ns": TIMESTAMP,
    "ratio": RATIO,
    "pct": PERCENT,
    "cycles": NON_NEGATIVE,
    "count": NON_NEGATIVE,
    "gbps": NON_NEGATIVE,
    "kb": NON_NEGATIVE,
    "mhz": NON_NEGATIVE,
}
# Columns the table does not list, by the unit their canonical name ends in (columns.generic_canonical
# moves units into the name): `aic_cube_fp16_ratio`, `aic_l1_read_gbps`, `aic_r0_read_cache_hit`, ...
_BY_SUFFIX: tuple[tuple[str, Range], ...] = (
    ("_ratio", RATIO),
    ("_rate", RATIO),
    ("_pct", PERCENT),
    ("_us", DURATION),
    ("_gbps", NON_NEGATIVE),
    ("_kb", NON_NEGATIVE),
    ("_mb", NON_NEGATIVE),
    ("_cycles", NON_NEGATIVE),
    ("_fops", NON_NEGATIVE),
    ("_instructions", NON_NEGATIVE),
    ("_number", NON_NEGATIVE),
    ("_hit", NON_NEGATIVE),
    ("_allocate", NON_NEGATIVE),
)
# `memory_bound` is mte2_ratio / max(mac_ratio, vec_ratio): a ratio of ratios, unbounded above
_UNBOUNDED_RATIOS = frozenset({"memory_bound"})


def range_of(name: str) -> Range | None:
    """The documented range of a canonical column, or None for text and unknown unitless columns."""
    if name in _UNBOUNDED_RATIOS:
        return NON_NEGATIVE
    spec = SPECS.get(name)
    if spec is not None:
        if spec.dtype == "string":
            return None
        if spec.unit in _BY_UNIT:
            return _BY_UNIT[spec.unit]
        return ID if spec.dtype == "Int64" else NON_NEGATIVE
    for suffix, rng in _BY_SUFFIX:
        if name.endswith(suffix):
            return rng
    return None


def csv_data_rows(fh: Iterable[str]) -> Iterator[tuple[int, int, list[str]]]:
    """(data row index from 0, the line it starts on, its fields) of an open CSV file, as Arrow
    counts rows: after the header, blank lines skipped; a quoted newline makes a row span lines."""
    reader = csv.reader(fh)
    last, index = 0, -1  # the header is row -1
    for row in reader:
        start, last = last + 1, reader.line_num
        if not row:
            continue
        if index >= 0:
            yield index, start, row
        index += 1


def csv_row(path: str | Path, index: int) -> str:
    """Where data row `index` (0-based) of a CSV file is: `row 3 (line 4)` with the line the row
    starts on. Error path only: reads the file up to that row."""
    line = index + 2  # one line per row, if the file cannot be read again
    try:
        with open(path, newline="", encoding="utf-8", errors="replace") as fh:
            line = next((start for i, start, _row in csv_data_rows(fh) if i == index), line)
    except (OSError, csv.Error):
        pass
    return f"row {index + 1} (line {line})"


def _first_bad(arr: pa.Array | pa.ChunkedArray, rng: Range, floating: bool) -> int | None:
    """Index of the first value outside `rng` (NaN and ±inf included), or None."""
    mm = pc.min_max(arr).as_py()  # NaN is skipped here, ±inf is not
    lo, hi = mm["min"], mm["max"]
    nan = floating and bool(pc.any(pc.is_nan(arr)).as_py())
    if lo is None or (not nan and rng.lo <= lo and hi <= rng.hi and math.isfinite(hi)):
        return None
    # integer bounds: a float scalar cannot compare with int64 beyond 2**53 (`_outside`)
    bad = _outside(arr, rng, floating)
    found = pc.index(pc.fill_null(bad, False), True).as_py()
    return int(found) if found is not None and found >= 0 else None


def _shown(value: object) -> str:
    if isinstance(value, float):
        return repr(value) if not math.isfinite(value) else f"{value:.6g}"
    return str(value)[:40]


# The columns every total rests on (device time, the timeline): a value outside is refused even
# where other columns' are flagged and left out (`check_columns(flagged=...)`)
REFUSED = frozenset({"start_ns", "duration_us"})
# the per-row flag: the columns whose value on that row was outside its range and is now null
FLAG_COLUMN = "out_of_range"


def check_columns(
    cols: dict[str, pa.Array | pa.ChunkedArray],
    path: str | Path,
    *,
    source_names: Mapping[str, str] | None = None,
    where: Callable[[int], str] | None = None,
    flagged: list[dict[str, Any]] | None = None,
) -> None:
    """Raise ProfileFormatError for the first value outside its column's range (see the module doc).

    `source_names` maps canonical names back to the file's header, so that the line names the
    column as the user sees it; `where` turns a row index into the error's location (by default
    the row and line of the CSV file `path`).

    With `flagged` (a kernel table read without `--strict`, issue #26) a value outside its range in
    any column but REFUSED is made null instead — left out of every sum and mean — its row named in
    the `out_of_range` column added to `cols`, and `flagged` gets one entry for the file: the count
    and the first such value (`flagged_entry`).
    """
    flags: list[pa.Array | pa.ChunkedArray] = []
    first: tuple[int, str] | None = None
    count = 0
    for name in list(cols):
        arr = cols[name]
        if len(arr) == 0:
            continue
        if is_text(arr.type):
            long = first_long_text(arr)
            if long is not None:
                column = (source_names or {}).get(name, name)
                at = where(long[0]) if where is not None else csv_row(path, long[0])
                raise ProfileFormatError(path, at, f"column {column!r}: expected {TEXT_EXPECTED}, "
                                                   f"found {long[1]:,} bytes")
            continue
        floating = pa.types.is_floating(arr.type)
        if not (floating or pa.types.is_integer(arr.type)):
            continue
        rng = range_of(name)
        if rng is None:
            continue
        row = _first_bad(arr, rng, floating)
        if row is None:
            continue
        column = (source_names or {}).get(name, name)
        said = f"column {column!r}: expected {rng.expected}, found {_shown(arr[row].as_py())}"
        if flagged is None or name in REFUSED:
            at = where(row) if where is not None else csv_row(path, row)
            raise ProfileFormatError(path, at, said)
        bad = pc.fill_null(_outside(arr, rng, floating), False)
        count += int(pc.sum(bad).as_py() or 0)
        cols[name] = pc.if_else(bad, pa.scalar(None, arr.type), arr)
        flags.append(pc.if_else(bad, pa.scalar(column), pa.scalar(None, pa.string())))
        if first is None or row < first[0]:
            first = (row, said)
    if flagged is not None and first is not None:
        at = where(first[0]) if where is not None else csv_row(path, first[0])
        names = flags[0]
        for more in flags[1:]:  # "a, b" where both were out; Arrow's own null skipping drops rows
            both = pc.binary_join_element_wise(names, more, ", ")
            names = pc.if_else(pc.is_null(names), more, pc.if_else(pc.is_null(more), names, both))
        cols[FLAG_COLUMN] = names
        flagged.append(flagged_entry(str(path), count, f"{at}: {first[1]}"))


def flagged_entry(path: str, count: int, first: str) -> dict[str, Any]:
    """{count, first, note}: the one warning for values left out of a file."""
    values = "1 value" if count == 1 else f"{count:,} values"
    note = (
        f"{values} outside {'its' if count == 1 else 'their'} documented range left out of every "
        f"sum and mean (first: {path}: {first}); rows flagged in column {FLAG_COLUMN!r}; "
        "--strict refuses the file"
    )
    return {"count": count, "first": f"{path}: {first}", "note": note}


def _outside(arr: pa.Array | pa.ChunkedArray, rng: Range, floating: bool) -> pa.Array | pa.ChunkedArray:
    """The values of `arr` outside `rng` (NaN and ±inf included for floats)."""
    if floating:
        return pc.or_(pc.or_(pc.less(arr, rng.lo), pc.greater(arr, rng.hi)), pc.invert(pc.is_finite(arr)))
    bad = pc.less(arr, pa.scalar(int(rng.lo), arr.type))
    if math.isfinite(rng.hi) and rng.hi < INT64_MAX:
        bad = pc.or_(bad, pc.greater(arr, pa.scalar(int(rng.hi), arr.type)))
    return bad


def is_text(t: pa.DataType) -> bool:
    if pa.types.is_dictionary(t):
        t = t.value_type
    return pa.types.is_string(t) or pa.types.is_large_string(t)


def first_long_text(arr: pa.Array | pa.ChunkedArray) -> tuple[int, int] | None:
    """(row, bytes) of the first value longer than MAX_TEXT_BYTES, or None. A dictionary chunk is
    measured on its values (its distinct texts) and its rows only when one is too long."""
    offset = 0
    for chunk in arr.chunks if isinstance(arr, pa.ChunkedArray) else [arr]:
        if pa.types.is_dictionary(chunk.type):
            lengths = pc.binary_length(chunk.dictionary)
            longest = pc.max(lengths).as_py() if len(lengths) else None
            too_long = longest is not None and longest > MAX_TEXT_BYTES
            per_row = pc.take(lengths, chunk.indices) if too_long else None
        else:
            per_row = pc.binary_length(chunk)
        if per_row is not None:
            longest = pc.max(per_row).as_py()
            if longest is not None and longest > MAX_TEXT_BYTES:
                row = pc.index(pc.fill_null(pc.greater(per_row, MAX_TEXT_BYTES), False), True).as_py()
                return offset + int(row), int(per_row[row].as_py())
        offset += len(chunk)
    return None


def check_frame(
    df: pd.DataFrame,
    path: str | Path,
    *,
    where: Callable[[int], str],
    columns: Mapping[str, str] | None = None,
) -> None:
    """`check_columns` for a pandas table (SQLite, timeline): its numeric and text columns, by
    position (text as Arrow: pandas' str columns are Arrow already, categoricals dictionaries)."""
    check_columns(_frame_columns(df), path, source_names=columns, where=where)


def _frame_columns(df: pd.DataFrame) -> dict[str, pa.Array | pa.ChunkedArray]:
    """A pandas table's numeric and text columns as Arrow, for `check_columns`."""
    # deferred: pandas (~0.3 s) only when this builds a frame
    import pandas as pd

    cols: dict[str, pa.Array | pa.ChunkedArray] = {}
    for name in df.columns:
        s = df[name]
        if not isinstance(name, str):
            continue
        if pd.api.types.is_numeric_dtype(s) and not pd.api.types.is_bool_dtype(s):
            cols[name] = pa.array(s, from_pandas=True)
        elif isinstance(s.dtype, pd.CategoricalDtype | pd.StringDtype) or s.dtype == object:
            try:
                arr = pa.array(s, from_pandas=True)
            except (pa.ArrowInvalid, pa.ArrowTypeError):  # mixed values: not a text column
                continue
            if is_text(arr.type):
                cols[name] = arr
    return cols


def screen_frame(
    df: pd.DataFrame,
    path: str | Path,
    *,
    where: Callable[[int], str],
    columns: Mapping[str, str] | None = None,
    strict: bool = False,
) -> tuple[pd.DataFrame, tuple[int, str, str] | None, dict[str, Any] | None]:
    """`check_frame` as the kernel tables are read (#26 items 10-11), for the readers of pandas
    tables (SQLite, timelines): without `--strict`, a row whose start or duration (REFUSED: every
    total rests on them) is outside its range is unreadable and skipped, a value outside its range
    in any other column is made null and its row flagged in `out_of_range`. Returns the table and
    what was left out: the unreadable rows as (count, where the first is, what it holds) — the
    note is `bad_rows.SkippedRows`', whose `screen_frame` callers use — and the values'
    `flagged_entry`; None where nothing was. Under `strict` (`--strict`), or when every row is
    unreadable, the first is refused as before (exit 2)."""
    # deferred: pandas (~0.3 s) only when this builds a frame
    import pandas as pd

    if strict or not len(df):
        check_frame(df, path, where=where, columns=columns)
        return df, None, None
    drop = np.zeros(len(df), dtype=bool)
    first: tuple[int, str] | None = None
    for name in (c for c in REFUSED if c in df.columns):
        s = df[name]
        if not pd.api.types.is_numeric_dtype(s):
            continue
        arr = pa.array(s, from_pandas=True)
        rng = range_of(name)
        if rng is None or _first_bad(arr, rng, pa.types.is_floating(arr.type)) is None:
            continue
        bad = np.asarray(pc.fill_null(_outside(arr, rng, pa.types.is_floating(arr.type)), False))
        row = int(np.flatnonzero(bad)[0])
        column = (columns or {}).get(name, name)
        if first is None or row < first[0]:
            first = (row, f"column {column!r}: expected {rng.expected}, found {_shown(arr[row].as_py())}")
        drop |= bad
    skipped = None
    if first is not None:
        if drop.all():  # nothing sound left to stand for the file
            check_frame(df, path, where=where, columns=columns)
        skipped = (int(drop.sum()), where(first[0]), first[1])
        df = df.loc[~drop].reset_index(drop=True)
    flagged: list[dict[str, Any]] = []
    cols = _frame_columns(df)
    check_columns(cols, path, source_names=columns, where=where, flagged=flagged)
    if not flagged:
        return df, skipped, None
    df = df.copy()
    for name, arr in cols.items():  # the values made null, and the flag column
        if name == FLAG_COLUMN:
            df[name] = pd.array(arr.to_pylist(), dtype="str")
        elif not is_text(arr.type) and arr.null_count != int(df[name].isna().sum()):
            df[name] = pd.array(arr.to_pylist(), dtype=df[name].dtype)
    return df, skipped, flagged[0]
