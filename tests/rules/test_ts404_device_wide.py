"""TS404 counts idle device-wide (#26): an idle stretch inside the waits of launches on two streams
is counted once, and time another stream's task was running is not idle.

Asserted on the real `gpt_step_arith_591` (streams 16 and 17), recomputed here from its raw CSV
with a plain sweep, and on a generated two-stream table (documented canonical columns)."""

from __future__ import annotations

import csv
from decimal import Decimal
from pathlib import Path

import pandas as pd
import pytest

from tilescope.analysis import analyze
from tilescope.chips import get_chip
from tilescope.profile import Profile, SourceInfo
from tilescope.rules._columns import NON_COMPUTE_TYPES

from support import REAL_TRACES

GPT = REAL_TRACES / "gpt_step_arith_591" / "kernel_details.csv"
# which task types are not compute is the rule's vocabulary, not what this test checks
NOT_COMPUTE = NON_COMPUTE_TYPES


def _ns(us: str) -> int:
    return int((Decimal(us) * 1000).to_integral_value())


def _sweep_idle(rows: list[dict[str, str]], max_gap_us: float) -> tuple[float, float]:
    """(device-wide idle µs in stretches up to max_gap_us, the same summed per launch as before):
    a plain merge of intervals, written apart from the rule's vectorised one."""
    busy, windows, per_launch = [], [], 0.0
    for r in rows:
        start, dur = _ns(r["Start Time(us)"]), _ns(r["Duration(us)"])
        kind = r["Accelerator Core"].upper()
        if kind in NOT_COMPUTE and kind not in ("HCCL", "COMMUNICATION"):
            continue
        busy.append((start, start + dur))
        wait = _ns(r["Wait Time(us)"])
        if kind not in NOT_COMPUTE and wait > 0:
            windows.append((start - wait, start))
            if wait <= max_gap_us * 1000:
                per_launch += wait / 1000

    def merged(spans: list[tuple[int, int]]) -> list[list[int]]:
        out: list[list[int]] = []
        for s, e in sorted(spans):
            if out and s <= out[-1][1]:
                out[-1][1] = max(out[-1][1], e)
            else:
                out.append([s, e])
        return out

    idle = 0
    busy_m = merged(busy)
    for s, e in merged(windows):
        pieces = [(s, e)]
        for bs, be in busy_m:
            pieces = [q for ps, pe in pieces for q in ((ps, min(pe, bs)), (max(ps, be), pe)) if q[1] > q[0]]
        idle += sum(pe - ps for ps, pe in pieces if pe - ps <= max_gap_us * 1000)
    return idle / 1000, per_launch


@pytest.mark.skipif(not GPT.is_file(), reason=f"real traces not found at {GPT}")
def test_gpt_step_idle_once_across_streams() -> None:
    from tilescope.io.load import load_profile

    with GPT.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert {"16", "17"} <= {r["Stream ID"] for r in rows}  # and N/A: the HCCL rows
    idle, per_launch = _sweep_idle(rows, 5000.0)
    r = analyze(load_profile(GPT.parent))
    (f,) = [f for f in r.findings if f.code == "TS404"]
    assert f.evidence["idle_counted"] == "device-wide"
    assert f.evidence["idle_us"] == pytest.approx(idle, abs=0.01)
    # stream 17's AI_CPU / DSA tasks waited through stream 16's kernels and idle alike: counted
    # per launch, about 1.3 ms more (less what ran under an all-reduce) than the device was idle
    assert idle < per_launch - 1_000.0
    assert f.evidence["idle_us"] == pytest.approx(110_532.79, abs=0.01)


def test_generated_two_streams() -> None:
    t0 = 1_700_000_000_000_000_000
    us = 1000

    def row(name: str, stream: int, start_us: float, dur: float, wait: float) -> dict[str, object]:
        return {
            "name": name,
            "op_type": name,
            "core_type": "AI_VECTOR_CORE",
            "stream_id": stream,
            "start_ns": t0 + int(start_us * us),
            "duration_us": dur,
            "wait_us": wait,
            "block_dim": 8,
        }

    rows = []
    # stream 1: 2-µs kernels every 100 µs; stream 2: one kernel at 50 µs of 2 µs, then one at 500
    for i in range(10):
        rows.append(row(f"a{i}", 1, 100.0 * i, 2.0, 98.0 if i else 0.0))
    rows.append(row("b0", 2, 50.0, 2.0, 0.0))
    rows.append(row("b1", 2, 500.0, 2.0, 448.0))  # waits 52..500: the same idle as stream 1's
    p = Profile(SourceInfo(Path("generated"), "kernel_csv"), pd.DataFrame(rows), get_chip("910B2"))
    r = analyze(p)
    (f,) = [f for f in r.findings if f.code == "TS404"]
    # device busy 0..2, 50..52, 100..102, ...; idle: 9 gaps of 98 µs less b0's 2 µs, once
    assert f.evidence["idle_us"] == pytest.approx(9 * 98.0 - 2.0)
    assert f.evidence["busy_us"] == pytest.approx(11 * 2.0)


DB_RANK0 = REAL_TRACES / "torch_2rank_pipeutil_db" / "rank0_ascend_pt"


@pytest.mark.skipif(not DB_RANK0.is_dir(), reason=f"real traces not found at {DB_RANK0}")
def test_db_export_idle_is_the_profilers_free_time() -> None:
    """The database export's rank 0 has compute on stream 2, DSA on 3 and the all-reduces on 4: the
    gaps counted once across them are exactly the Free time of its own analysis.db StepTraceTime
    (README: 25,258.144 µs); counted per stream they were 28.60 ms."""
    from tilescope.io.load import load_profile

    r = analyze(load_profile(DB_RANK0))
    (f,) = [f for f in r.findings if f.code == "TS404"]
    assert f.evidence["idle_us"] == pytest.approx(25_258.144, abs=1e-3)
    assert f.evidence["long_gaps"]["count"] == 0
