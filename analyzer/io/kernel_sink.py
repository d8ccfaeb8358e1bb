"""Where `tilescope kernels` puts a kernel table: file sinks fed group by group, the first rows for
the terminal view, and the pandas schema metadata of the Parquet output."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from tilescope.io.tables import decode_dictionary, to_frame
from tilescope.text.escape import csv_cell


def large_strings(table: pa.Table) -> pa.Table:
    """Plain text columns as large_string: the type `kernels_arrow` gives the DataFrame twin's `str`
    columns (dictionary-encoded text stays dictionary; Parquet stores both as plain text)."""
    if not any(pa.types.is_string(f.type) for f in table.schema):
        return table
    fields = [pa.field(f.name, pa.large_string()) if pa.types.is_string(f.type) else f for f in table.schema]
    return table.cast(pa.schema(fields))


def pandas_metadata(schema: pa.Schema) -> bytes:
    """The `pandas` key pyarrow writes for the DataFrame twin of this table: pandas.read_parquet
    uses it to restore the canonical dtypes (nullable Int64, `str`).

    The nested shape lists are declared `object` (Python lists on reading): pandas 3.1 writes
    `list<item: list<item: int64>>[pyarrow]` for them but cannot parse that name back, and
    read_parquet would fail on our file.
    """
    empty = to_frame({f.name: pa.nulls(0, f.type) for f in schema}, 0)
    meta = json.loads(pa.Schema.from_pandas(empty, preserve_index=False).metadata[b"pandas"])
    for col in meta["columns"]:
        if str(col.get("numpy_type", "")).startswith("list<"):
            col["numpy_type"] = "object"
    return json.dumps(meta).encode()


class TableSink:
    """Writes tables to one file as they come (Parquet row groups / CSV chunks); `close` finishes it.

    Parquet: 128k-row groups at most (the writer buffers one group, not the whole table);
    dictionary encoding only for text (repeated names/shapes; on float metrics it costs CPU and the
    writer falls back to plain encoding anyway); lz4 (0.63 s vs zstd's 0.81 s CPU for 1 M rows, for
    a 63 MB instead of a 50 MB file); store_schema=False so text reads back as plain strings even
    where the table held it dictionary-encoded.
    """

    def __init__(self, fmt: str, path: Path) -> None:
        self.fmt, self.path = fmt, path
        self.writer: Any = None
        self.pandas: bytes | None = None

    def __call__(self, table: pa.Table) -> None:
        if self.fmt == "csv":
            table = csv_table(table)
        if self.writer is None:
            self.writer = self._open(table.schema)
            if self.fmt == "parquet":
                # built now, while the stream still runs, rather than after its last group (20 ms)
                self.pandas = pandas_metadata(table.schema)
        if self.fmt == "parquet":
            self.writer.write_table(table, row_group_size=1 << 17)
        else:
            self.writer.write_table(table)

    def _open(self, schema: pa.Schema) -> Any:
        if self.fmt == "csv":
            return pacsv.CSVWriter(str(self.path), schema)
        # deferred: pyarrow (~0.25 s) only where used
        import pyarrow.parquet as pq

        text = [
            f.name for f in schema if not pa.types.is_floating(f.type) and not pa.types.is_integer(f.type)
        ]
        return pq.ParquetWriter(
            str(self.path),
            schema,
            compression="lz4",
            use_dictionary=text,
            store_schema=False,
            write_batch_size=1 << 16,  # fewer, larger encoder batches: ~8 % less CPU than 1024
        )

    def close(self) -> None:
        if self.writer is None:
            return
        # store_schema=False drops the schema's own metadata, so the pandas key is always added
        # here, built the same way for tables from the Arrow path and from a DataFrame
        if self.pandas is not None:
            self.writer.add_key_value_metadata({"pandas": self.pandas})
        self.writer.close()
        self.writer = None


class HeadSink:
    """Keeps the first `keep` rows and counts all of them (the terminal view of `kernels`)."""

    def __init__(self, keep: int) -> None:
        self.keep = keep
        self.rows = 0
        self.parts: list[pa.Table] = []

    def __call__(self, table: pa.Table) -> None:
        wanted = self.keep - sum(t.num_rows for t in self.parts)
        if wanted > 0 or not self.parts:  # the first table at least: it carries the schema
            self.parts.append(table.slice(0, max(wanted, 0)))
        self.rows += table.num_rows

    def full(self) -> bool:
        """It holds `keep` rows: later tables only add to the count."""
        return bool(self.parts) and sum(t.num_rows for t in self.parts) >= self.keep

    def head(self) -> pa.Table:
        return pa.concat_tables(self.parts)


def csv_table(table: pa.Table) -> pa.Table:
    """The table as `kernels --format csv` writes it: plain (not dictionary-encoded) columns, every
    text cell passed through `escape.csv_cell` (no formula a spreadsheet would run, no control
    character for a terminal), numbers untouched. CSV has no nested type: the *_shape_list
    columns are dropped; the shape strings stay."""
    keep = [n for n in table.column_names if not pa.types.is_list(table.schema.field(n).type)]
    return pa.table({n: _csv_column(table.column(n)) for n in keep})


def _csv_column(col: pa.ChunkedArray) -> pa.ChunkedArray | pa.Array:
    """One column, decoded; text goes through `csv_cell` once per distinct value (a million rows
    of kernel names hold a few hundred), so a clean file costs a dictionary pass, not a Python
    call per cell."""
    kind = col.type.value_type if pa.types.is_dictionary(col.type) else col.type
    if not (pa.types.is_string(kind) or pa.types.is_large_string(kind)):
        return decode_dictionary(col)
    encoded = col if pa.types.is_dictionary(col.type) else pc.dictionary_encode(col)
    chunks = encoded.unify_dictionaries().chunks
    if not chunks:
        return decode_dictionary(col)
    values = chunks[0].dictionary.to_pylist()
    inert = [None if v is None else csv_cell(v) for v in values]
    if inert == values:
        return decode_dictionary(col)
    dictionary = pa.array(inert, kind)
    return pa.chunked_array([pc.take(dictionary, c.indices) for c in chunks], kind)
