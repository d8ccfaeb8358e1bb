"""How busy a kernel's tiling keeps the Cube cores: GEMM and attention scores from ir.json dicts.

Pure Python (no TileLang), used by TS506 and `lint --sweep`. Both scores rank tilings; neither
predicts measured utilisation. What a score needs from the chip is listed in GEMM_FIGURES /
ATTENTION_FIGURES: where the chip table has no value (the 950's core count, clock and bandwidth),
the score is not computed and the caller says so ("not checked"), instead of dividing by 1 core.

Work distribution (`spread`): a kernel does `units` independent pieces of work (output tiles, times
the K splits of a split-K kernel; Q tiles x heads x batch for attention) on `blocks` blocks (the
explicit grid of `T.Kernel`, when it is a number), which run in waves over the cores:

    efficiency = units / (ceil(units / blocks) * blocks)     blocks sharing the units unevenly
               x blocks / (ceil(blocks / cores) * cores)     the last wave of blocks part-empty
"""

from __future__ import annotations

import math
from typing import Any

from tilescope.chips import ChipSpec
from tilescope.ir.footprint import padding_waste, problem_shape
from tilescope.ir.scopes import c0_elements, dtype_bytes, nbytes, round_up

# The chip figures each score divides by.
GEMM_FIGURES: tuple[str, ...] = ("aic_count", "clock_mhz", "hbm_bandwidth_gbps")
ATTENTION_FIGURES: tuple[str, ...] = ("aic_count",)
# Ascend C best practices: a GM transfer reaches the best bandwidth above 16 KB (chips.md §2a). A
# smaller operand load is charged as 16 KB: it is what makes a larger block_K (fewer, larger loads)
# score better than a smaller one at the same tile area.
MIN_EFFICIENT_TRANSFER = 16 * 1024
# Tile edges tried for better tilings (block_M, block_N) and for block_K.
MN_CANDIDATES = (64, 128, 256)
K_CANDIDATES = (32, 64, 128, 256)


def unknown_figures(chip: ChipSpec, figures: tuple[str, ...]) -> str | None:
    """Why a score cannot be computed on this chip ("950 has no aic_count, clock_mhz"), or None."""
    missing = chip.unknown_figures(*figures)
    if not missing:
        return None
    return (
        f"chip figures {', '.join(missing)}: {chip.name} has no source for them "
        "(give a chip TOML with them via --chip)"
    )


def grid_blocks(kernel: dict[str, Any]) -> int | None:
    """The number of blocks `T.Kernel` launches, when every grid extent is a number."""
    grid = kernel.get("grid") or []
    if not grid or not all(isinstance(g, int) for g in grid):
        return None
    return math.prod(grid)


def k_splits(gemm: dict[str, Any]) -> int:
    """How many blocks share one output tile's K: the problem's K over the K one accumulation covers.

    A split-K kernel accumulates only its K share per block (`local_kt` over K/split_k/block_K
    steps) and reduces the partial tiles in GM; an ordinary one accumulates the whole K.
    """
    total, problem = gemm.get("total_k"), gemm.get("problem_k")
    if not isinstance(total, int) or not isinstance(problem, int) or total <= 0 or total >= problem:
        return 1
    return math.ceil(problem / total)


def spread(units: int, blocks: int | None, cores: int) -> dict[str, Any]:
    """Share of the cores' time doing useful work when `units` go to `blocks` blocks on `cores`."""
    b = blocks or units
    per_block = math.ceil(units / b)
    block_waves = math.ceil(b / cores)
    eff = units / (per_block * b) * b / (block_waves * cores)
    return {
        "units": units,
        "blocks": b,
        "cores": cores,
        "waves": per_block * block_waves,
        "wave_efficiency": round(eff, 4),
    }


def _step_cycles(m: int, n: int, k: int, in_dtype: str, chip: ChipSpec, cores: int) -> tuple[int, float]:
    """Cube cycles and MTE2 (GM -> L1) cycles of one K step of an m x n x k tile."""
    c0 = c0_elements(in_dtype)
    cube = math.ceil(m / 16) * math.ceil(n / 16) * math.ceil(k / c0)
    size = dtype_bytes(in_dtype)
    loads = max(m * k * size, MIN_EFFICIENT_TRANSFER) + max(k * n * size, MIN_EFFICIENT_TRANSFER)
    per_cycle = (chip.hbm_bandwidth_gbps or 0) * 1e9 / cores / ((chip.clock_mhz or 1) * 1e6)
    return cube, (loads / per_cycle if per_cycle else 0.0)


def gemm_occupancy(
    m: int,
    n: int,
    k: int,
    problem: tuple[int, int],
    in_dtype: str,
    chip: ChipSpec,
    splits: int = 1,
    blocks: int | None = None,
    double_buffered: bool = True,
) -> dict[str, Any]:
    """Estimated share of time the Cube units do useful MACs for one GEMM tiling.

    Per K step a core does ceil(m/16)*ceil(n/16)*ceil(k/C0) Cube cycles and loads the two operand
    tiles from GM at its share of the GM bandwidth (each load charged at least 16 KB); with double
    buffering the two overlap (max), otherwise they add. Times the spread of the output tiles x K
    splits over the grid's blocks and the cores, times the unpadded share of the MACs. Needs the
    chip's core count, clock and GM bandwidth (GEMM_FIGURES).
    """
    cores = chip.aic_count or 1
    tiles = math.ceil(problem[0] / m) * math.ceil(problem[1] / n)
    dist = spread(tiles * splits, blocks, cores)
    cube, mte2 = _step_cycles(m, n, k, in_dtype, chip, cores)
    step = max(cube, mte2) if double_buffered else cube + mte2
    pw = padding_waste(m, n, k, in_dtype)
    occ = (cube / step if step else 0.0) * dist["wave_efficiency"] * (1 - pw["waste_pct"] / 100)
    return {
        **dist,
        "tiles": tiles,
        "k_splits": splits,
        "cube_cycles_per_step": cube,
        "mte2_cycles_per_step": round(mte2, 1),
        "occupancy": round(occ, 4),
        "gm_bandwidth_gbps": chip.hbm_bandwidth_gbps,
    }


def gemm_tile_footprint(
    m: int, n: int, k: int, in_dtype: str, acc_dtype: str, versions: int = 2
) -> dict[str, int]:
    """Bytes per scope of a plain L1 -> L0A/L0B -> L0C GEMM tiling with `versions` operand copies."""
    c0 = c0_elements(in_dtype)
    a = nbytes([round_up(m, 16), round_up(k, c0)], in_dtype)
    b = nbytes([round_up(k, c0), round_up(n, 16)], in_dtype)
    c = nbytes([round_up(m, 16), round_up(n, 16)], acc_dtype)
    return {"L1": (a + b) * versions, "L0A": a * versions, "L0B": b * versions, "L0C": c}


def _edges(bound: int | None, candidates: tuple[int, ...], align: int) -> list[int]:
    """Candidate tile edges no larger than the problem's (rounded up to the fractal): a 128-row tile
    on a 64-row problem only adds padding."""
    if not bound:
        return list(candidates)
    top = round_up(bound, align)
    return sorted({c for c in candidates if c < top} | {min(top, candidates[-1])})


def gemm_context(kernel: dict[str, Any], gemm: dict[str, Any]) -> dict[str, Any] | None:
    """What the GEMM score needs from ir.json: problem M x N, K per accumulation, K splits, grid."""
    if not all(isinstance(gemm[x], int) for x in ("m", "n", "k")):
        return None
    prob = problem_shape(kernel, gemm)
    if prob is None:
        return None
    splits = k_splits(gemm)
    blocks = grid_blocks(kernel)
    tiles = math.ceil(prob[0] / gemm["m"]) * math.ceil(prob[1] / gemm["n"])
    return {
        "problem": prob,
        "k_per_block": gemm.get("total_k") if isinstance(gemm.get("total_k"), int) else None,
        "splits": splits,
        "blocks": blocks,
        # a grid of exactly one block per unit follows the tiling (T.Kernel(ceildiv(N, bn), ...));
        # any other grid (T.Persistent over NUM_BLOCKS) stays when the tiling changes
        "grid_follows_tiling": blocks is None or blocks == tiles * splits,
    }


def gemm_score(
    kernel: dict[str, Any], gemm: dict[str, Any], chip: ChipSpec, double_buffered: bool | None = None
) -> dict[str, Any] | None:
    """The GEMM occupancy of the kernel's own tiling (None when ir.json lacks the problem shape).

    `double_buffered` None: as lowered (both operands kept 2 or more versions).
    """
    ctx = gemm_context(kernel, gemm)
    if ctx is None:
        return None
    if double_buffered is None:
        operands = (gemm["a"], gemm["b"])
        versions = [a.get("versions", 1) for a in kernel.get("allocations", []) if a["name"] in operands]
        double_buffered = bool(versions) and min(versions) > 1
    return gemm_occupancy(
        gemm["m"], gemm["n"], gemm["k"], ctx["problem"], gemm["in_dtype"], chip,
        splits=ctx["splits"], blocks=ctx["blocks"], double_buffered=double_buffered,
    )


def better_tilings(
    gemm: dict[str, Any], ctx: dict[str, Any], chip: ChipSpec, limit: int = 3
) -> list[dict[str, Any]]:
    """Tilings that fit every scope with two versions, no larger than the problem, best first.

    Equal scores go to the larger tile, then the larger block_K (fewer K iterations).
    """
    prob, splits = ctx["problem"], ctx["splits"]
    c0 = c0_elements(gemm["in_dtype"])
    out = []
    for bm in _edges(prob[0], MN_CANDIDATES, 16):
        for bn in _edges(prob[1], MN_CANDIDATES, 16):
            for bk in _edges(ctx["k_per_block"], K_CANDIDATES, c0):
                fp = gemm_tile_footprint(bm, bn, bk, gemm["in_dtype"], gemm["accum_dtype"])
                if any(fp[h] > chip.capacity(h) for h in fp):
                    continue
                tiles = math.ceil(prob[0] / bm) * math.ceil(prob[1] / bn)
                blocks = tiles * splits if ctx["grid_follows_tiling"] else ctx["blocks"]
                occ = gemm_occupancy(bm, bn, bk, prob, gemm["in_dtype"], chip, splits=splits, blocks=blocks)
                row = {"block_M": bm, "block_N": bn, "block_K": bk, "occupancy": occ["occupancy"]}
                out.append({**row, "footprint": fp})
    out.sort(key=lambda r: (-r["occupancy"], -(r["block_M"] * r["block_N"]), -r["block_K"]))
    return out[:limit]


def is_attention(kernel: dict[str, Any]) -> bool:
    """Two GEMMs in one loop, the first recomputed every iteration (S = Q K^T per KV block), the
    second fed from it through the Vector units: a flash-attention KV loop."""
    gemms = kernel.get("gemms", [])
    if len(gemms) < 2:
        return False
    first, second = gemms[0], gemms[-1]
    return (
        first.get("k_loop") is not None
        and first.get("k_loop") == second.get("k_loop")
        and not first.get("accumulates_over_loop")
    )


def _output_tensor(kernel: dict[str, Any], gemm: dict[str, Any]) -> dict[str, Any] | None:
    """The GM tensor a GEMM's accumulator reaches through UB copies (the attention output O); when
    the Vector code in between is not a copy (o = o * alpha + pv), the one GM tensor the kernel
    writes."""
    gm = {t["name"]: t for t in kernel.get("gm_tensors", [])}
    targets = {gemm["c"]}
    for _ in range(4):
        for cp in kernel.get("copies", []):
            if cp["src"] in targets:
                if cp["dst"] in gm:
                    return gm[cp["dst"]]
                targets.add(cp["dst"])
    written = {cp["dst"] for cp in kernel.get("copies", []) if cp["dst"] in gm}
    return gm[written.pop()] if len(written) == 1 else None


def attention_score(kernel: dict[str, Any], chip: ChipSpec) -> dict[str, Any] | None:
    """Waves of Q tiles x heads x batch over the cores, for a flash-attention kernel.

    The work units are the output's rows (every axis but the last, head_dim) in Q tiles of the
    first GEMM's M; they spread over the grid's blocks and the cores (module docstring). Needs the
    core count (ATTENTION_FIGURES).
    """
    if not is_attention(kernel):
        return None
    qk, pv = kernel["gemms"][0], kernel["gemms"][-1]
    out = _output_tensor(kernel, pv)
    block_q = qk.get("m")
    if out is None or not isinstance(block_q, int) or len(out["shape"]) < 2:
        return None
    shape = out["shape"]
    if not all(isinstance(d, int) for d in shape[:-1]):
        return None
    q_tiles = math.ceil(shape[-2] / block_q)
    heads_batch = math.prod(shape[:-2]) if len(shape) > 2 else 1
    dist = spread(q_tiles * heads_batch, grid_blocks(kernel), chip.aic_count or 1)
    return {**dist, "q_tiles": q_tiles, "heads_x_batch": heads_batch, "occupancy": dist["wave_efficiency"]}
