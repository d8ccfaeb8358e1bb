"""Kernel tables (kernel_details.csv / op_summary_*.csv): exact values from the real files."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pandas as pd
import pytest

from tilescope.columns import canonical_header, canonical_name, generic_canonical
from tilescope.errors import ProfileFormatError
from tilescope.io.kernel_csv import read_kernel_table, slice_order
from tilescope.shapes import parse_shape

OP_SUMMARY_HEADER = (
    "Device_id,Model ID,Task ID,Stream ID,Op Name,OP Type,OP State,Task Type,"
    "Task Start Time(us),"
    "Task Duration(us),Task Wait Time(us),Block Num,Mix Block Num,HF32 Eligible,Input Shapes,"
    "Input Data Types,"
    "Input Formats,Output Shapes,Output Data Types,Output Formats,Context ID,aicore_time(us),"
    "aic_total_cycles,"
    "aic_mac_time(us),aic_mac_ratio,aiv_time(us),aiv_total_cycles,aiv_vec_ratio,cube_utilization(%)"
)
OP_SUMMARY_ROW = (
    "0,4294967295,0,1716,main_kernel,main_kernel,dynamic,MIX_AIC,1780748105187895.870\t,96.160,0.247,32,64,NO,"
    "N/A,N/A,N/A,N/A,N/A,N/A,0,93.205,1193021,60.1,0.645,90.5,2345678,0.5,28.719"
)


def _kd(real: Path, name: str) -> pd.DataFrame:
    return read_kernel_table(real / name / "kernel_details.csv").kernels


def test_fa_pipeutil_matmulv2_row(real_traces: Path) -> None:
    kt = read_kernel_table(real_traces / "fa_pipeutil_29" / "kernel_details.csv")
    assert kt.producer == "torch_npu"
    assert kt.metric_groups == ["PipeUtilization"]
    k = kt.kernels
    assert len(k) == 29
    row = k[(k["op_type"] == "MatMulV2") & (k["duration_us"] == 185.504)].iloc[0]
    assert row["aic_total_cycles"] == 5295467
    assert row["cube_utilization_pct"] == 79.295
    assert row["aic_time_us"] == 183.87
    assert row["aic_cube_ratio"] == 0.824  # aic_mac_ratio -> aic_cube_ratio
    assert row["block_dim"] == 16 and row["mix_block_dim"] == 0
    assert row["start_ns"] == 1736413971558972912  # "1736413971558972.912\t" quoted, with a TAB
    assert pd.isna(row["aiv_vec_ratio"])  # 0 on the unused Vector side -> null
    assert pd.isna(row["model_id"])  # 4294967295 -> null
    assert row["input_shapes"] == "81920,4096;8192,512"  # literal quotes stripped
    assert k["core_type"].value_counts().to_dict() == {"AI_CORE": 12, "MIX_AIC": 9, "AI_VECTOR_CORE": 8}


def test_fa_shape_with_empty_slots(real_traces: Path) -> None:
    k = _kd(real_traces, "fa_pipeutil_29")
    fa = k[k["name"] == "aclnnFlashAttentionScore_FlashAttentionScore_FlashAttentionScore"].iloc[0]
    assert fa["input_shapes"] == "4096,2,512;4096,2,512;4096,2,512;;;;4096,4096;;;;;"
    assert [list(map(int, s)) for s in fa["input_shape_list"]] == [
        [4096, 2, 512],
        [4096, 2, 512],
        [4096, 2, 512],
        [],
        [],
        [],
        [4096, 4096],
        [],
        [],
        [],
        [],
        [],
    ]
    assert fa["aiv_total_cycles"] == 26336326 and fa["aiv_time_us"] == 365.782


def test_gpt_core_type_counts_and_exact_start(real_traces: Path) -> None:
    kt = read_kernel_table(real_traces / "gpt_step_arith_591" / "kernel_details.csv")
    k = kt.kernels
    assert kt.metric_groups == ["ArithmeticUtilization"]
    assert len(k) == 591
    assert k["core_type"].value_counts().to_dict() == {
        "AI_VECTOR_CORE": 520,
        "MIX_AIV": 25,
        "HCCL": 19,
        "AI_CORE": 13,
        "AI_CPU": 7,
        "DSA_SQE": 7,
    }
    first = k.iloc[0]
    assert first["start_ns"] == int(Decimal("1699529622790614.8") * 1000) == 1699529622790614800
    # an integer timestamp without decimals ("1699529623143480")
    bmm = k[(k["name"] == "BatchMatMul96") & (k["start_ns"] == 1699529623143480000)]
    assert len(bmm) == 1
    mm = k[k["name"] == "MatMul91"].iloc[0]
    assert mm["aic_total_cycles"] == 64689637 and mm["aic_time_us"] == 1456.97
    assert mm["aic_cube_fp16_ratio"] == 0.893  # aic_mac_fp16_ratio -> aic_cube_fp16_ratio
    assert mm["aic_cube_fops"] == 473250242560
    hccl = k[k["core_type"] == "HCCL"].iloc[0]
    assert pd.isna(hccl["task_id"]) and pd.isna(hccl["aic_total_cycles"])  # N/A -> null
    memset = k[k["op_type"] == "MemSet"].iloc[0]
    assert pd.isna(memset["input_shapes"])  # """""" -> empty -> missing


def test_start_ns_is_exact_where_float64_is_not(real_traces: Path) -> None:
    k = _kd(real_traces, "fa_pipeutil_29")
    assert str(k["start_ns"].dtype) == "Int64"
    assert int(k["start_ns"].iloc[0]) == 1736413971558972912
    assert int(float("1736413971558972.912") * 1000) != 1736413971558972912


def test_op_summary_producer_aliases_and_tab(tmp_path: Path) -> None:
    p = tmp_path / "op_summary_20260606121516.csv"
    p.write_text(OP_SUMMARY_HEADER + "\n" + OP_SUMMARY_ROW + "\n")
    kt = read_kernel_table(p)
    assert kt.producer == "msprof"
    row = kt.kernels.iloc[0]
    assert row["start_ns"] == 1780748105187895870
    assert row["block_dim"] == 32 and row["mix_block_dim"] == 64  # Block Num / Mix Block Num
    assert row["core_type"] == "MIX_AIC" and row["name"] == "main_kernel"
    assert pd.isna(row["input_shapes"]) and pd.isna(row["model_id"])
    assert row["aic_cube_time_us"] == 60.1 and row["aiv_vec_ratio"] == 0.5


def test_sliced_op_summary_in_slice_order(tmp_path: Path) -> None:
    paths = []
    for n, dur in ((2, "3.0"), (0, "1.0"), (1, "2.0")):
        p = tmp_path / f"op_summary_20260606121516_{n}.csv"
        p.write_text(OP_SUMMARY_HEADER + "\n" + OP_SUMMARY_ROW.replace(",96.160,", f",{dur},") + "\n")
        paths.append(p)
    assert [p.name[-5] for p in slice_order(paths)] == ["0", "1", "2"]
    kt = read_kernel_table(paths)
    assert kt.kernels["duration_us"].tolist() == [1.0, 2.0, 3.0]
    s = [tmp_path / "op_summary_slice_1.csv", tmp_path / "op_summary_slice_0.csv"]
    assert [p.name for p in slice_order(s)] == ["op_summary_slice_0.csv", "op_summary_slice_1.csv"]


def test_header_only_is_valid_but_empty(tmp_path: Path) -> None:
    p = tmp_path / "kernel_details.csv"
    p.write_text("Name,Type,Accelerator Core,Start Time(us),Duration(us)\n")
    assert len(read_kernel_table(p).kernels) == 0


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("", "empty file"),
        ("Name,Type,Accelerator Core,Start Time(us),Duration(us)\na,b,AI_CORE,1.0\n", "row 1 (line 2)"),
        ("Name,Type,Accelerator Core,Duration(us)\na,b,AI_CORE,1.0\n", "Start Time(us)"),
        (
            "Name,Type,Accelerator Core,Start Time(us),Duration(us)\na,b,AI_CORE,1.0,fast\n",
            "expected a number",
        ),
        (
            "Name,Type,Accelerator Core,Start Time(us),Duration(us)\na,b,AI_CORE,12:00,1\n",
            "decimal timestamp",
        ),
    ],
)
def test_bad_kernel_tables(tmp_path: Path, content: str, message: str) -> None:
    p = tmp_path / "kernel_details.csv"
    p.write_text(content)
    with pytest.raises(ProfileFormatError, match=message.replace("(", r"\(").replace(")", r"\)")):
        read_kernel_table(p)


def test_binary_garbage(tmp_path: Path) -> None:
    p = tmp_path / "kernel_details.csv"
    p.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00garbage")
    with pytest.raises(ProfileFormatError, match="binary data"):
        read_kernel_table(p)


def test_column_renaming_rules() -> None:
    assert canonical_name("aicore_time(us)") == "aic_time_us"
    assert canonical_name("aic_time(us)") == "aic_time_us"
    assert canonical_name("aiv_time(us)") == "aiv_time_us"
    assert canonical_name("Block Num") == canonical_name("Block Dim") == "block_dim"
    assert canonical_name("Mix Block Num") == "mix_block_dim"
    assert canonical_name("Accelerator Core") == canonical_name("Task Type") == "core_type"
    assert canonical_name("Op Name") == canonical_name("Name") == "name"
    assert canonical_name("OP Type") == canonical_name("Type") == "op_type"
    assert canonical_name("Step ID") == canonical_name("Step Id") == "step_id"
    assert canonical_name("cube_utilization(%)") == "cube_utilization_pct"
    assert canonical_name("aic_mac_ratio") == canonical_name("aic_cube_ratio") == "aic_cube_ratio"
    assert canonical_name("aic_main_mem_read_bw(GB/s)") == "aic_main_mem_read_gbps"
    assert generic_canonical("L1_to_GM_datas(KB)(estimate)") == "l1_to_gm_datas_kb_estimate"
    assert generic_canonical("GM_to_UB_bw_usage_rate(%)") == "gm_to_ub_bw_usage_rate_pct"
    assert generic_canonical("aic_l0c_read_bw_cube(GB/s)") == "aic_l0c_read_cube_gbps"
    assert generic_canonical("aic_write_hit_rate(%)") == "aic_write_hit_rate_pct"


def test_coupled_chip_names() -> None:
    header = [
        "Op Name",
        "Task Type",
        "aicore_time(us)",
        "total_cycles",
        "mac_ratio",
        "vec_ratio",
        "mte2_ratio",
        "vec_time(us)",
        "memory_bound",
        "ub_read_bw(GB/s)",
    ]
    assert canonical_header(header) == [
        "name",
        "core_type",
        "aic_time_us",
        "aic_total_cycles",
        "aic_cube_ratio",
        "aiv_vec_ratio",
        "aic_mte2_ratio",
        "aiv_vec_time_us",
        "memory_bound",
        "aic_ub_read_gbps",
    ]


def test_parse_shape() -> None:
    assert parse_shape("4096,2,512;;8") == [[4096, 2, 512], [], [8]]
    assert parse_shape("x,1") is None
