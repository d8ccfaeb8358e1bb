"""Detection and loading of every layout: torch_npu, msprof, ranks, bundles, samples."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tilescope.errors import NoProfileFoundError, UsageError
from tilescope.io.load import detect, load_profile, load_profiles

from support import REPO_ROOT

REPO = REPO_ROOT

HEADER = "Name,Type,Accelerator Core,Start Time(us),Duration(us),Block Dim,aicore_time(us),aic_total_cycles"
OPS_HEADER = "Op Name,OP Type,Task Type,Task Start Time(us),Task Duration(us),Block Dim"


def _kd(path: Path, rows: list[str], header: str = HEADER) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(header + "\n" + "".join(r + "\n" for r in rows))
    return path


def _torch_dir(root: Path, rank: int | None = None) -> Path:
    _kd(
        root / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv",
        ['k1,MatMul,AI_CORE,"1000.5\t",10.0,20,9.0,324000', "k2,Add,AI_VECTOR_CORE,1020.000,2.0,40,0,0"],
    )
    name = "profiler_info.json" if rank is None else f"profiler_info_{rank}.json"
    (root / name).write_text(json.dumps({"config": {}, "cann_version": "8.0.RC2"}))
    info = root / "PROF_000001_20260101000000000_ABCDEFGHIJKLMNOP" / "device_0" / "info.json.0"
    info.parent.mkdir(parents=True)
    info.write_text(
        json.dumps({"DeviceInfo": [{"id": 0, "ai_core_num": 20, "aiv_num": 40, "aic_frequency": "1800"}]})
    )
    return root


def test_torch_npu_dir_and_its_output_dir(tmp_path: Path) -> None:
    root = _torch_dir(tmp_path / "host_1_20260101_ascend_pt")
    for p in (root, root / "ASCEND_PROFILER_OUTPUT"):
        pr = load_profile(p)
        assert pr.source.format == "torch_npu" and pr.source.producer == "torch_npu"
        assert pr.device.ai_core_num == 20 and pr.device.aic_frequency_mhz == 1800
        assert pr.device.cann_version == "8.0.RC2"
        assert pr.chip.aic_count == 20 and pr.chip.clock_mhz == 1800
        assert len(pr.kernels) == 2 and pr.kernels["start_ns"].iloc[0] == 1000500
        # 324000 / (1800 x 20 x 10) x 100
        assert pr.kernels["cube_utilization_pct"].iloc[0] == pytest.approx(90.0)


def test_parent_of_several_ranks(tmp_path: Path) -> None:
    for rank in (1, 0):
        _torch_dir(tmp_path / f"host_{rank}_2026_ascend_pt", rank)
    found = detect(tmp_path)
    assert [d.format for d in found] == ["torch_npu", "torch_npu"]
    profiles = load_profiles(tmp_path)
    ranks = [p.rank for p in profiles if p.rank is not None]
    assert len(ranks) == len(profiles)  # every profile has a rank
    assert sorted(ranks) == [0, 1]
    with pytest.raises(UsageError, match="holds 2 profiles"):
        load_profile(tmp_path)


def test_msprof_prof_dir_slices_and_old_layout(tmp_path: Path) -> None:
    prof = tmp_path / "PROF_000001_20260606121448940_RGBHHJGBAJGRQEOB"
    out = prof / "mindstudio_profiler_output"
    _kd(out / "op_summary_20260606121516_1.csv", ["b,Add,AI_VECTOR_CORE,2000.0,2.0,8"], OPS_HEADER)
    _kd(out / "op_summary_20260606121516.csv", ["a,Add,AI_VECTOR_CORE,1000.0,1.0,8"], OPS_HEADER)
    for p in (prof, out):
        pr = load_profile(p)
        assert pr.source.format == "msprof" and pr.source.producer == "msprof"
        assert pr.kernels["name"].tolist() == ["a", "b"]
    old = tmp_path / "PROF_000002_OLD"
    _kd(old / "device_0" / "summary" / "op_summary_0_1.csv", ["c,Add,AI_CORE,5.0,1.0,8"], OPS_HEADER)
    assert load_profile(old).kernels["name"].tolist() == ["c"]


def test_bundle_merges_metric_groups(tmp_path: Path) -> None:
    b = tmp_path / "run"
    (b / "ir").mkdir(parents=True)
    (b / "manifest.json").write_text(json.dumps({"kernel": "k"}))
    # a real ir.json (bundles' ir.json is held to its schema on load)
    ir_doc = json.loads((REPO / "sample_traces" / "tilelang_fa_bundle" / "ir" / "ir.json").read_text())
    (b / "ir" / "ir.json").write_text(json.dumps(ir_doc))
    _kd(
        b / "profile" / "PipeUtilization" / "x_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv",
        ["k,MatMul,AI_CORE,1.0,10.0,20,9.0,324000,0.5", "k,MatMul,AI_CORE,30.0,11.0,20,9.0,324000,0.6"],
        HEADER + ",aic_mac_ratio",
    )
    _kd(
        b / "profile" / "Memory" / "y_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv",
        ["k,MatMul,AI_CORE,2.0,10.5,20,9.1,324100,100.0", "k,MatMul,AI_CORE,31.0,11.5,20,9.1,324100,200.0"],
        HEADER + ",aic_main_mem_read_bw(GB/s)",
    )
    pr = load_profile(b)
    assert pr.source.format == "bundle"
    assert pr.manifest == {"kernel": "k"} and pr.ir == ir_doc and pr.ir_dir == b / "ir"
    assert len(pr.kernels) == 2
    assert pr.kernels["aic_main_mem_read_gbps"].tolist() == [100.0, 200.0]
    # shared columns come from the first group run in directory order ("Memory" < "PipeUtilization")
    assert pr.kernels["duration_us"].tolist() == [10.5, 11.5]
    assert pr.kernels["aic_cube_ratio"].tolist() == [0.5, 0.6]
    assert "Memory" in pr.source.metric_groups


def test_nothing_found(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(NoProfileFoundError):
        load_profiles(tmp_path)
    with pytest.raises(NoProfileFoundError):
        load_profiles(tmp_path / "missing")


def test_real_file_chip_inferred(real_traces: Path) -> None:
    pr = load_profile(real_traces / "fa_pipeutil_29" / "kernel_details.csv")
    assert pr.source.format == "kernel_csv"
    assert pr.chip.aic_count == 20 and pr.chip.clock_mhz == 1800
    assert any("inferred" in w for w in pr.warnings)
    gpt = load_profile(real_traces / "gpt_step_arith_591" / "kernel_details.csv")
    assert gpt.chip.clock_mhz == 1850 and gpt.chip.aic_count == 24


def test_real_timeline_only(real_traces: Path, tmp_path: Path) -> None:
    src = real_traces / "torch_timeline_3670" / "trace_view.json"
    if not src.is_file():
        pytest.skip("torch_timeline_3670 not available")
    pr = load_profile(src)
    assert pr.source.format == "timeline_json" and pr.timeline is not None
    # the two MEMCPY_ASYNC runtime tasks of the hardware lane stay in the timeline, not as kernels
    assert len(pr.kernels) == len(pr.timeline.kernels) - 2 == 274


SAMPLES = ["attention_unfused", "attention_fused", "tilelang_fa_msprof_op", "tilelang_fa_msprof_op_multi"]


@pytest.mark.parametrize("name", SAMPLES)
def test_bundled_samples(repo_root: Path, name: str) -> None:
    d = repo_root / "sample_traces" / name
    if not d.is_dir():
        pytest.skip(f"sample {name} not generated yet")
    manifest = json.loads((d / "manifest.json").read_text())
    pr = load_profile(d)
    assert pr.manifest == manifest
    assert pr.chip.aic_count == 24 and pr.chip.clock_mhz == 1800
    contents = manifest["contents"]
    if "kernels" in contents:
        assert len(pr.kernels) == contents["kernels"]
        assert pr.timeline is not None and len(pr.timeline.kernels) == contents["kernels"]
        assert round(float(pr.kernels["duration_us"].sum()), 3) == contents["total_device_time_us"]
    if "rows_per_metric_file" in contents:
        assert pr.blocks is not None and pr.launches is not None
        assert len(pr.kernels) == len(pr.launches) == contents.get("launches", len(pr.launches))
        assert pr.kernels["block_dim"].iloc[0] == contents["block_dim"]
        assert (pr.blocks.groupby(["op_name", "launch"]).size() == contents["rows_per_metric_file"]).all()


def test_copy_of_sample_in_bundle_layout(repo_root: Path, tmp_path: Path) -> None:
    d = repo_root / "sample_traces" / "tilelang_fa_msprof_op"
    if not d.is_dir():
        pytest.skip("sample not generated yet")
    b = tmp_path / "bundle"
    shutil.copytree(d, b / "profile", ignore=shutil.ignore_patterns("manifest.json", "README.md"))
    shutil.copy(d / "manifest.json", b / "manifest.json")
    pr = load_profile(b)
    assert pr.source.format == "bundle" and pr.blocks is not None and pr.manifest is not None


def test_ir_only_bundle_loads_with_no_kernels(repo_root: Path) -> None:
    """`collect --ir-only` bundles have no profile/ (git does not even keep the empty folder)."""
    from tilescope.io.load import load_profile

    prof = load_profile(repo_root / "sample_traces" / "bundle_ir_only_fa")
    assert prof.source.format == "bundle"
    assert len(prof.kernels) == 0
    assert prof.ir is not None and prof.ir["kernels"][0]["name"] == "flash_fwd"
    assert any("runtime metrics are absent" in w for w in prof.warnings)


@pytest.mark.parametrize(
    ("trace", "cores", "mhz"), [("fa_pipeutil_29", 20, 1800), ("gpt_step_arith_591", 24, 1850)]
)
def test_chip_evidence_in_slices_equals_whole_table(
    real_traces: Path, trace: str, cores: int, mhz: int
) -> None:
    """The streamed `kernels` gathers the inference inputs group by group: any split of the rows
    must give the whole table's inference, notes (with their kernel counts) included."""
    from tilescope.io.device import ChipEvidence, infer_from_kernels
    from tilescope.io.kernel_csv import read_kernel_arrow

    table, _, _ = read_kernel_arrow(real_traces / trace / "kernel_details.csv")
    whole, notes = infer_from_kernels(table)
    assert (whole.ai_core_num, whole.aic_frequency_mhz, whole.aiv_num) == (cores, mhz, 2 * cores)
    for step in (1, 3, 7):
        evidence = ChipEvidence()
        for start in range(0, table.num_rows, step):
            evidence.add(table.slice(start, step))
        assert evidence.infer() == (whole, notes)
    assert evidence.rows == table.num_rows
