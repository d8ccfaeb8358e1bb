"""`diff` of two bundles with per-line data says where inside the kernel the cost moved (#25).

Both bundles are the FA sample with GENERATED simulator output (tests/support/simulator.py: the
sample's real Ascend C lines, made-up cycles); the head's mmad (Ascend C l.101, TileLang l.50)
takes half the cycles and its K copy (l.94, TileLang l.47) twice as many."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tilescope.diff_lines import line_causes

from support import SAMPLES, cli
from support.simulator import CORES, FA_LINES, core_cycles, write_fa_simulator


def _bundle(root: Path, scale: dict[int, float] | None = None) -> Path:
    shutil.copytree(SAMPLES / "tilelang_fa_bundle", root)
    write_fa_simulator(root / "profile", scale=scale)
    return root


def _cycles(line: int, factor: float = 1.0) -> int:
    return sum(int(core_cycles(core, line) * factor) for core in CORES)


@pytest.mark.slow  # 2.4-5 s of CPU each (#23: the quick loop keeps tests under ~2 s)
def test_diff_names_the_lines_whose_cycles_moved(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = _bundle(tmp_path / "base")
    head = _bundle(tmp_path / "head", {101: 0.5, 94: 2.0})
    code, out, err = cli(capsys, "diff", str(base), str(head), "-f", "json")
    assert code == 0, err
    (delta,) = [k for k in json.loads(out)["kernels"] if k["causes"]]
    lines = [c for c in delta["causes"] if c["fact"].startswith("lines:")]
    b_total = sum(_cycles(n) for n in FA_LINES)
    h_total = b_total - _cycles(101) + _cycles(101, 0.5) - _cycles(94) + _cycles(94, 2.0)
    assert (b_total, h_total) == (111_270, 104_550)
    assert lines[0]["text"] == "measured cycles 111,270 → 104,550 (−6 %)"
    # the mmad's move (−26,880) is larger than the copy's (+19,200): named first, by its statement
    assert lines[1]["fact"] == "lines:s_acc += q_l0 @ k_l0#1"
    assert lines[1]["text"] == "l.50 `s_acc += q_l0 @ k_l0` 53,760 → 26,880 cycles (−50 %)"
    # named by the line map's words for the copy
    assert lines[2]["text"] == "l.47 `K (GM) -> k_l1 (L1)` 20,160 → 40,320 cycles (+100 %)"
    assert len(lines) == 3  # no other line moved
    # the terminal's "why" line carries them although the msprof op time is the same on both sides
    code, out, _ = cli(capsys, "diff", str(base), str(head), "--width", "300")
    assert code == 0 and "l.50 `s_acc += q_l0 @ k_l0` 53,760 → 26,880 cycles (−50 %)" in out


@pytest.mark.slow  # over 1 s each (#23: the quick loop keeps tests under 1 s)
def test_unchanged_lines_add_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = _bundle(tmp_path / "base")
    head = _bundle(tmp_path / "head", {10: 1.02})  # 2 % more on one vector line: under 5 % of the total
    code, out, err = cli(capsys, "diff", str(base), str(head), "-f", "json")
    assert code == 0, err
    assert not [c for k in json.loads(out)["kernels"] for c in k["causes"] if c["fact"].startswith("lines:")]


def test_lines_are_matched_by_statement_when_their_numbers_shift() -> None:
    base = {"metric": "cycles", "total": 100.0, "lines": {"x = a + b#1": ("l.10 `x = a + b`", 60.0)}}
    head = {"metric": "cycles", "total": 70.0, "lines": {"x = a + b#1": ("l.12 `x = a + b`", 30.0)}}
    causes = line_causes(base, head)
    assert [c.text for c in causes] == [
        "measured cycles 100 → 70 (−30 %)",
        "l.12 `x = a + b` 60 → 30 cycles (−50 %)",
    ]
    board = {**head, "metric": "instructions_executed"}
    assert [c.text for c in line_causes(base, board)] == [
        "per-line data not comparable: cycles vs instructions executed"
    ]
