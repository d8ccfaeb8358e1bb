"""A profile's kernel CSV left for the builder (`Parts.kernel_csv`, `load_single(defer_csv=True)`):
streamed into a table of only the columns a command reads (`stream_columns`, over
`tilescope.io.kernel_stream`), or read whole when the stream gives up (`read_whole_csv`).

Kept light at import, as `tilescope.io.load` is: pyarrow and the readers are imported inside the
functions that use them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from tilescope.columns import metric_groups_of
from tilescope.io.parts import Parts

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa

    from tilescope.chips import ChipSpec

# Kernel columns the loader itself reads after the table is built, whatever the caller asked for:
# `load.split_devices` makes one rank of each device of an msprof run by `device_id`.
LOADER_COLUMNS: tuple[str, ...] = ("device_id",)


def stream_columns(
    parts: Parts, chip: str | None, warnings: list[str], columns: Sequence[str]
) -> tuple[pd.DataFrame, ChipSpec] | None:
    """The deferred kernel CSV of `parts` streamed (`tilescope.io.kernel_stream`) into a table of
    only `columns` (those the file has, after the derived metrics), and the chip; None when there
    is none or the stream gives up (a bad value, a chip the first rows guessed wrong, no rows).

    The columns are the whole-file table's, value for value, as the file output of `kernels` is
    (text as a Categorical: `tables.to_frame(categories=True)`);
    the chip comes from the same device facts and the notes of its inference from all rows, so
    `warnings` gets what `choose_chip` adds on the whole table. Only a group of rows and the kept
    columns are in memory at a time (~16 of ~80 columns for `info`).
    """
    # deferred: pyarrow (~0.25 s) (and io.kernel_stream, io.tables) only where used
    import pyarrow as pa

    from tilescope.io.kernel_stream import StreamFallback, stream_kernel_csv
    from tilescope.io.tables import to_frame

    if parts.kernel_csv is None:
        return None
    names: list[str] = []  # the whole table's columns (the metric groups are read from them)
    kept: list[pa.Table] = []

    def keep(table: pa.Table) -> pa.Table:
        if not names:
            names.extend(table.column_names)
        # each kept column copied into Arrow's pool: the group's derived columns are numpy arrays
        # in the C heap, and held to the end they left ~0.6 GB of holes there (3 M kernels) once
        # `to_frame` had converted them; copied, the next group reuses their memory. The derived
        # labels (`unit`, `sol_bound`: plain strings) are dictionary-encoded as the parsed text is
        wanted = (*columns, *LOADER_COLUMNS)
        return pa.table({c: _pooled(table.column(c)) for c in table.column_names if c in wanted})

    notes: list[str] = []
    try:
        _rows, selected = stream_kernel_csv(
            parts.kernel_csv, chip, kept.append, keep, device=parts.device, notes=notes
        )
    except StreamFallback:
        return None
    table = pa.concat_tables(kept)
    table_rows = table.num_rows
    kept.clear()
    parts.metric_groups = metric_groups_of(names)
    warnings.extend(notes)
    cols = {n: table.column(n) for n in table.column_names}
    del table
    return to_frame(cols, table_rows, categories=True), selected


def _pooled(col: pa.ChunkedArray) -> pa.Array:
    """`col` as one array in Arrow's memory pool, text dictionary-encoded."""
    # deferred: pyarrow (~0.25 s) only where used
    import pyarrow as pa
    import pyarrow.compute as pc

    if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
        return pc.dictionary_encode(col.combine_chunks())
    return pa.concat_arrays(col.chunks)


def read_whole_csv(parts: Parts) -> None:
    """The deferred kernel CSV of `parts` read whole, as `read_kernel_csv` reads it."""
    # deferred: io.kernel_csv (pyarrow) only where used
    from tilescope.io.kernel_csv import read_kernel_table

    assert parts.kernel_csv is not None
    kt = read_kernel_table(parts.kernel_csv)
    parts.kernels, parts.metric_groups = kt.kernels, kt.metric_groups
    parts.rows_skipped, parts.values_out_of_range = kt.rows_skipped, kt.values_out_of_range
    parts.kernel_csv = None
