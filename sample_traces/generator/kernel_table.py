"""torch_npu kernel_details.csv: the 46-column header and vectorised row formatting.

Vectorised (numpy per column), so the 1M-row benchmark file uses the same code path as the samples.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .model import (
    AIC_CORES,
    FREQ_MHZ,
    MODEL_ID_NONE,
    KernelSpec,
    Launch,
)

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
