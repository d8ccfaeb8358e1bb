"""`tilescope lines` on a visualize_data.bin (issue #25): the simulator's per-core cycles and a board
Source run's instructions executed, each under its own name. The files are GENERATED in the
documented layout from the FA sample bundle's own Ascend C and line map
(tests/support/visualize_bin.py says so); the values asserted are the ones written, read back
through the CLI."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tilescope.io.line_data import read_line_data
from tilescope.io.visualize_bin import BOARD_KIND, SIMULATOR_KIND

from support import SAMPLES, cli
from support.simulator import CORES, FA_LINES, HEADER, KERNEL_CPP, core_cycles, write_fa_simulator
from support.visualize_bin import (
    BOARD_LINES,
    FA_CPP,
    block,
    board_docs,
    fa_bin,
    json_block,
    simulator_docs,
    stall,
    write_visualize_bin,
)


def _bundle(tmp_path: Path) -> Path:
    b = tmp_path / "fa"
    shutil.copytree(SAMPLES / "tilelang_fa_bundle", b)
    return b


def _cycles(*lines: int) -> int:
    return sum(core_cycles(core, line) for core in CORES for line in lines)


def _stalls(*lines: int) -> int:
    return sum(stall(core_cycles(core, line)) for core in CORES for line in lines)


def test_the_reader_reads_a_simulator_bin_exactly(tmp_path: Path) -> None:
    f = write_visualize_bin(tmp_path / "OPPROF_1" / "simulator")
    sim = read_line_data(f)
    assert sim.kind == SIMULATOR_KIND and sim.cores == list(CORES)
    assert sim.measures == {"cycles", "instructions_executed", "stall_cycles"}
    ran = sum(1 for c in CORES for line in FA_LINES if core_cycles(c, line))
    assert len(sim.code) == ran + 2  # + the header line on both vector cores
    row = sim.code[(sim.code["core"] == "core1.cubecore0") & (sim.code["line"] == 101)].iloc[0]
    assert row["file"] == KERNEL_CPP and row["cycles"] == 28160 and row["instructions_executed"] == 16
    i = sim.instr[(sim.instr["core"] == "core1.cubecore0") & (sim.instr["line"] == 101)].iloc[0]
    assert (i["instr"], i["pipe"], i["cycles"], i["call_count"], i["stall_cycles"]) == (
        "MMAD",
        "CUBE",
        28160,
        16,
        3520,
    )
    assert i["addr"] == hex(0x1124_0000 + 16 * 101) and i["detail"] == "MMAD dtype:F16"
    assert sim.sources == {KERNEL_CPP: FA_CPP.read_text()}
    # the same through the folders a user passes
    assert read_line_data(tmp_path).root == f and read_line_data(tmp_path / "OPPROF_1").root == f


def test_simulator_bin_lines_of_a_bundle(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    b = _bundle(tmp_path)
    write_visualize_bin(b / "profile" / "OPPROF_20261206000000_GENERATEDSIMRUN" / "simulator")
    code, out, err = cli(capsys, "lines", str(b), "-f", "json")
    assert code == 0, err
    r = json.loads(out)
    total = _cycles(*FA_LINES)
    assert r["lines_schema_version"] == "1" and r["metric"] == "cycles" and r["source_kind"] == SIMULATOR_KIND
    assert r["measures"] == ["cycles", "instructions_executed", "stall_cycles"]
    assert r["kernel_file"] == KERNEL_CPP and r["total_cycles"] == total == 111270
    assert r["total_instructions_executed"] == 16 * sum(
        1 for c in CORES for n in FA_LINES if core_cycles(c, n)
    )
    top = r["lines"][0]
    assert top["source_lines"] == [50] and top["cycles"] == _cycles(101) == 53760
    assert (top["core_min_cycles"], top["core_max_cycles"]) == (25600, 28160)
    assert top["stall_cycles"] == _stalls(101) == 6720 and top["instructions_executed"] == 32
    assert top["call_count"] is None  # the bin counts instructions, not executions of the line
    assert top["pipes_us"] == {} and top["pipes_instr"] == {"CUBE": 53760}
    assert top["ascendc"] == [
        {"line": 101, "cycles": 53760, "share": round(53760 / total, 6), "instructions_executed": 32,
         "stall_cycles": 6720}
    ]  # fmt: skip
    vf = next(x for x in r["lines"] if x["source_lines"] == [41, 44])
    assert vf["cycles"] == _cycles(5, 10) and vf["stall_cycles"] == _stalls(5, 10)
    assert r["other_files"] == [{"file": HEADER, "line": 120, "cycles": 600.0}]
    assert r["sync"] == {"WAIT_FLAG": 32.0}
    code, out, _ = cli(capsys, "lines", str(b), "--top", "1", "--width", "300")
    assert "(msprof op simulator visualize_data.bin: a model of the chip, not a board measurement)" in out
    assert "48.3 %          53,760 cycles  [25,600–28,160 per core]  6,720 stall cycles  l.50" in out
    assert "pipes (by instruction cycles): CUBE 100 %; Ascend C lines 101" in out


def test_a_board_run_ranks_by_instructions_executed_never_cycles(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    b = _bundle(tmp_path)
    write_visualize_bin(b / "profile" / "OPPROF_20261206000000_GENERATEDBOARD", "board")
    code, out, err = cli(capsys, "lines", str(b), "-f", "json")
    assert code == 0, err
    r = json.loads(out)
    total = sum(n for n, _ in BOARD_LINES.values())
    assert r["metric"] == "instructions_executed" and r["source_kind"] == BOARD_KIND
    assert r["measures"] == ["instructions_executed", "l2_hit_rate"] and r["cores"] == 1
    assert r["total_cycles"] is None and r["total_instructions_executed"] == total == 12400
    top = r["lines"][0]
    assert top["source_lines"] == [41, 44] and top["instructions_executed"] == 8192 + 2048
    assert top["share"] == round(10240 / total, 6) and top["pipes_instr"] == {"VECTOR": 10240}
    assert top["cycles"] is None and top["core_min_cycles"] is None and top["stall_cycles"] is None
    k = next(x for x in r["lines"] if x["source_lines"] == [47])
    assert k["ascendc"] == [
        {"line": 94, "cycles": None, "share": round(384 / total, 6), "instructions_executed": 384,
         "l2_hit_rate": 81.25}
    ]  # fmt: skip
    mmad = next(x for x in r["lines"] if x["source_lines"] == [50])
    assert "l2_hit_rate" not in mmad["ascendc"][0]  # -1: no L2 access, not a 0 % hit rate
    assert all(i["cycles"] is None for i in r["instructions"]) and r["sync"] == {"WAIT_FLAG": 640.0}
    code, out, _ = cli(capsys, "lines", str(b), "--top", "4", "--width", "300")
    assert code == 0
    assert f"12,400 instructions executed in {KERNEL_CPP}, all cores together ({BOARD_KIND}: " in out
    assert BOARD_KIND + ": instruction counts, not cycles)" in out
    assert "82.6 %          10,240 instructions executed  l.41, 44" in out
    assert "L2 hit rate 81 % (Ascend C 94)" in out and " cycles  [" not in out


def test_beside_the_csvs_the_bin_adds_stall_cycles(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    b = _bundle(tmp_path)
    root = write_fa_simulator(b / "profile")
    write_visualize_bin(next(root.glob("OPPROF_*")) / "simulator")
    code, out, err = cli(capsys, "lines", str(b), "-f", "json")
    assert code == 0, err
    r = json.loads(out)
    top = r["lines"][0]
    assert top["cycles"] == 53760 and top["call_count"] == 32  # the CSVs' cycles and call counts
    assert list(top["pipes_us"]) == ["CUBE"] and top["stall_cycles"] == 6720  # traces; the bin's stalls
    assert "stall_cycles" in r["measures"] and r["source_kind"].startswith(
        "msprof op simulator (code/instr CSVs"
    )
    assert any("stall cycles from visualize_data.bin" in n for n in r["notes"])


def _header_size(f: bytes) -> int:
    return int.from_bytes(f[:8], "little")


def _source_block_end() -> int:
    return len(block(0x01, FA_CPP.read_bytes(), path=KERNEL_CPP))


BAD = {
    "empty": (lambda: b"", "byte 0: a visualize_data.bin block header (the file is empty)"),
    "cut header": (
        lambda: fa_bin()[: _source_block_end() + 5],
        "block 1 at byte {end}: a 12-byte block header",
    ),
    "cut body": (lambda: fa_bin()[: _source_block_end() + 40], "block 1 at byte {end}: a body of"),
    "size past the end": (
        lambda: (2**40).to_bytes(8, "little") + fa_bin()[8:],
        "block 0 at byte 0: a body of 1,099,511,627,776 bytes (its size field)",
    ),
    "cut source path": (
        lambda: block(0x01, b"int x;", path=KERNEL_CPP)[:200],
        "block 0 at byte 0: a 4096-byte source path after the header",
    ),
    "bad JSON": (
        lambda: block(0x01, b"x", path="k.cpp") + block(0x03, b'{"Cores": ["ALL"], "Files": [}'),
        "block 1 at byte 4112: JSON in the file lines block (0x03): Expecting value",
    ),
    "version": (
        lambda: json_block(0x04, board_docs()[1], version=0x07),
        "block 0 at byte 0: instructions block version 0x00 (by 'AscendC Inner Code') or 0x5A",
    ),
    "ragged cores": (
        lambda: json_block(0x03, {**simulator_docs()[0], "Cores": ["core0.cubecore0", "core0.veccore0"]}),
        "Files[0].Lines 'Cycles' of row 0: a number or one per core (2), not '[",
    ),
    "no line data": (
        lambda: block(0x01, b"int x;", path="k.cpp") + block(0x02, b"{}"),
        "a file-lines (0x03) or instructions (0x04) block",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_is_one_line_naming_file_and_byte(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    make, expected = BAD[case]
    f = tmp_path / "visualize_data.bin"
    f.write_bytes(make())
    code, out, err = cli(capsys, "lines", str(f))
    assert code == 2 and out == ""
    assert err.startswith(f"tilescope: error: {f}: ") and err.strip().count("\n") == 0
    assert expected.format(end=_source_block_end()) in err, err


def test_unknown_blocks_are_skipped_and_said(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = write_visualize_bin(tmp_path, "board", extra=block(0x7E, b"future") + block(0x0D, b"{}"))
    code, out, err = cli(capsys, "lines", str(f), "-f", "json")
    assert code == 0, err
    notes = json.loads(out)["notes"]
    assert notes == ["skipped block type(s) 0x7E: unknown to this reader (MindStudio Insight skips them too)"]


def test_text_from_the_file_is_inert(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    evil = "/tmp/\x1b]8;;http://x\x07k\x1b[2J.cpp"
    files, instrs = simulator_docs()
    files["Files"][0]["Source"] = evil
    for i in instrs["Instructions"]:
        i["AscendC Inner Code"] = i["AscendC Inner Code"].replace(KERNEL_CPP, evil)
        i["Source"] = "\x1b[31mMMAD\u202e"
    f = tmp_path / "visualize_data.bin"
    f.write_bytes(
        block(0x01, b"x", path=evil)
        + json_block(0x03, files)
        + json_block(0x04, instrs, version=0)
        + block(0x99, b"")
    )
    code, out, err = cli(capsys, "lines", str(f), "--width", "300")
    assert code == 0, err
    assert "\x1b" not in out and "\x07" not in out and "\u202e" not in out
    assert "\\x1b]8;;http://x\\x07k\\x1b[2J.cpp" in out


def test_several_bins_ask_which(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for launch in ("0", "1"):
        write_visualize_bin(tmp_path / "OPPROF_1" / "Mul_1" / launch, "board")
    code, _, err = cli(capsys, "lines", str(tmp_path))
    assert code == 2 and "2 visualize_data.bin files" in err and "pass the one to read" in err


def test_analyze_of_a_bin_points_at_lines(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = write_visualize_bin(tmp_path / "OPPROF_1", "board")
    for p in (tmp_path / "OPPROF_1", f):
        code, _, err = cli(capsys, "analyze", str(p))
        assert code == 2 and f"`tilescope lines {p}` reads it" in err
