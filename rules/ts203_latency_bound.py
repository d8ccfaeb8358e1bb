"""TS203 latency-bound: no pipe saturated on a long kernel (msprof-analyze's "no bound" check, every row)."""

from __future__ import annotations

from typing import Any

import pandas as pd

from tilescope.engine import RuleContext
from tilescope.findings import Finding
from tilescope.profile import Profile
from tilescope.rules._columns import HELPER_COLUMNS, LEAN_COLUMNS, lean, num
from tilescope.rules._findings import grouped_findings
from tilescope.rules._numbers import pct
from tilescope.rules._refine import refine_stages_or_library

CODE = "TS203"
SLUG = "latency-bound"
KIND = "runtime"
NEEDS = ("duration_us", "aic_mte2_share|aiv_mte2_share")
THRESHOLDS: dict[str, Any] = {
    "bound_share": 0.8,  # msprof-analyze operator_bound_ratio on the launch: every pipe below = no bound
    # a busiest pipe that moves data at least this share of the launch is TS202's memory-bound case
    "memory_bound_share": 0.7,
    "min_duration_us": 20.0,
    "min_saving_us": 1.0,
    "max_findings": 20,
}
PIPES = (
    "aic_cube_share",
    "aic_scalar_share",
    "aic_mte1_share",
    "aic_mte2_share",
    "aic_mte3_share",
    "aic_fixpipe_share",
    "aiv_vec_share",
    "aiv_scalar_share",
    "aiv_mte2_share",
    "aiv_mte3_share",
)

# Kernel columns check() reads besides NEEDS (`analyze` loads only what the rules and the report read)
READS = (*HELPER_COLUMNS, *LEAN_COLUMNS, *PIPES)


# Run by tilescope.engine after every rule: TS504's refusal of the stages first, library kernels' advice.
refine = refine_stages_or_library(
    "replace full barriers with set/wait flags and give each core more independent tiles."
)


def check(profile: Profile, ctx: RuleContext) -> list[Finding]:
    """
    ## What it does
    Flags every launch longer than `min_duration_us` whose busiest pipe (Cube, Vector, Scalar,
    MTE1/2/3, FixPipe, on both sides) is busy less than `bound_share` of the launch: no pipe is
    saturated, so the kernel is limited by latency — waits, synchronisation, dependencies or too
    little parallel work. Unlike msprof-analyze, which looks at the first matching row, every row
    is evaluated.

    ## Why is this bad?
    Every unit idles part of the time. Neither more bandwidth nor more compute helps; the kernel
    needs more overlap or more independent work per core.

    ## Example
    A 120 µs vector kernel whose pipes are busy: Vector 35 %, MTE2 40 %, MTE3 20 %, Scalar 10 % of
    the launch.

    ## What to do instead
    Overlap the stages (double-buffered `T.Pipelined`, more stages), remove full pipe barriers
    (`pipe_barrier(PIPE_ALL)`) in favour of set/wait flags, give each core more independent
    tiles (larger block count or tiles), and check for serialising scalar loops.
    When the kernel already asks for `num_stages` and TS504 says the stages were not applied, the
    recommendation says that, with TS504's reason, instead of asking for stages again.
    A CANN built-in kernel (not in the bundle's IR; an `aclnn*` name or op type plus task number)
    cannot be re-tiled by its user: the finding says so, and names the TS102/TS101 fusion that
    already covers the kernel when there is one.

    ## Thresholds
    `bound_share` (0.8, msprof-analyze's `operator_bound_ratio`, applied to the launch),
    `memory_bound_share` (0.7: a busiest pipe that is an MTE pipe at least this busy makes the
    launch memory-bound, TS202's finding, not latency-bound), `min_duration_us` (20),
    `min_saving_us` (1), `max_findings` (20).

    With per-line data (a bundle holding `msprof op simulator` output), the finding first names the
    lines where the pipes waited on flags and barriers (the sync lines with the most WAIT_FLAG /
    barrier cycles, each with the statement it orders: docs/lines.md), then the line with the most
    Scalar time.

    ## Known limits
    Needs PipeUtilization metrics. A WAIT_FLAG is placed on its line only where the simulator's
    data names its address (a visualize_data.bin beside the CSVs); otherwise the lines named are
    the flags' setting lines (SET_FLAG cycles), and `tilescope lines` says which waits it could
    not place. The saving assumes the busiest pipe could reach
    `bound_share` (duration x (1 - busiest / bound_share)): an estimate of the headroom.
    """
    df = profile.kernels
    dur = num(df, "duration_us")
    present = [p for p in PIPES if p in df.columns and df[p].notna().any()]
    shares = pd.concat([num(df, p) for p in present], axis=1)
    busiest = shares.max(axis=1, skipna=True)
    mte = shares[[p for p in present if "_mte" in p]].max(axis=1, skipna=True) if len(present) else busiest
    # data movement near saturation is not latency: the kernel waits for bytes (TS202 says so)
    moving = (mte >= busiest) & (mte >= float(ctx.thresholds["memory_bound_share"]))
    limit = float(ctx.thresholds["bound_share"])
    long_enough = dur > float(ctx.thresholds["min_duration_us"])
    flagged = ((busiest < limit) & ~moving & long_enough).fillna(False).to_numpy()
    saving = (dur * (1 - busiest / limit)).clip(lower=0).fillna(0)
    prof = profile.with_kernels(lean(df, busiest_pipe_share=busiest, **{p: num(df, p) for p in present}))

    def message(kernel: str, row: pd.Series) -> str:
        launches = int(row["launches"])
        return (
            f"{kernel}: no pipe saturated — the busiest is busy {100 * row['busiest_pipe_share']:.1f} % of "
            f"the launch (< {pct(limit)}) over {launches} launch{'es' if launches > 1 else ''} of "
            f"{row['median_us']:.1f} µs median"
        )

    return grouped_findings(
        prof,
        ctx,
        code=CODE,
        slug=SLUG,
        flagged=flagged,
        saving=saving,
        metrics=("busiest_pipe_share", *present),
        message=message,
        topic="scalar",
        line_topic="latency",
        extra=lambda k, r: {"saving_model": "duration x (1 - busiest share / bound_share)"},
        recommendation="Overlap the stages (double-buffered T.Pipelined, more stages), replace full barriers "
        "with set/wait flags, and give each core more independent tiles.",
    )
