"""C = A + B on the Vector unit for tilelang-ascend (A2/A3 = 910B), its tile sizes in a dataclass
the way larger kernels take their tilings (`tiling=Tiling(block_M=32)`):

    tilescope lint sample_traces/kernels/a2/vector_add_tiling.py -p tiling.block_M=32

Footprint by hand: three UB tiles of (block_M / 2) x block_N fp32 per vector sub-core; the
defaults (64 x 256) give 3 x 32,768 B = 98,304 B, block_M=32 gives 3 x 16,384 B = 49,152 B.
"""

from dataclasses import dataclass

import tilelang
import tilelang.language as T

VEC_NUM = 2  # vector sub-cores per AI core on A2/A3


@dataclass(frozen=True)
class Tiling:
    block_M: int = 64
    block_N: int = 256


@tilelang.jit(out_idx=[-1])
def vector_add(M=1024, N=1024, tiling: Tiling = Tiling(), dtype="float"):  # noqa: B008
    block_M, block_N = tiling.block_M, tiling.block_N
    m_num = M // block_M
    n_num = N // block_N
    rows = block_M // VEC_NUM

    @T.prim_func
    def vadd(
        A: T.Tensor((M, N), dtype),
        B: T.Tensor((M, N), dtype),
        C: T.Tensor((M, N), dtype),
    ):
        with T.Kernel(m_num * n_num, is_npu=True) as (cid, vid):
            bx = cid // n_num
            by = cid % n_num
            a_ub = T.alloc_ub((rows, block_N), dtype)
            b_ub = T.alloc_ub((rows, block_N), dtype)
            c_ub = T.alloc_ub((rows, block_N), dtype)
            with T.Scope("V"):
                T.copy(A[bx * block_M + vid * rows, by * block_N], a_ub)
                T.copy(B[bx * block_M + vid * rows, by * block_N], b_ub)
                T.barrier_all()
                T.tile.add(c_ub, a_ub, b_ub)
                T.barrier_all()
                T.copy(c_ub, C[bx * block_M + vid * rows, by * block_N])

    return vadd
