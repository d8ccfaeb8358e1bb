"""TS506 tile-too-small: GEMM tiles too small for the problem to keep the Cube units busy."""

from __future__ import annotations

from typing import Any

from analyzer.engine import RuleContext
from analyzer.findings import Finding, Severity
from analyzer.ir.footprint import better_tilings, cube_occupancy, problem_shape
from analyzer.ir.rulekit import locations, lowered_kernels
from analyzer.profile import Profile

CODE = "TS506"
SLUG = "tile-too-small"
NEEDS = ("ir",)
KIND = "static"
THRESHOLDS: dict[str, Any] = {"min_gain": 2.0, "max_occupancy": 0.5}


def check(profile: Profile, ctx: RuleContext) -> list[Finding]:
    """
    ## What it does
    Estimates the Cube occupancy of each GEMM tiling from the problem size (the GM tensor the
    accumulator is stored to), the core count and the per-core share of HBM bandwidth, and compares
    it with larger tilings that still fit L1/L0A/L0B/L0C with double buffering.

    ## Why is this bad?
    Small tiles load (M·K + K·N) bytes for only M·N·K MACs: a 64×64×32 fp16 tile spends most of each
    step waiting for MTE2, so the Cube idles.

    ## Example
    64×64×32 on a 4096³ fp16 matmul on 24 cores: est. occupancy 0.14; 256×128×64 reaches 0.39.

    ## What to do instead
    Use the larger tiling the finding lists (it fits every scope with two versions).

    ## Thresholds
    Fire when the estimated occupancy is below `max_occupancy` (0.5) and the best fitting tiling is at
    least `min_gain` (2.0) times better. Severity medium (≥ 3× gain: high). Static: est. saving 0 µs.

    ## Known limits
    A roofline-style estimate: it depends on the chip's GM bandwidth (the vendor figure for the
    default memory type unless configured, see `tilescope info`), ignores L2 hits and assumes a plain
    L1 -> L0 GEMM. It ranks tilings; it does
    not predict measured utilisation.
    """
    ir = profile.ir or {}
    th = ctx.thresholds
    out: list[Finding] = []
    for k in lowered_kernels(ir):
        for g in k.get("gemms", []):
            prob = problem_shape(k, g)
            if prob is None or not all(isinstance(g[x], int) for x in ("m", "n", "k")):
                continue
            cur = cube_occupancy(g["m"], g["n"], g["k"], prob[0], prob[1], g["in_dtype"], ctx.chip)
            if cur["occupancy"] >= float(th["max_occupancy"]):
                continue
            better = better_tilings(g, prob, ctx.chip)
            if not better or cur["occupancy"] <= 0:
                continue
            gain = better[0]["occupancy"] / cur["occupancy"]
            if gain < float(th["min_gain"]):
                continue
            b = better[0]
            msg = (
                f"tile {g['m']}×{g['n']}×{g['k']} on a "
                f"{prob[0]}×{prob[1]}×{g.get('problem_k') or g['total_k']} "
                f"GEMM: est. Cube occupancy {cur['occupancy']:.2f} ({cur['tiles']} tiles on {cur['cores']} "
                f"cores); {b['block_M']}×{b['block_N']}×{b['block_K']} fits and reaches {b['occupancy']:.2f} "
                f"({gain:.1f}×)"
            )
            out.append(
                Finding(
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
                    locations=locations(ir, k, g, "gemm"),
                )
            )
    return out
