"""Issue #26 item 7: a rule's `max_findings` limit is applied after the speed-of-light cap of the
savings (cap, then rank, then cut), and a kernel the cap leaves nothing to recover on is no finding:
the run says how many in one note."""

from __future__ import annotations

from pathlib import Path

import pytest

from tilescope.analysis import analyze
from tilescope.config import Config
from tilescope.engine import AnalysisResult
from tilescope.io.load import load_profiles
from tilescope.profile import Profile
from tilescope.summary import kernel_time


@pytest.fixture(scope="module")
def rank0(real_traces: Path) -> tuple[Profile, AnalysisResult]:
    p = load_profiles(real_traces / "torch_2rank_pipeutil_text")[0]
    return p, analyze(p, Config())


def test_a_kernel_at_its_speed_of_light_takes_no_place(rank0: tuple[Profile, AnalysisResult]) -> None:
    p, r = rank0
    times = kernel_time(p.kernels)
    # trans_TransData_2 runs at its speed of light: 27.081 µs measured, 27.081 µs at the ceiling
    t = times["trans_TransData_2"]
    assert (round(t.total_us, 3), round(t.sol_us, 3)) == (27.081, 27.081)
    ts203 = [f for f in r.findings if f.code == "TS203"]
    assert len(ts203) == 20  # the limit, filled with kernels that have time to recover
    assert all(f.est_saving_us > 0 for f in ts203)
    assert not any("trans_TransData_2" in f.kernels for f in r.findings)
    assert (
        "TS203: 2 kernels flagged but already at their speed of light (trans_TransData_2, "
        "trans_TransData_19): no time to recover, not listed"
    ) in r.notes
    # before: trans_TransData_5 (12.285 µs estimated, 4.425 once capped) and trans_TransData_2
    # (0) held two of the 20 places; now the 11.8 µs NLLLoss memset is listed and they are not
    listed = {f.kernels[0]: f.est_saving_us for f in ts203}
    assert "trans_TransData_5" not in listed
    assert round(listed["aclnnNLLLoss_NLLLossAiCore_MemSet"], 3) == 11.816
    assert min(listed.values()) > times["trans_TransData_5"].gap_us
    assert ts203[-1].evidence["more_kernels_not_listed"] == 14


def test_the_note_reaches_the_report(rank0: tuple[Profile, AnalysisResult]) -> None:
    from tilescope.report.data import build_report

    p, r = rank0
    report = build_report(p, r)
    assert any(
        w.startswith("TS401: 2 kernels flagged but already at") for w in report["profiles"][0]["warnings"]
    )
