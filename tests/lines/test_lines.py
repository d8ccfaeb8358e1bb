"""`tilescope lines`: measured cycles per TileLang / Ascend C line from msprof op simulator output
(issue #25). The simulator folders are generated in the documented layout from the FA sample
bundle's own Ascend C and line map (tests/support/simulator.py says so); the values asserted are
the ones written, read back through the CLI."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tilescope.io.simulator import NO_DEBUG_INFO, read_simulator
from tilescope.report.data import validate_report

from support import SAMPLES, cli
from support.simulator import CORES, FA_LINES, HEADER, KERNEL_CPP, core_cycles, write_fa_simulator
from support.visualize_bin import BOARD_LINES, write_visualize_bin


@pytest.fixture
def bundle(tmp_path: Path) -> Path:
    b = tmp_path / "fa"
    shutil.copytree(SAMPLES / "tilelang_fa_bundle", b)
    write_fa_simulator(b / "profile")
    return b


def _cycles(*lines: int) -> int:
    return sum(core_cycles(core, line) for core in CORES for line in lines)


def test_the_reader_reads_every_core_exactly(bundle: Path) -> None:
    sim = read_simulator(bundle)
    assert sim.cores == list(CORES)
    assert (
        len(sim.code) == sum(1 for c in CORES for line in FA_LINES if core_cycles(c, line)) + 2
    )  # + header rows
    row = sim.code[(sim.code["core"] == "core1.cubecore0") & (sim.code["line"] == 101)].iloc[0]
    assert row["file"] == KERNEL_CPP and row["cycles"] == 28160 and row["call_count"] == 16
    assert set(sim.instr["pipe"]) == {"SCALAR", "MTE2"} and len(sim.instr) == 3 * len(CORES)
    pipes = sim.pipes[(sim.pipes["core"] == "core0.veccore0") & (sim.pipes["line"] == 10)].iloc[0]
    assert pipes["pipe"] == "VECTOR" and pipes["busy_us"] == pytest.approx(5120 / 1800)


def test_lines_of_a_bundle_roll_up_to_tilelang_lines(
    bundle: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = cli(capsys, "lines", str(bundle), "-f", "json")
    assert code == 0, err
    r = json.loads(out)
    total = _cycles(*FA_LINES)
    assert r["mapped"] and r["kernel_file"] == KERNEL_CPP and r["total_cycles"] == total  # header not added
    top = r["lines"][0]
    assert top["source_lines"] == [50] and top["what"] == "s_acc += q_l0 @ k_l0"
    assert top["cycles"] == _cycles(101) == 53760 and top["share"] == pytest.approx(53760 / total, abs=1e-6)
    assert (top["core_min_cycles"], top["core_max_cycles"]) == (25600, 28160)
    assert list(top["pipes_us"]) == ["CUBE"] and top["ascendc"][0]["line"] == 101
    # lines 5 and 10 sit inside flash_fwd_kernel_simt_vf_0, mapped (definition line 4) from l.41 and l.44
    vf = next(x for x in r["lines"] if x["source_lines"] == [41, 44])
    assert vf["cycles"] == _cycles(5, 10) and sorted(c["line"] for c in vf["ascendc"]) == [5, 10]
    loose = next(x for x in r["lines"] if not x["source_lines"])
    assert [c["line"] for c in loose["ascendc"]] == [91]  # a sync wait: no TileLang line
    assert r["other_files"] == [{"file": HEADER, "line": 120, "cycles": 600.0}]
    assert r["sync"] == {"SET_FLAG": 128.0, "WAIT_FLAG": 128.0}
    code, out, _ = cli(capsys, "lines", str(bundle), "--top", "2", "--width", "200")
    assert code == 0
    assert "48.3 %          53,760 cycles  [25,600–28,160 per core]  l.50  s_acc += q_l0 @ k_l0" in out
    assert "pipes: CUBE 100 %; Ascend C lines 101" in out and "l.39" not in out  # --top 2


def test_a_simulator_folder_alone_gives_ascend_c_lines(
    bundle: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sim = next((bundle / "profile").glob("OPPROF_*"))
    code, out, _ = cli(capsys, "lines", str(sim), "-f", "json")
    r = json.loads(out)
    assert code == 0 and not r["mapped"] and r["lines"][0]["ascendc"][0]["line"] == 101


def test_a_kernel_built_without_g_gets_the_advice(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = write_fa_simulator(tmp_path / "nog", with_lines=False)
    code, out, _ = cli(capsys, "lines", str(root), "--width", "300")
    assert code == 0 and NO_DEBUG_INFO in out and "built without -g" in NO_DEBUG_INFO


def test_bad_input_is_one_line_naming_file_and_row(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = write_fa_simulator(tmp_path / "bad")
    f = next(root.rglob("core0.cubecore0_code_exe.csv"))
    lines = f.read_text().splitlines()
    lines[2] = "kernel.cpp,16,100,0.1,"  # no :line
    f.write_text("\n".join(lines) + "\n")
    code, out, err = cli(capsys, "lines", str(root))
    assert code == 2 and out == ""
    assert err.strip().count("\n") == 0 and str(f) in err and "line 3" in err and "path:line" in err
    code, _, err = cli(capsys, "lines", str(tmp_path / "bad" / "GENERATED.txt"))
    assert code == 2 and "a msprof op simulator folder" in err


def test_analyze_of_a_simulator_run_points_at_lines(bundle: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sim = next((bundle / "profile").glob("OPPROF_*"))
    code, _, err = cli(capsys, "analyze", str(sim))
    assert code == 2 and f"`tilescope lines {sim}` reads it" in err


@pytest.mark.slow  # over 1 s each (#23: the quick loop keeps tests under 1 s)
def test_findings_about_the_bundle_kernel_name_its_measured_lines(
    bundle: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = cli(capsys, "analyze", str(bundle), "-f", "json")
    assert code == 0, err
    found = {f["code"]: f for f in json.loads(out)["findings"]}
    imbalance = found["TS201"]  # Cube/Vector overlap: the hottest Cube line and the hottest Vector line
    assert [m["source_lines"] for m in imbalance["evidence"]["measured_lines"]] == [[50], [41, 44]]
    cube = imbalance["evidence"]["measured_lines"][0]
    assert cube["pipes"] == ["CUBE"] and cube["ascendc_lines"] == [101]
    assert cube["unit"] == "µs" and cube["amount"] == pytest.approx(
        sum(core_cycles(c, 101) for c in CORES) / 1800, abs=1e-3
    )
    assert "the simulator puts 100 % of Cube time on l.50 (s_acc += q_l0 @ k_l0)" in imbalance["message"]
    first = imbalance["locations"][0]
    assert (first["file"], first["line"], first["stage"]) == (
        "sample_traces/kernels/flash_attention.py",
        50,
        "source",
    )
    assert first["label"] == "measured: 100 % of Cube time (simulator)"
    assert found["TS302"]["evidence"]["measured_lines"][0]["source_lines"] == [41, 44]  # Vector lines
    # block imbalance: the line whose cycles differ most between the simulated cores
    spread = found["TS402"]["evidence"]["measured_lines"][0]
    assert spread["source_lines"] == [50] and (spread["core_min_cycles"], spread["core_max_cycles"]) == (
        25600,
        28160,
    )
    assert "in the simulator the cores differ most on l.50" in found["TS402"]["message"]
    # the grid is not a line's cost, and a static finding has no launch to measure
    assert "measured_lines" not in found["TS401"]["evidence"]
    assert "measured_lines" not in found["TS504"]["evidence"]


def test_without_simulator_output_no_finding_claims_a_measured_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = cli(capsys, "analyze", str(SAMPLES / "tilelang_fa_bundle"), "-f", "json")
    assert code == 0 and "measured_lines" not in out and "simulator" not in out


def test_a_broken_simulator_file_in_a_bundle_costs_the_lines_not_the_analysis(
    bundle: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = next(bundle.rglob("core0.cubecore0_code_exe.csv"))
    f.write_text("code,call_count,cycles,running_time(us)\nkernel.cpp,16,100,0.1\n")
    code, out, _ = cli(capsys, "analyze", str(bundle), "-f", "json")
    r = json.loads(out)
    assert code == 0 and "measured_lines" not in out
    assert any(str(f) in w and "per-line data not read" in w for w in r["profiles"][0]["warnings"])


@pytest.mark.slow  # 2.4-5 s of CPU each (#23: the quick loop keeps tests under ~2 s)
def test_every_report_format_shows_the_hottest_lines(
    bundle: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = cli(capsys, "analyze", str(bundle), "-f", "json")
    report = json.loads(out)
    validate_report(report)
    section = report["lines"]
    assert (
        section == report["profiles"][0]["lines"]
        and section["source"] == "msprof op simulator (code/instr CSVs, per-core traces)"
    )
    assert section["total_cycles"] == _cycles(*FA_LINES) and section["cores"] == len(CORES)
    assert len(section["lines"]) + section["more_lines"] == 8 and section["lines"][0]["source_lines"] == [50]
    code, out, _ = cli(capsys, "analyze", str(bundle), "--width", "250")
    assert code == 0
    assert "where the time goes inside the kernel: 111,270 cycles over 4 simulated cores" in out
    assert (
        "48.3 %      53,760 cycles [25,600–28,160 per core]  l.50  s_acc += q_l0 @ k_l0"
        " — CUBE 100 %; Ascend C 101" in out
    )
    assert f"3 more line(s): tilescope lines {bundle}" in out
    code, out, _ = cli(capsys, "analyze", str(bundle), "-f", "md")
    assert "### Where the time goes inside the kernel" in out
    assert "| 48.3 % | 53,760 | 25,600–28,160 | l\\.50 `s_acc += q_l0 @ k_l0` | CUBE 100 % | 101 |" in out
    html_out = bundle / "r.html"
    code, _, _ = cli(capsys, "analyze", str(bundle), "-f", "html", "-o", str(html_out))
    page = html_out.read_text(encoding="utf-8")
    assert code == 0 and '<section id="lines">' in page and "<code>s_acc += q_l0 @ k_l0</code>" in page


@pytest.mark.slow  # over 1 s each (#23: the quick loop keeps tests under 1 s)
def test_a_bundle_with_a_board_source_run_counts_instructions_never_cycles(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    b = tmp_path / "fa"
    shutil.copytree(SAMPLES / "tilelang_fa_bundle", b)
    write_visualize_bin(b / "profile" / "OPPROF_20261206000001_BOARDSOURCE", "board")
    code, out, err = cli(capsys, "analyze", str(b), "-f", "json")
    assert code == 0, err
    report = json.loads(out)
    validate_report(report)
    section = report["lines"]
    assert section["metric"] == "instructions_executed" and section["total_cycles"] is None
    assert section["source"] == "board Source mode (msprof op --aic-metrics=Source)"
    top = section["lines"][0]
    assert top["source_lines"] == [41, 44] and top["cycles"] is None and top["core_min_cycles"] is None
    assert top["instructions_executed"] == sum(BOARD_LINES[n][0] for n in (5, 10))
    found = {f["code"]: f for f in report["findings"]}
    vec = found["TS302"]["evidence"]["measured_lines"][0]
    assert (vec["unit"], vec["source"]) == ("instructions executed", "the board")
    assert "the board puts 100 % of Vector instructions executed on l.41, 44" in found["TS302"]["message"]
    code, out, _ = cli(capsys, "analyze", str(b), "--width", "250")
    assert (
        "where the instructions go inside the kernel: 12,400 instructions executed, all cores together" in out
    )
    assert "cycles [" not in out.split("where the instructions go")[1]
