"""TS203 latency-bound: no pipe is busy on a long kernel (msprof-analyze's "no bound" check, every row)."""

from __future__ import annotations

from typing import Any

import pandas as pd

from analyzer.engine import RuleContext
from analyzer.findings import Finding
from analyzer.profile import Profile
from rules._common import grouped_findings, lean, num, pct

CODE = "TS203"
SLUG = "latency-bound"
KIND = "runtime"
NEEDS = ("duration_us", "aic_mte2_ratio|aiv_mte2_ratio")
THRESHOLDS: dict[str, Any] = {
    "bound_ratio": 0.8,  # msprof-analyze operator_bound_ratio: every pipe below this = no bound
    "min_duration_us": 20.0,
    "min_saving_us": 1.0,
    "max_findings": 20,
}
PIPES = (
    "aic_cube_ratio",
    "aic_scalar_ratio",
    "aic_mte1_ratio",
    "aic_mte2_ratio",
    "aic_mte3_ratio",
    "aic_fixpipe_ratio",
    "aiv_vec_ratio",
    "aiv_scalar_ratio",
    "aiv_mte2_ratio",
    "aiv_mte3_ratio",
)


def check(profile: Profile, ctx: RuleContext) -> list[Finding]:
    """
    ## What it does
    Flags every launch longer than `min_duration_us` whose busiest pipe (Cube, Vector, Scalar,
    MTE1/2/3, FixPipe, on both sides) stays below `bound_ratio`: nothing is saturated, so the
    kernel is limited by latency — waits, synchronisation, dependencies or too little parallel
    work. Unlike msprof-analyze, which looks at the first matching row, every row is evaluated.

    ## Why is this bad?
    Every unit idles part of the time. Neither more bandwidth nor more compute helps; the kernel
    needs more overlap or more independent work per core.

    ## Example
    A 120 µs vector kernel with Vector 35 %, MTE2 40 %, MTE3 20 %, Scalar 10 %.

    ## What to do instead
    Overlap the stages (double-buffered `T.Pipelined`, more stages), remove full pipe barriers
    (`pipe_barrier(PIPE_ALL)`) in favour of set/wait flags, give each core more independent
    tiles (larger block count or tiles), and check for serialising scalar loops.

    ## Thresholds
    `bound_ratio` (0.8, msprof-analyze's `operator_bound_ratio`), `min_duration_us` (20),
    `min_saving_us` (1), `max_findings` (20).

    ## Known limits
    Needs PipeUtilization metrics. The saving assumes the busiest pipe could reach
    `bound_ratio` (duration x (1 - busiest / bound_ratio)): an estimate of the headroom.
    """
    df = profile.kernels
    dur = num(df, "duration_us")
    present = [p for p in PIPES if p in df.columns and df[p].notna().any()]
    busiest = pd.concat([num(df, p) for p in present], axis=1).max(axis=1, skipna=True)
    limit = float(ctx.thresholds["bound_ratio"])
    flagged = ((busiest < limit) & (dur > float(ctx.thresholds["min_duration_us"]))).fillna(False).to_numpy()
    saving = (dur * (1 - busiest / limit)).clip(lower=0).fillna(0)
    prof = profile.with_kernels(lean(df, busiest_pipe_ratio=busiest))

    def message(kernel: str, row: pd.Series) -> str:
        return (
            f"{kernel}: no pipe is busy — the busiest reaches {pct(row['busiest_pipe_ratio'])} "
            f"(< {pct(limit)}) over {int(row['launches'])} launches of {row['median_us']:.1f} µs median"
        )

    return grouped_findings(
        prof,
        ctx,
        code=CODE,
        slug=SLUG,
        flagged=flagged,
        saving=saving,
        metrics=("busiest_pipe_ratio", *present),
        message=message,
        topic="scalar",
        extra=lambda k, r: {"saving_model": "duration x (1 - busiest / bound_ratio)"},
        recommendation="Overlap the stages (double-buffered T.Pipelined, more stages), replace full barriers "
        "with set/wait flags, and give each core more independent tiles.",
    )
