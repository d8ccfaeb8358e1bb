"""Vectorised CSV reading and value cleaning shared by every table reader.

Files are read with pyarrow.csv with every column as a string (the profilers mix `N/A`, quoted
values with TABs and numbers in one column, so type inference cannot be trusted), then each column
is cleaned and cast with pyarrow.compute kernels. No per-row Python code runs on the hot path; the
error paths (locating a bad row to name it) may be slow because they run once.
"""

from __future__ import annotations

import csv
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from tilescope.columns import AI_CORE, AI_VECTOR_CORE, COLUMNS, SHAPE_LIST_COLUMNS, canonical_header, dtype_of
from tilescope.errors import ProfileFormatError
from tilescope.io.bad_rows import RowSkipper, with_skipped
from tilescope.io.csv_header import read_header
from tilescope.io.native import native_name
from tilescope.io.validate import check_columns, csv_data_rows, csv_row
from tilescope.shapes import parse_shape

# pandas is imported where a DataFrame is built: the Arrow-only `tilescope kernels` file output never
# pays its ~0.2 s import
if TYPE_CHECKING:
    import pandas as pd

MISSING_VALUES = ["", "N/A", "NA"]
# Characters stripped from both ends of every value: whitespace (trailing TAB after timestamps) and
# the literal quote characters torch_npu leaves around shapes after CSV unquoting.
_TRIM_CHARS = ' \t\r\n"'
NO_MODEL_ID = 4294967295
SHAPE_LIST_TYPE = pa.list_(pa.list_(pa.int64()))

# Example: '1736413971558972.912\t' and '"4096,512"' need trimming; 'MatMulV2' does not
_NEEDS_TRIM_RE = r'^[\s"]|[\s"]$'
# Example: "183.87", "-1e-3", ".5", "nan" are numbers; "fast", "1.2.3" are not
_NUMBER_RE = r"^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$|^[-+]?(inf|nan)$"
# Example: "1736413971558972.912" -> i="1736413971558972", f="912"; "1699529623143480" -> f=""
_DECIMAL_US_RE = r"^(?P<i>-?\d+)(?:\.(?P<f>\d*))?$"


def csv_options(
    names: list[str],
    types: dict[str, pa.DataType],
    typed: bool,
    block_size: int = 8 << 20,
    skip_rows: int = 1,
    use_threads: bool = True,
    newlines_in_values: bool = False,
    invalid_row_handler: Callable[[Any], str] | None = None,
) -> dict[str, object]:
    """Keyword arguments for pyarrow's read_csv / open_csv, shared by the whole-file and the
    streaming reader so both parse a file identically (the streaming reader parses byte ranges
    after the header: skip_rows=0).

    A quoted value may hold a newline (RFC 4180; a kernel named "a<LF>b"). The parser always
    honours quotes; `newlines_in_values` makes the reader also cut the file into blocks with a
    quote-aware scan, a serial pass the clean files do not need. Without it a block boundary
    inside such a value stops the read with an error (Arrow checks that each block parsed to its
    end: "CSV parser got out of sync with chunker"), never a wrong table, and `read_csv_strings`
    then reads the file again with it. `invalid_row_handler`: called for each row whose field
    count differs from the header's (tilescope.io.bad_rows.RowSkipper), else such a row is an
    error."""
    convert = pacsv.ConvertOptions(
        column_types=types,
        # typed columns parse N/A / NA / empty straight to null in the C++ reader; in the all-string
        # fallback nothing is null yet (clean_strings decides after trimming)
        null_values=MISSING_VALUES if typed else [],
        strings_can_be_null=typed,
        quoted_strings_can_be_null=typed,
    )
    return {
        "read_options": pacsv.ReadOptions(
            column_names=names, skip_rows=skip_rows, block_size=block_size, use_threads=use_threads
        ),
        "parse_options": pacsv.ParseOptions(
            newlines_in_values=newlines_in_values, invalid_row_handler=invalid_row_handler
        ),
        "convert_options": convert,
    }


def typed_column_types(names: list[str], numeric: dict[int, pa.DataType]) -> dict[str, pa.DataType]:
    """The fast path's column types: `numeric` as given, every other column dictionary text.

    Text columns (names, types, shapes, dtypes) repeat a handful of values a million times: reading
    them dictionary-encoded lets clean_strings work on the uniques only.
    """
    return {**{n: _DICT_STRING for n in names}, **{names[i]: t for i, t in numeric.items()}}


# the whole-file reader's block: the unit its threads parse (tests make it small to put many block
# boundaries in a small file)
READ_BLOCK_SIZE = 8 << 20


def _read_typed(
    path: Path,
    names: list[str],
    types: dict[str, pa.DataType],
    typed: bool,
    newlines: bool = False,
    skipper: RowSkipper | None = None,
) -> pa.Table:
    options = csv_options(
        names, types, typed, READ_BLOCK_SIZE, newlines_in_values=newlines, invalid_row_handler=skipper
    )
    # Through the open file, not the path: given a path, pyarrow picks a decompressor by its
    # extension (a CSV named .gz) and refuses a name that is not UTF-8 (tilescope.io.native).
    with open(path, "rb") as fh, pa.memory_map(native_name(path, fh)) as source:
        return pacsv.read_csv(source, **options)


def read_csv_strings(
    path: Path,
    header: list[str] | None = None,
    numeric: dict[int, pa.DataType] | None = None,
    skip_bad_rows: bool = False,
) -> tuple[list[str], pa.Table]:
    """Read a CSV; returns the raw header and the data table.

    With `numeric` (column index -> float64/int64) those columns are parsed straight to numbers by
    the multi-threaded C++ reader, the fast path for clean files. If any value does not parse (a TAB,
    a stray word), the whole file is re-read with every column as a string and cleaned by
    `convert_columns`, which also names the offending row.

    Columns are named `c0..cN` internally because real headers may repeat or end in an empty name
    (the trailing comma of `msprof op` files); the caller renames them.
    """
    if header is None:
        header = read_header(path)
    names = [f"c{i}" for i in range(len(header))]
    strings = {n: pa.string() for n in names}

    def read(types: dict[str, pa.DataType], typed: bool, newlines: bool = False) -> pa.Table:
        skipper = RowSkipper() if skip_bad_rows else None  # counts afresh on each attempt
        table = _read_typed(path, names, types, typed, newlines, skipper)
        return table if skipper is None else with_skipped(table, skipper, path, len(header))

    try:
        if numeric:
            try:
                return header, read(typed_column_types(names, numeric), True)
            except pa.ArrowInvalid:
                pass  # not clean enough for the fast path; the string path cleans or names the row
        try:
            return header, read(strings, False)
        except pa.ArrowInvalid:
            # a quoted newline across a block boundary (see csv_options); a truly broken file
            # fails this read too and its row is named below
            return header, read(strings, False, newlines=True)
    except pa.ArrowInvalid as exc:
        raise _locate_csv_error(path, len(header), str(exc)) from exc
    except PermissionError as exc:
        raise ProfileFormatError(path, None, "cannot read file (permission denied)") from exc


# µs timestamps with up to 3 decimals, parsed exactly by the C++ reader (which also trims the TAB
# torch_npu leaves after them); the unscaled integer of decimal(22, 3) is the time in ns
NS_DECIMAL = pa.decimal128(22, 3)


def numeric_columns(canonical: list[str]) -> dict[int, pa.DataType]:
    """Column index -> Arrow type for the typed fast path (declared float64 / Int64 columns and µs
    timestamps)."""
    out: dict[int, pa.DataType] = {}
    for i, name in enumerate(canonical):
        d = dtype_of(name)
        if d == "int64_ns":
            out[i] = NS_DECIMAL
        elif d == "Int64":
            out[i] = pa.int64()
        elif name in _KNOWN_FLOATS:
            out[i] = pa.float64()
    return out


def _locate_csv_error(path: Path, n_fields: int, message: str) -> ProfileFormatError:
    """Name the first bad row (slow path, runs once on a broken file)."""
    if "UTF8" in message or "UTF-8" in message:
        return ProfileFormatError(path, None, "not UTF-8 text; expected a CSV file")
    try:
        with open(path, newline="", encoding="utf-8", errors="replace") as fh:
            for i, first_line, row in csv_data_rows(fh):
                if len(row) != n_fields:
                    return ProfileFormatError(
                        path,
                        f"row {i + 1} (line {first_line})",
                        f"expected {n_fields} fields as in the header, found {len(row)} (truncated row?)",
                    )
    except csv.Error as exc:
        return ProfileFormatError(path, None, f"malformed CSV ({exc})")
    first = message.splitlines()[0] if message else "malformed CSV"
    return ProfileFormatError(path, None, f"malformed CSV ({first[:120]})")


_DICT_STRING = pa.dictionary(pa.int32(), pa.string())


def clean_strings(
    arr: pa.Array | pa.ChunkedArray, keep_dictionary: bool = False
) -> pa.ChunkedArray | pa.Array:
    """Strip whitespace/TAB and literal quotes; `N/A`, `NA` and empty become null.

    Dictionary-encoded input is cleaned on its dictionary only; with `keep_dictionary` it stays
    dictionary-encoded (one unified dictionary; values that cleaned to null are null indices), else
    it is decoded to plain strings. Otherwise each step first checks (into a 1-bit mask) whether any
    value needs it, because copying a million strings costs more than scanning them and most
    columns are already clean.
    """
    if pa.types.is_dictionary(arr.type):
        # one dictionary for all chunks first (the reader gives each block its own): the
        # cleaning then runs once per column, not once per block
        chunked = arr if isinstance(arr, pa.ChunkedArray) else pa.chunked_array([arr])
        chunks = chunked.unify_dictionaries().chunks
        if not chunks:
            return pa.chunked_array([], _DICT_STRING if keep_dictionary else pa.string())
        dictionary = chunks[0].dictionary
        cleaned = clean_strings(dictionary)
        if not keep_dictionary:
            return pa.chunked_array([pc.take(cleaned, c.indices) for c in chunks], pa.string())
        if cleaned is dictionary:  # already clean: nothing to rebuild
            return pa.chunked_array(chunks, _DICT_STRING)
        if not cleaned.null_count:
            rebuilt = [pa.DictionaryArray.from_arrays(c.indices, cleaned) for c in chunks]
            return pa.chunked_array(rebuilt, _DICT_STRING)
        # a value that cleans to null (N/A) is a null index, not a null dictionary entry
        present, filled = pc.is_valid(cleaned), pc.fill_null(cleaned, "")
        return pa.chunked_array([_null_indices(c, present, filled) for c in chunks], _DICT_STRING)
    if pc.any(pc.match_substring_regex(arr, _NEEDS_TRIM_RE)).as_py():
        arr = pc.utf8_trim(arr, characters=_TRIM_CHARS)
    missing = pc.is_in(arr, value_set=pa.array(MISSING_VALUES))
    if not pc.any(missing).as_py():
        return arr
    return pc.if_else(missing, pa.scalar(None, pa.string()), arr)


def _null_indices(chunk: pa.DictionaryArray, present: pa.Array, filled: pa.Array) -> pa.DictionaryArray:
    """`chunk` over the cleaned dictionary `filled`, its index null where `present` is false."""
    keep = pc.take(present, chunk.indices)
    indices = pc.if_else(keep, chunk.indices, pa.scalar(None, chunk.indices.type))
    return pa.DictionaryArray.from_arrays(indices, filled)


def decode_dictionary(arr: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
    """Plain values of a dictionary-encoded column (other columns unchanged)."""
    return pc.cast(arr, arr.type.value_type) if pa.types.is_dictionary(arr.type) else arr


def _first_bad_row(raw: pa.Array | pa.ChunkedArray, ok: pa.Array | pa.ChunkedArray) -> int:
    """Index of the first value that was present but did not convert (error path only)."""
    bad = pc.and_(pc.is_valid(raw), pc.invert(pc.fill_null(ok, False)))
    idx = pc.index(bad, True).as_py()
    return int(idx) if idx is not None else -1


def to_float(arr: pa.Array | pa.ChunkedArray, path: Path, column: str) -> pa.ChunkedArray | pa.Array:
    try:
        return pc.cast(arr, pa.float64())
    except pa.ArrowInvalid as exc:
        ok = pc.match_substring_regex(arr, _NUMBER_RE, ignore_case=True)
        row = _first_bad_row(arr, ok)
        value = arr[row].as_py() if row >= 0 else "?"
        raise ProfileFormatError(
            path, csv_row(path, row), f"column {column!r}: expected a number, found {str(value)[:40]!r}"
        ) from exc


def to_int(arr: pa.Array | pa.ChunkedArray, path: Path, column: str) -> pa.ChunkedArray | pa.Array:
    try:
        return pc.cast(arr, pa.int64())
    except pa.ArrowInvalid:
        pass
    # "16.0" style integers: go through float64 (ids and counts are far below 2**53); NaN, ±inf
    # and values beyond int64 have no integer and are named here, not left to Arrow's cast error
    floats = to_float(arr, path, column)
    fits = pc.and_(pc.is_finite(floats), pc.less(pc.abs(floats), float(2**63)))
    if not pc.all(pc.fill_null(fits, True)).as_py():
        row = _first_bad_row(floats, fits)
        raise ProfileFormatError(
            path,
            csv_row(path, row),
            f"column {column!r}: expected an integer, found {str(arr[row].as_py())[:40]!r}",
        )
    return pc.cast(pc.floor(floats), pa.int64())


def decimal_to_ns(arr: pa.Array | pa.ChunkedArray, path: Path, column: str) -> pa.ChunkedArray:
    """decimal(p, 3) µs -> int64 ns: the low 64 bits of each unscaled 128-bit value, no arithmetic.

    A value that does not fit in int64 ns (beyond the year 2262) is an error naming the row.
    """
    chunks = arr.chunks if isinstance(arr, pa.ChunkedArray) else [arr]
    out: list[pa.Array] = []
    at = 0
    for chunk in chunks:
        words = np.frombuffer(chunk.buffers()[1], dtype="<i8")
        words = words[2 * chunk.offset : 2 * (chunk.offset + len(chunk))]
        low, high = words[0::2], words[1::2]
        valid = pc.is_valid(chunk)
        bad = (high != (low >> 63)) & np.asarray(valid.to_numpy(zero_copy_only=False), dtype=bool)
        if bad.any():
            row = at + int(np.argmax(bad))
            raise ProfileFormatError(
                path,
                csv_row(path, row),
                f"column {column!r}: timestamp {arr[row].as_py()} µs is out of range",
            )
        validity = valid.buffers()[1] if chunk.null_count else None
        out.append(pa.Array.from_buffers(pa.int64(), len(chunk), [validity, pa.py_buffer(low.copy())]))
        at += len(chunk)
    return pa.chunked_array(out, pa.int64())


def to_exact_ns(arr: pa.Array | pa.ChunkedArray, path: Path, column: str) -> pa.ChunkedArray | pa.Array:
    """µs decimal strings -> exact int64 ns with integer arithmetic (no float64 round trip).

    Fast path: Arrow's exact string -> decimal128 parse, × 1000, -> int64. Values with more than
    three decimals or malformed ones fall back to the regex split below, which truncates sub-ns
    digits and names the first bad row.
    """
    try:
        dec = pc.cast(arr, pa.decimal128(25, 3))
        return pc.cast(pc.multiply(dec, pa.scalar(1000, pa.decimal128(4, 0))), pa.int64())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        pass
    parts = pc.extract_regex(arr, _DECIMAL_US_RE)
    ok = pc.is_valid(parts)
    if pc.any(pc.and_(pc.is_valid(arr), pc.invert(ok))).as_py():
        row = _first_bad_row(arr, ok)
        raise ProfileFormatError(
            path,
            csv_row(path, row),
            f"column {column!r}: expected a decimal timestamp in µs, found {str(arr[row].as_py())[:40]!r}",
        )
    whole = pc.cast(pc.struct_field(parts, "i"), pa.int64())
    frac = pc.struct_field(parts, "f")
    # sub-ns digits beyond the third decimal are truncated: profilers write at most 3
    frac = pc.utf8_slice_codeunits(pc.utf8_rpad(frac, 3, "0"), 0, 3)
    frac_ns = pc.cast(frac, pa.int64())
    sign = pc.if_else(pc.starts_with(pc.struct_field(parts, "i"), "-"), -1, 1)
    ns = pc.add(pc.multiply(whole, 1000), pc.multiply(frac_ns, sign))
    return pc.if_else(ok, ns, pa.scalar(None, pa.int64()))


def shape_lists(arr: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
    """Parse a shape-string column once per unique string (shapes repeat a lot), then gather."""
    if isinstance(arr, pa.ChunkedArray) and pa.types.is_dictionary(arr.type):
        unified = arr.unify_dictionaries()
        if unified.num_chunks:
            parsed = _parse_shapes(unified.chunk(0).dictionary.to_pylist())
            return pa.chunked_array([pc.take(parsed, c.indices) for c in unified.chunks], SHAPE_LIST_TYPE)
        arr = decode_dictionary(arr)
    combined = arr.combine_chunks() if isinstance(arr, pa.ChunkedArray) else arr
    encoded = pc.dictionary_encode(decode_dictionary(combined))
    return pc.take(_parse_shapes(encoded.dictionary.to_pylist()), encoded.indices)


def _parse_shapes(uniques: list[str | None]) -> pa.Array:
    return pa.array([parse_shape(u) if u is not None else None for u in uniques], type=SHAPE_LIST_TYPE)


def convert_columns(
    path: Path,
    header: list[str],
    raw: pa.Table,
    *,
    canonical: list[str] | None = None,
    flagged: list[dict[str, Any]] | None = None,
) -> dict[str, pa.Array | pa.ChunkedArray]:
    """Clean every raw string column and cast it to its declared canonical dtype.

    Unknown metric columns are cast to float64 when every value is numeric, else kept as strings.
    The empty trailing column of `msprof op` files is dropped. Values outside their range are
    refused, or with `flagged` made null and flagged (`validate.check_columns`).
    """
    names = canonical if canonical is not None else canonical_header(header)
    out: dict[str, pa.Array | pa.ChunkedArray] = {}
    for i, (src, name) in enumerate(zip(header, names, strict=True)):
        if not src.strip() and not name:
            continue  # trailing comma -> empty last column
        col = raw.column(i)
        dtype = dtype_of(name)
        if pa.types.is_decimal(col.type):  # typed fast path, µs timestamps
            out[name] = decimal_to_ns(col, path, src)
        elif not (pa.types.is_string(col.type) or pa.types.is_dictionary(col.type)):  # typed fast path
            out[name] = col
        elif dtype == "string":
            out[name] = clean_strings(col, keep_dictionary=True)
        elif dtype == "int64_ns":
            out[name] = to_exact_ns(clean_strings(col), path, src)
        elif dtype == "Int64":
            out[name] = to_int(clean_strings(col), path, src)
        elif name in _KNOWN_FLOATS:
            out[name] = to_float(clean_strings(col), path, src)
        else:
            col = clean_strings(col)
            try:
                out[name] = pc.cast(col, pa.float64())
            except pa.ArrowInvalid:
                out[name] = col  # a text column we do not know: keep it as text, never drop it
        if name in SHAPE_LIST_COLUMNS:
            out[SHAPE_LIST_COLUMNS[name]] = shape_lists(out[name])
    check_columns(out, path, source_names=dict(zip(names, header, strict=True)), flagged=flagged)
    return out


def _known_floats() -> frozenset[str]:
    return frozenset(s.name for s in COLUMNS if s.dtype == "float64")


_KNOWN_FLOATS = _known_floats()


def null_unused_side(df: pd.DataFrame) -> pd.DataFrame:
    """`0` on the unused core side means "not measured": aiv_* of AI_CORE, aic_* of AI_VECTOR_CORE.

    Also `Model ID` 4294967295 (no model) -> null. Works on the final DataFrame with numpy masks
    (one pass per column, no Python per row).
    """
    if "core_type" in df and len(df):
        core = df["core_type"]
        masks = {
            "aiv_": (core == AI_CORE).fillna(False).to_numpy(dtype=bool),
            "aic_": (core == AI_VECTOR_CORE).fillna(False).to_numpy(dtype=bool),
        }
        for name in df.columns:
            mask = masks.get(name[:4])
            if mask is None or not mask.any() or df[name].dtype != np.float64:
                continue
            values = df[name].to_numpy()
            drop = mask & (values == 0.0)
            if drop.any():
                df[name] = np.where(drop, np.nan, values)
    if "model_id" in df:
        df["model_id"] = df["model_id"].mask(df["model_id"] == NO_MODEL_ID)
    return df


def null_unused_side_arrow(cols: dict[str, pa.Array | pa.ChunkedArray]) -> None:
    """`null_unused_side` on Arrow columns, in place, before any DataFrame exists (no pandas copies)."""
    core = cols.get("core_type")
    if core is not None and len(core):
        masks = {
            "aiv_": pc.fill_null(pc.equal(core, AI_CORE), False),
            "aic_": pc.fill_null(pc.equal(core, AI_VECTOR_CORE), False),
        }
        for prefix, mask in masks.items():
            if not pc.any(mask).as_py():
                continue
            for name, col in cols.items():
                if not name.startswith(prefix) or not pa.types.is_float64(col.type):
                    continue
                drop = pc.and_(mask, pc.fill_null(pc.equal(col, 0.0), False))
                if pc.any(drop).as_py():
                    cols[name] = _null_where(col, drop)
    model = cols.get("model_id")
    if model is not None and len(model):
        cols["model_id"] = pc.if_else(
            pc.fill_null(pc.equal(model, NO_MODEL_ID), False), pa.scalar(None, model.type), model
        )


def _null_where(col: pa.Array | pa.ChunkedArray, drop: pa.Array | pa.ChunkedArray) -> pa.ChunkedArray:
    """`col` with the `drop` positions null, sharing `col`'s value buffers.

    Only a new validity bitmap is built (n/8 bytes): `if_else` would write a fresh copy of every
    value, and on a million-row table the page faults of ~20 such copies cost ~0.4 s. The bitmap is
    computed for the whole column at once; it is cut per chunk only where its chunks line up with
    the column's (they do when both come from the same reader batches), else chunk by chunk.
    """
    chunks = col.chunks if isinstance(col, pa.ChunkedArray) else [col]
    keep = pc.invert(drop) if col.null_count == 0 else pc.and_not(pc.is_valid(col), drop)
    keep_chunks = keep.chunks if isinstance(keep, pa.ChunkedArray) else [keep]
    aligned = [len(c) for c in keep_chunks] == [len(c) for c in chunks]
    out: list[pa.Array] = []
    at = 0
    for i, chunk in enumerate(chunks):
        part = keep_chunks[i] if aligned else keep.slice(at, len(chunk))
        at += len(chunk)
        part = part.combine_chunks() if isinstance(part, pa.ChunkedArray) else part
        if chunk.offset or part.offset or chunk.type.bit_width != 64:
            out.append(pc.if_else(part, chunk, pa.scalar(None, chunk.type)))
            continue
        out.append(pa.Array.from_buffers(chunk.type, len(chunk), [part.buffers()[1], chunk.buffers()[1]]))
    return pa.chunked_array(out, col.type)


def _pandas_type(t: pa.DataType) -> object:
    # deferred: pandas (~0.3 s) only when this builds a frame
    import pandas as pd

    if pa.types.is_integer(t):
        return pd.Int64Dtype()
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return pd.ArrowDtype(t)
    return None


def to_frame(
    cols: dict[str, pa.Array | pa.ChunkedArray],
    n_rows: int,
    ensure: Iterable[str] = (),
    categories: bool = False,
) -> pd.DataFrame:
    """Arrow columns -> DataFrame: float64 with NaN, nullable Int64, `str`, ArrowDtype lists.

    Columns named in `ensure` but absent are added as all-null of their declared dtype. `cols` is
    consumed (emptied) so that its Arrow buffers can be freed during the conversion. With
    `categories`, dictionary-encoded text stays encoded, as a pandas Categorical: a kernel table
    repeats a few hundred names, types and shapes over millions of rows (9 text columns of 3 M
    launches: 524 MiB as `str`, ~30 MiB of codes). Its readers take it through
    `metrics.text_column` / `tilescope.rules._columns.text`, which give the `str` column back.
    """
    # deferred: pandas (~0.3 s) only when this builds a frame
    import pandas as pd

    arrays = cols
    for name in ensure:
        if name not in arrays:
            arrays[name] = pa.nulls(n_rows, _arrow_type(dtype_of(name)))
    if not arrays:
        return pd.DataFrame(index=range(n_rows))
    if not categories:
        for name, col in arrays.items():  # dictionary text -> plain strings, not Categorical
            arrays[name] = decode_dictionary(col)
    table = pa.table(arrays)
    arrays.clear()
    # split_blocks + self_destruct free each Arrow column as soon as it is converted: peak memory
    # stays near one copy of the table instead of two
    return table.to_pandas(types_mapper=_pandas_type, split_blocks=True, self_destruct=True)


def arrow_type_of(name: str) -> pa.DataType:
    """The Arrow type of an all-null contract column (as `to_frame(ensure=...)` declares it)."""
    return _arrow_type(dtype_of(name))


def _arrow_type(dtype: str) -> pa.DataType:
    return {"string": pa.string(), "Int64": pa.int64(), "int64_ns": pa.int64()}.get(dtype, pa.float64())


def read_small_table(path: Path, left_out: list[tuple[str, dict[str, Any]]] | None = None) -> pd.DataFrame:
    """A small CSV (an `msprof op` OpBasicInfo, ...) read whole, cleaned and typed by the canonical
    names of its header (unknown columns kept, the trailing empty column dropped).

    With `left_out` (and without `--strict`) it is read as the kernel tables are (#26 items
    10-11): rows with the wrong number of fields skipped, values outside their range made null and
    flagged in `out_of_range`; what was left out is appended as ("rows_skipped" or
    "values_out_of_range", {count, first, note})."""
    # deferred: bad_rows' strict flag (an environment read) only here
    from tilescope.io.bad_rows import skipped_rows, strict

    lenient = left_out is not None and not strict()
    header = read_header(path)
    header, raw = read_csv_strings(path, header, skip_bad_rows=lenient)
    flagged: list[dict[str, Any]] | None = [] if lenient else None
    cols = convert_columns(path, header, raw, canonical=canonical_header(header), flagged=flagged)
    if left_out is not None:
        if (said := skipped_rows(raw)) is not None:
            left_out.append(("rows_skipped", said))
        left_out.extend(("values_out_of_range", f) for f in flagged or ())
    return to_frame(cols, raw.num_rows)
