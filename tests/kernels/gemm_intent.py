# mypy: ignore-errors
# (TileLang annotations such as T.Tensor((M, K), dtype) are calls, not types)
"""Small GEMMs in TileLang 0.1.15's Ascend dialect (950) for the static rules' firing and quiet pairs.

Each builder is the plain form of an idiom real 950 kernels use (tile-ai/tilelang `examples/ascend`):
an explicit `T.annotate_buffer_versions` depth, a split-K grid whose blocks each accumulate a K share,
and tilings on problems smaller than the usual tile. Operands stay in L1 (the NT L1-operand GEMM).
"""

import tilelang.ascend.language as T


def gemm(M=1024, N=1024, K=1024, block_M=128, block_N=128, block_K=64, num_stages=2, versions=0,
         dtype="float16", accum_dtype="float32"):
    """C[M, N] = A[M, K] @ B[N, K]^T, one block per output tile; versions > 0 fixes both L1
    operands' depth with T.annotate_buffer_versions (the author's explicit choice)."""
    n_tiles = T.ceildiv(N, block_N)
    tiles = T.ceildiv(M, block_M) * n_tiles

    @T.prim_func
    def gemm_kernel(A: T.Tensor((M, K), dtype), B: T.Tensor((N, K), dtype),
                    C: T.Tensor((M, N), accum_dtype)):
        with T.Kernel(tiles) as bx:
            a_l1 = T.alloc_l1((block_M, block_K), dtype)
            b_l1 = T.alloc_l1((block_N, block_K), dtype)
            c_l0 = T.alloc_l0c((block_M, block_N), accum_dtype)
            if versions:
                T.annotate_buffer_versions({a_l1: versions, b_l1: versions})
            m = bx // n_tiles * block_M
            n = bx % n_tiles * block_N
            for kt in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                T.copy(A[m, kt * block_K], a_l1)
                T.copy(B[n, kt * block_K], b_l1)
                T.gemm(a_l1, b_l1, c_l0, transpose_B=True, clear_accum=(kt == 0))
            T.copy(c_l0, C[m, n])

    return gemm_kernel


def gemm_splitk(M=256, N=256, K=8192, block_M=256, block_N=256, block_K=256, split_k=32, num_stages=2,
                dtype="float16", accum_dtype="float32"):
    """Split-K: block bx accumulates K share bx % split_k of tile bx // split_k and adds it to C
    atomically; with K / block_K == split_k every block's K loop has one iteration."""
    n_tiles = T.ceildiv(N, block_N)
    tiles = T.ceildiv(M, block_M) * n_tiles
    k_tiles = K // block_K // split_k

    @T.prim_func
    def splitk_kernel(A: T.Tensor((M, K), dtype), B: T.Tensor((N, K), dtype),
                      C: T.Tensor((M, N), accum_dtype)):
        with T.Kernel(tiles * split_k) as bx:
            a_l1 = T.alloc_l1((block_M, block_K), dtype)
            b_l1 = T.alloc_l1((block_N, block_K), dtype)
            c_l0 = T.alloc_l0c((block_M, block_N), accum_dtype)
            split = bx % split_k
            m = bx // split_k // n_tiles * block_M
            n = bx // split_k % n_tiles * block_N
            for kt in T.Pipelined(k_tiles, num_stages=num_stages):
                T.copy(A[m, (split * k_tiles + kt) * block_K], a_l1)
                T.copy(B[n, (split * k_tiles + kt) * block_K], b_l1)
                T.gemm(a_l1, b_l1, c_l0, transpose_B=True, clear_accum=(kt == 0))
            T.set_atomic("add", accum_dtype)
            T.copy(c_l0, C[m, n])
            T.set_atomic_none()

    return splitk_kernel
