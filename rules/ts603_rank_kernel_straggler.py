"""TS603 rank-kernel-straggler: one kernel runs slower on one rank than on the others."""

from __future__ import annotations

from typing import Any

import pandas as pd

from tilescope.cluster import Cluster, others_median
from tilescope.engine import RuleContext
from tilescope.findings import Finding
from tilescope.rules._cluster import cluster_finding, fmt_us

CODE = "TS603"
SLUG = "rank-kernel-straggler"
KIND = "cluster"
NEEDS = ("cluster.kernels",)
THRESHOLDS: dict[str, Any] = {
    "min_slowdown": 1.2,  # the rank's median launch over the others' median
    "min_excess_us": 50.0,  # (rank median - others' median) x the rank's launches
    "max_findings": 5,
}


def check(cluster: Cluster, ctx: RuleContext) -> list[Finding]:
    """
    ## What it does
    For every kernel name found on at least two ranks, compares each rank's median launch
    duration with the median of the other ranks' medians. A rank at least `min_slowdown` times
    slower, losing at least `min_excess_us` over its launches, is reported with the kernel, the
    durations per rank and whether its input shapes differ from the others'.

    ## Why is this bad?
    The same kernel should take the same time on every rank of a data-parallel job. One slow
    rank's kernel delays that rank, and with it every collective after it (TS601, TS602).

    ## Example
    `MatMulV2` takes 180 µs on ranks 0-6 and 240 µs on rank 7 with the same shapes: rank 7's
    AI Core clock dropped, or another process shares its device.

    ## What to do instead
    Different shapes: the work is split unevenly (sequence length, padding, an uneven tensor
    split); rebalance it. Same shapes: check the rank's device (`npu-smi info` clock and
    temperature, TS403 on its timeline, other processes on the card).

    ## Thresholds
    `min_slowdown` (1.2), `min_excess_us` (50), `max_findings` (5, the largest excess first).

    ## Known limits
    Needs the kernel tables of at least two ranks. Kernels are matched by name; a name that
    stands for different work on different ranks (pipeline stages) compares unlike things.
    Shapes are compared by the first launch's input shapes.
    """
    t = ctx.thresholds
    k = cluster.kernels
    med = k.pivot_table(index="name", columns="rank", values="median_us", aggfunc="first")
    launches = k.pivot_table(index="name", columns="rank", values="launches", aggfunc="first")
    shapes = k.set_index(["name", "rank"])["input_shapes"]
    med = med[med.notna().sum(axis=1) >= 2]
    found: list[tuple[float, Finding]] = []
    others_of = others_median(med)
    for rank in med.columns:
        others = others_of[rank]
        mine = med[rank]
        slow = mine / others.where(others > 0)
        excess = (mine - others) * launches[rank].reindex(med.index)
        hit = med.index[(slow >= float(t["min_slowdown"])) & (excess >= float(t["min_excess_us"]))]
        for name in hit:
            found.append(_finding(ctx, str(name), int(rank), med.loc[name], float(others[name]),
                                  float(excess[name]), int(launches.loc[name, rank]), shapes))
    found.sort(key=lambda x: -x[0])
    return [f for _, f in found[: int(t["max_findings"])]]


def _finding(
    ctx: RuleContext, name: str, rank: int, medians: pd.Series, others: float, excess: float,
    launches: int, shapes: pd.Series,
) -> tuple[float, Finding]:
    mine = shapes.get((name, rank))
    other_shapes = {shapes.get((name, r)) for r in medians.dropna().index if r != rank}
    same = len(other_shapes) == 1 and mine in other_shapes
    why = "same input shapes: the device is slower (clock, contention)" if same else "different input shapes"
    evidence: dict[str, Any] = {
        "rank": rank,
        "median_us_by_rank": {str(r): round(float(v), 3) for r, v in medians.dropna().items()},
        "others_median_us": round(others, 3),
        "slowdown": round(float(medians[rank]) / others, 3),
        "launches": launches,
        "excess_us": round(excess, 3),
        "same_shapes": same,
        "input_shapes": None if mine is None or pd.isna(mine) else str(mine),
        "min_slowdown": ctx.thresholds["min_slowdown"],
        "min_excess_us": ctx.thresholds["min_excess_us"],
    }
    message = (
        f"{name} on rank {rank}: median {fmt_us(float(medians[rank]))} vs {fmt_us(others)} on the other "
        f"ranks ({float(medians[rank]) / others:.2f}x, +{fmt_us(excess)} over {launches} launches); {why}"
    )
    rec = ("Rebalance the work across ranks (shapes differ)" if not same else
           f"Check rank {rank}'s device: clock and temperature (npu-smi), other processes, "
           "TS403 on its timeline")
    return excess, cluster_finding(CODE, SLUG, ctx, kernels=(name,), message=message, evidence=evidence,
                                   recommendation=rec + ".", saving_us=excess, occurrences=launches)
