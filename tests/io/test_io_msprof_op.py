"""`msprof op` directories, single and multi-operator layouts, from the exact headers of formats §4."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from tilescope.io.load import load_profile
from tilescope.io.msprof_op import read_msprof_op

BASIC = "Op Name,Op Type,Task Duration(us),Block Dim,Mix Block Dim,Device Id,Pid,Current Freq,Rated Freq,\n"
PIPE = (
    "block_id,sub_block_id,aic_time(us),aic_total_cycles,aic_cube_time(us),aic_cube_ratio,aic_scalar_time(us),"
    "aic_scalar_ratio,aic_mte1_time(us),aic_mte1_ratio,aic_mte2_time(us),aic_mte2_ratio,aic_mte3_time(us),"
    "aic_mte3_ratio,aic_mte3_active_bw(GB/s),aic_fixpipe_time(us),aic_fixpipe_ratio,aic_fixpipe_active_bw(GB/s),"
    "aic_icache_miss_rate,aiv_time(us),aiv_total_cycles,aiv_vec_time(us),aiv_vec_ratio,aiv_scalar_time(us),"
    "aiv_scalar_ratio,aiv_mte2_time(us),aiv_mte2_ratio,aiv_mte2_active_bw(GB/s),aiv_mte3_time(us),aiv_mte3_ratio,"
    "aiv_mte3_active_bw(GB/s),aiv_icache_miss_rate,aic_mte1_active_bw(GB/s),aic_mte2_active_bw(GB/s),\n"
)
MEM_UB = (
    "block_id,sub_block_id,aic_time(us),aic_total_cycles,aiv_time(us),aiv_total_cycles,"
    "aiv_ub_read_bw_vector(GB/s),aiv_ub_write_bw_vector(GB/s),aiv_ub_read_bw_scalar(GB/s),"
    "aiv_ub_write_bw_scalar(GB/s),\n"
)
N_AIC = 17  # aic_* columns before the aiv_* block in PipeUtilization
N_AIV = 13


def _pipe_rows(cube: list[tuple[float, float, float]], vec: list[tuple[float, float, float]]) -> str:
    """cube: (time_us, cycles, cube_ratio) per block; vec: (time_us, cycles, vec_ratio) per vector0 row."""
    lines = []
    for b, ((ct, cc, cr), (vt, vc, vr)) in enumerate(zip(cube, vec, strict=True)):
        aic = [ct, cc, ct * cr, cr] + [1.0] * (N_AIC - 4)
        aiv = [vt, vc, vt * vr, vr] + [1.0] * (N_AIV - 4)
        na_aic, na_aiv = ["NA"] * N_AIC, ["NA"] * N_AIV
        lines.append(",".join(map(str, [b, "cube0", *aic, *na_aiv, 5.0, 6.0])) + ",")
        for sub in ("vector0", "vector1"):
            lines.append(",".join(map(str, [b, sub, *na_aic, *aiv, "NA", "NA"])) + ",")
    return "\n".join(lines) + "\n"


def _ub_rows(n_blocks: int) -> str:
    lines = []
    for b in range(n_blocks):
        lines.append(f"{b},cube0,10.0,18000,NA,NA,NA,NA,NA,NA,")
        lines.append(f"{b},vector0,NA,NA,20.0,36000,100.5,50.25,1.0,2.0,")
        lines.append(f"{b},vector1,NA,NA,20.0,36000,100.5,50.25,1.0,2.0,")
    return "\n".join(lines) + "\n"


CUBE = [(10.0, 18000.0, 0.5), (30.0, 54000.0, 0.9)]
VEC = [(20.0, 36000.0, 0.25), (20.0, 36000.0, 0.75)]


def write_single(d: Path, name: str = "main_kernel_mix_aic", suffix: str = "") -> Path:
    d.mkdir(parents=True, exist_ok=True)
    (d / f"OpBasicInfo{suffix}.csv").write_text(BASIC + f"{name},mix,45.5,2,4,0,NA,1800,1800,\n")
    (d / f"PipeUtilization{suffix}.csv").write_text(PIPE + _pipe_rows(CUBE, VEC))
    (d / f"MemoryUB{suffix}.csv").write_text(MEM_UB + _ub_rows(2))
    return d


def test_single_operator_blocks_launches_kernels(tmp_path: Path) -> None:
    root = write_single(tmp_path / "OPPROF_20260605170804_UKAXQCBEDBJAUNQY")
    (root / "dump").mkdir()
    data = read_msprof_op(root)
    assert data.layout == "single"
    assert data.metric_groups == ["PipeUtilization", "MemoryUB"]
    b = data.blocks
    assert len(b) == 6  # 2 blocks x (cube0, vector0, vector1)
    assert list(b[["block_id", "sub_block_id"]].itertuples(index=False, name=None))[:3] == [
        (0, "cube0"),
        (0, "vector0"),
        (0, "vector1"),
    ]
    assert "" not in b.columns and not any(c.startswith("c4") for c in b.columns)  # trailing comma dropped
    assert b.columns.tolist().count("aic_time_us") == 1  # shared columns taken once
    cube0 = b[(b["block_id"] == 1) & (b["sub_block_id"] == "cube0")].iloc[0]
    assert cube0["aic_cube_ratio"] == 0.9 and pd.isna(cube0["aiv_vec_ratio"])  # NA -> null
    v0 = b[(b["block_id"] == 0) & (b["sub_block_id"] == "vector0")].iloc[0]
    assert v0["aiv_ub_read_vector_gbps"] == 100.5
    la = data.launches.iloc[0]
    assert la["name"] == "main_kernel_mix_aic" and la["op_type"] == "mix"
    assert la["duration_us"] == 45.5 and la["block_dim"] == 2 and la["mix_block_dim"] == 4
    assert la["current_freq_mhz"] == 1800 and la["rated_freq_mhz"] == 1800 and pd.isna(la["pid"])
    k = data.kernels.iloc[0]
    assert k["core_type"] == "MIX_AIC" and k["duration_us"] == 45.5
    assert k["aic_total_cycles"] == 72000  # summed
    assert k["aic_time_us"] == 20.0  # the mean block: per core while the grid fits on the cores
    assert k["cube_block_rows"] == 2 and k["vector_block_rows"] == 4
    assert k["aic_cube_ratio"] == pytest.approx((0.5 * 18000 + 0.9 * 54000) / 72000)  # cycle-weighted
    assert k["aiv_vec_ratio"] == pytest.approx(0.5)
    # bytes over the mean block time: 4 vector blocks moving 100.5 GB/s for 20 µs each are 402 GB/s
    # of the device for 20 µs, so bandwidth x per-core time gives back the 8040 (x 1e3) bytes
    assert k["aiv_ub_read_vector_gbps"] == pytest.approx(4 * 100.5)
    assert k["aiv_ub_read_vector_gbps"] * k["aiv_time_us"] == pytest.approx(4 * 100.5 * 20.0)
    # active rates are rates while the pipe moved data: the blocks' rates weighted by their active time
    assert k["aic_mte1_active_gbps"] == pytest.approx(5.0)


def test_per_core_times_for_grids_larger_than_the_cores(tmp_path: Path) -> None:
    """A grid of 2 cube blocks on 1 core runs in two waves: the core spends both block times."""
    from tilescope.io.msprof_op import per_core_times

    data = read_msprof_op(write_single(tmp_path / "OPPROF_20260605170804_UKAXQCBEDBJAUNQY"))
    k = per_core_times(data.kernels, aic_count=1, aiv_count=8)
    assert k["aic_time_us"].iloc[0] == pytest.approx(40.0)  # 10 + 30 µs on one core
    assert k["aiv_time_us"].iloc[0] == pytest.approx(20.0)  # 4 vector blocks on 8 cores: one wave
    moved = data.kernels["aiv_ub_read_vector_gbps"] * data.kernels["aiv_time_us"]
    assert (k["aiv_ub_read_vector_gbps"] * k["aiv_time_us"]).iloc[0] == pytest.approx(moved.iloc[0])
    assert per_core_times(data.kernels, aic_count=24, aiv_count=48) is data.kernels  # nothing to do


def test_multi_operator_layouts(tmp_path: Path) -> None:
    root = tmp_path / "OPPROF_20240603022812_ABCDEFGHIJKLMNOP"
    write_single(root / "add_kernel" / "0", "add_kernel", "_20240603022812284")
    write_single(root / "add_kernel" / "1", "add_kernel", "_20240603022812999")
    write_single(root / "mm_kernel" / "0", "mm_kernel", "_20240603022813000")
    data = read_msprof_op(root)
    assert data.layout == "multi"
    assert len(data.launches) == 3 and len(data.kernels) == 3 and len(data.blocks) == 18
    assert sorted(zip(data.kernels["op_name"], data.kernels["launch"], strict=True)) == [
        ("add_kernel", 0),
        ("add_kernel", 1),
        ("mm_kernel", 0),
    ]
    dev_root = tmp_path / "OPPROF_20240603022812_DEVICES"
    write_single(dev_root / "device3" / "allgather_mm" / "0", "allgather_mm", "_20240603022812284")
    d2 = read_msprof_op(dev_root)
    assert d2.blocks["device_id"].unique().tolist() == [3]
    assert d2.launches["device_id"].tolist() == [3]
    pr = load_profile(dev_root)
    assert pr.source.format == "msprof_op_multi" and pr.source.producer == "msprof_op"
    assert pr.device.aic_frequency_mhz == 1800


def test_load_single_derives_cube_utilization(tmp_path: Path) -> None:
    root = write_single(tmp_path / "OPPROF_1_X")
    pr = load_profile(root, chip="910B2")
    assert pr.source.format == "msprof_op"
    k = pr.kernels.iloc[0]
    # 72000 cycles / (1800 MHz x 24 cores x 45.5 µs) x 100
    assert k["cube_utilization_pct"] == pytest.approx(72000 / (1800 * 24 * 45.5) * 100)
    assert pr.has("blocks") and pr.has("launches")
