"""Per-kernel tables: msprof `op_summary_*.csv` and torch_npu `kernel_details.csv` (formats doc §3).

The producer is detected from the header row, never from the file name: kernel_details renames six
op_summary columns (`Name`, `Type`, `Accelerator Core`, `Start Time(us)`, ...).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

if TYPE_CHECKING:
    import pandas as pd

from tilescope.columns import KERNEL_CONTRACT, canonical_header, is_coupled_header, metric_groups_of
from tilescope.errors import ProfileFormatError
from tilescope.io.bad_rows import OUT_OF_RANGE_KEY, skipped_rows, strict, with_skip_metadata
from tilescope.io.detect import OP_SUMMARY_RE, detect_producer
from tilescope.io.tables import (
    arrow_type_of,
    convert_columns,
    null_unused_side_arrow,
    numeric_columns,
    read_csv_strings,
    read_header,
    to_frame,
)
from tilescope.io.validate import FLAG_COLUMN

REQUIRED = ("name", "start_ns", "duration_us")



@dataclass
class KernelTable:
    kernels: pd.DataFrame
    producer: str  # "torch_npu" | "msprof"
    files: list[Path]
    metric_groups: list[str] = field(default_factory=list)
    coupled: bool = False
    # unreadable rows skipped (tilescope.io.bad_rows): {"count", "first", "note"}, None when none
    rows_skipped: dict[str, Any] | None = None
    # values outside their documented range, made null and flagged (io.validate.check_columns)
    values_out_of_range: dict[str, Any] | None = None


def slice_order(paths: list[Path]) -> list[Path]:
    """Sort op_summary slices: the unsliced file first, then `_<n>` / `slice_<n>` by n."""

    def key(p: Path) -> tuple[int, int, str]:
        m = OP_SUMMARY_RE.match(p.name)
        if not m:
            return (2, 0, p.name)
        if m.group("slice"):
            return (1, int(m.group("a")), p.name)
        return (0 if m.group("b") is None else 1, int(m.group("b") or 0), p.name)

    return sorted(paths, key=key)


def check_header(path: Path, header: list[str], canonical: list[str]) -> str:
    """The producer of a kernel table header; a typed error when it is not one or lacks a column."""
    producer = detect_producer(header)
    if producer is None:
        raise ProfileFormatError(
            path,
            "line 1",
            "expected an op_summary / kernel_details header "
            "(columns 'Op Name'/'Name', 'Task Start Time(us)'/'Start Time(us)', ...)",
        )
    for req in REQUIRED:
        if req not in canonical:
            src = {
                "name": "Name / Op Name",
                "start_ns": "Start Time(us) / Task Start Time(us) / Task Start Time",
                "duration_us": "Duration(us) / Task Duration(us)",
            }[req]
            raise ProfileFormatError(path, "line 1", f"missing required column {src!r}")
    return producer


def _read_arrow(
    path: Path, skipped: list[dict[str, Any]], flagged: list[dict[str, Any]]
) -> tuple[dict[str, pa.Array | pa.ChunkedArray], int, str, bool]:
    header = read_header(path)
    canonical = canonical_header(header)
    producer = check_header(path, header, canonical)
    header, raw = read_csv_strings(path, header, numeric_columns(canonical), skip_bad_rows=True)
    if (said := skipped_rows(raw)) is not None:
        skipped.append(said)
    # a value outside its range is flagged and left out, or under --strict refused
    cols = convert_columns(path, header, raw, canonical=canonical, flagged=None if strict() else flagged)
    return cols, raw.num_rows, producer, is_coupled_header(header)


def merged_skips(skipped: list[dict[str, Any]], what: str = "unreadable rows") -> dict[str, Any] | None:
    """The entries of several files (slices) as one: their count, the first file's first."""
    if not skipped:
        return None
    count = sum(int(s["count"]) for s in skipped)
    first = skipped[0]
    note = first["note"]
    if len(skipped) > 1:
        note = f"{count:,} {what} in {len(skipped)} files; {note}"
    return {"count": count, "first": first["first"], "note": note}


def _read_columns(
    paths: Path | list[Path], skipped: list[dict[str, Any]], flagged: list[dict[str, Any]]
) -> tuple[dict[str, pa.Array | pa.ChunkedArray], int, str, list[Path], bool]:
    """Cleaned, typed Arrow columns of one kernel table or its slices (unused-side zeros nulled);
    what each file's read skipped is appended to `skipped`, its values out of range to `flagged`."""
    files = slice_order(list(paths)) if isinstance(paths, list) else [paths]
    parts = [_read_arrow(p, skipped, flagged) for p in files]
    # the flag column exists where a value was out of range: not a difference between slices
    _check_same_columns(files, [[c for c in p[0] if c != FLAG_COLUMN] for p in parts])
    producers = {p[2] for p in parts}
    if len(parts) == 1:
        cols, n, producer, coupled = parts[0]
    else:
        tables = [pa.table(p[0]) for p in parts]
        merged = pa.concat_tables(tables, promote_options="permissive")
        cols = {name: merged.column(name) for name in merged.column_names}
        n, producer, coupled = merged.num_rows, sorted(producers)[0], any(p[3] for p in parts)
        del tables, merged
    parts.clear()  # drop our references so to_frame can release the Arrow buffers as it converts
    null_unused_side_arrow(cols)
    return cols, n, producer, files, coupled


def _check_same_columns(files: list[Path], columns: list[list[str]]) -> None:
    """Slices of one op_summary carry one header: slices with different metric groups are two
    collections, and concatenating them would leave each group's columns null on half the rows."""
    first = set(columns[0])
    for path, cols in zip(files[1:], columns[1:], strict=True):
        if set(cols) != first:
            extra = sorted(set(cols) - first) or sorted(first - set(cols))
            raise ProfileFormatError(
                path,
                "line 1",
                f"columns differ from {files[0].name} ({', '.join(extra[:3])}"
                f"{', ...' if len(extra) > 3 else ''}); "
                "expected the slices of one op_summary, with one header",
            )


def read_kernel_table(paths: Path | list[Path]) -> KernelTable:
    """Read one kernel table, or several slices of one (concatenated in slice order)."""
    skipped: list[dict[str, Any]] = []
    flagged: list[dict[str, Any]] = []
    cols, n, producer, files, coupled = _read_columns(paths, skipped, flagged)
    df = to_frame(cols, n, ensure=KERNEL_CONTRACT)
    groups = metric_groups_of(list(df.columns))
    out_of_range = merged_skips(flagged, "values out of range")
    return KernelTable(df, producer, files, groups, coupled, merged_skips(skipped), out_of_range)


def read_kernel_arrow(paths: Path | list[Path]) -> tuple[pa.Table, str, list[Path]]:
    """The same table as `read_kernel_table` kept in Arrow (for file output without pandas).

    Same columns in the same order and the same values; text columns stay `string` and absent
    contract columns are all-null of their declared type. Unreadable rows skipped are in the
    table's metadata (`tilescope.io.bad_rows.skipped_rows`).
    """
    skipped: list[dict[str, Any]] = []
    flagged: list[dict[str, Any]] = []
    cols, n, producer, files, _ = _read_columns(paths, skipped, flagged)
    table = with_skip_metadata(contract_table(cols, n), merged_skips(skipped))
    out_of_range = merged_skips(flagged, "values out of range")
    return with_skip_metadata(table, out_of_range, OUT_OF_RANGE_KEY), producer, files


def contract_table(cols: dict[str, pa.Array | pa.ChunkedArray], n_rows: int) -> pa.Table:
    """Converted kernel columns as one table, absent contract columns added all-null of their
    declared type (the Arrow twin of `to_frame(..., ensure=KERNEL_CONTRACT)`). Consumes `cols`."""
    for name in KERNEL_CONTRACT:
        if name not in cols:
            cols[name] = pa.nulls(n_rows, arrow_type_of(name))
    table = pa.table(cols) if cols else pa.table({})
    cols.clear()
    return table
