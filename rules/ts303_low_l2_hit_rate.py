"""TS303 low-l2-hit-rate: reads that miss the L2 cache and go to HBM."""

from __future__ import annotations

from typing import Any

import pandas as pd

from tilescope.engine import RuleContext
from tilescope.findings import Finding
from tilescope.profile import Profile
from tilescope.rules._columns import HELPER_COLUMNS, LEAN_COLUMNS, lean, num
from tilescope.rules._findings import grouped_findings
from tilescope.rules._numbers import pct
from tilescope.rules._refine import refine_library

CODE = "TS303"
SLUG = "low-l2-hit-rate"
KIND = "runtime"
NEEDS = (
    "duration_us",
    "aic_write_cache_hit|aiv_write_cache_hit|aic_total_hit_rate_pct|aiv_total_hit_rate_pct",
)
THRESHOLDS: dict[str, Any] = {
    "min_hit_rate": 0.7,
    "min_duration_us": 10.0,
    "min_saving_us": 1.0,
    "max_findings": 20,
}
_HITS = ("write_cache_hit", "r0_read_cache_hit", "r1_read_cache_hit")
_MISSES = ("write_cache_miss_allocate", "r0_read_cache_miss_allocate", "r1_read_cache_miss_allocate")

# every column hit_rate() reads (diff's explanations read them too: tilescope.diff_explain)
L2_COLUMNS = (
    *(f"{s}_{c}" for s in ("aic", "aiv") for c in (*_HITS, *_MISSES)),
    "aic_total_hit_rate_pct",
    "aiv_total_hit_rate_pct",
)
# Kernel columns check() reads besides NEEDS (`analyze` loads only what the rules and the report read)
READS = (*HELPER_COLUMNS, *LEAN_COLUMNS, *L2_COLUMNS)


def hit_rate(df: pd.DataFrame) -> pd.Series:
    """L2 hit rate 0-1 from hit/miss counts of both sides, else from `*_total_hit_rate_pct`."""
    hits = sum(
        (num(df, f"{s}_{c}").fillna(0) for s in ("aic", "aiv") for c in _HITS), pd.Series(0.0, index=df.index)
    )
    miss = sum(
        (num(df, f"{s}_{c}").fillna(0) for s in ("aic", "aiv") for c in _MISSES),
        pd.Series(0.0, index=df.index),
    )
    total = hits + miss
    rate = (hits / total).where(total > 0)
    pct_col = pd.concat([num(df, "aic_total_hit_rate_pct"), num(df, "aiv_total_hit_rate_pct")], axis=1).mean(
        axis=1
    )
    return rate.fillna(pct_col / 100.0)


# A CANN built-in kernel's tiling and grid are not its user's to change: say what they can do, and
# name the fusion finding that already covers it (tilescope.engine runs `refine` after every rule).
refine = refine_library


def check(profile: Profile, ctx: RuleContext) -> list[Finding]:
    """
    ## What it does
    Computes each launch's L2 hit rate from the L2Cache counters (hits / (hits + miss-allocates)
    over write, r0 and r1 reads of both sides; or `*_total_hit_rate(%)` from msprof op) and
    flags those below `min_hit_rate`.

    ## Why is this bad?
    Every miss goes to HBM: lower bandwidth and longer latency than L2. Reused operands that keep
    missing mean the access order or the tile size defeats the cache.

    ## Example
    A GEMM that walks B column-panel by column-panel for every row block: 45 % hit rate.

    ## What to do instead
    Reorder the block schedule so blocks running together share operands (swizzle / group the
    M-blocks), keep the reused operand's working set under the L2 size, and avoid reading the
    same data through two different kernels.

    ## Thresholds
    `min_hit_rate` (0.7), `min_duration_us` (10), `min_saving_us` (1), `max_findings` (20).

    ## Known limits
    Needs `aic_metrics=L2Cache`. The saving (duration x (min_hit_rate - hit rate)) is a rough
    proportional estimate, not a cache model.
    """
    df = profile.kernels
    rate = hit_rate(df)
    dur = num(df, "duration_us")
    target = float(ctx.thresholds["min_hit_rate"])
    flagged = ((rate < target) & (dur >= float(ctx.thresholds["min_duration_us"]))).fillna(False).to_numpy()
    saving = (dur * (target - rate)).clip(lower=0).fillna(0)
    prof = profile.with_kernels(lean(df, l2_hit_rate=rate))
    return grouped_findings(
        prof,
        ctx,
        code=CODE,
        slug=SLUG,
        flagged=flagged,
        saving=saving,
        metrics=("l2_hit_rate",),
        message=lambda k, r: f"{k}: L2 hit rate {pct(r['l2_hit_rate'])} (< {pct(target)}) — reads go to HBM",
        topic="memory",
        chip_fields=("l2_bytes",),
        extra=lambda k, r: {"saving_model": "duration x (min_hit_rate - hit rate)"},
        recommendation="Reorder/swizzle the block schedule so concurrently running blocks share "
        "operands, keep the "
        "reused working set below the L2 size, and avoid re-reading the same data in two kernels.",
    )
