"""`tilescope lint FILE:KERNEL` accepts an eager `@tilelang.jit` kernel whose shapes are T.const symbols."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tilescope.cli import main

pytestmark = pytest.mark.tilelang

# The eager GEMM of shared/docs/tilelang-notes.md §3.2: M, N, K are not parameters of the Python
# signature, they are bound by get_tir(M=..., N=..., K=...).
JIT_GEMM = """
import tilelang
import tilelang.language as T


@tilelang.jit
def gemm_eager(X, W, bm=128, bn=128, bk=32, stages=3, acc=T.float32):
    M, N, K = T.const("M, N, K")
    X: T.Tensor((M, K), T.float16)
    W: T.Tensor((K, N), T.float16)
    Y = T.empty((M, N), T.float16)
    with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (col, row):
        xs = T.alloc_shared((bm, bk), T.float16)
        ws = T.alloc_shared((bk, bn), T.float16)
        acc_frag = T.alloc_fragment((bm, bn), acc)
        T.clear(acc_frag)
        for kk in T.Pipelined(T.ceildiv(K, bk), num_stages=stages):
            T.copy(X[row * bm, kk * bk], xs)
            T.copy(W[kk * bk, col * bn], ws)
            T.gemm(xs, ws, acc_frag)
        T.copy(acc_frag, Y[row * bm, col * bn])
    return Y
"""


def test_jit_kernel_shape_symbols_are_bound(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("tilelang")
    src = tmp_path / "jit_gemm.py"
    src.write_text(JIT_GEMM, encoding="utf-8")
    argv = ["lint", f"{src}:gemm_eager", "--format", "json"]
    argv += ["--param", "M=1024", "--param", "N=1024", "--param", "K=4096", "--param", "acc=float16"]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    findings = out["findings"]
    # It was built (a builder failure names the missing tensor argument), and the fp16 accumulator
    # over K = 128 iterations x 32 = 4096 is reported.
    assert not any("build failed" in f["message"] for f in findings)
    ts503 = [f for f in findings if f["code"] == "TS503"]
    assert len(ts503) == 1 and "K = 4096" in ts503[0]["message"]
    # A GPU-style kernel (threads=128, fragments): recognised as the CUDA dialect, so its shared
    # buffers are not counted as UB, and the lowering failure says what to change.
    assert out["kernels"][0].get("footprint", {}).get("UB") is None
    ts500 = [f for f in findings if f["code"] == "TS500"]
    assert len(ts500) == 1 and ts500[0]["evidence"]["dialect"] == "tilelang-cuda"
    assert "tilelang.ascend.language" in ts500[0]["recommendation"]


def test_jit_kernel_without_its_shape_symbols_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # before: exit 0 with a TS500 "build failed in the builder: ValueError: Or provide the
    # corresponding tensor argument `X`." — the last line of TileLang's message, not its cause
    pytest.importorskip("tilelang")
    src = tmp_path / "jit_gemm.py"
    src.write_text(JIT_GEMM, encoding="utf-8")
    assert main(["lint", f"{src}:gemm_eager"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    line = 1 + next(i for i, x in enumerate(JIT_GEMM.splitlines()) if x.startswith("def gemm_eager"))
    assert err == [
        f"tilescope: error: {src}:{line}: gemm_eager: needs -p M=VALUE (a T.const shape symbol with no value)"
    ]


def test_a_multi_line_failure_keeps_its_cause() -> None:
    from tilescope.ir.lowering import classify_failure

    text = (
        "Cannot find value for constexpr variable `M`\n"
        "Please provide it as a keyword argument, e.g. `M=<value>`\n"
        "Or provide the corresponding tensor argument `X`."
    )
    assert classify_failure(ValueError(text), "build", None)["message"] == text.splitlines()[0]
    tvm = (
        'Traceback (most recent call last):\n  0: tvm::transform::Pass\n  File "x.cc", line 3\n'
        "InternalError: Check failed: (a) is false: bad"
    )
    assert (
        classify_failure(RuntimeError(tvm), "lower", "p")["message"]
        == "InternalError: Check failed: (a) is false: bad"
    )


def test_text_output_prints_the_fix_and_debug_the_whole_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # before: the text output had no recommendation (a GPU kernel read "perform the cast inside a
    # VF block" nowhere near "this is the CUDA dialect"), and --debug added nothing
    pytest.importorskip("tilelang")
    monkeypatch.setenv("TILESCOPE_DEBUG", "")  # --debug sets it for the process: undone after the test
    src = tmp_path / "jit_gemm.py"
    src.write_text(JIT_GEMM, encoding="utf-8")
    argv = [f"{src}:gemm_eager", "-p", "M=1024", "-p", "N=1024", "-p", "K=4096", "-p", "acc=float16"]
    assert main(["lint", *argv]) == 0
    plain = capsys.readouterr().out
    ts500 = next(ln for ln in plain.splitlines() if " TS500 " in ln)
    fix = plain.splitlines()[plain.splitlines().index(ts500) + 2]
    assert fix.lstrip().startswith("fix: ") and "tilelang.ascend.language" in fix
    assert "full message from the lowering" not in plain
    assert main(["--debug", "lint", *argv]) == 0
    debug = capsys.readouterr().out
    assert "full message from the lowering:" in debug
    assert len(debug.splitlines()) > len(plain.splitlines())
