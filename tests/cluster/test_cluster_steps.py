"""The per-step part of a multi-rank report at scale (issue #16): each rank's step-time spread in
the rank table, and the per-step rows binned past `tilescope.cluster.STEP_ROWS_CAP`, read the same
way by the report, `tilescope diff` and the dashboard's heatmap."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pandas as pd
import pytest

import tilescope.cluster as C
from tilescope.cli import main
from tilescope.diff_cluster import rank_steps


def _analyze_json(path: Path, capsys: pytest.CaptureFixture[str], *flags: str) -> tuple[int, dict[str, Any]]:
    code = main(["analyze", str(path), "-f", "json", "--no-cache", *flags])
    return code, json.loads(capsys.readouterr().out)


def test_real_rank_table_has_each_ranks_step_spread(
    real_traces: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """gpt3_2rank_memoryl0 profiled one step per rank: its spread is that step, Computing +
    Communication (not overlapped) + Free of torch_npu's own step_trace_time.csv."""
    run = real_traces / "gpt3_2rank_memoryl0"
    if not run.is_dir():
        pytest.skip("gpt3_2rank_memoryl0 not available")
    want = {}
    for rank in (0, 1):
        with (run / f"test_rank_{rank}" / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv").open() as f:
            (row,) = list(csv.DictReader(f))
        want[rank] = round(float(row["Computing"]) + float(row["Communication(Not Overlapped)"])
                           + float(row["Free"]), 3)
    assert want == {0: 291698.098, 1: 294586.56}
    code, report = _analyze_json(run, capsys)
    assert code == 0  # rank 0's short kernel row is skipped with a note
    section = report["cluster"]
    assert section["steps_bin_width"] == 1 and len(section["steps"]) == 2
    for r in section["ranks"]:
        assert r["steps"] == 1
        assert r["step_min_us"] == r["step_median_us"] == r["step_max_us"] == want[r["rank"]]


def test_bin_steps_averages_each_ranks_steps_in_equal_runs_of_ids() -> None:
    """Ten steps in bins of three ids (1-3, 4-6, 7-9, 10); rank 1 misses step 5: its bin averages
    the two steps it has and stays in the same column as the other ranks'."""
    rows = [
        {"rank": r, "step": s, "computing_us": 10.0 * s + r, "communication_not_overlapped_us": 1.0,
         "free_us": 0.0, "step_us": 10.0 * s + r + 1.0, "source": "step_trace_time.csv"}
        for r in (0, 1) for s in range(1, 11) if (r, s) != (1, 5)
    ]
    out, width = C.bin_steps(pd.DataFrame(rows), columns=4)
    assert width == 3
    got = [(int(x["rank"]), int(x["step"]), int(x["step_last"]), int(x["steps"]), x["computing_us"])
           for x in out.to_dict("records")]
    assert got == [
        (0, 1, 3, 3, 20.0), (0, 4, 6, 3, 50.0), (0, 7, 9, 3, 80.0), (0, 10, 10, 1, 100.0),
        (1, 1, 3, 3, 21.0), (1, 4, 6, 2, 51.0), (1, 7, 9, 3, 81.0), (1, 10, 10, 1, 101.0),
    ]
    same, one = C.bin_steps(pd.DataFrame(rows), columns=10)
    assert one == 1 and same.equals(pd.DataFrame(rows))


@pytest.fixture(scope="module")
def long_run(tmp_path_factory: pytest.TempPathFactory, sample_generator: ModuleType) -> Path:
    """4 generated ranks of 30 steps, each step's Computing made different (step x 100 + rank) so
    that a bin's mean is not any one step's value."""
    from generator.cluster import ClusterSpec, write_cluster_run

    out = tmp_path_factory.mktemp("long")
    for root in write_cluster_run(out, ClusterSpec(ranks=4, steps=30, slow_rank=None, slow_link=None)):
        path = root / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv"
        table = pd.read_csv(path)
        rank = int(json.loads(next(root.glob("profiler_info_*.json")).read_text())["rank_id"])
        table["Computing"] = table["Step"] * 100.0 + rank
        table.to_csv(path, index=False)
    return out


@pytest.mark.slow  # over 1 s each (#23: the quick loop keeps tests under 1 s)
def test_report_bins_past_the_cap_and_diff_and_heatmap_read_it_alike(
    long_run: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    code, whole = _analyze_json(long_run, capsys)
    assert code == 0
    assert whole["cluster"]["steps_bin_width"] == 1 and len(whole["cluster"]["steps"]) == 120
    monkeypatch.setattr(C, "STEP_ROWS_CAP", 40)  # 4 ranks: 10 bins of 3 steps each
    code, binned = _analyze_json(long_run, capsys)
    assert code == 0
    section = binned["cluster"]
    assert section["steps_bin_width"] == 3 and len(section["steps"]) == 40
    first = next(r for r in section["steps"] if r["rank"] == 2)
    assert (first["step"], first["step_last"], first["steps"]) == (1, 3, 3)
    assert first["computing_us"] == pytest.approx((100 + 200 + 300) / 3 + 2)
    # the rank table is the same: sums and the step-time spread come from every step
    assert binned["cluster"]["ranks"] == whole["cluster"]["ranks"]
    # diff reads each rank's spread from the rank table: the same from both reports
    assert rank_steps(binned) == rank_steps(whole)
    spread = rank_steps(whole)[2].step
    assert spread is not None and (spread.lo, spread.hi) == (
        whole["cluster"]["ranks"][2]["step_min_us"], whole["cluster"]["ranks"][2]["step_max_us"])

    from tilescope.dashboard.data import ClusterEntry
    from tilescope.dashboard.ranks import step_grid

    def grid(report: dict[str, Any], columns: int) -> tuple[Any, ...]:
        entry = ClusterEntry("c0", "run", report["cluster"], [], {})
        values, ranks, labels, width = step_grid(entry, "computing_us", max_columns=columns)
        return values.round(6).tolist(), ranks, labels, width

    shown = grid(binned, 180)
    assert shown == grid(whole, 10)  # the report's bins are the dashboard's own
    assert shown[2][:2] == ["1–3", "4–6"] and shown[3] == 3
