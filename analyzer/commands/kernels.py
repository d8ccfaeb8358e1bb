"""`tilescope kernels PATH`: the canonical per-kernel table as a terminal table, CSV, JSON or Parquet."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from analyzer.atomic import atomic_path
from analyzer.errors import UsageError

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa

FORMATS = ("table", "csv", "json", "parquet")
TABLE_COLUMNS = (
    "name",
    "op_type",
    "core_type",
    "duration_us",
    "block_dim",
    "mix_block_dim",
    "cube_utilization_pct",
    "aic_cube_ratio",
    "aiv_vec_ratio",
    "aic_mte2_ratio",
    "bound_pipe",
)
DEFAULT_TABLE_ROWS = 50


def kernels_arrow(df: pd.DataFrame) -> pa.Table:
    """DataFrame -> Arrow with NaN as null (from_pandas semantics) and exact int64 start_ns."""
    import pyarrow as pa

    return pa.Table.from_pandas(df.reset_index(drop=True), preserve_index=False)


def _pandas_schema(table: pa.Table) -> pa.Table:
    """An Arrow-built table with the schema `kernels_arrow` gives its DataFrame twin: large_string
    text and the pandas metadata (so pandas.read_parquet restores Int64 / str dtypes)."""
    import pyarrow as pa

    from analyzer.io.tables import to_frame

    large = [
        pa.field(f.name, pa.large_string()) if pa.types.is_string(f.type) else f for f in table.schema
    ]
    table = table.cast(pa.schema(large))
    empty = to_frame({n: table.column(n).slice(0, 0) for n in table.column_names}, 0)
    meta = pa.Schema.from_pandas(empty, preserve_index=False).metadata
    return table.replace_schema_metadata(meta)


def _json_default(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return str(value)


def _write_json(table: pa.Table, fh: Any) -> None:
    fh.write("[")
    first = True
    for batch in table.to_batches(max_chunksize=65536):
        for row in batch.to_pylist():
            for key, v in row.items():
                if isinstance(v, float) and not math.isfinite(v):
                    row[key] = None
            fh.write(("\n" if first else ",\n") + json.dumps(row, default=_json_default, ensure_ascii=False))
            first = False
    fh.write("\n]\n")


def _csv_table(table: pa.Table) -> pa.Table:
    # CSV has no nested type: the *_shape_list columns are dropped; the shape strings stay
    import pyarrow as pa

    keep = [n for n in table.column_names if not pa.types.is_list(table.schema.field(n).type)]
    return table.select(keep)


def write_kernels(table: pa.Table, fmt: str, out: Path | None) -> None:
    """Write the table in a machine format to `out` (atomically) or stdout."""
    import pyarrow as pa

    from analyzer.io.tables import decode_dictionary

    if fmt == "parquet":
        import pyarrow.parquet as pq

        assert out is not None
        with atomic_path(out) as tmp:
            # 128k-row groups: the writer buffers one row group, not the whole table. Dictionary
            # encoding only for text (repeated names/shapes); on float metrics it costs CPU and the
            # writer falls back to plain encoding anyway
            text = [
                f.name
                for f in table.schema
                if not pa.types.is_floating(f.type) and not pa.types.is_integer(f.type)
            ]
            # store_schema=False: text read back as plain strings even where the table held it
            # dictionary-encoded; the pandas metadata keeps the DataFrame dtypes. lz4: 0.63 s vs
            # zstd's 0.81 s CPU for 1 M rows, for a 63 MB instead of a 50 MB file
            pq.write_table(
                table,
                tmp,
                compression="lz4",
                row_group_size=1 << 17,
                use_dictionary=text,
                store_schema=False,
            )
        return
    table = pa.table({n: decode_dictionary(table.column(n)) for n in table.column_names})
    if fmt == "csv":
        import pyarrow.csv as pacsv

        if out is None:
            buf = pa.BufferOutputStream()
            pacsv.write_csv(_csv_table(table), buf)
            sys.stdout.write(buf.getvalue().to_pybytes().decode("utf-8"))
        else:
            with atomic_path(out) as tmp:
                pacsv.write_csv(_csv_table(table), tmp)
        return
    if out is None:
        _write_json(table, sys.stdout)
    else:
        with atomic_path(out) as tmp, open(tmp, "w", encoding="utf-8") as fh:
            _write_json(table, fh)


def _fmt(value: Any) -> str:
    import pandas as pd

    if value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NA:
        return "—"
    if isinstance(value, float):
        return f"{value:,.3f}" if abs(value) < 1e6 else f"{value:,.0f}"
    return str(value)


def render_table(df: pd.DataFrame, title: str, limit: int | None) -> None:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    n = len(df)
    shown = df.head(limit if limit is not None else DEFAULT_TABLE_ROWS)
    cols = [c for c in TABLE_COLUMNS if c in shown.columns and (c == "name" or shown[c].notna().any())]
    table = Table(title=title, title_justify="left")
    for c in cols:
        table.add_column(
            c,
            justify="left" if c in ("name", "op_type", "core_type", "bound_pipe") else "right",
            overflow="fold",
            max_width=48 if c == "name" else None,
        )
    for row in shown[cols].itertuples(index=False):
        table.add_row(*(Text(_fmt(v)) for v in row))  # Text(): kernel names are data, never markup
    console = Console()
    console.print(table)
    if len(shown) < n:
        console.print(f"showing {len(shown)} of {n} kernels (use --limit N or --format csv/json/parquet)")


def kernels_command(
    path: Annotated[Path, typer.Argument(help="Profiler output: directory, kernel_details.csv, .db, ...")],
    fmt: Annotated[str, typer.Option("--format", "-f", help="table | csv | json | parquet")] = "table",
    output: Annotated[Path | None, typer.Option("-o", "--output", help="Write to FILE (atomically)")] = None,
    chip: Annotated[str | None, typer.Option("--chip", help="Chip name (910B2, ...) or TOML file")] = None,
    limit: Annotated[int | None, typer.Option("--limit", min=0, help="Only the first N kernels")] = None,
) -> None:
    """List kernels with canonical columns and derived metrics.

    Example: tilescope kernels runs/fa-v1 --format json -o kernels.json
    """
    from analyzer.io.load import load_kernels_arrow, load_profiles

    if fmt not in FORMATS:
        raise UsageError(f"--format must be one of {', '.join(FORMATS)}, not {fmt!r}")
    if fmt == "parquet" and output is None:
        raise UsageError("--format parquet needs -o FILE (binary output is not written to a terminal)")
    if output is not None and fmt == "table":
        raise UsageError("-o needs a machine format: --format csv, json or parquet")
    if fmt != "table":
        # a single kernel CSV: Arrow from the reader to the writer, no DataFrame round trip
        table = load_kernels_arrow(path, chip=chip)
        if table is not None:
            table = _pandas_schema(table if limit is None else table.slice(0, limit))
            write_kernels(table, fmt, output)
            return
    import pandas as pd

    profiles = load_profiles(path, chip=chip, progress=True)
    frames = []
    for pr in profiles:
        k = pr.kernels
        if len(profiles) > 1:
            k = k.assign(rank=pr.rank)
        frames.append(k)
    df = frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True)
    if fmt == "table":
        render_table(df, f"{path} — {profiles[0].source.format}, chip {profiles[0].chip.name}", limit)
        return
    if limit is not None:
        df = df.head(limit)
    write_kernels(kernels_arrow(df), fmt, output)


def register(app: typer.Typer) -> None:
    app.command("kernels")(kernels_command)
