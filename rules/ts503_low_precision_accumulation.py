"""TS503 low-precision-accumulation: fp16/bf16 accumulator over a long reduction."""

from __future__ import annotations

from typing import Any

from tilescope.engine import RuleContext
from tilescope.findings import Finding, Severity
from tilescope.ir.rulekit import alloc, locations, lowered_kernels
from tilescope.profile import Profile
from tilescope.rules._findings import make_finding

CODE = "TS503"
SLUG = "low-precision-accumulation"
NEEDS = ("ir",)
KIND = "static"
THRESHOLDS: dict[str, Any] = {
    "min_reduction_length": 1024,
    "high_reduction_length": 8192,
    "low_precision_dtypes": "float16,bfloat16",
}


def check(profile: Profile, ctx: RuleContext) -> list[Finding]:
    """
    ## What it does
    Finds GEMMs whose accumulator (the L0C tile) is fp16 or bf16 while the total reduction length —
    K per call times the iterations of the loop the accumulator is carried across — is long.

    ## Why is this bad?
    Rounding error grows with the number of additions; with an 11-bit (fp16) or 8-bit (bf16)
    mantissa, sums over thousands of products lose digits or overflow (fp16 max 65504). TileLang
    emits `__cc__ half` and `asc_mmad` without a warning.

    ## Example
    `accum_dtype="float16"` with K = 4096 (64 iterations of block_K = 64).

    ## What to do instead
    Accumulate in float32 (`T.alloc_l0c(..., "float32")`) and cast once when storing the result.

    ## Thresholds
    `min_reduction_length` (1024): medium; `high_reduction_length` (8192): high.
    `low_precision_dtypes` ("float16,bfloat16"). Static: est. saving 0 µs.

    ## Known limits
    The carried loop is the innermost serial loop around the GEMM unless `clear_accum=True`;
    accumulation carried across Python-level or outer loops is not seen.
    """
    ir = profile.ir or {}
    th = ctx.thresholds
    low = {d.strip() for d in str(th["low_precision_dtypes"]).split(",")}
    out: list[Finding] = []
    for k in lowered_kernels(ir):
        for g in k.get("gemms", []):
            total = g.get("total_k")
            if g["accum_dtype"] not in low or not isinstance(total, int):
                continue
            if total < int(th["min_reduction_length"]):
                continue
            sev = Severity.HIGH if total >= int(th["high_reduction_length"]) else Severity.MEDIUM
            msg = (
                f"{g['accum_dtype']} accumulator {g['c']} sums a reduction of K = {total} "
                f"({g['k']} per call × {g['k_loop_extent']} iterations): accumulate in float32"
            )
            acc = alloc(k, g["c"])
            out.append(
                make_finding(
                    ctx,
                    code=CODE,
                    slug=SLUG,
                    severity=sev,
                    kernels=(k["name"],),
                    message=msg,
                    evidence={
                        "accum_dtype": g["accum_dtype"],
                        "in_dtype": g["in_dtype"],
                        "total_k": total,
                        "k_per_call": g["k"],
                        "iterations": g["k_loop_extent"],
                        "problem_k": g.get("problem_k"),
                        "min_reduction_length": th["min_reduction_length"],
                        "high_reduction_length": th["high_reduction_length"],
                        "float32_l0c_bytes": (acc["padded_bytes"] * 2)
                        if acc and acc.get("padded_bytes")
                        else None,
                        "chip": ctx.chip.name,
                        "l0c_capacity_bytes": ctx.chip.l0c_bytes,
                    },
                    recommendation=(
                        f'allocate {g["c"]} as float32 (T.alloc_l0c(..., "float32")) and cast on store'
                    ),
                    saving_us=0.0,
                    locations=locations(ir, k, acc, "accumulator") + locations(ir, k, g, "gemm")[:1],
                )
            )
    return out
