"""`tilescope lint` parameters: a build failure that is the user's is exit 2 (not a TS500), dataclass
parameters (`-p tiling.block_q=64`), `@autotune` kernels linted without running the autotuner."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tilescope.cli import main

from support import REPO_ROOT

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
    from tilescope.ir.lowering import classify_failure

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


# --- @autotune: never run the autotuner -------------------------------------------------------------

# The kernel replaces the autotuner's benchmarking loop (AutoTuner.run) with one that leaves a marker
# file and fails: lint imports the file in this process and in each sweep worker, so the marker
# would say if anything, anywhere, ran the autotuner.
AUTOTUNE_HEAD = HEAD + '''import os

from tilelang.autotuner import autotune
from tilelang.autotuner import tuner as _tuner


def _no_tuning(self, *args, **kwargs):
    with open(os.environ["TS_AUTOTUNE_MARKER"], "a") as marker:
        marker.write("the autotuner ran\\n")
    raise RuntimeError("the autotuner ran")


_tuner.AutoTuner.run = _no_tuning
'''


def _autotune_kernel(tmp_path: Path, configs: str) -> Path:
    text = AUTOTUNE_HEAD + f"\n\n{configs}\n\n"
    text += f"@autotune(configs=CONFIGS)\n@tilelang.jit\ndef gemm({GEMM_ARGS}):"
    return _kernel(tmp_path, "gemm_autotune", text + GEMM_BODY)


@pytest.fixture()
def marker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    from tilelang.autotuner import tuner

    path = tmp_path / "autotuner-ran"
    monkeypatch.setenv("TS_AUTOTUNE_MARKER", str(path))
    monkeypatch.setattr(tuner.AutoTuner, "run", tuner.AutoTuner.run)  # restored after the test
    return path


def test_an_autotune_kernel_is_linted_with_the_config_it_names(
    tmp_path: Path, marker: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = _autotune_kernel(
        tmp_path, 'CONFIGS = [{"block_M": 64, "block_N": 64}, {"block_M": 256, "block_N": 128}]'
    )
    # before: lint called the kernel, so the autotuner ran (and failed looking for a device)
    assert main(["lint", str(src), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["lowered"] is True and not marker.exists()
    assert doc["kernels"][0]["footprint"]["L0C"]["bytes"] == 128 * 128 * 4  # the defaults
    assert main(["lint", str(src), "-p", "block_M=256", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["kernels"][0]["footprint"]["L0C"]["bytes"] == 256 * 128 * 4 and not marker.exists()


def test_the_autotune_configs_are_read_without_running_it(tmp_path: Path, marker: Path) -> None:
    from tilescope.ir.capture import autotune_configs

    listed = _autotune_kernel(
        tmp_path, 'CONFIGS = [{"block_M": 64, "pass_configs": {}}, {"block_M": 128, "block_K": 32}]'
    )
    assert autotune_configs(str(listed), {}) == [{"block_M": 64}, {"block_M": 128, "block_K": 32}]
    # a generator of the author's, called with the kernel's arguments as the autotuner would
    generated = _autotune_kernel(
        tmp_path, "def CONFIGS(M, N, K):\n    return [{'block_M': b} for b in (64, 128, 256) if M % b == 0]"
    )
    assert autotune_configs(str(generated), {"M": 384}) == [{"block_M": 64}, {"block_M": 128}]
    assert not marker.exists()


def test_sweep_autotune_lints_each_config(
    tmp_path: Path, marker: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = _autotune_kernel(
        tmp_path, 'CONFIGS = [{"block_M": 64, "block_N": 64}, {"block_M": 128, "block_N": 256}]'
    )
    args = ["--sweep", "autotune", "--sweep", "block_K=32,64", "--format", "json"]
    assert main(["lint", str(src), *args]) == 0
    rows = json.loads(capsys.readouterr().out)["sweep"]
    points = sorted((r["params"]["block_M"], r["params"]["block_N"], r["params"]["block_K"]) for r in rows)
    assert points == [(64, 64, 32), (64, 64, 64), (128, 256, 32), (128, 256, 64)]
    assert all(r["lowered"] for r in rows)
    assert not marker.exists()  # nor in the sweep's worker processes


def test_sweep_autotune_needs_an_autotune_kernel(capsys: pytest.CaptureFixture[str]) -> None:
    matmul = REPO_ROOT / "sample_traces" / "kernels" / "matmul.py"
    assert main(["lint", f"{matmul}:matmul", "--sweep", "autotune"]) == 2
    assert "matmul has no @autotune(configs=...) decorator" in _one_error(capsys)


# --- dataclass parameters: -p tiling.block_M=256 -----------------------------------------------------

DATACLASS_GEMM = (
    HEAD
    + '''from dataclasses import dataclass


@dataclass(frozen=True)
class GemmTiling:
    block_M: int = 128
    block_N: int = 128
    block_K: int = 64


def gemm(M=512, N=512, K=512, dtype="float16", accum_dtype="float32", tiling=None):
    tiling = tiling or GemmTiling()
    block_M, block_N, block_K = tiling.block_M, tiling.block_N, tiling.block_K
'''
    + GEMM_BODY
)
FA_CORE = REPO_ROOT.parent / "shared" / "kernels" / "real" / "tilelang_950"
FA_CORE = FA_CORE / "flash_attention_core.py"


def test_a_field_of_a_dataclass_parameter_is_replaced(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = _kernel(tmp_path, "gemm_tiling", DATACLASS_GEMM)
    assert main(["lint", str(src), "-p", "tiling.block_M=256", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    # GemmTiling() with block_M replaced: 256 x 128 fp32 in L0C, 256 x 64 fp16 in L0A (2 versions)
    fp = doc["kernels"][0]["footprint"]
    assert fp["L0C"]["bytes"] == 256 * 128 * 4 and fp["L0A"]["bytes"] == 2 * 256 * 64 * 2
    assert doc["params"]["tiling.block_M"] == 256


def test_a_dataclass_default_instance_keeps_its_other_fields(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = DATACLASS_GEMM.replace("tiling=None", "tiling=GemmTiling(block_N=64)")
    src = _kernel(tmp_path, "gemm_tiling_default", text)
    assert main(["lint", str(src), "-p", "tiling.block_M=64", "--format", "json"]) == 0
    fp = json.loads(capsys.readouterr().out)["kernels"][0]["footprint"]
    assert fp["L0C"]["bytes"] == 64 * 64 * 4  # block_N=64 of the default, block_M=64 of -p


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["-p", "tiling.block_m=64"],
         "--param tiling.block_m: GemmTiling ({src}:{line}) has no field block_m; "
         "accepted: tiling.block_M, tiling.block_N, tiling.block_K"),
        (["-p", "tiling.block_M=abc"],
         "--param tiling.block_M='abc': expected a positive integer, like GemmTiling.block_M's default 128"),
        (["--sweep", "tiling.block_K=64,0"],
         "--sweep tiling.block_K=0: expected a positive integer, like GemmTiling.block_K's default 64"),
        (["-p", "dtype.bits=16"], "--param dtype.bits: gemm()'s dtype takes no dataclass of {src}"),
        (["-p", "tile.block_M=64"], "unknown --param tile.block_M; gemm accept:"),
        (["-p", "tiling.block_M.x=1"], "--param tiling.block_M.x: expected NAME.FIELD=VALUE (one level"),
        (["-p", "tiling=None", "-p", "tiling.block_M=64"],
         "--param tiling and --param tiling.block_M: expected the whole tiling or its fields, not both"),
    ],
)
def test_dataclass_fields_are_checked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], expected: str
) -> None:
    src = _kernel(tmp_path, "gemm_tiling", DATACLASS_GEMM)
    assert main(["lint", str(src), *args]) == 2
    line = _line_of(DATACLASS_GEMM, "class GemmTiling")
    assert expected.format(src=src, line=line) in _one_error(capsys)


def test_sweep_over_a_dataclass_field(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = _kernel(tmp_path, "gemm_tiling", DATACLASS_GEMM)
    assert main(["lint", str(src), "--sweep", "tiling.block_N=64,256", "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)["sweep"]
    l0c = {r["params"]["tiling.block_N"]: r["footprint"]["L0C"]["bytes"] for r in rows}
    assert l0c == {64: 128 * 64 * 4, 256: 128 * 256 * 4}


def test_flash_attention_core_takes_its_tiling_fields(capsys: pytest.CaptureFixture[str]) -> None:
    if not FA_CORE.is_file():
        pytest.skip(f"real kernels not available at {FA_CORE.parent}")
    # read from the source, nothing imported: FwdTiling's fields are named on a typo
    assert main(["lint", str(FA_CORE), "-p", "tiling.block_x=64"]) == 2
    assert _one_error(capsys).endswith(
        "has no field block_x; accepted: tiling.block_q, tiling.block_kv, tiling.num_stages"
    )
    args = ["lint", str(FA_CORE), "-p", "q_len=256", "-p", "kv_len=256", "-p", "tiling.block_q=64"]
    code = main([*args, "--format", "json"])
    out = capsys.readouterr()
    if code == 2 and "ImportError" in out.err:
        pytest.skip(f"flash_attention_core.py needs a newer tilelang than 0.1.15: {out.err.strip()[:200]}")
    assert code == 0
    doc = json.loads(out.out)
    assert doc["params"]["tiling.block_q"] == 64 and doc["lowered"] is True
