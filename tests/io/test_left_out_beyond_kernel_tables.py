"""Items 10-11 of #26 beyond the CSV kernel tables: a SQLite export, a timeline and an `msprof op`
block table skip an unreadable row and leave out a value outside its range with one counted note
each, through the kernel tables' mechanism (`bad_rows.SkippedRows`, `validate.flagged_entry`,
the `out_of_range` row flag); `--strict` refuses the file.

The inputs are copies of real files (../shared/traces/real) and of the repository's msprof op
sample, each with one value broken in the test (generated corruption of a documented format)."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from tilescope.errors import ProfileFormatError
from tilescope.io.bad_rows import strict_rows
from tilescope.io.load import load_profile

from support import REAL_TRACES, SAMPLES

DB = REAL_TRACES / "msprof_db_2023" / "msprof_0.db"


@pytest.mark.skipif(not DB.is_file(), reason=f"real traces not found at {DB}")
def test_sqlite_bad_task_skipped_and_value_flagged(tmp_path: Path) -> None:
    whole = load_profile(DB)
    compute = whole.kernels["global_task_id"].notna()  # and one collective, which has no task id
    assert int(compute.sum()) == 11 and whole.rows_skipped is None
    db = tmp_path / "msprof_0.db"
    shutil.copy(DB, db)
    db.chmod(0o644)
    con = sqlite3.connect(db)
    with con:  # task 1 ends before it starts; task 0's block count is negative
        con.execute("UPDATE TASK SET endNs = startNs - 1000 WHERE globalTaskId = 1")
        con.execute("UPDATE COMPUTE_TASK_INFO SET blockDim = -3 WHERE globalTaskId = 0")
    con.close()
    p = load_profile(db)
    assert int(p.kernels["global_task_id"].notna().sum()) == 10  # the one ending before it starts: out
    assert 1 not in set(p.kernels["global_task_id"].dropna().astype(int))
    assert p.rows_skipped is not None and p.rows_skipped["count"] == 1
    assert "1 unreadable row skipped" in p.rows_skipped["note"] and "--strict" in p.rows_skipped["note"]
    assert p.values_out_of_range is not None and p.values_out_of_range["count"] == 1
    assert "1 value outside its documented range" in p.values_out_of_range["note"]
    flagged = p.kernels[p.kernels["out_of_range"].notna()]
    assert len(flagged) == 1 and flagged["block_dim"].isna().all()
    assert any(w == p.rows_skipped["note"] for w in p.warnings)
    # the device time is the 11 tasks' 663.872 µs (README) less the skipped one's
    d = p.kernels.loc[p.kernels["global_task_id"].notna(), "duration_us"]
    assert float(d.sum()) < 663.872
    assert float(whole.kernels.loc[compute, "duration_us"].sum()) == pytest.approx(663.872)
    with strict_rows(True), pytest.raises(ProfileFormatError):
        load_profile(db)


def test_msprof_op_block_rows(tmp_path: Path) -> None:
    op = tmp_path / "OPPROF_x"
    shutil.copytree(next((SAMPLES / "tilelang_fa_msprof_op").glob("OPPROF_*")), op)
    pipe = op / "PipeUtilization.csv"
    lines = pipe.read_text().splitlines()
    header = lines[0].split(",")
    ratio = header.index("aic_cube_ratio")
    row = lines[1].split(",")  # block 0's cube0 row: its Cube ratio 7.5 is no ratio
    row[ratio] = "7.5"
    lines[1] = ",".join(row)
    lines[5] = ",".join(lines[5].split(",")[:10])  # a row cut short: 10 of its fields
    pipe.write_text("\n".join(lines) + "\n")
    p = load_profile(op)
    assert p.rows_skipped is not None and p.rows_skipped["count"] == 1
    assert "row 5 (line 6)" in p.rows_skipped["first"] and "PipeUtilization.csv" in p.rows_skipped["first"]
    assert p.values_out_of_range is not None and p.values_out_of_range["count"] == 1
    assert "'aic_cube_ratio'" in p.values_out_of_range["first"] and "7.5" in p.values_out_of_range["first"]
    assert p.blocks is not None
    b0 = p.blocks[(p.blocks["block_id"] == 0) & (p.blocks["sub_block_id"].astype(str) == "cube0")]
    assert b0["aic_cube_ratio"].isna().all()  # left out of the launch's cycle-weighted mean
    assert p.rows_skipped["note"] in p.warnings and p.values_out_of_range["note"] in p.warnings
    with strict_rows(True), pytest.raises(ProfileFormatError):
        load_profile(op)


TIMELINE = REAL_TRACES / "torch_timeline_3670" / "trace_view.json"


@pytest.mark.skipif(not TIMELINE.is_file(), reason=f"real traces not found at {TIMELINE}")
def test_timeline_event_with_negative_duration(tmp_path: Path) -> None:
    from tilescope.analysis import analyze
    from tilescope.report.data import build_report

    data = json.loads(TIMELINE.read_text())
    events = data if isinstance(data, list) else data["traceEvents"]
    lanes = {
        e["pid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e.get("name") == "process_name"
    }
    device = [e for e in events if e.get("ph") == "X" and lanes.get(e["pid"]) == "Ascend Hardware"]
    assert len(device) == 276
    device[5]["dur"] = -5.0  # a task that ends before it starts
    bad = tmp_path / "trace_view.json"
    bad.write_text(json.dumps(data))
    p = load_profile(bad)
    assert p.timeline is not None and len(p.timeline.kernels) == 275
    said = p.timeline.rows_skipped
    assert said is not None and said["count"] == 1
    assert device[5]["name"][:40] in said["first"] and "'dur'" in said["first"]
    report = build_report([(p, analyze(p))])
    entry = report["profiles"][0]
    assert entry["rows_skipped"]["count"] >= 1 and said["note"] in entry["warnings"]
    with strict_rows(True), pytest.raises(ProfileFormatError):
        q = load_profile(bad)
        _ = q.timeline
