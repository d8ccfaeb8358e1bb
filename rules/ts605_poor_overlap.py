"""TS605 poor-overlap: communication runs while the compute units idle, and could be hidden."""

from __future__ import annotations

from typing import Any

from tilescope.cluster import Cluster
from tilescope.engine import RuleContext
from tilescope.findings import Finding
from tilescope.rules._cluster import cluster_finding, collective_waits, fmt_us, rank_set_text, rank_totals

CODE = "TS605"
SLUG = "poor-overlap"
KIND = "cluster"
NEEDS = ("cluster.steps",)
THRESHOLDS: dict[str, Any] = {
    "max_overlap_ratio": 0.3,  # overlapped / communication time
    "min_hideable_share": 0.03,  # hideable communication over the rank's step time
}


def check(cluster: Cluster, ctx: RuleContext) -> list[Finding]:
    """
    ## What it does
    Per rank, summed over steps: the share of communication time that overlaps compute
    (Overlapped / Communication of step_trace_time.csv, or recomputed from the kernels and HCCL
    tasks), and the communication that could be hidden: Communication (not overlapped) minus the
    rank's collective wait (communication.json; waiting for a late rank is TS602's subject, not
    overlap's), at most the Computing time not yet overlapped. Ranks whose overlap ratio is under
    `max_overlap_ratio` and whose hideable time is at least `min_hideable_share` of their step are
    reported together, with the largest hideable time as the saving.

    ## Why is this bad?
    Communication that runs while no kernel does adds its full length to the step. Gradient
    all-reduce in buckets during the backward pass, or tensor-parallel collectives overlapped
    with the next layer's compute, hide most of it.

    ## Example
    The real 2-rank GPT-3 run: 153.6 ms of communication per step on rank 0, 7.0 ms of it
    overlapped (4.5 %); 116.6 ms is collective wait, about 30 ms more is exposed transfer and
    scheduling that overlap could hide.

    ## What to do instead
    Enable the framework's overlap: DDP gradient bucketing (`bucket_cap_mb`), ZeRO/FSDP prefetch,
    Megatron's `--overlap-grad-reduce` / `--overlap-param-gather`, sequence-parallel overlap of
    all-gather with the matmul; issue collectives on a separate stream, early.

    ## Thresholds
    `max_overlap_ratio` (0.3), `min_hideable_share` (0.03).

    ## Known limits
    Overlap needs independent compute: a collective whose result the next kernel needs cannot be
    hidden. The hideable time is an upper bound; without communication.json the wait is not
    known, not subtracted, and the bound is looser (the message says so; `wait_subtracted` in the
    evidence).
    """
    t = ctx.thresholds
    steps = cluster.steps
    if "overlapped_us" not in steps.columns or "communication_us" not in steps.columns:
        return []
    g = steps.groupby("rank", sort=True)[["overlapped_us", "communication_us"]].sum(min_count=1)
    totals = rank_totals(cluster).join(g)
    known = collective_waits(cluster)["wait_us"]
    # a rank without communication.json has no known wait: nothing is subtracted, and said so
    waits = known.reindex(totals.index).fillna(0.0)
    comm = totals["communication_us"]
    ratio = (totals["overlapped_us"] / comm.where(comm > 0)).fillna(1.0)
    exposed = (totals["communication_not_overlapped_us"] - waits).clip(lower=0.0)
    free_compute = (totals["computing_us"] - totals["overlapped_us"].fillna(0.0)).clip(lower=0.0)
    hideable = exposed.clip(upper=free_compute)
    share = hideable / totals["step_us"].where(totals["step_us"] > 0)
    hit = totals.index[(ratio < float(t["max_overlap_ratio"])) & (share >= float(t["min_hideable_share"]))]
    if len(hit) == 0:
        return []
    worst = int(hideable[hit].idxmax())  # type: ignore[call-overload]
    evidence: dict[str, Any] = {
        "rank": worst,
        "ranks": [int(r) for r in hit],
        "overlap_ratio_by_rank": {str(r): round(float(ratio[r]), 4) for r in hit},
        "hideable_us_by_rank": {str(r): round(float(hideable[r]), 3) for r in hit},
        "collective_wait_us_by_rank": {str(r): round(float(known[r]), 3) for r in hit if r in known.index},
        "wait_subtracted": worst in known.index,
        "max_overlap_ratio": t["max_overlap_ratio"],
        "min_hideable_share": t["min_hideable_share"],
    }
    wait_text = ("collective wait excluded" if worst in known.index else
                 f"rank {worst}'s collective wait is not known without communication.json: part of it may be")
    message = (
        f"communication barely overlaps compute on rank{'s' if len(hit) > 1 else ''} "
        f"{rank_set_text(list(hit))} "
        f"({float(ratio[worst]):.0%} overlapped on rank {worst}); up to {fmt_us(float(hideable[worst]))} of "
        f"exposed communication could run under compute ({wait_text})"
    )
    rec = ("Overlap communication with independent compute: DDP gradient buckets, FSDP/ZeRO prefetch, "
           "Megatron --overlap-grad-reduce / --overlap-param-gather, collectives on their own stream.")
    return [cluster_finding(CODE, SLUG, ctx, kernels=(), message=message, evidence=evidence,
                            recommendation=rec, saving_us=float(hideable[worst]))]
