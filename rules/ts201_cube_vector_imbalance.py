"""TS201 cube-vector-imbalance: mixed kernels whose Cube and Vector work does not overlap."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from tilescope.columns import MIX_TYPES
from tilescope.engine import RuleContext
from tilescope.findings import Finding
from tilescope.ir.locate import hot_loop
from tilescope.ir.model import find_kernel
from tilescope.profile import Profile
from tilescope.rules._columns import HELPER_COLUMNS, LEAN_COLUMNS, core_types, lean, num, op_types
from tilescope.rules._findings import grouped_findings
from tilescope.rules._numbers import pct, r3
from tilescope.rules._refine import refine_library, refine_stages
from tilescope.text.words import count_text

CODE = "TS201"
SLUG = "cube-vector-imbalance"
KIND = "runtime"
NEEDS = ("duration_us", "cube_share", "vector_share")
THRESHOLDS: dict[str, Any] = {
    "min_duration_us": 10.0,  # shorter launches are not worth the restructuring
    "min_hidden_share": 0.1,  # the shorter side's non-overlapped work, as a share of the kernel
    "idle_side_max": 0.1,  # a side at or below this while the other is busy counts as idle
    "busy_side_min": 0.5,
    "min_saving_us": 1.0,
    "max_findings": 20,
}

# Kernel columns check() reads besides NEEDS (`analyze` loads only what the rules and the report read)
READS = (*HELPER_COLUMNS, *LEAN_COLUMNS, "cube_busy_us", "vector_busy_us")


def _requested_stages(profile: Profile, kernel: str) -> tuple[str, int] | None:
    """(loop variable, num_stages) the author asked for on the kernel's hot loop, from the IR."""
    if profile.ir is None:
        return None

    k = find_kernel(profile.ir, kernel)
    loop = hot_loop(k) if k is not None else None
    stages = loop.get("num_stages") if loop is not None else None
    return (str(loop["var"]), int(stages)) if loop is not None and isinstance(stages, int) else None


def refine(finding: Finding, others: Sequence[Finding], profile: Profile) -> Finding:
    """The advice follows what the author already asked for: requested stages that TS504 says were
    not applied are the first thing to fix (not "use num_stages >= 2"); stages asked for and not
    refused leave barriers and the split of work; a CANN kernel gets `refine_library`'s advice."""
    refused = refine_stages(
        finding, others, profile,
        "the softmax of one tile can run while the Cube works on the next; replace full barriers "
        "between the sides with cross-core flags.",
    )
    if refused is not None:
        return refused
    kernel = finding.kernels[0] if finding.kernels else ""
    asked = _requested_stages(profile, kernel)
    if asked is not None and asked[1] >= 2:
        rec = (
            f"The kernel already asks for num_stages={asked[1]} on loop {asked[0]}: more stages alone "
            "will not overlap the sides. Replace full barriers between the Cube and Vector stages with "
            "cross-core set/wait flags, double-buffer the L1/UB tiles the sides hand over, and if one "
            "side is idle, move work to it or use a single-side kernel."
        )
        return dataclasses.replace(finding, recommendation=rec)
    return refine_library(finding, others, profile)


def check(profile: Profile, ctx: RuleContext) -> list[Finding]:
    """
    ## What it does
    Finds mixed kernels (MIX_AIC / MIX_AIV, such as flash attention) whose Cube and Vector work
    may not overlap. For every launch it takes the share of the launch during which the Cube pipe
    was busy (`cube_share`) and the Vector pipe was busy (`vector_share`), per core. Where the two
    add up to no more than 1 they may have run one after the other; above 1 they overlapped at least
    by the excess. The shorter side's work that is not provably overlapped (`min(c, v) - max(0,
    c + v - 1)`) is what overlapping would hide. It also notes a side that sits idle.

    ## Why is this bad?
    A mixed kernel pairs each Cube core with two Vector cores. If the softmax (Vector) waits for
    QK^T (Cube) and PV waits for the softmax, each unit idles while the other works: the kernel
    takes c + v instead of max(c, v).

    ## Example
    `flash_fwd_kernel_mix_aic`, 400 µs, Cube busy 28 %, Vector busy 64 % of the launch (together
    92 %): up to 112 µs per launch.

    ## What to do instead
    Software-pipeline the loop: compute softmax of tile i on the Vector cores while the Cube
    computes QK^T of tile i+1 (`T.Pipelined(..., num_stages=2)`, double-buffered L1/UB tiles and
    cross-core flags); make sure the Vector side does not wait on a full-kernel barrier.
    When the kernel already asks for `num_stages` and TS504 says the stages were not applied, the
    recommendation says that, with TS504's reason, instead of asking for stages again.
    Stages asked for and not refused leave the barriers and the split of work as the advice.

    ## Thresholds
    `min_duration_us` (10), `min_hidden_share` (0.1), `busy_side_min` (0.5), `idle_side_max`
    (0.1), `min_saving_us` (1), `max_findings` (20).

    ## Known limits
    PMU ratios are averages over the kernel and its cores: they bound the overlap but do not
    prove serialisation. The saving is an upper bound (perfect overlap). Per-block imbalance is
    TS402's.
    """
    df = profile.kernels
    dur = num(df, "duration_us")
    c, v = num(df, "cube_share").clip(0, 1), num(df, "vector_share").clip(0, 1)
    mixed = core_types(df).isin(MIX_TYPES) | op_types(df).str.contains("Attention", case=False)
    both = c.notna() & v.notna()
    hidden = pd.Series(np.minimum(c, v) - np.maximum(c + v - 1, 0), index=df.index).clip(lower=0)
    idle = (np.maximum(c, v) >= float(ctx.thresholds["busy_side_min"])) & (
        np.minimum(c, v) <= float(ctx.thresholds["idle_side_max"])
    )
    flagged = (
        mixed
        & both
        & (dur >= float(ctx.thresholds["min_duration_us"]))
        & ((hidden >= float(ctx.thresholds["min_hidden_share"])) | idle)
    ).to_numpy()
    saving = (hidden * dur).fillna(0)
    work = lean(df, cube_share=c, vector_share=v, hidden_share=hidden, cube_busy_us=c * dur,
                vector_busy_us=v * dur)
    prof = profile.with_kernels(work)

    def message(kernel: str, row: pd.Series) -> str:
        cc, vv = row["cube_share"], row["vector_share"]
        if min(cc, vv) <= float(ctx.thresholds["idle_side_max"]):
            side = "Vector" if vv < cc else "Cube"
            return (
                f"{kernel}: Cube busy {pct(cc)}, Vector busy {pct(vv)} of the launch — the {side} cores "
                f"of this mixed kernel sit idle ({count_text(row['launches'], 'launch', 'launches')})"
            )
        together = cc + vv
        overlap = (
            f"together {pct(together)} ≤ 100 %, so the sides may run one after the other"
            if together <= 1.0
            else f"together {pct(together)}: they overlap by at least {pct(together - 1)} of it"
        )
        return (
            f"{kernel}: Cube busy {pct(cc)}, Vector busy {pct(vv)} of {r3(row['median_us'])} µs — "
            f"{overlap}; overlapping could hide up to {pct(row['hidden_share'])} of the launch"
        )

    def extra(kernel: str, row: pd.Series) -> dict[str, Any]:
        return {
            "split_us": {
                "cube_busy": r3(row["cube_busy_us"]),
                "vector_busy": r3(row["vector_busy_us"]),
                "kernel_median": r3(row["median_us"]),
            },
            "saving_model": "(min(c, v) - max(0, c + v - 1)) x duration per launch: perfect overlap",
        }

    return grouped_findings(
        prof,
        ctx,
        code=CODE,
        slug=SLUG,
        flagged=flagged,
        saving=saving,
        metrics=("cube_share", "vector_share", "hidden_share", "cube_busy_us", "vector_busy_us"),
        message=message,
        topic="loop",
        extra=extra,
        recommendation="Pipeline the Cube and Vector stages (T.Pipelined with num_stages >= 2, "
        "double-buffered "
        "L1/UB tiles, cross-core flags instead of full barriers) so the softmax of one tile runs "
        "while the Cube works on the next; if one side is idle, move work to it or use a "
        "single-side kernel.",
    )
