"""N-rank torch_npu runs with a known slow rank and a known slow link (GENERATED, not measured).

`write_cluster_run(out, ranks=8, slow_rank=3, slow_link=(5, 6))` writes one `*_ascend_pt` folder per
rank under `out`, each with `profiler_info_{rank}.json` and, in ASCEND_PROFILER_OUTPUT/,
`kernel_details.csv` (Level0-style columns, no PMU block), `step_trace_time.csv`,
`communication.json` and `communication_matrix.json` in torch_npu's layouts (formats doc §6,
analyzer/io/cluster_files.py).

The model, per step and rank: the same kernel list back to back (a `gap_us` launch gap between
kernels), then one ring all-reduce. Every rank starts the step together; the all-reduce starts on
each rank when its kernels are done, its transfer starts when the last rank arrives (so a rank
waits `last arrival - own arrival`), and its transit time is `size / bandwidth` of the rank's
outgoing ring link. The slow rank's `slow_kernel` runs `slow_factor` times longer; the slow link's
bandwidth is `link_gbps * slow_link_factor`. Everything is deterministic (no random numbers), so
tests can assert exact values.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

HEADER = [
    "Step Id", "Model ID", "Task ID", "Stream ID", "Name", "Type", "Accelerator Core", "Start Time(us)",
    "Duration(us)", "Wait Time(us)", "Block Dim", "Mix Block Dim", "Input Shapes", "Input Data Types",
    "Input Formats", "Output Shapes", "Output Data Types", "Output Formats",
]
T0_US = 1_700_000_000_000_000  # µs since the epoch, like torch_npu's timestamps
STEP_PERIOD_US = 20_000.0
GROUP = "14641193849181948201"  # the communication group's hash in operator keys


@dataclass(frozen=True)
class Kernel:
    name: str
    op_type: str
    core: str
    duration_us: float
    blocks: int
    shapes: str


WORKLOAD: tuple[Kernel, ...] = (
    Kernel("MatMulV2", "MatMulV2", "AI_CORE", 180.0, 24, "4096,4096;4096,4096"),
    Kernel("Add", "Add", "AI_VECTOR_CORE", 20.0, 48, "4096,4096;4096,4096"),
    Kernel("FlashAttentionScore", "FlashAttentionScore", "MIX_AIC", 400.0, 24, "4096,2,640;4096,2,640"),
    Kernel("MatMulV2", "MatMulV2", "AI_CORE", 180.0, 24, "4096,4096;4096,4096"),
    Kernel("Gelu", "Gelu", "AI_VECTOR_CORE", 30.0, 48, "4096,4096"),
    Kernel("MatMulV2", "MatMulV2", "AI_CORE", 180.0, 24, "4096,4096;4096,4096"),
)


@dataclass(frozen=True)
class ClusterSpec:
    ranks: int = 8
    steps: int = 2
    slow_rank: int | None = 3
    slow_kernel: str = "MatMulV2"
    slow_factor: float = 1.5
    slow_link: tuple[int, int] | None = (5, 6)  # (source rank, destination rank) of the ring
    slow_link_factor: float = 0.25
    link_gbps: float = 20.0
    allreduce_mb: float = 16.0
    gap_us: float = 10.0
    layers: int = 1  # the kernel list runs this many times per step, before the step's all-reduce
    # time between step starts (torch_npu's step marks); what is not compute or communication is Free
    step_period_us: float = STEP_PERIOD_US


def _durations(spec: ClusterSpec, rank: int) -> list[float]:
    slow = rank == spec.slow_rank
    factor = {spec.slow_kernel: spec.slow_factor} if slow else {}
    return [k.duration_us * factor.get(k.name, 1.0) for k in WORKLOAD]


def _link_gbps(spec: ClusterSpec, src: int, dst: int) -> float:
    return spec.link_gbps * (spec.slow_link_factor if spec.slow_link == (src, dst) else 1.0)


def _ring_next(spec: ClusterSpec, rank: int) -> int:
    return (rank + 1) % spec.ranks


def _transit_us(spec: ClusterSpec, rank: int) -> float:
    # ring all-reduce: each rank sends 2 (N-1)/N of the buffer to its neighbour
    return _ring_size_mb(spec) / _link_gbps(spec, rank, _ring_next(spec, rank)) * 1000.0


def _arrival_us(spec: ClusterSpec, rank: int) -> float:
    """Time from the step start until the rank reaches the all-reduce."""
    return spec.layers * sum(d + spec.gap_us for d in _durations(spec, rank))


def _period_us(spec: ClusterSpec) -> float:
    """Step start to step start: `step_period_us` (20 ms), or more when a step's kernels and
    all-reduce need it (many layers)."""
    longest = max(_arrival_us(spec, r) for r in range(spec.ranks)) + max(
        _transit_us(spec, r) for r in range(spec.ranks))
    return max(spec.step_period_us, 1000.0 * math.ceil(1.25 * longest / 1000.0))


def write_cluster_run(out: Path, spec: ClusterSpec | None = None) -> list[Path]:
    """Write the run (module docstring); returns the rank folders."""
    spec = spec or ClusterSpec()
    roots = []
    last = max(_arrival_us(spec, r) for r in range(spec.ranks))
    for rank in range(spec.ranks):
        root = out / f"node0_{1000 + rank}_20260101000000000_ascend_pt"
        ao = root / "ASCEND_PROFILER_OUTPUT"
        ao.mkdir(parents=True, exist_ok=True)
        (root / f"profiler_info_{rank}.json").write_text(json.dumps({
            "config": {"common_config": {}, "experimental_config": {"_profiler_level": "Level0"}},
            "rank_id": rank, "generated": "tilescope sample generator (not measured)",
        }, indent=1) + "\n")
        _write_rank(ao, spec, rank, last)
        roots.append(root)
    (out / "README.md").write_text(_readme(spec))
    return roots


def _write_rank(ao: Path, spec: ClusterSpec, rank: int, last: float) -> None:
    rows: list[list[object]] = []
    steps: list[list[object]] = []
    comm: dict[str, object] = {}
    matrix: dict[str, object] = {}
    wait = last - _arrival_us(spec, rank)
    transit = _transit_us(spec, rank)
    # every rank's transfer ends when the slowest link of the ring is done: it idles after its own
    idle = max(_transit_us(spec, r) for r in range(spec.ranks)) - transit
    elapse = wait + transit + idle
    computing = spec.layers * sum(_durations(spec, rank))
    period = _period_us(spec)
    task = 100
    for step in range(1, spec.steps + 1):
        t = T0_US + (step - 1) * period
        for k, dur in [*zip(WORKLOAD, _durations(spec, rank), strict=True)] * spec.layers:
            rows.append([step, 4294967295, task, 2, k.name, k.op_type, k.core, f"{t:.3f}", f"{dur:.3f}",
                         f"{spec.gap_us:.3f}", k.blocks, 0, k.shapes, "DT_BF16", "FORMAT_ND",
                         k.shapes.split(";")[0], "DT_BF16", "FORMAT_ND"])
            t += dur + spec.gap_us
            task += 1
        name = f"hcom_allReduce__201_{step}_1"
        rows.append([step, 4294967295, "N/A", "N/A", name, "hcom_allReduce_", "HCCL", f"{t:.3f}",
                     f"{elapse:.3f}", f"{spec.gap_us:.3f}", 0, *["N/A"] * 7])
        free = period - computing - elapse
        steps.append([step, computing, elapse, 0.0, elapse, free, period, 0, elapse])
        key = f"{name}@{GROUP}"
        times = {"Start Timestamp(us)": t, "Elapse Time(ms)": elapse / 1000,
                 "Transit Time(ms)": transit / 1000, "Wait Time(ms)": wait / 1000,
                 "Synchronization Time(ms)": wait / 1000, "Idle Time(ms)": idle / 1000,
                 "Wait Time Ratio": round(wait / (wait + transit), 4),
                 "Synchronization Time Ratio": round(wait / (wait + transit), 4)}
        comm[f"step{step}"] = {"collective": {
            key: {"Communication Time Info": times, "Communication Bandwidth Info": _bandwidth(spec, rank)},
            "Total Op Info": {"Communication Time Info": {"Elapse Time(ms)": elapse / 1000}},
        }}
        matrix[f"step{step}"] = {"collective": {key: _links(spec, rank)}}
    _write_csv(ao / "kernel_details.csv", HEADER, rows)
    _write_csv(ao / "step_trace_time.csv", [
        "Step", "Computing", "Communication(Not Overlapped)", "Overlapped", "Communication", "Free", "Stage",
        "Bubble", "Communication(Not Overlapped and Exclude Receive)",
    ], steps)
    (ao / "communication.json").write_text(json.dumps(comm) + "\n")
    (ao / "communication_matrix.json").write_text(json.dumps(matrix) + "\n")


def _ring_size_mb(spec: ClusterSpec) -> float:
    return spec.allreduce_mb * 2 * (spec.ranks - 1) / spec.ranks


def _bandwidth(spec: ClusterSpec, rank: int) -> dict[str, object]:
    """communication.json's "Communication Bandwidth Info" of the rank's all-reduce."""
    gbps = _link_gbps(spec, rank, _ring_next(spec, rank))
    hccs = {"Transit Size(MB)": _ring_size_mb(spec), "Transit Time(ms)": _transit_us(spec, rank) / 1000,
            "Bandwidth(GB/s)": round(gbps, 4), "Large Packet Ratio": 1.0, "Size Distribution": {}}
    rdma = {"Transit Size(MB)": 0, "Transit Time(ms)": 0, "Bandwidth(GB/s)": 0, "Large Packet Ratio": 0,
            "Size Distribution": {}}
    return {"HCCS": hccs, "RDMA": rdma}


def _links(spec: ClusterSpec, rank: int) -> dict[str, object]:
    """communication_matrix.json's links of the rank's all-reduce: its local copy and its ring link."""
    nxt = _ring_next(spec, rank)
    local = {"Transport Type": "LOCAL", "Transit Size(MB)": spec.allreduce_mb, "Transit Time(ms)": 0.05,
             "Bandwidth(GB/s)": round(spec.allreduce_mb / 0.05, 4)}
    ring = {"Transport Type": "HCCS", "Transit Size(MB)": _ring_size_mb(spec),
            "Transit Time(ms)": _transit_us(spec, rank) / 1000,
            "Bandwidth(GB/s)": round(_link_gbps(spec, rank, nxt), 4)}
    return {f"{rank}-{rank}": local, f"{rank}-{nxt}": ring}


def _write_csv(path: Path, header: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        w.writerows(rows)


def _readme(spec: ClusterSpec) -> str:
    return (
        "# GENERATED multi-rank run (not measured)\n\n"
        "Written by `sample_traces/generate.py --ranks N` (generator/cluster.py). "
        f"{spec.ranks} ranks, {spec.steps} steps of {spec.layers * len(WORKLOAD)} kernels. "
        f"Slow rank: {spec.slow_rank} "
        f"({spec.slow_kernel} x{spec.slow_factor}). Slow link: {spec.slow_link} "
        f"({spec.link_gbps * spec.slow_link_factor:g} GB/s vs {spec.link_gbps:g} GB/s).\n"
    )
