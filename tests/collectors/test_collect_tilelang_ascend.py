"""`tilescope collect` on tilelang-ascend (A2/A3 = 910B) kernels: everything that needs no device.

The profile itself runs only on an Atlas host (tests/npu/test_collect_tilelang_ascend_npu.py). Here:
the exit-3 line where tilelang-ascend is only emulated or has no NPU, the platform pin, the job a
device run gets and the inputs derived from a kernel's signature (sample_traces/kernels/a2/gemm.py
and vector_add.py, lowered by the real tilelang-ascend in its emulated root: those tests skip when
it is absent; one worker lowers both files), and the manifest of `collect --ir-only`.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest

from tilescope.chips import tl_ascend_platform_of_device
from tilescope.collectors import bundle as bundlemod
from tilescope.collectors import run as runmod
from tilescope.collectors import spec as specmod
from tilescope.errors import UsageError
from tilescope.ir.foreign import find_interpreter

from support import REPO_ROOT, cli

A2 = REPO_ROOT / "sample_traces" / "kernels" / "a2"
GEMM = A2 / "gemm.py"
VADD = A2 / "vector_add.py"
INTERP = find_interpreter()

needs_stack = pytest.mark.skipif(
    INTERP is None, reason="tilelang-ascend is not set up here (bash scripts/setup-tilelang-ascend.sh)"
)


def run_cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    return cli(capsys, "collect", *args)


def no_work(*a: Any, **k: Any) -> Any:
    raise AssertionError("no IR capture or device job may start before the exit-3 check")


# --- exit 3 before any work -----------------------------------------------------------------------


@pytest.mark.skipif(INTERP is None or INTERP.kind != "emulated",
                    reason="needs tilelang-ascend set up emulated (an x86_64 machine with its arm64 root)")
def test_emulated_stack_cannot_profile_exit_3(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(runmod, "capture_ir_into", no_work)
    monkeypatch.setattr(runmod, "run_check", no_work)
    for backend in ("torch_npu", "msprof-op"):
        code, out, err = run_cli([str(GEMM), "--backend", backend, "--out", str(tmp_path / "b")], capsys)
        assert code == 3 and out == ""
        assert err.count("\n") == 1
        assert err.startswith("tilescope: error: no NPU: gemm.py is a tilelang-ascend")
        assert "needs an Ascend NPU with CANN + torch_npu" in err and "--ir-only works here" in err
        assert INTERP is not None and str(INTERP.root) in err
        assert list(tmp_path.iterdir()) == []


def test_no_stack_at_all_is_exit_3_with_the_setup_hint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    if INTERP is not None and INTERP.kind == "in-process":
        pytest.skip("tilelang-ascend is installed in this interpreter")
    monkeypatch.setenv("TILESCOPE_ASCEND_ROOT", str(tmp_path / "none"))
    monkeypatch.setattr(runmod, "capture_ir_into", no_work)
    code, _, err = run_cli([str(VADD), "--out", str(tmp_path / "b")], capsys)
    assert code == 3 and "scripts/setup-tilelang-ascend.sh" in err and "Traceback" not in err
    assert not (tmp_path / "b").exists()


def _native_root(tmp_path: Path) -> Path:
    """A root of the kind the setup script makes on an aarch64 host: `venv/bin/python`, here starting
    this interpreter (a script, not a symlink: a symlinked venv python loses its site-packages), so a
    real torch_npu probe runs in it."""
    root = tmp_path / "tla"
    (root / "venv" / "bin").mkdir(parents=True)
    python = root / "venv" / "bin" / "python"
    python.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} "$@"\n')
    python.chmod(0o755)
    (root / ".tilescope-kind").write_text("native\n")
    return root


@pytest.mark.slow  # 2.4-5 s of CPU each (#23: the quick loop keeps tests under ~2 s)
def test_native_stack_without_npu_says_what_the_950_path_says(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The torch_npu probe runs in tilelang-ascend's interpreter; its verdict is worded as for a 950
    kernel on the same machine (preflight.check_backend): one message, whichever dialect."""
    if INTERP is not None and INTERP.kind == "in-process":
        pytest.skip("tilelang-ascend is installed in this interpreter")
    from tilescope.collectors import preflight

    if "available" in preflight.probe_torch_npu() and shutil_which_msprof():
        pytest.skip("this machine has torch_npu and msprof: no exit 3 to compare")
    monkeypatch.setenv("TILESCOPE_ASCEND_ROOT", str(_native_root(tmp_path)))
    monkeypatch.setattr(runmod, "capture_ir_into", no_work)
    code, _, err = run_cli([str(VADD), "--out", str(tmp_path / "b")], capsys)
    code_950, _, err_950 = run_cli([f"{REPO_ROOT}/sample_traces/kernels/collect_vector_add.py:vector_add",
                                    "--out", str(tmp_path / "b")], capsys)
    assert code == code_950 == 3
    assert err == err_950 and "--ir-only" in err and err.startswith("tilescope: error: ")
    assert not (tmp_path / "b").exists()


def shutil_which_msprof() -> str | None:
    import shutil

    return shutil.which("msprof")


def test_the_device_decides_the_platform_when_tl_platform_is_unset(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """tilelang-ascend compiles for the platform of the device it finds; the IR capture has no device,
    so collect pins TL_PLATFORM for both, and unpins it afterwards."""
    monkeypatch.setenv("TILESCOPE_ASCEND_ROOT", str(_native_root(tmp_path)))
    monkeypatch.delenv("TL_PLATFORM", raising=False)
    seen: list[tuple[str | None, str | None, str]] = []

    def body(req: Any, ref: Any, dialect: Any, probe: dict[str, Any], python: str, env: dict[str, str],
             say: Any) -> Path:
        seen.append((os.environ.get("TL_PLATFORM"), env.get("TL_PLATFORM"), python))
        return Path(req.out)

    monkeypatch.setattr(runmod, "_collect", body)
    def probe_of(device: str) -> Any:
        return lambda backend: {"available": True, "device_count": 1, "device_name": device}

    for device in ("Ascend910B2", "Ascend910_9392", "Ascend910B4"):
        runmod.collect(runmod.CollectRequest(kernel=str(GEMM), out=tmp_path / device), probe=probe_of(device))
    assert [s[:2] for s in seen] == [("A2", "A2"), ("A3", "A3"), ("A2", "A2")]
    assert {s[2] for s in seen} == {str(tmp_path / "tla" / "venv" / "bin" / "python")}
    assert "TL_PLATFORM" not in os.environ
    monkeypatch.setenv("TL_PLATFORM", "A3")  # the user's choice wins over the device
    runmod.collect(runmod.CollectRequest(kernel=str(GEMM), out=tmp_path / "x"), probe=probe_of("Ascend910B2"))
    assert seen[-1][:2] == ("A3", "A3") and os.environ["TL_PLATFORM"] == "A3"


@pytest.mark.parametrize("name, platform", [
    ("Ascend910B2", "A2"), ("Ascend910B4", "A2"), ("Ascend910_9392", "A3"), ("Ascend910C", "A3"),
    ("Ascend950PR", "A5"), ("Ascend910A", "A2"), ("Ascend310P3", "A3"), (None, None), ("", None),
])
def test_platform_of_device_follows_tilelang_ascend(name: str | None, platform: str | None) -> None:
    """tilelang-ascend 0.1.4's determine_platform("auto"): its name tests in its order, A3 otherwise."""
    assert tl_ascend_platform_of_device(name) == platform


# --- inputs derived from the signature ------------------------------------------------------------


def test_derived_declaration_rejects_names_that_are_no_gm_tensor() -> None:
    tensors = [{"name": n, "shape": [4], "dtype": "float32"} for n in ("A", "C")]
    with pytest.raises(UsageError, match=r"out_idx/workspace_idx name\(s\) Z that"):
        specmod.derived_declaration(tensors, ["Z"], [])
    decl = specmod.derived_declaration(tensors, [], [])  # a plain builder: the caller passes every tensor
    assert [t["name"] for t in decl["inputs"]] == ["A", "C"] and decl["out_idx"] == []


GEMM_PARAMS = {"M": 512, "N": 256, "K": 128}
VADD_PARAMS = {"M": 128, "N": 512}


@pytest.fixture(scope="module")
def a2_ir(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """ir.json of gemm.py and vector_add.py as the real tilelang-ascend lowers them (one worker)."""
    if INTERP is None:
        pytest.skip("tilelang-ascend is not set up here (bash scripts/setup-tilelang-ascend.sh)")
    from tilescope.chips import get_chip
    from tilescope.ir.capture import capture_many, worker_runs, write_ir_dir
    from tilescope.ir.foreign import run_jobs

    files = {"gemm": (GEMM, GEMM_PARAMS), "vector_add": (VADD, VADD_PARAMS)}
    jobs = [worker_runs(str(path), params) for path, params in files.values()]
    answers = run_jobs(INTERP, jobs)
    out = {}
    for (key, (path, params)), answer in zip(files.items(), answers, strict=True):
        capture = capture_many(str(path), [params], get_chip("910B2"), answer)[0]
        d = write_ir_dir(capture, tmp_path_factory.mktemp(key))
        out[key] = json.loads((d / "ir.json").read_text(encoding="utf-8"))
    return out


@needs_stack
def test_job_of_a_tilelang_ascend_kernel(a2_ir: dict[str, dict[str, Any]], tmp_path: Path) -> None:
    """What a check/profile/launch child gets: its dialect, the builder, the captured parameters and
    the inputs derived from the signature — plain JSON, as the worker reads it from its job file."""
    ref = runmod.KernelRef(GEMM, "matmul")
    job = runmod.ascend_job_base(ref, a2_ir["gemm"])
    assert json.loads(json.dumps(job)) == job
    assert job["dialect"] == "tilelang-ascend" and job["kernel"] == str(GEMM) and job["function"] == "matmul"
    assert job["params"] == GEMM_PARAMS
    kernel = a2_ir["gemm"]["kernels"][0]
    assert kernel["outputs"] == ["C"] and kernel["entry"] == "gemm_kernel_kernel"
    assert [t["name"] for t in job["spec"]["inputs"]] == [
        t["name"] for t in kernel["gm_tensors"] if t["name"] not in kernel["outputs"]] == ["A", "B"]
    assert job["spec"]["out_idx"] == [2]
    # msprof op starts the launcher by path: its shebang must be tilelang-ascend's interpreter
    from tilescope.collectors.msprof_op_backend import write_launcher

    launcher = write_launcher(tmp_path / "launch_kernel.py", tmp_path / "job.json",
                              python="/opt/tla/venv/bin/python")
    assert launcher.read_text(encoding="utf-8").splitlines()[0] == "#!/opt/tla/venv/bin/python"


@needs_stack
@pytest.mark.parametrize("key, ref, params, expected", [
    ("gemm", (GEMM, "matmul"), GEMM_PARAMS, [("A", (512, 128), "float16"), ("B", (128, 256), "float16")]),
    ("vector_add", (VADD, "vector_add"), VADD_PARAMS,
     [("A", (128, 512), "float32"), ("B", (128, 512), "float32")]),
])
def test_input_tensors_derived_from_the_signature(a2_ir: dict[str, dict[str, Any]], key: str,
                                                  ref: tuple[Path, str], params: dict[str, Any],
                                                  expected: list[tuple[str, tuple[int, ...], str]]) -> None:
    """The tensors the worker makes (spec.make_inputs, the one input maker of both dialects): every
    GM tensor but the jit's out_idx one, shapes from the parameters, dtypes from the kernel."""
    torch = pytest.importorskip("torch")
    job = runmod.ascend_job_base(runmod.KernelRef(*ref), a2_ir[key])
    spec = specmod.spec_from_declaration(job["spec"], key)
    tensors = specmod.make_inputs(spec, job["params"], "cpu")
    got = [(t.name, tuple(x.shape), str(x.dtype).removeprefix("torch.")) for t, x in zip(spec.inputs, tensors,
                                                                                          strict=True)]
    assert got == expected
    assert all(x.dtype == getattr(torch, e[2]) for x, e in zip(tensors, expected, strict=True))
    assert specmod.record(spec, job["params"], "signature")["inputs"] == [
        {"name": n, "shape": list(s), "dtype": d, "init": "randn"} for n, s, d in expected]
    again = specmod.make_inputs(spec, job["params"], "cpu")  # seeded: the same values on every run
    assert all(torch.equal(a, b) for a, b in zip(tensors, again, strict=True))


@needs_stack
def test_ir_only_manifest_of_a_tilelang_ascend_kernel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("TL_PLATFORM", "A2")
    out = tmp_path / "b"
    code, _, err = run_cli([str(VADD), "--ir-only", "-p", "M=128", "-p", "N=512", "--out", str(out)], capsys)
    assert code == 0, err
    m = bundlemod.read_manifest(out)
    bundlemod.validate_manifest(m)
    ir = json.loads((out / "ir" / "ir.json").read_text(encoding="utf-8"))
    assert m["dialect"] == ir["dialect"] == "tilelang-ascend"
    assert m["chip"] == ir["chip"] == "910B2" and m["host"]["environment"]["TL_PLATFORM"] == "A2"
    assert m["versions"]["tilelang"] == ir["lowering"]["stack"] and m["versions"]["tilelang"].startswith(
        "tilelang-ascend 0.1.")
    assert m["kernel"]["function"] == "vector_add"
    assert m["kernel"]["entry"] == ir["kernels"][0]["entry"] == "vadd_kernel"
    assert m["kernel"]["spec"]["source"] == "signature"
    assert [(i["name"], i["shape"], i["dtype"]) for i in m["kernel"]["spec"]["inputs"]] == [
        (t["name"], t["shape"], t["dtype"]) for t in ir["kernels"][0]["gm_tensors"] if t["name"] != "C"]
    assert m["kernel"]["spec"]["inputs"][0]["shape"] == [128, 512]
    assert m["correctness"]["status"] == "not_run" and m["backend"] is None and m["ir_only"] is True
    assert m["commands"] == [] and list((out / "profile").iterdir()) == []


def test_dataclass_fields_reach_the_device_worker_as_lint_builds_them() -> None:
    """`collect -p tiling.block_M=32` on a tilelang-ascend kernel: the device job carries the
    dotted value with the class `tiling` takes (found in the file's syntax), and the worker's
    `nested_params` builds Tiling(block_M=32, block_N=256) from it — the code lint's worker runs."""
    import ast

    from tilescope.ir.ascend_worker import nested_params
    from tilescope.ir.lowering import NESTED_KEY
    from tilescope.ir.published import load_module

    path = REPO_ROOT / "sample_traces" / "kernels" / "a2" / "vector_add_tiling.py"
    ir = {"params": {"tiling.block_M": 32}, "kernels": [{"gm_tensors": []}]}
    job = runmod.ascend_job_base(runmod.KernelRef(path, "vector_add"), ir)
    assert job["params"] == {"tiling.block_M": 32, NESTED_KEY: {"tiling": ["Tiling", 19]}}
    module = load_module(path, ast.parse(path.read_text(encoding="utf-8")))
    params = dict(job["params"])
    classes = params.pop(NESTED_KEY)
    jit = getattr(module.vector_add, "__jit_impl__", module.vector_add)  # tilelang-ascend's / 0.1.15's
    built = nested_params(module, jit.func, params, classes)
    assert (built["tiling"].block_M, built["tiling"].block_N) == (32, 256)
