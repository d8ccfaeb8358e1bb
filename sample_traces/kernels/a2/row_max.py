"""Row maximum B[i] = max_j A[i, j] on the Vector unit for tilelang-ascend (A2/A3 = 910B): one
block_M-row slab per AI core, half of it per vector sub-core, reduced in UB with `T.reduce_max`.

    tilescope lint sample_traces/kernels/a2/row_max.py

Footprint by hand (defaults): a_ub 16x1024 fp32 = 65,536 B, b_ub 16 fp32 = 64 B (UB 65,600 B
declared). tilelang-ascend's `T.reduce_max` adds a scratch buffer as large as its input (`tmp_ub`,
65,536 B in the Ascend C): 131,136 B placed. With `-p block_M=64` the placed UB is 262,272 B, over
a 910B's 192 KiB although the declared buffers (131,200 B) fit — TS501 says so.
"""

import tilelang
import tilelang.language as T

VEC_NUM = 2


@tilelang.jit(out_idx=[-1])
def row_max(M=4096, N=1024, block_M=32, dtype="float"):
    rows = block_M // VEC_NUM

    @T.prim_func
    def reduce_rows(A: T.Tensor((M, N), dtype), B: T.Tensor((M,), dtype)):
        with T.Kernel(M // block_M, is_npu=True) as (cid, vid):
            a_ub = T.alloc_ub((rows, N), dtype)
            b_ub = T.alloc_ub((rows,), dtype)
            base = cid * block_M + vid * rows
            with T.Scope("V"):
                T.copy(A[base : base + rows, :], a_ub)
                T.barrier_all()
                T.reduce_max(a_ub, b_ub, dim=-1)
                T.barrier_all()
                T.copy(b_ub, B[base : base + rows])

    return reduce_rows
