"""Batched GEMM for tilelang-ascend (A2/A3 = 910B): C[b] = A[b] @ B[b], the batch folded into the
1-D grid (batch x row tiles x column tiles blocks).

    tilescope lint sample_traces/kernels/a2/batch_gemm.py

Footprint by hand (defaults): A_L1 64x128 fp16 = 16,384 B, B_L1 128x128 fp16 = 32,768 B (L1
49,152 B); C_L0 64x128 fp32 = 32,768 B. Grid 4 x 4 x 4 = 64 blocks.
"""

import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[-1])
def batch_matmul(batch=4, M=256, N=512, K=256, block_M=64, block_N=128, K_L1=128, dtype="float16", accum_dtype="float"):
    m_num = M // block_M
    n_num = N // block_N

    @T.prim_func
    def batch_gemm(
        A: T.Tensor((batch, M, K), dtype),
        B: T.Tensor((batch, K, N), dtype),
        C: T.Tensor((batch, M, N), dtype),
    ):
        with T.Kernel(batch * m_num * n_num, is_npu=True) as (cid, _):
            b = cid // (m_num * n_num)
            bx = cid % (m_num * n_num) // n_num
            by = cid % n_num
            A_L1 = T.alloc_L1((block_M, K_L1), dtype)
            B_L1 = T.alloc_L1((K_L1, block_N), dtype)
            C_L0 = T.alloc_L0C((block_M, block_N), accum_dtype)
            with T.Scope("C"):
                for k in T.serial(T.ceildiv(K, K_L1)):
                    T.copy(A[b, bx * block_M, k * K_L1], A_L1)
                    T.copy(B[b, k * K_L1, by * block_N], B_L1)
                    T.barrier_all()
                    T.gemm_v0(A_L1, B_L1, C_L0, init=(k == 0))
                    T.barrier_all()
                T.copy(C_L0, C[b, bx * block_M, by * block_N])

    return batch_gemm
