"""`tilescope lines`' whole-kernel part: the costliest instructions and the cycles spent in sync
instructions (SET_FLAG / WAIT_FLAG / PIPE_BARRIER), with or without per-line data (#25)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tilescope.io.simulator import NO_LINE_DATA

from support import cli
from support.simulator import CORES, write_fa_simulator


def test_the_sync_cycles_are_a_share_of_every_instruction_cycle(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = write_fa_simulator(tmp_path / "sim")  # per core: SET_FLAG 64, WAIT_FLAG 960, MOV_OUT_TO_L1 10,800
    code, out, err = cli(capsys, "lines", str(root), "-f", "json")
    assert code == 0, err
    r = json.loads(out)
    n = len(CORES)
    assert r["sync_cycles"] == {"SET_FLAG": 64.0 * n, "WAIT_FLAG": 960.0 * n}
    assert r["instruction_cycles"] == (64 + 960 + 10_800) * n == 47_296
    code, out, _ = cli(capsys, "lines", str(root), "--width", "400")
    assert (
        "costliest instructions (cycles summed over cores): MOV_OUT_TO_L1 (MTE2) 43,200 cycles, 64×; "
        "WAIT_FLAG (SCALAR) 3,840 cycles, 128×; SET_FLAG (SCALAR) 256 cycles, 128×"
    ) in out
    assert "sync instructions executed: SET_FLAG 128, WAIT_FLAG 128; their cycles 4,096 of 47,296 " in out
    assert "instruction cycles (8.7 %)" in out


def test_an_output_without_code_csv_still_names_its_costliest_instructions(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The shape of a real, trimmed simulator output: one core's instruction CSV (no trailing
    commas), no code CSV, no per-core trace (numbers made up here)."""
    core = tmp_path / "OPPROF_001" / "simulator" / "core3.veccore0"
    core.mkdir(parents=True)
    (core / "core3.veccore0_instr_exe.csv").write_text(
        "instr,addr,pipe,call_count,cycles,running_time(us),detail\n"
        'MOV_UB_TO_OUT,288400416,MTE3,16,5000,2.9,"Src:UB,Dst:OUT,id:7"\n'
        'VADD,288401332,VECTOR,8,3000,0.1,"Dtype:F16"\n'
        'SET_FLAG,288400516,MTE2,16,90000,0.9,"PIPE:MTE2,TRIGGERPIPE:SCALAR,FLAGID:0"\n'
        'WAIT_FLAG,288400520,SCALAR,16,2000,0.7,"PIPE:MTE2,TRIGGERPIPE:SCALAR,FLAGID:0"\n'
    )
    code, out, err = cli(capsys, "lines", str(tmp_path), "--width", "400")
    assert code == 0, err
    assert out.splitlines()[0].startswith(f"{tmp_path}: 1 simulated core, no per-line data (")
    assert NO_LINE_DATA in out
    assert "costliest instructions (cycles summed over cores): SET_FLAG (MTE2) 90,000 cycles, 16×; " in out
    assert "their cycles 92,000 of 100,000 instruction cycles (92.0 %)" in out
