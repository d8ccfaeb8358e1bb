"""TS402 block-load-imbalance: some blocks or sub-cores of a launch take far longer than the rest."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from tilescope.engine import RuleContext
from tilescope.findings import Finding
from tilescope.profile import Profile
from tilescope.rules._columns import num, text
from tilescope.rules._findings import locate, make_finding, ranked_findings
from tilescope.rules._lines import line_locations, spread_lines, spread_phrase
from tilescope.rules._numbers import r3
from tilescope.text.words import count_text

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


def _slow_blocks(rows: pd.DataFrame, medians: dict[str, float], ratio: float) -> dict[str, list[str]]:
    """Per block id, its sub-blocks whose time is at least `ratio` x their side's median."""
    slow: dict[str, list[str]] = {}
    cols = (rows[c].tolist() for c in ("side", "t", "block", "sub"))
    for side, t, block, sub in zip(*cols, strict=True):
        med = medians.get(str(side))
        if med and med > 0 and float(t) >= ratio * med:
            slow.setdefault(str(block), []).append(str(sub))
    return slow


def _recommendation(slow: dict[str, list[str]], subs: dict[str, set[str]], idle: bool) -> str:
    """Advice that follows the heatmap: a block slow on every sub-core carries more work (the
    split between its sub-cores is not the problem); a slow or idle vector sub-core is the split."""
    whole = sorted((b for b, s in slow.items() if set(s) >= subs.get(b, set()) and len(s) > 1), key=_as_int)
    if whole and not idle:
        which = ", ".join(whole)
        parts = ", ".join(sorted(subs[whole[0]]))
        return (
            f"Block {which} is slow on every sub-core ({parts}): its work is the problem, not the split "
            "between sub-cores. Give it less — spread the remainder rows or the ragged tail over all "
            "blocks, or check what data it alone gets (a longer row, a skewed index) — and keep "
            "serial work off single blocks."
        )
    named = "; ".join(f"block {b} ({', '.join(sorted(slow[b]))})" for b in sorted(slow, key=_as_int))
    # a vector sub-core slower than its sibling (or an idle sibling) is the split between them
    uneven = idle or any(
        any(s.startswith("vector") for s in got)
        and not {s for s in subs.get(b, set()) if s.startswith("vector")} <= set(got)
        for b, got in slow.items()
    )
    split = (
        "split each tile between both vector sub-cores (`T.get_subblock_idx()`), "
        if uneven or not slow
        else ""
    )
    return (
        (f"Slow: {named}. " if named else "")
        + f"Balance the work: {split}distribute the remainder rows or tiles instead of giving them to "
        "one block, keep serial work off single blocks."
    )


def _as_int(block: str) -> tuple[int, str]:
    return (int(block), "") if block.isdigit() else (1 << 30, block)


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
    serial work off a single block. The finding names the slow blocks (each sub-block at least
    `max_over_median` x its side's median); a block slow on every sub-core (cube0, vector0,
    vector1) carries more work than the others, so the advice is to give it less, not to split
    differently between its sub-cores.

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
    block = text(b, "block_id").str.replace(r"\.0$", "", regex=True)
    work = pd.DataFrame(
        {**{k: b[k].astype(str) for k in keys}, "side": side, "sub": sub, "t": t, "block": block}
    )
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
        mask = np.ones(len(work), dtype=bool)
        for col, val in zip(keys, k, strict=False):
            mask &= (work[col] == val).to_numpy()
        rows = work[mask]
        medians = {str(r["side"]): float(r["median"]) for _, r in grp.iterrows()}
        for s, m in rows.groupby("side")["t"].median().items():
            medians.setdefault(str(s), float(m))
        slow = _slow_blocks(rows, medians, float(ctx.thresholds["max_over_median"]))
        subs = {str(bk): set(g["sub"]) for bk, g in rows.groupby("block")}
        msg = (
            f"{kernel}: slowest {worst['side']} block {worst['max']:.1f} µs = {worst['ratio']:.1f}x "
            f"the median "
            f"({worst['median']:.1f} µs) of {count_text(worst['size'], 'block')}"
            + (f" (slow: block {', '.join(sorted(slow, key=_as_int))})" if slow else "")
            + ("; vector1 sub-cores idle" if idle else "")
        )
        spread = spread_lines(profile, kernel)
        if spread:
            msg = f"{msg}; {spread_phrase(spread)}"
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
                    "slow_blocks": {bk: sorted(slow[bk]) for bk in sorted(slow, key=_as_int)},
                    "thresholds": dict(ctx.thresholds),
                    "saving_model": "slowest block - mean block",
                    **({"measured_lines": spread} if spread else {}),
                },
                recommendation=_recommendation(slow, subs, idle),
                locations=(*line_locations(profile, kernel, spread), *locate(profile, kernel, "vector")),
            )
        )
    # cap, then rank, then cut (#26): a launch at its speed of light does not take a place
    return ranked_findings(findings, profile.kernels, ctx)
