"""The kernel author's loop (issue #24): one kernel under `msprof op`, diagnosed at any duration,
compared with its baseline with the reasons, and a gate that says how many samples it has.

The folders are generated in the real `msprof op` format (tests/support/single_op.py); the real
OpBasicInfo of ../shared is read where it is there."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest

from support import REAL_TRACES, SAMPLES, cli
from support.single_op import Launch, several_launches, single_op

# a vector kernel on one block of a 40-AIV device, 8 µs: the injected "Block Dim 1" problem
ONE_BLOCK = Launch(duration_us=8.0, block_dim=1)
FOUR_BLOCKS = Launch(duration_us=2.74, block_dim=4)


def _json(capsys: pytest.CaptureFixture[str], *args: str) -> dict:
    code, out, err = cli(capsys, *args, "-f", "json")
    assert code == 0, err
    return json.loads(out)


def test_a_3us_kernel_on_one_core_is_named_and_the_assumed_count_is_said(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = single_op(tmp_path / "run", Launch(duration_us=3.0, block_dim=1))
    report = _json(capsys, "analyze", str(run))
    kernels = report["profiles"][0]
    assert kernels["chip"]["assumed_figures"] == ["aic_count", "aiv_count"]  # no info.json in msprof op
    (f,) = [f for f in report["findings"] if f["code"] == "TS401"]
    assert f["kernels"] == ["AddCustom"]
    assert f["evidence"]["measured"]["cores"] == 40  # OpBasicInfo `Op Type` vector: the AIV count
    assert f["severity"] == "medium"  # 97.5 % of the device time, but on an assumed core count
    assert "if the device has 40 Vector cores" in f["message"]
    assert f["assumed"] == [
        "40 Vector cores: assumed for 910B4, not recorded in the profile (see the chip note)"
    ]
    assert any("time floors are 1 % of it" in w for w in kernels["warnings"])

    # the user states the chip: the count is known, the finding is high and says nothing of it
    report = _json(capsys, "analyze", str(run), "--chip", "910B4")
    (f,) = [f for f in report["findings"] if f["code"] == "TS401"]
    assert f["severity"] == "high" and "assumed" not in f and "if the device" not in f["message"]


def test_a_mix_kernel_counts_its_blocks_on_the_aic_cores(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Block Dim 20 (AIC) / Mix Block Dim 40 (AIV) fills a 20-AIC device: nothing wasted, although
    # 20 is half the 40 Vector cores
    full = single_op(tmp_path / "full", Launch(op_type="mix", block_dim=20, mix_block_dim=40))
    assert not [
        f for f in _json(capsys, "analyze", str(full), "--chip", "910B4")["findings"] if f["code"] == "TS401"
    ]
    half = single_op(tmp_path / "half", Launch(op_type="mix", block_dim=5, mix_block_dim=10))
    (f,) = [
        f for f in _json(capsys, "analyze", str(half), "--chip", "910B4")["findings"] if f["code"] == "TS401"
    ]
    assert f["evidence"]["measured"]["cores"] == 20 and f["evidence"]["measured"]["core_efficiency"] == 0.25


def test_skip_reasons_speak_msprof_op(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = single_op(tmp_path / "run", ONE_BLOCK)
    code, out, _ = cli(capsys, "analyze", str(run), "--width", "200")
    assert code == 0
    assert "TS201, TS203, TS204: needs msprof op --aic-metrics=PipeUtilization" in out
    assert "Level1" not in out  # a torch_npu notion: msprof op has no profiler level
    assert "TS401" not in out.split("not checked:")[1]  # it ran: Op Type and Block Dim are in the file


def test_the_floors_stay_for_a_whole_model_profile(capsys: pytest.CaptureFixture[str]) -> None:
    real = REAL_TRACES / "gpt_step_arith_591" / "kernel_details.csv"
    if not real.exists():
        pytest.skip(f"{real} is not on this machine")
    report = _json(capsys, "analyze", str(real))
    assert not any("time floors" in w for w in report["profiles"][0]["warnings"])


def test_diff_says_the_grid_first(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = single_op(tmp_path / "base", FOUR_BLOCKS)
    head = single_op(tmp_path / "head", ONE_BLOCK)
    code, out, err = cli(capsys, "diff", str(base), str(head), "--width", "250")
    assert code == 0, err
    assert (
        "AddCustom +192.0 %: Block Dim 4 → 1 (cores used 4 → 1 of 40 Vector cores (assumed), waves 1 → 1): "
        "at the same work per core the grid alone gives +300 %; time × blocks at once (the work of each "
        "core) −27 %"
    ) in out
    assert "regression gate (5 %, threshold only: 1 launch per side)" in out
    assert "1 launch per side: no spread to tell a change from noise" in out
    code, out, _ = cli(capsys, "diff", str(base), str(head), "-f", "json")
    d = json.loads(out)
    causes = d["kernels"][0]["causes"]
    assert [c["fact"] for c in causes] == ["grid", "core_time"]
    # log(4) / log(8.0 / 2.74): the grid accounts for more than the whole; the core time gave some back
    assert causes[0]["part"] == pytest.approx(math.log(4) / math.log(8.0 / 2.74), abs=1e-3)
    assert causes[0]["part"] + causes[1]["part"] == pytest.approx(1.0, abs=1e-3)
    assert d["gate"]["single_sample"] is True


def test_diff_of_several_launches_tests_the_spread(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # five launches per side (msprof op --launch-count=5): same grid, the Vector pipe got busier
    base = several_launches(
        tmp_path / "base",
        [
            Launch(duration_us=d, block_dim=40, pipes=(0.4, 0.1, 0.3, 0.1))
            for d in (10.0, 10.2, 9.9, 10.1, 10.0)
        ],
    )
    head = several_launches(
        tmp_path / "head",
        [
            Launch(duration_us=d, block_dim=40, pipes=(0.7, 0.1, 0.2, 0.1))
            for d in (13.0, 13.1, 12.9, 13.2, 13.0)
        ],
    )
    code, out, err = cli(capsys, "diff", str(base), str(head), "--width", "250")
    assert code == 0, err
    assert "regression gate (5 %, noise-aware: up to 5 vs 5 launches per kernel)" in out
    assert "AddCustom +30.0 %: Vector busy 4.0 µs → 9.1 µs per launch (40 → 70 % of it)" in out
    assert "Block Dim" not in out.split("why")[1]  # the grid did not change


def test_a_finding_that_only_crossed_a_floor_is_not_new(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # a whole-model-sized run (a 5 ms kernel keeps the 20 µs floor) where a one-block kernel goes
    # from 15 µs (below the floor) to 25 µs: the problem was there before
    big = Launch(name="MatMulBig", op_type="mix", duration_us=5000.0, block_dim=20, mix_block_dim=40)
    base = several_launches(tmp_path / "base", [big, Launch(duration_us=15.0, block_dim=1)])
    head = several_launches(tmp_path / "head", [big, Launch(duration_us=25.0, block_dim=1)])
    code, out, _ = cli(
        capsys, "diff", str(base), str(head), "--chip", "910B4", "-f", "json", "--fail-on-new", "low"
    )
    d = json.loads(out)
    assert code == 0  # not new, so not over the new-findings gate
    assert [f["code"] for f in d["findings"]["crossed_threshold"]] == ["TS401"]
    assert d["findings"]["new"] == [] and d["gate"]["new_findings"] == []


def test_the_real_tilelang_opbasicinfo(capsys: pytest.CaptureFixture[str]) -> None:
    """tilelang-ascend's sigmoid under `msprof op`: mix, Block Dim 96 / Mix 192 at 1650 MHz."""
    real = REAL_TRACES / "tilelang_sigmoid_app" / "trace_data" / "OpBasicInfo.csv"
    if not real.exists():
        pytest.skip(f"{real} is not on this machine")
    report = _json(capsys, "analyze", str(real), "--chip", "910B4")
    assert report["profiles"][0]["summary"]["time_by_core_type_us"] == {"MIX_AIC": 192.84}
    # 96 AIC blocks on 20 AIC cores: 5 waves, 96 % used — below no threshold
    assert not [f for f in report["findings"] if f["code"] == "TS401"]


def test_my_kernel_against_the_vendors_operator_in_one_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One `msprof op` run of both kernels on the same shapes, compared pipe by pipe."""
    run = several_launches(
        tmp_path / "both",
        [
            Launch(name="main_kernel", duration_us=12.0, block_dim=8, pipes=(0.3, 0.2, 0.6, 0.1)),
            Launch(name="aclnnAdd_AddAiCore_Add", duration_us=5.0, block_dim=40, pipes=(0.5, 0.1, 0.7, 0.2)),
        ],
    )
    code, out, err = cli(
        capsys,
        "diff",
        str(run),
        str(run),
        "--match",
        "main_kernel=aclnnAdd*",
        "--chip",
        "910B4",
        "--width",
        "250",
    )
    assert code == 0, err
    assert "main_kernel → aclnnAdd_AddAiCore_Add" in out
    assert (
        "−58.3 %: Block Dim 8 → 40 (cores used 8 → 40 of 40 Vector cores, waves 1 → 1): at the same work per "
        "core the grid alone gives −80 %; time × blocks at once (the work of each core) +108 %"
    ) in out
    assert "MTE2 (AIV) 60 % → 70 %" in out  # the pipe-by-pipe shares
    code, _, err = cli(capsys, "diff", str(run), str(run), "--match", "nope=aclnnAdd*")
    assert code == 2
    assert (
        "--match: no kernel of the base run is named 'nope'; expected one of: "
        "aclnnAdd_AddAiCore_Add, main_kernel" in err
    )
    code, _, err = cli(capsys, "diff", str(run), str(run), "--match", "main_kernel")
    assert code == 2 and "expected BASE_KERNEL=HEAD_KERNEL" in err


def test_runs_into_one_folder_are_launches_not_ranks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """msprof op run three times into one --output: one profile of three launches, a step each."""
    folder = tmp_path / "runs"
    folder.mkdir()
    for i, d in enumerate((2.7, 2.9, 2.8)):
        run = single_op(tmp_path / f"r{i}", Launch(duration_us=d, block_dim=4))
        (run / "OPPROF_20261206000000_GENERATEDTESTRUN").rename(folder / f"OPPROF_2026120600000{i}_GENERATED")
    report = _json(capsys, "analyze", str(folder))
    assert len(report["profiles"]) == 1 and report["profiles"][0]["rank"] is None
    assert report["profiles"][0]["summary"]["kernel_count"] == 3
    head = single_op(tmp_path / "head", ONE_BLOCK)
    code, out, _ = cli(capsys, "diff", str(folder), str(head), "--width", "250")
    assert code == 0
    assert "device time per step: 2.8 µs → 8.0 µs" in out and "over steps (min-max)" in out
    assert "regression gate (5 %, noise-aware on one side only: up to 3 vs 1 launches per kernel)" in out


def test_two_bundles_say_what_the_lowering_changed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The FA sample bundle against a copy whose IR has one more K-tile version, three stages and
    two more sync calls in its Ascend C (edited here: a generated sample, not a measurement)."""
    base = SAMPLES / "tilelang_fa_bundle"
    head = tmp_path / "head"
    shutil.copytree(base, head)
    ir = json.loads((head / "ir" / "ir.json").read_text())
    kernel = ir["kernels"][0]
    kernel["versions"]["k_l1"] = 2
    kernel["footprint"]["L1"]["bytes"] += 32768
    next(loop for loop in kernel["loops"] if loop["id"] == "L4")["num_stages"] = 3
    (head / "ir" / "ir.json").write_text(json.dumps(ir))
    with (head / "ir" / "kernel.cpp").open("a") as f:
        f.write("\nvoid more() { asc_sync_wait(1); asc_sync_wait(2); }\n")
    code, out, err = cli(capsys, "diff", str(base), str(head), "--width", "250")
    assert code == 0, err
    assert (
        "flash_fwd_kernel_mix_aic +0.0 %: buffers L1 128.0 KiB → 160.0 KiB; buffer versions k_l1 1 → 2; "
        "num_stages loop j (L4) 2 → 3; sync calls in the Ascend C 31 → 33 (asc_sync_wait 11 → 13)"
    ) in out


def test_launches_of_one_name_on_two_grids_are_not_given_a_median_grid(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """vLLM-Ascend's OnesLike runs with Block Dim 8 and 40 (two shapes); the run records no core
    count (no info.json) and its grids prove 40 Vector cores at least: on a device of 48 (--chip
    910B2) both launches leave cores idle, on two grids."""
    real = REAL_TRACES / "vllm_moe_lora_5groups" / "PROF_ArithmeticUtilization"
    if not real.exists():
        pytest.skip(f"{real} is not on this machine")
    report = _json(capsys, "analyze", str(real), "--chip", "910B2")
    (f,) = [f for f in report["findings"] if f["code"] == "TS401" and "OnesLike" in f["kernels"][0]]
    assert f["message"] == (
        "aclnnInplaceOne_OnesLikeAiCore_OnesLike: 8 to 40 blocks on 48 cores keep 40 % of the core time idle "
        "over 2 launches"
    )
    assert f["evidence"]["block_dim_range"] == [8, 40] and "assumed" not in f
    # without --chip: the fewest Vector cores the grids prove (40), said to be assumed
    report = _json(capsys, "analyze", str(real))
    (f,) = [f for f in report["findings"] if f["code"] == "TS401" and "OnesLike" in f["kernels"][0]]
    assert f["message"].endswith("if the device has 40 Vector cores (--chip gives the real count)")
    assert f["severity"] == "medium"
