"""Tensor shapes as profilers write them (`"4096,2,512;;8"`: tensors by `;`, dims by `,`), parsed
once for every reader and for the FLOP and byte estimates (tilescope.flops). Standard library only."""

from __future__ import annotations

from functools import lru_cache

# 2**40 elements along one axis is 2,000× a 910B's memory at one byte each
MAX_DIM = 2**40


@lru_cache(maxsize=65536)
def parse_shape(text: str) -> list[list[int]] | None:
    """`"4096,2,512;;8"` -> [[4096, 2, 512], [], [8]]; None when a dim is not an integer in
    0 .. MAX_DIM (a negative or astronomically large dim is no shape: its byte count would be
    negative or overflow, and every bandwidth and speed-of-light figure built on it wrong)."""
    try:
        dims = [[int(d) for d in t.split(",") if d.strip()] for t in text.split(";")]
    except ValueError:
        return None
    if any(d < 0 or d > MAX_DIM for tensor in dims for d in tensor):
        return None
    return dims
