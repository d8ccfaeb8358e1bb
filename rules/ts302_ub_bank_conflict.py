"""TS302 ub-bank-conflict: Vector instructions stalled on UB bank / bank-group conflicts."""

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

CODE = "TS302"
SLUG = "ub-bank-conflict"
KIND = "runtime"
NEEDS = ("duration_us", "aiv_vec_bank_cflt_ratio|aiv_vec_bankgroup_cflt_ratio|aiv_vec_resc_cflt_ratio")
THRESHOLDS: dict[str, Any] = {
    "conflict_ratio": 0.1,  # bank + bank-group conflict cycles / Vector cycles
    "min_duration_us": 10.0,
    "min_saving_us": 1.0,
    "max_findings": 20,
}

# Kernel columns check() reads besides NEEDS (`analyze` loads only what the rules and the report read)
READS = (*HELPER_COLUMNS, *LEAN_COLUMNS, "aiv_time_us")


# A CANN built-in kernel's tiling and grid are not its user's to change: say what they can do, and
# name the fusion finding that already covers it (tilescope.engine runs `refine` after every rule).
refine = refine_library

# every column conflict_share() reads (diff's explanations read them too: tilescope.diff_explain)
CONFLICT_COLUMNS = ("aiv_vec_bank_cflt_ratio", "aiv_vec_bankgroup_cflt_ratio", "aiv_vec_resc_cflt_ratio")


def conflict_share(df: pd.DataFrame) -> pd.Series:
    """The share of Vector cycles lost to UB bank (and bank-group) conflicts, per launch; the
    resource-conflict ratio where the bank columns are zero or missing."""
    bank = num(df, "aiv_vec_bank_cflt_ratio").fillna(0) + num(df, "aiv_vec_bankgroup_cflt_ratio").fillna(0)
    return bank.where(bank > 0, num(df, "aiv_vec_resc_cflt_ratio"))


def check(profile: Profile, ctx: RuleContext) -> list[Finding]:
    """
    ## What it does
    Flags every launch whose UB bank-conflict share (`aiv_vec_bank_cflt_ratio` +
    `aiv_vec_bankgroup_cflt_ratio`, from ResourceConflictRatio) reaches `conflict_ratio`.

    ## Why is this bad?
    UB is split into banks; two operands of one Vector instruction in the same bank (or bank
    group) are read one after the other, so the instruction takes twice the cycles.

    ## Example
    A softmax kernel whose input and output UB tiles start at addresses a multiple of the bank
    stride apart: bank conflicts 25 % of the Vector cycles.

    ## What to do instead
    Offset the UB buffers of operands used together (pad the tile's row length by 32 B / one
    block, or place src and dst in different bank groups); avoid strided accesses that hit one
    bank.

    ## Thresholds
    `conflict_ratio` (0.1), `min_duration_us` (10), `min_saving_us` (1), `max_findings` (20).

    ## Known limits
    Needs `aic_metrics=ResourceConflictRatio`. The saving (conflict share x Vector time) assumes
    conflict stalls are not hidden behind other pipes.
    """
    df = profile.kernels
    conflict = conflict_share(df)
    dur = num(df, "duration_us")
    vec_time = num(df, "aiv_time_us").fillna(dur)
    flagged = (
        (
            (conflict >= float(ctx.thresholds["conflict_ratio"]))
            & (dur >= float(ctx.thresholds["min_duration_us"]))
        )
        .fillna(False)
        .to_numpy()
    )
    saving = (conflict * vec_time).clip(upper=dur).fillna(0)
    prof = profile.with_kernels(lean(df, conflict_ratio=conflict))

    def message(kernel: str, row: pd.Series) -> str:
        return f"{kernel}: UB bank conflicts stall the Vector unit {pct(row['conflict_ratio'])} of its cycles"

    return grouped_findings(
        prof,
        ctx,
        code=CODE,
        slug=SLUG,
        flagged=flagged,
        saving=saving,
        metrics=(
            "conflict_ratio",
            "aiv_vec_bank_cflt_ratio",
            "aiv_vec_bankgroup_cflt_ratio",
            "aiv_vec_resc_cflt_ratio",
        ),
        message=message,
        topic="vector",
        extra=lambda k, r: {"saving_model": "conflict ratio x Vector time"},
        recommendation="Offset UB buffers used by one instruction (pad rows by one 32-B block, put "
        "src and dst in "
        "different bank groups) and avoid strided UB access that lands in one bank.",
    )
