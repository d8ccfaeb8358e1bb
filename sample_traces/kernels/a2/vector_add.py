"""C = A + B on the Vector unit for tilelang-ascend (A2/A3 = 910B): each AI core's two vector
sub-cores (`vid`) take half of a block_M x block_N tile each.

    tilescope lint sample_traces/kernels/a2/vector_add.py

Footprint by hand (defaults): three UB tiles of 32x256 fp32 = 32,768 B each, 98,304 B per AIV.
"""

import tilelang
import tilelang.language as T

VEC_NUM = 2  # vector sub-cores per AI core on A2/A3


@tilelang.jit(out_idx=[-1])
def vector_add(M=1024, N=1024, block_M=64, block_N=256, dtype="float"):
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
