"""Tiled Cube GEMM whose K loop is `T.serial` or `T.Pipelined` (TileLang 0.1.15 Ascend dialect).

The tilelang-ascend idiom `for k in T.serial(loop_k)` around the GM -> L1 loads and the GEMM, in
the 0.1.15 dialect: with `pipelined=False` the load of step k+1 cannot overlap step k although L1
has room for two versions of both tiles (k-loop-not-pipelined, TS507); `pipelined=True` is the fix.
"""

import tilelang.ascend.language as T


def matmul_k_loop(M=2048, N=2048, K=2048, block_M=128, block_N=128, block_K=64, pipelined=False,
                  cores=24, dtype="float16", accum_dtype="float32"):
    n_col_tiles = N // block_N
    n_tiles = (M // block_M) * n_col_tiles
    k_tiles = K // block_K

    @T.prim_func
    def matmul_k(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype),
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
                if pipelined:
                    for kk in T.Pipelined(k_tiles, num_stages=2):
                        T.copy(A[r0, kk * block_K], a_l1)
                        T.copy(B[kk * block_K, c0], b_l1)
                        T.copy(a_l1, a_l0)
                        T.copy(b_l1, b_l0)
                        T.gemm(a_l0, b_l0, c_l0, clear_accum=(kk == 0))
                else:
                    for kk in T.serial(k_tiles):
                        T.copy(A[r0, kk * block_K], a_l1)
                        T.copy(B[kk * block_K, c0], b_l1)
                        T.copy(a_l1, a_l0)
                        T.copy(b_l1, b_l0)
                        T.gemm(a_l0, b_l0, c_l0, clear_accum=(kk == 0))
                T.copy(c_l0, C[r0, c0])

    return matmul_k
