"""Small profiler folders written for a test."""

from __future__ import annotations

from pathlib import Path

OP_SUMMARY_HEADER = (
    "Device_id,Model ID,Task ID,Stream ID,Op Name,OP Type,OP State,Task Type,Task Start Time(us),"
    "Task Duration(us),Task Wait Time(us),Block Dim,Mix Block Dim,HF32 Eligible,Input Shapes,"
    "Input Data Types,Input Formats,Output Shapes,Output Data Types,Output Formats,Context ID"
)


def _op_summary_rows(device: int, matmul_us: float) -> list[str]:
    rows, t = [], 1_700_000_000_000_000.0
    tasks = [("MatMulV2", "AI_CORE", matmul_us), ("Add", "AI_VECTOR_CORE", 20.0),
             ("MatMulV2", "AI_CORE", matmul_us), ("hcom_allReduce__1_1", "HCCL", 500.0)]
    for i, (name, core, dur) in enumerate(tasks):
        rows.append(f'{device},4294967295,{i},2,{name},{name},static,{core},{t:.3f}\t,{dur},0,24,0,NO,'
                    '"""4096,4096""",DT_BF16,FORMAT_ND,"""4096,4096""",DT_BF16,FORMAT_ND,N/A')
        t += dur + 10.0
    return rows


def write_two_device_prof(root: Path) -> Path:
    """An msprof PROF_ of devices 0 and 1 in one op_summary (no step ids, no communication files):
    the same kernels, MatMulV2 180 µs on device 0 and 270 µs on device 1."""
    prof = root / "PROF_000001_20260101000000000_ABCDEFGHIJKLMNOP"
    out = prof / "mindstudio_profiler_output"
    out.mkdir(parents=True)
    (prof / "device_0").mkdir()
    (prof / "device_1").mkdir()
    rows = _op_summary_rows(0, 180.0) + _op_summary_rows(1, 270.0)
    (out / "op_summary_20260101000000.csv").write_text(OP_SUMMARY_HEADER + "\n" + "\n".join(rows) + "\n")
    return prof
