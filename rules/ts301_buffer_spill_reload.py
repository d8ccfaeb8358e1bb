"""TS301 buffer-spill-reload: far more global-memory traffic than the tensors require."""

from __future__ import annotations

from typing import Any

import pandas as pd

from tilescope.engine import RuleContext
from tilescope.findings import Finding
from tilescope.profile import Profile
from tilescope.rules._columns import HELPER_COLUMNS, num, text
from tilescope.rules._findings import grouped_findings
from tilescope.rules._refine import refine_library
from tilescope.rules._shapes import shape_bytes
from tilescope.text.words import fmt_bytes

CODE = "TS301"
SLUG = "buffer-spill-reload"
KIND = "runtime"
NEEDS = (
    "duration_us",
    "input_shapes",
    "aic_main_mem_read_gbps|aiv_main_mem_read_gbps|aic_read_main_memory_datas_kb|read_main_memory_datas_kb",
)
THRESHOLDS: dict[str, Any] = {
    "traffic_ratio": 3.0,  # measured GM bytes / bytes the input+output tensors need
    "min_duration_us": 10.0,
    "min_saving_us": 1.0,
    "max_findings": 20,
}

# Global-memory traffic: data counters in KB, else bandwidths (x duration)
GM_KB_COLUMNS = (
    "aic_read_main_memory_datas_kb",
    "aiv_read_main_memory_datas_kb",
    "aic_write_main_memory_datas_kb",
    "aiv_write_main_memory_datas_kb",
    "read_main_memory_datas_kb",
    "write_main_memory_datas_kb",
)
GM_GBPS_COLUMNS = (
    "aic_main_mem_read_gbps",
    "aic_main_mem_write_gbps",
    "aiv_main_mem_read_gbps",
    "aiv_main_mem_write_gbps",
)
# Kernel columns check() reads besides NEEDS (`analyze` loads only what the rules and the report read)
READS = (*HELPER_COLUMNS, "input_dtypes", "output_shapes", "output_dtypes", *GM_KB_COLUMNS, *GM_GBPS_COLUMNS)


def measured_bytes(df: pd.DataFrame) -> pd.Series:
    """GM bytes read + written: from data counters (KB) when present, else bandwidth x time."""
    kb = (
        sum(
            (num(df, c).fillna(0) for c in GM_KB_COLUMNS),
            pd.Series(0.0, index=df.index),
        )
        * 1024
    )
    dur = num(df, "duration_us")
    gbps = sum(
        (num(df, c).fillna(0) for c in GM_GBPS_COLUMNS),
        pd.Series(0.0, index=df.index),
    )
    return kb.where(kb > 0, gbps * 1e9 * dur * 1e-6)


# A CANN built-in kernel's tiling and grid are not its user's to change: say what they can do, and
# name the fusion finding that already covers it (tilescope.engine runs `refine` after every rule).
refine = refine_library


def check(profile: Profile, ctx: RuleContext) -> list[Finding]:
    """
    ## What it does
    Compares the global-memory bytes a launch actually moved (Memory / MemoryAccess metrics:
    main-memory read/write data, or bandwidth x time) with the bytes its input and output
    tensors occupy (from the shapes and dtypes), and flags launches that moved more than
    `traffic_ratio` times that.

    ## Why is this bad?
    Reading the same data several times means the tiles do not fit on chip and are re-loaded,
    or intermediate results are spilled to GM and read back. Each extra pass costs HBM time.

    ## Example
    A matmul with 48 MiB of operands that reads 410 MiB: with block_K too large for L1 the
    kernel re-loads the A panel for every N block.

    ## What to do instead
    Pick tile sizes whose working set (with double buffering) fits L1/UB so each operand panel
    is loaded once per reuse; keep accumulators in L0C across the K loop; avoid writing partial
    results to GM between stages.

    ## Thresholds
    `traffic_ratio` (3.0), `min_duration_us` (10), `min_saving_us` (1), `max_findings` (20).

    ## Known limits
    GEMMs legitimately re-read operands (ceil(N / block_N) passes over A), so a ratio near the
    number of blocks along the other dimension is expected; the ratio is shown for judgement.
    The saving assumes the excess bytes move at the kernel's achieved bandwidth.
    """
    df = profile.kernels
    need = shape_bytes(text(df, "input_shapes"), text(df, "input_dtypes")) + shape_bytes(
        text(df, "output_shapes"), text(df, "output_dtypes")
    )
    moved = measured_bytes(df)
    ratio = moved / need.where(need > 0)
    dur = num(df, "duration_us")
    flagged = (
        (
            (ratio >= float(ctx.thresholds["traffic_ratio"]))
            & (dur >= float(ctx.thresholds["min_duration_us"]))
        )
        .fillna(False)
        .to_numpy()
    )
    saving = (dur * (1 - need / moved)).clip(lower=0).fillna(0)
    prof = profile.with_kernels(df.assign(required_bytes=need, measured_bytes=moved, traffic_ratio=ratio))
    return grouped_findings(
        prof,
        ctx,
        code=CODE,
        slug=SLUG,
        flagged=flagged,
        saving=saving,
        metrics=("measured_bytes", "required_bytes", "traffic_ratio"),
        message=lambda k, r: (
            f"{k}: moved {fmt_bytes(r['measured_bytes'])} to/from global memory for "
            f"{fmt_bytes(r['required_bytes'])} of tensors ({r['traffic_ratio']:.1f}x) — tiles "
            f"are re-loaded or spilled"
        ),
        topic="memory",
        chip_fields=("l1_bytes", "ub_bytes"),
        extra=lambda k, r: {"saving_model": "duration x (1 - required / measured bytes)"},
        recommendation="Choose tile sizes whose double-buffered working set fits L1/UB so each "
        "operand is loaded "
        "once per reuse, keep accumulators in L0C across the K loop, and do not write partial "
        "results to global memory between stages.",
    )
