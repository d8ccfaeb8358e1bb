"""TS502 fractal-misalignment: GEMM tile dims that are not multiples of the Cube fractal."""

from __future__ import annotations

from typing import Any

from tilescope.engine import RuleContext
from tilescope.findings import Finding, Severity
from tilescope.ir.footprint import padding_waste
from tilescope.ir.rulekit import locations, lowered_kernels
from tilescope.profile import Profile
from tilescope.rules._findings import make_finding

CODE = "TS502"
SLUG = "fractal-misalignment"
NEEDS = ("ir",)
KIND = "static"
THRESHOLDS: dict[str, Any] = {"min_waste_pct": 1.0, "medium_waste_pct": 10.0, "high_waste_pct": 25.0}


def check(profile: Profile, ctx: RuleContext) -> list[Finding]:
    """
    ## What it does
    For every GEMM, rounds M and N up to 16 and K up to C0 (32 bytes / input dtype size: 16 for
    fp16/bf16, 32 for int8, 8 for fp32) and reports the share of Cube work spent on padding.

    ## Why is this bad?
    The Cube works on 16 × C0 fractals. TileLang pads silently: a 100×120×40 fp16 tile runs as
    112×128×48, so 30.2 % of the MACs and of the L0 bytes are zeros. The generated code also trips
    `static_assert(M % FRAC_N == 0)` in the GEMM template at bisheng compile time.

    ## Example
    `block_M=100, block_N=120, block_K=40` → padded 112×128×48, waste 30.2 %.

    ## What to do instead
    Choose tiles that are multiples of 16 (M, N) and of C0 (K), e.g. 112×128×48 or 128×128×64.

    ## Thresholds
    `min_waste_pct` (1.0) fires; severity low below `medium_waste_pct` (10), medium below
    `high_waste_pct` (25), high above. Static finding: est. saving 0 µs (no device time).

    ## Known limits
    Per-tile padding only; ragged tiles at the problem's edge are not counted.
    """
    ir = profile.ir or {}
    th = ctx.thresholds
    out: list[Finding] = []
    for k in lowered_kernels(ir):
        for g in k.get("gemms", []):
            if not all(isinstance(g[x], int) for x in ("m", "n", "k")):
                continue
            pw = padding_waste(g["m"], g["n"], g["k"], g["in_dtype"])
            if pw["waste_pct"] < float(th["min_waste_pct"]):
                continue
            sev = (
                Severity.HIGH
                if pw["waste_pct"] >= float(th["high_waste_pct"])
                else (Severity.MEDIUM if pw["waste_pct"] >= float(th["medium_waste_pct"]) else Severity.LOW)
            )
            bad = [
                f"{d}={g[d.lower()]}"
                for d, mult in (("M", 16), ("N", 16), ("K", pw["c0"]))
                if g[d.lower()] % mult
            ]
            msg = (
                f"GEMM {g['c']} += {g['a']} @ {g['b']}: tile {g['m']}×{g['n']}×{g['k']} runs as "
                f"{pw['m_padded']}×{pw['n_padded']}×{pw['k_padded']} ({', '.join(bad)} not on the "
                f"16/{pw['c0']} fractal): {pw['waste_pct']} % of Cube work is padding"
            )
            out.append(
                make_finding(
                    ctx,
                    code=CODE,
                    slug=SLUG,
                    severity=sev,
                    kernels=(k["name"],),
                    message=msg,
                    evidence={
                        **pw,
                        "in_dtype": g["in_dtype"],
                        "fractal_mn": 16,
                        "chip": ctx.chip.name,
                        "min_waste_pct": th["min_waste_pct"],
                        "medium_waste_pct": th["medium_waste_pct"],
                        "high_waste_pct": th["high_waste_pct"],
                    },
                    recommendation=(
                        f"use tiles {pw['m_padded']}×{pw['n_padded']}×{pw['k_padded']} (same padded cost, "
                        f"no waste) or round down to multiples of 16/16/{pw['c0']}"
                    ),
                    saving_us=0.0,
                    locations=locations(ir, k, g, "gemm"),
                )
            )
    return out
