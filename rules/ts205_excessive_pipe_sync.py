"""TS205 excessive-pipe-sync: sync and barrier instructions take a large share of a kernel's
simulated instruction cycles (per-line data of `msprof op simulator`, issue #25)."""

from __future__ import annotations

from typing import Any

import pandas as pd

from tilescope.engine import RuleContext
from tilescope.findings import Finding
from tilescope.ir.model import find_kernel
from tilescope.lines import LinesReport, profile_lines
from tilescope.profile import Profile
from tilescope.rules._columns import HELPER_COLUMNS, LEAN_COLUMNS, lean, num, text
from tilescope.rules._findings import grouped_findings
from tilescope.rules._numbers import pct, r4
from tilescope.rules._refine import refine_library

CODE = "TS205"
SLUG = "excessive-pipe-sync"
KIND = "runtime"
NEEDS = ("kernels", "ir")
THRESHOLDS: dict[str, Any] = {
    # 1 - TS203's bound_share (0.8): more than this share of the cycles in flags and barriers leaves
    # no pipe the room to be busy the bound share of the time (docstring, "Thresholds")
    "max_sync_share": 0.2,
    "min_saving_us": 1.0,
    "max_findings": 20,
}

READS = (*HELPER_COLUMNS, *LEAN_COLUMNS)

# a CANN built-in kernel is not in the bundle's IR, so this rule never names one; refine_library
# keeps the recommendation honest should a library kernel share the bundle kernel's name
refine = refine_library

NO_PLACE = (
    "which line waited is not in the data (the traces' WAIT_FLAG events carry no address: keep the "
    "simulator's visualize_data.bin beside its CSVs)"
)


def missing_inputs(profile: Profile) -> tuple[str, ...]:
    report = profile_lines(profile)
    if report is None or report.sync_share is None:
        return ("per-line instruction cycles (docs/lines.md: a bundle with `msprof op` cycle-model output)",)
    return ()


def _evidence(report: LinesReport, placed: bool) -> dict[str, Any]:
    return {
        "sync_share": r4(report.sync_share or 0.0),
        "sync_cycles": {k: round(v, 3) for k, v in report.sync_cycles.items()},
        "instruction_cycles": report.instruction_cycles,
        "wait_cycles_by_pipe": {k: round(v, 3) for k, v in report.wait_cycles.items()},
        "sync_unplaced_cycles": {k: round(v, 3) for k, v in report.sync_unplaced_cycles.items()},
        "sync_lines_placed": placed,
        "simulated_cores": report.cores,
        "source": report.source_kind or "msprof op simulator",
        "saving_model": "duration x (sync share - max_sync_share): the sync cycles above the threshold, "
        "assuming they are on the critical path",
    }


def check(profile: Profile, ctx: RuleContext) -> list[Finding]:
    """
    ## What it does
    Reads the simulator's instruction CSVs of a bundle's kernel (`msprof op simulator` output in its
    `profile/`) and adds the cycles of its sync instructions — SET_FLAG, WAIT_FLAG, PIPE_BARRIER,
    BARRIER and the cross-core and intra-block flags — over every simulated core. When they are at
    least `max_sync_share` of all instruction cycles, every launch of the kernel is flagged. The
    finding names the lines with the most wait cycles (WAIT_FLAG and barriers, by the pipe that
    waited) with their Ascend C text and the TileLang statement each orders (docs/lines.md), or,
    where the data cannot place the waits, the lines that set the flags and says that it cannot.

    ## Why is this bad?
    A WAIT_FLAG or a barrier holds its pipe until another pipe is done. Cycles spent there are
    cycles a copy or a matrix unit sits idle waiting for its partner: the stages run one after the
    other instead of overlapping, and the kernel is as slow as the sum of its stages.

    ## Example
    A vector add whose single buffer makes MTE2 (GM -> UB), Vector and MTE3 (UB -> GM) take turns:
    the real trimmed simulator output of neo-pan/ascend-msprof-skill spends 147,607 of its 161,318
    instruction cycles (91.5 %) in SET_FLAG / WAIT_FLAG.

    ## What to do instead
    Let the stages overlap so that a flag is already set when it is waited on: put the copy and
    compute of the main loop in `for k in T.Pipelined(n, num_stages=2)` (or raise `num_stages`),
    so each stage works on another buffer than the one its partner is waiting for; remove
    `T.barrier()` / full pipe barriers between statements that touch different buffers; make the
    tiles bigger (block_M / block_N / block_K) so each wait covers more work. Re-run the simulator
    and compare with `tilescope diff`.

    ## Thresholds
    `max_sync_share` (0.2: 1 - TS203's `bound_share` of 0.8. A kernel whose busiest pipe is busy
    at least 80 % of the time is bound by that pipe; when more than 20 % of the cycles are flags and
    barriers, the waits alone keep every pipe under that), `min_saving_us` (1), `max_findings` (20).

    ## Known limits
    The shares are the simulator's (a model of the chip, one launch), applied to the board's
    measured launches of the same kernel; instruction cycles are summed over pipes, which run in
    parallel, so the share is of the work issued, not of the wall time. A SET_FLAG on a busy pipe
    waits for the pipe's earlier instructions, so its cycles count too. A WAIT_FLAG's line is known
    only where a visualize_data.bin (or another event) names its address.
    """
    report = profile_lines(profile)
    share = report.sync_share if report is not None else None
    if report is None or share is None or profile.ir is None:
        return []
    df = profile.kernels
    names = text(df, "name")
    # one IR lookup per kernel name, not per launch (a kernel table may hold a million launches)
    ir = profile.ir
    mine = {n for n in names.unique() if n and find_kernel(ir, str(n)) is not None}
    own = names.isin(mine)
    limit = float(ctx.thresholds["max_sync_share"])
    flagged = (own & (share >= limit)).fillna(False).to_numpy()
    dur = num(df, "duration_us")
    saving = (dur * (share - limit)).clip(lower=0).fillna(0)
    prof = profile.with_kernels(lean(df, sync_share=pd.Series(share, index=df.index)))
    placed = bool(report.sync_lines)
    waits_placed = any(r["wait_cycles"] for r in report.sync_lines)
    spent, every = sum(report.sync_cycles.values()), report.instruction_cycles or 0.0

    def message(kernel: str, row: pd.Series) -> str:
        said = (
            f"{kernel}: sync and barrier instructions take {pct(share)} of the simulated instruction "
            f"cycles ({spent:,.0f} of {every:,.0f}; >= {pct(limit)})"
        )
        if not placed:
            return f"{said}; no line is named: the simulator output has no per-line data"
        return said if waits_placed or not report.sync_unplaced_cycles else f"{said}; {NO_PLACE}"

    return grouped_findings(
        prof,
        ctx,
        code=CODE,
        slug=SLUG,
        flagged=flagged,
        saving=saving,
        metrics=("sync_share",),
        message=message,
        topic="loop",
        line_topic="sync",
        extra=lambda k, r: _evidence(report, placed),
        recommendation="Overlap the stages so flags are set before they are waited on: wrap the copy and "
        "compute loop in T.Pipelined(n, num_stages=2) (or raise num_stages), drop T.barrier() / full "
        "pipe barriers between statements on different buffers, and use bigger tiles so each wait covers "
        "more work.",
    )
