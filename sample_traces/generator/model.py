"""The generator's constants and its 910B2 cost model: one kernel launch -> duration and PMU values.

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

import random
from dataclasses import dataclass, field
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


def numel(shape: str) -> int:
    n = 1
    for d in shape.split(","):
        n *= int(d)
    return n


def tensor_bytes(shapes: str, dtypes: str) -> float:
    total = 0.0
    for s, d in zip(shapes.split(";"), dtypes.split(";"), strict=False):
        if s:
            total += numel(s) * DTYPE_BYTES.get(d, 2)
    return total


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
