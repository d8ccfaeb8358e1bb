"""The demo bundle sample_traces/tilelang_fa_bundle: real TileLang IR + generated msprof op profile."""

from __future__ import annotations

import csv
import hashlib
import importlib
import importlib.util
import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tilescope.cli import main
from tilescope.collectors.bundle import validate_manifest
from tilescope.io.load import load_profile

from support import REPO_ROOT

REPO = REPO_ROOT
SAMPLES = REPO / "sample_traces"
BUNDLE = SAMPLES / "tilelang_fa_bundle"
KERNEL = SAMPLES / "kernels" / "flash_attention.py"
OPPROF = "OPPROF_20261130000000_ABCDEFGHIJKLMNOP"


@pytest.fixture(scope="module")
def fa(sample_generator: ModuleType) -> ModuleType:
    """generator.fa_bundle (importable once the generator's entry point is loaded)."""
    return importlib.import_module("generator.fa_bundle")


@pytest.fixture(scope="module")
def manifest() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((BUNDLE / "manifest.json").read_text(encoding="utf-8"))
    return data


@pytest.fixture(scope="module")
def ir() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((BUNDLE / "ir" / "ir.json").read_text(encoding="utf-8"))
    return data


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_manifest_is_valid_and_says_what_is_generated(manifest: dict[str, Any], ir: dict[str, Any]) -> None:
    validate_manifest(manifest)
    run = manifest["profile"]["runs"][0]
    assert run["generated"] is True and "GENERATED" in run["note"] and "real TileLang 0.1.15" in run["note"]
    assert any("GENERATED" in w for w in manifest["warnings"])
    assert manifest["backend"] == "msprof-op" and manifest["profile"]["layout"] == "msprof_op"
    source = (BUNDLE / manifest["kernel"]["source"]).read_bytes()
    assert hashlib.sha256(source).hexdigest() == manifest["kernel"]["sha256"] == ir["kernel_sha256"]
    assert manifest["kernel"]["entry"] == ir["kernels"][0]["entry"] == "flash_fwd_kernel"
    for out in run["outputs"]:
        assert (BUNDLE / out).is_file()
    readme = (BUNDLE / "README.md").read_text(encoding="utf-8")
    assert "GENERATED" in readme and "not a hardware measurement" in readme
    assert sum(len(v) for v in _files(BUNDLE).values()) < 2_000_000


def test_profile_numbers_follow_the_kernel(manifest: dict[str, Any], ir: dict[str, Any]) -> None:
    params = manifest["resolved_parameters"]
    grid = ir["kernels"][0]["grid"]
    assert grid == [params["seq_q"] // params["block_M"]] == [8]
    with open(BUNDLE / "profile" / OPPROF / "OpBasicInfo.csv", newline="", encoding="utf-8") as fh:
        row = next(csv.DictReader(fh))
    assert row["Op Name"] == "flash_fwd_kernel_mix_aic"  # TileLang `{prim_func}_kernel` + msprof op's suffix
    assert (int(row["Block Dim"]), int(row["Mix Block Dim"])) == (8, 16)
    with open(BUNDLE / "profile" / OPPROF / "PipeUtilization.csv", newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 3 * 8
    cube = [r for r in rows if r["sub_block_id"] == "cube0"]
    flops_per_block = 4 * params["seq_q"] * params["seq_kv"] * params["head_dim"] / 8
    cube_us = flops_per_block / (1800e6 * 8192) * 1e6
    # every block does its share of the FLOPs (±1.5 % jitter), block 5 carries the planted 1.35x
    for r in cube:
        want = cube_us * (1.35 if r["block_id"] == "5" else 1.0)
        assert float(r["aic_cube_time(us)"]) == pytest.approx(want, rel=0.02)


def test_bundle_loads_with_kernels_blocks_and_ir() -> None:
    profile = load_profile(BUNDLE)
    assert profile.source.format == "bundle"
    assert list(profile.kernels["name"]) == ["flash_fwd_kernel_mix_aic"]
    assert profile.blocks is not None and len(profile.blocks) == 24
    assert profile.ir is not None and profile.ir["kernels"][0]["entry"] == "flash_fwd_kernel"
    assert profile.ir_dir == BUNDLE / "ir"
    assert profile.manifest is not None and profile.manifest["kernel"]["entry"] == "flash_fwd_kernel"


def _check_locations(finding: dict[str, Any]) -> None:
    locs = finding["locations"]
    source = [loc for loc in locs if loc["stage"] == "source"]
    in_ir = [loc for loc in locs if loc["stage"] in ("tvmscript", "ascendc")]
    assert source and in_ir, finding["code"]
    kernel_lines = (BUNDLE / "kernel" / "flash_attention.py").read_text(encoding="utf-8").splitlines()
    for loc in source:
        assert loc["file"] == "sample_traces/kernels/flash_attention.py"
        assert 1 <= loc["line"] <= len(kernel_lines)
    for loc in in_ir:
        assert loc["file"].startswith("ir/")
        lines = (BUNDLE / loc["file"]).read_text(encoding="utf-8").splitlines()
        assert 1 <= loc["line"] <= len(lines)


def test_analyze_maps_runtime_findings_to_source_and_ir(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["analyze", str(BUNDLE), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    by_code = {f["code"]: f for f in doc["findings"]}
    assert {"TS201", "TS402", "TS504"} <= set(by_code), sorted(by_code)
    for code in ("TS201", "TS402"):
        f = by_code[code]
        assert f["kernels"] == ["flash_fwd_kernel_mix_aic"]
        _check_locations(f)
    # TS201 points at the pipelined KV loop first (then the softmax lines of its body)
    kernel_lines = (BUNDLE / "kernel" / "flash_attention.py").read_text(encoding="utf-8").splitlines()
    src = next(loc for loc in by_code["TS201"]["locations"] if loc["stage"] == "source")
    assert "T.Pipelined" in kernel_lines[src["line"] - 1]  # the hot loop, where the overlap is decided
    assert by_code["TS504"]["kernels"] == ["flash_fwd"]  # the static rule names the PrimFunc
    assert "TS303" not in by_code  # K/V are shared by all blocks: L2 hits ~90 %


def test_generated_profile_matches_a_fresh_generation(
    fa: ModuleType, manifest: dict[str, Any], ir: dict[str, Any], tmp_path: Path
) -> None:
    """The generated half is reproducible without TileLang: from the committed ir.json and kernel copy."""
    params = fa.builder_defaults(BUNDLE / "kernel" / "flash_attention.py")
    assert params == manifest["resolved_parameters"]
    w = fa.workload_for(ir, params)
    files = fa.msprof_op_launch("tilelang_fa_bundle", l2_hit=fa.L2_HIT, workload=w, seed_prefix="fa_bundle")
    for metric, text in files.items():
        assert (BUNDLE / "profile" / OPPROF / f"{metric}.csv").read_text(encoding="utf-8") == text, metric


@pytest.mark.tilelang
def test_bundle_matches_a_fresh_generation(fa: ModuleType, manifest: dict[str, Any], tmp_path: Path) -> None:
    pytest.importorskip("tilelang")
    if hashlib.sha256(KERNEL.read_bytes()).hexdigest() != manifest["kernel"]["sha256"]:
        pytest.skip(
            "sample_traces/kernels/flash_attention.py changed since the bundle was made: "
            "run `python sample_traces/generate.py --fa-bundle` and commit the bundle"
        )
    fresh = fa.write_fa_bundle(tmp_path, REPO)
    bundled, new = _files(BUNDLE), _files(fresh)
    assert bundled.keys() == new.keys()
    assert [k for k in new if bundled[k] != new[k]] == [], "run python sample_traces/generate.py --fa-bundle"
