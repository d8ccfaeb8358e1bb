"""Derived metrics and the profile summary, checked against hand arithmetic and real rows."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from analyzer.chips import get_chip
from analyzer.io.load import load_profile
from analyzer.metrics import add_derived_metrics, bound_pipe, profile_summary


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
    # A [4096,12288], B [4608,12288] (transposed), C [4096,4608]: K = 12288
    assert mm["flops"] == 2 * 4096 * 4608 * 12288
    assert mm["bytes_moved"] == (4096 * 12288 + 4608 * 12288 + 4096 * 4608) * 2  # FLOAT16
    assert mm["arithmetic_intensity"] == pytest.approx(mm["flops"] / mm["bytes_moved"])
    # recomputed with the inferred 24 cores at 1850 MHz: 64689637 / (1850 x 24 x 1478.18) x 100
    assert mm["cube_utilization_pct"] == pytest.approx(64689637 / (1850 * 24 * 1478.18) * 100)
    assert mm["cube_busy_us"] == pytest.approx(1456.97 * 0.893)  # aic_time x (fp16 + int8 ratio)
    bmm = k[k["name"] == "BatchMatMul96"].iloc[0]
    assert bmm["flops"] == 2 * 12 * 1024 * 1024 * 512
    assert pd.isna(k[k["core_type"] == "HCCL"]["flops"]).all()


def test_bound_pipe_threshold() -> None:
    df = pd.DataFrame(
        {
            "aic_cube_ratio": [0.9, 0.5, np.nan],
            "aiv_mte2_ratio": [0.2, 0.7, np.nan],
            "aic_mte2_ratio": [0.1, 0.85, np.nan],
        }
    )
    assert bound_pipe(df).tolist()[:2] == ["cube", "mte2"]
    assert pd.isna(bound_pipe(df).iloc[2])
    quiet = pd.DataFrame({"aic_cube_ratio": [0.5], "aiv_vec_ratio": [0.79]})
    assert bound_pipe(quiet).tolist() == ["none"]


def test_derived_on_empty_table() -> None:
    out = add_derived_metrics(pd.DataFrame({"name": pd.Series([], dtype="str")}), get_chip("910B2"))
    assert len(out) == 0 and "bound_pipe" in out and "flops" in out


def test_profile_summary_real(real_traces: Path) -> None:
    pr = load_profile(real_traces / "gpt_step_arith_591" / "kernel_details.csv")
    s = profile_summary(pr)
    json.dumps(s)  # JSON-serialisable
    assert s["kernel_count"] == 591
    assert s["top_kernels"][0]["name"] == "hcom_broadcast__445_0"
    assert s["top_kernels"][0]["total_us"] == 308926.68
    assert s["time_by_core_type_us"]["HCCL"] == pytest.approx(346398.74)
    assert s["device_busy_us"] <= s["total_kernel_us"]
    fa = profile_summary(load_profile(real_traces / "fa_pipeutil_29" / "kernel_details.csv"))
    assert fa["kernel_count"] == 29 and 0 < fa["shares"]["cube"] < 1
