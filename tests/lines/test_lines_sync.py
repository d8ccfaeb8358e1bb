"""Sync and barrier instructions per line (#25, tilescope.lines_sync): the trace's flag pairs and
address map, sync instructions placed on their Ascend C lines (and the TileLang statement each
orders), waits the data cannot place said instead of guessed.

Every simulator folder here is GENERATED (tests/support/simulator.py: the FA sample's real Ascend C
and line map, made-up cycles); the shapes follow the real trimmed output of
neo-pan/ascend-msprof-skill (decimal addresses in the CSV, hex `pc_addr` in the trace, WAIT_FLAG
as an `E` event without args)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tilescope.io.line_data import read_line_data
from tilescope.io.simulator_trace import parse_addr, trace_facts
from tilescope.lines import line_costs

from support import SAMPLES, cli
from support.simulator import CORES, KERNEL_CPP, sync_bin, write_fa_simulator
from support.visualize_bin import write_visualize_bin


def _trace(path: Path, events: list[dict]) -> Path:
    path.write_text(json.dumps({"displayTimeUnit": "ns", "traceEvents": events}))
    return path


def test_the_trace_pairs_flags_by_id_and_maps_addresses_to_lines(tmp_path: Path) -> None:
    core = "core3.veccore0"
    events = [
        {
            "name": "VADD",
            "ph": "X",
            "pid": core,
            "tid": "VECTOR",
            "ts": 1.0,
            "dur": 0.5,
            "args": {"code": "k.cpp:7", "pc_addr": "0x1130a7b4"},
        },
        {
            "name": "SET_FLAG",
            "ph": "B",
            "pid": core,
            "tid": "MTE2",
            "ts": 1.2,
            "id": f"{core}_0",
            "args": {"code": "k.cpp:5", "pc_addr": "0x1130a084", "detail": "PIPE:MTE2,TRIGGERPIPE:SCALAR"},
        },
        {
            "name": "WAIT_FLAG",
            "ph": "E",
            "pid": core,
            "tid": "SCALAR",
            "ts": 1.3,
            "id": f"{core}_0",
            "args": {},
        },
        {
            "name": "SET_FLAG",
            "ph": "B",
            "pid": core,
            "tid": "MTE2",
            "ts": 2.2,
            "id": f"{core}_1",
            "args": {"code": "k.cpp:5", "pc_addr": "0x1130a084"},
        },
        {"name": "WAIT_FLAG", "ph": "E", "pid": core, "tid": "SCALAR", "ts": 2.3, "id": f"{core}_1"},
        # a SET_FLAG whose WAIT_FLAG the output lost: no pair
        {
            "name": "SET_FLAG",
            "ph": "B",
            "pid": core,
            "tid": "MTE3",
            "ts": 3.0,
            "id": f"{core}_2",
            "args": {"code": "k.cpp:9", "pc_addr": "0x1130a0a0"},
        },
        {"name": "flow", "ph": "s", "cat": "MTE2ToVECTOR", "id": "x", "pid": core, "tid": "MTE2", "ts": 2.5},
    ]
    facts = trace_facts(_trace(tmp_path / "trace.json", events))
    assert sorted(map(tuple, facts.addr_lines.to_numpy().tolist())) == [
        (0x1130A084, "k.cpp", 5),
        (0x1130A0A0, "k.cpp", 9),
        (0x1130A7B4, "k.cpp", 7),
    ]
    assert facts.flags.to_dict("records") == [
        {"file": "k.cpp", "line": 5, "set_pipe": "MTE2", "wait_pipe": "SCALAR", "pairs": 2.0}
    ]
    assert facts.busy[["line", "pipe", "instructions"]].to_numpy().tolist() == [[7, "VECTOR", 1.0]]
    # the CSV writes the trace's hex address in decimal: both read as the same number
    assert parse_addr("288401332") == parse_addr("0x1130a7b4") == 0x1130A7B4
    assert parse_addr("") is None and parse_addr("zz") is None


def test_the_csv_s_decimal_addresses_meet_the_trace_s_hex_ones(tmp_path: Path) -> None:
    """The real output's shape: instruction CSV with decimal addresses, no trailing commas; the
    trace names the SET_FLAG's address and line; the WAIT_FLAG is placed nowhere and said so."""
    core = tmp_path / "OPPROF_001" / "simulator" / "core3.veccore0"
    core.mkdir(parents=True)
    (core / "core3.veccore0_code_exe.csv").write_text(
        "code,call_count,cycles,running_time(us)\nk.cpp:5,16,1000,0.5\nk.cpp:7,8,3000,0.1\n"
    )
    (core / "core3.veccore0_instr_exe.csv").write_text(
        "instr,addr,pipe,call_count,cycles,running_time(us),detail\n"
        'VADD,288401332,VECTOR,8,3000,0.1,"Dtype:F16"\n'
        'SET_FLAG,288399492,MTE2,16,1000,0.9,"PIPE:MTE2,TRIGGERPIPE:SCALAR,FLAGID:0"\n'
        'WAIT_FLAG,288399496,SCALAR,16,6000,0.7,"PIPE:MTE2,TRIGGERPIPE:SCALAR,FLAGID:0"\n'
    )
    _trace(
        core / "trace.json",
        [
            {
                "name": "VADD",
                "ph": "X",
                "pid": "core3.veccore0",
                "tid": "VECTOR",
                "ts": 1.0,
                "dur": 0.5,
                "args": {"code": "k.cpp:7", "pc_addr": "0x1130a7b4"},
            },
            {
                "name": "SET_FLAG",
                "ph": "B",
                "pid": "core3.veccore0",
                "tid": "MTE2",
                "ts": 1.2,
                "id": "c_0",
                "args": {"code": "k.cpp:5", "pc_addr": "0x1130a084"},
            },
            {
                "name": "WAIT_FLAG",
                "ph": "E",
                "pid": "core3.veccore0",
                "tid": "SCALAR",
                "ts": 1.3,
                "id": "c_0",
            },
        ],
    )
    report = line_costs(read_line_data(tmp_path))
    assert [(r["line"], r["sync"], r["sync_cycles"], r["waited_by"]) for r in report.sync_lines] == [
        (5, {"SET_FLAG": 16.0}, {"SET_FLAG": 1000.0}, {"SCALAR": 1.0})
    ]
    assert report.sync_unplaced_cycles == {"WAIT_FLAG": 6000.0}
    assert report.wait_cycles == {"SCALAR": 6000.0}
    assert report.sync_share == pytest.approx(7000 / 10000)
    assert any("which line waited is not in the data" in n for n in report.notes)
    by_line = {g.ascendc[0]["line"]: g for g in report.lines}
    assert by_line[5].sync == {"SET_FLAG": 16.0} and by_line[7].sync == {}


@pytest.mark.slow  # over 1 s each (#23: the quick loop keeps tests under 1 s)
def test_fa_sync_lines_name_the_statement_each_flag_orders(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import shutil

    bundle = tmp_path / "b"
    shutil.copytree(SAMPLES / "tilelang_fa_bundle", bundle)
    sim = write_fa_simulator(bundle / "profile")
    code, out, err = cli(capsys, "lines", str(bundle), "-f", "json")
    assert code == 0, err
    r = json.loads(out)
    cube = sum("cubecore" in c for c in CORES)
    vec = len(CORES) - cube
    # without a bin only the SET_FLAGs are placed (their B events name address and line)
    assert [(s["line"], s["sync"], s["waited_by"], s["before"]["source_lines"]) for s in r["sync_lines"]] == [
        (95, {"SET_FLAG": 32.0 * cube}, {"SCALAR": 2.0 * cube}, [49]),
        (135, {"SET_FLAG": 32.0 * vec}, {"SCALAR": 2.0 * vec}, [69]),
    ]
    assert r["sync_lines"][0]["text"] == "asc_sync_notify(PIPE_MTE2, PIPE_MTE1, static_cast<event_t>(0));"
    assert r["sync_unplaced_cycles"] == {"WAIT_FLAG": 960.0 * len(CORES)}
    assert r["wait_cycles"] == {"SCALAR": 960.0 * len(CORES)}
    # a bin beside the CSVs names the WAIT_FLAGs' lines too
    sync_bin(next(sim.glob("OPPROF_*")) / "simulator")
    code, out, _ = cli(capsys, "lines", str(bundle), "-f", "json")
    r = json.loads(out)
    assert [(s["line"], s["wait_cycles"]) for s in r["sync_lines"][:2]] == [
        (96, {"SCALAR": 960.0 * cube}),
        (136, {"SCALAR": 960.0 * vec}),
    ]
    assert r["sync_unplaced_cycles"] == {}
    code, out, _ = cli(capsys, "lines", str(bundle), "--width", "400")
    assert (
        "  Ascend C 96 `asc_sync_wait(PIPE_MTE2, PIPE_MTE1, static_cast<event_t>(0));` before l.49 "
        f"(k_l1 (L1) -> k_l0 (L0B)): WAIT_FLAG {32 * cube}×, {960 * cube:,} cycles; waiting: SCALAR "
        f"{960 * cube:,} cycles"
    ) in out
    assert f"cycles pipes spent waiting (WAIT_FLAG, barriers): SCALAR {960 * len(CORES):,}" in out


def test_a_bin_alone_puts_sync_on_its_lines_and_their_groups(tmp_path: Path) -> None:
    """The bin names every instruction's line: the FA bin's WAIT_FLAG on Ascend C 91 (no TileLang
    line) rolls up into the "(no TileLang line)" group."""
    ir = SAMPLES / "tilelang_fa_bundle" / "ir"
    line_map = json.loads((ir / "ir.json").read_text())["line_map"]
    bin_path = write_visualize_bin(tmp_path / "sim")
    report = line_costs(read_line_data(bin_path), line_map, (ir / "kernel.cpp").read_text())
    none = next(g for g in report.lines if not g.source_lines)
    cube_cycles = [800, 880]  # core_cycles of line 91 on the two cube cores
    assert none.sync == {"WAIT_FLAG": 32.0} and none.sync_cycles == {"WAIT_FLAG": float(sum(cube_cycles))}
    assert none.wait_cycles == {"SCALAR": float(sum(cube_cycles))}
    assert [s["line"] for s in report.sync_lines] == [91]
    assert report.sync_lines[0]["source_lines"] == []


def test_a_kernel_built_without_g_places_no_sync_on_a_line(tmp_path: Path) -> None:
    root = write_fa_simulator(tmp_path / "nog", with_lines=False)
    report = line_costs(read_line_data(root))
    assert report.sync_lines == [] and report.lines == []
    assert report.sync_unplaced_cycles == {"SET_FLAG": 64.0 * len(CORES), "WAIT_FLAG": 960.0 * len(CORES)}
    assert KERNEL_CPP not in json.dumps(report.to_dict())


def test_the_heat_labels_carry_the_sync_of_a_line(tmp_path: Path) -> None:
    """The dashboard's IR heat map reads the same computation: a bundle whose profile/ holds the
    GENERATED simulator bin alone (the FA bin's WAIT_FLAG on Ascend C 91)."""
    import shutil

    from tilescope.dashboard.ir_heat import apply_heat
    from tilescope.dashboard.ir_view import Stage
    from tilescope.io.load import load_profile

    bundle = tmp_path / "b"
    shutil.copytree(SAMPLES / "tilelang_fa_bundle", bundle)
    write_visualize_bin(bundle / "profile" / "OPPROF_20261206000000_GENERATED")
    profile = load_profile(bundle)
    cpp = Stage("ascendc", "Ascend C", "kernel.cpp", "", "cpp")
    src = Stage("source", "Kernel source", "flash_attention.py", "", "python")
    assert apply_heat([cpp, src], profile, None)
    assert cpp.heat[91][1].endswith(" · sync: WAIT_FLAG 32×, 1,680 cycles; waiting: SCALAR 1,680 cycles")
    assert "sync" not in cpp.heat[101][1]  # the mmad line runs no sync instruction
    assert not any("sync" in label for _share, label in src.heat.values())  # 91 maps to no TileLang line


@pytest.mark.slow
def test_every_report_format_says_the_sync_share_and_the_top_sync_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from support.simulator import simulated_fa_bundle

    bundle = simulated_fa_bundle(tmp_path / "b")
    code, out, err = cli(capsys, "analyze", str(bundle), "-f", "json")
    assert code == 0, err
    section = json.loads(out)["profiles"][0]["lines"]
    assert section["sync_share"] == round(4_096 / 47_296, 6)
    assert [s["line"] for s in section["sync_lines"]] == [95, 135]
    said = (
        "Sync and barrier instructions: 8.7 % of the instruction cycles; most sync cycles (no wait placed "
        "on a line): Ascend C 95"
    )
    code, out, _ = cli(capsys, "analyze", str(bundle), "--width", "400")
    assert said in out
    # Markdown escapes its punctuation (untrusted text stays inert), HTML its markup characters
    for fmt, share, where in (
        ("md", "8\\.7 % of the instruction cycles", "Ascend C 95 \\`asc\\_sync\\_notify"),
        (
            "html",
            "8.7 % of the instruction cycles",
            "Ascend C 95 `asc_sync_notify(PIPE_MTE2, PIPE_MTE1, static_cast&lt;event_t&gt;(0));`",
        ),
    ):
        report = tmp_path / f"r.{fmt}"
        code, _, err = cli(capsys, "analyze", str(bundle), "-f", fmt, "-o", str(report))
        assert code == 0, err
        text = report.read_text()
        assert share in text and where in text
