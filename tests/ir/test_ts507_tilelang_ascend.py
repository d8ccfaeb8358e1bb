"""TS507 k-loop-not-pipelined on tilelang-ascend (A2/A3 = 910B) GEMMs (issue #24): the K loop is read
from the structure of the IR tilelang-ascend's own interpreter returns (tilelang-ascend reports no
buffer versions), and the rule fires on a `T.serial` loop around `T.gemm_v0` when L1 has room for
a second version of the tiles the loop loads — as the 950 path does on the same loop.

The kernels are the project's own (sample_traces/kernels/a2/gemm.py), variants written below for
this test, and tile-ai's published examples read from ../shared/kernels/real (never copied here).
Every kernel is lowered by one tilelang-ascend worker; the tests skip without that interpreter
(`bash scripts/setup-tilelang-ascend.sh`). Byte counts are by hand: fp16 is 2 bytes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tilescope.findings import Finding
from tilescope.ir.foreign import find_interpreter

from support import REPO_ROOT

REAL = REPO_ROOT.parent / "shared" / "kernels" / "real" / "tilelang_ascend"
OWN = REPO_ROOT / "sample_traces" / "kernels" / "a2"
L1 = 524288  # a 910B2's L1 (chips.md)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        find_interpreter() is None,
        reason="tilelang-ascend is not set up here (bash scripts/setup-tilelang-ascend.sh)",
    ),
]

# Variants of the K loop, written for this test: the same GEMM with the loop pipelined, with the
# two versions kept by hand (a slot per k % 2, as hand-pipelined tilelang-ascend GEMMs do), and with
# L1 K tiles split into L0 sub-K steps by an inner loop (the accumulator carried across both).
VARIANTS = '''
import tilelang
import tilelang.language as T


def pipelined_gemm(M=1024, N=1024, K=2048, block_M=128, block_N=128, K_L1=128, stages=2,
                   dtype="float16", accum_dtype="float"):
    n_num = N // block_N

    @T.prim_func
    def kernel(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(M // block_M * n_num, is_npu=True) as (cid, _):
            row = cid // n_num * block_M
            col = cid % n_num * block_N
            a_tile = T.alloc_L1((block_M, K_L1), dtype)
            b_tile = T.alloc_L1((K_L1, block_N), dtype)
            acc = T.alloc_L0C((block_M, block_N), accum_dtype)
            with T.Scope("C"):
                for k in T.Pipelined(K // K_L1, num_stages=stages):
                    T.copy(A[row, k * K_L1], a_tile)
                    T.copy(B[k * K_L1, col], b_tile)
                    T.gemm_v0(a_tile, b_tile, acc, init=(k == 0))
                T.copy(acc, C[row, col])

    return kernel


def hand_staged_gemm(M=1024, N=1024, K=2048, block_M=128, block_N=128, K_L1=128,
                     dtype="float16", accum_dtype="float"):
    n_num = N // block_N

    @T.prim_func
    def kernel(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(M // block_M * n_num, is_npu=True) as (cid, _):
            row = cid // n_num * block_M
            col = cid % n_num * block_N
            a_tile = T.alloc_L1((2, block_M, K_L1), dtype)
            b_tile = T.alloc_L1((2, K_L1, block_N), dtype)
            acc = T.alloc_L0C((block_M, block_N), accum_dtype)
            with T.Scope("C"):
                for k in T.serial(K // K_L1):
                    T.copy(A[row, k * K_L1], a_tile[k % 2, :, :])
                    T.copy(B[k * K_L1, col], b_tile[k % 2, :, :])
                    T.barrier_all()
                    T.gemm_v0(a_tile[k % 2, :, :], b_tile[k % 2, :, :], acc, init=(k == 0))
                T.copy(acc, C[row, col])

    return kernel
'''


def _variants(tmp: Path) -> Path:
    path = tmp / "k_loop_variants.py"
    path.write_text(VARIANTS, encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def ts507(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[Finding]]:
    """Each case's TS507 findings, every case lowered by one worker (one import of tilelang)."""
    import pandas as pd

    from tilescope.chips import get_chip
    from tilescope.engine import run_rules
    from tilescope.ir.capture import capture_many, worker_runs
    from tilescope.ir.foreign import require_interpreter, run_jobs
    from tilescope.profile import Profile, SourceInfo

    variants = _variants(tmp_path_factory.mktemp("ts507"))
    cases: dict[str, tuple[str, dict[str, Any]]] = {
        "gemm": (f"{OWN / 'gemm.py'}", {}),
        # 128x512 + 512x128 fp16 = 262,144 B; a second version: 524,288 B, exactly a 910B2's L1
        "gemm_l1_full": (f"{OWN / 'gemm.py'}", {"block_N": 128, "K_L1": 512, "K": 2048}),
        # 128x768 + 768x128 fp16 = 393,216 B; a second version would need 786,432 B
        "gemm_too_big": (f"{OWN / 'gemm.py'}", {"block_N": 128, "K_L1": 768, "K": 3072}),
        "pipelined": (f"{variants}:pipelined_gemm", {}),
        "pipelined_1": (f"{variants}:pipelined_gemm", {"stages": 1}),
        "hand_staged": (f"{variants}:hand_staged_gemm", {}),
    }
    if REAL.is_dir():
        # tile-ai's convolution GEMM (T.alloc_shared tiles, which tilelang-ascend places in L1),
        # with 16 K steps; its file gives no shapes (they come from tensors at run time)
        conv = {"M": 512, "N": 512, "K": 1024, "block_M": 128, "block_N": 256, "block_K": 64}
        cases["conv"] = (f"{REAL / 'convolution__example_convolution.py'}", conv)
        cases["fa_pipeline"] = (f"{REAL / 'pipeline__flash_attn_bshd_pipeline.py'}", {})
        cases["fa_bhsd"] = (f"{REAL / 'flash_attention__flash_attn_bhsd.py'}", {})
    jobs = [worker_runs(ref, params) for ref, params in cases.values()]
    answers = run_jobs(require_interpreter("tests"), jobs)
    chip = get_chip("910B2")
    out: dict[str, list[Finding]] = {}
    for (key, (ref, params)), answer in zip(cases.items(), answers, strict=True):
        (cap,) = capture_many(ref, [params], chip, answer)
        assert cap.ok, (key, [k.failure for k in cap.kernels])
        prof = Profile(
            source=SourceInfo(path=cap.kernel_file, format="ir"), kernels=pd.DataFrame(), chip=chip, ir=cap.ir
        )
        res = run_rules(prof, kinds=("static",))
        assert res.errors == []
        out[key] = [f for f in res.findings if f.code == "TS507"]
    return out


def test_serial_k_loop_around_gemm_v0_is_flagged(ts507: dict[str, list[Finding]]) -> None:
    (f,) = ts507["gemm"]
    ev = f.evidence
    # A_L1 128x64 fp16 = 16,384 B, B_L1 64x256 fp16 = 32,768 B; 1024 / 64 = 16 K steps
    assert ev["loop_kind"] == "T.serial" and ev["iterations"] == 16
    assert ev["gemm"] == ["A_L1", "B_L1", "C_L0"]
    assert ev["l1_tiles"] == {"A_L1": 16384, "B_L1": 32768}
    # the Ascend C places both at offsets 0 and 16,384 halves: 49,152 B, and a second version doubles it
    assert (ev["l1_bytes"], ev["l1_extra_bytes"], ev["l1_needed_bytes"]) == (49152, 49152, 98304)
    assert ev["l1_capacity_bytes"] == L1 and ev["l0_two_versions"] == {}
    assert f.recommendation == "write the loop as T.Pipelined(16, num_stages=2)"
    src = (OWN / "gemm.py").read_text(encoding="utf-8").splitlines()
    line = f.locations[0].line
    assert line is not None and "T.serial" in src[line - 1]


def test_tiles_that_fit_twice_exactly_are_flagged_and_larger_ones_are_not(
    ts507: dict[str, list[Finding]],
) -> None:
    (f,) = ts507["gemm_l1_full"]
    assert f.evidence["l1_tiles"] == {"A_L1": 131072, "B_L1": 131072}
    assert (f.evidence["l1_needed_bytes"], f.evidence["iterations"]) == (L1, 4)
    assert ts507["gemm_too_big"] == []


def test_pipelined_loop_is_quiet_and_one_stage_is_not(ts507: dict[str, list[Finding]]) -> None:
    assert ts507["pipelined"] == []
    (f,) = ts507["pipelined_1"]
    # a_tile 128x128 fp16 + b_tile 128x128 fp16: 32,768 B each; 2048 / 128 = 16 K steps
    assert f.evidence["loop_kind"] == "T.Pipelined with num_stages=1"
    assert f.evidence["l1_tiles"] == {"a_tile": 32768, "b_tile": 32768}
    assert f.evidence["iterations"] == 16


def test_tiles_versioned_by_hand_are_quiet(ts507: dict[str, list[Finding]]) -> None:
    assert ts507["hand_staged"] == []


def test_real_kernels(ts507: dict[str, list[Finding]]) -> None:
    if "conv" not in ts507:
        pytest.skip(f"{REAL} not available")
    (f,) = ts507["conv"]
    # A_L1 128x64 fp16 = 16,384 B and B_L1 64x256 fp16 = 32,768 B, placed in L1 by tilelang-ascend
    assert f.evidence["l1_tiles"] == {"A_L1": 16384, "B_L1": 32768}
    assert f.evidence["iterations"] == 1024 // 64
    # the pipelined flash attention is quiet, and so is the serial one: its GEMMs start over
    # (init=True) on every step, so no accumulator is carried across the loop
    assert ts507["fa_pipeline"] == [] and ts507["fa_bhsd"] == []
