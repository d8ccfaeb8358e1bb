"""TS401 wasted-cores: block counts that leave AI Cores idle (below, or not a multiple of, the core count)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from tilescope.columns import CUBE_TYPES, VECTOR_TYPES
from tilescope.engine import RuleContext
from tilescope.findings import Finding
from tilescope.profile import Profile
from tilescope.rules._columns import HELPER_COLUMNS, LEAN_COLUMNS, core_types, num, text
from tilescope.rules._findings import grouped_findings
from tilescope.rules._numbers import pct, r4
from tilescope.rules._refine import refine_library
from tilescope.text.words import count_text

CODE = "TS401"
SLUG = "wasted-cores"
KIND = "runtime"
NEEDS = ("duration_us", "block_dim", "core_type")
# the fix changes the grid, and with it the cores the speed of light is taken over: bounded by the
# kernel's speed of light with every core, not at the present grid
SAVING_KIND = "grid"
THRESHOLDS: dict[str, Any] = {
    "min_duration_us": 20.0,
    "max_core_efficiency": 0.9,  # flag when blocks / (waves x cores) is below this
    "min_saving_us": 1.0,
    "max_findings": 20,
}

# Kernel columns check() reads besides NEEDS (`analyze` loads only what the rules and the report read)
READS = (*HELPER_COLUMNS, *LEAN_COLUMNS, "unit")


# A CANN built-in kernel's tiling and grid are not its user's to change: say what they can do, and
# name the fusion finding that already covers it (tilescope.engine runs `refine` after every rule).
refine = refine_library


def check(profile: Profile, ctx: RuleContext) -> list[Finding]:
    """
    ## What it does
    For every launch, compares its block count with the chip's cores of the kind it runs on —
    AIC cores (`aic_count`) for AI_CORE/MIX_AIC kernels, AIV cores (`aiv_count`) for
    AI_VECTOR_CORE/MIX_AIV and for AI_CORE-typed kernels whose work is all on the Vector side
    (older CANN) — and computes the core efficiency blocks / (waves x cores), waves =
    ceil(blocks / cores). 33 blocks on 48 AIV cores: 69 %; 52 blocks: 2 waves, 54 %.

    ## Why is this bad?
    Cores without a block idle for the whole kernel; a partial last wave idles most cores for
    one wave's time.

    ## Example
    `ReduceSum` launched with 52 blocks on 48 Vector cores.

    ## What to do instead
    Choose the grid so blocks are a multiple of the cores (or at least the core count): split
    the work along another axis, use a persistent-kernel loop over tiles (`for t in T.serial(
    ceildiv(tiles, cores))`), or adjust the tile size so tiles divide evenly.

    ## Thresholds
    `max_core_efficiency` (0.9), `min_duration_us` (20), `min_saving_us` (1), `max_findings`
    (20). Core counts come from the chip (`aic_count`, `aiv_count`; overridden by the profile's
    device info).

    ## Known limits
    Where the profile does not record the core count and its data does not tell (an `msprof op`
    run has no info.json), the count is assumed — the fewest cores of a catalogued chip that the
    one-wave grids allow, else the chip's default: the finding says "if the device has N cores"
    and is at most medium. Assumes blocks take equal time and the kernel scales with
    cores (saving = duration x (1 - efficiency), an upper bound). Per-block imbalance is TS402's.
    """
    df = profile.kernels
    ct = core_types(df)
    # the side a launch ran on (tilescope.metrics `unit`): older CANN types vector kernels AI_CORE
    unit = text(df, "unit")
    cube = ct.isin(CUBE_TYPES) & (unit != "vector")
    vector = ct.isin(VECTOR_TYPES) | (unit == "vector")
    cores = pd.Series(np.nan, index=df.index)
    if profile.chip.aic_count:
        cores = cores.mask(cube, float(profile.chip.aic_count))
    if profile.chip.aiv_count:
        cores = cores.mask(vector, float(profile.chip.aiv_count))
    blocks = num(df, "block_dim")
    waves = np.ceil(blocks / cores)
    eff = blocks / (waves * cores)
    dur = num(df, "duration_us")
    flagged = (
        (
            (eff < float(ctx.thresholds["max_core_efficiency"]))
            & (blocks > 0)
            & (dur >= float(ctx.thresholds["min_duration_us"]))
        )
        .fillna(False)
        .to_numpy()
    )
    saving = (dur * (1 - eff)).clip(lower=0).fillna(0)
    prof = profile.with_kernels(df.assign(cores=cores, waves=waves, core_efficiency=eff))

    # which side each kernel's count came from, and whether that count is the chip's default
    on_vector = dict(zip(df["name"].astype("str"), vector.to_numpy(), strict=False))

    def assumed(kernel: str) -> tuple[str, ...]:
        value = profile.chip.assumed_value("aiv_count" if on_vector.get(kernel) else "aic_count")
        if not value:
            return ()
        # the chip default, or the fewest cores of a catalogued chip at or above what the grids
        # prove (tilescope.io.device): the loader's note says which
        chip = profile.chip.base_name
        return (f"{value}: assumed for {chip}, not recorded in the profile (see the chip note)",)

    def message(kernel: str, row: pd.Series) -> str:
        lo, hi = row["block_dim_min"], row["block_dim_max"]
        if lo == hi:
            said = (
                f"{kernel}: {count_text(row['block_dim'], 'block')} on {count_text(row['cores'], 'core')} "
                f"({count_text(row['waves'], 'wave')}) keeps {pct(1 - row['core_efficiency'])} of the "
                f"core time idle"
            )
        else:  # launches of one name on different grids: no median grid, the idle share over them all
            said = (
                f"{kernel}: {lo:g} to {hi:g} blocks on {count_text(row['cores'], 'core')} keep "
                f"{pct(row['saving_us'] / row['total_us'])} of the core time idle over "
                f"{count_text(row['launches'], 'launch', 'launches')}"
            )
        guess = assumed(kernel)
        if not guess:
            return said
        return f"{said}, if the device has {guess[0].split(':')[0]} (--chip gives the real count)"

    return grouped_findings(
        prof,
        ctx,
        code=CODE,
        slug=SLUG,
        flagged=flagged,
        saving=saving,
        metrics=("block_dim", "cores", "waves", "core_efficiency"),
        message=message,
        topic="grid",
        chip_fields=("aic_count", "aiv_count"),
        extra=lambda k, r: {"saving_model": "duration x (1 - blocks / (waves x cores))",
                            "block_dim_range": [r4(r["block_dim_min"]), r4(r["block_dim_max"])]},
        assumed=lambda k, r: assumed(k),
        ranges=("block_dim",),
        recommendation="Make the block count a multiple of the core count (split along another "
        "axis, adjust the "
        "tile size, or loop persistently over tiles inside each block).",
    )
