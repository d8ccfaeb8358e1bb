"""Tiled Cube GEMM, C[M, N] = A[M, K] @ B[K, N] (TileLang 0.1.15 Ascend dialect).

GM -> L1 -> L0A/L0B -> L0C -> GM. Tile sizes, pipeline depth and the accumulator dtype are
parameters so `tilescope lint` can try them (see README.md).
"""

import tilelang.ascend.language as T


def matmul(M=4096, N=4096, K=4096, block_M=128, block_N=128, block_K=64, num_stages=2,
           cores=24, dtype="float16", accum_dtype="float32"):
    n_col_tiles = T.ceildiv(N, block_N)
    n_tiles = T.ceildiv(M, block_M) * n_col_tiles

    @T.prim_func
    def matmul_kernel(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype),
                      C: T.Tensor((M, N), accum_dtype)):
        with T.Kernel(cores) as core:
            a_l1 = T.alloc_l1((block_M, block_K), dtype)
            b_l1 = T.alloc_l1((block_K, block_N), dtype)
            a_l0 = T.alloc_l0a((block_M, block_K), dtype)
            b_l0 = T.alloc_l0b((block_K, block_N), dtype)
            c_l0 = T.alloc_l0c((block_M, block_N), accum_dtype)
            for t in T.Persistent([n_tiles], cores, core):
                r0 = t // n_col_tiles * block_M
                c0 = t % n_col_tiles * block_N
                for kk in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                    T.copy(A[r0, kk * block_K], a_l1)
                    T.copy(B[kk * block_K, c0], b_l1)
                    T.copy(a_l1, a_l0)
                    T.copy(b_l1, b_l0)
                    T.gemm(a_l0, b_l0, c_l0, clear_accum=(kk == 0))
                T.copy(c_l0, C[r0, c0])

    return matmul_kernel
