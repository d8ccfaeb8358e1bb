"""Input detection by content, folders that use every source they hold, timeline-only kernel tables,
coupled-chip op_summary headers and multi-rank parents with a broken rank."""

from __future__ import annotations

import csv
import json
import sqlite3
from decimal import Decimal
from pathlib import Path

import pandas as pd
import pytest

from tilescope.cli import main
from tilescope.errors import NoProfileFoundError, ProfileFormatError
from tilescope.io.bad_rows import STRICT_ENV
from tilescope.io.detect import SNIFF_BYTES, detect, sniff
from tilescope.io.kernel_csv import read_kernel_table
from tilescope.io.load import load_profile, load_profiles
from tilescope.io.parts import COUPLED_NOTE
from tilescope.io.timeline import read_timeline

from support import REPO_ROOT

KD_HEADER = (
    "Name,Type,Accelerator Core,Start Time(us),Duration(us),Block Dim,aicore_time(us),aic_total_cycles"
)
KD_ROWS = ['k1,MatMul,AI_CORE,"1000.5\t",10.0,20,9.0,324000', "k2,Add,AI_VECTOR_CORE,1020.000,2.0,40,0,0"]
OPS_HEADER = "Op Name,OP Type,Task Type,Task Start Time(us),Task Duration(us),Block Dim"
# formats doc §4, verbatim (every msprof op line ends with a comma)
BASIC_HEADER = (
    "Op Name,Op Type,Task Duration(us),Block Dim,Mix Block Dim,Device Id,Pid,Current Freq,Rated Freq,"
)
SIGMOID_NOTE = (
    "kernels from op_summary.csv (11 launches, PipeUtilization); timeline from trace.json; "
    "clock from OpBasicInfo.csv (Rated Freq 1650 MHz)"
)


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def _event(name: str, ts: str, dur: float, task_type: str | None, tid: int = 1) -> dict[str, object]:
    args: dict[str, object] = {"Task Id": 1, "Stream Id": tid}
    if task_type is not None:
        args["Task Type"] = task_type
    return {"name": name, "ph": "X", "pid": 9, "tid": tid, "ts": ts, "dur": dur, "args": args}


def _trace(events: list[dict[str, object]]) -> list[dict[str, object]]:
    lane = {"name": "process_name", "ph": "M", "pid": 9, "tid": 0, "args": {"name": "Ascend Hardware"}}
    return [lane, *events]


def _sigmoid(real: Path) -> Path:
    d = real / "tilelang_sigmoid_app" / "trace_data"
    if not d.is_dir():
        pytest.skip("tilelang_sigmoid_app not available")
    return d


# ---- detection by content, any file name ------------------------------------------------------------


def test_timeline_named_anything_is_a_timeline(tmp_path: Path) -> None:
    events = _trace([_event("k", "1000.000", 5.0, "AI_CORE")])
    bare = _write(tmp_path / "trace.json", json.dumps(events))
    wrapped = _write(tmp_path / "run.trace", json.dumps({"displayTimeUnit": "ns", "traceEvents": events}))
    for p in (bare, wrapped):
        assert [d.format for d in detect(p)] == ["timeline_json"]
        pr = load_profile(p)
        assert pr.kernels["name"].tolist() == ["k"] and pr.kernels["core_type"].tolist() == ["AI_CORE"]


@pytest.mark.parametrize("content", ['{"a": 1}', "[1, 2, 3]", "[]", ""])
def test_json_that_is_not_a_trace_is_no_profile(
    tmp_path: Path, content: str, capsys: pytest.CaptureFixture[str]
) -> None:
    p = _write(tmp_path / "trace.json", content)
    with pytest.raises(NoProfileFoundError):
        detect(p)
    code = main(["info", str(p)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1
    expected = "no Ascend profile found (not a kernel table, timeline or profiler database)"
    assert err[0] == f"tilescope: error: {p}: {expected}"


def test_kernel_tables_by_header_whatever_the_name(tmp_path: Path) -> None:
    mine = _write(tmp_path / "a" / "my_kernels.csv", KD_HEADER + "\n" + "\n".join(KD_ROWS) + "\n")
    ops = _write(tmp_path / "b" / "op_summary.csv", OPS_HEADER + "\nx,Add,AI_VECTOR_CORE,5.000\t,1.0,8\n")
    for p, producer in ((mine, "torch_npu"), (ops, "msprof")):
        for target in (p, p.parent):  # the file, and a folder holding only it
            (det,) = detect(target)
            assert (det.format, det.path) == ("kernel_csv", p)
            assert load_profile(target).source.producer == producer


def test_op_basic_info_by_header(tmp_path: Path) -> None:
    p = _write(tmp_path / "basic.csv", BASIC_HEADER + "\nmain_kernel_mix_aic,mix,45.5,2,4,0,NA,1800,1850,\n")
    assert sniff(p) == "op_basic_info"  # not a kernel table although it has `Op Name`, `Task Duration(us)`
    pr = load_profile(p)
    assert (pr.source.format, pr.source.producer, pr.source.files) == ("msprof_op", "msprof_op", [p])
    assert pr.launches is not None and len(pr.launches) == 1 == len(pr.kernels)
    assert pr.kernels["duration_us"].tolist() == [45.5] and pr.kernels["block_dim"].tolist() == [2]
    # the msprof op convention: Current Freq is the clock, Rated Freq the rated one
    assert pr.device.aic_frequency_mhz == 1800 and pr.device.rated_frequency_mhz == 1850


def test_sqlite_by_magic_bytes(tmp_path: Path) -> None:
    p = tmp_path / "export.bin"
    con = sqlite3.connect(p)
    con.execute("CREATE TABLE HOST_INFO (hostUid TEXT)")
    con.commit()
    con.close()
    assert [d.format for d in detect(p)] == ["sqlite"]
    with pytest.raises(ProfileFormatError, match="missing table"):
        load_profile(p)


def test_sniffing_reads_only_the_head(tmp_path: Path) -> None:
    # a valid first event, then megabytes that no JSON reader would accept: detection never gets there
    head = json.dumps(_trace([_event("k", "1.000", 1.0, "AI_CORE")]))[:-1] + ","
    p = tmp_path / "big.json"
    p.write_bytes(head.encode() + b"\xff" * (4 << 20))
    assert SNIFF_BYTES < 64 << 10 and sniff(p) == "timeline"


# ---- which hardware tasks are kernels ----------------------------------------------------------------


def test_kernels_from_a_timeline_leave_runtime_tasks_out(tmp_path: Path) -> None:
    events = _trace([
        _event("PROFILING_ENABLE", "1.000", 0.02, "PROFILING_ENABLE"),
        _event("mm", "2.000", 5.0, "AI_CORE"),
        _event("MEMCPY_ASYNC", "3.000", 1.0, "Other"),  # torch_npu types runtime tasks `Other` too
        _event("Conv2D1", "4.000", 2.0, "Other"),  # ... and its compute kernels
        _event("EVENT_RECORD", "5.000", 0.1, "EVENT_RECORD"),
        _event("vec", "6.000", 3.0, "KERNEL_AIVEC"),  # the runtime's name of AI_VECTOR_CORE
        _event("untyped", "7.000", 1.5, None),
        _event("FFTS_TASK", "8.000", 1.0, "SDMA_SQE"),  # any other type is not a kernel
    ])
    p = _write(tmp_path / "t.json", json.dumps(events))
    pr = load_profile(p)
    assert pr.kernels["name"].tolist() == ["mm", "Conv2D1", "vec", "untyped"]
    assert pr.kernels["core_type"].tolist()[::2] == ["AI_CORE", "AI_VECTOR_CORE"]
    assert pr.kernels["core_type"].iloc[[1, 3]].isna().all()
    assert pr.timeline is not None and len(pr.timeline.kernels) == 8  # the timeline keeps every task
    assert "4 runtime tasks (PROFILING_ENABLE, MEMCPY_ASYNC, EVENT_RECORD, FFTS_TASK) are not kernels" in (
        pr.warnings
    )


def test_real_msprof_timeline_alone(real_traces: Path) -> None:
    d = _sigmoid(real_traces)
    pr = load_profile(d / "trace.json")
    assert (pr.source.format, pr.source.producer) == ("timeline_json", "msprof")
    k = pr.kernels
    assert len(k) == 11 and set(k["name"]) == {"main_kernel"} and set(k["core_type"]) == {"MIX_AIC"}
    assert round(float(k["duration_us"].sum()), 2) == 2635.28
    with open(d / "op_summary.csv", newline="") as fh:  # the kernel table's own total, read apart
        total = sum(Decimal(r["Task Duration(us)"]) for r in csv.DictReader(fh))
    assert total == Decimal("2635.280")
    assert pr.timeline is not None and len(pr.timeline.kernels) == 14
    assert "3 runtime tasks (PROFILING_ENABLE, TASK_TIMEOUT_SET, PROFILING_DISABLE) are not kernels" in (
        pr.warnings
    )
    # the counter reads 800 MHz under the first two launches and 1650 after
    assert pr.device.timeline_max_frequency_mhz == 1650


def test_real_torch_timeline_other_typed_kernels(real_traces: Path) -> None:
    p = real_traces / "torch_timeline_3670" / "trace_view.json"
    if not p.is_file():
        pytest.skip("torch_timeline_3670 not available")
    tl = read_timeline(p)
    pr = load_profile(p)
    assert len(tl.kernels) == 276 and len(pr.kernels) == 274
    assert "MEMCPY_ASYNC" not in set(pr.kernels["name"].astype(str))
    assert pr.kernels["core_type"].value_counts().to_dict() == {"AI_CPU": 2}  # `Other` says nothing
    assert "2 runtime tasks (MEMCPY_ASYNC) are not kernels" in pr.warnings
    assert pr.device.timeline_max_frequency_mhz is None  # torch_npu wrote no AI Core Freq counter


# ---- a folder uses every source it holds -------------------------------------------------------------


def test_real_folder_of_op_summary_trace_and_op_basic_info(real_traces: Path) -> None:
    d = _sigmoid(real_traces)
    for path in (d, d.parent):  # the folder, and its parent one level up
        (pr,) = load_profiles(path)
        assert pr.source.path == d and (pr.source.format, pr.source.producer) == ("folder", "msprof")
        assert pr.source.files == [d / "op_summary.csv", d / "trace.json", d / "OpBasicInfo.csv"]
        assert pr.source.metric_groups == ["PipeUtilization"]
        assert pr.warnings[0] == SIGMOID_NOTE
        k = pr.kernels
        assert len(k) == 11 and set(k["block_dim"]) == {96} and set(k["mix_block_dim"]) == {192}
        assert k["start_ns"].iloc[0] == 1786695371981107140  # "1786695371981107140.140\t" exactly
        assert k["aic_total_cycles"].iloc[0] == 140990
        assert pr.timeline is not None and len(pr.timeline.kernels) == 14
        assert pr.launches is not None and pr.launches["rated_freq_mhz"].tolist() == [1650]
        assert pr.device.rated_frequency_mhz == 1650 and pr.device.aic_frequency_mhz == 1650
        assert pr.device.timeline_max_frequency_mhz == 1650


def test_real_folder_lazy_timeline_is_not_waited_for(real_traces: Path) -> None:
    d = _sigmoid(real_traces)
    (pr,) = load_profiles(d, lazy_timeline=True)
    assert pr.timeline_pending and pr.device.timeline_max_frequency_mhz is None
    assert d / "trace.json" in pr.source.files
    assert pr.timeline is not None and len(pr.timeline.kernels) == 14


def test_folder_without_a_kernel_table_takes_kernels_from_its_timeline(tmp_path: Path) -> None:
    events = _trace([
        _event("k", "1.000", 2.0, "MIX_AIC"),
        _event("TASK_TIMEOUT_SET", "0.500", 9.0, "TASK_TIMEOUT_SET"),
    ])
    _write(tmp_path / "trace.json", json.dumps(events))
    _write(tmp_path / "OpBasicInfo.csv", BASIC_HEADER + "\nk,mix,2.0,4,8,0,NA,1800,1800,\n")
    pr = load_profile(tmp_path)
    assert pr.source.format == "folder" and pr.kernels["name"].tolist() == ["k"]
    assert pr.warnings[:2] == [
        "kernels from trace.json (1 compute tasks); timeline from trace.json; "
        "clock from OpBasicInfo.csv (Rated Freq 1800 MHz)",
        "1 runtime task (TASK_TIMEOUT_SET) is not a kernel",
    ]


def test_op_basic_info_with_block_metrics_stays_msprof_op(tmp_path: Path) -> None:
    from test_io_msprof_op import write_single

    root = write_single(tmp_path / "OPPROF_1_X")
    _write(root / "op_summary.csv", OPS_HEADER + "\nx,Add,AI_VECTOR_CORE,5.0,1.0,8\n")  # a stray table
    pr = load_profile(root)
    assert pr.source.format == "msprof_op" and pr.blocks is not None and len(pr.blocks) == 6
    # the same OpBasicInfo beside a kernel table only: the table gives the kernels
    plain = tmp_path / "plain"
    _write(plain / "OpBasicInfo.csv", (root / "OpBasicInfo.csv").read_text())
    _write(plain / "op_summary.csv", OPS_HEADER + "\nx,Add,AI_VECTOR_CORE,5.0,1.0,8\n")
    pr = load_profile(plain)
    assert pr.source.format == "folder" and pr.kernels["name"].tolist() == ["x"] and pr.blocks is None
    assert pr.device.rated_frequency_mhz == 1800 and pr.launches is not None


def test_broken_op_basic_info_beside_a_table_is_a_note(tmp_path: Path) -> None:
    _write(tmp_path / "kernel_details.csv", KD_HEADER + "\n" + "\n".join(KD_ROWS) + "\n")
    _write(tmp_path / "OpBasicInfo.csv", BASIC_HEADER + "\nk,mix,2.0\n")
    pr = load_profile(tmp_path)
    assert pr.source.format == "folder" and len(pr.kernels) == 2 and pr.launches is None
    assert any(w.startswith("OpBasicInfo.csv not used: ") and "row 1" in w for w in pr.warnings)


# ---- coupled chips -----------------------------------------------------------------------------------

# A coupled-chip (Atlas training / inference, 310P) op_summary: formats doc §3.2 "Coupled chips"
# (un-prefixed PMU names plus memory_bound) with the names and order of msprof's own header mapping
# (analysis/msconfig/prof_header_mapping.json: `Task Start Time` without a unit, `total_cycles`,
# `Block Num`); `Task Type` added as every op_summary has it.
COUPLED_HEADER = (
    "Op Name,Task ID,OP Type,Task Type,Stream ID,total_cycles,aicore_time(us),Task Start Time,"
    "Task Duration(us),Task Wait Time(us),Block Num,Input Shapes,vec_time(us),vec_ratio,mac_time(us),"
    "mac_ratio,scalar_time(us),scalar_ratio,mte1_time(us),mte1_ratio,mte2_time(us),mte2_ratio,"
    "mte3_time(us),mte3_ratio,icache_miss_rate,memory_bound"
)
COUPLED_ROW = (
    "MatMul_1,7,MatMul,AI_CORE,3,1000000,30.5,1699529622790614.812\t,31.25,0.5,32,\"16,16;16,16\","
    "3.0,0.1,25.0,0.82,1.5,0.05,4.0,0.13,20.0,0.66,2.0,0.07,0.001,0.8"
)


def test_coupled_op_summary(tmp_path: Path) -> None:
    p = _write(tmp_path / "op_summary_0_1.csv", COUPLED_HEADER + "\n" + COUPLED_ROW + "\n")
    kt = read_kernel_table(p)
    assert kt.coupled and kt.producer == "msprof"
    row = kt.kernels.iloc[0]
    assert row["start_ns"] == 1699529622790614812  # `Task Start Time` (µs) is the start
    assert row["aic_total_cycles"] == 1000000 and row["aic_time_us"] == 30.5
    assert row["aic_cube_ratio"] == 0.82 and row["aic_mte2_ratio"] == 0.66 and row["aic_mte3_ratio"] == 0.07
    assert row["aiv_vec_ratio"] == 0.1 and row["aiv_vec_time_us"] == 3.0  # vec* keeps its Vector meaning
    assert row["memory_bound"] == 0.8 and row["block_dim"] == 32
    assert not any(c.startswith(("total_", "mac_", "vec_")) for c in kt.kernels.columns)
    assert kt.metric_groups == ["PipeUtilization"]
    pr = load_profile(p)
    assert pr.source.format == "kernel_csv" and COUPLED_NOTE in pr.warnings
    split = _write(tmp_path / "split" / "kernel_details.csv", KD_HEADER + "\n" + "\n".join(KD_ROWS) + "\n")
    assert not read_kernel_table(split).coupled and COUPLED_NOTE not in load_profile(split).warnings


# ---- multi-rank parents --------------------------------------------------------------------------------


def _gpt3(real: Path) -> Path:
    d = real / "gpt3_2rank_memoryl0"
    if not d.is_dir():
        pytest.skip("gpt3_2rank_memoryl0 not available")
    return d


RANK0_ERROR = (
    "test_rank_0/ASCEND_PROFILER_OUTPUT/kernel_details.csv: row 16 (line 17): "
    "expected 32 fields as in the header, found 31 (truncated row?)"
)


def test_real_parent_with_a_broken_rank_loads_the_others(
    real_traces: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    d = _gpt3(real_traces)
    monkeypatch.setenv(STRICT_ENV, "1")  # by default the short row is skipped (tests/io/test_bad_rows.py)
    profiles = load_profiles(d)
    assert [pr.rank for pr in profiles] == [1] and len(profiles[0].kernels) == 22
    (failure,) = profiles.failures
    assert failure.rank == 0 and failure.path == d / "test_rank_0"
    assert isinstance(failure.error, ProfileFormatError) and failure.error.where == "row 16 (line 17)"
    assert failure.warning_line() == f"tilescope: warning: {d}/{RANK0_ERROR} — rank 0 left out"
    assert f"rank 0 left out: {d}/{RANK0_ERROR}" in profiles[0].warnings
    with pytest.raises(ProfileFormatError, match="row 16"):  # exactly one profile: still an error
        load_profile(d)


@pytest.mark.parametrize("command", ["info", "kernels", "analyze"])
def test_real_parent_with_a_broken_rank_cli(
    real_traces: Path, command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    d = _gpt3(real_traces)
    code = main([command, str(d), "-f", "json", "--strict"])  # by default the short row is skipped
    out, err = capsys.readouterr()
    assert code == 2  # partial: some inputs could not be read
    lines = err.strip().splitlines()
    assert lines[0] == f"tilescope: warning: {d}/{RANK0_ERROR} — rank 0 left out"
    assert lines[-1] == (
        f"tilescope: error: partial input: 1 of 2 profiles could not be read (rank 0: {d / 'test_rank_0'}); "
        "the output covers the other 1"
    )
    assert "Traceback" not in err
    data = json.loads(out)  # the good rank's output was written before the exit
    if command == "info":
        assert data["rank"] == 1 and data["rows"]["kernels"] == 22
    elif command == "kernels":
        assert len(data) == 22 and {r["rank"] for r in data} == {1}
    else:
        assert [p["rank"] for p in data["profiles"]] == [1]


def test_every_rank_broken_is_one_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for rank in (0, 1):
        _write(
            tmp_path / f"r{rank}" / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv",
            KD_HEADER + "\n" + KD_ROWS[0] + "\nk2,Add\n",
        )
    with pytest.raises(ProfileFormatError, match=r"r0/ASCEND_PROFILER_OUTPUT/kernel_details\.csv: row 2"):
        load_profiles(tmp_path)
    code = main(["kernels", str(tmp_path), "-f", "json"])
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert err.startswith("tilescope: error: ") and "row 2" in err


# ---- the real folders load end to end --------------------------------------------------------------------

SECOND_SET = [
    "triton_matmul_bd1024_opsum",
    "gpt3_2rank_memoryl0",
    "msprof_db_2023",
    "tilelang_sigmoid_app",
    "kernel_details_na_8",
]


@pytest.mark.parametrize("command", ["info", "kernels", "analyze"])
@pytest.mark.parametrize("name", SECOND_SET)
def test_second_set_loads_without_traceback(
    real_traces: Path, name: str, command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    d = real_traces / name
    if not d.is_dir():
        pytest.skip(f"{name} not available")
    code = main([command, str(d), "-f", "json"])
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    assert code == 0, err  # gpt3_2rank_memoryl0's short row is skipped with a note
    assert json.loads(out)


def test_detection_does_not_change_the_kernel_table(real_traces: Path) -> None:
    # op_summary.csv read as a folder's table and read alone: the same kernels
    d = _sigmoid(real_traces)
    alone = read_kernel_table(d / "op_summary.csv").kernels
    cols = list(alone.columns)
    alone_profile, folder_profile = load_profile(d / "op_summary.csv"), load_profile(d)
    pd.testing.assert_frame_equal(alone_profile.kernels[cols], folder_profile.kernels[cols])


def test_detecting_a_path_does_not_import_pandas() -> None:
    """`analyze` detects a path before it starts reading its timeline, and the reading overlaps
    pandas' import (analyzer/io/load.py): detection of every sample layout stays pandas-free."""
    import subprocess
    import sys

    repo = REPO_ROOT
    samples = [str(repo / "sample_traces" / s) for s in
               ("attention_unfused", "tilelang_fa_msprof_op", "tilelang_fa_msprof_op_multi",
                "tilelang_fa_bundle", "cluster_8rank")]
    code = ("import sys; import tilescope.io.detect as d; [d.detect(p) for p in sys.argv[1:]]; "
            "print(sorted(m for m in ('pandas', 'pyarrow') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code, *samples], cwd=repo, capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "[]"
