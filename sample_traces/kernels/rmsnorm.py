"""RMSNorm over rows, y = x / sqrt(mean(x^2) + eps) * w (TileLang 0.1.15 Ascend dialect, Vector only)."""

import tilelang.ascend.language as T


def rmsnorm(rows=4096, hidden=4096, block_rows=8, cores=48, eps=1e-6, dtype="float32"):
    steps = rows // (block_rows * cores)

    @T.prim_func
    def rmsnorm_fwd(X: T.Tensor((rows, hidden), dtype), W: T.Tensor((hidden,), dtype),
                    Y: T.Tensor((rows, hidden), dtype)):
        with T.Kernel(cores) as b:
            x_ub = T.alloc_shared((block_rows, hidden), dtype)
            w_ub = T.alloc_shared((hidden,), dtype)
            T.copy(W[0], w_ub)
            for s in T.Pipelined(steps, num_stages=2):
                T.copy(X[(b * steps + s) * block_rows, 0], x_ub)
                with T.SimtVF(threads=64):
                    sq = T.alloc_fragment((block_rows, hidden), dtype)
                    ss = T.alloc_fragment((block_rows,), dtype)
                    for r, c in T.Parallel(block_rows, hidden):
                        sq[r, c] = x_ub[r, c] * x_ub[r, c]
                    T.reduce_sum(sq, ss, dim=1)
                    for r, c in T.Parallel(block_rows, hidden):
                        x_ub[r, c] = x_ub[r, c] / T.sqrt(ss[r] / hidden + eps) * w_ub[c]
                T.copy(x_ub, Y[(b * steps + s) * block_rows, 0])

    return rmsnorm_fwd
