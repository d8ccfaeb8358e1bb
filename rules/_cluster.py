"""Helpers shared by the cross-rank rules (TS6xx, KIND "cluster"): per-rank totals and one way to
build a Finding. The tables are tilescope.cluster.Cluster's (a row per rank and step, collective,
link or kernel name), so everything here is a groupby over ranks, never a loop over rows."""

from __future__ import annotations

from typing import Any

import pandas as pd

from tilescope.cluster import Cluster
from tilescope.engine import RuleContext
from tilescope.findings import Finding
from tilescope.ranksets import rank_set_text
from tilescope.text.words import fmt_us

__all__ = ["cluster_finding", "collective_waits", "fmt_us", "rank_set_text", "rank_totals"]


def rank_totals(cluster: Cluster) -> pd.DataFrame:
    """Per rank (index), summed over steps: computing_us, communication_not_overlapped_us,
    free_us, step_us."""
    return cluster.rank_totals().set_index("rank")


def collective_waits(cluster: Cluster) -> pd.DataFrame:
    """Per rank (index): wait_us, transit_us and elapse_us summed over the collectives of every
    step (point-to-point operators wait for their peer by design and are left out). A rank
    without communication.json (or analysis.db's CommAnalyzerTime) has no row: its wait is not
    known, which is not a wait of 0."""
    ops = cluster.comm_ops
    columns = ["wait_us", "transit_us", "elapse_us"]
    if ops.empty or "kind" not in ops.columns:
        return pd.DataFrame(columns=columns)
    coll = ops[ops["kind"] == "collective"]
    return coll.groupby("rank", sort=True)[[c for c in columns if c in coll.columns]].sum()


def cluster_finding(
    code: str, slug: str, ctx: RuleContext, *, kernels: tuple[str, ...], message: str,
    evidence: dict[str, Any], recommendation: str, saving_us: float, occurrences: int = 1,
) -> Finding:
    """A cross-rank finding; `evidence["rank"]` is the rank it names, when it names one."""
    saving = max(0.0, float(saving_us))
    return Finding(
        code=code, slug=slug, severity=ctx.severity(saving), kernels=kernels, message=message,
        evidence=evidence, recommendation=recommendation, est_saving_us=saving,
        share_of_total=ctx.share(saving), occurrences=occurrences,
    )
