"""TS507 finds the K loop in the loop structure (issue #24): with L1 K tiles and L0 sub-K steps
(`for k ...: GM -> L1; for kk ...: L1 -> L0A/L0B, T.gemm`) the loop to pipeline is the outer one,
whose GM -> L1 loads the Cube waits for; before, only the GEMM's innermost serial loop was looked
at, and it loads nothing from GM. Lowered by tilelang 0.1.15's Ascend backend (the 950 dialect);
tests/ir/test_ts507_tilelang_ascend.py has the tilelang-ascend kernels. The kernel is written for
this test."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from tilescope.chips import get_chip
from tilescope.engine import run_rules
from tilescope.findings import Finding
from tilescope.profile import Profile, SourceInfo

pytestmark = [pytest.mark.tilelang, pytest.mark.slow]

CHIP = get_chip("910B2")  # L1 512 KiB, L0A/L0B 64 KiB

NESTED = '''
import tilelang.ascend.language as T


def nested_k(M=1024, N=1024, K=4096, block_M=128, block_N=128, K_L1=256, block_K=64, pipelined=False,
             dtype="float16", accum_dtype="float32"):
    n_num = N // block_N

    @T.prim_func
    def kernel(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), accum_dtype)):
        with T.Kernel(M // block_M * n_num) as cid:
            row = cid // n_num * block_M
            col = cid % n_num * block_N
            a_l1 = T.alloc_l1((block_M, K_L1), dtype)
            b_l1 = T.alloc_l1((K_L1, block_N), dtype)
            a_l0 = T.alloc_l0a((block_M, block_K), dtype)
            b_l0 = T.alloc_l0b((block_K, block_N), dtype)
            acc = T.alloc_l0c((block_M, block_N), accum_dtype)
            if pipelined:
                for k in T.Pipelined(K // K_L1, num_stages=2):
                    T.copy(A[row, k * K_L1], a_l1)
                    T.copy(B[k * K_L1, col], b_l1)
                    for kk in T.serial(K_L1 // block_K):
                        T.copy(a_l1[0, kk * block_K], a_l0)
                        T.copy(b_l1[kk * block_K, 0], b_l0)
                        T.gemm(a_l0, b_l0, acc, clear_accum=(k == 0 and kk == 0))
            else:
                for k in T.serial(K // K_L1):
                    T.copy(A[row, k * K_L1], a_l1)
                    T.copy(B[k * K_L1, col], b_l1)
                    for kk in T.serial(K_L1 // block_K):
                        T.copy(a_l1[0, kk * block_K], a_l0)
                        T.copy(b_l1[kk * block_K, 0], b_l0)
                        T.gemm(a_l0, b_l0, acc, clear_accum=(k == 0 and kk == 0))
            T.copy(acc, C[row, col])

    return kernel
'''


def _ts507(path: Path, **params: Any) -> list[Finding]:
    from tilescope.ir.capture import capture_ir

    cap = capture_ir(str(path), params, CHIP)
    assert cap.ok, [k.failure for k in cap.kernels]
    prof = Profile(source=SourceInfo(path=path, format="ir"), kernels=pd.DataFrame(), chip=CHIP, ir=cap.ir)
    res = run_rules(prof, kinds=("static",))
    assert res.errors == []
    return [f for f in res.findings if f.code == "TS507"]


def test_outer_k_loop_of_l1_tiles_is_the_one_flagged(tmp_path: Path) -> None:
    pytest.importorskip("tilelang")
    path = tmp_path / "nested_k.py"
    path.write_text(NESTED, encoding="utf-8")
    (f,) = _ts507(path)
    ev = f.evidence
    # the outer loop: 4096 / 256 = 16 L1 K tiles of a_l1 128x256 and b_l1 256x128 fp16 (65,536 B each)
    assert (ev["loop"], ev["iterations"]) == ("k", 16)
    assert ev["l1_tiles"] == {"a_l1": 65536, "b_l1": 65536}
    assert ev["l1_extra_bytes"] == 131072 and ev["l1_needed_bytes"] <= ev["l1_capacity_bytes"]
    # the L0 tiles the loop fills (128x64 and 64x128 fp16, 16,384 B each) fit twice in 64 KiB
    assert {hw: r["extra_bytes"] for hw, r in ev["l0_two_versions"].items()} == {"L0A": 16384, "L0B": 16384}
    src = NESTED.splitlines()
    line = f.locations[0].line
    assert line is not None and "for k in T.serial(K // K_L1)" in src[line - 1]
    assert _ts507(path, pipelined=True) == []
