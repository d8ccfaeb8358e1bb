"""TS506 tile-too-small: GEMM tiles too small for the problem to keep the Cube units busy."""

from __future__ import annotations

from typing import Any

from tilescope.engine import RuleContext
from tilescope.findings import Finding, Severity
from tilescope.ir.occupancy import (
    GEMM_FIGURES,
    better_tilings,
    gemm_context,
    gemm_score,
    is_attention,
    unknown_figures,
)
from tilescope.ir.rulekit import locations, lowered_kernels
from tilescope.profile import Profile
from tilescope.rules._findings import make_finding

CODE = "TS506"
SLUG = "tile-too-small"
NEEDS = ("ir",)
KIND = "static"
THRESHOLDS: dict[str, Any] = {"min_gain": 2.0, "max_occupancy": 0.5}


def missing_inputs(profile: Profile) -> tuple[str, ...]:
    """The estimate divides by the chip's cores, clock and GM bandwidth: on a chip without them (the
    950's are unknown) the rule is not checked, instead of scoring every tiling on one core."""
    has_gemm = any(k.get("gemms") for k in lowered_kernels(profile.ir or {}))
    why = unknown_figures(profile.chip, GEMM_FIGURES) if has_gemm else None
    return (why,) if why else ()


def _work(cur: dict[str, Any]) -> str:
    """'32 blocks (1 tile × 32 K splits) on 24 cores' / '4096 tiles in 24 blocks on 24 cores'."""
    def n(count: int, word: str) -> str:
        return f"{count} {word}{'s' if count != 1 else ''}"

    tiles, blocks, cores = n(cur["tiles"], "tile"), n(cur["blocks"], "block"), n(cur["cores"], "core")
    if cur["k_splits"] > 1:
        return f"{blocks} ({tiles} × {cur['k_splits']} K splits) on {cores}"
    return f"{tiles} in {blocks} on {cores}"


def check(profile: Profile, ctx: RuleContext) -> list[Finding]:
    """
    ## What it does
    Estimates the Cube occupancy of each GEMM tiling from the problem size (the GM tensor the
    accumulator is stored to), how the work spreads (output tiles times the K splits of a split-K
    kernel, over the blocks of an explicit `T.Kernel` grid, in waves over the cores) and the
    per-core share of GM bandwidth, and compares it with other tilings that fit
    L1/L0A/L0B/L0C with double buffering and are no larger than the problem.

    ## Why is this bad?
    Small tiles load (M·K + K·N) bytes for only M·N·K MACs: a 64×64×32 fp16 tile spends most of each
    step waiting for MTE2, so the Cube idles.

    ## Example
    64×64×32 on a 4096³ fp16 matmul on a 910B2 (24 cores): est. occupancy 0.04 (4 KiB operand
    loads); 128×256×64 fits and reaches 0.41. A split-K GEMM of one 256×256 tile over 32 blocks is
    not "1 tile on 24 cores": its 32 blocks fill 24 cores in two waves.

    ## What to do instead
    Use the larger tiling the finding lists (it fits every scope with two versions).

    ## Thresholds
    Fire when the estimated occupancy is below `max_occupancy` (0.5) and the best fitting tiling is at
    least `min_gain` (2.0) times better. Severity medium (≥ 3× gain: high). Static: est. saving 0 µs.
    Alternatives: block_M/block_N from 64, 128, 256 and block_K from 32 to 256, each capped at the
    problem's edge rounded up to the fractal (M = 64 is never advised block_M = 128); an operand
    load under 16 KB is charged as 16 KB (GM transfers reach full bandwidth above 16 KB), so of
    tilings with the same area the larger block_K (fewer K iterations) scores higher, and ties go
    to it.

    ## Known limits
    A roofline-style estimate: it depends on the chip's GM bandwidth (the vendor figure for the
    default memory type unless configured, see `tilescope info`), ignores L2 hits and assumes a plain
    L1 -> L0 GEMM. It ranks tilings; it does not predict measured utilisation. Charging a load
    under 16 KB as 16 KB is an assumption (the vendor says only that larger transfers reach the
    best bandwidth; the curve below is not published). Not checked on a
    chip without a core count, clock or GM bandwidth (the 950: give a chip TOML with them). K
    splits are inferred from the K one accumulation covers against the problem's K; a grid of one
    block per unit is assumed to follow the tiling, any other grid to stay. Flash-attention
    kernels are skipped (their GEMMs are per KV block; `lint --sweep` scores them by waves).
    """
    ir = profile.ir or {}
    th = ctx.thresholds
    out: list[Finding] = []
    for k in lowered_kernels(ir):
        if is_attention(k):
            continue
        for g in k.get("gemms", []):
            work = gemm_context(k, g)
            # double buffered as the alternatives are: a depth the scheduler reduced is TS504's
            cur = gemm_score(k, g, ctx.chip, double_buffered=True)
            if work is None or cur is None or cur["occupancy"] >= float(th["max_occupancy"]):
                continue
            better = better_tilings(g, work, ctx.chip)
            if not better or cur["occupancy"] <= 0:
                continue
            gain = better[0]["occupancy"] / cur["occupancy"]
            if gain < float(th["min_gain"]):
                continue
            b = better[0]
            prob = work["problem"]
            msg = (
                f"tile {g['m']}×{g['n']}×{g['k']} on a "
                f"{prob[0]}×{prob[1]}×{g.get('problem_k') or g['total_k']} "
                f"GEMM: est. Cube occupancy {cur['occupancy']:.2f} ({_work(cur)}); "
                f"{b['block_M']}×{b['block_N']}×{b['block_K']} fits and reaches {b['occupancy']:.2f} "
                f"({gain:.1f}×)"
            )
            out.append(
                make_finding(
                    ctx,
                    code=CODE,
                    slug=SLUG,
                    severity=Severity.HIGH if gain >= 3 else Severity.MEDIUM,
                    kernels=(k["name"],),
                    message=msg,
                    evidence={
                        "tile": [g["m"], g["n"], g["k"]],
                        "problem_mn": list(prob),
                        "estimate": cur,
                        "alternatives": better,
                        "gain": round(gain, 2),
                        "chip": ctx.chip.name,
                        "aic_count": ctx.chip.aic_count,
                        "gm_bandwidth_gbps": ctx.chip.hbm_bandwidth_gbps,
                        "gm_bandwidth_source": ctx.chip.hbm_bandwidth_source,
                        "min_gain": th["min_gain"],
                        "max_occupancy": th["max_occupancy"],
                    },
                    recommendation=(
                        f"use block_M={b['block_M']}, block_N={b['block_N']}, block_K={b['block_K']}"
                    ),
                    saving_us=0.0,
                    locations=locations(ir, k, g, "gemm"),
                )
            )
    return out
