"""The cross-rank summaries of torch_npu's database export (`analysis.db`, export_type=db).

No real analysis.db is available: every database here is built in tmp_path from the schema in
torch_npu's source (Ascend/pytorch @ 9e73e708ab9350d203475609f36f8a43f6a0c2ab,
torch_npu/profiler/analysis/prof_common_func/_constant.py `TableColumnsManager`), with rows laid
out as CANN's msprof writes them (kali20gakki/msprof @ 66c00af8b75e6baad12f2b5e839093856b60ade0,
analysis/msmodel/cluster_info/communication_analyzer_model.py) and torch_npu then copies them,
adding `step` and `type` (prof_view/prof_db_parse/_communication_db_parser.py). Values are
synthetic, except in the real-run tests, where they are the published text files of
gpt3_2rank_memoryl0 converted row by row (docs/analysis-db.md).
"""

from __future__ import annotations

import csv
import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from tilescope.cli import main
from tilescope.cluster import Cluster, build_cluster, rank_tables
from tilescope.io.cluster_files import read_communication, read_communication_matrix, read_step_trace
from tilescope.io.load import load_profiles

OUT = "ASCEND_PROFILER_OUTPUT"
TEXT_FILES = ("step_trace_time.csv", "communication.json", "communication_matrix.json")

# torch_npu's TableColumnsManager (source above); StepTraceTime without `deviceId` before
# Ascend/pytorch 72e3a7dc5 (2025-06)
STEP_TRACE_COLUMNS = [
    ("deviceId", "INTEGER"), ("step", "TEXT"), ("computing", "NUMERIC"),
    ("communication_not_overlapped", "NUMERIC"), ("overlapped", "NUMERIC"), ("communication", "NUMERIC"),
    ("free", "NUMERIC"), ("stage", "NUMERIC"), ("bubble", "NUMERIC"),
    ("communication_not_overlapped_and_exclude_receive", "NUMERIC"), ("preparing", "NUMERIC"),
]
TIME_COLUMNS = [
    ("hccl_op_name", "TEXT"), ("group_name", "TEXT"), ("start_timestamp", "NUMERIC"),
    ("elapse_time", "NUMERIC"), ("transit_time", "NUMERIC"), ("wait_time", "NUMERIC"),
    ("synchronization_time", "NUMERIC"), ("idle_time", "NUMERIC"), ("step", "TEXT"), ("type", "TEXT"),
]
BANDWIDTH_COLUMNS = [
    ("hccl_op_name", "TEXT"), ("group_name", "TEXT"), ("transport_type", "TEXT"),
    ("transit_size", "NUMERIC"), ("transit_time", "NUMERIC"), ("bandwidth", "NUMERIC"),
    ("large_packet_ratio", "NUMERIC"), ("package_size", "NUMERIC"), ("count", "NUMERIC"),
    ("total_duration", "NUMERIC"), ("step", "TEXT"), ("type", "TEXT"),
]
MATRIX_COLUMNS = [
    ("hccl_op_name", "TEXT"), ("group_name", "TEXT"), ("src_rank", "TEXT"), ("dst_rank", "TEXT"),
    ("transport_type", "TEXT"), ("transit_size", "NUMERIC"), ("transit_time", "NUMERIC"),
    ("bandwidth", "NUMERIC"), ("step", "TEXT"), ("type", "TEXT"), ("op_name", "TEXT"),
]
TABLES = {
    "StepTraceTime": STEP_TRACE_COLUMNS, "CommAnalyzerTime": TIME_COLUMNS,
    "CommAnalyzerBandwidth": BANDWIDTH_COLUMNS, "CommAnalyzerMatrix": MATRIX_COLUMNS,
}
# step_trace_time.csv header -> StepTraceTime column
CSV_TO_DB = {
    "Step": "step", "Computing": "computing", "Communication(Not Overlapped)": "communication_not_overlapped",
    "Overlapped": "overlapped", "Communication": "communication", "Free": "free", "Stage": "stage",
    "Bubble": "bubble",
    "Communication(Not Overlapped and Exclude Receive)": "communication_not_overlapped_and_exclude_receive",
    "Preparing": "preparing",
}
TOTAL = "Total Op Info"

Rows = dict[str, list[tuple[Any, ...]]]


def write_db(path: Path, rows: Rows, tables: dict[str, list[tuple[str, str]]] | None = None) -> Path:
    """analysis.db with `tables` (default: torch_npu's four), created as DbManager does
    (`CREATE TABLE name (col TYPE, ...)`), and `rows` inserted in order."""
    path.parent.mkdir(parents=True, exist_ok=True)
    con = sqlite3.connect(path)
    for name, cols in (TABLES if tables is None else tables).items():
        con.execute(f"CREATE TABLE {name} ({', '.join(f'{c} {t}' for c, t in cols)})")
        if rows.get(name):
            con.executemany(f"INSERT INTO {name} VALUES ({', '.join('?' * len(cols))})", rows[name])
    con.commit()
    con.close()
    return path


def rows_from_text(out: Path, device_id: int) -> Rows:
    """The text export's three files as the db export's rows (see the module docstring):
    StepTraceTime one row per CSV row (µs as they are); CommAnalyzerTime one row per operator
    ("<op>@<group>" split, times as in the JSON: start µs, the rest ms); CommAnalyzerBandwidth per
    transport whose numbers are not all 0, one row per packet size, or one with size/count/duration
    0 when it has none (msprof's get_band_info); CommAnalyzerMatrix one row per link. The
    "Total Op Info" sums are torch_npu's own text-only additions: not rows."""
    rows: Rows = {name: [] for name in TABLES}
    with open(out / "step_trace_time.csv", newline="", encoding="utf-8-sig") as fh:
        for rec in csv.DictReader(fh):
            values = {CSV_TO_DB[k]: v for k, v in rec.items() if k in CSV_TO_DB}
            row = [device_id, values["step"]]
            row += [float(values[c]) if c in values else 0.0 for c, _t in STEP_TRACE_COLUMNS[2:]]
            rows["StepTraceTime"].append(tuple(row))
    comm = json.loads((out / "communication.json").read_text())
    for step, kinds in comm.items():
        for kind, ops in kinds.items():
            for op, entry in ops.items():
                if op == TOTAL:
                    continue
                name, group = op.split("@")
                t = entry["Communication Time Info"]
                rows["CommAnalyzerTime"].append((
                    name, group, t["Start Timestamp(us)"], t["Elapse Time(ms)"], t["Transit Time(ms)"],
                    t["Wait Time(ms)"], t["Synchronization Time(ms)"], t["Idle Time(ms)"], step, kind,
                ))
                for transport, b in entry["Communication Bandwidth Info"].items():
                    nums = [b["Transit Size(MB)"], b["Transit Time(ms)"], b["Bandwidth(GB/s)"],
                            b["Large Packet Ratio"]]
                    if sum(nums) == 0:
                        continue
                    sizes = b["Size Distribution"] or {0: [0, 0]}
                    for size, (count, duration) in sizes.items():
                        rows["CommAnalyzerBandwidth"].append(
                            (name, group, transport, *nums, float(size), count, duration, step, kind))
    matrix = json.loads((out / "communication_matrix.json").read_text())
    for step, kinds in matrix.items():
        for kind, ops in kinds.items():
            for op, links in ops.items():
                if op == TOTAL:
                    continue
                name, group = op.split("@")
                for link, i in links.items():
                    src, dst = link.split("-")
                    rows["CommAnalyzerMatrix"].append((
                        name, group, src, dst, i["Transport Type"], i["Transit Size(MB)"],
                        i["Transit Time(ms)"], i["Bandwidth(GB/s)"], step, kind, name,
                    ))
    return rows


def _gpt3(real: Path) -> Path:
    d = real / "gpt3_2rank_memoryl0"
    if not d.is_dir():
        pytest.skip("gpt3_2rank_memoryl0 not available")
    return d


def _db_export_copy(src: Path, dst: Path, keep_text: tuple[str, ...] = ()) -> Path:
    """A copy of the real run whose ranks carry analysis.db instead of (besides `keep_text`) the
    text summaries. The published folder is only read."""
    shutil.copytree(src, dst)
    for rank in (0, 1):
        out = dst / f"test_rank_{rank}" / OUT
        write_db(out / "analysis.db", rows_from_text(out, rank))
        for name in TEXT_FILES:
            if name not in keep_text:
                (out / name).unlink()
    return dst


def _cluster(path: Path) -> Cluster:
    profiles = load_profiles(path)
    return build_cluster(profiles, profiles.failures)


def _same_tables(a: Cluster, b: Cluster) -> None:
    pd.testing.assert_frame_equal(a.steps.drop(columns="source"), b.steps.drop(columns="source"))
    pd.testing.assert_frame_equal(a.comm_ops, b.comm_ops)
    pd.testing.assert_frame_equal(a.links, b.links)
    pd.testing.assert_frame_equal(a.kernels, b.kernels)


# ---- the real 2-rank run, converted ----------------------------------------------------------------


def test_real_run_from_analysis_db_equals_the_text_export(real_traces: Path, tmp_path: Path) -> None:
    text_run = _gpt3(real_traces)
    db_run = _db_export_copy(text_run, tmp_path / "db")
    text, db = _cluster(text_run), _cluster(db_run)
    _same_tables(text, db)
    assert set(db.steps["source"]) == {"analysis.db"} and db.notes == text.notes == []
    # torch_npu's own split of rank 1 (traces/real/README.md)
    (row,) = db.steps[db.steps["rank"] == 1].to_dict("records")
    assert (row["step"], row["computing_us"], row["communication_not_overlapped_us"], row["free_us"]) == (
        2, 75422.22, 151303.54, 67860.80000000012)
    assert len(db.comm_ops) == 56 and len(db.links) == len(text.links) > 0
    assert [Path(r.files[-1]).name for r in db.ranks] == ["analysis.db", "analysis.db"]


def test_real_run_from_analysis_db_has_the_same_findings(
    real_traces: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text_run = _gpt3(real_traces)
    db_run = _db_export_copy(text_run, tmp_path / "db")
    reports = []
    for run in (text_run, db_run):
        # rank 0's kernel table has a short row: skipped with a note, both ranks load
        assert main(["analyze", str(run), "-f", "json", "--no-cache"]) == 0
        reports.append(json.loads(capsys.readouterr().out))
    text, db = reports

    def cluster_findings(report: dict[str, Any]) -> list[tuple[str, str, Any]]:
        found = report["findings"]
        return [(f["code"], f["message"], f["evidence"]) for f in found if f.get("scope") == "cluster"]

    assert {c for c, _m, _e in cluster_findings(db)} >= {"TS602", "TS605"}
    assert cluster_findings(db) == cluster_findings(text)
    for section in ("ranks", "steps"):  # the same numbers, read from another file of another folder
        assert {r["source"] for r in db["cluster"][section]} == {"analysis.db"}
        assert [_without_source(r, str(text_run), str(db_run)) for r in text["cluster"][section]] == [
            _without_source(r, str(db_run), str(db_run)) for r in db["cluster"][section]]
    for key in ("slow_rank", "ranks_loaded", "notes", "rules_run", "links"):
        assert text["cluster"][key] == db["cluster"][key], key
    assert text["cluster"]["ranks"][1]["computing_us"] == 75422.22


def _without_source(row: dict[str, Any], folder: str, into: str) -> dict[str, Any]:
    out = {k: v for k, v in row.items() if k != "source"}
    for k in ("path", "error"):
        if isinstance(out.get(k), str):
            out[k] = out[k].replace(folder, into)
    return out


def test_text_files_win_over_analysis_db(real_traces: Path, tmp_path: Path) -> None:
    """Both exports present: the text files are read; analysis.db fills only what has no file."""
    text_run = _gpt3(real_traces)
    keep = ("step_trace_time.csv", "communication.json")
    both = _db_export_copy(text_run, tmp_path / "both", keep_text=keep)
    for rank in (0, 1):  # make the database disagree, to see which one is read
        con = sqlite3.connect(both / f"test_rank_{rank}" / OUT / "analysis.db")
        con.execute("UPDATE StepTraceTime SET computing = computing * 2")
        con.execute("UPDATE CommAnalyzerTime SET wait_time = 0")
        con.commit()
        con.close()
    text, mixed = _cluster(text_run), _cluster(both)
    _same_tables(text, mixed)
    assert set(mixed.steps["source"]) == {"step_trace_time.csv"}
    names = [[Path(f).name for f in r.files] for r in mixed.ranks]
    assert names == [["step_trace_time.csv", "communication.json", "analysis.db"]] * 2


def test_reading_leaves_the_folder_as_it_was(real_traces: Path, tmp_path: Path) -> None:
    db_run = _db_export_copy(_gpt3(real_traces), tmp_path / "db")
    out = db_run / "test_rank_1" / OUT
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    _cluster(db_run)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before  # no journal, -wal or -shm


# ---- synthetic databases -----------------------------------------------------------------------------


def _rank(tmp_path: Path, rows: Rows, tables: dict[str, list[tuple[str, str]]] | None = None) -> Path:
    root = tmp_path / "rank_0"
    write_db(root / OUT / "analysis.db", rows, tables)
    return root


SYNTHETIC: Rows = {
    "StepTraceTime": [(0, "3", 100.0, 40.0, 10.0, 50.0, 20.0, 150.0, 0.0, 40.0, 1.0)],
    "CommAnalyzerTime": [
        ("hcom_allReduce__1_0", "g1", 1_000_000.5, 0.05, 0.01, 0.03, 0.03, 0.01, "step3", "collective"),
        ("hcom_send__1_1", "g2", 1_000_100.0, 0.02, 0.02, 0.0, 0.0, 0.0, "step3", "p2p"),
        ("total", "g1", 1_000_000.5, 0.07, 0.03, 0.03, 0.03, 0.01, "step3", ""),  # torch_npu's sum row
    ],
    "CommAnalyzerBandwidth": [
        # HCCS and SDMA tie on size: the first (the JSON's order) is the busiest, as in the text
        ("hcom_allReduce__1_0", "g1", "HCCS", 2.0, 0.01, 200.0, 1.0, 1.0, 1, 0.005, "step3", "collective"),
        ("hcom_allReduce__1_0", "g1", "HCCS", 2.0, 0.01, 200.0, 1.0, 0.5, 2, 0.005, "step3", "collective"),
        ("hcom_allReduce__1_0", "g1", "SDMA", 2.0, 0.02, 100.0, 1.0, 0, 0, 0, "step3", "collective"),
        ("hcom_allReduce__1_0", "g1", "RDMA", 0.5, 0.01, 50.0, 1.0, 0, 0, 0, "step3", "collective"),
    ],
    "CommAnalyzerMatrix": [
        # op_name: the collective the row is about (a per-operator key names itself)
        ("hcom_allReduce__1_0", "g1", "0", "1", "HCCS", 2.0, 0.01, 200.0, "step3", "collective",
         "hcom_allReduce__1_0"),
        ("hcom_send__1_1", "g2", "0", "8", "RDMA", 1.0, 0.02, 50.0, "step3", "p2p", "hcom_send__1_1"),
    ],
}


def test_synthetic_tables_in_the_text_readers_units(tmp_path: Path) -> None:
    t = rank_tables(_rank(tmp_path, SYNTHETIC), None)
    assert t.notes == []
    (step,) = t.steps.to_dict("records")
    assert step == {
        "step": 3, "computing_us": 100.0, "communication_not_overlapped_us": 40.0, "overlapped_us": 10.0,
        "communication_us": 50.0, "free_us": 20.0, "stage_us": 150.0, "bubble_us": 0.0,
        "step_us": 160.0, "source": "analysis.db",
    }
    ops = t.comm_ops
    assert list(ops["op"]) == ["hcom_allReduce__1_0@g1", "hcom_send__1_1@g2"]  # the sum row left out
    first = ops.iloc[0]
    assert (first["kind"], first["start_us"], first["elapse_us"], first["wait_us"]) == (
        "collective", 1_000_000.5, 50.0, 30.0)
    assert (first["transport"], first["size_mb"], first["bandwidth_gbps"]) == ("HCCS", 2.0, 200.0)
    second = ops.iloc[1]  # no bandwidth rows: as an operator whose transports all moved 0 bytes
    assert second["transport"] is None and second["size_mb"] == 0.0 and pd.isna(second["bandwidth_gbps"])
    links = t.links.to_dict("records")
    assert links[1] == {"step": 3, "kind": "p2p", "op": "hcom_send__1_1@g2", "src_rank": 0, "dst_rank": 8,
                        "transport": "RDMA", "size_mb": 1.0, "transit_us": 20.0, "bandwidth_gbps": 50.0,
                        "collective": "hcom_send__1_1"}


def test_synthetic_tables_have_the_text_readers_columns(tmp_path: Path) -> None:
    """Same columns and dtypes as the text readers give for the same content."""
    root = _rank(tmp_path, SYNTHETIC)
    out = root / OUT
    (out / "step_trace_time.csv").write_text(
        "Step,Computing,Communication(Not Overlapped),Overlapped,Communication,Free,Stage,Bubble\n"
        "3,100.0,40.0,10.0,50.0,20.0,150.0,0\n")
    t = rank_tables(root, None)
    text = read_step_trace(out / "step_trace_time.csv")
    pd.testing.assert_frame_equal(t.steps.drop(columns=["step_us", "source"]), text)
    (out / "step_trace_time.csv").unlink()
    db = rank_tables(root, None)
    pd.testing.assert_frame_equal(db.steps, t.steps.assign(source="analysis.db"))
    comm = {"step3": {"collective": {"hcom_allReduce__1_0@g1": {
        "Communication Time Info": {"Start Timestamp(us)": 1_000_000.5, "Elapse Time(ms)": 0.05,
                                    "Transit Time(ms)": 0.01, "Wait Time(ms)": 0.03,
                                    "Synchronization Time(ms)": 0.03, "Idle Time(ms)": 0.01},
        "Communication Bandwidth Info": {"HCCS": {"Transit Size(MB)": 2.0, "Bandwidth(GB/s)": 200.0},
                                         "SDMA": {"Transit Size(MB)": 2.0, "Bandwidth(GB/s)": 100.0}}}}}}
    (out / "communication.json").write_text(json.dumps(comm))
    pd.testing.assert_frame_equal(db.comm_ops.iloc[:1], read_communication(out / "communication.json"))
    link = {"Transport Type": "HCCS", "Transit Size(MB)": 2.0, "Transit Time(ms)": 0.01,
            "Bandwidth(GB/s)": 200.0}
    matrix = {"step3": {"collective": {"hcom_allReduce__1_0@g1": {"0-1": link}}}}
    (out / "communication_matrix.json").write_text(json.dumps(matrix))
    text_links = read_communication_matrix(out / "communication_matrix.json")
    pd.testing.assert_frame_equal(db.links.iloc[:1], text_links)


def test_older_step_trace_without_device_id(tmp_path: Path) -> None:
    tables = dict(TABLES, StepTraceTime=STEP_TRACE_COLUMNS[1:])
    rows = dict(SYNTHETIC, StepTraceTime=[r[1:] for r in SYNTHETIC["StepTraceTime"]])
    t = rank_tables(_rank(tmp_path, rows, tables), None)
    assert t.notes == [] and list(t.steps["computing_us"]) == [100.0]


def test_placeholder_row_without_steps_is_not_a_measurement(tmp_path: Path) -> None:
    """Without step marks older torch_npu writes one row of zeros with a NULL step."""
    rows = dict(SYNTHETIC, StepTraceTime=[(None, *([0] * 9))])
    tables = dict(TABLES, StepTraceTime=STEP_TRACE_COLUMNS[1:])
    t = rank_tables(_rank(tmp_path, rows, tables), None)
    assert t.notes == [] and t.steps.empty and len(t.comm_ops) == 2


# ---- damaged and foreign databases -------------------------------------------------------------------


def _one_note(t: Any) -> str:
    (note,) = t.notes
    assert isinstance(note, str)
    return note


def test_not_a_database_is_a_note(tmp_path: Path) -> None:
    root = tmp_path / "rank_0"
    (root / OUT).mkdir(parents=True)
    (root / OUT / "analysis.db").write_text("Step,Computing\n2,1.0\n")
    t = rank_tables(root, None)
    note = _one_note(t)
    assert "analysis.db: byte 0: not an SQLite database" in note and note.endswith("analysis.db left out")
    assert t.steps.empty and t.files == []


def test_missing_table_is_a_note_and_the_rest_is_read(tmp_path: Path) -> None:
    tables = {k: v for k, v in TABLES.items() if k != "CommAnalyzerMatrix"}
    t = rank_tables(_rank(tmp_path, SYNTHETIC, tables), None)
    note = _one_note(t)
    assert "analysis.db: expected a table CommAnalyzerMatrix" in note
    assert note.endswith("CommAnalyzerMatrix left out")
    assert len(t.steps) == 1 and len(t.comm_ops) == 2 and t.links.empty


def test_missing_column_is_a_note(tmp_path: Path) -> None:
    """msprof's own communication_analyzer.db has these tables without `step` and `type`."""
    tables = dict(TABLES, CommAnalyzerTime=TIME_COLUMNS[:-2])
    rows = dict(SYNTHETIC, CommAnalyzerTime=[r[:-2] for r in SYNTHETIC["CommAnalyzerTime"]])
    t = rank_tables(_rank(tmp_path, rows, tables), None)
    note = _one_note(t)
    assert "table CommAnalyzerTime: expected columns step, type" in note
    assert note.endswith("CommAnalyzerTime/CommAnalyzerBandwidth left out") and t.comm_ops.empty


@pytest.mark.parametrize(
    ("table", "row", "column", "value", "expected"),
    [
        ("CommAnalyzerTime", 0, 5, None, "table CommAnalyzerTime, rowid 1: column wait_time holds NULL"),
        ("CommAnalyzerTime", 1, 3, "fast", "rowid 2: column elapse_time holds the text 'fast'"),
        ("StepTraceTime", 0, 2, None, "table StepTraceTime, rowid 1: column computing holds NULL"),
        ("StepTraceTime", 0, 6, b"\x00\x01", "column free holds a 2-byte blob"),
        ("CommAnalyzerMatrix", 1, 3, "eight", "rowid 2: column dst_rank holds the text 'eight'"),
        ("CommAnalyzerBandwidth", 2, 5, float("inf"), "expected a finite number in column bandwidth"),
        ("CommAnalyzerMatrix", 0, 8, "epoch3", "column step holds the text 'epoch3'"),
    ],
)
def test_bad_value_is_a_note(
    tmp_path: Path, table: str, row: int, column: int, value: object, expected: str
) -> None:
    rows = {k: list(v) for k, v in SYNTHETIC.items()}
    changed = list(rows[table][row])
    changed[column] = value
    rows[table][row] = tuple(changed)
    t = rank_tables(_rank(tmp_path, rows), None)
    note = _one_note(t)
    assert expected in note and str(tmp_path / "rank_0" / OUT / "analysis.db") in note


def test_damaged_database_rank_keeps_its_kernels(real_traces: Path, tmp_path: Path) -> None:
    """A broken analysis.db on a rank whose kernel table loads: a note, the kernels, the steps
    recomputed from them; the other rank's database is read."""
    db_run = _db_export_copy(_gpt3(real_traces), tmp_path / "db")
    con = sqlite3.connect(db_run / "test_rank_1" / OUT / "analysis.db")
    con.execute("UPDATE CommAnalyzerTime SET transit_time = NULL WHERE rowid = 4")
    con.execute("DROP TABLE StepTraceTime")
    con.commit()
    con.close()
    cluster = _cluster(db_run)
    assert len(cluster.notes) == 2 and all(n.startswith("rank 1: ") for n in cluster.notes)
    assert "expected a table StepTraceTime" in cluster.notes[0]
    assert "table CommAnalyzerTime, rowid 4: column transit_time holds NULL" in cluster.notes[1]
    assert set(cluster.kernels["rank"]) == {0, 1} and set(cluster.comm_ops["rank"]) == {0}
    sources = dict(zip(cluster.steps["rank"], cluster.steps["source"], strict=True))
    assert sources == {0: "analysis.db", 1: "kernels"}


def test_pure_database_export(real_traces: Path, tmp_path: Path) -> None:
    """export_type=db alone: each rank's kernels from ascend_pytorch_profiler_{rank}.db (here the
    real msprof_db_2023 database), its summaries from analysis.db beside it."""
    kernels_db = real_traces / "msprof_db_2023" / "msprof_0.db"
    text_run = _gpt3(real_traces)
    if not kernels_db.is_file():
        pytest.skip("msprof_db_2023 not available")
    for rank in (0, 1):
        out = tmp_path / f"job_rank_{rank}_ascend_pt" / OUT
        write_db(out / "analysis.db", rows_from_text(text_run / f"test_rank_{rank}" / OUT, rank))
        shutil.copyfile(kernels_db, out / f"ascend_pytorch_profiler_{rank}.db")
    cluster = _cluster(tmp_path)
    assert [(r.rank, r.loaded) for r in cluster.ranks] == [(0, True), (1, True)] and cluster.notes == []
    assert set(cluster.steps["source"]) == {"analysis.db"} and set(cluster.kernels["rank"]) == {0, 1}
    text = _cluster(text_run)
    pd.testing.assert_frame_equal(cluster.comm_ops, text.comm_ops)
    pd.testing.assert_frame_equal(cluster.links, text.links)
