"""#28 item 12: the words of the findings — one basis for a share (TS404), the replacement said
(TS405), TS601's severity from the step time the slow rank costs."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import statistics
from pathlib import Path

import pytest

from tilescope.findings import severity_for_share

from support import SAMPLES, cli

REAL = Path(__file__).resolve().parents[2].parent / "shared" / "traces" / "real"
GPT = REAL / "gpt_step_arith_591"  # 572 launches, host-bound (README of the real traces)
needs_real = pytest.mark.skipif(not GPT.is_dir(), reason="needs ../shared/traces/real")


@pytest.fixture(scope="module")
def gpt_findings() -> list[dict]:
    from tilescope.cli import main

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(["analyze", str(GPT), "-f", "json"]) == 0
    return list(json.loads(buf.getvalue())["findings"])


@needs_real
@pytest.mark.slow
def test_ts404_says_one_share_once(gpt_findings: list[dict]) -> None:
    """The message gives the idle time; its share is the saving's, of wall time, said once."""
    ts404 = next(f for f in gpt_findings if f["code"] == "TS404")
    assert "%" not in ts404["message"]
    # device-wide gaps, each stretch once across streams (#26 item 3; 111.82 ms when summed per stream)
    assert ts404["message"].startswith("the device idled 110.53 ms in the gaps between 572 kernels")
    assert ts404["saving_kind"] == "idle" and 0.2 < ts404["share_of_total"] < 0.23  # 21.4 % of wall


@needs_real
@pytest.mark.slow
def test_ts405_says_its_replacement(gpt_findings: list[dict]) -> None:
    casts = [f for f in gpt_findings if f["code"] == "TS405"]
    assert casts and all(f["evidence"]["op_type"] == "Cast" for f in casts)
    for f in casts:
        assert "evidence" not in f["recommendation"]
        assert f["recommendation"] == f"Move Cast to the AI Core: {f['evidence']['replacement']}."


@pytest.mark.slow
def test_ts601_severity_is_the_share_of_step_time_it_costs(capsys: pytest.CaptureFixture[str]) -> None:
    """The planted slow rank (3) of the 8-rank sample: its Computing over the others' median,
    summed over the steps of step_trace_time.csv, as a share of the step time (Stage)."""
    run = SAMPLES / "cluster_8rank"
    computing, stage = {}, {}
    for rank_dir in sorted(run.glob("*_ascend_pt")):
        rank = int(rank_dir.name.split("_")[1]) - 1000
        with open(rank_dir / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv", encoding="utf-8") as fh:
            rows = list(csv.DictReader(fh))
        computing[rank] = sum(float(r["Computing"]) for r in rows)
        stage[rank] = sum(float(r["Stage"]) for r in rows)
    gap = computing[3] - statistics.median(v for r, v in computing.items() if r != 3)
    code, out, _ = cli(capsys, "analyze", str(run), "-f", "json", "--no-cache")
    assert code == 0
    ts601 = next(f for f in json.loads(out)["findings"] if f["code"] == "TS601")
    assert ts601["evidence"]["rank"] == 3 and ts601["est_saving_us"] == pytest.approx(gap)  # 540 µs
    assert ts601["share_of_total"] == pytest.approx(gap / stage[3], rel=1e-3)  # 1.35 % of 40 ms
    assert ts601["severity"] == severity_for_share(gap / stage[3]).value == "low"
