"""The boundary check (analyzer/io/validate.py): a value outside its column's documented range is
exit 2 naming the file, the row and the column, in every reader, never a total computed from it.

Every case is a real file (the fa_pipeutil_29 kernel_details, the msprof_db_2023 database, the
torch_timeline_3670 trace, the triton op_summary) or a bundled sample with one value changed.
"""

from __future__ import annotations

import csv
import io
import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from tilescope.io.validate import MAX_DURATION_US, RATIO_SLACK, range_of

from support import cli


def _rows(path: Path) -> list[list[str]]:
    return list(csv.reader(io.StringIO(path.read_text(encoding="utf-8-sig"), newline="")))


def _write(path: Path, rows: list[list[str]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as fh:
        csv.writer(fh).writerows(rows)
    return path


def _mutated(real: Path, tmp: Path, column: str, value: str, row: int = 3) -> Path:
    rows = _rows(real / "fa_pipeutil_29" / "kernel_details.csv")
    rows[row][rows[0].index(column)] = value
    return _write(tmp / "kernel_details.csv", rows)




@pytest.mark.parametrize(
    ("column", "value", "expected"),
    [
        ("Duration(us)", "-5", "expected a duration in µs"),
        ("Duration(us)", "Infinity", "found inf"),
        ("Duration(us)", "1e308", "found 1e+308"),
        ("Duration(us)", "NaN", "found nan"),
        ("Wait Time(us)", "-0.5", "expected a duration in µs"),
        ("aic_mac_ratio", "5", "expected a ratio 0 .. 1.01"),
        ("aic_mac_ratio", "-0.5", "expected a ratio 0 .. 1.01"),
        ("cube_utilization(%)", "150", "expected a percentage 0 .. 101"),
        ("cube_utilization(%)", "1e14", "expected a percentage 0 .. 101"),
        ("aic_total_cycles", "-1", "expected a finite value >= 0"),
        ("Block Dim", "-3", "expected a finite value >= 0"),
        ("Block Dim", "NaN", "expected an integer"),
        ("Block Dim", "1e30", "expected an integer"),
        ("Step Id", "99999999999999999999999", "expected an integer"),
        ("Start Time(us)", "-1", "expected a timestamp in ns"),
    ],
)
@pytest.mark.parametrize(
    "command", [["analyze", "--format", "json"], ["kernels", "--format", "json"], ["info"]]
)
def test_out_of_range_value_is_exit_2_naming_file_row_column(
    real_traces: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    column: str,
    value: str,
    expected: str,
    command: list[str],
) -> None:
    path = _mutated(real_traces, tmp_path, column, value)
    # --strict: by default a metric column's value is flagged and left out (tests/io/test_out_of_range.py);
    # durations, start times and non-numbers are refused either way
    code, out, err = cli(capsys, *command, "--strict", str(path))
    assert code == 2, err
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert f"{path}: row 3 (line 4): column {column!r}: {expected}" in lines[0] or (
        f"{path}: row 3 (line 4): column {column!r}:" in lines[0] and expected in lines[0]
    ), lines[0]


def test_streamed_file_output_names_the_same_row_and_writes_nothing(
    real_traces: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _mutated(real_traces, tmp_path, "aic_mac_ratio", "5", row=20)
    out_file = tmp_path / "k.csv"
    out_file.write_text("previous\n")
    code, _, err = cli(capsys, "kernels", "--strict", str(path), "--format", "csv", "-o", str(out_file))
    assert code == 2
    assert "row 20 (line 21): column 'aic_mac_ratio'" in err
    assert out_file.read_text() == "previous\n"


def test_values_inside_the_slack_are_read_as_written(
    real_traces: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # msprof rounds ratios to 3 decimals: a 1.005 is a true 1.0, accepted and shown as written
    path = _mutated(real_traces, tmp_path, "aic_mac_ratio", "1.005")
    code, out, err = cli(capsys, "kernels", str(path), "--format", "json")
    assert code == 0, err
    rows = json.loads(out)
    rows = rows["kernels"] if isinstance(rows, dict) else rows
    assert max(r["aic_cube_ratio"] for r in rows if r["aic_cube_ratio"] is not None) == 1.005
    assert 1 + RATIO_SLACK >= 1.005


def test_cr_only_line_endings_read_like_the_original(
    real_traces: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = (real_traces / "fa_pipeutil_29" / "kernel_details.csv").read_bytes()
    cr = tmp_path / "cr" / "kernel_details.csv"
    cr.parent.mkdir()
    cr.write_bytes(src.replace(b"\r\n", b"\n").replace(b"\n", b"\r"))
    code, out_cr, err = cli(capsys, "kernels", str(cr), "--format", "json")
    assert code == 0, err
    code, out_lf, _ = cli(
        capsys, "kernels", str(real_traces / "fa_pipeutil_29" / "kernel_details.csv"), "--format", "json"
    )
    assert code == 0
    assert json.loads(out_cr) == json.loads(out_lf)


def test_sqlite_negative_duration_names_the_task(
    real_traces: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "msprof_0.db"
    shutil.copy(real_traces / "msprof_db_2023" / "msprof_0.db", db)
    con = sqlite3.connect(db)
    gid = con.execute("SELECT min(globalTaskId) FROM COMPUTE_TASK_INFO").fetchone()[0]
    con.execute("UPDATE TASK SET endNs = startNs - 5000 WHERE globalTaskId = ?", (gid,))
    con.commit()
    con.close()
    said = f"{db}: task globalTaskId={gid}: column 'TASK.endNs - TASK.startNs': expected a duration"
    code, out, err = cli(capsys, "analyze", str(db), "--format", "json", "--strict")
    assert code == 2
    assert out == ""
    assert said in err
    assert "found -5" in err
    # without --strict the task is an unreadable row: skipped, named in one note (#26 item 11)
    code, out, err = cli(capsys, "analyze", str(db), "--format", "json")
    assert code == 0
    (entry,) = json.loads(out)["profiles"]
    assert entry["rows_skipped"]["count"] == 1 and said in entry["rows_skipped"]["first"]


def test_timeline_negative_dur_names_the_event(
    real_traces: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    events = json.loads((real_traces / "torch_timeline_3670" / "trace_view.json").read_text())
    target = next(e for e in events if e.get("ph") == "X" and "dur" in e)
    target["dur"] = -3.5
    path = tmp_path / "trace_view.json"
    path.write_text(json.dumps(events))
    said = "column 'dur': expected a duration in µs, 0 .. 8.64e10 (one day), found -3.5"
    code, _, err = cli(capsys, "info", str(path), "--strict")
    assert code == 2
    assert f"{path}: " in err
    assert f"{target['name'][:20]}" in err
    assert said in err
    # without --strict the event is skipped with one note naming it (#26 item 11)
    code, out, err = cli(capsys, "analyze", str(path), "--format", "json")
    assert code == 0
    (entry,) = json.loads(out)["profiles"]
    assert said in entry["rows_skipped"]["first"] and target["name"][:20] in entry["rows_skipped"]["first"]


def test_msprof_op_repeated_block_row_is_rejected(
    repo_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = repo_root / "sample_traces" / "tilelang_fa_msprof_op"
    dst = tmp_path / "op"
    shutil.copytree(src, dst)
    pipe = next(dst.rglob("PipeUtilization.csv"))
    rows = _rows(pipe)
    rows.insert(3, list(rows[1]))  # block 0's first row once more: its cycles would count twice
    _write(pipe, rows)
    code, _, err = cli(capsys, "analyze", str(dst), "--format", "json")
    assert code == 2
    assert f"{pipe}: row 3 (line 4): block_id" in err
    assert "repeats an earlier row" in err


def test_msprof_op_two_folders_for_one_launch_are_rejected(
    repo_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dst = tmp_path / "multi"
    shutil.copytree(repo_root / "sample_traces" / "tilelang_fa_msprof_op_multi", dst)
    op = next(dst.rglob("flash_attn_fwd_kernel_mix_aic"))
    shutil.copytree(op / "1", op / "extra")  # a non-numeric launch folder: read as launch 0 before
    code, out, err = cli(capsys, "analyze", str(dst), "--format", "json")
    assert code == 2
    assert out == ""
    assert "read as launch 0 of flash_attn_fwd_kernel_mix_aic" in err
    assert "expected one folder per launch" in err


def test_op_summary_slices_with_different_columns_are_rejected(
    real_traces: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = next((real_traces / "triton_matmul_bd1024_opsum").rglob("op_summary_*.csv"))
    rows = _rows(src)
    half = len(rows) // 2
    out = tmp_path / "mindstudio_profiler_output"
    _write(out / "op_summary_slice_0.csv", rows[:half])
    drop = rows[0].index("aic_mac_ratio")
    _write(out / "op_summary_slice_1.csv", [r[:drop] + r[drop + 1 :] for r in [rows[0], *rows[half:]]])
    code, _, err = cli(capsys, "analyze", str(out), "--format", "json")
    assert code == 2
    assert (
        "op_summary_slice_1.csv: line 1: columns differ from op_summary_slice_0.csv (aic_cube_ratio)" in err
    )


def test_every_real_profile_passes_the_boundary_check(
    real_traces: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # the ranges are the ones real output keeps: none of the hand-checked folders trips them
    for name in (
        "fa_pipeutil_29",
        "gpt_step_arith_591",
        "triton_matmul_bd1024_opsum",
        "tilelang_sigmoid_app",
        "msprof_db_2023",
        "kernel_details_na_8",
        "torch_timeline_3670",
    ):
        code, _, err = cli(capsys, "info", str(real_traces / name))
        assert code == 0, (name, err)


def test_ranges_by_unit() -> None:
    assert range_of("duration_us") is not None and range_of("duration_us").hi == MAX_DURATION_US  # type: ignore[union-attr]
    assert range_of("aic_cube_fp16_ratio") == range_of("aic_cube_ratio")  # unknown columns by suffix
    assert range_of("memory_bound") is not None and range_of("memory_bound").hi == float("inf")  # type: ignore[union-attr]
    assert range_of("name") is None
    assert range_of("some_unitless_metric") is None


@pytest.mark.parametrize("shape", ["-9223372036854775808", "4096,-2", "1099511627777,8"])
def test_impossible_shape_dims_are_no_shape(
    real_traces: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], shape: str
) -> None:
    # found by the fuzzer: a negative dim made a negative byte count and sol_us = -1.05e13
    path = _mutated(real_traces, tmp_path, "Output Shapes", shape, row=10)
    code, out, err = cli(capsys, "kernels", str(path), "--format", "json")
    assert code == 0, err
    row = json.loads(out)[9]
    assert row["output_shapes"] == shape
    assert row["output_shape_list"] is None
    assert row["sol_us"] is None or row["sol_us"] >= 0


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            lambda d: d["kernels"][0]["versions"].update(s_ub=-1e308),
            "kernels[0].versions.s_ub: -1e+308 is less than",
        ),
        (
            lambda d: d["kernels"][0].update(allocations="x"),
            "kernels[0].allocations: 'x' is not of type 'array'",
        ),
        (lambda d: d.pop("kernels"), "'kernels' is a required property"),
    ],
)
def test_bundle_ir_json_is_held_to_its_schema(
    repo_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], change: object, expected: str
) -> None:
    # found by the fuzzer: versions -1e308 became a 300-digit integer in a TS504 message, exit 0
    bundle = tmp_path / "bundle"
    shutil.copytree(repo_root / "sample_traces" / "tilelang_fa_bundle", bundle)
    ir = bundle / "ir" / "ir.json"
    doc = json.loads(ir.read_text())
    change(doc)  # type: ignore[operator]
    ir.write_text(json.dumps(doc))
    code, out, err = cli(capsys, "analyze", str(bundle), "--format", "json")
    assert code == 2
    assert out == ""
    assert f"{ir}: " in err and expected in err, err


def test_bundle_ir_json_that_is_not_an_object_is_refused(
    repo_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bundle = tmp_path / "bundle"
    shutil.copytree(repo_root / "sample_traces" / "tilelang_fa_bundle", bundle)
    (bundle / "ir" / "ir.json").write_text("[1, 2]")
    code, _, err = cli(capsys, "analyze", str(bundle))
    assert code == 2
    assert "ir.json: expected a JSON object, found a JSON list" in err


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        (
            "manifest.json",
            '{"kernel": "k", "n": 1e400}',
            "manifest.json: n: expected a number within 64 bits, found inf",
        ),
        ("ir/ir.json", None, "ir.json: kernels[0].versions.s_ub: expected a number within 64 bits"),
    ],
)
def test_bundle_json_numbers_beyond_64_bits_are_refused(
    repo_root: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    name: str,
    text: str | None,
    expected: str,
) -> None:
    # found by the fuzzer: an ir.json source_line of 2**70 reached the report as a location line
    bundle = tmp_path / "bundle"
    shutil.copytree(repo_root / "sample_traces" / "tilelang_fa_bundle", bundle)
    target = bundle / name
    if text is None:
        doc = json.loads(target.read_text())
        doc["kernels"][0]["versions"]["s_ub"] = 2**70
        text = json.dumps(doc)
    target.write_text(text)
    code, out, err = cli(capsys, "analyze", str(bundle), "--format", "json")
    assert code == 2 and out == ""
    assert expected in err, err


def test_the_line_of_a_bad_value_counts_quoted_newlines_and_blank_lines(
    real_traces: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # a quoted newline in an earlier name makes that row two lines, a blank line is no row:
    # data row 3 then starts on line 6, not line 4
    rows = _rows(real_traces / "fa_pipeutil_29" / "kernel_details.csv")
    name = rows[0].index("Name")
    rows[1][name] = "first\nsecond"
    rows[3][rows[0].index("aic_mac_ratio")] = "5"
    path = _write(tmp_path / "kernel_details.csv", rows)
    text = path.read_text(encoding="utf-8")
    lines = text.split("\n")
    path.write_text("\n".join([*lines[:3], "", *lines[3:]]), encoding="utf-8")  # after row 1
    code, _, err = cli(capsys, "kernels", "--strict", str(path), "--format", "json")
    assert code == 2
    assert f"{path}: row 3 (line 6): column 'aic_mac_ratio'" in err, err
    # by default the value is left out and the note names the same row and line
    code, _, err = cli(capsys, "kernels", str(path), "--format", "json")
    assert code == 0 and f"{path}: row 3 (line 6): column 'aic_mac_ratio'" in err, err
