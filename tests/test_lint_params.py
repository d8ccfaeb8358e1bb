"""`tilescope lint` parameters: a build failure that is the user's is exit 2 (not a TS500), dataclass
parameters (`-p tiling.block_q=64`), `@autotune` kernels linted without running the autotuner."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from analyzer.cli import main

pytestmark = pytest.mark.tilelang

# A Cube GEMM of the 0.1.15 Ascend dialect; the tests below change its head.
GEMM_BODY = '''
    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), accum_dtype)):
        with T.Kernel(T.ceildiv(N, block_N) * T.ceildiv(M, block_M)) as core:
            a_l1 = T.alloc_l1((block_M, block_K), dtype)
            b_l1 = T.alloc_l1((block_K, block_N), dtype)
            a_l0 = T.alloc_l0a((block_M, block_K), dtype)
            b_l0 = T.alloc_l0b((block_K, block_N), dtype)
            c_l0 = T.alloc_l0c((block_M, block_N), accum_dtype)
            r0 = core // T.ceildiv(N, block_N) * block_M
            c0 = core % T.ceildiv(N, block_N) * block_N
            for kk in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                T.copy(A[r0, kk * block_K], a_l1)
                T.copy(B[kk * block_K, c0], b_l1)
                T.copy(a_l1, a_l0)
                T.copy(b_l1, b_l0)
                T.gemm(a_l0, b_l0, c_l0, clear_accum=(kk == 0))
            T.copy(c_l0, C[r0, c0])

    return main
'''
HEAD = "import tilelang\nimport tilelang.ascend.language as T\n"
GEMM_ARGS = (
    'M=512, N=512, K=512, block_M=128, block_N=128, block_K=64, dtype="float16", accum_dtype="float32"'
)


@pytest.fixture(autouse=True)
def _needs_tilelang() -> None:
    pytest.importorskip("tilelang")


def _kernel(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / f"{name}.py"
    path.write_text(text, encoding="utf-8")
    return path


def _line_of(text: str, start: str) -> int:
    return 1 + next(i for i, x in enumerate(text.splitlines()) if x.strip().startswith(start))


def _one_error(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("tilescope: error: "), err
    return err[0]


# --- item 3: whose failure is it ------------------------------------------------------------------


def test_an_assertion_of_the_builder_on_its_parameters_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = HEAD + f"\n\ndef gemm({GEMM_ARGS}):\n"
    text += "    assert M % block_M == 0, 'M must be a multiple of block_M'\n" + GEMM_BODY
    src = _kernel(tmp_path, "gemm_assert", text)
    # before: exit 0 with a high TS500 "build failed in the builder: AssertionError: ..."
    assert main(["lint", f"{src}:gemm", "-p", "M=500"]) == 2
    line = _line_of(text, "assert M % block_M")
    assert _one_error(capsys) == (
        f"tilescope: error: {src}:{line}: gemm: the builder rejected the parameters "
        "(assert M % block_M == 0, 'M must be a multiple of block_M'): M must be a multiple of block_M; "
        "expected values that satisfy it"
    )
    assert main(["lint", f"{src}:gemm", "-p", "M=512", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["lowered"] is True


def test_a_call_the_builder_cannot_take_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # a @tilelang.jit kernel's parameters are not checked before the build (get_tir also binds
    # T.const symbols no signature lists): a parameter left out fails as a TypeError of the call
    text = HEAD + f"\n\n@tilelang.jit\ndef gemm({GEMM_ARGS.replace('M=512', 'M')}):" + GEMM_BODY
    src = _kernel(tmp_path, "gemm_jit", text)
    assert main(["lint", f"{src}:gemm"]) == 2
    err = _one_error(capsys)
    assert err.startswith(f"tilescope: error: {src}:{_line_of(text, 'def gemm')}: gemm: ")
    assert "missing a required argument: 'M'" in err
    assert err.endswith("expected the builder's parameters (-p NAME=VALUE)")


def test_a_name_the_builder_cannot_see_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # BLOCK is set by script code (os.environ), which lint never runs: a NameError, the user's
    text = HEAD + "import os\nBLOCK = int(os.environ.get('BLOCK', '128'))\n\n\n"
    text += f"def gemm({GEMM_ARGS.replace('block_M=128', 'block_M=None')}):\n    block_M = block_M or BLOCK\n"
    text += GEMM_BODY
    src = _kernel(tmp_path, "gemm_name", text)
    assert main(["lint", f"{src}:gemm"]) == 2
    err = _one_error(capsys)
    assert err.startswith(f"tilescope: error: {src}:{_line_of(text, 'block_M = block_M or')}: gemm: ")
    assert "name 'BLOCK' is not defined; expected a name the builder can see" in err


def test_a_failure_of_the_kernel_itself_stays_a_ts500(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # a shape check inside TileLang (T.copy L1 -> L0B of another shape): the kernel is wrong,
    # whatever the parameters
    text = HEAD + f"\n\ndef gemm({GEMM_ARGS}):" + GEMM_BODY.replace(
        "b_l0 = T.alloc_l0b((block_K, block_N)", "b_l0 = T.alloc_l0b((block_K * 2, block_N)"
    )
    src = _kernel(tmp_path, "gemm_shape", text)
    assert main(["lint", f"{src}:gemm", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    (ts500,) = [f for f in doc["findings"] if f["code"] == "TS500"]
    assert "T.copy src/dst element count mismatch" in ts500["message"]
    assert doc["kernels"][0]["failure"]["kind"] == "exception"


def test_classify_failure_tells_the_users_failures_from_the_kernels() -> None:
    from analyzer.ir.lowering import classify_failure

    def gemm(M: int) -> None:  # a builder that is called wrongly
        pass

    try:
        gemm(block=1)  # type: ignore[call-arg]
    except TypeError as exc:
        assert classify_failure(exc, "build", None)["kind"] == "usage"
    capacity = RuntimeError(
        'scope "shared.l1" capacity 524288 is insufficient for minimum buffer usage 786432'
    )
    assert classify_failure(capacity, "build", None)["kind"] == "capacity"
    # raised inside TileLang (no frame of the kernel file): the kernel's
    inside = AssertionError("T.gemm K shape check failed")
    assert classify_failure(inside, "build", None)["kind"] == "exception"
    # a lowering failure is never the user's
    assert classify_failure(TypeError("f() missing 1 required positional argument: 'x'"), "lower", "p")[
        "kind"
    ] == "exception"
