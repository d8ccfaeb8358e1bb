"""TS202 memory-bound-kernel: MTE2/MTE3 dominate, bandwidth near the limit or intensity below ridge."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from tilescope.engine import RuleContext
from tilescope.findings import Finding
from tilescope.profile import Profile
from tilescope.rules._columns import HELPER_COLUMNS, LEAN_COLUMNS, num
from tilescope.rules._findings import grouped_findings
from tilescope.rules._numbers import pct, r3
from tilescope.rules._refine import refine_stages_or_library

CODE = "TS202"
SLUG = "memory-bound-kernel"
KIND = "runtime"
NEEDS = ("duration_us", "aic_mte2_share|aiv_mte2_share|aic_main_mem_read_gbps|aiv_main_mem_read_gbps")
THRESHOLDS: dict[str, Any] = {
    "min_duration_us": 10.0,
    "cube_mte2_share": 0.95,  # msprof-analyze's cube operator mte2-bound threshold, on the launch
    "vector_mte_share": 0.7,  # msprof-analyze's vector operator mte2/mte3 threshold, on the launch
    "bw_near_limit": 0.8,  # achieved GM bandwidth (bytes / duration) / the chip's GM bandwidth
    "min_saving_us": 1.0,
    "max_findings": 20,
}

# Kernel columns check() reads besides NEEDS (`analyze` loads only what the rules and the report read)
READS = (
    *HELPER_COLUMNS,
    *LEAN_COLUMNS,
    "aic_cube_share",
    "aic_fixpipe_share",
    "aic_mte2_share",
    "aiv_mte2_share",
    "aiv_mte3_share",
    "aiv_vec_share",
    "flops",
    "bytes_moved",
    "achieved_gbps",
    "arithmetic_intensity",
)


def _side_bound(
    df: pd.DataFrame, side: str, mte_cols: tuple[str, ...], compute_cols: tuple[str, ...], limit: float
) -> tuple[pd.Series, pd.Series, pd.Series]:
    mte = pd.concat([num(df, c) for c in mte_cols], axis=1).max(axis=1, skipna=True)
    comp = pd.concat([num(df, c) for c in compute_cols], axis=1).max(axis=1, skipna=True)
    ratio = mte / comp.where(comp > 0)
    bound = (mte >= limit) & ((comp.isna()) | (mte > comp))
    return bound.fillna(False), mte, ratio


# Run by tilescope.engine after every rule: TS504's refusal of the stages first, library kernels' advice.
refine = refine_stages_or_library(
    "MTE2 overlaps compute; cut the remaining traffic with larger tiles along the reused dimension."
)


# the columns _terms and check() read per flagged launch
_TERM_COLUMNS = (
    *("duration_us", "aic_mte2_share", "aic_cube_share", "aic_fixpipe_share", "aiv_mte2_share"),
    *("aiv_mte3_share", "aiv_vec_share", "bytes_moved", "flops"),
)


def _terms(
    df: pd.DataFrame, lim_c: float, lim_v: float, measured: bool, peak: float, near: float
) -> tuple[pd.Series, ...]:
    """Per launch: duration, the Cube and Vector sides' (bound, MTE share, MTE/compute ratio),
    bytes moved, achieved GB/s, its fraction of the chip's and whether that is near the limit."""
    dur = num(df, "duration_us")
    c_bound, c_mte, c_ratio = _side_bound(
        df, "aic", ("aic_mte2_share",), ("aic_cube_share", "aic_fixpipe_share"), lim_c
    )
    v_bound, v_mte, v_ratio = _side_bound(
        df, "aiv", ("aiv_mte2_share", "aiv_mte3_share"), ("aiv_vec_share",), lim_v
    )
    bytes_moved = num(df, "bytes_moved") if measured else pd.Series(np.nan, index=df.index)
    achieved = bytes_moved / dur.where(dur > 0) / 1e3  # bytes / µs -> GB/s
    bw_frac = achieved / peak
    bw_bound = (bw_frac >= near).fillna(False)
    return dur, c_bound, c_mte, c_ratio, v_bound, v_mte, v_ratio, bytes_moved, achieved, bw_frac, bw_bound


def check(profile: Profile, ctx: RuleContext) -> list[Finding]:
    """
    ## What it does
    Flags every launch whose data movement dominates: on the Cube side MTE2 busy at least
    `cube_mte2_share` of the launch and longer than the Cube and FixPipe pipes, on the Vector side
    the busier of MTE2 / MTE3 at least `vector_mte_share` of the launch and longer than the Vector
    pipe (pipe shares of the launch, the same on every profiler); or, with Memory metrics, a
    launch bandwidth (measured GM bytes / duration) at or above `bw_near_limit` of the chip's GM
    bandwidth. When FLOPs and bytes are both known it places the kernel on the roofline
    (arithmetic intensity vs the chip's ridge point).

    ## Why is this bad?
    The kernel waits for data: the compute units idle while MTE2 (GM→L1/UB) or MTE3 (UB→GM)
    work. More compute will not help; less traffic or better reuse will.

    ## Example
    `aclnnMatmul_MatMulCommon_MatMulV2`: MTE2 96 % vs Cube 82 % of 185.5 µs.

    ## What to do instead
    Raise data reuse: larger tiles along the reused dimension (block_M/block_N for GEMM), keep
    operands in L1 across iterations, double-buffer (`T.Pipelined(num_stages=2..3)`) so MTE2
    overlaps compute; fuse neighbouring element-wise kernels (TS101/TS102) so intermediates stay
    on chip; use lower-precision storage when accuracy allows.
    When the kernel already asks for `num_stages` and TS504 says the stages were not applied, the
    recommendation says that, with TS504's reason, instead of asking for stages again.
    A CANN built-in kernel (not in the bundle's IR; an `aclnn*` name or op type plus task number)
    cannot be re-tiled by its user: the finding says so, and names the TS102/TS101 fusion that
    already covers the kernel when there is one.

    ## Thresholds
    `cube_mte2_share` (0.95) and `vector_mte_share` (0.7) are msprof-analyze's ratio thresholds,
    applied to shares of the launch; `bw_near_limit` (0.8) of `hbm_bandwidth_gbps`;
    `min_duration_us` (10); `min_saving_us` (1); `max_findings` (20).

    ## Known limits
    The GM bandwidth is the vendor's figure for the 910B variant and the default memory type
    (`--chip NAME:cj` for the "CJ" type; the profile does not record which):
    `chip_figures.hbm_bandwidth_source` names the figure used. The saving (time by which data movement exceeds
    compute, or the bandwidth headroom) is an estimate: traffic rarely drops to the compute time.
    """
    df = profile.kernels
    lim_c, lim_v = float(ctx.thresholds["cube_mte2_share"]), float(ctx.thresholds["vector_mte_share"])
    measured = "aic_main_mem_read_gbps" in df.columns or "aiv_main_mem_read_gbps" in df.columns
    peak = profile.chip.hbm_bandwidth_gbps or np.nan
    near = float(ctx.thresholds["bw_near_limit"])
    # Every term is per launch: the flagged launches are found over the whole table first, then
    # the terms the findings report are computed again over those launches only (a few columns of
    # them copied), not as ~20 float64 columns of the whole table (3 M launches: ~0.7 GB at once).
    dur, c_bound, _, _, v_bound, _, _, _, _, _, bw_bound = _terms(df, lim_c, lim_v, measured, peak, near)
    flagged = ((c_bound | v_bound | bw_bound) & (dur >= float(ctx.thresholds["min_duration_us"]))).to_numpy()
    del dur, c_bound, v_bound, bw_bound
    keep = {"name", *_TERM_COLUMNS}
    df = df.iloc[np.flatnonzero(flagged), [i for i, c in enumerate(df.columns) if c in keep]]
    flagged = np.ones(len(df), dtype=bool)
    dur, c_bound, c_mte, _, v_bound, v_mte, _, bytes_moved, achieved, bw_frac, bw_bound = _terms(
        df, lim_c, lim_v, measured, peak, near
    )
    c_comp = num(df, "aic_cube_share").fillna(0)
    v_comp = num(df, "aiv_vec_share").fillna(0)
    ratio_saving = np.maximum(
        np.where(c_bound, (c_mte - c_comp) * dur, 0), np.where(v_bound, (v_mte - v_comp) * dur, 0)
    )
    flops = num(df, "flops")
    intensity = (flops / bytes_moved.where(bytes_moved > 0)).where(flops > 0)
    ridge = profile.chip.ridge_point()
    bw_saving = (dur - bytes_moved / (peak * 1e3)).clip(lower=0) if peak == peak else dur * 0
    saving = pd.Series(np.fmax(ratio_saving, np.where(bw_bound, bw_saving, 0)), index=df.index).fillna(0)
    # grouped_findings reads the name, the duration and the metrics: only those, not lean()'s columns
    work = pd.DataFrame(
        {
            **{c: df[c] for c in ("name", "duration_us") if c in df.columns},
            "mte_share_cube": c_mte,
            "mte_share_vector": v_mte,
            "aic_cube_share": c_comp.where(num(df, "aic_cube_share").notna()),
            "aiv_vec_share": v_comp.where(num(df, "aiv_vec_share").notna()),
            "achieved_gbps": achieved.where(achieved > 0),
            "bandwidth_of_peak": bw_frac.where(achieved > 0),
            "arithmetic_intensity": intensity,
        },
        index=df.index,
        copy=False,
    )
    del c_mte, v_mte, c_comp, v_comp, achieved, bw_frac, intensity, ratio_saving, bw_saving
    prof = profile.with_kernels(work)

    def message(kernel: str, row: pd.Series) -> str:
        parts = []
        if row["mte_share_cube"] == row["mte_share_cube"] and row["mte_share_cube"] >= lim_c:
            parts.append(
                f"Cube-side MTE2 busy {pct(row['mte_share_cube'])} of the launch vs Cube "
                f"{pct(row['aic_cube_share'] or 0)}"
            )
        if row["mte_share_vector"] == row["mte_share_vector"] and row["mte_share_vector"] >= lim_v:
            parts.append(
                f"Vector-side MTE busy {pct(row['mte_share_vector'])} of the launch vs Vector "
                f"{pct(row['aiv_vec_share'] or 0)}"
            )
        if row["bandwidth_of_peak"] == row["bandwidth_of_peak"]:
            parts.append(
                f"{r3(row['achieved_gbps'])} GB/s = {pct(row['bandwidth_of_peak'])} of the chip's GM "
                "bandwidth"
            )
        return f"{kernel} is memory-bound: " + "; ".join(parts or ["data movement dominates"])

    def extra(kernel: str, row: pd.Series) -> dict[str, Any]:
        ai = row["arithmetic_intensity"]
        roof: dict[str, Any] = {"arithmetic_intensity_flop_per_byte": r3(ai), "ridge_point": r3(ridge)}
        if ai == ai and ridge:
            roof["position"] = "below ridge (memory side)" if ai < ridge else "above ridge (compute side)"
        return {
            "roofline": roof,
            "saving_model": "max((MTE share - compute share) x duration, duration - bytes / GM bandwidth)",
        }

    return grouped_findings(
        prof,
        ctx,
        code=CODE,
        slug=SLUG,
        flagged=flagged,
        saving=saving,
        metrics=(
            "mte_share_cube",
            "aic_cube_share",
            "mte_share_vector",
            "aiv_vec_share",
            "achieved_gbps",
            "bandwidth_of_peak",
            "arithmetic_intensity",
        ),
        message=message,
        topic="memory",
        extra=extra,
        chip_fields=("hbm_bandwidth_gbps", "ridge_point"),
        recommendation="Cut global-memory traffic: bigger tiles along the reused dimension, keep "
        "operands in L1 "
        "across iterations, double-buffer (T.Pipelined num_stages 2-3) so MTE2 overlaps compute, "
        "fuse neighbouring element-wise kernels so intermediates stay on chip.",
    )
