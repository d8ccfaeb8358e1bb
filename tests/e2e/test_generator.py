"""Tests of sample_traces/generate.py: formats, self-consistency, determinism, no drift."""

from __future__ import annotations

import csv
import json
import sys
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from statistics import fmean as mean
from types import ModuleType
from typing import Any

import pytest

from support import REPO_ROOT

REPO = REPO_ROOT
SAMPLES = REPO / "sample_traces"
REAL = REPO.parent / "shared" / "traces" / "real"
KD = "localhost_12345_20261130000000000_ascend_pt/ASCEND_PROFILER_OUTPUT/kernel_details.csv"
TV = "localhost_12345_20261130000000000_ascend_pt/ASCEND_PROFILER_OUTPUT/trace_view.json"
OPPROF = "OPPROF_20261130000000_ABCDEFGHIJKLMNOP"
CHAIN = ["BatchMatMulV3", "Mul", "Add", "SoftmaxV2", "Cast", "DropOutDoMask", "BatchMatMulV3"]


@pytest.fixture(scope="module")
def gen(sample_generator: ModuleType) -> ModuleType:
    return sample_generator


@pytest.fixture(scope="module")
def fresh(gen: ModuleType, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("fresh")
    gen.generate_samples(out)
    return out


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def test_generation_is_deterministic(gen: ModuleType, fresh: Path, tmp_path: Path) -> None:
    gen.generate_samples(tmp_path)
    a, b = _files(fresh), _files(tmp_path)
    assert a.keys() == b.keys()
    assert [k for k in a if a[k] != b[k]] == []


def test_bundled_samples_match_a_fresh_generation(gen: ModuleType, fresh: Path) -> None:
    for name in gen.SAMPLES:
        bundled, new = _files(SAMPLES / name), _files(fresh / name)
        assert bundled.keys() == new.keys(), f"{name}: file set drifted, run sample_traces/generate.py"
        drift = [k for k in new if bundled[k] != new[k]]
        assert drift == [], f"{name}: {drift} drifted from the generator, run sample_traces/generate.py"


def test_samples_are_small_and_marked_generated(gen: ModuleType, fresh: Path) -> None:
    total = 0
    for name in gen.SAMPLES:
        size = sum(len(v) for v in _files(fresh / name).values())
        total += size
        assert size < 2_000_000, name
        manifest = json.loads((fresh / name / "manifest.json").read_text())
        assert manifest["generated"] is True
        assert manifest["seed"] == gen.SEED
        assert manifest["model_assumptions"]["hbm_bandwidth_is_assumption"] is True
        assert "GENERATED" in (fresh / name / "README.md").read_text()
    assert total < 10_000_000


@pytest.mark.skipif(
    not (REAL / "fa_pipeutil_29").is_dir(), reason="real traces (../shared/traces/real) absent"
)
def test_kernel_details_header_equals_the_real_one(fresh: Path) -> None:
    real = (REAL / "fa_pipeutil_29" / "kernel_details.csv").read_text(encoding="utf-8").splitlines()[0]
    assert len(real.split(",")) == 46
    for name in ("attention_unfused", "attention_fused"):
        assert (fresh / name / KD).read_text(encoding="utf-8").splitlines()[0] == real


def test_kernel_details_quirks(fresh: Path) -> None:
    text = (fresh / "attention_unfused" / KD).read_text(encoding="utf-8")
    first = text.splitlines()[1]
    assert ',"1795996800' in first and '\t",' in first  # quoted timestamp with trailing TAB
    assert '"""8,2048"""' in first  # literal quotes around shapes
    rows = _rows(fresh / "attention_unfused" / KD)
    cores = {r["Accelerator Core"] for r in rows}
    assert cores == {"AI_CORE", "AI_VECTOR_CORE", "AI_CPU", "HCCL"}
    ai_cpu = next(r for r in rows if r["Accelerator Core"] == "AI_CPU")
    assert ai_cpu["aicore_time(us)"] == "N/A" and ai_cpu["cube_utilization(%)"] == "N/A"
    hccl = next(r for r in rows if r["Accelerator Core"] == "HCCL")
    assert hccl["Task ID"] == "N/A"
    vec = next(r for r in rows if r["Accelerator Core"] == "AI_VECTOR_CORE")
    assert vec["aic_total_cycles"] == "0" and vec["cube_utilization(%)"] == "0"
    assert any(r["Block Dim"] == "20" and r["Accelerator Core"] == "AI_CORE" for r in rows)
    assert any(r["Block Dim"] == "40" and r["Accelerator Core"] == "AI_VECTOR_CORE" for r in rows)
    assert sum(float(r["Wait Time(us)"]) > 150 for r in rows) >= 2  # host-bound gaps


def test_pmu_numbers_are_self_consistent(gen: ModuleType, fresh: Path) -> None:
    checked = 0
    for name in ("attention_unfused", "attention_fused"):
        for r in _rows(fresh / name / KD):
            if r["Accelerator Core"] not in ("AI_CORE", "MIX_AIC"):
                continue
            cycles, dur, blocks = int(r["aic_total_cycles"]), float(r["Duration(us)"]), int(r["Block Dim"])
            util = cycles / (gen.FREQ_MHZ * gen.AIC_CORES * dur) * 100
            assert float(r["cube_utilization(%)"]) == pytest.approx(util, abs=0.0011)
            assert float(r["aicore_time(us)"]) == pytest.approx(cycles / (gen.FREQ_MHZ * blocks), abs=0.0011)
            for pipe in ("mac", "scalar", "mte1", "mte2", "fixpipe"):
                ratio = float(r[f"aic_{pipe}_ratio"])
                assert 0 <= ratio <= 1
                # each ratio is the pipe's share of the side's busy time
                assert float(r[f"aic_{pipe}_time(us)"]) / float(r["aicore_time(us)"]) == pytest.approx(
                    ratio, abs=0.002
                )
            if r["Accelerator Core"] == "MIX_AIC":
                aiv_cycles, mix = int(r["aiv_total_cycles"]), int(r["Mix Block Dim"])
                assert float(r["aiv_time(us)"]) == pytest.approx(
                    aiv_cycles / (gen.FREQ_MHZ * mix), abs=0.0011
                )
                assert 0 < float(r["aiv_vec_ratio"]) <= 1
            checked += 1
    assert checked > 50


def _trace(path: Path) -> list[dict[str, Any]]:
    events = json.loads(path.read_text(encoding="utf-8"))
    assert isinstance(events, list)
    return events


@pytest.mark.parametrize("name", ["attention_unfused", "attention_fused"])
def test_trace_view_flows_land_on_kernels(fresh: Path, name: str) -> None:
    events = _trace(fresh / name / TV)
    lanes = {
        e["pid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e["name"] == "process_name"
    }
    assert {"Python", "CANN", "Ascend Hardware", "Overlap Analysis", "AI Core Freq"} <= set(lanes.values())
    hw = {pid for pid, lane in lanes.items() if lane == "Ascend Hardware"}
    assert all(isinstance(e["ts"], str) and len(e["ts"].split(".")[1]) == 3 for e in events if "ts" in e)
    kernels = {
        (e["pid"], e["tid"], Decimal(e["ts"])) for e in events if e.get("ph") == "X" and e["pid"] in hw
    }
    starts = {(e["cat"], str(e["id"])): e for e in events if e.get("ph") == "s"}
    flows = [e for e in events if e.get("ph") == "f" and e.get("cat") == "async_npu"]
    assert len(flows) >= 100
    for f in flows:
        assert (f["pid"], f["tid"], Decimal(f["ts"])) in kernels
        assert f["id"] == int(Decimal(f["ts"]) * 1000)  # id = kernel start in ns
        assert lanes[starts[("async_npu", str(f["id"]))]["pid"]] == "Python"
    h2d = [e for e in events if e.get("ph") == "f" and e.get("cat") == "HostToDevice"]
    assert len(h2d) == len(flows)
    for f in h2d:
        assert (f["pid"], f["tid"], Decimal(f["ts"])) in kernels
        assert lanes[starts[("HostToDevice", f["id"])]["pid"]] == "CANN"
    freqs = [e["args"]["MHz"] for e in events if e.get("ph") == "C" and e["name"] == "AI Core Freq"]
    assert 1300 in freqs and freqs[0] == 1800


def _stream_types(path: Path) -> list[str]:
    rows = [r for r in _rows(path) if r["Stream ID"] == "2"]
    return [r["Type"] for r in sorted(rows, key=lambda r: Decimal(r["Start Time(us)"].strip()))]


def _contains_run(seq: list[str], run: list[str]) -> bool:
    return any(seq[i : i + len(run)] == run for i in range(len(seq) - len(run) + 1))


def test_attention_chain_only_in_unfused(fresh: Path) -> None:
    assert _contains_run(_stream_types(fresh / "attention_unfused" / KD), CHAIN)
    fused = _stream_types(fresh / "attention_fused" / KD)
    assert not _contains_run(fused, CHAIN) and "FlashAttentionScore" in fused
    unfused_m = json.loads((fresh / "attention_unfused" / "manifest.json").read_text())["contents"]
    fused_m = json.loads((fresh / "attention_fused" / "manifest.json").read_text())["contents"]
    assert fused_m["attention_device_time_us"] < unfused_m["attention_device_time_us"] / 3
    fa = [r for r in _rows(fresh / "attention_fused" / KD) if r["Type"] == "FlashAttentionScore"]
    assert len(fa) == 8 and {(r["Block Dim"], r["Mix Block Dim"], r["Accelerator Core"]) for r in fa} == {
        ("24", "48", "MIX_AIC")
    }


def _msprof_op_launches(root: Path) -> Iterator[dict[str, Path]]:
    base = root / "tilelang_fa_msprof_op" / OPPROF
    yield {p.stem: p for p in base.glob("*.csv")}
    for launch in sorted((root / "tilelang_fa_msprof_op_multi" / OPPROF / "device0").glob("*/*")):
        yield {p.stem.rsplit("_", 1)[0]: p for p in launch.glob("*.csv")}


def test_msprof_op_files(gen: ModuleType, fresh: Path) -> None:
    launches = list(_msprof_op_launches(fresh))
    assert len(launches) == 3
    for files in launches:
        assert set(files) == {"OpBasicInfo", *gen.MSOP_HEADERS}
        lines = files["OpBasicInfo"].read_text().splitlines()
        assert lines[0] == gen.OPBASIC_HEADER and lines[1].startswith("flash_attn_fwd_kernel_mix_aic,mix,")
        block_dim = int(lines[1].split(",")[3])
        assert block_dim == 24
        for metric, header in gen.MSOP_HEADERS.items():
            lines = files[metric].read_text().splitlines()
            assert lines[0] == header
            assert all(line.endswith(",") for line in lines)
            assert len(lines) - 1 == 3 * block_dim
            subs = [line.split(",")[1] for line in lines[1:]]
            assert subs[:3] == ["cube0", "vector0", "vector1"]


def test_msprof_op_planted_problems(fresh: Path) -> None:
    files = next(_msprof_op_launches(fresh))
    pipe = _rows(files["PipeUtilization"])
    cube = [r for r in pipe if r["sub_block_id"] == "cube0"]
    vec = [r for r in pipe if r["sub_block_id"] != "cube0"]
    assert all(r["aiv_time(us)"] == "NA" for r in cube) and all(r["aic_time(us)"] == "NA" for r in vec)
    assert 0.25 < mean([float(r["aic_cube_ratio"]) for r in cube]) < 0.35
    assert 0.65 < mean([float(r["aiv_vec_ratio"]) for r in vec]) < 0.75
    times = sorted(float(r["aic_time(us)"]) for r in cube)
    assert times[-1] > 1.25 * times[len(times) // 2]  # one slow block
    conflicts = [
        float(r["aiv_vec_bank_cflt_ratio"])
        for r in _rows(files["ResourceConflictRatio"])
        if r["sub_block_id"] != "cube0"
    ]
    assert 0.15 < mean(conflicts) < 0.25
    l2 = [float(r["aic_total_hit_rate(%)"]) for r in _rows(files["L2Cache"]) if r["sub_block_id"] == "cube0"]
    assert 55 < mean(l2) < 65


def test_large_writers_small_sizes(gen: ModuleType, tmp_path: Path) -> None:
    kd = tmp_path / "kernel_details.csv"
    gen.write_large_kernel_details(kd, 1000, chunk_rows=300)
    rows = _rows(kd)
    assert len(rows) == 1000 and list(rows[0]) == gen.KD_HEADER
    starts = [Decimal(r["Start Time(us)"].strip()) for r in rows if r["Stream ID"] == "2"]
    assert starts == sorted(starts)
    for r in rows:
        if r["Accelerator Core"] == "AI_CORE":
            util = int(r["aic_total_cycles"]) / (1800 * 24 * float(r["Duration(us)"])) * 100
            assert float(r["cube_utilization(%)"]) == pytest.approx(util, abs=0.0011)
    tv = tmp_path / "trace_view.json"
    n = gen.write_large_trace_view(tv, 2_000_000)
    assert n == tv.stat().st_size and n >= 2_000_000
    events = _trace(tv)
    hw = {
        e["pid"] for e in events if e.get("ph") == "M" and e.get("args", {}).get("name") == "Ascend Hardware"
    }
    kernels = {(e["pid"], e["tid"], e["ts"]) for e in events if e.get("ph") == "X" and e["pid"] in hw}
    flows = [e for e in events if e.get("ph") == "f"]
    assert flows and all((f["pid"], f["tid"], f["ts"]) in kernels for f in flows)
    ids = [f["id"] for f in flows if f["cat"] == "async_npu"]
    assert len(ids) == len(set(ids))  # replays shift ids, they never collide


@pytest.mark.parametrize(
    ("args", "cwd"),
    [
        (["sample_traces/generate.py", "--help"], "tmp"),  # the script, from another directory
        (["-m", "sample_traces.generator", "--help"], "repo"),  # the package, from the repository root
        (["-c", "from sample_traces.generate import write_large_trace_view; print('--large-trace')"], "repo"),
    ],
)
def test_entry_points(args: list[str], cwd: str, tmp_path: Path) -> None:
    import subprocess

    argv = [str(REPO / a) if a.endswith(".py") else a for a in args]
    res = subprocess.run(
        [sys.executable, *argv],
        cwd=tmp_path if cwd == "tmp" else REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr
    assert "--large-trace" in res.stdout
