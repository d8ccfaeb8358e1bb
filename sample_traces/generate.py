#!/usr/bin/env python3
"""Deterministic generator of GENERATED (not measured) Ascend profiler outputs for tilescope.

Run ``python sample_traces/generate.py`` to rewrite the bundled samples in place, or
``python sample_traces/generate.py --out DIR`` to write them elsewhere.  Benchmark inputs are only
written on request: ``--large-kernels N`` (a kernel_details.csv with N rows) and
``--large-trace BYTES`` (a trace_view.json of about BYTES), both into ``--out DIR``.

The file formats follow docs/ascend-profiler-formats.md (torch_npu ``*_ascend_pt`` layout, the
46-column PipeUtilization kernel_details.csv, the bare-array trace_view.json with string ``ts`` and
flow events, and the ``msprof op`` per-block CSVs with their trailing commas).

Performance model of a 910B2 (numbers from chips.md, plus the ASSUMPTIONS below):

* 24 AIC (cube) cores, 48 AIV (vector) cores, 1800 MHz, peak fp16 = 24 x 1800e6 x 8192 FLOP/s.
* cube time   = FLOPs / (blocks x 1800e6 x 8192); the block is busy cube_time / CUBE_EFFICIENCY.
* data time   = (bytes read + bytes written) / HBM_BANDWIDTH_GBPS_ASSUMED (shared by all blocks).
* vector time = bytes pushed through the vector unit / (blocks x VECTOR_BYTES_PER_CYCLE x 1800e6).
* busy time   = max(cube / efficiency, data, vector / efficiency) x (1 + jitter), jitter in [0, 4 %);
  duration    = busy time + LAUNCH_OVERHEAD_US.
* ratio of a pipe = pipe time / busy time (always in 0..1, as the profiler's ratios are relative
  to the side's own busy cycles); aic_total_cycles = busy x clock x Block Dim, so that
  aicore_time(us) = aic_total_cycles / (1800 x Block Dim) and
  cube_utilization(%) = aic_total_cycles / (1800 x 24 x Duration(us)) x 100 hold exactly
  (up to the 3-decimal rounding of the file).
* During the frequency dip (AI Core Freq counter at 1300 MHz) compute pipes slow down by 1800/1300
  and cycles are counted at 1300 MHz while the profiler still converts them with the rated 1800 MHz,
  which is why aicore_time(us) under-reports there (the quirk formats.md §7.3 warns about).

Every random draw comes from ``random.Random`` seeded with a string derived from SEED and the
kernel's position, so two runs (and both attention samples) produce byte-identical files.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

GENERATOR_NAME = "tilescope sample_traces/generate.py"
GENERATOR_VERSION = "1.0.0"
SEED = 20261130

# --- chip model (chips.md, 910B2) -------------------------------------------------------------
AIC_CORES = 24
AIV_CORES = 48
FREQ_MHZ = 1800
DIP_FREQ_MHZ = 1300
CUBE_FLOP_PER_CYCLE = 8192  # 16 x 16 x 16 x 2 (fp16)
PEAK_FP16_FLOPS = AIC_CORES * FREQ_MHZ * 1e6 * CUBE_FLOP_PER_CYCLE

# --- generator assumptions (NOT vendor numbers; stated in every manifest) -----------------------
HBM_BANDWIDTH_GBPS_ASSUMED = 1600.0
VECTOR_BYTES_PER_CYCLE = 256  # per AIV core: 128 fp16 or 64 fp32 lanes
CUBE_EFFICIENCY = 0.85
VECTOR_EFFICIENCY = 0.80
LAUNCH_OVERHEAD_US = 2.0
JITTER_MAX = 0.04
AI_CPU_BASE_US = 180.0
HCCL_ALLREDUCE_US = 2500.0

ASSUMPTIONS: dict[str, Any] = {
    "chip": "910B2 (Atlas A2), split AIC/AIV cores",
    "ai_core_num": AIC_CORES,
    "aiv_num": AIV_CORES,
    "aic_frequency_mhz": FREQ_MHZ,
    "peak_fp16_flops": PEAK_FP16_FLOPS,
    "hbm_bandwidth_gbps": HBM_BANDWIDTH_GBPS_ASSUMED,
    "hbm_bandwidth_is_assumption": True,
    "vector_bytes_per_cycle_per_aiv_core": VECTOR_BYTES_PER_CYCLE,
    "cube_efficiency": CUBE_EFFICIENCY,
    "vector_efficiency": VECTOR_EFFICIENCY,
    "launch_overhead_us": LAUNCH_OVERHEAD_US,
    "jitter_max_fraction": JITTER_MAX,
    "frequency_dip_mhz": DIP_FREQ_MHZ,
    "formulas": {
        "busy_us": "max(cube_us / cube_efficiency, data_us, vector_us / vector_efficiency) * (1 + jitter)",
        "duration_us": "busy_us + launch_overhead_us",
        "ratio": "pipe_us / busy_us",
        "aic_total_cycles": "busy_us * clock_mhz * block_dim",
        "aicore_time_us": "aic_total_cycles / (1800 * block_dim)",
        "cube_utilization_pct": "aic_total_cycles / (1800 * 24 * duration_us) * 100",
    },
}

# --- identities used in names and timelines ---------------------------------------------------
HOST_PID = 12345
CANN_PID = HOST_PID * 100 + 2  # torch_npu derives the CANN lane pid from the host pid
HW_PID = 1000
OVERLAP_PID = HOST_PID * 10000 + 1100
FREQ_PID = 1001
COMPUTE_STREAM = 2
HCCL_STREAM = 5
MODEL_ID_NONE = 4294967295
PT_DIR = "localhost_12345_20261130000000000_ascend_pt"
PROF_DIR = "PROF_000001_20261130000000000_ABCDEFGHIJKLMNOP"
OPPROF_DIR = "OPPROF_20261130000000_ABCDEFGHIJKLMNOP"
# 2026-11-30T00:00:00Z, the timestamp in the directory names, plus half a second of warm-up.
T0_NS = 1795996800 * 1_000_000_000 + 500_000_000

# --- transformer workload ----------------------------------------------------------------------
BATCH, SEQ, HEADS, HEAD_DIM, HIDDEN, FFN = 8, 2048, 16, 128, 2048, 5632
TOKENS = BATCH * SEQ
N_STEPS, N_LAYERS = 2, 4
DTYPE_BYTES = {"DT_FLOAT16": 2, "FLOAT": 4, "BOOL": 1, "UINT8": 1, "INT64": 8}

# The exact 46-column header of a torch_npu PipeUtilization kernel_details.csv (formats §3.3).
KD_COMMON = [
    "Step Id",
    "Model ID",
    "Task ID",
    "Stream ID",
    "Name",
    "Type",
    "OP State",
    "Accelerator Core",
    "Start Time(us)",
    "Duration(us)",
    "Wait Time(us)",
    "Block Dim",
    "Mix Block Dim",
    "HF32 Eligible",
    "Input Shapes",
    "Input Data Types",
    "Input Formats",
    "Output Shapes",
    "Output Data Types",
    "Output Formats",
    "Context ID",
]
AIC_COLS = [
    "aicore_time(us)",
    "aic_total_cycles",
    "aic_mac_time(us)",
    "aic_mac_ratio",
    "aic_scalar_time(us)",
    "aic_scalar_ratio",
    "aic_mte1_time(us)",
    "aic_mte1_ratio",
    "aic_mte2_time(us)",
    "aic_mte2_ratio",
    "aic_fixpipe_time(us)",
    "aic_fixpipe_ratio",
    "aic_icache_miss_rate",
]
AIV_COLS = [
    "aiv_time(us)",
    "aiv_total_cycles",
    "aiv_vec_time(us)",
    "aiv_vec_ratio",
    "aiv_scalar_time(us)",
    "aiv_scalar_ratio",
    "aiv_mte2_time(us)",
    "aiv_mte2_ratio",
    "aiv_mte3_time(us)",
    "aiv_mte3_ratio",
    "aiv_icache_miss_rate",
]
KD_HEADER = [*KD_COMMON, *AIC_COLS, *AIV_COLS, "cube_utilization(%)"]


# =============================================================================================
# Kernel descriptions
# =============================================================================================
@dataclass(frozen=True)
class KernelSpec:
    """One kernel launch as the model sees it: work, shapes and the host call that launched it."""

    name: str
    op_type: str
    core: str  # AI_CORE, AI_VECTOR_CORE, MIX_AIC, AI_CPU, HCCL
    block_dim: int
    mix_block_dim: int
    torch_op: str
    acl_api: str
    in_shapes: str = ""
    in_dtypes: str = ""
    in_formats: str = ""
    out_shapes: str = ""
    out_dtypes: str = ""
    out_formats: str = ""
    flops: float = 0.0
    read_bytes: float = 0.0
    write_bytes: float = 0.0
    vector_bytes: float = 0.0
    host_gap_us: float = 0.0  # host syncs with the device, then stalls this long before launching
    sync_after: bool = False  # host waits for this kernel (e.g. NonZero needs its output size)
    context_id: str = "N/A"


def _numel(shape: str) -> int:
    n = 1
    for d in shape.split(","):
        n *= int(d)
    return n


def _tensor_bytes(shapes: str, dtypes: str) -> float:
    total = 0.0
    for s, d in zip(shapes.split(";"), dtypes.split(";"), strict=False):
        if s:
            total += _numel(s) * DTYPE_BYTES.get(d, 2)
    return total


def vector_kernel(
    api: str,
    op_type: str,
    torch_op: str,
    ins: list[tuple[str, str]],
    outs: list[tuple[str, str]],
    passes: float = 1.0,
    block_dim: int = AIV_CORES,
    impl: str | None = None,
) -> KernelSpec:
    """An AI_VECTOR_CORE kernel; ``passes`` = how many times each byte goes through the vector unit."""
    in_s, in_d = ";".join(s for s, _ in ins), ";".join(d for _, d in ins)
    out_s, out_d = ";".join(s for s, _ in outs), ";".join(d for _, d in outs)
    rd, wr = _tensor_bytes(in_s, in_d), _tensor_bytes(out_s, out_d)
    impl = impl or f"{op_type}AiCore"
    return KernelSpec(
        name=f"{api}_{impl}_{op_type}",
        op_type=op_type,
        core="AI_VECTOR_CORE",
        block_dim=block_dim,
        mix_block_dim=0,
        torch_op=torch_op,
        acl_api=api,
        in_shapes=in_s,
        in_dtypes=in_d,
        in_formats=";".join("ND" for _ in ins),
        out_shapes=out_s,
        out_dtypes=out_d,
        out_formats=";".join("ND" for _ in outs),
        read_bytes=rd,
        write_bytes=wr,
        vector_bytes=max(rd, wr) * passes,
    )


def matmul_kernel(
    m: int, k: int, n: int, batch: tuple[int, ...] = (), block_dim: int = AIC_CORES
) -> KernelSpec:
    """A fp16 (Batch)MatMul on the cube cores: FLOPs and HBM traffic follow from the shapes."""
    nb = 1
    for b in batch:
        nb *= b
    pre = ",".join(str(b) for b in batch) + "," if batch else ""
    if batch:
        api, op_type, impl, torch_op = "aclnnBatchMatMul", "BatchMatMulV3", "BatchMatMulV3Common", "aten::bmm"
    else:
        api, op_type, impl, torch_op = "aclnnMatmul", "MatMulV3", "MatMulV3Common", "aten::matmul"
    return KernelSpec(
        name=f"{api}_{impl}_{op_type}",
        op_type=op_type,
        core="AI_CORE",
        block_dim=block_dim,
        mix_block_dim=0,
        torch_op=torch_op,
        acl_api=api,
        in_shapes=f"{pre}{m},{k};{pre}{k},{n}",
        in_dtypes="DT_FLOAT16;DT_FLOAT16",
        in_formats="ND;ND",
        out_shapes=f"{pre}{m},{n}",
        out_dtypes="DT_FLOAT16",
        out_formats="ND",
        flops=2.0 * nb * m * k * n,
        read_bytes=2.0 * nb * (m * k + k * n),
        write_bytes=2.0 * nb * m * n,
    )


HS = f"{BATCH},{SEQ},{HIDDEN}"  # hidden states
ROW = f"{BATCH},{SEQ},1"
SCORES = f"{BATCH},{HEADS},{SEQ},{SEQ}"
F16, F32 = "DT_FLOAT16", "FLOAT"


def rmsnorm_unfused() -> list[KernelSpec]:
    """LLaMA-style RMSNorm written in eager PyTorch: seven vector kernels and three HBM round trips."""
    return [
        vector_kernel("aclnnCast", "Cast", "aten::_to_copy", [(HS, F16)], [(HS, F32)]),
        vector_kernel("aclnnPowTensorScalar", "Square", "aten::pow", [(HS, F32)], [(HS, F32)]),
        vector_kernel("aclnnMean", "ReduceMean", "aten::mean", [(HS, F32)], [(ROW, F32)], passes=2),
        vector_kernel("aclnnAdds", "Add", "aten::add", [(ROW, F32)], [(ROW, F32)]),
        vector_kernel("aclnnRsqrt", "Rsqrt", "aten::rsqrt", [(ROW, F32)], [(ROW, F32)], passes=4),
        vector_kernel("aclnnMul", "Mul", "aten::mul", [(HS, F32), (ROW, F32)], [(HS, F32)]),
        vector_kernel("aclnnMul", "Mul", "aten::mul", [(HS, F32), (str(HIDDEN), F16)], [(HS, F16)]),
    ]


def rmsnorm_fused() -> list[KernelSpec]:
    return [
        vector_kernel(
            "aclnnRmsNorm",
            "RmsNorm",
            "npu::npu_rms_norm",
            [(HS, F16), (str(HIDDEN), F16)],
            [(HS, F16), (ROW, F32)],
            passes=4,
            impl="RmsNorm",
        ),
    ]


def rope_unfused() -> list[KernelSpec]:
    """Rotary embedding on q and k stacked (32 heads), with rotate_half as Slice/Neg/ConcatD."""
    qk, half = f"{BATCH},{SEQ},{2 * HEADS},{HEAD_DIM}", f"{BATCH},{SEQ},{2 * HEADS},{HEAD_DIM // 2}"
    cs = f"1,{SEQ},1,{HEAD_DIM}"
    return [
        vector_kernel("aclnnMul", "Mul", "aten::mul", [(qk, F16), (cs, F16)], [(qk, F16)]),
        vector_kernel("aclnnSlice", "Slice", "aten::slice", [(qk, F16)], [(half, F16)]),
        # 40 of 48 vector cores: a launch configuration that leaves cores idle on purpose
        vector_kernel("aclnnNeg", "Neg", "aten::neg", [(half, F16)], [(half, F16)], block_dim=40),
        vector_kernel(
            "aclnnCat", "ConcatD", "aten::cat", [(half, F16), (half, F16)], [(qk, F16)], block_dim=40
        ),
        vector_kernel("aclnnMul", "Mul", "aten::mul", [(qk, F16), (cs, F16)], [(qk, F16)]),
        vector_kernel("aclnnAdd", "Add", "aten::add", [(qk, F16), (qk, F16)], [(qk, F16)]),
    ]


def attention_unfused() -> list[KernelSpec]:
    """Eager attention: the [8,16,2048,2048] scores make five HBM round trips."""
    q = f"{BATCH},{HEADS},{SEQ},{HEAD_DIM}"
    mask_bits = str(BATCH * HEADS * SEQ * SEQ // 8)
    dropout = vector_kernel(
        "aclnnDropoutDoMask",
        "DropOutDoMask",
        "aten::native_dropout",
        [(SCORES, F16), (mask_bits, "UINT8"), ("", F16)],
        [(SCORES, F16)],
        passes=2,
    )
    return [
        matmul_kernel(SEQ, HEAD_DIM, SEQ, batch=(BATCH, HEADS)),
        vector_kernel("aclnnMuls", "Mul", "aten::mul", [(SCORES, F16)], [(SCORES, F16)]),
        vector_kernel(
            "aclnnAdd", "Add", "aten::add", [(SCORES, F16), (f"1,1,{SEQ},{SEQ}", F16)], [(SCORES, F16)]
        ),
        vector_kernel(
            "aclnnSoftmax", "SoftmaxV2", "aten::_softmax", [(SCORES, F16)], [(SCORES, F32)], passes=3
        ),
        vector_kernel("aclnnCast", "Cast", "aten::_to_copy", [(SCORES, F32)], [(SCORES, F16)]),
        replace(dropout, in_shapes=f"{SCORES};{mask_bits};"),
        replace(matmul_kernel(SEQ, SEQ, HEAD_DIM, batch=(BATCH, HEADS)), in_shapes=f"{SCORES};{q}"),
    ]


def attention_fused() -> list[KernelSpec]:
    """One FlashAttentionScore launch (MIX_AIC 24/48): scores stay on chip."""
    bsh = HS
    flops = 4.0 * BATCH * HEADS * SEQ * SEQ * HEAD_DIM
    softmax_elems = BATCH * HEADS * SEQ * SEQ
    io = 4 * _numel(bsh) * 2.0
    return [
        KernelSpec(
            name="aclnnFlashAttentionScore_FlashAttentionScore_FlashAttentionScore",
            op_type="FlashAttentionScore",
            core="MIX_AIC",
            block_dim=AIC_CORES,
            mix_block_dim=AIV_CORES,
            torch_op="npu::npu_fusion_attention",
            acl_api="aclnnFlashAttentionScore",
            in_shapes=f"{bsh};{bsh};{bsh};;;;{SEQ},{SEQ};;;;;",
            in_dtypes="DT_FLOAT16;DT_FLOAT16;DT_FLOAT16;DT_FLOAT16;UINT8;DT_FLOAT16;BOOL;INT64;INT64;INT64;INT64;INT64",
            in_formats=";".join(["ND"] * 12),
            out_shapes=f"{BATCH},{HEADS},{SEQ},8;{BATCH},{HEADS},{SEQ},8;;{bsh}",
            out_dtypes="FLOAT;FLOAT;DT_FLOAT16;DT_FLOAT16",
            out_formats="ND;ND;ND;ND",
            flops=flops,
            read_bytes=io * 0.75,
            write_bytes=io * 0.25,
            # softmax on fp32 scores: max, subtract, exp, sum, rescale, cast (6 passes)
            vector_bytes=softmax_elems * 4.0 * 6,
            context_id="0",
        )
    ]


def transformer_layer(fused: bool, o_proj_blocks: int = AIC_CORES) -> list[KernelSpec]:
    norm = rmsnorm_fused if fused else rmsnorm_unfused
    attn = attention_fused if fused else attention_unfused
    resid = vector_kernel("aclnnAdd", "Add", "aten::add", [(HS, F16), (HS, F16)], [(HS, F16)])
    ff = f"{BATCH},{SEQ},{FFN}"
    return [
        *norm(),
        matmul_kernel(TOKENS, HIDDEN, 3 * HIDDEN),
        *rope_unfused(),
        *attn(),
        matmul_kernel(TOKENS, HIDDEN, HIDDEN, block_dim=o_proj_blocks),
        resid,
        *norm(),
        matmul_kernel(TOKENS, HIDDEN, FFN),
        matmul_kernel(TOKENS, HIDDEN, FFN),
        vector_kernel("aclnnSilu", "Swish", "aten::silu", [(ff, F16)], [(ff, F16)], passes=4),
        vector_kernel("aclnnMul", "Mul", "aten::mul", [(ff, F16), (ff, F16)], [(ff, F16)]),
        matmul_kernel(TOKENS, FFN, HIDDEN),
        resid,
    ]


NONZERO = KernelSpec(
    name="aclnnNonzero_NonZeroAiCpu_NonZero",
    op_type="NonZero",
    core="AI_CPU",
    block_dim=1,
    mix_block_dim=0,
    torch_op="aten::nonzero",
    acl_api="aclnnNonzero",
    in_shapes=f"{BATCH},{SEQ}",
    in_dtypes="BOOL",
    in_formats="ND",
    out_shapes=f"{TOKENS},2",
    out_dtypes="INT64",
    out_formats="ND",
    sync_after=True,
)
ALLREDUCE = KernelSpec(
    name="hcom_allReduce__123_0_1",
    op_type="hcom_allReduce_",
    core="HCCL",
    block_dim=0,
    mix_block_dim=0,
    torch_op="c10d::allreduce_",
    acl_api="HcclAllReduce",
)


@dataclass(frozen=True)
class PlannedKernel:
    spec: KernelSpec
    step: int
    layer: int
    slot: int
    low_clock: bool = False


def training_plan(fused: bool) -> list[PlannedKernel]:
    """2 steps x 4 layers (forward), with the deliberate oddities the rules should find."""
    plan: list[PlannedKernel] = []
    for step in range(1, N_STEPS + 1):
        if step == 1:
            plan.append(PlannedKernel(NONZERO, step, -1, 0))
        for layer in range(N_LAYERS):
            # one output projection on 20 of 24 cube cores (wasted-cores rule)
            blocks = 20 if (step, layer) == (1, 1) else AIC_CORES
            for slot, spec in enumerate(transformer_layer(fused, blocks)):
                if (step, layer) == (2, 1) and not fused and slot in (3, 4):
                    # the eps Add and the Rsqrt of the first RMSNorm: two tiny kernels launched after a
                    # host-side sync + stall, so the device idles in front of them (host-bound gaps)
                    spec = replace(spec, host_gap_us=180.0 + 60.0 * (slot - 3))
                low = step == 1 and layer == 2 and spec.torch_op != "aten::matmul" and _is_rope(spec)
                plan.append(PlannedKernel(spec, step, layer, slot, low))
        if step == N_STEPS:
            plan.append(PlannedKernel(ALLREDUCE, step, -1, 0))
    return plan


def _is_rope(spec: KernelSpec) -> bool:
    return f",{2 * HEADS}," in spec.in_shapes


# =============================================================================================
# Performance model
# =============================================================================================
@dataclass
class Launch:
    """A scheduled kernel: device times (ns), host times (ns), ids and PMU values."""

    spec: KernelSpec
    step: int
    start_ns: int = 0
    dur_ns: int = 0
    wait_ns: int = 0
    stream: int = COMPUTE_STREAM
    task_id: int = -1
    conn_id: int = -1
    seq: int = -1
    freq_mhz: int = FREQ_MHZ
    host_start_ns: int = 0
    host_dur_ns: int = 0
    pmu: dict[str, float] = field(default_factory=dict)  # empty: N/A


def model_kernel(spec: KernelSpec, rng: random.Random, freq_mhz: int) -> tuple[float, dict[str, float]]:
    """Return (duration_us, PipeUtilization values) for one launch; see the module docstring."""
    if spec.core == "AI_CPU":
        return AI_CPU_BASE_US * (1 + rng.uniform(0, JITTER_MAX)), {}
    if spec.core == "HCCL":
        return HCCL_ALLREDUCE_US * (1 + rng.uniform(0, JITTER_MAX)), {}
    slow = FREQ_MHZ / freq_mhz  # compute pipes stretch when the clock drops; HBM does not
    bw = HBM_BANDWIDTH_GBPS_ASSUMED * 1e3  # bytes per µs
    has_aic = spec.core in ("AI_CORE", "MIX_AIC")
    has_aiv = spec.core in ("AI_VECTOR_CORE", "MIX_AIC")
    aic_blocks = spec.block_dim if has_aic else 0
    aiv_blocks = spec.mix_block_dim if spec.core == "MIX_AIC" else (spec.block_dim if has_aiv else 0)
    cube_us = spec.flops / (aic_blocks * FREQ_MHZ * CUBE_FLOP_PER_CYCLE) * slow if has_aic else 0.0
    vec_us = spec.vector_bytes / (aiv_blocks * VECTOR_BYTES_PER_CYCLE * FREQ_MHZ) * slow if has_aiv else 0.0
    read_us, write_us = spec.read_bytes / bw, spec.write_bytes / bw
    busy = max(cube_us / CUBE_EFFICIENCY, vec_us / VECTOR_EFFICIENCY, read_us + write_us, 0.5 * slow)
    busy *= 1 + rng.uniform(0, JITTER_MAX)
    duration = busy + LAUNCH_OVERHEAD_US
    to_rated = freq_mhz / FREQ_MHZ  # the profiler converts cycles with the rated clock
    pmu: dict[str, float] = {}
    if has_aic:
        cycles = round(busy * freq_mhz * aic_blocks)
        t = cycles / (FREQ_MHZ * aic_blocks)
        pipes = {
            "mac": cube_us,
            "scalar": busy * rng.uniform(0.05, 0.15),
            "mte1": cube_us * rng.uniform(0.5, 0.65),
            "mte2": read_us,
            "fixpipe": write_us,
        }
        pmu["aicore_time(us)"], pmu["aic_total_cycles"] = t, cycles
        for pipe, us in pipes.items():
            pmu[f"aic_{pipe}_time(us)"] = us * to_rated
            pmu[f"aic_{pipe}_ratio"] = min(us / busy, 1.0)
        pmu["aic_icache_miss_rate"] = rng.uniform(0.001, 0.02)
    if has_aiv:
        # in a MIX kernel both sides wait for each other, so both are busy for about the whole kernel
        aiv_busy = busy * (rng.uniform(0.985, 1.0) if has_aic else 1.0)
        cycles = round(aiv_busy * freq_mhz * aiv_blocks)
        t = cycles / (FREQ_MHZ * aiv_blocks)
        share = 0.3 if has_aic else 1.0  # FA: most traffic goes through the cube side's MTE2
        data_us = read_us + write_us
        read_share = read_us / data_us if data_us else 0.0
        pipes = {
            "vec": vec_us,
            "scalar": aiv_busy * rng.uniform(0.03, 0.12),
            # MTE2 stays active while the writes drain and MTE3 writes are posted, so in a streaming
            # vector kernel MTE2 is busy most of the time and MTE3 little (real Add: 0.84 / 0.13)
            "mte2": data_us * min(1.0, 0.35 + 0.75 * read_share) * share,
            "mte3": data_us * 0.4 * (1.0 - read_share) * share,
        }
        pmu["aiv_time(us)"], pmu["aiv_total_cycles"] = t, cycles
        for pipe, us in pipes.items():
            pmu[f"aiv_{pipe}_time(us)"] = us * to_rated
            pmu[f"aiv_{pipe}_ratio"] = min(us / aiv_busy, 1.0)
        pmu["aiv_icache_miss_rate"] = rng.uniform(0.001, 0.03)
    return duration, pmu


def schedule(plan: list[PlannedKernel], seed: int = SEED) -> tuple[list[Launch], list[dict[str, Any]]]:
    """Place host calls and device kernels on one timeline; returns launches and extra host events."""
    launches: list[Launch] = []
    extra: list[dict[str, Any]] = []  # syncs, profiler steps
    host = T0_NS
    stream_free = {COMPUTE_STREAM: T0_NS, HCCL_STREAM: T0_NS}
    task_ids = {COMPUTE_STREAM: 1200, HCCL_STREAM: 0}
    conn, seq = 100, 5000
    step_start: dict[int, int] = {}
    for i, pk in enumerate(plan):
        spec = pk.spec
        rng = random.Random(f"{seed}/{pk.step}/{pk.layer}/{pk.slot}/{spec.name}/{spec.block_dim}")
        if pk.step not in step_start:
            step_start[pk.step] = host
        if spec.host_gap_us:
            sync_end = max(host, stream_free[COMPUTE_STREAM])
            extra.append({"kind": "sync", "start": host, "end": sync_end})
            host = sync_end + int(spec.host_gap_us * 1000)
        op_dur = int((28 + rng.uniform(0, 18)) * 1000)
        _, _, node_start, node_dur = host_parts(host, op_dur)
        launch_ready = node_start + node_dur + 4000  # runtime -> device latency
        stream = HCCL_STREAM if spec.core == "HCCL" else COMPUTE_STREAM
        freq = DIP_FREQ_MHZ if pk.low_clock else FREQ_MHZ
        dur_us, pmu = model_kernel(spec, rng, freq)
        start = max(stream_free[stream] + int(rng.uniform(0.6, 1.6) * 1000), launch_ready)
        if spec.core == "HCCL":  # gradients are ready only when the compute stream is done
            start = max(start, stream_free[COMPUTE_STREAM] + 10_000)
        first_on_stream = all(la.stream != stream for la in launches)
        dur = round(dur_us * 1000)
        conn += 2
        seq += 1
        launches.append(
            Launch(
                spec=spec,
                step=pk.step,
                start_ns=start,
                dur_ns=dur,
                wait_ns=0 if first_on_stream else start - stream_free[stream],
                stream=stream,
                task_id=task_ids[stream],
                conn_id=conn,
                seq=seq,
                freq_mhz=freq,
                host_start_ns=host,
                host_dur_ns=op_dur,
                pmu=pmu,
            )
        )
        task_ids[stream] += 1
        stream_free[stream] = start + dur
        host += op_dur + int(rng.uniform(2, 6) * 1000)
        if spec.sync_after:
            extra.append({"kind": "sync", "start": host, "end": start + dur})
            host = max(host, start + dur) + 20_000
        if i + 1 == len(plan) or plan[i + 1].step != pk.step:
            end = max(stream_free.values())
            extra.append({"kind": "sync", "start": host, "end": end})
            host = max(host, end) + 50_000
            extra.append(
                {"kind": "step", "step": pk.step, "start": step_start[pk.step], "end": host - 20_000}
            )
    return launches, extra


def host_parts(host_start: int, op_dur: int) -> tuple[int, int, int, int]:
    """AscendCL@ call inside the torch op, and Node@launch inside the AscendCL@ call (all ns)."""
    acl_start, acl_dur = host_start + 4000, op_dur - 8000
    node_start = acl_start + acl_dur * 6 // 10
    return acl_start, acl_dur, node_start, 2500


# =============================================================================================
# kernel_details.csv (vectorised, so the 1M-row benchmark file uses the same code path)
# =============================================================================================
PMU_TIME_COLS = [
    c for c in AIC_COLS + AIV_COLS if c.endswith("(us)") and c not in ("aicore_time(us)", "aiv_time(us)")
]


def _sd() -> Any:
    from numpy.dtypes import StringDType

    return StringDType()


def launches_to_table(launches: list[Launch]) -> dict[str, Any]:
    """Columns (numpy arrays) of the kernel table; ``static`` holds the per-row constant text."""
    import numpy as np

    n = len(launches)
    t: dict[str, Any] = {
        "step": np.array([la.step for la in launches], dtype=np.int64),
        "task": np.array([-1 if la.spec.core == "HCCL" else la.task_id for la in launches], dtype=np.int64),
        "stream": np.array([la.stream for la in launches], dtype=np.int64),
        "start_ns": np.array([la.start_ns for la in launches], dtype=np.int64),
        "dur_ns": np.array([la.dur_ns for la in launches], dtype=np.int64),
        "wait_ns": np.array([la.wait_ns for la in launches], dtype=np.int64),
        "has_pmu": np.array([bool(la.pmu) for la in launches]),
        "has_aic": np.array(["aic_total_cycles" in la.pmu for la in launches]),
        "has_aiv": np.array(["aiv_total_cycles" in la.pmu for la in launches]),
        "aic_blocks": np.array([max(la.spec.block_dim, 1) for la in launches], dtype=np.int64),
        "aiv_blocks": np.array(
            [
                max(la.spec.mix_block_dim if la.spec.core == "MIX_AIC" else la.spec.block_dim, 1)
                for la in launches
            ],
            dtype=np.int64,
        ),
    }
    for col in [*AIC_COLS, *AIV_COLS]:
        t[col] = np.array([la.pmu.get(col, 0.0) for la in launches], dtype=np.float64)
    t["static_a"] = np.array([_static_a(la.spec) for la in launches], dtype=_sd())
    t["static_b"] = np.array([_static_b(la.spec) for la in launches], dtype=_sd())
    assert all(len(v) == n for v in t.values())
    return t


def _q(shapes: str) -> str:
    # csv-quoting of a value that itself starts and ends with a quote: """8,2048;2048""" (formats §3.5)
    return '"""' + shapes + '"""'


def _static_a(spec: KernelSpec) -> str:
    state = "N/A" if spec.core == "HCCL" else "dynamic"
    return f"{spec.name},{spec.op_type},{state},{spec.core}"


def _static_b(spec: KernelSpec) -> str:
    if spec.core == "HCCL":
        return ",".join(["0"] + ["N/A"] * 9)
    return ",".join(
        [
            str(spec.block_dim),
            str(spec.mix_block_dim),
            "NO",
            _q(spec.in_shapes),
            spec.in_dtypes,
            spec.in_formats,
            _q(spec.out_shapes),
            spec.out_dtypes,
            spec.out_formats,
            spec.context_id,
        ]
    )


def format_kernel_rows(t: dict[str, Any]) -> Any:
    """Return one CSV line (without newline) per row, as a numpy StringDType array."""
    import numpy as np

    sd = _sd()
    add = np.strings.add

    def us(ns: Any) -> Any:  # exact µs with 3 decimals from integer ns
        return add(add((ns // 1000).astype(sd), "."), np.strings.zfill((ns % 1000).astype(sd), 3))

    def num(a: Any) -> Any:
        return np.round(a, 3).astype(sd)

    def join(parts: list[Any]) -> Any:
        out = parts[0]
        for p in parts[1:]:
            out = add(add(out, ","), p)
        return out

    task = np.where(t["task"] < 0, "N/A", t["task"].astype(sd)).astype(sd)
    stream = t["stream"].astype(sd)
    start = add(add('"', us(t["start_ns"])), '\t"')  # quoted with a trailing TAB, like torch_npu
    head = join(
        [
            t["step"].astype(sd),
            np.full(len(task), str(MODEL_ID_NONE), dtype=sd),
            task,
            stream,
            t["static_a"],
            start,
            us(t["dur_ns"]),
            us(t["wait_ns"]),
            t["static_b"],
        ]
    )

    aic_cycles = np.rint(t["aic_total_cycles"]).astype(np.int64)
    aiv_cycles = np.rint(t["aiv_total_cycles"]).astype(np.int64)
    side: dict[str, Any] = {}
    for cols, cycles, blocks, flag, total in (
        (AIC_COLS, aic_cycles, t["aic_blocks"], t["has_aic"], "aicore_time(us)"),
        (AIV_COLS, aiv_cycles, t["aiv_blocks"], t["has_aiv"], "aiv_time(us)"),
    ):
        parts = []
        for col in cols:
            if col == total:
                s = num(cycles / (FREQ_MHZ * blocks))
            elif col.endswith("_total_cycles"):
                s = cycles.astype(sd)
            else:
                s = num(t[col])
            parts.append(np.where(flag, s, "0").astype(sd))  # `0` on the unused core side
        side[total] = join(parts)
    dur_us = t["dur_ns"] / 1000
    cube = np.where(t["has_aic"], num(aic_cycles / (FREQ_MHZ * AIC_CORES * dur_us) * 100), "0").astype(sd)
    pmu = join([side["aicore_time(us)"], side["aiv_time(us)"], cube])
    na = ",".join(["N/A"] * (len(AIC_COLS) + len(AIV_COLS) + 1))
    pmu = np.where(t["has_pmu"], pmu, na).astype(sd)
    return add(add(head, ","), pmu)


def write_kernel_details(path: Path, launches: list[Launch]) -> None:
    rows = format_kernel_rows(launches_to_table(sorted(launches, key=lambda la: la.start_ns)))
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as fh:
        fh.write(",".join(KD_HEADER) + "\n")
        fh.write("\n".join(rows.tolist()) + "\n")


# =============================================================================================
# trace_view.json
# =============================================================================================
def _ts(ns: int) -> str:
    return f"{ns // 1000}.{ns % 1000:03d}"


def _dur(ns: int) -> str:
    return repr(ns / 1000)


def metadata_events() -> list[str]:
    ev: list[dict[str, Any]] = []

    def lane(pid: int, name: str, label: str, sort: int, threads: list[tuple[int, str]]) -> None:
        ev.append({"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": name}})
        ev.append({"ph": "M", "name": "process_labels", "pid": pid, "tid": 0, "args": {"labels": label}})
        ev.append(
            {"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0, "args": {"sort_index": sort}}
        )
        for tid, tname in threads:
            ev.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": tname}})
            ev.append(
                {"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid, "args": {"sort_index": tid}}
            )

    lane(HOST_PID, "Python", "CPU", 0, [(HOST_PID, f"Thread {HOST_PID}")])
    lane(CANN_PID, "CANN", "CPU", 2, [(HOST_PID, f"Thread {HOST_PID}")])
    lane(
        HW_PID,
        "Ascend Hardware",
        "NPU",
        8,
        [(COMPUTE_STREAM, f"Stream {COMPUTE_STREAM}"), (HCCL_STREAM, f"Stream {HCCL_STREAM}")],
    )
    lane(FREQ_PID, "AI Core Freq", "NPU", 9, [])
    lane(
        OVERLAP_PID,
        "Overlap Analysis",
        "NPU",
        11,
        [(0, "Computing"), (1, "Communication"), (2, "Communication(Not Overlapped)"), (3, "Free")],
    )
    return [json.dumps(e) for e in ev]


@dataclass(frozen=True)
class Shift:
    """Offsets applied when a scheduled template is replayed (large benchmark traces)."""

    ns: int = 0
    conn: int = 0
    task: int = 0
    seq: int = 0
    step: int = 0


def launch_events(la: Launch, prev_end_ns: int | None, sh: Shift = Shift()) -> list[str]:
    """Host op, AscendCL@/Node@launch, device kernel, both flow pairs and overlap slices of one launch."""
    s = la.spec
    start, host = la.start_ns + sh.ns, la.host_start_ns + sh.ns
    acl_start, acl_dur, node_start, node_dur = host_parts(host, la.host_dur_ns)
    conn = la.conn_id + sh.conn
    kts = _ts(start)
    tid = la.stream
    ev = [
        f'{{"ph": "X", "name": "{s.torch_op}", "pid": {HOST_PID}, "tid": {HOST_PID}, "ts": "{_ts(host)}", '
        f'"dur": {_dur(la.host_dur_ns)}, "cat": "cpu_op", "args": {{"Sequence number": {la.seq + sh.seq}, '
        f'"Fwd thread id": 0}}}}',
        f'{{"name": "AscendCL@{s.acl_api}", "pid": {CANN_PID}, "tid": {HOST_PID}, "ts": "{_ts(acl_start)}", '
        f'"dur": {_dur(acl_dur)}, "args": {{"Thread Id": {HOST_PID}, "Mode": "ACL_NN", "level": "acl", '
        f'"id": "{s.acl_api}", "item_id": "0", "connection_id": {conn + 1}}}, "ph": "X"}}',
        f'{{"name": "Node@launch", "pid": {CANN_PID}, "tid": {HOST_PID}, "ts": "{_ts(node_start)}", '
        f'"dur": {_dur(node_dur)}, "args": {{"Thread Id": {HOST_PID}, "Mode": "ACL_NN", "level": "node", '
        f'"id": "launch", "item_id": "{s.name}", "connection_id": {conn}}}, "ph": "X"}}',
    ]
    task_type = s.core
    task_id = 0 if s.core == "HCCL" else la.task_id + sh.task
    ev.append(
        f'{{"name": "{s.name}", "pid": {HW_PID}, "tid": {tid}, "ts": "{kts}", "dur": {_dur(la.dur_ns)}, '
        f'"args": {{"Model Id": {MODEL_ID_NONE}, "Task Type": "{task_type}", "Stream Id": {tid}, '
        f'"Task Id": {task_id}, "Batch Id": 0, "Subtask Id": 4294967295, '
        f'"connection_id": {-1 if s.core == "HCCL" else conn}}}, "ph": "X"}}'
    )
    if s.core != "HCCL":  # communication tasks are not linked by these flows
        h2d = str((conn << 32) | 0xFFFFFFFF)
        ev += [
            f'{{"ph": "s", "bp": "e", "name": "torch_to_npu", "id": {start}, "pid": {HOST_PID}, '
            f'"tid": {HOST_PID}, "ts": "{_ts(host + 2000)}", "cat": "async_npu"}}',
            f'{{"ph": "f", "bp": "e", "name": "torch_to_npu", "id": {start}, "pid": {HW_PID}, "tid": {tid}, '
            f'"ts": "{kts}", "cat": "async_npu"}}',
            f'{{"name": "HostToDevice{h2d}", "ph": "s", "cat": "HostToDevice", "id": "{h2d}", '
            f'"pid": {CANN_PID}, "tid": {HOST_PID}, "ts": "{_ts(node_start)}"}}',
            f'{{"name": "HostToDevice{h2d}", "ph": "f", "id": "{h2d}", "ts": "{kts}", "cat": "HostToDevice", '
            f'"pid": {HW_PID}, "tid": {tid}, "bp": "e"}}',
            f'{{"name": "Computing", "pid": {OVERLAP_PID}, "tid": 0, "ts": "{kts}", '
            f'"dur": {_dur(la.dur_ns)}, '
            f'"ph": "X"}}',
        ]
    else:
        for otid, oname in ((1, "Communication"), (2, "Communication(Not Overlapped)")):
            ev.append(
                f'{{"name": "{oname}", "pid": {OVERLAP_PID}, "tid": {otid}, "ts": "{kts}", '
                f'"dur": {_dur(la.dur_ns)}, "ph": "X"}}'
            )
    if prev_end_ns is not None and start > prev_end_ns + sh.ns:
        gap = start - prev_end_ns - sh.ns
        ev.append(
            f'{{"name": "Free", "pid": {OVERLAP_PID}, "tid": 3, "ts": "{_ts(prev_end_ns + sh.ns)}", '
            f'"dur": {_dur(gap)}, "ph": "X"}}'
        )
    return ev


def extra_events(extra: list[dict[str, Any]], sh: Shift = Shift()) -> list[str]:
    """Host syncs (aten::item + aclrtSynchronizeStream) and ProfilerStep#N spans."""
    ev = []
    for x in extra:
        start, end = x["start"] + sh.ns, max(x["end"], x["start"] + 2000) + sh.ns
        if x["kind"] == "step":
            ev.append(
                f'{{"ph": "X", "name": "ProfilerStep#{x["step"] + sh.step}", "pid": {HOST_PID}, '
                f'"tid": {HOST_PID}, "ts": "{_ts(start)}", "dur": {_dur(end - start)}, "cat": "cpu_op", '
                f'"args": {{"Sequence number": -1, "Fwd thread id": 0}}}}'
            )
        else:
            ev.append(
                f'{{"ph": "X", "name": "aten::item", "pid": {HOST_PID}, "tid": {HOST_PID}, '
                f'"ts": "{_ts(start)}", "dur": {_dur(end - start)}, "cat": "cpu_op", '
                f'"args": {{"Sequence number": -1, "Fwd thread id": 0}}}}'
            )
            ev.append(
                f'{{"name": "AscendCL@aclrtSynchronizeStream", "pid": {CANN_PID}, "tid": {HOST_PID}, '
                f'"ts": "{_ts(start + 1000)}", "dur": {_dur(end - start - 1000)}, "args": {{"Thread Id": '
                f'{HOST_PID}, "Mode": "ACL_RTS", "level": "acl", "id": "aclrtSynchronizeStream", '
                f'"item_id": "0", "connection_id": 0}}, "ph": "X"}}'
            )
    return ev


def freq_points(launches: list[Launch]) -> list[tuple[int, int]]:
    """AI Core Freq counter samples: 1800 MHz, a dip to 1300 around the low-clock kernels, back to 1800."""
    pts = [(launches[0].host_start_ns - 1_000_000, FREQ_MHZ)]
    ordered = sorted(launches, key=lambda la: la.start_ns)
    for i, la in enumerate(ordered):
        prev_f = ordered[i - 1].freq_mhz if i else FREQ_MHZ
        if la.freq_mhz != prev_f:
            prev_end = ordered[i - 1].start_ns + ordered[i - 1].dur_ns
            pts.append(((prev_end + la.start_ns) // 2, la.freq_mhz))
    last = ordered[-1]
    pts.append((last.start_ns + last.dur_ns + 1_000_000, FREQ_MHZ))
    return pts


def freq_events(points: list[tuple[int, int]], sh: Shift = Shift()) -> list[str]:
    return [
        f'{{"name": "AI Core Freq", "ph": "C", "pid": {FREQ_PID}, "tid": 0, "ts": "{_ts(ns + sh.ns)}", '
        f'"args": {{"MHz": {mhz}}}}}'
        for ns, mhz in points
    ]


def template_events(
    launches: list[Launch], extra: list[dict[str, Any]], sh: Shift = Shift(), prev_end_ns: int | None = None
) -> list[str]:
    """All non-metadata events of one scheduled run, optionally shifted (prev_end_ns is unshifted)."""
    ev: list[str] = []
    prev = prev_end_ns
    for la in sorted(launches, key=lambda la: la.start_ns):
        ev += launch_events(la, prev, sh)
        prev = la.start_ns + la.dur_ns
    ev += extra_events(extra, sh)
    ev += freq_events(freq_points(launches), sh)
    return ev


def write_trace_view(path: Path, launches: list[Launch], extra: list[dict[str, Any]]) -> None:
    events = metadata_events() + template_events(launches, extra)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as fh:
        fh.write("[\n" + ",\n".join(events) + "\n]\n")


# =============================================================================================
# msprof op (per block) of a TileLang flash-attention forward kernel
# =============================================================================================
MSOP_KERNEL = "flash_attn_fwd_kernel_mix_aic"  # TileLang `{prim_func}_kernel` + msprof op's `_mix_aic`
MSOP_HEADERS: dict[str, str] = {
    "PipeUtilization": (
        ""
        "block_id,sub_block_id,aic_time(us),aic_total_cycles,aic_cube_time(us),aic_cube_ratio,aic_scalar_time(us),"
        ""
        "aic_scalar_ratio,aic_mte1_time(us),aic_mte1_ratio,aic_mte2_time(us),aic_mte2_ratio,aic_mte3_time(us),"
        "aic_mte3_ratio,aic_mte3_active_bw(GB/s),aic_fixpipe_time(us),aic_fixpipe_ratio,"
        "aic_fixpipe_active_bw(GB/s),aic_icache_miss_rate,aiv_time(us),aiv_total_cycles,aiv_vec_time(us),"
        "aiv_vec_ratio,aiv_scalar_time(us),aiv_scalar_ratio,aiv_mte2_time(us),aiv_mte2_ratio,"
        "aiv_mte2_active_bw(GB/s),aiv_mte3_time(us),aiv_mte3_ratio,aiv_mte3_active_bw(GB/s),"
        "aiv_icache_miss_rate,aic_mte1_active_bw(GB/s),aic_mte2_active_bw(GB/s),"
    ),
    "Memory": (
        "block_id,sub_block_id,aic_time(us),aic_total_cycles,aic_l1_read_bw(GB/s),aic_l1_write_bw(GB/s),"
        "aic_main_mem_read_bw(GB/s),aic_main_mem_write_bw(GB/s),aic_mte1_instructions,aic_mte1_ratio,"
        ""
        "aic_mte2_instructions,aic_mte2_ratio,aic_mte3_instructions,aic_mte3_ratio,aiv_time(us),aiv_total_cycles,"
        "aiv_ub_to_gm_bw(GB/s),aiv_gm_to_ub_bw(GB/s),aiv_main_mem_read_bw(GB/s),aiv_main_mem_write_bw(GB/s),"
        ""
        "aiv_mte2_instructions,aiv_mte2_ratio,aiv_mte3_instructions,aiv_mte3_ratio,read_main_memory_datas(KB),"
        ""
        "write_main_memory_datas(KB),GM_to_L1_datas(KB),GM_to_L1_bw_usage_rate(%),L1_to_GM_datas(KB)(estimate),"
        ""
        "L1_to_GM_bw_usage_rate(%)(estimate),L0C_to_L1_datas(KB),L0C_to_L1_bw_usage_rate(%),L0C_to_GM_datas(KB),"
        "L0C_to_GM_bw_usage_rate(%),GM_to_UB_datas(KB),GM_to_UB_bw_usage_rate(%),UB_to_GM_datas(KB),"
        "UB_to_GM_bw_usage_rate(%),"
    ),
    "MemoryL0": (
        "block_id,sub_block_id,aic_time(us),aic_total_cycles,aic_l0a_read_bw(GB/s),aic_l0a_write_bw(GB/s),"
        "aic_l0b_read_bw(GB/s),aic_l0b_write_bw(GB/s),aic_l0c_read_bw_cube(GB/s),aic_l0c_write_bw_cube(GB/s),"
        "aiv_time(us),aiv_total_cycles,"
    ),
    "MemoryUB": (
        "block_id,sub_block_id,aic_time(us),aic_total_cycles,aiv_time(us),aiv_total_cycles,"
        "aiv_ub_read_bw_vector(GB/s),aiv_ub_write_bw_vector(GB/s),aiv_ub_read_bw_scalar(GB/s),"
        "aiv_ub_write_bw_scalar(GB/s),"
    ),
    "ResourceConflictRatio": (
        "block_id,sub_block_id,aic_time(us),aic_total_cycles,aic_cube_wait_ratio,aic_mte1_wait_ratio,"
        "aic_mte2_wait_ratio,aic_mte3_wait_ratio,aiv_time(us),aiv_total_cycles,aiv_vec_total_cflt_ratio,"
        "aiv_vec_bankgroup_cflt_ratio,aiv_vec_bank_cflt_ratio,aiv_vec_resc_cflt_ratio,aiv_vec_mte_cflt_ratio,"
        "aiv_vec_wait_ratio,aiv_mte1_wait_ratio,aiv_mte2_wait_ratio,aiv_mte3_wait_ratio,"
    ),
    "L2Cache": (
        ""
        "block_id,sub_block_id,aic_time(us),aic_total_cycles,aic_write_cache_hit,aic_write_cache_miss_allocate,"
        "aic_r0_read_cache_hit,aic_r0_read_cache_miss_allocate,aic_r1_read_cache_hit,"
        "aic_r1_read_cache_miss_allocate,aic_write_hit_rate(%),aic_read_hit_rate(%),aic_total_hit_rate(%),"
        ""
        "aiv_time(us),aiv_total_cycles,aiv_write_cache_hit,aiv_write_cache_miss_allocate,aiv_r0_read_cache_hit,"
        "aiv_r0_read_cache_miss_allocate,aiv_r1_read_cache_hit,aiv_r1_read_cache_miss_allocate,"
        "aiv_write_hit_rate(%),aiv_read_hit_rate(%),aiv_total_hit_rate(%),"
    ),
    "ArithmeticUtilization": (
        "block_id,sub_block_id,aic_time(us),aic_total_cycles,aic_cube_ratio,aic_cube_fp16_ratio,"
        "aic_cube_int8_ratio,aic_cube_fops,aic_cube_total_instr_number,aic_cube_fp_instr_number,"
        "aic_cube_int_instr_number,aiv_time(us),aiv_total_cycles,aiv_vec_ratio,aiv_vec_fp32_ratio,"
        "aiv_vec_fp16_ratio,aiv_vec_int32_ratio,aiv_vec_int16_ratio,aiv_vec_misc_ratio,aiv_vec_fops,"
    ),
}
OPBASIC_HEADER = (
    "Op Name,Op Type,Task Duration(us),Block Dim,Mix Block Dim,Device Id,Pid,Current Freq,Rated Freq,"
)
# TileLang FA forward workload: batch 4, 16 heads, seq 2048, head_dim 128, fp16, 64x128 tiles
MSOP_FLOPS = 4.0 * 4 * 16 * 2048 * 2048 * 128
MSOP_SLOW_BLOCK = 13  # gets ~35 % more tiles than the others: load imbalance
MSOP_PID = 2659001


def _msop_block_values(rng: random.Random, block: int, warm: float) -> dict[str, dict[str, float]]:
    """Numbers for one block's cube0 / vector0 / vector1 rows (µs, ratios, bytes)."""
    work = (1.35 if block == MSOP_SLOW_BLOCK else 1.0) * (1 + rng.uniform(-0.015, 0.015))
    cube_us = MSOP_FLOPS / AIC_CORES / (FREQ_MHZ * CUBE_FLOP_PER_CYCLE) * work
    # the softmax side dominates: cube busy ~30 % of the time, vector ~70 %
    t = cube_us / (0.30 * (1 + rng.uniform(-0.03, 0.03))) * warm
    # per block GM traffic (bytes): K/V re-read per q tile, S spilled to GM for the vector side, P read back
    kv = 4 * 16 * 16 * 2 * 2048 * 128 * 2 / AIC_CORES * work
    s_bytes = 4 * 16 * 2048 * 2048 * 4 / AIC_CORES * work
    p_bytes = s_bytes / 2
    out: dict[str, dict[str, float]] = {}
    out["cube0"] = {
        "time": t,
        "cube": cube_us,
        "scalar": t * rng.uniform(0.10, 0.14),
        "mte1": cube_us * 0.6,
        "mte2": (kv + p_bytes) / (110e3 * rng.uniform(0.97, 1.03)),
        "mte3": 0.0,
        "fixpipe": s_bytes / (90e3 * rng.uniform(0.97, 1.03)),
        "icache": rng.uniform(0.003, 0.006),
        "gm_read": kv + p_bytes,
        "gm_write": s_bytes,
    }
    for sub in ("vector0", "vector1"):
        vt = t * rng.uniform(0.985, 1.0)
        out[sub] = {
            "time": vt,
            "vec": vt * 0.70 * (1 + rng.uniform(-0.02, 0.02)),
            "scalar": vt * rng.uniform(0.12, 0.16),
            "mte2": s_bytes / 2 / (40e3 * rng.uniform(0.97, 1.03)),
            "mte3": p_bytes / 2 / (40e3 * rng.uniform(0.97, 1.03)),
            "icache": rng.uniform(0.004, 0.008),
            "gm_read": s_bytes / 2,
            "gm_write": p_bytes / 2,
        }
    return out


def _f(x: float) -> str:
    return f"{x:.6f}"


def gbps(nbytes: float, us: float) -> str:
    """Bytes moved in ``us`` microseconds as GB/s (msprof op prints 6 decimals)."""
    return _f(nbytes / us / 1e3) if us else "0.000000"


def _msop_rows(
    metric: str, block: int, sub: str, v: dict[str, float], rng: random.Random, l2_hit: float
) -> str:
    """One CSV line of one metric file (ending with the trailing comma of msprof op)."""
    cube = sub == "cube0"
    t = v["time"]
    cyc = round(t * FREQ_MHZ)
    na = "NA"
    aic = [_f(t), str(cyc)] if cube else [na, na]
    aiv = [_f(t), str(cyc)] if not cube else [na, na]
    if metric == "PipeUtilization":
        if cube:
            c = [*aic]
            for p in ("cube", "scalar", "mte1", "mte2", "mte3"):
                c += [_f(v[p]), _f(v[p] / t)]
            c += [
                "0.000000",
                _f(v["fixpipe"]),
                _f(v["fixpipe"] / t),
                gbps(v["gm_write"], v["fixpipe"]),
                _f(v["icache"]),
            ]
            c += [na] * 13 + [gbps(v["gm_read"] * 3, v["mte1"]), gbps(v["gm_read"], v["mte2"])]
        else:
            c = [na] * 17 + [*aiv]
            for p in ("vec", "scalar"):
                c += [_f(v[p]), _f(v[p] / t)]
            c += [
                _f(v["mte2"]),
                _f(v["mte2"] / t),
                gbps(v["gm_read"], v["mte2"]),
                _f(v["mte3"]),
                _f(v["mte3"] / t),
                gbps(v["gm_write"], v["mte3"]),
                _f(v["icache"]),
                na,
                na,
            ]
    elif metric == "Memory":
        per_block_bw = HBM_BANDWIDTH_GBPS_ASSUMED / AIC_CORES  # usage rates relative to this (assumption)
        rd, wr = v["gm_read"] / 1024, v["gm_write"] / 1024
        if cube:
            c = [
                *aic,
                gbps(v["gm_read"] * 3, t),
                gbps(v["gm_read"], t),
                gbps(v["gm_read"], t),
                gbps(v["gm_write"], t),
                str(int(v["mte1"] * 90)),
                _f(v["mte1"] / t),
                str(int(v["mte2"] * 40)),
                _f(v["mte2"] / t),
                "0",
                "0.000000",
            ] + [na] * 10
            bw_rd, bw_wr = v["gm_read"] / t / 1e3, v["gm_write"] / t / 1e3
            c += [
                _f(rd),
                _f(wr),
                _f(rd),
                _f(bw_rd / per_block_bw * 100),
                "0.000000",
                "0.000000",
                "0.000000",
                "0.000000",
                _f(wr),
                _f(bw_wr / per_block_bw * 100),
                na,
                na,
                na,
                na,
            ]
        else:
            c = [na] * 12 + [
                *aiv,
                gbps(v["gm_write"], t),
                gbps(v["gm_read"], t),
                gbps(v["gm_read"], t),
                gbps(v["gm_write"], t),
                str(int(v["mte2"] * 30)),
                _f(v["mte2"] / t),
                str(int(v["mte3"] * 30)),
                _f(v["mte3"] / t),
            ]
            half = per_block_bw / 2
            c += (
                [_f(rd), _f(wr)]
                + [na] * 8
                + [
                    _f(rd),
                    _f(v["gm_read"] / t / 1e3 / half * 100),
                    _f(wr),
                    _f(v["gm_write"] / t / 1e3 / half * 100),
                ]
            )
    elif metric == "MemoryL0":
        if cube:
            c = [*aic] + [_f(x * rng.uniform(0.97, 1.03)) for x in (310.0, 150.0, 290.0, 140.0, 95.0, 180.0)]
            c += [na, na]
        else:
            c = [na] * 8 + aiv
    elif metric == "MemoryUB":
        c = (
            [*aic, na, na, na, na, na, na]
            if cube
            else [na, na, *aiv] + [_f(x * rng.uniform(0.97, 1.03)) for x in (420.0, 260.0, 12.0, 6.0)]
        )
    elif metric == "ResourceConflictRatio":
        if cube:
            # the cube waits for the softmax side most of the time
            c = [
                *aic,
                _f(0.55 + rng.uniform(-0.03, 0.03)),
                _f(0.05),
                _f(0.09 + rng.uniform(0, 0.02)),
                "0.000000",
            ]
            c += [na] * 11
        else:
            bg, bank, resc, mte = (0.06, 0.20 + rng.uniform(-0.02, 0.02), 0.03, 0.02)
            c = [na] * 6 + [
                *aiv,
                _f(bg + bank + resc + mte),
                _f(bg),
                _f(bank),
                _f(resc),
                _f(mte),
                _f(0.10 + rng.uniform(0, 0.02)),
                "0.000000",
                _f(0.08),
                _f(0.05),
            ]
    elif metric == "L2Cache":

        def hits(nbytes: float, rate: float) -> tuple[int, int]:
            req = int(nbytes / 512)  # requests counted per 512 B line (generator assumption)
            h = int(req * rate)
            return h, req - h

        rate = l2_hit + rng.uniform(-0.02, 0.02)
        wh, wm = hits(v["gm_write"], min(rate + 0.05, 1.0))
        r0h, r0m = hits(v["gm_read"] * 0.7, rate - 0.01)
        r1h, r1m = hits(v["gm_read"] * 0.3, rate - 0.01)
        rh, rm = r0h + r1h, r0m + r1m
        vals = [str(x) for x in (wh, wm, r0h, r0m, r1h, r1m)] + [
            _f(wh / (wh + wm) * 100),
            _f(rh / (rh + rm) * 100),
            _f((wh + rh) / (wh + wm + rh + rm) * 100),
        ]
        c = [*aic, *vals] + [na] * 11 if cube else [na] * 11 + [*aiv, *vals]
    else:  # ArithmeticUtilization
        if cube:
            r = v["cube"] / t
            c = [
                *aic,
                _f(r),
                _f(r),
                "0.000000",
                str(round(r * cyc * CUBE_FLOP_PER_CYCLE)),
                str(round(r * cyc / 16)),
                str(round(r * cyc / 16)),
                "0",
            ] + [na] * 9
        else:
            r = v["vec"] / t
            fp32, fp16, i32, misc = r * 0.70, r * 0.20, r * 0.05, r * 0.05
            c = [na] * 9 + [
                *aiv,
                _f(r),
                _f(fp32),
                _f(fp16),
                _f(i32),
                "0.000000",
                _f(misc),
                str(round(cyc * (fp32 * 64 + fp16 * 128))),
            ]
    return ",".join([str(block), sub, *c]) + ","


def msprof_op_launch(seed_key: str, warm: float = 1.0, l2_hit: float = 0.60) -> dict[str, str]:
    """File name -> content for one launch (OpBasicInfo plus the seven Default metric files)."""
    rng = random.Random(f"{SEED}/msprof_op/{seed_key}")
    blocks = [_msop_block_values(rng, b, warm) for b in range(AIC_CORES)]
    task_us = max(v[s]["time"] for v in blocks for s in v) + 3.1
    files = {
        "OpBasicInfo": OPBASIC_HEADER
        + "\n"
        + ",".join(
            [
                MSOP_KERNEL,
                "mix",
                _f(task_us),
                str(AIC_CORES),
                str(AIV_CORES),
                "0",
                str(MSOP_PID),
                str(FREQ_MHZ),
                str(FREQ_MHZ),
            ]
        )
        + ",\n"
    }
    for metric, header in MSOP_HEADERS.items():
        mrng = random.Random(f"{SEED}/msprof_op/{seed_key}/{metric}")
        lines = [header]
        for b, v in enumerate(blocks):
            for sub in ("cube0", "vector0", "vector1"):
                lines.append(_msop_rows(metric, b, sub, v[sub], mrng, l2_hit))
        files[metric] = "\n".join(lines) + "\n"
    for name, text in files.items():  # every line, header included, ends with a comma
        n_cols = text.splitlines()[0].count(",")
        assert all(line.count(",") == n_cols for line in text.splitlines()), name
    return files


# =============================================================================================
# Sample directories, manifests, READMEs
# =============================================================================================
SAMPLES = ("attention_unfused", "attention_fused", "tilelang_fa_msprof_op", "tilelang_fa_msprof_op_multi")


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as fh:
        fh.write(text)


def _json(obj: Any) -> str:
    return json.dumps(obj, indent=2, sort_keys=True) + "\n"


def write_manifest(root: Path, sample: str, fmt: str, contents: dict[str, Any]) -> None:
    _write(
        root / "manifest.json",
        _json(
            {
                "generated": True,
                "generator": {
                    "name": GENERATOR_NAME,
                    "version": GENERATOR_VERSION,
                    "script": "sample_traces/generate.py",
                },
                "seed": SEED,
                "sample": sample,
                "format": fmt,
                "hardware_measurement": False,
                "model_assumptions": ASSUMPTIONS,
                "contents": contents,
            }
        ),
    )


def write_readme(root: Path, title: str, body: str) -> None:
    _write(
        root / "README.md",
        (
            f"# {title}\n\n"
            "**GENERATED** by `sample_traces/generate.py` (seed "
            f"{SEED}, generator {GENERATOR_VERSION}). This is **not a hardware "
            f"measurement**: every number comes "
            "from the generator's simple 910B2 model (24 AIC / 48 AIV cores, 1800 MHz, HBM bandwidth "
            f"**assumed** {HBM_BANDWIDTH_GBPS_ASSUMED:.0f} GB/s). Regenerate with "
            "`python sample_traces/generate.py`; do not edit by hand (a test compares it "
            "with a fresh run).\n\n"
            f"{body}\n"
        ),
    )


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
    _write(pt / "profiler_info.json", _json(_profiler_info(end_ns)))
    _write(
        pt / "profiler_metadata.json",
        _json(
            {
                "ENV_VARIABLES": {"ASCEND_LAUNCH_BLOCKING": "", "HCCL_RDMA_TC": "", "TASK_QUEUE_ENABLE": "0"},
                "torch_npu_version": "2.13.0",
                "cann_version": "8.5.RC1",
            }
        ),
    )
    _write(pt / PROF_DIR / "device_0" / "info.json.0", _json(_device_info()))
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


def write_msprof_op_sample(root: Path) -> None:
    files = msprof_op_launch("single")
    for metric, text in files.items():
        _write(root / OPPROF_DIR / f"{metric}.csv", text)
    _msop_manifest(root, "tilelang_fa_msprof_op", "msprof op single-operator directory (OPPROF_*)", 1)


def write_msprof_op_multi_sample(root: Path) -> None:
    stamps = ("20261130000000123", "20261130000002456")
    for launch, stamp in enumerate(stamps):
        # the second launch runs with a warmer L2: a little faster, a few more hits
        files = msprof_op_launch(f"multi/{launch}", warm=1.0 - 0.02 * launch, l2_hit=0.60 + 0.03 * launch)
        for metric, text in files.items():
            _write(root / OPPROF_DIR / "device0" / MSOP_KERNEL / str(launch) / f"{metric}_{stamp}.csv", text)
    _msop_manifest(
        root,
        "tilelang_fa_msprof_op_multi",
        "msprof op multi-operator layout (OPPROF_*/device0/{OpName}/{launch}/{Metric}_{timestamp}.csv)",
        2,
    )


def _msop_manifest(root: Path, name: str, fmt: str, launches: int) -> None:
    contents = {
        "kernel": MSOP_KERNEL,
        "launches": launches,
        "aic_metrics": "Default",
        "block_dim": AIC_CORES,
        "mix_block_dim": AIV_CORES,
        "rows_per_metric_file": 3 * AIC_CORES,
        "workload": "TileLang flash-attention forward, batch 4, 16 heads, seq 2048, head_dim 128, fp16",
        "planted": {
            "cube_vector_imbalance": "aic_cube_ratio ~0.30, aiv_vec_ratio ~0.70 (softmax side dominates)",
            "load_imbalance": f"block {MSOP_SLOW_BLOCK} takes ~1.35x the median block time",
            "ub_bank_conflicts": "aiv_vec_bank_cflt_ratio ~0.2",
            "l2_hit_rate": "~60 % total hit rate",
        },
    }
    write_manifest(root, name, fmt, contents)
    write_readme(
        root,
        f"{name} (generated sample)",
        (
            f"`msprof op --aic-metrics=Default` output of a TileLang flash-attention forward kernel "
            f"`{MSOP_KERNEL}` (TileLang names the entry `{{prim_func}}_kernel`, msprof op "
            f"appends `_mix_aic`), "
            f"Block Dim {AIC_CORES} / Mix Block Dim {AIV_CORES}, {launches} launch(es).\n\n"
            "Each launch has `OpBasicInfo` and the seven metric CSVs (PipeUtilization, "
            "Memory, MemoryL0, MemoryUB, "
            "ResourceConflictRatio, L2Cache, ArithmeticUtilization) with one row per "
            "(block_id, sub_block_id in "
            "cube0/vector0/vector1), `NA` on the other side's columns and a trailing comma on every line.\n\n"
            "Planted: the vector (softmax) side dominates (cube ~30 % busy, vector ~70 %), block "
            f"{MSOP_SLOW_BLOCK} is ~1.35x slower than the median, UB bank conflicts ~0.2, L2 hit rate ~60 %."
        ),
    )


def generate_samples(out: Path) -> list[Path]:
    """(Re)write every bundled sample under ``out``; other folders there (e.g. kernels/) are left alone."""
    writers: dict[str, Callable[[Path], None]] = {
        "attention_unfused": lambda p: write_torch_npu_sample(p, fused=False),
        "attention_fused": lambda p: write_torch_npu_sample(p, fused=True),
        "tilelang_fa_msprof_op": write_msprof_op_sample,
        "tilelang_fa_msprof_op_multi": write_msprof_op_multi_sample,
    }
    written = []
    for name in SAMPLES:
        root = out / name
        if root.exists():
            shutil.rmtree(root)
        writers[name](root)
        written.append(root)
    return written


# =============================================================================================
# Large benchmark inputs (only on request)
# =============================================================================================
def _template() -> tuple[list[Launch], list[dict[str, Any]], int]:
    launches, extra = schedule(training_plan(False))
    launches.sort(key=lambda la: la.start_ns)
    first = min(min(la.host_start_ns for la in launches), min(x["start"] for x in extra)) - 1_000_000
    last = max(max(la.start_ns + la.dur_ns for la in launches), max(x["end"] for x in extra))
    return launches, extra, last - first + 2_000_000


def write_large_kernel_details(path: Path, n_rows: int, chunk_rows: int = 100_000) -> None:
    """A kernel_details.csv with ``n_rows`` rows: the unfused 2-step run replayed with jitter.

    Columns are built with numpy per chunk (no per-row Python), so 1M rows take seconds.
    """
    import numpy as np

    launches, _, period = _template()
    t = launches_to_table(launches)
    n_t = len(launches)
    tasks_per_rep = int(t["task"].max() - t["task"][t["task"] >= 0].min() + 1)
    rng = np.random.default_rng(SEED)
    idx = np.arange(n_rows, dtype=np.int64) % n_t
    rep = np.arange(n_rows, dtype=np.int64) // n_t
    factor = rng.uniform(0.97, 1.0, n_rows)  # only shrink, so replayed kernels never overlap
    start = t["start_ns"][idx] + rep * period
    dur = np.rint(t["dur_ns"][idx] * factor).astype(np.int64)
    stream = t["stream"][idx]
    wait = np.zeros(n_rows, dtype=np.int64)
    for s in np.unique(stream):
        pos = np.nonzero(stream == s)[0]
        wait[pos[1:]] = start[pos[1:]] - (start[pos[:-1]] + dur[pos[:-1]])
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as fh:
        fh.write(",".join(KD_HEADER) + "\n")
        for a in range(0, n_rows, chunk_rows):
            b = min(a + chunk_rows, n_rows)
            ii, f = idx[a:b], factor[a:b]
            c = {k: v[ii] for k, v in t.items()}
            c["step"] = c["step"] + 2 * rep[a:b]
            c["task"] = np.where(c["task"] >= 0, c["task"] + rep[a:b] * tasks_per_rep, -1)
            c["start_ns"], c["dur_ns"], c["wait_ns"] = start[a:b], dur[a:b], wait[a:b]
            for col in [*PMU_TIME_COLS, "aic_total_cycles", "aiv_total_cycles"]:
                c[col] = c[col] * f
            fh.write("\n".join(format_kernel_rows(c).tolist()) + "\n")


def write_large_trace_view(path: Path, target_bytes: int) -> int:
    """A trace_view.json of about ``target_bytes``, streamed one replayed run at a time; returns bytes."""
    launches, extra, period = _template()
    conn_span = max(la.conn_id for la in launches) + 2
    task_span = max(la.task_id for la in launches) + 1
    seq_span = max(la.seq for la in launches) + 1
    last_end = max(la.start_ns + la.dur_ns for la in launches if la.stream == COMPUTE_STREAM)
    written = 0
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as fh:
        text = "[\n" + ",\n".join(metadata_events())
        rep = 0
        while True:
            fh.write(text)
            written += len(text)
            if written >= target_bytes:
                break
            sh = Shift(
                ns=rep * period,
                conn=rep * conn_span,
                task=rep * task_span,
                seq=rep * seq_span,
                step=N_STEPS * rep,
            )
            prev = last_end - period if rep else None
            text = ",\n" + ",\n".join(template_events(launches, extra, sh, prev))
            rep += 1
        fh.write("\n]\n")
    return written + 3


def _parse_size(text: str) -> int:
    # Example: "1G" -> 1073741824, "500M", "4096"
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    t = text.strip().upper().removesuffix("B")
    return int(float(t[:-1]) * mult[t[-1]]) if t and t[-1] in mult else int(t)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument(
        "--out",
        type=Path,
        default=None,
        help="output directory (default: regenerate the bundled samples next to this script)",
    )
    ap.add_argument(
        "--large-kernels",
        type=int,
        default=None,
        metavar="N",
        help="write a kernel_details.csv with N rows (benchmark input) instead of the samples",
    )
    ap.add_argument(
        "--large-trace",
        type=_parse_size,
        default=None,
        metavar="BYTES",
        help="write a trace_view.json of about BYTES (e.g. 1G) instead of the samples",
    )
    args = ap.parse_args(argv)
    if args.large_kernels is None and args.large_trace is None:
        out = args.out or Path(__file__).resolve().parent
        for root in generate_samples(out):
            size = sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
            print(f"wrote {root} ({size / 1e6:.2f} MB)")
        return 0
    if args.out is None:
        ap.error("--large-kernels/--large-trace need --out DIR (keep benchmark files out of the repo)")
    base = args.out / PT_DIR / "ASCEND_PROFILER_OUTPUT"
    if args.large_kernels is not None:
        t0 = time.perf_counter()
        write_large_kernel_details(base / "kernel_details.csv", args.large_kernels)
        size = (base / "kernel_details.csv").stat().st_size
        print(
            f"kernel_details.csv: {args.large_kernels} rows, {size / 1e6:.1f} MB, "
            f"{time.perf_counter() - t0:.1f} s"
        )
    if args.large_trace is not None:
        t0 = time.perf_counter()
        n = write_large_trace_view(base / "trace_view.json", args.large_trace)
        print(f"trace_view.json: {n / 1e6:.1f} MB, {time.perf_counter() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
