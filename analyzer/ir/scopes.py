"""Buffer scopes of the three TileLang dialects, fractal padding and memory levels.

No TileLang import here: rules and `locate` use these helpers on an ir.json dict.

The same scope string means different memories per stack (shared chips.md §9): `shared.dyn` is UB in
tilelang 0.1.15's Ascend dialect, L1 in tilelang-ascend 0.1.4 and GPU shared memory in the CUDA
dialect. The walker therefore records the dialect and maps scopes through `hardware_for`.
"""

from __future__ import annotations

from collections.abc import Sequence

# Dialect ids recorded in ir.json.
ASCEND_0115 = "tilelang-0.1.15-ascend"  # tvm.tirx, `import tilelang.ascend.language as T`
TILELANG_ASCEND = "tilelang-ascend"  # tvm.tir (tilelang-ascend 0.1.4, A2/A3)
CUDA = "tilelang-cuda"  # default `tilelang.language`, not Ascend hardware

HARDWARE = ("UB", "L1", "L0A", "L0B", "L0C")

_ASCEND_0115: dict[str, str] = {
    "shared.dyn": "UB",
    "shared": "UB",  # bool buffers are downgraded to static "shared"; errors name UB "shared"
    "shared.l1": "L1",
    "shared.l1.dyn": "L1",
    "shared.l0a": "L0A",
    "shared.l0a.dyn": "L0A",
    "shared.l0b": "L0B",
    "shared.l0b.dyn": "L0B",
    "shared.l0c": "L0C",
    "shared.l0c.dyn": "L0C",
    "global": "GM",
    "local.fragment": "REG",  # vector-core registers inside T.SimtVF
    "local": "REG",
}

_TILELANG_ASCEND: dict[str, str] = {
    "shared.dyn": "L1",
    "shared.l1": "L1",
    "shared": "UB",
    "wmma.matrix_a": "L0A",
    "wmma.matrix_b": "L0B",
    "wmma.accumulator": "L0C",
    "global": "GM",
    "local.fragment": "REG",
    "local": "REG",
}

_CUDA: dict[str, str] = {
    "shared.dyn": "SMEM",  # GPU shared memory: never checked against UB
    "shared": "SMEM",
    "local.fragment": "REG",
    "local": "REG",
    "global": "GM",
}

_MAPS = {ASCEND_0115: _ASCEND_0115, TILELANG_ASCEND: _TILELANG_ASCEND, CUDA: _CUDA}


def hardware_for(scope: str, dialect: str) -> str:
    """The memory a scope string lives in for one dialect ('UB', 'L1', ..., 'GM', 'REG', 'SMEM', '?')."""
    return _MAPS.get(dialect, _ASCEND_0115).get(scope, "?")


def dtype_bytes(dtype: str) -> float:
    """Bytes per element ('float16' -> 2, 'int4' -> 0.5, 'bool' -> 1)."""
    if dtype == "bool":
        return 1
    digits = "".join(ch for ch in dtype if ch.isdigit())
    bits = int(digits.split("x")[0]) if digits else 8
    if "float8" in dtype and bits > 8:  # float8_e4m3fn: the digits after 8 are the format
        bits = 8
    if "float4" in dtype and bits > 4:
        bits = 4
    return bits / 8


def c0_elements(dtype: str) -> int:
    """K elements per fractal row: C0 = 32 bytes / sizeof(dtype) (chips.md §4)."""
    return max(1, int(32 / dtype_bytes(dtype)))


def round_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


def padded_shape(shape: Sequence[int], hardware: str, dtype: str, k_axis: int | None) -> list[int]:
    """Shape a Cube buffer occupies: M/N rounded up to 16 and K up to C0; UB only byte-aligned.

    `k_axis` says which axis of a 2-D L1/L0A/L0B tile is the reduction axis (None: unknown, then
    the last axis is taken as K, as for an untransposed A operand). L0C holds M x N in 16 x 16 blocks.
    """
    dims = [int(d) for d in shape]
    if hardware not in ("L1", "L0A", "L0B", "L0C") or len(dims) < 2:
        return dims
    lead, (r, c) = dims[:-2], dims[-2:]
    if hardware == "L0C":
        return [*lead, round_up(r, 16), round_up(c, 16)]
    c0 = c0_elements(dtype)
    k = 1 if k_axis is None else k_axis
    if k == 0:
        return [*lead, round_up(r, c0), round_up(c, 16)]
    return [*lead, round_up(r, 16), round_up(c, c0)]


def nbytes(shape: Sequence[int], dtype: str) -> int:
    n = 1
    for d in shape:
        n *= int(d)
    return int(n * dtype_bytes(dtype))


def ub_aligned(nb: int) -> int:
    """UB allocations start on 32-byte boundaries."""
    return round_up(nb, 32)


# Direction of a copy -> the pipe that moves it (product.md words).
PIPE_OF_DIRECTION: dict[tuple[str, str], str] = {
    ("GM", "L1"): "MTE2",
    ("GM", "UB"): "MTE2",
    ("L1", "L0A"): "MTE1",
    ("L1", "L0B"): "MTE1",
    ("L0C", "GM"): "FixPipe",
    ("L0C", "UB"): "FixPipe",
    ("L0C", "L1"): "FixPipe",
    ("UB", "GM"): "MTE3",
    ("UB", "L1"): "MTE3",
    ("UB", "UB"): "Vector",
}
