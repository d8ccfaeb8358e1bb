"""`tilescope kernels PATH`: the canonical per-kernel table as a terminal table, CSV, JSON or Parquet."""

from __future__ import annotations

import contextlib
import json
import math
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.cells import cell_len

from tilescope.atomic import atomic_path
from tilescope.commands import CHIP_HELP, STRICT_HELP, honours_strict
from tilescope.errors import UsageError
from tilescope.text.escape import terminal_text
from tilescope.text.terminal import WIDTH_HELP, output_width
from tilescope.text.terminal import console as make_console

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa

    from tilescope.io.load import KernelCsv
    from tilescope.profile import DeviceInfo

FORMATS = ("table", "csv", "json", "parquet")
# The terminal view: launch shares (0-1 of the launch in the data, docs/metrics.md; printed as per
# cent, as analyze prints them) and the achieved share of the speed of light; the profiler's own
# ratios and utilisation are in the csv/json/parquet outputs. `rank` only for several ranks.
TABLE_COLUMNS = (
    "rank",
    "name",
    "op_type",
    "core_type",
    "duration_us",
    "block_dim",
    "mix_block_dim",
    "cube_share",
    "vector_share",
    "bound_pipe",
    "sol_pct",
    "sol_bound",
)
DEFAULT_TABLE_ROWS = 50


def kernels_arrow(df: pd.DataFrame) -> pa.Table:
    """DataFrame -> Arrow with NaN as null (from_pandas semantics) and exact int64 start_ns."""
    # deferred: pyarrow (~0.25 s) only where used; `tilescope --help` imports every command module
    import pyarrow as pa

    return pa.Table.from_pandas(df.reset_index(drop=True), preserve_index=False)


def _write_json(table: pa.Table, fh: Any) -> None:
    fh.write("[")
    first = True
    for batch in table.to_batches(max_chunksize=65536):
        for row in batch.to_pylist():
            for key, v in row.items():  # json.dumps writes NaN/Infinity, which is not JSON
                if isinstance(v, float) and not math.isfinite(v):
                    row[key] = None
            fh.write(("\n" if first else ",\n") + json.dumps(row, default=str, ensure_ascii=False))
            first = False
    fh.write("\n]\n")


def write_kernels(table: pa.Table, fmt: str, out: Path | None) -> None:
    """Write the table in a machine format to `out` (atomically) or stdout."""
    # deferred: pyarrow (~0.25 s) only where used; `tilescope --help` imports every command module
    import pyarrow as pa

    if out is not None and fmt in ("parquet", "csv"):
        with atomic_path(out) as tmp:
            _write_whole(table, fmt, tmp)
        return
    # deferred: io.kernel_sink and io.tables (pyarrow) only where used; `tilescope --help` imports every
    #   command module
    from tilescope.io.kernel_sink import csv_table
    from tilescope.io.tables import decode_dictionary

    if fmt == "csv":
        # deferred: pyarrow (~0.25 s) only where used; `tilescope --help` imports every command module
        import pyarrow.csv as pacsv

        buf = pa.BufferOutputStream()
        pacsv.write_csv(csv_table(table), buf)  # decodes and neutralises the text columns
        sys.stdout.write(buf.getvalue().to_pybytes().decode("utf-8"))
        return
    table = pa.table({n: decode_dictionary(table.column(n)) for n in table.column_names})
    if out is None:
        _write_json(table, sys.stdout)
    else:
        with atomic_path(out) as tmp, open(tmp, "w", encoding="utf-8") as fh:
            _write_json(table, fh)


def _write_whole(table: pa.Table, fmt: str, tmp: Path) -> None:
    # deferred: io.kernel_sink (pyarrow) only where used; `tilescope --help` imports every command module
    from tilescope.io.kernel_sink import TableSink, csv_table, pandas_metadata

    sink = TableSink(fmt, tmp)
    if table.num_rows:
        sink(table)
        sink.close()
    elif fmt == "parquet":  # no rows: the schema alone (a writer opens on the first table)
        # deferred: pyarrow (~0.25 s) only where used; `tilescope --help` imports every command module
        import pyarrow.parquet as pq

        pq.write_table(
            table.replace_schema_metadata({"pandas": pandas_metadata(table.schema)}), tmp, store_schema=False
        )
    else:
        # deferred: pyarrow (~0.25 s) only where used; `tilescope --help` imports every command module
        import pyarrow.csv as pacsv

        pacsv.write_csv(csv_table(table), tmp)


@contextlib.contextmanager
def _read_progress(name: str) -> Iterator[Callable[[int, int], None] | None]:
    """A byte-count progress bar for a streamed parse on stderr, only when stderr is a terminal."""
    if not sys.stderr.isatty():
        yield None
        return
    # deferred: rich.console, rich.progress only for terminal output; `tilescope --help` imports every command
    #   module
    from rich.console import Console
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn

    # the description is the file's name: printed as text (markup=False), controls made visible
    columns = (
        TextColumn("{task.description}", markup=False), BarColumn(), DownloadColumn(), TimeRemainingColumn()
    )
    with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task(f"reading {terminal_text(name)}", total=None)

        def update(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        yield update


def stream_kernels(
    csv_path: Path, fmt: str, out: Path, chip: str | None, device: DeviceInfo | None = None
) -> None:
    """One kernel CSV to a Parquet/CSV file through the overlapping pipeline of
    `tilescope.io.kernel_stream`, or the whole-file way when the pipeline declines the file;
    `device`: the facts recorded beside the file (`tilescope.io.load.KernelCsv`)."""
    # deferred: io.kernel_sink and io.kernel_stream (pyarrow) only where used; io.load only when this command
    #   runs; `tilescope --help` imports every command module
    from tilescope.io.bad_rows import table_notes
    from tilescope.io.kernel_sink import TableSink, large_strings
    from tilescope.io.kernel_stream import StreamFallback, stream_kernel_csv
    from tilescope.io.load import load_kernels_arrow

    with atomic_path(out) as tmp, _read_progress(csv_path.name) as progress:
        sink = TableSink(fmt, tmp)
        try:
            # one parser: encoding the file keeps the second core busy (docs/benchmarks.md)
            stream_kernel_csv(
                csv_path, chip, sink, large_strings, progress=progress, parsers=1, device=device
            )
            sink.close()
            return
        except StreamFallback:
            sink.close()  # half a file: overwritten below
        table = load_kernels_arrow(csv_path, chip=chip, device=device)
        _say_notes(table_notes(table))
        _write_whole(large_strings(table), fmt, tmp)


def _say_skipped(skipped: dict[str, Any] | None) -> None:
    """The note on a kernel table's skipped rows or values, on stderr: a file output has no place
    for it."""
    if skipped is not None:
        _say_notes([skipped["note"]])


def _say_notes(notes: list[str]) -> None:
    for note in notes:
        typer.echo(f"tilescope: warning: {note}", err=True)


class _TableView:
    """The terminal view's sink: keeps the first rows and renders them as soon as it has them, on
    the stream's writer thread (idle in this view) while the parse goes on; the count of all rows
    is printed under it at the end. The chip in the title is the first group's, which the stream
    confirms on all rows (or falls back, and this rendering is dropped)."""

    def __init__(self, rows: int, console: Any, label: str, source_format: str, width: int | None) -> None:
        # deferred: io.kernel_sink (pyarrow) only where used; `tilescope --help` imports every command module
        from tilescope.io.kernel_sink import HeadSink

        self.head = HeadSink(rows)
        self.console, self.label, self.source_format = console, label, source_format
        self.width = width
        self.chip_name = ""
        self.rendered: str | None = None

    def chip(self, spec: Any) -> None:
        self.chip_name = spec.name

    def __call__(self, table: pa.Table) -> None:
        self.head(table)
        if self.rendered is None and self.head.full():
            self.rendered = self._render()

    def _render(self) -> str:
        # deferred: io.tables (pyarrow) only where used; `tilescope --help` imports every command module
        from tilescope.io.tables import to_frame

        head = self.head.head()
        df = to_frame({n: head.column(n) for n in head.column_names}, head.num_rows)
        with self.console.capture() as captured:  # rich buffers per thread: safe off the main one
            print_title(self.console, f"{self.label} — {self.source_format}, chip {self.chip_name}")
            self.console.print(kernel_table(df, self.width), crop=False)
        return str(captured.get())

    def finish(self) -> str:
        return self.rendered if self.rendered is not None else self._render()


def _table_view(source: KernelCsv, chip: str | None, rows: int, label: str, width: int | None) -> bool:
    """Print the first `rows` kernels of one CSV (titled with `label`, the path as given) and the
    kernel count, through the pipeline (no million-row DataFrame for a 50-row view); False
    (nothing printed) when it declines the file."""
    # deferred: io.kernel_stream (pyarrow) only where used; `tilescope --help` imports every command module
    from tilescope.io.kernel_stream import StreamFallback, stream_kernel_csv

    console = make_console(width)
    view = _TableView(rows, console, label, source.format, width)
    try:
        with _read_progress(source.path.name) as progress:
            stream_kernel_csv(
                source.path,
                chip,
                view,
                lambda t: t,
                progress=progress,
                on_chip=view.chip,
                device=source.device,
            )
    except StreamFallback:
        return False
    console.file.write(view.finish())
    _print_count(console, min(rows, view.head.rows), view.head.rows)
    return True


def _fmt(value: Any, column: str = "") -> str:
    """A cell: a 0-1 share (RATIO_COLUMNS) and a per-cent column (PERCENT_COLUMNS) as per cent to
    one place, its header saying `%` (one unit for every share on the screen, as analyze prints
    them); other numbers to 3 places (whole from a million on); "—" when unknown."""
    # deferred: pandas (~0.3 s) only when this builds a frame; `tilescope --help` imports every command module
    import pandas as pd

    if value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NA:
        return "—"
    if column in RATIO_COLUMNS or column in PERCENT_COLUMNS:
        return f"{float(value) * (100 if column in RATIO_COLUMNS else 1):,.1f}"
    if isinstance(value, float):
        return f"{value:,.3f}" if abs(value) < 1e6 else f"{value:,.0f}"
    return str(value)


# 0-1 in the data (csv/json/parquet keep them so), per cent on the screen
RATIO_COLUMNS = ("cube_share", "vector_share", "share")
PERCENT_COLUMNS = ("sol_pct",)  # per cent already, in the data too


# Header of each terminal column: the canonical name read as words (it wraps at the spaces), its
# unit said; the csv/json/parquet outputs keep the canonical names.
HEADERS = {
    "rank": "rank", "name": "name", "op_type": "op type", "core_type": "core type",
    "duration_us": "duration µs", "block_dim": "block dim", "mix_block_dim": "mix block dim",
    "cube_share": "Cube %", "vector_share": "Vector %", "bound_pipe": "bound pipe", "sol_pct": "SoL %",
    "sol_bound": "SoL bound",
    # the --group-by view (tilescope.commands.kernels_group)
    "count": "count", "total_us": "total µs", "mean_us": "mean µs", "min_us": "min µs", "max_us": "max µs",
    "share": "share %",
}
TEXT_COLUMNS = ("name", "op_type", "core_type", "bound_pipe", "sol_bound")
# Text columns that wrap (fold) when the terminal is narrow, and the cells they keep at least.
FOLD_FLOOR = {"name": 24, "op_type": 12, "core_type": 8}
# Left out first when even the floors do not fit, in this order; the rest stay. The speed of light
# and the core type say more about a kernel than its pipe shares: they go after them.
DROP_ORDER = ("mix_block_dim", "min_us", "max_us", "sol_bound", "vector_share", "cube_share", "block_dim",
              "bound_pipe", "mean_us", "core_type", "sol_pct", "op_type")


def kernel_table(
    shown: pd.DataFrame, width: int | None = None, columns: tuple[str, ...] = TABLE_COLUMNS
) -> Any:
    """The rich Table of the rows of `shown`, `width` cells wide at most (None: as wide as its
    content). Numbers never wrap; the name folds; columns that cannot fit are left out and the
    table's caption names them. Its title is printed apart (`print_title`): a table's title wraps
    to the table's width, 8 cells for a table without rows."""
    # deferred: rich.table, rich.text only for terminal output; `tilescope --help` imports every command
    #   module
    from rich.table import Table
    from rich.text import Text

    cols = [c for c in columns if c in shown.columns and (c == "name" or shown[c].notna().any())]
    cells = {c: [terminal_text(_fmt(v, c)) for v in shown[c].tolist()] for c in cols}
    headers = dict(HEADERS)
    if width is not None and _needed(cols, cells, headers) > width:  # narrow: a word a header line
        headers = {c: h.replace(" ", "\n") for c, h in HEADERS.items()}
    left_out = _columns_left_out(cols, cells, headers, width)
    cols = [c for c in cols if c not in left_out]
    # every cell may come from the trace: Text, never markup
    table = Table()
    if left_out:
        note = (f"not shown at {width} columns: {', '.join(HEADERS[c] for c in left_out)} "
                "(--width N, or --format csv/json)")
        table.caption, table.caption_justify = Text(note, style="dim"), "left"
    folds = _fold_widths(cols, cells, headers, width)
    for c in cols:
        table.add_column(
            headers[c],
            justify="left" if c in TEXT_COLUMNS else "right",
            overflow="fold",
            no_wrap=c not in FOLD_FLOOR,
            min_width=(min(FOLD_FLOOR[c], _natural(headers[c], cells[c]))
                       if c in FOLD_FLOOR and width else None),
            max_width=folds.get(c),
        )
    for i in range(len(shown)):
        table.add_row(*(Text(cells[c][i]) for c in cols))
    return table


def _fold_widths(
    kept: list[str], cells: dict[str, list[str]], headers: dict[str, str], width: int | None
) -> dict[str, int]:
    """The widths of the folding text columns so that the table fits `width`: the widest is
    narrowed first, none below its floor. rich alone would not fold a one-word cell
    (`AI_VECTOR_CORE`) below its length, and the table would run past the width."""
    folding = {c: _natural(headers[c], cells[c]) for c in kept if c in FOLD_FLOOR}
    if width is None or not folding:
        return {}
    room = width - (_needed(kept, cells, headers) - sum(min(FOLD_FLOOR[c], n) for c, n in folding.items()))
    while sum(folding.values()) > room:
        widest = max(folding, key=lambda c: folding[c] - min(FOLD_FLOOR[c], folding[c]))
        if folding[widest] <= FOLD_FLOOR[widest]:
            break  # every column at its floor: _columns_left_out left out what it could
        folding[widest] -= 1
    return folding


def _natural(header: str, cells: list[str]) -> int:
    """Cells a column needs unwrapped: its widest value or its header's widest line."""
    return max([*(cell_len(line) for line in header.split("\n")), *(cell_len(v) for v in cells)])


def _needed(kept: list[str], cells: dict[str, list[str]], headers: dict[str, str]) -> int:
    """Cells the table needs: the numbers at full width, the text columns at their floor, and the
    box (3 cells a column and 1)."""
    columns = sum(min(FOLD_FLOOR.get(c, 10**6), _natural(headers[c], cells[c])) for c in kept)
    return columns + 3 * len(kept) + 1


def _columns_left_out(
    cols: list[str], cells: dict[str, list[str]], headers: dict[str, str], width: int | None
) -> list[str]:
    """The columns to leave out (DROP_ORDER first) so that the table fits `width`."""
    if width is None:
        return []
    kept = list(cols)
    for c in DROP_ORDER:
        if _needed(kept, cells, headers) <= width:
            break
        if c in kept:
            kept.remove(c)
    return [c for c in cols if c not in kept]


def _print_count(console: Any, shown: int, total: int, noun: str = "kernels") -> None:
    if shown < total:
        console.print(
            f"showing {shown:,} of {total:,} {noun} (--limit N, 0 for all; or --format csv/json/parquet)"
        )


def print_title(console: Any, title: str) -> None:
    """The table's title on its own line(s), wrapped at the console's width (the path as given:
    Text, never markup)."""
    # deferred: rich.text only for terminal output; `tilescope --help` imports every command module
    from rich.text import Text

    console.print(Text(terminal_text(title), style="table.title"))


def render_table(df: pd.DataFrame, title: str, rows: int | None, width: int | None = None,
                 columns: tuple[str, ...] = TABLE_COLUMNS, noun: str = "kernels") -> None:
    """Print the title, the first `rows` rows of `df` (None: all) and, when that is not all, the count."""
    console = make_console(width)
    print_title(console, title)
    shown = df if rows is None else df.head(rows)
    console.print(kernel_table(shown, width, columns), crop=False)
    _print_count(console, len(shown), len(df), noun)


@honours_strict
def kernels_command(
    path: Annotated[Path, typer.Argument(help="Profiler output: directory, kernel_details.csv, .db, ...")],
    fmt: Annotated[str, typer.Option("--format", "-f", help="table | csv | json | parquet")] = "table",
    output: Annotated[Path | None, typer.Option("-o", "--output", help="Write to FILE (atomically)")] = None,
    chip: Annotated[str | None, typer.Option("--chip", help=CHIP_HELP)] = None,
    limit: Annotated[
        int | None,
        typer.Option("--limit", min=0, help="Only the first N rows (0: all; the table shows 50 by default)"),
    ] = None,
    sort: Annotated[
        str | None,
        typer.Option("--sort", metavar="COLUMN[:asc|desc]", help="Order the rows by a column (numbers "
                     "largest "
                     "first, text A-Z, unless :asc or :desc); default: the profile's order, or total time "
                     "with --group-by"),
    ] = None,
    group_by: Annotated[
        str | None,
        typer.Option("--group-by", metavar="op_type|name|core_type", help="One row per op type (or name, "
                     "core type), per rank: count, total, mean, min and max duration, share of the time"),
    ] = None,
    width: Annotated[int | None, typer.Option("--width", metavar="N", min=20, help=WIDTH_HELP)] = None,
    strict: Annotated[bool, typer.Option("--strict", help=STRICT_HELP)] = False,
) -> None:
    """List kernels with canonical columns and derived metrics.

    When PATH holds several profiles (ranks) and some cannot be read, the others' kernels are
    written, each unreadable one gets a warning line on stderr, and the exit code is 2 (partial:
    some inputs could not be read).

    Example: tilescope kernels runs/fa-v1 --format json -o kernels.json
    """
    # deferred: io.failures and io.load only when this command runs; `tilescope --help` imports every command
    #   module
    from tilescope.commands.kernels_group import GROUP_KEYS, group_kernels, sort_rows
    from tilescope.io.bad_rows import table_notes
    from tilescope.io.failures import PartialLoadError
    from tilescope.io.load import kernel_csv_profile, load_kernels_arrow, load_profiles

    if fmt not in FORMATS:
        raise UsageError(f"--format must be one of {', '.join(FORMATS)}, not {fmt!r}")
    if fmt == "parquet" and output is None:
        raise UsageError("--format parquet needs -o FILE (binary output is not written to a terminal)")
    if output is not None and fmt == "table":
        raise UsageError("-o needs a machine format: --format csv, json or parquet")
    if group_by is not None and group_by not in GROUP_KEYS:
        raise UsageError(f"--group-by takes {', '.join(GROUP_KEYS)}, not {group_by!r}")
    every = limit == 0  # --limit 0: every row, in every format (README)
    limit = None if every else limit
    # a profile whose kernels are one CSV (the file itself, or a `*_ascend_pt` / `PROF_*` / plain
    # folder holding one): Arrow from the reader to the writer, no DataFrame round trip
    source = kernel_csv_profile(path)
    plain = sort is None and group_by is None  # the streamed ways keep the profile's order
    shown = limit if limit is not None or every else DEFAULT_TABLE_ROWS  # rows in the terminal view
    columns = output_width(width) if fmt == "table" else None
    if (fmt == "table" and source is not None and plain and shown is not None
            and _table_view(source, chip, shown, str(path), columns)):
        return
    if fmt != "table" and source is not None and plain:
        if output is not None and fmt in ("parquet", "csv") and limit is None:
            stream_kernels(source.path, fmt, output, chip, source.device)
            return
        # deferred: io.kernel_sink (pyarrow) only where used; `tilescope --help` imports every command module
        from tilescope.io.kernel_sink import large_strings

        table = load_kernels_arrow(source.path, chip=chip, device=source.device)
        _say_notes(table_notes(table))
        write_kernels(large_strings(table if limit is None else table.slice(0, limit)), fmt, output)
        return
    # deferred: pandas (~0.3 s) only when this builds a frame; `tilescope --help` imports every command module
    import pandas as pd

    profiles = load_profiles(path, chip=chip, progress=True)
    failures = getattr(profiles, "failures", [])
    for failure in failures:
        typer.echo(failure.warning_line(), err=True)
    for pr in profiles:
        _say_skipped(pr.rows_skipped)
        _say_skipped(pr.values_out_of_range)
    frames = []
    for pr in profiles:
        k = pr.kernels
        if len(profiles) + len(failures) > 1:  # several ranks under PATH, even if one was left out
            k = k.assign(rank=pr.rank)
        frames.append(k)
    df = frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True)
    table_columns: tuple[str, ...] = TABLE_COLUMNS
    noun = "kernels"
    if group_by is not None:
        df = group_kernels(df, group_by)
        table_columns = ("rank", group_by, "count", "total_us", "mean_us", "min_us", "max_us", "share")
        noun = "groups"
    df = sort_rows(df, sort if sort is not None else ("total_us" if group_by else None))
    if fmt == "table":
        title = f"{path} — {profiles[0].source.format}, chip {profiles[0].chip.name}"
        if group_by is not None:
            title += f", by {HEADERS.get(group_by, group_by)}"
        render_table(df, title, shown, columns, table_columns, noun)
    else:
        write_kernels(kernels_arrow(df if limit is None else df.head(limit)), fmt, output)
    if failures:
        raise PartialLoadError(failures, len(profiles))


def register(app: typer.Typer) -> None:
    app.command("kernels")(kernels_command)
