"""TS402 block-load-imbalance: some blocks or sub-cores of a launch take far longer than the rest."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from analyzer.engine import RuleContext
from analyzer.findings import Finding
from analyzer.profile import Profile
from analyzer.report.words import count_text
from rules._common import locate, make_finding, num, r3, text

CODE = "TS402"
SLUG = "block-load-imbalance"
KIND = "runtime"
NEEDS = ("blocks",)
THRESHOLDS: dict[str, Any] = {
    "max_over_median": 1.2,  # slowest block / median block of one side (a 20 % tail)
    "idle_sub_core_us": 1.0,  # a vector sub-core below this while its sibling works is idle
    "min_block_us": 5.0,  # ignore launches whose slowest block is shorter
    "max_findings": 20,
}


def _median_of(s: pd.Series, key: tuple[Any, ...]) -> float | None:
    """Look up a group median by its key tuple (a one-level index is keyed by the bare value)."""
    k: Any = key if len(key) > 1 else key[0]
    v = s.get(k)
    return None if v is None or pd.isna(v) else float(v)


def check(profile: Profile, ctx: RuleContext) -> list[Finding]:
    """
    ## What it does
    With `msprof op` per-block data, takes per launch and per side (cube0 rows for the Cube,
    vector0/vector1 rows for the Vector) the slowest, median and mean block time, and flags
    launches whose slowest block exceeds `max_over_median` x the median, or whose vector1
    sub-cores idle (below `idle_sub_core_us`) while vector0 works.

    ## Why is this bad?
    A launch ends when its slowest block ends; every other core idles meanwhile. An idle vector1
    means half of the Vector cores of a mixed kernel never got work.

    ## Example
    A 256-block TileLang SVD kernel: every vector0 row 14,450 µs, vector1 and cube0 rows 1-5 µs.

    ## What to do instead
    Split the work evenly: give both vector sub-cores a half of each tile (`T.get_subblock_idx()`
    / `vid`), balance ragged tails (smaller last tiles, or distribute remainder rows), and move
    serial work off a single block.

    ## Thresholds
    `max_over_median` (1.2), `idle_sub_core_us` (1.0), `min_block_us` (5), `max_findings` (20).

    ## Known limits
    Needs `msprof op` (per-block rows); kernel tables have no per-block data. The saving (slowest
    minus mean block time) assumes the work could be spread perfectly.
    """
    b = profile.blocks
    assert b is not None
    sub = text(b, "sub_block_id").str.lower()
    t = num(b, "aic_time_us").where(sub.str.startswith("cube"), num(b, "aiv_time_us"))
    side = np.where(sub.str.startswith("cube"), "cube", "vector")
    keys = [k for k in ("op_name", "launch") if k in b.columns]
    work = pd.DataFrame({**{k: b[k].astype(str) for k in keys}, "side": side, "sub": sub, "t": t})
    g = work.groupby([*keys, "side"], sort=False)["t"]
    stats = g.agg(["max", "median", "mean", "size"]).reset_index()
    v0 = work[work["sub"] == "vector0"].groupby(keys)["t"].median()
    v1 = work[work["sub"] == "vector1"].groupby(keys)["t"].median()
    idle_thr = float(ctx.thresholds["idle_sub_core_us"])
    findings: list[Finding] = []
    stats = stats[stats["max"] >= float(ctx.thresholds["min_block_us"])]
    stats["ratio"] = stats["max"] / stats["median"].where(stats["median"] > 0)
    stats["saving"] = stats["max"] - stats["mean"]
    flagged = stats[stats["ratio"] >= float(ctx.thresholds["max_over_median"])]
    for key, grp in flagged.groupby(keys, sort=False):
        kernel = str(key[0] if isinstance(key, tuple) else key)
        worst = grp.sort_values("saving", ascending=False).iloc[0]
        k = tuple(key) if isinstance(key, tuple) else (key,)
        m0, m1 = _median_of(v0, k), _median_of(v1, k)
        idle = bool(m0 is not None and m1 is not None and m1 < idle_thr <= m0)
        msg = (
            f"{kernel}: slowest {worst['side']} block {worst['max']:.1f} µs = {worst['ratio']:.1f}x "
            f"the median "
            f"({worst['median']:.1f} µs) of {count_text(worst['size'], 'block')}"
            + ("; vector1 sub-cores idle" if idle else "")
        )
        findings.append(
            make_finding(
                ctx,
                code=CODE,
                slug=SLUG,
                kernels=[kernel],
                message=msg,
                saving_us=float(worst["saving"]),
                evidence={
                    "launch": dict(zip(keys, k, strict=False)),
                    "per_side": [
                        {
                            "side": r["side"],
                            "max_us": r3(r["max"]),
                            "median_us": r3(r["median"]),
                            "mean_us": r3(r["mean"]),
                            "blocks": int(r["size"]),
                            "max_over_median": r3(r["ratio"]),
                        }
                        for _, r in grp.iterrows()
                    ],
                    "vector0_median_us": r3(m0),
                    "vector1_median_us": r3(m1),
                    "vector1_idle": idle,
                    "thresholds": dict(ctx.thresholds),
                    "saving_model": "slowest block - mean block",
                },
                recommendation="Balance the blocks: split each tile between both vector sub-cores, "
                "distribute the "
                "remainder rows instead of giving them to one block, keep serial work off single blocks.",
                locations=locate(profile, kernel, "vector"),
            )
        )
    return findings[: int(ctx.thresholds["max_findings"])]
