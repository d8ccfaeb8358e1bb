"""Published kernel files as they are: the dialect read from the source, only the declarative part
imported, and the file's own builder call taken as default parameters (issue #14).

The real files are tile-ai's examples in ../shared/kernels/real (read-only, never copied here)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tilescope.errors import UsageError
from tilescope.ir.dialect import detect
from tilescope.ir.params import builder_signatures, candidates, resolve_kernel, with_file_params
from tilescope.ir.published import declarative, file_call_params, load_module
from tilescope.ir.scopes import ASCEND_0115, CUDA, TILELANG_ASCEND

from support import REPO_ROOT

REAL_KERNELS = REPO_ROOT.parent / "shared" / "kernels" / "real"


def _real(rel: str) -> Path:
    path = REAL_KERNELS / rel
    if not path.is_file():
        pytest.skip(f"real kernel not available at {path}")
    return path


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"))


@pytest.mark.parametrize(
    ("rel", "dialect", "line"),
    [
        ("tilelang_ascend/activation__silu.py", TILELANG_ASCEND, 8),  # PassConfigKey.TL_ASCEND_*
        ("tilelang_ascend/flash_attention__flash_attn_bhsd.py", TILELANG_ASCEND, 8),  # workspace_idx=
        ("tilelang_950/example_vecadd.py", ASCEND_0115, 9),  # import tilelang.ascend.language
        ("tilelang_950/example_gemm_l0.py", ASCEND_0115, 60),  # T.alloc_l0a of newer tilelang.language
    ],
)
def test_dialect_read_from_the_source(rel: str, dialect: str, line: int) -> None:
    found = detect(_tree(_real(rel)))
    assert (found.dialect, found.line) == (dialect, line)


def test_every_real_tilelang_ascend_file_is_that_dialect() -> None:
    files = sorted((REAL_KERNELS / "tilelang_ascend").glob("*.py"))
    if not files:
        pytest.skip(f"real kernels not available at {REAL_KERNELS}")
    assert {f.name: detect(_tree(f)).dialect for f in files} == {f.name: TILELANG_ASCEND for f in files}


def test_project_kernels_and_cuda_dialect() -> None:
    kernels = REPO_ROOT / "sample_traces" / "kernels"
    assert detect(_tree(kernels / "flash_attention.py")).dialect == ASCEND_0115
    # a 1-D grid and T.serial only: nothing dialect-specific, the installed tilelang decides
    assert detect(_tree(kernels / "collect_vector_add.py")).dialect is None
    cuda = ast.parse("import tilelang.language as T\nwith T.Kernel(8, threads=128) as bx:\n    pass\n")
    assert detect(cuda).dialect == CUDA


@pytest.mark.parametrize(
    ("rel", "builder", "expected", "line"),
    [
        # the first row of `for M, N, block_M, block_N in test_configs: func = silu(M, N, ...)`
        (
            "tilelang_ascend/activation__silu.py",
            "silu",
            {"M": 256, "N": 256, "block_M": 64, "block_N": 64},
            53,
        ),
        # argparse defaults under `if __name__ == "__main__"`, passed as keywords
        (
            "tilelang_ascend/flash_attention__flash_attn_bhsd.py",
            "flash_attention_fwd",
            {"batch": 1, "seq_len": 128, "heads": 1, "dim": 512},
            227,
        ),
        # module constants `B, S, H, D = 1, 128, 1, 512` then `flash_attention_fwd(heads=H, dim=D)`
        (
            "tilelang_ascend/pipeline__flash_attn_bshd_pipeline.py",
            "flash_attention_fwd",
            {"heads": 1, "dim": 512},
            129,
        ),
        (
            "tilelang_ascend/normalization__rms_norm.py",
            "_rms_norm",
            {"M": 256, "N": 256, "block_M_in": 64, "block_N_in": 64, "dtype": "float"},
            292,
        ),
    ],
)
def test_the_files_own_call_gives_the_parameters(rel: str, builder: str, expected: dict, line: int) -> None:
    tree = _tree(_real(rel))
    (sig,) = builder_signatures(tree, [builder])
    assert file_call_params(tree, builder, list(sig.params)) == (expected, line)


def test_user_params_override_the_files_call() -> None:
    tree = _tree(_real("tilelang_ascend/activation__silu.py"))
    sigs = builder_signatures(tree, ["silu"])
    assert with_file_params(tree, sigs, {"block_N": 128}) == {
        "M": 256,
        "N": 256,
        "block_M": 64,
        "block_N": 128,
    }


def test_a_builder_called_only_with_runtime_shapes_has_no_file_params() -> None:
    # convolution: matmul(M_pad, N_pad, K_pad, ...) inside a function computing them from tensors
    tree = _tree(_real("tilelang_ascend/convolution__example_convolution.py"))
    (sig,) = builder_signatures(tree, ["matmul"])
    assert file_call_params(tree, "matmul", list(sig.params)) is None


def test_candidates_are_kernels_not_test_drivers() -> None:
    conv = _tree(_real("tilelang_ascend/convolution__example_convolution.py"))
    assert candidates(conv) == ["matmul"]  # not conv_im2col_gemm / run_test, which run it
    rms = _tree(_real("tilelang_ascend/normalization__rms_norm.py"))
    assert candidates(rms) == ["_rms_norm", "_rms_norm_grad"]  # `_` names are kernels here
    # ... but a `_` kernel that a chain builder calls is a part of the chain
    unfused = _tree(REPO_ROOT / "sample_traces" / "kernels" / "attention_unfused.py")
    assert candidates(unfused) == ["attention_unfused"]


def test_declarative_part_skips_the_script() -> None:
    tree = _tree(_real("tilelang_ascend/developer_mode__flash_attn_bshd_developer.py"))
    kept = [ast.unparse(n).split("\n")[0] for n in declarative(tree)]
    assert "stages = 2" in kept and "B, S, H, D = (1, 128, 1, 512)" in kept
    # the device, the RNG, the kernel call and the benchmark are the script part
    for script in (
        "torch.set_default_device",
        "torch.manual_seed",
        "func = ",
        "q = ",
        "output = ",
        "tilelang_time",
    ):
        assert not any(k.startswith(script) for k in kept), script


SCRIPTED = """\
import argparse
import sys
import torch_npu  # needs CANN: never imported
import tilelang.ascend.language as T

parser = argparse.ArgumentParser()
parser.add_argument("--n", type=int, default=4096)
parser.add_argument("--required", required=True)
args = parser.parse_args()
sys.exit("the script part ran")


def vadd(N=1024, block=256):
    @T.prim_func
    def kernel(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
        with T.Kernel(N // block) as bx:
            a = T.alloc_shared((block,), "float32")
            T.copy(A[bx * block], a)
            T.copy(a, B[bx * block])
    return kernel


if __name__ == "__main__":
    func = vadd(args.n, 512)
    func(torch.randn(args.n).npu())
"""


@pytest.mark.slow  # 2.4-5 s of CPU each (#23: the quick loop keeps tests under ~2 s)
def test_a_scripted_file_imports_without_running_its_script(tmp_path: Path) -> None:
    path = tmp_path / "scripted.py"
    path.write_text(SCRIPTED, encoding="utf-8")
    tree = _tree(path)
    mod = load_module(path, tree)  # neither argparse, sys.exit nor torch_npu ran
    assert callable(mod.vadd) and not hasattr(mod, "args")
    (sig,) = builder_signatures(tree, ["vadd"])
    assert with_file_params(tree, [sig], {}) == {"N": 4096, "block": 512}


def test_a_failing_import_names_its_line(tmp_path: Path) -> None:
    path = tmp_path / "k.py"
    path.write_text(
        "import tilelang.ascend.language as T\nimport no_such_module_here\n\n\ndef k():\n    pass\n"
    )
    with pytest.raises(Exception, match=r"k\.py:2: import no_such_module_here failed: ModuleNotFoundError"):
        load_module(path, _tree(path))


def test_resolve_kernel_lists_candidates_of_a_real_file() -> None:
    path = _real("tilelang_ascend/normalization__rms_norm.py")
    with pytest.raises(UsageError, match=r"candidates: _rms_norm, _rms_norm_grad"):
        resolve_kernel(str(path))
