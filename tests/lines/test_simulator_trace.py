"""The streamed reader of the simulator's pipeline traces (tilescope.io.simulator_trace, issue #25):
both top-level forms, lanes named by metadata, bad input as one line, and `analyze` of a simulator
run pointing at `tilescope lines` whatever part of it it is given."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tilescope.errors import ProfileFormatError
from tilescope.io.simulator_trace import SIM_EXPECTED, line_busy

from support import cli
from support.simulator import CORES, FA_LINES, KERNEL_CPP, core_cycles, write_fa_simulator

EVENTS = [
    {
        "name": "VADD",
        "ph": "X",
        "pid": "core0.veccore0",
        "tid": "VECTOR",
        "ts": 1.0,
        "dur": 0.5,
        "args": {"code": "k.cpp:3", "pc_addr": "0x10", "detail": "Dtype:F16"},
    },
    {
        "name": "SET_FLAG",
        "ph": "B",
        "pid": "core0.veccore0",
        "tid": "MTE2",
        "ts": 1.2,
        "id": "f0",
        "args": {"code": ""},
    },
    {"name": "WAIT_FLAG", "ph": "E", "pid": "core0.veccore0", "tid": "VECTOR", "ts": 1.3, "id": "f0"},
    {
        "name": "MOV_OUT_TO_UB",
        "ph": "X",
        "pid": "core0.veccore0",
        "tid": "MTE2",
        "ts": 2.0,
        "dur": 0.25,
        "args": {"code": "k.cpp:3"},
    },
    {
        "name": "flow",
        "ph": "s",
        "cat": "MTE2ToVECTOR",
        "id": "x1",
        "pid": "core0.veccore0",
        "tid": "MTE2",
        "ts": 2.25,
    },
    {
        "name": "VADD",
        "ph": "X",
        "pid": "core0.veccore0",
        "tid": "VECTOR",
        "ts": 3.0,
        "dur": 0.125,
        "args": {"code": "k.cpp:3"},
    },
    {
        "name": "ADD",
        "ph": "X",
        "pid": "core0.veccore0",
        "tid": "SCALAR",
        "ts": 3.0,
        "dur": 1,
        "args": {"code": ""},
    },  # built without -g: no line, not counted
    {
        "name": "MOV_UB_TO_OUT",
        "ph": "X",
        "pid": "core0.veccore0",
        "tid": "MTE3",
        "ts": 4.0,
        "dur": 2,
        "args": {"code": "/inc/kernel_operator.h:12"},
    },
]
EXPECTED_ROWS = [
    ("/inc/kernel_operator.h", 12, "MTE3", 2.0, 1.0),
    ("k.cpp", 3, "MTE2", 0.25, 1.0),
    ("k.cpp", 3, "VECTOR", 0.625, 2.0),
]


def _rows(path: Path) -> list[tuple]:
    return [tuple(r) for r in line_busy(path).itertuples(index=False)]


def test_the_object_and_the_bare_array_read_alike(tmp_path: Path) -> None:
    obj, arr = tmp_path / "obj.json", tmp_path / "arr.json"
    # keys after the list whose strings hold `]`: the guessed end of the list is wrong at first
    obj.write_text(
        json.dumps({"displayTimeUnit": "ns", "traceEvents": EVENTS, "note": {"x": "] }"}}, indent=2)
    )
    arr.write_text(json.dumps(EVENTS))
    assert _rows(obj) == _rows(arr) == EXPECTED_ROWS


def test_numeric_lanes_are_named_by_their_metadata(tmp_path: Path) -> None:
    meta = [
        {"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "core0.veccore0"}},
        {"ph": "M", "name": "thread_name", "pid": 1, "tid": 7, "args": {"name": "vector"}},
        # a pipe as a process, its lanes as threads: the process names the pipe
        {"ph": "M", "name": "process_name", "pid": 2, "tid": 0, "args": {"name": "MTE2"}},
        {"ph": "M", "name": "thread_name", "pid": 2, "tid": 0, "args": {"name": "lane 0"}},
    ]
    x = [
        {"ph": "X", "name": "VADD", "pid": 1, "tid": 7, "ts": 1, "dur": 2, "args": {"code": "k.cpp:4"}},
        {"ph": "X", "name": "MOV", "pid": 2, "tid": 0, "ts": 1, "dur": 3, "args": {"code": "k.cpp:4"}},
        {"ph": "X", "name": "MOV", "pid": 2, "tid": 0, "ts": 5, "dur": 1, "args": {"code": "k.cpp:4"}},
        {"ph": "X", "name": "S", "pid": 3, "tid": 9, "ts": 1, "dur": 3, "args": {"code": "k.cpp:5"}},
    ]
    f = tmp_path / "trace.json"
    f.write_text(json.dumps(x[:2] + meta + x[2:]))  # metadata mid-file
    assert _rows(f) == [
        ("k.cpp", 4, "MTE2", 4.0, 2.0),
        ("k.cpp", 4, "VECTOR", 2.0, 1.0),
        ("k.cpp", 5, "9", 3.0, 1.0),
    ]


def test_the_fixture_traces_read_exactly(tmp_path: Path) -> None:
    sim = next(write_fa_simulator(tmp_path / "fa").rglob("simulator"))
    for core in CORES:
        rows = _rows(sim / core / "trace.json")
        want = [
            (KERNEL_CPP, line, FA_LINES[line][0], core_cycles(core, line) / 1800, 1.0)
            for line in sorted(FA_LINES)
            if core_cycles(core, line)
        ]
        assert rows == want, core


def _bad(events: list[dict], i: int, **change: object) -> list[dict]:
    out = json.loads(json.dumps(events))
    for k, v in change.items():
        if v is None:
            del out[i][k]
        else:
            out[i][k] = v
    return out


@pytest.mark.parametrize(
    ("text", "where", "reason"),
    [
        (json.dumps({"traceEvents": EVENTS})[:300], "byte 300", "malformed JSON: unexpected end of data"),
        (json.dumps(EVENTS)[:100], "byte 100", "malformed JSON: unexpected end of data"),
        (json.dumps({"traceEvents": _bad(EVENTS, 3, ts=None)}), "event 4", "'MOV_OUT_TO_UB' has no ts"),
        (json.dumps(_bad(EVENTS, 5, dur=None)), "event 6", "'VADD' has no dur"),
        (
            json.dumps({"traceEvents": _bad(EVENTS, 3, dur="fast")}),
            "event 4",
            "has dur 'fast', not a number >= 0",
        ),
        (json.dumps(_bad(EVENTS, 0, dur=-1)), "event 1", "has dur '-1', not a number >= 0"),
        (json.dumps(_bad(EVENTS, 0, ts="soon")), "event 1", "has ts 'soon', not a number"),
        (json.dumps({"traceEvents": [EVENTS[0], 5]}), "event 2", "Expected OBJECT"),
        (json.dumps({"events": EVENTS}), None, 'an object without a "traceEvents" list'),
        ("", None, "the file is empty"),
        ("<html>", "byte 0", "found '<'"),
    ],
)
def test_bad_traces_are_one_line_naming_file_and_place(
    tmp_path: Path, text: str, where: str | None, reason: str
) -> None:
    f = tmp_path / "trace.json"
    f.write_text(text)
    with pytest.raises(ProfileFormatError) as info:
        line_busy(f)
    err = info.value
    assert err.path == str(f) and err.where == where and "\n" not in str(err)
    assert err.expected.startswith(SIM_EXPECTED) and reason in err.expected


def test_lines_of_a_folder_with_a_bad_trace_fail_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = write_fa_simulator(tmp_path / "bad")
    f = next(root.rglob("core0.veccore0/trace.json"))
    f.write_text(f.read_text()[:-40])
    code, out, err = cli(capsys, "lines", str(root))
    assert code == 2 and out == "" and err.strip().count("\n") == 0
    assert str(f) in err and "malformed JSON: unexpected end of data" in err


@pytest.mark.parametrize(
    "part", ["OPPROF", "simulator", "trace.json", "core0.veccore0", "core0.veccore0/trace.json"]
)
def test_analyze_of_any_part_of_a_simulator_run_points_at_lines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], part: str
) -> None:
    """The summary trace.json (string pids and tids) is not taken for a timeline of kernels: it
    failed with DuckDB's "Failed to cast value to numerical" before."""
    sim = next(write_fa_simulator(tmp_path / "run").rglob("simulator"))
    assert json.loads((sim / "trace.json").read_text())["traceEvents"][0]["pid"] == CORES[0]
    path = {"OPPROF": sim.parent, "simulator": sim}.get(part, sim / part)
    code, out, err = cli(capsys, "analyze", str(path))
    reads = sim.parent if part == "OPPROF" else sim
    assert code == 2 and out == "" and err.strip().count("\n") == 0
    assert "no kernel table" in err and f"`tilescope lines {reads}` reads it" in err
