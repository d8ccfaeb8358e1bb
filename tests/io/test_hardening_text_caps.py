"""One cap on untrusted text per field for every reader (analyzer/io/validate.py MAX_TEXT_BYTES,
docs/reliability.md §2), and CSV headers read whole (issue #27, "Oversized input"): a header field
over Python's 128 KiB csv limit was a `_csv.Error` traceback, a header over 1 MiB was cut silently
(and a wide CSV refused blaming a data line), a 300 MB SQLite kernel name took 28 s and 3.8 GB.

Every file is a real one (the kernel_details_na_8 table, the msprof_db_2023 database, the
torch_timeline_3670 trace) with one text made just longer than the cap, or a header made wider.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from tilescope.io import csv_header
from tilescope.io.validate import MAX_TEXT_BYTES

from support import cli

OVER = "N" * (MAX_TEXT_BYTES + 1)
CAP_TEXT = "expected at most 1 MiB of text (MAX_TEXT_BYTES)"


def _table(real: Path) -> list[str]:
    path = real / "kernel_details_na_8" / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"
    return path.read_text(encoding="utf-8-sig").splitlines()


def _one_error(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    code, out, err = cli(capsys, *args)
    assert code == 2, err
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err[:2000]
    assert len(lines[0]) < 400  # the value is named by its size, never printed
    return lines[0]


@pytest.mark.parametrize(
    "command", [["kernels", "--format", "json"], ["analyze", "--format", "json"], ["info"]]
)
def test_a_header_field_over_the_cap_is_one_line(
    real_traces: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], command: list[str]
) -> None:
    rows = _table(real_traces)
    path = tmp_path / "kernel_details.csv"
    path.write_text("\n".join([rows[0] + "," + OVER, *(r + "," for r in rows[1:])]) + "\n")
    line = _one_error(capsys, *command, str(path))
    assert line.startswith(f"tilescope: error: {path}: line 1: header: {CAP_TEXT} per field"), line


def test_a_kernel_name_over_the_cap_names_its_row(
    real_traces: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = _table(real_traces)
    assert rows[0].startswith("Name,")
    rows[3] = OVER + rows[3][rows[3].index(",") :]
    path = tmp_path / "kernel_details.csv"
    path.write_text("\n".join(rows) + "\n")
    for command in (
        ["analyze", "--format", "json"],
        ["kernels", "--format", "csv", "-o", str(tmp_path / "k.csv")],
    ):
        line = _one_error(capsys, *command, str(path))
        assert f"{path}: row 3 (line 4): column 'Name': {CAP_TEXT}, found 1,048,577 bytes" in line, line
    assert not (tmp_path / "k.csv").exists()
    # at the cap itself: read
    rows[3] = OVER[1:] + rows[3][rows[3].index(",") :]
    path.write_text("\n".join(rows) + "\n")
    code, out, err = cli(capsys, "kernels", str(path), "--format", "json")
    assert code == 0, err
    assert max(len(r["name"]) for r in json.loads(out)) == MAX_TEXT_BYTES


def test_a_header_wider_than_1_mib_is_read_whole(
    real_traces: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """1,100 columns of 1,006 bytes (1.05 MiB of header, cut at 1 MiB before), and a last column
    whose values must still be there."""
    rows = _table(real_traces)
    fill = [f"f{i:04d}_" + "x" * 1_000 for i in range(1_100)]
    header = ",".join([rows[0], *fill, "last_metric"])
    assert len(header) > 1 << 20
    path = tmp_path / "kernel_details.csv"
    path.write_text("\n".join([header, *(",".join([r, *[""] * len(fill), "7"]) for r in rows[1:])]) + "\n")
    code, out, err = cli(capsys, "kernels", str(path), "--format", "json")
    assert code == 0, err
    kernels = json.loads(out)
    assert len(kernels) == len(rows) - 1
    assert {k["last_metric"] for k in kernels} == {7.0}


def test_too_many_columns_or_a_header_without_end_are_refused_on_line_1(
    real_traces: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # the caps scaled down (10,000 columns, 16 MiB): the same code path on a small file
    monkeypatch.setattr(csv_header, "MAX_COLUMNS", 50)
    monkeypatch.setattr(csv_header, "MAX_HEADER_BYTES", 64 << 10)
    rows = _table(real_traces)
    wide = tmp_path / "wide" / "kernel_details.csv"
    wide.parent.mkdir()
    extra = [f"c{i}" for i in range(60)]
    wide.write_text("\n".join([",".join([rows[0], *extra]), *(r + "," * 60 for r in rows[1:])]) + "\n")
    line = _one_error(capsys, "kernels", str(wide), "--format", "json")
    n = rows[0].count(",") + 1 + 60
    assert line == f"tilescope: error: {wide}: line 1: expected a header of at most 50 columns, found {n}"
    endless = tmp_path / "endless" / "kernel_details.csv"
    endless.parent.mkdir()
    endless.write_text(rows[0] + "," + ",".join(f"c{i}" for i in range(20_000)))  # 150 KB, no line end
    line = _one_error(capsys, "kernels", str(endless), "--format", "json")
    assert line.startswith(f"tilescope: error: {endless}: line 1: expected a CSV header of at most 0 MiB")


def test_a_sqlite_string_over_the_cap_is_refused_before_it_is_read(
    real_traces: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "msprof_0.db"
    shutil.copy(real_traces / "msprof_db_2023" / "msprof_0.db", db)
    con = sqlite3.connect(db)
    name_id = con.execute("SELECT name FROM COMPUTE_TASK_INFO LIMIT 1").fetchone()[0]
    con.execute("UPDATE STRING_IDS SET value = ? WHERE id = ?", (OVER, name_id))
    con.commit()
    con.close()
    line = _one_error(capsys, "analyze", str(db), "--format", "json")
    assert line == (
        f"tilescope: error: {db}: table STRING_IDS id={name_id}: column value: {CAP_TEXT}, found more"
    )


def test_plain_text_in_a_sqlite_task_table_is_held_to_the_same_cap(
    real_traces: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "msprof_0.db"
    shutil.copy(real_traces / "msprof_db_2023" / "msprof_0.db", db)
    con = sqlite3.connect(db)
    gid = con.execute("SELECT min(globalTaskId) FROM COMPUTE_TASK_INFO").fetchone()[0]
    con.execute(
        "UPDATE COMPUTE_TASK_INFO SET opType = ? WHERE globalTaskId = ?",
        ("é" * (MAX_TEXT_BYTES // 2 + 1), gid),
    )
    con.commit()
    con.close()
    line = _one_error(capsys, "analyze", str(db), "--format", "json")
    assert f"{db}: task globalTaskId={gid}: column 'op_type': {CAP_TEXT}, found 1,048,578 bytes" in line, line


def test_a_timeline_name_over_the_cap_names_the_event(
    real_traces: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    events = json.loads((real_traces / "torch_timeline_3670" / "trace_view.json").read_text())
    target = next(e for e in events if e.get("ph") == "X" and "dur" in e)
    target["name"] = OVER
    path = tmp_path / "trace_view.json"
    path.write_text(json.dumps(events))
    line = _one_error(capsys, "info", str(path))
    assert line.startswith(f"tilescope: error: {path}: ") and " 'NNNN" in line  # the event, its name cut
    assert f"column 'name': {CAP_TEXT}, found 1,048,577 bytes" in line
