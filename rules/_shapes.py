"""Byte and element counts of the tensors in a kernel table's shape columns (`"4096,2,512;8"`:
tensors by `;`, dims by `,`), for the runtime rules. Computed once per distinct shape string."""

from __future__ import annotations

import math

import pandas as pd

# Byte sizes of the dtype spellings seen in kernel tables (FLOAT16, DT_BF16, float32, ...).
DTYPE_BYTES: dict[str, int] = {
    "float16": 2,
    "fp16": 2,
    "half": 2,
    "bf16": 2,
    "bfloat16": 2,
    "float": 4,
    "float32": 4,
    "fp32": 4,
    "float64": 8,
    "double": 8,
    "int8": 1,
    "uint8": 1,
    "bool": 1,
    "int16": 2,
    "uint16": 2,
    "int32": 4,
    "uint32": 4,
    "int64": 8,
    "uint64": 8,
    "hifloat8": 1,
    "float8_e4m3fn": 1,
    "float8_e5m2": 1,
    "complex64": 8,
}
DEFAULT_DTYPE_BYTES = 2  # fp16: the common case when a table has shapes but no dtypes


def _tensor_elems(shape: str) -> int:
    dims = [d for d in shape.split(",") if d.strip()]
    if not dims:
        return 0
    try:
        return math.prod(int(float(d)) for d in dims)
    except ValueError:
        return 0


def _shape_string_bytes(shapes: str, dtypes: str) -> float:
    tensors = shapes.split(";")
    types = dtypes.split(";") if dtypes else []
    total = 0
    for i, t in enumerate(tensors):
        dt = types[i].strip().lower().removeprefix("dt_") if i < len(types) else ""
        total += _tensor_elems(t) * DTYPE_BYTES.get(dt, DEFAULT_DTYPE_BYTES)
    return float(total)


def shape_bytes(shapes: pd.Series, dtypes: pd.Series) -> pd.Series:
    """Bytes of all tensors in a ';'-separated shape column, per row.

    Computed once per distinct (shapes, dtypes) pair: a million-launch table has a few thousand.
    """
    key = shapes.astype(str) + "\x00" + dtypes.astype(str)
    uniq = pd.unique(key)
    table = {k: _shape_string_bytes(*k.split("\x00", 1)) for k in uniq}
    return key.map(table).astype("float64")


def tensor_elems(shapes: pd.Series) -> pd.Series:
    uniq = pd.unique(shapes.astype(str))
    table = {k: float(_tensor_elems(k)) for k in uniq}
    return shapes.astype(str).map(table).astype("float64")
