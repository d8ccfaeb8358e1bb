"""`tilescope collect` through the CLI: the no-NPU path (exit 3) and --ir-only on real TileLang kernels."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tilescope.collectors import bundle as bundlemod
from tilescope.collectors import preflight

from support import REPO_ROOT, cli

REPO = REPO_ROOT
VECTOR_ADD = REPO / "sample_traces" / "kernels" / "collect_vector_add.py"
LIBHCCL = "ImportError: libhccl.so: cannot open shared object file: No such file or directory"


def run_cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    return cli(capsys, "collect", *args)


# --- no NPU ---------------------------------------------------------------------------------------

@pytest.mark.slow  # over 1 s each (#23: the quick loop keeps tests under 1 s)
def test_real_probe_reports_the_import_error_text(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The probe runs a real child; a torch_npu that fails like it does without CANN is reported verbatim."""
    site = tmp_path / "site"
    (site / "torch_npu").mkdir(parents=True)
    (site / "torch_npu" / "__init__.py").write_text(
        'raise ImportError("libhccl.so: cannot open shared object file: No such file or directory")\n')
    monkeypatch.setenv("PYTHONPATH", str(site))
    assert preflight.probe_torch_npu() == {"import_error": LIBHCCL}


@pytest.mark.slow  # over 1 s each (#23: the quick loop keeps tests under 1 s)
def test_real_probe_reports_the_root_cause_of_torch_autoload(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """torch_npu 2.13.0 without CANN: `import torch` autoloads it and raises RuntimeError from the
    ImportError (observed with the real wheel); the probe puts the missing library first."""
    site = tmp_path / "site"
    (site / "torch_npu").mkdir(parents=True)
    (site / "torch_npu" / "__init__.py").write_text(
        "try:\n"
        "    raise ImportError('libhccl.so: cannot open shared object file: No such file or directory')\n"
        "except ImportError as e:\n"
        "    raise RuntimeError('Failed to load the backend extension: torch_npu. You can disable '\n"
        "                       'extension auto-loading with TORCH_DEVICE_BACKEND_AUTOLOAD=0.') from e\n")
    monkeypatch.setenv("PYTHONPATH", str(site))
    err = preflight.probe_torch_npu()["import_error"]
    assert err.startswith(LIBHCCL + " (from RuntimeError: Failed to load the backend extension: torch_npu.")


def test_cpu_children_never_autoload_torch_npu(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    from tilescope.collectors import run as runmod

    monkeypatch.setenv("TORCH_DEVICE_BACKEND_AUTOLOAD", "1")  # so that teardown restores the original
    monkeypatch.delenv("TORCH_DEVICE_BACKEND_AUTOLOAD")
    user = {"PATH": "/bin", "PYTHONPATH": "/mine"}
    runmod.keep_torch_npu_out_of_this_process()
    assert os.environ["TORCH_DEVICE_BACKEND_AUTOLOAD"] == "0"
    assert runmod.child_env(user, "cpu")["TORCH_DEVICE_BACKEND_AUTOLOAD"] == "0"
    npu = runmod.child_env(user, "npu")
    assert "TORCH_DEVICE_BACKEND_AUTOLOAD" not in npu  # the user's environment, untouched
    # the worker finds tilescope through run_module.py, not through the user's PYTHONPATH
    assert npu["PYTHONPATH"] == "/mine" and npu["PATH"] == "/bin"


@pytest.mark.parametrize("backend, probe, msprof, expected", [
    ("torch_npu", {"import_error": LIBHCCL}, "/x/msprof", "libhccl.so: cannot open shared object file"),
    ("torch_npu", {"import_error": "ModuleNotFoundError: No module named 'torch_npu'"}, "/x/msprof",
     "torch_npu is not installed"),
    ("torch_npu", {"available": False, "device_count": 0}, "/x/msprof", "torch.npu.is_available() is False"),
    ("torch_npu", {"available": True, "device_count": 1}, None, "msprof not on PATH"),
    ("msprof-op", {"available": True, "device_count": 1}, None, "msprof not on PATH"),
    ("msprof-op", {"import_error": LIBHCCL}, "/x/msprof", "libhccl.so"),
])
def test_no_npu_exits_3_before_anything(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture[str], backend: str,
                                        probe: dict[str, Any], msprof: str | None, expected: str) -> None:
    monkeypatch.setattr(preflight, "probe_torch_npu", lambda: probe)
    monkeypatch.setattr(preflight, "which_msprof", lambda: msprof)

    def no_ir(*a: Any, **k: Any) -> Any:
        raise AssertionError("IR capture must not start when the NPU is missing")

    monkeypatch.setattr("tilescope.collectors.run.capture_ir_into", no_ir)
    code, out, err = run_cli([f"{VECTOR_ADD}:vector_add", "--backend", backend, "--out", str(tmp_path / "b")],
                             capsys)
    assert code == 3
    assert expected in err and "--ir-only" in err
    assert err.startswith("tilescope: error: ") and out == ""
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow  # over 1 s each (#23: the quick loop keeps tests under 1 s)
def test_no_npu_on_this_machine(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Whatever this machine lacks (torch_npu, CANN, msprof) is named, exit 3, no bundle."""
    code, _, err = run_cli([f"{VECTOR_ADD}:vector_add", "--out", str(tmp_path / "b")], capsys)
    if code == 0:
        pytest.skip("this machine has a working NPU stack")
    assert code == 3
    assert any(s in err for s in ("torch_npu", "msprof not on PATH", "is_available"))
    assert list(tmp_path.iterdir()) == []


def test_usage_errors_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli([str(tmp_path / "missing.py"), "--ir-only", "--out", str(tmp_path / "b")], capsys)
    assert code == 2 and "kernel file not found" in err
    args = [str(VECTOR_ADD), "--param", "N", "--ir-only", "--out", str(tmp_path / "b")]
    code, _, err = run_cli(args, capsys)
    assert code == 2 and "NAME=VALUE" in err
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "manifest.json").write_text("{}")
    code, _, err = run_cli([str(VECTOR_ADD), "--ir-only", "--out", str(tmp_path / "b")], capsys)
    assert code == 2 and "already exists (use --force to replace it)" in err


# --- --ir-only on real TileLang kernels -------------------------------------------------------------

ASCEND_GEMM = '''
import tilelang.ascend.language as T


def cube_gemm(M=256, N=256, K=256, tm=128, tn=128, tk=64, cores=4):
    n_col = N // tn

    @T.prim_func
    def gemm(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"),
             C: T.Tensor((M, N), "float32")):
        with T.Kernel(cores) as core:
            a_l1 = T.alloc_l1((tm, tk), "float16")
            b_l1 = T.alloc_l1((tk, tn), "float16")
            a_l0 = T.alloc_l0a((tm, tk), "float16")
            b_l0 = T.alloc_l0b((tk, tn), "float16")
            c_l0 = T.alloc_l0c((tm, tn), "float32")
            for t in T.Persistent([(M // tm) * n_col], cores, core):
                r0 = t // n_col * tm
                c0 = t % n_col * tn
                for kk in T.Pipelined(K // tk, num_stages=2):
                    T.copy(A[r0, kk * tk], a_l1)
                    T.copy(B[kk * tk, c0], b_l1)
                    T.copy(a_l1, a_l0)
                    T.copy(b_l1, b_l0)
                    T.gemm(a_l0, b_l0, c_l0, clear_accum=(kk == 0))
                T.copy(c_l0, C[r0, c0])
    return gemm
'''

GEMM_SPEC = '''
TILESCOPE_SPEC = {"cube_gemm": {
    "inputs": [("A", ("M", "K"), "float16"), ("B", ("K", "N"), "float16")],
    "out_idx": [2],
    "reference": lambda A, B: A.float() @ B.float(),
    "atol": 1e-2, "rtol": 1e-2,
}}
'''


@pytest.fixture(scope="module")
def tilelang_ok() -> None:
    pytest.importorskip("tilelang")


@pytest.mark.tilelang
def test_ir_only_vector_add_end_to_end(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                       tilelang_ok: None) -> None:
    out = tmp_path / "runs" / "vadd"
    code, stdout, err = run_cli([f"{VECTOR_ADD}:vector_add", "--param", "N=8192", "--param", "block=512",
                                 "--ir-only", "--out", str(out)], capsys)
    assert code == 0, err
    assert stdout.strip() == str(out)
    m = bundlemod.read_manifest(out)
    bundlemod.validate_manifest(m)
    assert m["ir_only"] is True and m["backend"] is None and m["metric_groups"] == []
    assert m["parameters"] == {"N": 8192, "block": 512}
    assert m["resolved_parameters"] == {"N": 8192, "block": 512, "dtype": "float32"}
    assert m["kernel"]["function"] == "vector_add" and m["kernel"]["entry"] == "vector_add_kernel_kernel"
    assert m["kernel"]["sha256"] == bundlemod_sha(VECTOR_ADD)
    c = m["correctness"]
    assert c["status"] == "pass" and c["device"] == "cpu" and c["target"] == "c"
    assert c["max_abs_err"] == 0.0 and c["outputs"][0]["name"] == "C" and c["outputs"][0]["numel"] == 8192
    assert m["versions"]["tilelang"] == "0.1.15"
    # the IR exactly as `tilescope lint` writes it, the profile dir present and empty
    assert (out / "ir" / "ir.json").is_file() and (out / "ir" / "kernel.cpp").is_file()
    assert "vector_add_kernel_kernel" in (out / "ir" / "kernel.cpp").read_text()
    assert (out / "profile").is_dir() and not any((out / "profile").iterdir())
    assert m["ir"] == {"path": "ir", "captured": True, "lowered": True}
    assert [p.name for p in out.parent.iterdir()] == ["vadd"]  # no temp dir left behind


def bundlemod_sha(path: Path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.tilelang
def test_ir_only_wrong_kernel_is_recorded_as_fail(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                  tilelang_ok: None) -> None:
    k = tmp_path / "vadd_wrong.py"
    k.write_text(VECTOR_ADD.read_text().replace('"reference": lambda A, B: A + B',
                                                '"reference": lambda A, B: A - B'))
    code, _, err = run_cli([f"{k}:vector_add", "--ir-only", "--out", str(tmp_path / "b")], capsys)
    assert code == 0, err
    c = bundlemod.read_manifest(tmp_path / "b")["correctness"]
    assert c["status"] == "fail" and c["outputs"][0]["mismatched"] > 0 and c["max_abs_err"] > 0
    assert "differs from the reference" in err


@pytest.mark.tilelang
def test_ir_only_ascend_style_kernel(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                     tilelang_ok: None) -> None:
    """Lowers for Ascend (IR captured); cannot run on the CPU: correctness not_run with the reason."""
    k = tmp_path / "gemm.py"
    k.write_text(ASCEND_GEMM + GEMM_SPEC)
    code, _, err = run_cli([f"{k}:cube_gemm", "--ir-only", "--out", str(tmp_path / "b")], capsys)
    assert code == 0, err
    m = bundlemod.read_manifest(tmp_path / "b")
    bundlemod.validate_manifest(m)
    assert m["kernel"]["entry"] == "gemm_kernel"
    c = m["correctness"]
    assert c["status"] == "not_run" and "does not compile for the CPU target 'c'" in c["reason"]
    assert (tmp_path / "b" / "ir" / "kernel.cpp").is_file()
    ir = json.loads((tmp_path / "b" / "ir" / "ir.json").read_text())
    assert ir  # written by tilescope.ir.capture


@pytest.mark.tilelang
def test_ir_only_without_spec(tmp_path: Path, capsys: pytest.CaptureFixture[str], tilelang_ok: None) -> None:
    k = tmp_path / "gemm.py"
    k.write_text(ASCEND_GEMM)
    code, _, err = run_cli([str(k), "--ir-only", "--out", str(tmp_path / "b")], capsys)
    assert code == 0, err
    m = bundlemod.read_manifest(tmp_path / "b")
    assert m["kernel"]["function"] == "cube_gemm"  # picked like `tilescope lint` does
    assert m["correctness"]["status"] == "not_run" and "TILESCOPE_SPEC" in m["correctness"]["reason"]
