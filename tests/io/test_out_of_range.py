"""Issue #26 item 10: a value outside its documented range (a profiler's own `cube_utilization(%)`
of 1,473 or 3.3e13 on a corrupt row) is flagged on its row and left out of every sum, with one note
that counts such values and names the first; `--strict` refuses the file; a duration or start time
outside its range is still refused (every total rests on them). No real profile we hold writes one,
so the file is written here."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tilescope.commands.analyze import renderer
from tilescope.io.load import load_profiles
from tilescope.report.data import validate_report

from support import cli

HEADER = "Name,Type,Accelerator Core,Start Time(us),Duration(us),Block Dim,aic_mac_ratio,cube_utilization(%)"


def _write(tmp_path: Path, values: list[tuple[str, str]], duration: str = "50.0") -> Path:
    rows = [HEADER]
    for i, (mac, util) in enumerate(values):
        dur = duration if i == 3 else "50.0"
        rows.append(f"MatMul{i % 2},MatMul,AI_CORE,{1000 + 100 * i}.5,{dur},20,{mac},{util}")
    path = tmp_path / "kernel_details.csv"
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


VALUES = [("0.5", "80.0"), ("0.7", "1473"), ("0.6", "3.3e13"), ("9", "70.0"), ("0.4", "60.0")]


def test_flagged_on_the_row_and_left_out(tmp_path: Path) -> None:
    (p,) = load_profiles(_write(tmp_path, VALUES))
    k = p.kernels
    assert len(k) == 5  # no row is lost
    flags = k["out_of_range"].astype("object").where(k["out_of_range"].notna(), None).tolist()
    assert flags == [None, "cube_utilization(%)", "cube_utilization(%)", "aic_mac_ratio", None]
    assert np.isnan(k["aic_cube_ratio"].iloc[3]) and k["aic_cube_ratio"].iloc[[0, 1, 2, 4]].tolist() == [
        0.5,
        0.7,
        0.6,
        0.4,
    ]
    said = p.values_out_of_range
    assert said is not None and said["count"] == 3
    assert said["first"] == (
        f"{tmp_path / 'kernel_details.csv'}: row 2 (line 3): column 'cube_utilization(%)': "
        "expected a percentage 0 .. 101, found 1473"
    )
    assert p.warnings[0] == said["note"] and said["note"].startswith(
        "3 values outside their documented range"
    )


def test_every_format_says_it_and_sums_leave_it_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(tmp_path, VALUES)
    code, out, err = cli(capsys, "analyze", str(path), "-f", "json", "--no-cache")
    assert code == 0, err
    report = json.loads(out)
    validate_report(report)
    assert report["profiles"][0]["values_out_of_range"]["count"] == 3
    # MatMul1 is rows 1 and 3: its mean aic_cube_ratio (the file's aic_mac_ratio) is row 1's alone
    # (row 3's 9 is left out)
    (row,) = [t for t in report["summary"]["top_kernels"] if t["name"] == "MatMul1"]
    assert row["aic_cube_ratio"] == 0.7
    for fmt in ("text", "md", "html"):
        assert "3 values outside their documented range left out" in renderer(fmt)(report), fmt


def test_strict_refuses_and_durations_are_always_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(tmp_path, VALUES)
    code, _out, err = cli(capsys, "analyze", "--strict", str(path))
    assert code == 2 and "row 4 (line 5): column 'aic_mac_ratio': expected a ratio 0 .. 1.01, found 9" in err
    path = _write(tmp_path, [*VALUES[:3], ("0.5", "50.0"), ("0.5", "50.0")], duration="-3")
    code, _out, err = cli(capsys, "analyze", str(path))
    assert code == 2 and "row 4 (line 5): column 'Duration(us)': expected a duration" in err
