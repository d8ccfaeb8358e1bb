"""End to end on an Atlas A2/A3 host: `tilescope collect` of the bundled tilelang-ascend kernels
(sample_traces/kernels/a2/) with each backend, then the loader and `analyze`.

Needs, besides what test_collect_npu.py needs (CANN with set_env.sh sourced, torch_npu, an NPU,
msprof): tilelang-ascend 0.1.4 installed natively — in this interpreter, or the aarch64 venv of
scripts/setup-tilelang-ascend.sh — so that calling a `@tilelang.jit` kernel compiles with bisheng.
Skipped with the missing piece named otherwise; an emulated tilelang-ascend cannot run a kernel.
    pytest tests/npu/test_collect_tilelang_ascend_npu.py -v
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tilescope.cli import main
from tilescope.collectors import bundle as bundlemod
from tilescope.ir.foreign import find_interpreter

REPO = Path(__file__).resolve().parents[2]
A2 = REPO / "sample_traces" / "kernels" / "a2"
# kernel file, -p parameters, its device entry, the inputs derived from its signature
KERNELS: dict[str, tuple[Path, list[str], str, list[tuple[str, list[int], str]]]] = {
    "gemm": (A2 / "gemm.py", ["M=512", "N=512", "K=256"], "gemm_kernel_kernel",
             [("A", [512, 256], "float16"), ("B", [256, 512], "float16")]),
    "vector_add": (A2 / "vector_add.py", ["M=256", "N=512"], "vadd_kernel",
                   [("A", [256, 512], "float32"), ("B", [256, 512], "float32")]),
}


@pytest.fixture(scope="session")
def native_stack(npu_device: dict[str, Any]) -> str:
    interp = find_interpreter()
    if interp is None:
        pytest.skip("tilelang-ascend is not installed (pip install tilelang-ascend==0.1.4, or "
                    "bash scripts/setup-tilelang-ascend.sh on this aarch64 host)")
    if interp.kind == "emulated":
        pytest.skip("tilelang-ascend is only emulated here: it cannot run a kernel on the NPU")
    return interp.kind


def collect(key: str, args: list[str], capsys: pytest.CaptureFixture[str], kernel: Path | None = None
            ) -> tuple[int, str]:
    path, params, _, _ = KERNELS[key]
    code = main(["collect", str(kernel or path), *[x for p in params for x in ("-p", p)], *args])
    _, err = capsys.readouterr()
    return code, err


def check_manifest(out: Path, key: str, backend: str, groups: list[str], device: dict[str, Any]
                   ) -> dict[str, Any]:
    m = bundlemod.read_manifest(out)
    bundlemod.validate_manifest(m)
    ir = json.loads((out / "ir" / "ir.json").read_text(encoding="utf-8"))
    assert m["dialect"] == "tilelang-ascend" and m["backend"] == backend and m["metric_groups"] == groups
    assert m["ir_only"] is False and m["device_name"] == device.get("device_name")
    assert m["chip"] == ir["chip"] and m["versions"]["tilelang"].startswith("tilelang-ascend ")
    assert m["versions"]["torch_npu"] and m["versions"]["cann"], m["versions"]
    assert m["kernel"]["entry"] == ir["kernels"][0]["entry"] == KERNELS[key][2]
    assert all(c["returncode"] == 0 for c in m["commands"])
    assert m["correctness"]["device"] == "npu"
    return m


@pytest.mark.parametrize("key", list(KERNELS))
def test_torch_npu_backend_on_a2_kernels(key: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                         npu_device: dict[str, Any], msprof_path: str,
                                         native_stack: str) -> None:
    groups = ["PipeUtilization", "Memory"]
    out = tmp_path / key
    code, err = collect(key, ["--metrics", ",".join(groups), "--warmup", "2", "--repeat", "3",
                              "--out", str(out)], capsys)
    assert code == 0, err
    m = check_manifest(out, key, "torch_npu", groups, npu_device)
    # no TILESCOPE_SPEC in these files: the inputs come from the signature, nothing is compared
    spec = m["kernel"]["spec"]
    assert spec["source"] == "signature" and spec["reference"] is None
    assert [(i["name"], i["shape"], i["dtype"]) for i in spec["inputs"]] == KERNELS[key][3]
    assert m["correctness"]["status"] == "not_run"
    entry = KERNELS[key][2]
    for g in groups:
        details = list((out / "profile" / g).glob("*_ascend_pt/ASCEND_PROFILER_OUTPUT/kernel_details.csv"))
        assert len(details) == 1 and entry in details[0].read_text(encoding="utf-8")

    from tilescope.io.load import load_profile

    profile = load_profile(out)
    rows = profile.kernels[profile.kernels["name"].astype(str).str.contains(entry)]
    assert len(rows) >= 3  # the active steps
    code = main(["analyze", str(out), "--format", "json"])
    assert code in (0, 1), capsys.readouterr().err


@pytest.mark.parametrize("key", list(KERNELS))
def test_msprof_op_backend_on_a2_kernels(key: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                         npu_device: dict[str, Any], msprof_path: str,
                                         native_stack: str) -> None:
    groups = ["PipeUtilization", "Memory"]
    out = tmp_path / key
    code, err = collect(key, ["--backend", "msprof-op", "--metrics", ",".join(groups), "--warmup", "1",
                              "--repeat", "1", "--out", str(out)], capsys)
    assert code == 0, err
    m = check_manifest(out, key, "msprof-op", groups, npu_device)
    argv = m["commands"][-1]["argv"]
    assert argv[1] == "op" and f"--kernel-name={KERNELS[key][2]}*" in argv
    opprof = sorted((out / "profile").glob("OPPROF_*"))
    assert opprof and list(opprof[0].rglob("OpBasicInfo*.csv"))

    from tilescope.io.load import load_profile

    profile = load_profile(out)
    assert profile.blocks is not None and len(profile.blocks) > 0


SPEC = '''

TILESCOPE_SPEC = {
    "vector_add": {
        "inputs": [("A", ("M", "N"), "float32"), ("B", ("M", "N"), "float32")],
        "out_idx": [2],
        "reference": lambda A, B: A + B,
        "atol": 1e-5, "rtol": 1e-5,
    },
}
'''


def test_a_declared_spec_is_checked_on_the_npu(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                               npu_device: dict[str, Any], msprof_path: str,
                                               native_stack: str) -> None:
    """vector_add.py with a TILESCOPE_SPEC (added here, in a copy): the result is compared with A + B."""
    kernel = tmp_path / "vector_add_spec.py"
    kernel.write_text((A2 / "vector_add.py").read_text(encoding="utf-8") + SPEC, encoding="utf-8")
    out = tmp_path / "b"
    code, err = collect("vector_add", ["--metrics", "PipeUtilization", "--warmup", "1", "--repeat", "2",
                                       "--out", str(out)], capsys, kernel=kernel)
    assert code == 0, err
    m = bundlemod.read_manifest(out)
    spec = m["kernel"]["spec"]
    assert spec["source"] == "TILESCOPE_SPEC" and spec["reference"] == "<lambda>"
    assert m["correctness"]["status"] == "pass", m["correctness"]
    [output] = m["correctness"]["outputs"]
    assert output["name"] == "C" and output["numel"] == 256 * 512 and output["mismatched"] == 0
