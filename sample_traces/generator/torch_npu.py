"""attention_unfused / attention_fused: a torch_npu `*_ascend_pt` profiler directory."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .kernel_table import write_kernel_details
from .layer import (
    SCORES,
    schedule,
    training_plan,
)
from .model import (
    AIC_CORES,
    AIV_CORES,
    BATCH,
    DIP_FREQ_MHZ,
    FFN,
    FREQ_MHZ,
    HEAD_DIM,
    HEADS,
    HIDDEN,
    HOST_PID,
    N_LAYERS,
    N_STEPS,
    PROF_DIR,
    PT_DIR,
    SEQ,
    T0_NS,
    Launch,
)
from .output import (
    json_text,
    write_file,
    write_manifest,
    write_readme,
)
from .trace_view import write_trace_view


def _profiler_info(end_ns: int) -> dict[str, Any]:
    return {
        "config": {
            "common_config": {
                "activities": ["ProfilerActivity.CPU", "ProfilerActivity.NPU"],
                "schedule": {"wait": 0, "warmup": 0, "active": N_STEPS, "repeat": 1, "skip_first": 0},
                "record_shapes": False,
                "profile_memory": False,
                "with_stack": False,
                "with_flops": False,
                "with_modules": False,
            },
            "experimental_config": {
                "_profiler_level": "Level1",
                "_aic_metrics": "PipeUtilization",
                "_l2_cache": False,
                "_op_attr": False,
                "_data_simplification": True,
                "_export_type": ["text"],
            },
        },
        "start_info": {"collectionTimeBegin": str((T0_NS - 500_000_000) // 1000)},
        "end_info": {"collectionTimeEnd": str(end_ns // 1000)},
        "torch_npu_version": "2.13.0",
        "rank_id": -1,
    }


def _device_info() -> dict[str, Any]:
    return {
        "DeviceInfo": [
            {
                "id": 0,
                "env_type": 3,
                "ai_core_num": AIC_CORES,
                "aiv_num": AIV_CORES,
                "aic_frequency": str(FREQ_MHZ),
                "aiv_frequency": str(FREQ_MHZ),
                "hwts_frequency": "50",
                "ai_cpu_core_num": 6,
                "ctrl_cpu_core_num": 1,
                "ctrl_cpu_id": "ARMv8_Cortex_A55",
                "ctrl_cpu_endian_little": 1,
                "ai_cpu": "2,3,4,5,6,7",
                "ctrl_cpu": "0,1",
            }
        ],
        "CPU": [
            {
                "Id": 0,
                "Name": "HiSilicon",
                "Frequency": "2600.000000",
                "Logical_CPU_Count": 192,
                "Type": "TaiShan_V110",
            }
        ],
        "devices": "0",
        "platform_version": "5",
        "pid": str(HOST_PID),
    }


def write_torch_npu_sample(root: Path, fused: bool) -> None:
    """attention_unfused / attention_fused: a torch_npu ``*_ascend_pt`` directory."""
    launches, extra = schedule(training_plan(fused))
    pt = root / PT_DIR
    end_ns = max(la.start_ns + la.dur_ns for la in launches) + 1_000_000
    write_file(pt / "profiler_info.json", json_text(_profiler_info(end_ns)))
    write_file(
        pt / "profiler_metadata.json",
        json_text(
            {
                "ENV_VARIABLES": {"ASCEND_LAUNCH_BLOCKING": "", "HCCL_RDMA_TC": "", "TASK_QUEUE_ENABLE": "0"},
                "torch_npu_version": "2.13.0",
                "cann_version": "8.5.RC1",
            }
        ),
    )
    write_file(pt / PROF_DIR / "device_0" / "info.json.0", json_text(_device_info()))
    write_kernel_details(pt / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv", launches)
    write_trace_view(pt / "ASCEND_PROFILER_OUTPUT" / "trace_view.json", launches, extra)
    attn = {"FlashAttentionScore"} if fused else {"BatchMatMulV3", "SoftmaxV2", "DropOutDoMask"}
    attn_us = sum(la.dur_ns for la in launches if la.spec.op_type in attn or _in_attention_chain(la, fused))
    name = "attention_fused" if fused else "attention_unfused"
    contents = {
        "workload": {
            "steps": N_STEPS,
            "layers": N_LAYERS,
            "batch": BATCH,
            "seq": SEQ,
            "heads": HEADS,
            "head_dim": HEAD_DIM,
            "hidden": HIDDEN,
            "ffn": FFN,
            "dtype": "fp16",
            "pass": "forward only (per step)",
        },
        "kernels": len(launches),
        "attention_device_time_us": round(attn_us / 1000, 3),
        "total_device_time_us": round(sum(la.dur_ns for la in launches) / 1000, 3),
        "aic_metrics": "PipeUtilization",
        "planted": {
            "wasted_cube_cores": "step 1, layer 1 output projection MatMulV3 on Block Dim 20 of 24",
            "wasted_vector_cores": "RoPE Neg and ConcatD on Block Dim 40 of 48 (every layer)",
            "frequency_dip": f"AI Core Freq {DIP_FREQ_MHZ} MHz during the RoPE kernels of step 1, layer 2",
            "ai_cpu": "one NonZero on AI_CPU (PMU columns N/A), host syncs on it",
            "hccl": "one hcom_allReduce_ at the end of step 2 (Task ID N/A)",
            **(
                {}
                if fused
                else {
                    "host_bound_gaps": "step 2, layer 1: the short eps Add and Rsqrt kernels "
                    "are launched after a host sync + stall (large Wait Time)"
                }
            ),
            "attention": "FlashAttentionScore MIX_AIC 24/48 per layer"
            if fused
            else "unfused BatchMatMul -> Mul -> Add -> SoftmaxV2 -> Cast -> DropOutDoMask -> BatchMatMul",
        },
    }
    write_manifest(root, name, "torch_npu profiler directory (*_ascend_pt)", contents)
    body = (
        f"A torch_npu profiler directory (`{PT_DIR}/`) of {N_STEPS} training steps (forward pass) of a "
        f"{N_LAYERS}-layer LLaMA-style transformer: batch {BATCH}, seq {SEQ}, {HEADS} heads x {HEAD_DIM}, "
        f"hidden {HIDDEN}, FFN {FFN}, fp16.\n\n"
        + (
            "Attention is one fused `FlashAttentionScore` kernel per layer (MIX_AIC, "
            "Block Dim 24 / Mix Block "
            "Dim 48, aic_ and aiv_ columns both filled) and RMSNorm is the fused `RmsNorm` kernel.\n"
            if fused
            else "Attention is **unfused**: `BatchMatMul -> Mul (scale) -> Add (mask) -> "
            "SoftmaxV2 -> Cast -> "
            "DropOutDoMask -> BatchMatMul` with the [8,16,2048,2048] scores going through HBM; RMSNorm is a "
            "chain of seven vector kernels.\n"
        )
        + "\nFiles: `profiler_info.json`, `profiler_metadata.json`, "
        "`ASCEND_PROFILER_OUTPUT/kernel_details.csv` "
        "(46-column PipeUtilization header, quoted timestamps with a trailing TAB, "
        "triple-quoted shapes, `N/A`, "
        "`0` for the unused core side), `ASCEND_PROFILER_OUTPUT/trace_view.json` (lanes Python, CANN, Ascend "
        "Hardware, AI Core Freq, Overlap Analysis; `async_npu` and `HostToDevice` flows) and "
        f"`{PROF_DIR}/device_0/info.json.0`.\n\n"
        f"Kernels: {len(launches)}; attention device time {contents['attention_device_time_us']} µs of "
        f"{contents['total_device_time_us']} µs. Planted findings: see `manifest.json` (`contents.planted`)."
    )
    write_readme(root, f"{name} (generated sample)", body)


def _in_attention_chain(la: Launch, fused: bool) -> bool:
    # the scale Mul, mask Add and Cast of the unfused chain are recognised by the scores shape
    return not fused and la.spec.out_shapes == SCORES
