"""TS508 grid-leaves-cores-idle: a grid smaller than, or not a multiple of, the core count (read from IR)."""

from __future__ import annotations

import math
from typing import Any

from tilescope.engine import RuleContext
from tilescope.findings import Finding, Severity
from tilescope.ir.locate import grid_record
from tilescope.ir.model import find_kernel
from tilescope.ir.rulekit import grid_blocks, locations, lowered_kernels
from tilescope.ir.scopes import CUDA
from tilescope.profile import Profile
from tilescope.rules._columns import text
from tilescope.rules._findings import make_finding

CODE = "TS508"
SLUG = "grid-leaves-cores-idle"
NEEDS = ("ir",)
KIND = "static"
THRESHOLDS: dict[str, Any] = {"max_core_efficiency": 0.9, "high_below": 0.5}


def _core_field(kernel: dict[str, Any]) -> str:
    """The cores one block occupies: what the generated Ascend C's kernel type says
    (`launch_cores`: tilelang-ascend launches even a Vector-only kernel as MIX_AIC_1_2, one AI Core
    group per block, its `vid` picking the AIV); without it, a Cube or mixed kernel's blocks go to
    AIC cores (one AIC with its AIVs per block), a Vector-only kernel's to AIV cores."""
    if kernel.get("launch_cores") in ("aic", "aiv"):
        return f"{kernel['launch_cores']}_count"
    return "aiv_count" if kernel.get("core_type") == "vector" else "aic_count"


def _gridded(profile: Profile) -> list[dict[str, Any]]:
    ir = profile.ir or {}
    # a CUDA-dialect grid counts thread blocks of a GPU, not AI Cores
    return [k for k in lowered_kernels(ir) if grid_blocks(k) and k.get("dialect") != CUDA]


def missing_inputs(profile: Profile) -> tuple[str, ...]:
    """The chip's core count: without it the rule goes under "not checked" instead of assuming."""
    fields = sorted({_core_field(k) for k in _gridded(profile)})
    return tuple(f"chip.{f}" for f in fields if not getattr(profile.chip, f, None))


def _measured(profile: Profile, ir: dict[str, Any]) -> set[str]:
    """IR kernels the profile has launches of, with their block counts: TS401 judges those."""
    df = profile.kernels
    if df.empty or "block_dim" not in df.columns or not df["block_dim"].notna().any():
        return set()
    out: set[str] = set()
    for name in text(df, "name").unique():
        k = find_kernel(ir, str(name)) if name else None
        if k is not None:
            out.add(k["name"])
    return out


def check(profile: Profile, ctx: RuleContext) -> list[Finding]:
    """
    ## What it does
    Compares each kernel's grid with the core count: idle cores or a partial last wave. The grid
    comes from ir.json (`T.Kernel(n)`: n blocks), the cores are those its blocks run on: what the
    generated Ascend C's kernel type says (`KERNEL_TYPE_MIX_AIC_1_2`, tilelang-ascend's launch even
    for Vector-only kernels: one AI Core group per block, AIC count; `AIV_ONLY`: AIV count), else
    AIC (`aic_count`) for Cube and mixed kernels, AIV (`aiv_count`) for Vector-only ones. Core
    efficiency = blocks / (waves × cores), waves = ceil(blocks / cores). A static twin of TS401
    for kernels that have not run yet.

    ## Why is this bad?
    Cores without a block idle for the whole kernel; with a partial last wave most cores idle for
    one wave's time. A flash attention over 1024 queries in 128-row tiles launches 8 blocks: on
    24 AIC cores 16 stay idle.

    ## Example
    `T.Kernel(seq_q // block_M)` with seq_q = 1024, block_M = 128 on a 910B2 (24 AIC): 8 blocks,
    efficiency 0.33; 26 blocks would take 2 waves, the second with 2 of 24 cores busy (0.54).

    ## What to do instead
    Give the grid at least as many blocks as cores, in multiples of the core count: split along
    another axis (heads, batch, the KV sequence), use smaller tiles, or a persistent loop
    (`T.Persistent`) over more, smaller tiles.

    ## Thresholds
    `max_core_efficiency` (0.9): fire below it; `high_below` (0.5): high severity below it, else
    medium when under 0.75, low otherwise. Static: est. saving 0 µs.

    ## Known limits
    Needs the chip's core count (listed under "not checked" when the chip has none; configure it
    or use `--chip`). Assumes blocks take equal time. A kernel the profile also measured (block
    counts in the kernel table) is left to TS401, which sees the launch. The grid is the
    `T.Kernel` extent; work a block does in a loop of its own (persistent kernels) is not weighed.
    """
    ir = profile.ir or {}
    th = ctx.thresholds
    limit, high = float(th["max_core_efficiency"]), float(th["high_below"])
    measured = _measured(profile, ir)
    out: list[Finding] = []
    for k in _gridded(profile):
        blocks = grid_blocks(k)
        field = _core_field(k)
        cores = getattr(ctx.chip, field, None)
        if not blocks or not cores or k["name"] in measured:
            continue
        waves = math.ceil(blocks / cores)
        eff = blocks / (waves * cores)
        if eff >= limit:
            continue
        last = blocks - (waves - 1) * cores
        kind = "AIC" if field == "aic_count" else "AIV"
        if blocks < cores:
            what = f"{blocks} blocks on {cores} {kind} cores: {cores - blocks} cores idle"
        else:
            what = (
                f"{blocks} blocks on {cores} {kind} cores: {waves} waves, the last with {last} of "
                f"{cores} cores busy"
            )
        sev = Severity.HIGH if eff < high else (Severity.MEDIUM if eff < 0.75 else Severity.LOW)
        lower = (waves - 1) * cores
        fits = [n for n in (lower, waves * cores) if n > 0]
        out.append(
            make_finding(
                ctx,
                code=CODE,
                slug=SLUG,
                severity=sev,
                kernels=(k["name"],),
                message=f"grid {k['grid']}: {what} (core efficiency {eff:.2f})",
                evidence={
                    "grid": k["grid"],
                    "blocks": blocks,
                    "cores": cores,
                    "core_kind": kind,
                    "waves": waves,
                    "last_wave_blocks": last,
                    "idle_cores": cores - blocks if blocks < cores else 0,
                    "core_efficiency": round(eff, 4),
                    "chip": ctx.chip.name,
                    "max_core_efficiency": limit,
                    "high_below": high,
                },
                recommendation=(
                    f"launch a multiple of {cores} blocks ({' or '.join(map(str, fits))}): split along "
                    "another axis or use smaller tiles"
                ),
                saving_us=0.0,
                locations=locations(ir, k, grid_record(k), "T.Kernel grid"),
            )
        )
    return out
