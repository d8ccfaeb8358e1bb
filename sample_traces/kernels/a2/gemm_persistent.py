"""Persistent GEMM for tilelang-ascend (A2/A3 = 910B): a grid of `cores` AI cores walks every
output tile with `T.Persistent`, so a problem of more tiles than cores runs in waves on one launch.

    tilescope lint sample_traces/kernels/a2/gemm_persistent.py -p M=2048

Footprint by hand (defaults): A_L1 128x64 fp16 = 16,384 B, B_L1 64x128 fp16 = 16,384 B (L1 32,768
B); C_L0 128x128 fp32 = 65,536 B.
"""

import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[-1])
def persistent_matmul(
    M=1024, N=1024, K=512, block_M=128, block_N=128, K_L1=64, cores=24, dtype="float16", accum_dtype="float"
):
    @T.prim_func
    def persistent_gemm(
        A: T.Tensor((M, K), dtype),
        B: T.Tensor((K, N), dtype),
        C: T.Tensor((M, N), dtype),
    ):
        with T.Kernel(cores, is_npu=True) as (cid, _):
            A_L1 = T.alloc_L1((block_M, K_L1), dtype)
            B_L1 = T.alloc_L1((K_L1, block_N), dtype)
            C_L0 = T.alloc_L0C((block_M, block_N), accum_dtype)
            with T.Scope("C"):
                for bx, by in T.Persistent([T.ceildiv(M, block_M), T.ceildiv(N, block_N)], cores, cid):
                    for k in T.serial(T.ceildiv(K, K_L1)):
                        T.copy(A[bx * block_M, k * K_L1], A_L1)
                        T.copy(B[k * K_L1, by * block_N], B_L1)
                        T.barrier_all()
                        T.gemm_v0(A_L1, B_L1, C_L0, init=(k == 0))
                        T.barrier_all()
                    T.copy(C_L0, C[bx * block_M, by * block_N])

    return persistent_gemm
