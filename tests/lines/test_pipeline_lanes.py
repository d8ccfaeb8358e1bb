"""The in-core pipeline timeline (tilescope.pipeline_lanes, issue #25): busy intervals per core and
pipe, merged and capped, with exact values on the generated FA simulator folder and on small traces
written here."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from tilescope.errors import ProfileFormatError
from tilescope.pipeline_lanes import LANE_COLUMNS, pipeline_lanes, trace_lanes

from support.simulator import CORES, FA_LINES, KERNEL_CPP, core_cycles, write_fa_simulator


def _x(tid: str, line: int | None, ts: float, dur: float) -> dict:
    code = f"k.cpp:{line}" if line is not None else ""
    return {
        "name": "I",
        "ph": "X",
        "pid": "core0.veccore0",
        "tid": tid,
        "ts": ts,
        "dur": dur,
        "args": {"code": code},
    }


def _write(tmp_path: Path, events: list[dict]) -> Path:
    f = tmp_path / "trace.json"
    f.write_text(json.dumps({"displayTimeUnit": "ns", "traceEvents": events}))
    return f


def _rows(df: pd.DataFrame) -> list[tuple]:
    return [
        (r.pipe, r.start_us, r.end_us, None if pd.isna(r.line) else int(r.line), r.instructions)
        for r in df.itertuples(index=False)
    ]


def test_every_core_of_the_fixture_has_its_lanes_exactly(tmp_path: Path) -> None:
    lanes = pipeline_lanes(write_fa_simulator(tmp_path / "fa"))
    assert tuple(lanes.columns) == LANE_COLUMNS and list(lanes["core"].unique()) == list(CORES)
    for core in CORES:
        want, busy, ts = [], {}, 0.0
        for line in sorted(FA_LINES):  # the generator's order: one instruction per line, back to back
            cycles = core_cycles(core, line)
            if cycles:
                want.append((FA_LINES[line][0], ts, ts + cycles / 1800, line, 1))
                busy[line] = cycles / 1800
                ts += cycles / 1800
        got = lanes[lanes["core"] == core]
        assert _rows(got) == sorted(want)  # by pipe, then start: MTE1 97 and 98 touch but differ
        assert set(got["file"]) == {KERNEL_CPP}
        assert dict(zip(got["line"].astype(int), got["busy_us"], strict=True)) == busy


def test_touching_instructions_of_one_line_merge(tmp_path: Path) -> None:
    f = _write(
        tmp_path,
        [
            _x("VECTOR", 3, 0.0, 1.0),
            _x("MTE2", 7, 0.0, 2.0),
            _x("VECTOR", 3, 1.0, 1.0),  # touches
            _x("MTE2", 7, 1.0, 0.5),  # inside the one before
            _x("VECTOR", 3, 2.0002, 0.9998),  # 0.2 ns after: adjacent at the trace's 1 ns resolution
            _x("MTE2", 7, 1.8, 0.7),  # overlaps
            _x("VECTOR", 4, 3.0, 1.0),  # touches, another line: a new interval
            _x("VECTOR", 3, 5.0, 1.0),  # after a gap
            _x("SCALAR", None, 0.5, 0.25),  # no source line (built without -g)
        ],
    )
    lanes = trace_lanes(f, "core0.veccore0")
    assert _rows(lanes) == [
        ("MTE2", 0.0, 2.5, 7, 3),
        ("SCALAR", 0.5, 0.75, None, 1),
        ("VECTOR", 0.0, 3.0, 3, 3),
        ("VECTOR", 3.0, 4.0, 4, 1),
        ("VECTOR", 5.0, 6.0, 3, 1),
    ]
    assert lanes["busy_us"].tolist() == pytest.approx([3.2, 0.25, 2.9998, 1.0, 1.0])
    assert lanes["file"].tolist() == ["k.cpp", None, "k.cpp", "k.cpp", "k.cpp"]


def test_a_lane_over_the_cap_is_cut_into_equal_buckets(tmp_path: Path) -> None:
    # ten 1 µs instructions every 2 µs, lines 10 and 11 in turn: span 0-19 µs, three buckets of 19/3
    f = _write(tmp_path, [_x("CUBE", 10 + i % 2, 2.0 * i, 1.0) for i in range(10)])
    capped = trace_lanes(f, "core0.cubecore0", max_per_lane=3)
    # bucket 0 holds starts 0, 2, 4, 6 (lines 10, 11, 10, 11: a tie, the first line wins)
    assert _rows(capped) == [
        ("CUBE", 0.0, 7.0, 10, 4),
        ("CUBE", 8.0, 13.0, 10, 3),
        ("CUBE", 14.0, 19.0, 11, 3),
    ]
    assert capped["busy_us"].tolist() == [4.0, 3.0, 3.0]
    assert len(trace_lanes(f, "core0.cubecore0", max_per_lane=10)) == 10  # at the cap: exact


def test_a_bad_trace_is_the_readers_one_line(tmp_path: Path) -> None:
    f = _write(tmp_path, [_x("CUBE", 1, 0.0, 1.0), {**_x("CUBE", 1, 2.0, 1.0), "dur": "long"}])
    with pytest.raises(ProfileFormatError) as info:
        trace_lanes(f, "core0.cubecore0")
    assert info.value.where == "event 2" and "dur 'long'" in str(info.value)
    with pytest.raises(ProfileFormatError):
        pipeline_lanes(tmp_path)  # no simulator folder


def test_a_trace_without_instructions_has_no_rows(tmp_path: Path) -> None:
    lanes = trace_lanes(_write(tmp_path, []), "core0.cubecore0")
    assert lanes.empty and tuple(lanes.columns) == LANE_COLUMNS


def test_without_per_core_traces_the_summary_trace_gives_the_same_lanes(tmp_path: Path) -> None:
    """A simulator output trimmed of its per-core traces (as a real one published for tests is):
    the summary trace holds every core's events, each core named by its pid."""
    root = write_fa_simulator(tmp_path / "sim")
    per_core = pipeline_lanes(root)
    for trace in (root / "OPPROF_20261206000000_GENERATEDSIMRUN" / "simulator").glob("core*/trace.json"):
        trace.unlink()
    summary = pipeline_lanes(root)
    assert len(summary) == len(per_core) == 18
    pd.testing.assert_frame_equal(summary, per_core)
