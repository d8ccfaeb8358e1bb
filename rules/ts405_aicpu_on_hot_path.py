"""TS405 aicpu-on-hot-path: operators running on the AI CPU instead of the AI Cores."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from tilescope.columns import AICORE_TYPES
from tilescope.engine import RuleContext
from tilescope.findings import Finding
from tilescope.intervals import interval_union
from tilescope.profile import Profile
from tilescope.rules._columns import HELPER_COLUMNS, LEAN_COLUMNS, core_type_codes, lean, num, op_type_codes
from tilescope.rules._findings import grouped_findings
from tilescope.rules._intervals import end_ns, overlap_with_union, start_ns
from tilescope.rules._numbers import pct
from tilescope.text.words import count_text

CODE = "TS405"
SLUG = "aicpu-on-hot-path"
KIND = "runtime"
NEEDS = ("duration_us", "core_type")
# the fix removes kernels (or moves work off the AI CPU): bounded by their time, not their speed of light
SAVING_KIND = "work"
THRESHOLDS: dict[str, Any] = {
    "min_total_us": 20.0,  # per kernel name, over all launches (msprof-analyze: 20 µs per task)
    "min_saving_us": 0.0,
    "max_findings": 20,
}
# What usually replaces an AI CPU operator (op type -> advice).
REPLACEMENTS = {
    "Cast": "cast to a dtype the AI Core Cast supports (int64/uint64/double casts fall back to AI CPU)",
    "NonZero": "avoid data-dependent shapes (torch.nonzero / boolean indexing); use masks with fixed shapes",
    "Unique": "avoid torch.unique in the step, or move it out of the hot loop",
    "Index": "use index_select/gather with int32 indices",
    "DropOutGenMask": "use the DSA/AI Core dropout mask path (npu_dropout_gen_mask) or fused attention",
    "Range": "precompute index ranges once on the device",
}

# Kernel columns check() reads besides NEEDS (`analyze` loads only what the rules and the report read)
READS = (*HELPER_COLUMNS, *LEAN_COLUMNS)


def check(profile: Profile, ctx: RuleContext) -> list[Finding]:
    """
    ## What it does
    Lists AI_CPU tasks per kernel name with their total time, and how much of that time the AI
    Cores were busy anyway (overlap with the union of AI Core kernels) — the rest is on the
    critical path.

    ## Why is this bad?
    The AI CPU is a few ARM cores: operators there are slow, and they often force host/device
    synchronisation or dtype conversions (`trans_Cast_*`). A kernel waiting for one stalls the
    stream.

    ## Example
    `gpt_step_arith_591`: seven `trans_Cast_*` tasks (Cast) on stream 17.

    ## What to do instead
    The recommendation names the operator's replacement: usually a dtype the AI Core supports
    (int32 instead of int64), no data-dependent shapes, or the fused operator that does the work on
    the AI Core.

    ## Thresholds
    `min_total_us` (20 per kernel name, msprof-analyze's per-task threshold applied to the
    total), `min_saving_us` (0), `max_findings` (20).

    ## Known limits
    The saving is the AI CPU time not overlapped by AI Core work (the part on the critical path
    if the streams depend on it); an AI Core replacement still costs something.
    """
    df = profile.kernels
    # core and op types as codes into their distinct strings (no string column per row), and the
    # overlap computed for the AI CPU launches only: grouped_findings reads the flagged ones
    core, core_labels = core_type_codes(df)
    aicpu = np.asarray([c == "AI_CPU" for c in core_labels], dtype=bool)[core]
    if not aicpu.any():
        return []
    s, e = start_ns(df).to_numpy(), end_ns(df).to_numpy()
    on_core = np.asarray([c in AICORE_TYPES for c in core_labels], dtype=bool)[core]
    del core
    us, ue = interval_union(s[on_core], e[on_core])
    del on_core
    overlap_us = np.zeros(len(df), dtype="float64")
    overlap_us[aicpu] = overlap_with_union(s[aicpu], e[aicpu], us, ue) / 1000.0
    del s, e, us, ue
    dur = num(df, "duration_us")
    exposed = (dur - pd.Series(overlap_us, index=df.index)).clip(lower=0)
    names = df["name"][aicpu].astype(str)
    totals = dur[aicpu].groupby(names).transform("sum")
    flagged = np.zeros(len(df), dtype=bool)
    flagged[np.flatnonzero(aicpu)] = (totals >= float(ctx.thresholds["min_total_us"])).to_numpy()
    op, op_labels = op_type_codes(df)
    prof = profile.with_kernels(lean(df, overlapped_us=overlap_us, exposed_us=exposed))
    op_of = dict(zip(names, op_labels[op[aicpu]], strict=False))
    del op

    def message(kernel: str, row: pd.Series) -> str:
        return (
            f"{kernel} ({op_of.get(kernel, '?')}) runs on the AI CPU: "
            f"{count_text(row['launches'], 'launch', 'launches')}, "
            f"{row['total_us']:.1f} µs, {pct(row['saving_us'] / row['total_us'] if row['total_us'] else 0)} "
            f"not overlapped by AI Core work"
        )

    def recommendation(kernel: str, _row: pd.Series) -> str:
        # the operator's own replacement, said: "(see evidence.replacement)" sent the reader to a key
        op = op_of.get(kernel, "")
        if op in REPLACEMENTS:
            return f"Move {op} to the AI Core: {REPLACEMENTS[op]}."
        return ("Move the operator to the AI Core: use a dtype the AI Core kernel supports, avoid "
                "data-dependent shapes, or use a fused operator that runs on the AI Core.")

    def extra(kernel: str, row: pd.Series) -> dict[str, Any]:
        op = op_of.get(kernel, "")
        return {
            "op_type": op,
            "replacement": REPLACEMENTS.get(op, "an AI Core implementation of the operator"),
            "saving_model": "AI CPU time not overlapped by AI Core kernels",
        }

    return grouped_findings(
        prof,
        ctx,
        code=CODE,
        slug=SLUG,
        flagged=flagged,
        saving=exposed.fillna(0),
        metrics=("overlapped_us", "exposed_us"),
        message=message,
        topic="scalar",
        extra=extra,
        recommendation=recommendation,
    )
