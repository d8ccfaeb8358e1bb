"""Work and traffic of a launch estimated from its shapes (docs/metrics.md §3.4): the Cube FLOPs of
MatMul*/BatchMatMul* and FlashAttentionScore* from their input and output shapes, and the bytes of
all input and output tensors from shapes and dtypes. `shape_metrics` computes them once per unique
shape/dtype combination; tilescope.metrics uses them where the profiler measured none."""

from __future__ import annotations

from math import prod
from typing import Any, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tilescope.shapes import parse_shape

DTYPE_BYTES = {
    "FLOAT16": 2,
    "FP16": 2,
    "HALF": 2,
    "BF16": 2,
    "BFLOAT16": 2,
    "INT16": 2,
    "UINT16": 2,
    "FLOAT": 4,
    "FLOAT32": 4,
    "FP32": 4,
    "INT32": 4,
    "UINT32": 4,
    "INT64": 8,
    "UINT64": 8,
    "DOUBLE": 8,
    "FLOAT64": 8,
    "INT8": 1,
    "UINT8": 1,
    "BOOL": 1,
    "FP8": 1,
    "HIFLOAT8": 1,
}
_FLOP_KEYS = ("op_type", "input_shapes", "output_shapes", "input_dtypes", "output_dtypes")


class CodedColumns(Protocol):
    """What `shape_metrics` reads of a kernel table: `tilescope.metrics.KernelColumns` (a protocol,
    so this module, which the metrics build on, imports nothing of theirs)."""

    n: int

    def __contains__(self, name: str) -> bool: ...

    def codes(self, name: str) -> tuple[np.ndarray, list[Any]]: ...


def _split_shapes(text: Any) -> list[list[int]] | None:
    """The shape lists of a shapes cell (`parse_shape`); None for a missing or empty cell."""
    return parse_shape(text) if isinstance(text, str) and text else None


def _matmul_flops(ins: list[list[int]], outs: list[list[int]]) -> float | None:
    tensors = [s for s in ins if s]
    if len(tensors) < 2 or not outs or len(outs[0]) < 2:
        return None
    a, b, c = tensors[0], tensors[1], outs[0]
    if len(a) < 2 or len(b) < 2:
        return None
    m, n = c[-2], c[-1]
    batch = prod(c[:-2]) if len(c) > 2 else 1
    a0, a1 = a[-2], a[-1]
    b0, b1 = b[-2], b[-1]
    for k_a, other_a in ((a1, a0), (a0, a1)):  # A = [M, K] or transposed [K, M]
        if other_a != m:
            continue
        if (b0 == k_a and b1 == n) or (b1 == k_a and b0 == n):
            return 2.0 * batch * m * n * k_a
    return None


def _fa_flops(ins: list[list[int]], outs: list[list[int]], backward: bool) -> float | None:
    if len(ins) < 2 or not ins[0] or not ins[1]:
        return None
    q, kk = ins[0], ins[1]
    seq: int | None = None
    for s in ins[2:]:
        if len(s) == 2 and s[0] in q and s[1] in kk:  # atten_mask [S_q, S_kv]
            seq = s[0]
            break
    if len(q) == 4:  # BNSD (default) or BSND; softmax_max output is [B, N, S_q, 8]
        sm = outs[0] if outs and len(outs[0]) == 4 else None
        if sm and q[1] == sm[2] and q[2] == sm[1]:
            b, sq, h, skv = q[0], q[1], q[2] * q[3], kk[1]
        else:
            b, sq, h, skv = q[0], q[2], q[1] * q[3], kk[2]
    elif len(q) == 3:  # BSH (default) or SBH, told apart by the mask's sequence length
        if seq is not None and q[0] == seq and q[1] != seq:
            b, sq, h, skv = q[1], q[0], q[2], kk[0]
        else:
            b, sq, h, skv = q[0], q[1], q[2], kk[1]
    else:
        return None
    flops = 4.0 * b * sq * skv * h
    return flops * 2.5 if backward else flops


def _tensor_bytes(shapes: list[list[int]] | None, dtypes: Any) -> float | None:
    if not shapes or not isinstance(dtypes, str):
        return None
    types = dtypes.split(";")
    total = 0
    for i, shp in enumerate(shapes):
        if not shp:
            continue  # empty slot = optional input not given
        name = types[i].strip().upper().removeprefix("DT_") if i < len(types) else ""
        size = DTYPE_BYTES.get(name)
        if size is None:
            return None
        total += prod(shp) * size
    return float(total)


def _one_combo(op_type: Any, ins_s: Any, outs_s: Any, in_dt: Any, out_dt: Any) -> tuple[float, float]:
    ins, outs = _split_shapes(ins_s), _split_shapes(outs_s)
    flops: float | None = None
    t = op_type if isinstance(op_type, str) else ""
    if ins is not None and outs is not None:
        if t.startswith(("MatMul", "BatchMatMul")):
            flops = _matmul_flops(ins, outs)
        elif t.startswith("FlashAttentionScore"):
            flops = _fa_flops(ins, outs, backward="Grad" in t)
    bi, bo = _tensor_bytes(ins, in_dt), _tensor_bytes(outs, out_dt)
    nbytes = bi + bo if bi is not None and bo is not None else None
    return (flops if flops is not None else np.nan, nbytes if nbytes is not None else np.nan)


def _dense_codes(key: np.ndarray) -> tuple[np.ndarray, int]:
    """0..m-1 codes for the distinct values of `key`, numbered in order of first appearance (Arrow's
    hash-based dictionary_encode; no sort), and m."""
    enc = pc.dictionary_encode(pa.array(key))
    return enc.indices.to_numpy().astype("int64"), len(enc.dictionary)


def shape_metrics(cols: CodedColumns) -> tuple[np.ndarray, np.ndarray]:
    n = cols.n
    if not n or "input_shapes" not in cols:
        return np.full(n, np.nan), np.full(n, np.nan)
    # one code per unique combination: a mixed-radix number over the key columns' codes, made dense
    # by one hash pass (re-densified early in the unlikely case the radix would overflow int64)
    key = np.zeros(n, dtype="int64")
    radix = 1
    keys: list[tuple[np.ndarray, list[Any]] | None] = []
    for c in _FLOP_KEYS:
        if c not in cols:
            keys.append(None)
            continue
        col_codes, col_uniques = cols.codes(c)
        keys.append((col_codes, col_uniques))
        base = len(col_uniques) + 1
        if radix * base >= 1 << 62:
            key, radix = _dense_codes(key)
        key = key * base + col_codes
        radix *= base
    codes, _ = _dense_codes(key)
    # codes are numbered in order of first appearance: code k first occurs where the running max
    # of the codes first reaches k
    running = np.maximum.accumulate(codes)
    first = np.flatnonzero(np.concatenate(([True], running[1:] > running[:-1])))

    def value(key: tuple[np.ndarray, list[Any]] | None, row: int) -> Any:
        if key is None:
            return None
        v = key[1][key[0][row]]
        return None if v is None or (isinstance(v, float) and np.isnan(v)) else v

    vals = np.array(
        [_one_combo(*(value(key, int(r)) for key in keys)) for r in first], dtype="float64"
    ).reshape(-1, 2)
    return vals[codes, 0], vals[codes, 1]
