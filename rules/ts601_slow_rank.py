"""TS601 slow-rank: one rank computes longer than the others, and they wait for it."""

from __future__ import annotations

from typing import Any

import numpy as np

from tilescope.cluster import Cluster
from tilescope.engine import RuleContext
from tilescope.findings import Finding
from tilescope.rules._cluster import cluster_finding, collective_waits, fmt_us, rank_totals

CODE = "TS601"
SLUG = "slow-rank"
KIND = "cluster"
NEEDS = ("cluster.steps",)
THRESHOLDS: dict[str, Any] = {
    "min_gap_ratio": 0.05,  # slow rank's Computing over the others' median, minus 1
    "min_gap_us": 100.0,  # and at least this much Computing time more, summed over steps
    "top_kernels": 3,  # kernels named as making the difference
}


def check(cluster: Cluster, ctx: RuleContext) -> list[Finding]:
    """
    ## What it does
    Sums each rank's Computing time over the profiled steps (step_trace_time.csv, else recomputed
    from its kernels) and compares the rank with the most against the median of the others. When
    the gap crosses both thresholds it names the rank, how much of the gap its kernel table
    explains (per kernel name, its summed time minus the others' median, added up) and the
    kernels that differ most (when its kernel table is readable), and how much longer the other
    ranks wait in collectives than the slow rank does (communication.json).

    ## Why is this bad?
    In data-parallel and tensor-parallel training every collective waits for the last rank: the
    step takes as long as the slowest rank's compute, and the others spend the gap waiting. One
    slow rank slows the whole job by its gap.

    ## Example
    8 ranks compute ~52 ms per step; rank 3 computes 61 ms because its MatMul runs 30 % slower.
    Each step ends 9 ms later on all 8 ranks, and ranks 0-2, 4-7 show ~9 ms more collective wait.

    ## What to do instead
    Look at the named kernels on the slow rank: a different input shape (uneven sharding, padding,
    a longer sequence) means rebalancing the data or the model split; the same shape with a longer
    duration means the device (clock, thermal limit, a noisy neighbour; see TS403 and TS603).
    Check that the rank does no extra work (logging, checkpointing, evaluation) inside the step.

    ## Thresholds
    `min_gap_ratio` (0.05), `min_gap_us` (100), `top_kernels` (3).

    ## Known limits
    Compares totals over the profiled steps, not step by step. The saving is the gap itself: the
    time every rank would gain if the slow rank computed like the median one, assuming the others
    do not become the new critical path. Ranks whose step split came from their kernel tables
    (no step_trace_time.csv) are comparable only with each other: the recomputed Free misses host
    time at the step's edges. The severity is what the gap costs the job, its share of step time
    (5 % high, 3 % medium, 0.5 % low, as every rule's share), not how much slower the rank computes:
    in sample_traces/cluster_8rank rank 3 computes 27 % more than the median, but compute is 5 % of
    its 20 ms steps (most of each step is Free), so the 540 µs it costs is 1.4 % of step time: low.
    A rank 27 % slower in a step that is all compute would be high.
    """
    t = ctx.thresholds
    totals = rank_totals(cluster)
    computing = totals["computing_us"].astype(float)
    slow = int(computing.to_numpy().argmax())
    slow = int(computing.index[slow])
    others = computing.drop(index=slow)
    median = float(np.median(others.to_numpy()))
    gap = float(computing[slow]) - median
    if median <= 0 or gap < float(t["min_gap_us"]) or gap / median < float(t["min_gap_ratio"]):
        return []
    evidence: dict[str, Any] = {
        "rank": slow,
        "computing_us": round(float(computing[slow]), 3),
        "others_median_computing_us": round(median, 3),
        "gap_us": round(gap, 3),
        "gap_ratio": round(gap / median, 4),
        "computing_us_by_rank": {str(r): round(float(v), 3) for r, v in computing.items()},
        "source_by_rank": {str(r): str(s) for r, s in totals["source"].items()},
        "min_gap_ratio": t["min_gap_ratio"],
        "min_gap_us": t["min_gap_us"],
    }
    kernels, explained, kernel_text = _kernels_that_differ(cluster, slow, int(t["top_kernels"]), gap)
    evidence["kernel_gap_us"] = kernels
    evidence["kernels_explain_us"] = None if explained is None else round(explained, 3)
    waits = collective_waits(cluster)
    wait_text = ""
    if slow in waits.index and len(waits) > 1:
        wait = waits["wait_us"]
        extra = float(np.median(wait.drop(index=slow).to_numpy())) - float(wait[slow])
        evidence["collective_wait_us_by_rank"] = {str(r): round(float(v), 3) for r, v in wait.items()}
        evidence["others_extra_wait_us"] = round(extra, 3)
        if extra > 0:
            wait_text = f"; the others wait {fmt_us(extra)} longer in collectives than rank {slow}"
    message = (
        f"rank {slow} computes {fmt_us(float(computing[slow]))}, {gap / median:.0%} more than the "
        f"others' median {fmt_us(median)} (+{fmt_us(gap)}){kernel_text}{wait_text}"
    )
    rec = (
        f"Compare rank {slow}'s slowest kernels with the other ranks': a different input shape means "
        "uneven sharding or data (rebalance); the same shape running longer means the device "
        "(clock, thermal, contention: tilescope analyze the rank alone, see TS403/TS603)."
    )
    return [cluster_finding(CODE, SLUG, ctx, kernels=tuple(kernels), message=message, evidence=evidence,
                            recommendation=rec, saving_us=gap)]


def _kernels_that_differ(
    cluster: Cluster, slow: int, top: int, gap: float
) -> tuple[dict[str, float], float | None, str]:
    """The kernels whose total time on `slow` exceeds the others' median total most, how much
    the kernel tables explain of `gap` (Σ over kernel names of the slow rank's total minus the
    others' median total; None without them), and the words for both: "most of it in" would
    claim more than 1 ms of kernels can say about a 37.7 ms difference."""
    k = cluster.kernels
    if k.empty or slow not in set(k["rank"]):
        return {}, None, f" (rank {slow}'s kernel table is not available)"
    if k["rank"].nunique() < 2:
        return {}, None, ""
    table = k.pivot_table(index="name", columns="rank", values="total_us", aggfunc="sum", fill_value=0.0)
    others = table.drop(columns=[slow]).median(axis=1)
    diff = (table[slow] - others).sort_values(ascending=False)
    explained = float(diff.sum())
    diff = diff[diff > 0].head(top)
    named = {str(n): round(float(v), 3) for n, v in diff.items()}
    if explained <= 0:
        return named, explained, (f"; its kernels' summed times are not longer than the others' "
                                  f"({fmt_us(explained)}): the kernel tables do not explain it")
    share = f"{min(explained / gap, 9.99):.0%}" if gap > 0 else "–"
    shown = ", ".join(f"{n} +{fmt_us(v)}" for n, v in named.items())
    return named, explained, (f"; the kernel tables explain {fmt_us(explained)} of it ({share}: per kernel, "
                              f"its summed time minus the others' median), the largest {shown}")
