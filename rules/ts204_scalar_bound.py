"""TS204 scalar-bound: the Scalar unit dominates one side of a kernel."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from tilescope.engine import RuleContext
from tilescope.findings import Finding
from tilescope.profile import Profile
from tilescope.rules._columns import HELPER_COLUMNS, LEAN_COLUMNS, lean, num
from tilescope.rules._findings import grouped_findings
from tilescope.rules._numbers import pct
from tilescope.rules._refine import refine_library

CODE = "TS204"
SLUG = "scalar-bound"
KIND = "runtime"
NEEDS = ("duration_us", "aic_scalar_share|aiv_scalar_share")
THRESHOLDS: dict[str, Any] = {
    "scalar_share": 0.5,  # Scalar busy at least this share of the launch
    "min_duration_us": 10.0,
    "min_saving_us": 1.0,
    "max_findings": 20,
}
SHARE_COLUMNS = ("aic_scalar_share", "aiv_scalar_share", "aic_cube_share", "aiv_vec_share", "aic_busy_share")
OTHERS = {
    "aic": ("aic_cube_share", "aic_mte1_share", "aic_mte2_share", "aic_mte3_share", "aic_fixpipe_share"),
    "aiv": ("aiv_vec_share", "aiv_mte2_share", "aiv_mte3_share"),
}

# Kernel columns check() reads besides NEEDS (`analyze` loads only what the rules and the report read)
READS = (*HELPER_COLUMNS, *LEAN_COLUMNS, *SHARE_COLUMNS, *(c for cols in OTHERS.values() for c in cols))


# A CANN built-in kernel cannot be re-tiled by its user: say what they can do, and name the fusion
# finding (TS102/TS101) that already covers it (tilescope.engine runs `refine` after every rule).
refine = refine_library


def check(profile: Profile, ctx: RuleContext) -> list[Finding]:
    """
    ## What it does
    Flags every launch where, on the Cube or the Vector side, the Scalar pipe is busy at least
    `scalar_share` of the launch (`*_scalar_share`: Scalar time per core / duration) and longer than
    every other pipe of that side. Shares, not the profiler's ratios: a ratio is relative to its
    side's own busy time, so the Cube side of a mixed kernel that works 1.8 µs of a 225 µs launch
    can show a Scalar ratio of 0.87 while its Scalar pipe is busy under 1 % of the launch.

    ## Why is this bad?
    The Scalar unit issues every instruction and computes addresses and loop bounds. When it is
    the busiest pipe, Cube/Vector/MTE wait for instructions: the kernel spends its time on
    control, not on data.

    ## Example
    A TileLang vector kernel whose Scalar pipe is busy 72 % of the launch and its Vector pipe 20 %:
    per-element index arithmetic in an inner `T.serial` loop.

    ## What to do instead
    Vectorise inner loops (`T.Parallel`/tile ops instead of `T.serial` over elements), hoist
    address arithmetic out of loops, use larger tiles so each instruction moves more data, avoid
    data-dependent branches and scalar reads from GM in the loop body.
    A CANN built-in kernel (not in the bundle's IR; an `aclnn*` name or op type plus task number)
    cannot be re-tiled by its user: the finding says so, and names the TS102/TS101 fusion that
    already covers the kernel when there is one.

    ## Thresholds
    `scalar_share` (0.5), `min_duration_us` (10), `min_saving_us` (1), `max_findings` (20).

    ## Known limits
    The saving assumes scalar work could drop to the next busiest pipe's level
    (duration x (scalar share - next pipe's share)); scalar work that is needed stays.
    """
    df = profile.kernels
    dur = num(df, "duration_us")
    best = pd.Series(0.0, index=df.index)
    side = pd.Series("", index=df.index)
    scal = pd.Series(np.nan, index=df.index)
    lim = float(ctx.thresholds["scalar_share"])
    for s, others in OTHERS.items():
        sc = num(df, f"{s}_scalar_share")
        nxt = pd.concat([num(df, c) for c in others], axis=1).max(axis=1, skipna=True).fillna(0)
        gain = (sc - nxt).where((sc >= lim) & (sc > nxt)).fillna(0)
        better = gain > best
        best, side, scal = best.where(~better, gain), side.where(~better, s), scal.where(~better, sc)
    flagged = ((best > 0) & (dur >= float(ctx.thresholds["min_duration_us"]))).to_numpy()
    saving = (best * dur).fillna(0)
    prof = profile.with_kernels(
        lean(df, scalar_share=scal, scalar_excess=best, **{c: num(df, c) for c in SHARE_COLUMNS})
    )

    def message(kernel: str, row: pd.Series) -> str:
        return (
            f"{kernel}: Scalar busy {pct(row['scalar_share'])} of the launch, {pct(row['scalar_excess'])} "
            f"more than the next busiest pipe — the kernel is bound by instruction issue and address "
            f"arithmetic"
        )

    return grouped_findings(
        prof,
        ctx,
        code=CODE,
        slug=SLUG,
        flagged=flagged,
        saving=saving,
        metrics=("scalar_share", "scalar_excess", *SHARE_COLUMNS),
        message=message,
        topic="scalar",
        extra=lambda k, r: {"saving_model": "duration x (Scalar share - next busiest pipe's share)"},
        recommendation="Vectorise inner loops (tile ops / T.Parallel instead of element-wise "
        "T.serial), hoist "
        "address arithmetic out of loops, and use larger tiles so each instruction moves more data.",
    )
