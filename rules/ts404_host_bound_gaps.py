"""TS404 host-bound-gaps: the device idles between many short kernels (launch overhead dominates)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from tilescope.engine import RuleContext
from tilescope.findings import SAVING_IDLE, Finding
from tilescope.intervals import covered_by_union, interval_union
from tilescope.profile import Profile
from tilescope.rules._columns import HELPER_COLUMNS, NON_COMPUTE_TYPES, core_types, num, text
from tilescope.rules._findings import make_finding
from tilescope.rules._intervals import idle_stretches
from tilescope.rules._numbers import r3
from tilescope.summary import communication_mask
from tilescope.text.words import count_text, fmt_us

CODE = "TS404"
SLUG = "host-bound-gaps"
KIND = "runtime"
NEEDS = ("duration_us", "wait_us")
THRESHOLDS: dict[str, Any] = {
    "min_idle_share": 0.2,  # idle gaps / (busy + idle) at least this
    "short_kernel_us": 20.0,  # kernels this short cannot hide a host launch
    "launch_floor_us": 2.0,  # gap the device needs anyway between dependent kernels (not recoverable)
    "max_gap_us": 5000.0,  # longer gaps are synchronisation / data loading, reported separately
    "stall_gap_us": 100.0,  # one gap this long before a shorter kernel is a host stall (sync, .item())
    "min_stall_total_us": 100.0,  # report stalls alone (run not host-bound overall) above this total
}

# Kernel columns check() reads besides NEEDS (`analyze` loads only what the rules and the report read)
READS = HELPER_COLUMNS


# long: the rule as its documentation gives it, over the same gap arrays: idle share, stalls, the
# saving model, then the evidence and the message that quote them.
def check(profile: Profile, ctx: RuleContext) -> list[Finding]:
    """
    ## What it does
    Adds up the device idle time between kernels (`wait_us`: the gap after the previous task
    ended; communication tasks excluded), ignoring gaps longer than `max_gap_us` (host syncs,
    data loading). The part of a gap during which a communication task (an HCCL row) ran is
    communication, not idle, and is left out (evidence `gaps_under_communication_us`). When idle
    time is at least `min_idle_share` of busy + idle time and most kernels are short, the host
    cannot launch fast enough: the run is host-bound.

    ## Why is this bad?
    Every µs the device waits for the next launch is lost. With 2-µs kernels and 80-µs gaps, the
    NPU is idle 97 % of the time whatever the kernels do.

    ## Example
    `gpt_step_arith_591`: median gap about 86 µs before kernels of median 3 µs.

    ## What to do instead
    Capture the step in a graph (`torch.npu.NPUGraph` / torchair), enable the level-2 task queue
    (`TASK_QUEUE_ENABLE=2`), bind the host process to cores, fuse small kernels (TS101/TS102),
    and remove host syncs (`.item()`, `.cpu()`, `nonzero`) from the step.

    ## Thresholds
    `min_idle_share` (0.2), `short_kernel_us` (20), `launch_floor_us` (2), `max_gap_us` (5000),
    `stall_gap_us` (100), `min_stall_total_us` (100). Without an overall host-bound pattern, single
    stalls (a gap of at least `stall_gap_us` before a shorter kernel) are reported when they add up
    to `min_stall_total_us`.

    ## Known limits
    The saving (every gap minus `launch_floor_us`) assumes a graph launch removes the gaps
    entirely. Idle is device-wide: the stretches inside the profiler's gaps (`wait_us` before
    each launch) that no task of any stream covers, each counted once however many streams'
    waits hold it (evidence `idle_counted`); each is named after the first launch that starts
    when it ends. Without start times, each launch's own `wait_us` (less what a collective
    covered) is all there is, and a gap on one stream while another ran would count.
    """
    df = profile.kernels
    keep = ~core_types(df).isin(NON_COMPUTE_TYPES).to_numpy()
    dur_all = num(df, "duration_us").to_numpy()
    dur = dur_all[keep]
    if len(dur) == 0:
        return []
    gap = num(df, "wait_us").fillna(0).clip(lower=0).to_numpy()
    # wait: one entry per idle stretch; after: the launch (row of df) each stretch ends before
    wide = device_gaps(df, keep, gap)
    if wide is None:  # no start times: the profiler's per-launch waits, each launch's own
        # a gap while a collective ran is communication time, not idle: only the rest of it counts
        under = under_communication(df, gap)[keep]
        wait, after = gap[keep] - under, np.flatnonzero(keep)
        busy, communicating = float(np.nansum(dur)), float(under.sum())
    else:
        wait, after, busy, communicating = wide
    dur_after = dur_all[after]
    max_gap = float(ctx.thresholds["max_gap_us"])
    launch_gaps = wait[(wait > 0) & (wait <= max_gap)]
    long_gaps = wait[wait > max_gap]
    idle = float(launch_gaps.sum())
    share = idle / (busy + idle) if busy + idle > 0 else 0.0
    short = float(np.mean(dur < float(ctx.thresholds["short_kernel_us"])))
    floor = float(ctx.thresholds["launch_floor_us"])
    stall = (wait >= float(ctx.thresholds["stall_gap_us"])) & (wait <= max_gap) & (wait > dur_after)
    host_bound = share >= float(ctx.thresholds["min_idle_share"]) and short >= 0.5
    if host_bound:
        saving = float(np.clip(launch_gaps - floor, 0, None).sum())
    elif float(wait[stall].sum()) >= float(ctx.thresholds["min_stall_total_us"]):
        saving = float(np.clip(wait[stall] - floor, 0, None).sum())
    else:
        return []
    counted = (wait > 0) & (wait <= max_gap) if host_bound else stall
    # the gaps listed and quoted are the ones the saving counts; longer ones are named apart
    order = np.argsort(-np.where(counted, wait, -1.0))[: min(10, int(counted.sum()))]
    # the names of those ten kernels only, in `order` (not an object array of every launch's name)
    names = text(df.iloc[after[order]], "name").to_numpy()
    evidence = {
        "kernels": len(dur),
        "idle_counted": "device-wide" if wide is not None else "per launch (no start times)",
        "busy_us": r3(busy),
        "idle_us": r3(idle),
        "idle_share": r3(share),
        "short_kernel_share": r3(short),
        "median_gap_us": r3(np.median(launch_gaps)) if len(launch_gaps) else None,
        "median_kernel_us": r3(np.nanmedian(dur)),
        "long_gaps": {"count": len(long_gaps), "total_us": r3(long_gaps.sum())},
        "stalls": {"count": int(stall.sum()), "total_us": r3(wait[stall].sum())},
        "largest_gaps": [
            {"before": str(name), "gap_us": r3(wait[i])}
            for name, i in zip(names, order, strict=True)
            if wait[i] > 0
        ],
        "thresholds": dict(ctx.thresholds),
        "saving_model": "sum of (gap - launch_floor_us) over gaps up to max_gap_us"
        if host_bound
        else "sum of (stall gap - launch_floor_us)",
    }
    if host_bound:
        # times only: the share of wall time is the saving's, said once beside it (words.saving_text);
        # the share of busy + idle time this rule decides on stays in the evidence (`idle_share`)
        msg = (
            f"the device idled {fmt_us(idle)} in the gaps between {count_text(len(dur), 'kernel')} "
            f"(median gap {evidence['median_gap_us']} µs vs median kernel "
            f"{evidence['median_kernel_us']} µs): host-bound"
        )
    else:
        worst = order[0]
        msg = (
            f"{count_text(stall.sum(), 'launch stall')} of {fmt_us(float(wait[stall].sum()))} in total: "
            "the device "
            f"waited {r3(wait[worst])} µs before {names[0]} ({r3(dur_after[worst])} µs) — a host sync or "
            "stall"
        )
    if communication_mask(df).any():  # only where there was communication to overlap
        evidence["gaps_under_communication_us"] = r3(communicating)
    if communicating > 0:
        msg += (
            f"; {fmt_us(communicating)} of the gaps ran under communication (an HCCL "
            "task), not idle, not counted"
        )
    if len(long_gaps):
        msg += (
            f"; {len(long_gaps)} gap{'s' if len(long_gaps) > 1 else ''} over {fmt_us(max_gap)} "
            f"({fmt_us(float(long_gaps.sum()))}, data loading or a sync) not counted"
        )
    return [
        make_finding(
            ctx,
            code=CODE,
            slug=SLUG,
            kernels=[],
            message=msg,
            evidence=evidence,
            saving_us=saving,
            saving_kind=SAVING_IDLE,
            occurrences=len(launch_gaps) if host_bound else int(stall.sum()),
            recommendation="Capture the step in a graph (torch.npu.NPUGraph / torchair), set "
            "TASK_QUEUE_ENABLE=2, "
            "remove host syncs (.item(), .cpu(), nonzero) from the step and fuse small kernels.",
        )
    ]


def device_gaps(
    df: pd.DataFrame, keep: np.ndarray, gap_us: np.ndarray
) -> tuple[np.ndarray, np.ndarray, float, float] | None:
    """Idle device-wide (#26): the stretches inside the profiler's gaps (`[start - wait, start]`
    of each compute launch) that no task of any stream covers, each counted once however many
    streams' waits hold it. Returns the stretches (µs), the compute launch (row of `df`) each ends
    before, the busy time (union of the compute launches, µs) and the µs of the gaps a
    communication task covered. None when a compute launch has no start time."""
    if "start_ns" not in df.columns:
        return None
    start = df["start_ns"].astype("Int64").to_numpy(dtype="int64", na_value=-1)
    if (start[keep] < 0).any():
        return None
    dur_ns = np.round(np.nan_to_num(num(df, "duration_us").clip(lower=0).to_numpy()) * 1000)
    end = start + dur_ns.astype("int64")
    comm = communication_mask(df) & (start >= 0)
    waits = keep & (gap_us > 0)
    lo, hi = start[waits] - np.round(gap_us[waits] * 1000).astype("int64"), start[waits]
    bare_s, bare_e = idle_stretches(start[keep], end[keep], lo, hi)  # communication not counted busy
    s, e = idle_stretches(start[keep | comm], end[keep | comm], lo, hi)
    communicating = float((bare_e - bare_s).sum() - (e - s).sum()) / 1000.0
    # each stretch belongs to the first compute launch starting at or after its end
    rows = np.flatnonzero(keep)
    rows = rows[np.argsort(start[rows], kind="stable")]
    after = rows[np.minimum(np.searchsorted(start[rows], e, side="left"), len(rows) - 1)]
    u_start, u_end = interval_union(start[keep], end[keep])
    busy = float((u_end - u_start).sum()) / 1000.0
    return (e - s) / 1000.0, after, busy, max(0.0, communicating)


def under_communication(df: pd.DataFrame, gap_us: np.ndarray) -> np.ndarray:
    """Per launch, how much of the gap before it (`gap_us`, ending at its start) a communication
    task (an HCCL row of the same table) was running: 0 without start times or collectives."""
    comm = communication_mask(df)
    if not comm.any() or "start_ns" not in df.columns:
        return np.zeros(len(df))
    start = df["start_ns"].astype("Int64").to_numpy(dtype="int64", na_value=-1)
    ends = start + np.round(num(df, "duration_us").fillna(0).clip(lower=0).to_numpy() * 1000).astype("int64")
    placed = start >= 0
    u_start, u_end = interval_union(start[comm & placed], ends[comm & placed])
    lo = start - np.round(gap_us * 1000).astype("int64")
    covered = covered_by_union(u_start, u_end, lo, start) / 1000.0
    return np.where(placed, np.minimum(covered, gap_us), 0.0)
