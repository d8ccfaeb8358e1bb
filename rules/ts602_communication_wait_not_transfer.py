"""TS602 communication-wait-not-transfer: collectives spend their time waiting for a late rank,
not moving data."""

from __future__ import annotations

from typing import Any

from tilescope.cluster import Cluster
from tilescope.engine import RuleContext
from tilescope.findings import Finding
from tilescope.rules._cluster import cluster_finding, collective_waits, fmt_us, rank_set_text

CODE = "TS602"
SLUG = "communication-wait-not-transfer"
KIND = "cluster"
NEEDS = ("cluster.comm_ops",)
THRESHOLDS: dict[str, Any] = {
    "min_wait_share": 0.5,  # wait / (wait + transit) of a rank's collectives
    "min_wait_us": 100.0,  # a rank's collective wait summed over steps
}


def check(cluster: Cluster, ctx: RuleContext) -> list[Finding]:
    """
    ## What it does
    Sums, per rank, the wait and the transit time of its collectives (communication.json; the
    point-to-point operators are left out) and flags the run when on some ranks the wait is at
    least `min_wait_share` of wait + transit (the share is of those two only, not of the
    collectives' elapsed time, which also holds torch_npu's idle time; the message gives all
    three). It names the rank that arrived last most often: in
    each collective (matched by step and operator across ranks) the rank with the least wait is
    the one the others waited for.

    ## Why is this bad?
    A collective cannot finish before its last rank arrives. Time in "wait" is synchronisation:
    a faster network does not shorten it; making the ranks arrive together does. Tuning HCCL
    buffers or the topology for a run like this changes nothing.

    ## Example
    The real 2-rank GPT-3 run (`gpt3_2rank_memoryl0`): each rank waits ~115 ms in collectives per
    step and transfers for ~5.4 ms (wait ratio 0.955 in torch_npu's own file).

    ## What to do instead
    Find why the last rank is late: uneven compute (TS601, TS603), host work before the collective
    (data loading, logging, a host sync), or a rank that starts its step late. Overlap the
    collective with independent compute where the framework allows it.

    ## Thresholds
    `min_wait_share` (0.5), `min_wait_us` (100).

    ## Known limits
    The saving is an upper bound: the mean collective wait per rank, which only disappears if every
    rank arrived at every collective at once. torch_npu measures wait from the rank's own
    notifications; clock offsets between hosts do not enter it. With one rank's communication.json
    missing, "arrived last" is decided among the others.
    """
    t = ctx.thresholds
    waits = collective_waits(cluster)
    if waits.empty:
        return []
    total = waits["wait_us"] + waits["transit_us"]
    share = (waits["wait_us"] / total.where(total > 0)).fillna(0.0)
    hit = share[(share >= float(t["min_wait_share"])) & (waits["wait_us"] >= float(t["min_wait_us"]))]
    if hit.empty:
        return []
    last, arrivals, matched = _last_to_arrive(cluster)
    mean_wait = float(waits["wait_us"].mean())
    evidence: dict[str, Any] = {
        "wait_us_by_rank": {str(r): round(float(v), 3) for r, v in waits["wait_us"].items()},
        "transit_us_by_rank": {str(r): round(float(v), 3) for r, v in waits["transit_us"].items()},
        "wait_share_by_rank": {str(r): round(float(v), 4) for r, v in share.items()},
        "ranks_wait_dominated": [int(r) for r in hit.index],
        "last_to_arrive_counts": arrivals,
        "collectives_matched": matched,
        "mean_wait_us": round(mean_wait, 3),
        "min_wait_share": t["min_wait_share"],
        "min_wait_us": t["min_wait_us"],
    }
    ranks = rank_set_text(list(hit.index))
    lo, hi = f"{float(hit.min()):.0%}", f"{float(hit.max()):.0%}"
    worst = int(hit.idxmax())  # type: ignore[call-overload]
    row = waits.loc[worst].astype(float)
    wait, transit = float(row["wait_us"]), float(row["transit_us"])
    elapsed = ""
    if "elapse_us" in row.index and float(row["elapse_us"]) > 0:
        evidence["elapse_us_by_rank"] = {str(r): round(float(v), 3) for r, v in waits["elapse_us"].items()}
        elapsed = f"; the collectives' elapsed time is {fmt_us(float(row['elapse_us']))}"
    # the share is of wait + transit, not of the collectives' elapsed time (which also holds
    # torch_npu's idle time): "62 % of collective time" read 5.9 ms of 106 ms as 62 %
    head = (
        f"collectives wait, not transfer: on rank{'s' if len(hit) > 1 else ''} {ranks} wait is "
        f"{lo if lo == hi else f'{lo}-{hi}'} of wait + transit (rank {worst}: {fmt_us(wait)} waiting, "
        f"{fmt_us(transit)} transferring{elapsed})"
    )
    if last is not None:
        evidence["rank"] = last
        head += f"; rank {last} arrived last in {arrivals[str(last)]} of {matched} collectives"
    rec = (
        "Make the ranks arrive together rather than tuning the network: remove the compute imbalance "
        "(TS601/TS603) or the host work before the collectives, and overlap communication with compute."
    )
    return [cluster_finding(CODE, SLUG, ctx, kernels=(), message=head, evidence=evidence,
                            recommendation=rec, saving_us=mean_wait)]


def _last_to_arrive(cluster: Cluster) -> tuple[int | None, dict[str, int], int]:
    """(the rank that arrived last most often, count per rank, collectives seen on ≥ 2 ranks)."""
    ops = cluster.comm_ops
    coll = ops[ops["kind"] == "collective"]
    seen = coll.groupby(["step", "op"], dropna=False)["rank"].transform("nunique")
    coll = coll[seen >= 2]
    if coll.empty:
        return None, {}, 0
    idx = coll.groupby(["step", "op"], dropna=False)["wait_us"].idxmin()
    counts = coll.loc[idx.to_numpy(), "rank"].value_counts()
    matched = len(idx)
    top = counts.max()
    leaders = sorted(int(r) for r, c in counts.items() if c == top)
    # a tie (each rank late as often) names no straggler
    last = leaders[0] if len(leaders) == 1 and top > matched / max(2, coll["rank"].nunique()) else None
    return last, {str(int(r)): int(c) for r, c in counts.sort_index().items()}, matched

