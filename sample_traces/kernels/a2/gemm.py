"""C[M, N] = A[M, K] @ B[K, N] on the Cube unit, written for tilelang-ascend (A2/A3 = 910B).

One output tile per AI core: GM -> L1 (A_L1, B_L1) -> `T.gemm_v0` -> L0C -> GM, the K loop a plain
`T.serial` with `T.barrier_all()` between copy and multiply — the idiom of the tilelang-ascend
examples. tilescope lowers it through tilelang-ascend (scripts/setup-tilelang-ascend.sh):

    tilescope lint sample_traces/kernels/a2/gemm.py

Footprint by hand (defaults): A_L1 128x64 fp16 = 16,384 B, B_L1 64x256 fp16 = 32,768 B (L1
49,152 B of 512 KiB); C_L0 128x256 fp32 = 131,072 B (all of a 910B's 128 KiB L0C).
"""

import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[-1])
def matmul(M=1024, N=1024, K=1024, block_M=128, block_N=256, K_L1=64, dtype="float16", accum_dtype="float"):
    m_num = M // block_M
    n_num = N // block_N

    @T.prim_func
    def gemm_kernel(
        A: T.Tensor((M, K), dtype),
        B: T.Tensor((K, N), dtype),
        C: T.Tensor((M, N), dtype),
    ):
        with T.Kernel(m_num * n_num, is_npu=True) as (cid, _):
            bx = cid // n_num
            by = cid % n_num
            A_L1 = T.alloc_L1((block_M, K_L1), dtype)
            B_L1 = T.alloc_L1((K_L1, block_N), dtype)
            C_L0 = T.alloc_L0C((block_M, block_N), accum_dtype)
            with T.Scope("C"):
                for k in T.serial(T.ceildiv(K, K_L1)):
                    T.copy(A[bx * block_M, k * K_L1], A_L1)
                    T.copy(B[k * K_L1, by * block_N], B_L1)
                    T.barrier_all()
                    T.gemm_v0(A_L1, B_L1, C_L0, init=(k == 0))
                    T.barrier_all()
                T.copy(C_L0, C[bx * block_M, by * block_N])

    return gemm_kernel
