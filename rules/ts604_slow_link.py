"""TS604 slow-link: one link's bandwidth is far under its peers' of the same transport."""

from __future__ import annotations

from typing import Any

import numpy as np

from tilescope.cluster import Cluster, link_sums
from tilescope.engine import RuleContext
from tilescope.findings import Finding
from tilescope.rules._cluster import cluster_finding, fmt_us

CODE = "TS604"
SLUG = "slow-link"
KIND = "cluster"
NEEDS = ("cluster.links",)
THRESHOLDS: dict[str, Any] = {
    "max_bandwidth_ratio": 0.5,  # a link's GB/s over the median of its transport's links
    "min_size_mb": 1.0,  # transfers smaller than this are latency, not bandwidth
    "min_links": 3,  # links of a transport needed for a median
    "max_findings": 3,
}


def check(cluster: Cluster, ctx: RuleContext) -> list[Finding]:
    """
    ## What it does
    Aggregates communication_matrix.json per link (source rank, destination rank, transport) over
    every collective (each once: the file's aggregates are a check, not an addend) and step with
    transfers of at least `min_size_mb`: bandwidth = Σ size / Σ transit time. A link whose
    bandwidth is under `max_bandwidth_ratio` of the median of the links of the same transport
    (HCCS, RDMA, PCIE, SIO) is reported with both figures.

    ## Why is this bad?
    A ring or tree collective moves at the pace of its slowest link: one degraded HCCS lane or
    RDMA port slows every all-reduce that crosses it, on every rank.

    ## Example
    Seven HCCS links of rank 0 move 20 MB at ~19 GB/s; link 3-4 moves the same at 6 GB/s.

    ## What to do instead
    Check the link's hardware state (`hccn_tool` link status and error counters, `npu-smi`),
    the cabling and the switch port for RDMA; pin the job away from the bad device meanwhile.

    ## Thresholds
    `max_bandwidth_ratio` (0.5), `min_size_mb` (1), `min_links` (3), `max_findings` (3).

    ## Known limits
    LOCAL copies are left out. Both ends of a link report it; each end's figure is its own view,
    so one bad link can appear from both sides. Small transfers are latency-bound and excluded.
    The saving is the transit time above what the transport's median bandwidth would take.
    """
    t = ctx.thresholds
    per = link_sums(cluster.links, ("transport", "src_rank", "dst_rank"), float(t["min_size_mb"]))
    if per.empty:
        return []
    per["gbps"] = per["size_mb"] / per["transit_us"]  # MB/µs = TB/s; x1000 below
    per["gbps"] *= 1000.0
    found: list[tuple[float, Finding]] = []
    for transport, group in per.groupby(level="transport"):
        if len(group) < int(t["min_links"]):
            continue
        median = float(np.median(group["gbps"].to_numpy()))
        slow = group[group["gbps"] < float(t["max_bandwidth_ratio"]) * median]
        for key, row in slow.iterrows():
            link: Any = key  # (transport, source rank, destination rank)
            src, dst = int(link[1]), int(link[2])
            expected_us = float(row["size_mb"]) / median * 1000.0
            saving = float(row["transit_us"]) - expected_us
            evidence = {
                "rank": int(src), "src_rank": int(src), "dst_rank": int(dst), "transport": str(transport),
                "bandwidth_gbps": round(float(row["gbps"]), 3), "transport_median_gbps": round(median, 3),
                "size_mb": round(float(row["size_mb"]), 3), "transit_us": round(float(row["transit_us"]), 3),
                "links_compared": len(group), "max_bandwidth_ratio": t["max_bandwidth_ratio"],
                "min_size_mb": t["min_size_mb"],
            }
            msg = (f"{transport} link {src}-{dst}: {row['gbps']:.1f} GB/s vs a median of {median:.1f} GB/s "
                   f"over {len(group)} {transport} links "
                   f"({row['size_mb']:.0f} MB in {fmt_us(float(row['transit_us']))})")
            rec = (f"Check link {src}-{dst}: hccn_tool link status and error counters, npu-smi, cabling or "
                   "the switch port; move the job off the degraded device meanwhile.")
            found.append((saving, cluster_finding(CODE, SLUG, ctx, kernels=(), message=msg, evidence=evidence,
                                                  recommendation=rec, saving_us=saving)))
    found.sort(key=lambda x: -x[0])
    return [f for _, f in found[: int(t["max_findings"])]]
