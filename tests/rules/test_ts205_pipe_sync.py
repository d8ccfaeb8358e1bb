"""TS205 excessive-pipe-sync and TS203's waiting lines on bundles with GENERATED simulator output
(tests/support/simulator.py: the FA sample's real Ascend C and line map, made-up cycles; the
layout and event shapes of the documented format and the real trimmed public output)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from test_rules_fixtures import FIXTURES, fixture_profile

from tilescope.config import Config
from tilescope.engine import run_rules

from support import SAMPLES, cli
from support.simulator import CORES, sync_bin, write_fa_simulator

SET, WAIT, MOVE = 64, 960, 10_800  # cycles per core of each instruction of the generated CSVs


def _bundle(root: Path, wait_scale: float, with_bin: bool) -> Path:
    shutil.copytree(SAMPLES / "tilelang_fa_bundle", root)
    write_fa_simulator(root / "profile", wait_scale=wait_scale)
    if with_bin:
        sync_bin(next((root / "profile").glob("OPPROF_*")) / "simulator")
    return root


def _findings(capsys: pytest.CaptureFixture[str], bundle: Path) -> dict[str, dict]:
    code, out, err = cli(capsys, "analyze", str(bundle), "-f", "json")
    assert code == 0, err
    return {f["code"]: f for f in json.loads(out)["findings"]}


@pytest.mark.slow
def test_the_generated_fa_run_is_quiet_at_its_own_numbers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """8.7 % of the cycles in flags (4,096 of 47,296): under the 20 % threshold, so no TS205; TS203
    (which fires on the sample's board numbers) names the flag lines it can place: the SET_FLAGs."""
    found = _findings(capsys, _bundle(tmp_path / "b", 1.0, with_bin=False))
    assert "TS205" not in found
    latency = found["TS203"]
    first = latency["evidence"]["measured_lines"][0]
    assert (first["ascendc_lines"], first["measure"], first["source_lines"]) == ([95], "sync cycles", [49])
    assert "the simulator puts 50 % of sync cycles on Ascend C 95 `asc_sync_notify(" in latency["message"]


@pytest.mark.slow
def test_waits_of_most_of_the_cycles_fire_and_name_the_waiting_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    n = len(CORES)
    spent, every = (SET + 20 * WAIT) * n, (SET + 20 * WAIT + MOVE) * n
    found = _findings(capsys, _bundle(tmp_path / "b", 20.0, with_bin=True))
    f = found["TS205"]
    assert f["evidence"]["sync_share"] == round(spent / every, 4)
    assert f["message"].startswith(
        f"flash_fwd_kernel_mix_aic: sync and barrier instructions take {round(100 * spent / every)} % of "
        f"the simulated instruction cycles ({spent:,} of {every:,}; >= 20 %); the simulator puts 50 % of "
        "sync wait cycles on Ascend C 96 `asc_sync_wait(PIPE_MTE2, PIPE_MTE1, static_cast<event_t>(0));` "
        "before l.49 (k_l1 (L1) -> k_l0 (L0B))"
    )
    first = f["evidence"]["measured_lines"][0]
    assert first["placed_by"] == "next statement" and first["waiting_pipes"] == ["SCALAR"]
    assert first["amount"] == 20 * WAIT * sum("cubecore" in c for c in CORES)
    assert (f["locations"][0]["line"], f["locations"][0]["stage"]) == (49, "source")
    assert (f["locations"][1]["line"], f["locations"][1]["stage"]) == (96, "ascendc")
    assert "T.Pipelined" in f["recommendation"]
    # TS203 names the same waiting line first
    assert found["TS203"]["evidence"]["measured_lines"][0]["ascendc_lines"] == [96]


@pytest.mark.slow
def test_waits_the_data_cannot_place_are_said_not_guessed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = _findings(capsys, _bundle(tmp_path / "b", 20.0, with_bin=False))["TS205"]
    assert "which line waited is not in the data" in f["message"]
    assert f["evidence"]["sync_unplaced_cycles"] == {"WAIT_FLAG": 20 * WAIT * len(CORES)}
    assert f["evidence"]["measured_lines"][0]["measure"] == "sync cycles"  # the SET_FLAG lines


def test_the_threshold_comes_from_config() -> None:
    prof = fixture_profile(FIXTURES / "ts205_firing.json")  # 50 % of the cycles in flags
    assert [f.code for f in run_rules(prof, Config(select=["TS205"])).findings] == ["TS205"]
    quieter = Config(select=["TS205"], rules={"TS205": {"max_sync_share": 0.6}})
    assert run_rules(prof, quieter).findings == []


def test_without_per_line_data_the_rule_is_skipped_with_what_it_needs() -> None:
    prof = fixture_profile(FIXTURES / "ts203_firing.json")
    prof.ir = {"kernels": []}
    result = run_rules(prof, Config(select=["TS205"]))
    assert result.findings == [] and "TS205" not in result.rules_run
    assert "per-line instruction cycles" in json.dumps([str(s) for s in result.skipped])
