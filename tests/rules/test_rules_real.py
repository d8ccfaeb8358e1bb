"""Exact findings on the real profiler output in ../shared/traces/real (skipped when absent)."""

from __future__ import annotations

from typing import Any

import pytest

from tilescope.analysis import analyze
from tilescope.engine import AnalysisResult
from tilescope.profile import Profile

from support import REPO_ROOT

REAL = REPO_ROOT.parent / "shared" / "traces" / "real"
pytestmark = pytest.mark.skipif(not REAL.is_dir(), reason=f"real traces not found at {REAL}")


def _load(name: str) -> tuple[Profile, AnalysisResult]:
    from tilescope.io.load import load_profile

    p = load_profile(REAL / name)
    return p, analyze(p)


def _by_code(r: AnalysisResult, code: str) -> list[Any]:
    return [f for f in r.findings if f.code == code]


def test_gpt_unfused_attention_every_occurrence() -> None:
    _p, r = _load("gpt_step_arith_591")
    attn = [f for f in _by_code(r, "TS102") if f.evidence["pattern"]["id"] == "unfused-attention"]
    assert len(attn) == 1  # identical occurrences grouped into one finding ...
    f = attn[0]
    assert f.occurrences == 2  # ... that lists each of the two occurrences in the step
    assert "npu_fusion_attention" in f.recommendation
    occ = f.evidence["occurrences"]
    assert [k["name"] for k in occ[0]["kernels"]] == [
        "BatchMatMul96",
        "Mul97",
        "ScaledMaskedSoftmax98",
        "DropOutDoMask100",
        "AsStrided93",
        "BatchMatMul101",
    ]
    assert [k["name"] for k in occ[1]["kernels"]] == [
        "BatchMatMul96",
        "Mul97",
        "ScaledMaskedSoftmax108",
        "DropOutDoMask100",
        "AsStrided93",
        "BatchMatMul101",
    ]
    # the AI_CPU Cast and the DSA_SQE mask generator on stream 17 sit inside the first occurrence
    assert [(k["name"], k["core_type"]) for k in occ[0]["interleaved"]] == [
        ("trans_Cast_18", "AI_CPU"),
        ("StatelessDropOutGenMask99/DSASTATELESSGENBITMASK", "DSA_SQE"),
    ]
    assert occ[1]["interleaved"] == []
    assert occ[0]["device_us"] == pytest.approx(45.5 + 15.14 + 91.84 + 26.34 + 12.52 + 46.0)
    assert occ[1]["device_us"] == pytest.approx(44.46 + 15.52 + 91.12 + 27.72 + 11.94 + 46.2)
    # saving = the non-matmul steps of both occurrences
    assert f.est_saving_us == pytest.approx(15.14 + 91.84 + 26.34 + 12.52 + 15.52 + 91.12 + 27.72 + 11.94)


def test_gpt_exact_findings() -> None:
    _p, r = _load("gpt_step_arith_591")
    # device time: the union of the compute kernels' intervals (test_summary checks it against the
    # raw file); their durations sum to 50408.3 µs, HCCL excluded
    assert r.total_device_us == pytest.approx(49171.58)
    got = [(f.code, f.occurrences, round(f.est_saving_us, 2)) for f in r.findings]
    assert got == [
        # idle time between kernels, a share of the wall time; 5.3 ms of the gaps overlap one of
        # the 19 HCCL tasks (communication, not idle) and do not count (#26); idle is device-wide:
        # stream 17's AI_CPU / DSA waits over stream 16's idle stretches count once (563 gaps and
        # 110,721.76 µs when each stream's waits were summed: tests/rules/test_ts404_device_wide.py)
        ("TS404", 560, 109434.98),
        ("TS102", 4, 874.48),
        ("TS101", 4, 588.02),
        ("TS405", 5, 326.3),
        ("TS102", 2, 292.14),
        ("TS102", 2, 258.02),
        ("TS405", 2, 112.88),
        ("TS102", 2, 55.54),
        ("TS101", 25, 31.18),
        ("TS101", 2, 22.64),
    ]
    ids = [f.evidence["pattern"]["id"] for f in _by_code(r, "TS102")]
    assert ids == ["unfused-add-layer-norm", "unfused-attention", "matmul-epilogue", "matmul-epilogue"]
    assert {s.code for s in r.skipped} >= {"TS202", "TS203", "TS204", "TS301", "TS302", "TS303"}
    # ArithmeticUtilization's per-dtype Cube/Vector ratios give both busy shares: TS201 runs, quietly
    assert "TS201" in r.rules_run and not _by_code(r, "TS201")
    assert not r.errors
    host = r.findings[0]
    assert host.saving_kind == "idle"
    assert host.share_of_total == pytest.approx(109434.98 / 516885.564, abs=1e-6)  # of the wall time
    assert all(f.saving_kind == "work" for f in r.findings if f.code in ("TS101", "TS102", "TS405"))


def test_fa_has_no_unfused_attention() -> None:
    _p, r = _load("fa_pipeutil_29")
    assert not [f for f in _by_code(r, "TS102") if f.evidence["pattern"]["id"] == "unfused-attention"]
    assert _by_code(r, "TS102") == []
    imb = _by_code(r, "TS201")
    fwd = next(
        f for f in imb if f.kernels == ("aclnnFlashAttentionScore_FlashAttentionScore_FlashAttentionScore",)
    )
    # by hand from the raw rows: per launch c = aic_mac_time / Duration, v = aiv_vec_time / Duration
    # (shares of the launch: kernel_details ratios are relative to each side's own time), hidden =
    # min(c, v) - max(0, c + v - 1), saving = hidden x Duration
    import csv

    raw = csv.DictReader((REAL / "fa_pipeutil_29" / "kernel_details.csv").open(newline=""))
    expected = 0.0
    for row in raw:
        if row["Name"] != fwd.kernels[0]:
            continue
        d = float(row["Duration(us)"])
        c, v = float(row["aic_mac_time(us)"]) / d, float(row["aiv_vec_time(us)"]) / d
        expected += (min(c, v) - max(0.0, c + v - 1)) * d
    assert fwd.occurrences == 4 and fwd.est_saving_us == pytest.approx(expected, abs=1e-3)
    assert fwd.est_saving_us == pytest.approx(515.913, abs=1e-3)
    mb = _by_code(r, "TS202")
    assert [(f.kernels[0], f.occurrences) for f in mb] == [
        ("aclnnMatmul_MatMulCommon_MatMulV2", 4),
        ("aclnnAdd_AddAiCore_Add", 4),
    ]
    wc = _by_code(r, "TS401")
    assert wc[0].evidence["measured"]["block_dim"] == 16 and wc[0].evidence["measured"]["cores"] == 20


def test_timeline_only_matches_host_adam_pattern() -> None:
    _p, r = _load("torch_timeline_3670")
    adam = _by_code(r, "TS102")
    assert len(adam) == 1 and adam[0].occurrences == 10
    assert adam[0].evidence["pattern"]["id"] == "unfused-adam"
    assert adam[0].kernels[0] == "aten::mul_"
    assert [f.kernels[0] for f in _by_code(r, "TS405")] == [
        "aclnnReduceSum_CastAiCpu_Cast",
        "aclnnCast_CastAiCpu_Cast",
    ]
    skipped = {s.code: s.missing for s in r.skipped}
    assert skipped["TS403"] == ("timeline.counters:AI Core Freq",)


def _gaps_under_collectives(table: Any, max_gap_us: float) -> tuple[float, float]:
    """(gaps up to `max_gap_us` before compute kernels, the part of them an HCCL row's span
    covers), in µs, computed here from kernel_details.csv's own columns with exact decimals."""
    from decimal import Decimal

    columns = ("Start Time(us)", "Duration(us)", "Wait Time(us)")
    rows = [(*(Decimal(str(v).strip()) for v in values), str(core))
            for *values, core in zip(*(table[c] for c in columns), table["Accelerator Core"], strict=True)]
    hccl = [(s, s + d) for s, d, _w, c in rows if c == "HCCL"]
    gaps = under = Decimal(0)
    for s, _d, w, c in rows:
        if c == "HCCL" or w <= 0:
            continue
        covered = sum((max(Decimal(0), min(s, e) - max(s - w, b)) for b, e in hccl), Decimal(0))
        if w - covered <= Decimal(str(max_gap_us)):
            gaps += w
            under += covered
    return float(gaps), float(under)


def test_host_bound_gaps_leave_out_time_a_collective_ran() -> None:
    """torch_2rank_pipeutil_text rank 0: of the gaps before compute kernels, the parts while an
    HCCL all-reduce ran are communication, not idle (#26): the gaps TS404 counts are those less
    what the four all-reduces cover, and they fit in the device's idle time (25,744 µs).
    Before, 34.9 ms of gaps were counted (more than the idle time) and the 65.7 ms gap under the
    first all-reduce was called data loading or a sync."""
    import pandas as pd

    from tilescope.summary import device_time

    p, r = _load("torch_2rank_pipeutil_text/rank0_ascend_pt")
    (f,) = _by_code(r, "TS404")
    out = REAL / "torch_2rank_pipeutil_text/rank0_ascend_pt/ASCEND_PROFILER_OUTPUT"
    table = pd.read_csv(out / "kernel_details.csv", dtype=str)
    gaps, under = _gaps_under_collectives(table, f.evidence["thresholds"]["max_gap_us"])
    idle = device_time(p.kernels).idle_us
    assert idle == pytest.approx(25744.069)
    # device-wide (#26): 0.012 µs of those per-launch gaps lie on both stream 2 and stream 3 (the
    # DSA tasks) or under the other stream's task: counted once, or not at all
    assert f.evidence["idle_us"] == pytest.approx(gaps - under - 0.012, abs=1e-3)
    assert f.evidence["idle_us"] < idle < gaps
    assert f.evidence["long_gaps"]["count"] == 0  # the gap under the first all-reduce is no sync
    assert f.evidence["gaps_under_communication_us"] > 75_000.0
    assert "ran under communication" in f.message
