"""Derived metrics and the profile summary, checked against hand arithmetic and real rows."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tilescope.chips import get_chip
from tilescope.io.load import load_profile
from tilescope.metrics import add_derived_metrics, bound_pipe


def test_fa_pipeutil_recomputed_cube_utilization(real_traces: Path) -> None:
    pr = load_profile(real_traces / "fa_pipeutil_29" / "kernel_details.csv", chip="910B3")
    k = pr.kernels
    mm = k[(k["op_type"] == "MatMulV2") & (k["duration_us"] == 185.504)].iloc[0]
    # 5295467 / (1800 x 20 x 185.504) x 100 = 79.30
    assert round(mm["cube_utilization_calc_pct"], 2) == 79.30
    assert mm["cube_utilization_pct"] == 79.295  # the file's value is kept
    assert mm["cube_busy_us"] == 151.425  # aic_mac_time(us)
    assert mm["cube_share"] == pytest.approx(151.425 / 185.504)
    assert mm["bound_pipe"] == "mte2"  # aic_mte2_ratio 0.964 is the largest
    fa = k[k["name"] == "aclnnFlashAttentionScore_FlashAttentionScore_FlashAttentionScore"].iloc[0]
    assert round(fa["cube_utilization_calc_pct"], 3) == 89.263
    # SBH layout told apart by the [4096, 4096] mask: B=2, S=4096, H=512 -> 4·B·S·S·H
    assert fa["flops"] == 4 * 2 * 4096 * 4096 * 512
    assert fa["achieved_tflops"] == pytest.approx(4 * 2 * 4096 * 4096 * 512 / 410.188e-6 / 1e12)
    v3 = k[(k["op_type"] == "MatMulV3") & (k["duration_us"] == 501.17)].iloc[0]
    assert round(v3["cube_utilization_calc_pct"], 3) == 95.517


def test_gpt_matmul_flops_and_vector_busy(real_traces: Path) -> None:
    pr = load_profile(real_traces / "gpt_step_arith_591" / "kernel_details.csv")
    k = pr.kernels
    mm = k[k["name"] == "MatMul91"].iloc[0]
    # the measured aic_cube_fops wins over the shapes: A [4096,12288], B [4608,12288] (transposed),
    # C [4096,4608] give 2 x 4096 x 4608 x 12288 = 4.639e11; the Cube did 4.733e11 (= aic_mac_fp16_ratio
    # 0.893 x 64689637 cycles x 8192, formats doc §10.4)
    assert mm["cube_flops"] == mm["flops"] == 473250242560
    # speed of light: 4.733e11 FLOP at 24 x 1850 MHz x 8192 = 363.7 TFLOP/s is 1301.2 µs of 1478.18
    assert mm["sol_us"] == pytest.approx(473250242560 / (24 * 1850e6 * 8192) * 1e6)
    assert mm["sol_bound"] == "cube" and mm["sol_pct"] == pytest.approx(mm["sol_us"] / 1478.18 * 100)
    assert mm["bytes_moved"] == (4096 * 12288 + 4608 * 12288 + 4096 * 4608) * 2  # FLOAT16
    assert mm["arithmetic_intensity"] == pytest.approx(mm["flops"] / mm["bytes_moved"])
    assert mm["achieved_gbps"] == pytest.approx(mm["bytes_moved"] / 1478.18e-6 / 1e9)
    # recomputed with the inferred 24 cores at 1850 MHz: 64689637 / (1850 x 24 x 1478.18) x 100
    assert mm["cube_utilization_pct"] == pytest.approx(64689637 / (1850 * 24 * 1478.18) * 100)
    assert mm["cube_busy_us"] == pytest.approx(1456.97 * 0.893)  # aic_time x (fp16 + int8 ratio)
    bmm = k[k["name"] == "BatchMatMul96"].iloc[0]
    assert bmm["flops"] == 13979443200  # measured; the shapes give 2 x 12 x 1024 x 1024 x 512
    assert pd.isna(k[k["core_type"] == "HCCL"]["flops"]).all()


def test_bound_pipe_threshold() -> None:
    df = pd.DataFrame(
        {
            "duration_us": [100.0, 100.0, 100.0],
            "aic_time_us": [100.0, 100.0, np.nan],
            "aiv_time_us": [100.0, 100.0, np.nan],
            "aic_cube_ratio": [0.9, 0.5, np.nan],
            "aiv_mte2_ratio": [0.2, 0.7, np.nan],
            "aic_mte2_ratio": [0.1, 0.85, np.nan],
        }
    )
    assert bound_pipe(df).tolist()[:2] == ["cube", "mte2"]
    assert pd.isna(bound_pipe(df).iloc[2])
    quiet = pd.DataFrame(
        {"duration_us": [10.0], "aic_time_us": [10.0], "aiv_time_us": [10.0], "aic_cube_ratio": [0.5],
         "aiv_vec_ratio": [0.79]}
    )
    assert bound_pipe(quiet).tolist() == ["none"]


def test_shares_are_relative_to_the_launch_not_the_side() -> None:
    """tilelang_sigmoid_app row 4: the Cube side of the MIX kernel works 1.896 µs of 224.8 µs with
    a Scalar ratio of 0.875 (of those 1.896 µs); the Vector side's MTE2 is busy 0.809 of 221.517 µs."""
    df = pd.DataFrame(
        {
            "duration_us": [224.8], "aic_time_us": [1.896], "aic_scalar_ratio": [0.875],
            "aic_scalar_time_us": [1.658], "aiv_time_us": [221.517], "aiv_mte2_ratio": [0.809],
            "aiv_vec_ratio": [0.532],
        }
    )
    out = add_derived_metrics(df, get_chip("910B4")).iloc[0]
    assert out["aic_scalar_share"] == pytest.approx(1.658 / 224.8)  # 0.7 %, not 87.5 %
    assert out["aic_busy_share"] == pytest.approx(1.896 / 224.8)
    assert out["aiv_mte2_share"] == pytest.approx(0.809 * 221.517 / 224.8)
    assert out["vector_share"] == pytest.approx(0.532 * 221.517 / 224.8)
    assert out["bound_pipe"] == "none"  # MTE2 0.797 of the launch: just under 0.8


def test_derived_on_empty_table() -> None:
    out = add_derived_metrics(pd.DataFrame({"name": pd.Series([], dtype="str")}), get_chip("910B2"))
    assert len(out) == 0 and "bound_pipe" in out and "flops" in out
