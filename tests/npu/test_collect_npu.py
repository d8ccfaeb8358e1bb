"""End to end on an Atlas machine: `tilescope collect` with each backend, then the loader and `analyze`.

Needs: CANN (set_env.sh sourced), torch_npu matching torch, an NPU, tilelang 0.1.15 able to compile
for the device (bisheng on PATH). Skipped with the reason otherwise (see conftest.py). Run:
    pytest tests/npu -v
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tilescope.cli import main
from tilescope.collectors import bundle as bundlemod

REPO = Path(__file__).resolve().parents[2]
VECTOR_ADD = REPO / "sample_traces" / "kernels" / "collect_vector_add.py"
ENTRY = "vector_add_kernel_kernel"


def collect(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(["collect", f"{VECTOR_ADD}:vector_add", "--param", "N=65536", *args])
    _, err = capsys.readouterr()
    return code, err


def check_common(bundle: Path, backend: str, groups: list[str], device: dict[str, Any]) -> dict[str, Any]:
    m = bundlemod.read_manifest(bundle)
    bundlemod.validate_manifest(m)
    assert m["backend"] == backend and m["metric_groups"] == groups and m["ir_only"] is False
    assert m["correctness"]["status"] == "pass", m["correctness"]
    assert m["correctness"]["device"] == "npu"
    assert m["versions"]["torch_npu"] and m["versions"]["cann"], m["versions"]
    assert m["device_name"] == device.get("device_name")
    assert all(c["returncode"] == 0 for c in m["commands"])
    assert (bundle / "ir" / "ir.json").is_file()
    return m


def analyze_json(bundle: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    code = main(["analyze", str(bundle), "--format", "json"])
    out, err = capsys.readouterr()
    assert code in (0, 1), err  # 1 only if a configured gate tripped
    report: dict[str, Any] = json.loads(out)
    return report


def test_torch_npu_backend(tmp_path: Path, capsys: pytest.CaptureFixture[str], npu_device: dict[str, Any],
                           msprof_path: str) -> None:
    groups = ["PipeUtilization", "Memory"]
    out = tmp_path / "vadd_torch_npu"
    code, err = collect(["--backend", "torch_npu", "--metrics", ",".join(groups), "--warmup", "2",
                         "--repeat", "3", "--out", str(out)], capsys)
    assert code == 0, err
    m = check_common(out, "torch_npu", groups, npu_device)
    for g in groups:
        details = list((out / "profile" / g).glob("*_ascend_pt/ASCEND_PROFILER_OUTPUT/kernel_details.csv"))
        assert len(details) == 1, f"{g}: {list((out / 'profile' / g).rglob('*'))[:20]}"
        assert ENTRY in details[0].read_text(encoding="utf-8")
    assert [r["path"] for r in m["profile"]["runs"]] == [f"profile/{g}" for g in groups]

    from tilescope.io.load import load_profile

    profile = load_profile(out)
    rows = profile.kernels[profile.kernels["name"].astype(str).str.contains(ENTRY)]
    assert len(rows) >= 3  # the active steps
    assert profile.manifest is not None and profile.ir is not None
    assert rows["aiv_vec_ratio"].notna().any() or rows["aic_mte2_ratio"].notna().any()
    analyze_json(out, capsys)


def test_with_reference_puts_the_vendor_operator_beside_the_kernel(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], npu_device: dict[str, Any], msprof_path: str
) -> None:
    """collect --with-reference: the spec's `A + B` runs as torch_npu's Add in every profiled step,
    and diff --match compares the two kernels pipe by pipe."""
    out = tmp_path / "vadd_ref"
    code, err = collect(["--backend", "torch_npu", "--metrics", "PipeUtilization", "--warmup", "1",
                         "--repeat", "3", "--with-reference", "--out", str(out)], capsys)
    assert code == 0, err
    assert bundlemod.read_manifest(out)["reference"] is True
    from tilescope.io.load import load_profile

    names = load_profile(out).kernels["name"].astype(str)
    assert names.str.contains(ENTRY).sum() >= 3
    vendor = sorted({n for n in names if "Add" in n and ENTRY not in n})
    assert vendor, sorted(set(names))
    code = main(["diff", str(out), str(out), "--match", f"{ENTRY}*={vendor[0]}", "--format", "json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and report["kernels"][0]["matched_by"] == "--match"


def test_msprof_op_backend(tmp_path: Path, capsys: pytest.CaptureFixture[str], npu_device: dict[str, Any],
                           msprof_path: str) -> None:
    groups = ["PipeUtilization", "Memory", "MemoryUB"]
    out = tmp_path / "vadd_msprof_op"
    code, err = collect(["--backend", "msprof-op", "--metrics", ",".join(groups), "--warmup", "1",
                         "--repeat", "1", "--out", str(out)], capsys)
    assert code == 0, err
    m = check_common(out, "msprof-op", groups, npu_device)
    argv = m["commands"][-1]["argv"]
    assert argv[1] == "op" and f"--kernel-name={ENTRY}*" in argv
    opprof = sorted((out / "profile").glob("OPPROF_*"))
    assert opprof, "msprof op wrote no OPPROF_* directory"
    assert list(opprof[0].rglob("OpBasicInfo*.csv")) and list(opprof[0].rglob("PipeUtilization*.csv"))

    from tilescope.io.load import load_profile

    profile = load_profile(out)
    assert profile.blocks is not None and len(profile.blocks) > 0
    analyze_json(out, capsys)


def test_existing_bundle_kept_on_hardware(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                          npu_device: dict[str, Any], msprof_path: str) -> None:
    out = tmp_path / "b"
    out.mkdir()
    (out / "manifest.json").write_text("{}")
    code, err = collect(["--metrics", "PipeUtilization", "--out", str(out)], capsys)
    assert code == 2 and "--force" in err
    assert (out / "manifest.json").read_text() == "{}"


def test_msprof_op_simulator_backend(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                     npu_device: dict[str, Any], msprof_path: str) -> None:
    """One simulated launch: the bundle's profile/ holds OPPROF_*/simulator/, which `tilescope lines`
    reads (per-line cycles only with a -g build; the instruction table either way)."""
    out = tmp_path / "vadd_simulated"
    code, err = collect(["--backend", "msprof-op-simulator", "--out", str(out)], capsys)
    assert code == 0, err
    m = bundlemod.read_manifest(out)
    assert m["backend"] == "msprof-op-simulator" and m["metric_groups"] == []
    assert list((out / "profile").glob("OPPROF_*/simulator"))
    code = main(["lines", str(out), "--format", "json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and report["instructions"], report["notes"]
