"""Per-scope footprints, fractal padding and a Cube occupancy estimate, from walked IR dicts.

Pure Python (no TileLang): used while building ir.json, by the static rules and by the sweep.
"""

from __future__ import annotations

from typing import Any

from tilescope.chips import ChipSpec
from tilescope.ir.scopes import (
    HARDWARE,
    c0_elements,
    nbytes,
    padded_shape,
    round_up,
    ub_aligned,
)


def operand_k_axes(walked: dict[str, Any]) -> dict[str, int]:
    """Which axis of each Cube buffer is K: from the GEMM operands, propagated back along copies."""
    axes: dict[str, int] = {}
    for g in walked["gemms"]:
        axes.setdefault(g["a"], 0 if g["transpose_a"] else 1)
        axes.setdefault(g["b"], 1 if g["transpose_b"] else 0)
    # L1 (and UB -> L1) tiles feeding an L0 operand share its layout; two passes cover UB -> L1 -> L0.
    for _ in range(2):
        for cp in walked["copies"]:
            if cp["dst"] in axes and cp["src"] not in axes and cp["src_level"] in ("L1", "UB"):
                axes[cp["src"]] = axes[cp["dst"]]
    return axes


def annotate_allocations(walked: dict[str, Any], versions: dict[str, int]) -> None:
    """Add padded_shape, padded_bytes, versions and total_bytes to each allocation (in place)."""
    axes = operand_k_axes(walked)
    for a in walked["allocations"]:
        shape = a["shape"]
        if not all(isinstance(d, int) for d in shape):
            a.update(
                padded_shape=None,
                padded_bytes=None,
                versions=versions.get(a["name"], 1),
                total_bytes=None,
                k_axis=None,
            )
            continue
        k_axis = axes.get(a["name"])
        pshape = padded_shape(shape, a["hardware"], a["dtype"], k_axis)
        pbytes = nbytes(pshape, a["dtype"])
        if a["hardware"] == "UB":
            pbytes = ub_aligned(pbytes)
        n = versions.get(a["name"], 1)
        a.update(padded_shape=pshape, padded_bytes=pbytes, versions=n, total_bytes=pbytes * n, k_axis=k_axis)


def footprints(walked: dict[str, Any], lowered: list[dict[str, Any]], chip: ChipSpec) -> dict[str, Any]:
    """Per hardware buffer: tilescope's padded, multi-version estimate and the lowered size.

    The lowered `buf_dyn_*` / per-buffer allocations already include versions and padding, so when the
    lowering succeeded they are authoritative (`bytes`); the estimate is kept as a cross-check and is
    what a failed lowering is judged by.
    """
    out: dict[str, Any] = {}
    for hw in HARDWARE:
        bufs = [a for a in walked["allocations"] if a["hardware"] == hw and a.get("total_bytes") is not None]
        est = sum(a["total_bytes"] for a in bufs)
        low = [x for x in lowered if x["hardware"] == hw]
        lowered_bytes = sum(x["bytes"] for x in low) if low else None
        if not bufs and lowered_bytes is None:
            continue
        out[hw] = {
            "estimated_bytes": est,
            "lowered_bytes": lowered_bytes,
            "bytes": lowered_bytes if lowered_bytes is not None else est,
            "capacity_bytes": chip.capacity(hw),
            "buffers": [a["name"] for a in sorted(bufs, key=lambda b: -b["total_bytes"])],
        }
    return out


def padding_waste(m: int, n: int, k: int, in_dtype: str) -> dict[str, Any]:
    """Share of Cube work spent on padding when M, N are blocked by 16 and K by C0."""
    c0 = c0_elements(in_dtype)
    mp, np_, kp = round_up(m, 16), round_up(n, 16), round_up(k, c0)
    useful = m * n * k
    padded = mp * np_ * kp
    return {
        "m": m,
        "n": n,
        "k": k,
        "m_padded": mp,
        "n_padded": np_,
        "k_padded": kp,
        "c0": c0,
        "useful_macs": useful,
        "padded_macs": padded,
        "waste_pct": round(100.0 * (1 - useful / padded), 2) if padded else 0.0,
    }


def problem_shape(walked: dict[str, Any], gemm: dict[str, Any]) -> tuple[int, int] | None:
    """(M, N) of the whole problem: the GM tensor the accumulator tile is stored to."""
    gm = {t["name"]: t for t in walked["gm_tensors"]}
    targets = {gemm["c"]}
    for _ in range(3):  # L0C -> UB -> GM chains
        for cp in walked["copies"]:
            if cp["src"] in targets:
                if cp["dst"] in gm:
                    shape = gm[cp["dst"]]["shape"]
                    if len(shape) >= 2 and all(isinstance(d, int) for d in shape[-2:]):
                        return int(shape[-2]), int(shape[-1])
                targets.add(cp["dst"])
    return None


def clamp_total_k(walked: dict[str, Any]) -> None:
    """Cap each GEMM's reduction length at the K of the GM tensor feeding operand A (ragged last tile)."""
    gm = {t["name"]: t for t in walked["gm_tensors"]}
    for g in walked["gemms"]:
        g["problem_k"] = None
        src = g["a"]
        for _ in range(3):
            feeder = next((c for c in walked["copies"] if c["dst"] == src), None)
            if feeder is None:
                break
            src = feeder["src"]
            if src in gm:
                shape = gm[src]["shape"]
                axis = -2 if g["transpose_a"] else -1
                if len(shape) >= 2 and isinstance(shape[axis], int):
                    g["problem_k"] = int(shape[axis])
                break
        if g["problem_k"] and g["total_k"] and g["accumulates_over_loop"] and g["total_k"] > g["problem_k"]:
            g["total_k"] = g["problem_k"]
