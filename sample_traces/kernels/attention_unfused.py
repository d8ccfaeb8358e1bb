"""Unfused single-head attention: QK^T, softmax and PV as three kernels (TileLang 0.1.15 Ascend dialect).

Scores S and probabilities P are written to GM by one kernel and read back by the next — the static
picture of an unfused chain. `tilescope lint attention_unfused.py` reports TS505 twice (S and P);
flash_attention.py keeps both on chip.
"""

import tilelang.ascend.language as T


def _qk_scores(seq_q, seq_kv, head_dim, block_M, block_N, dtype, accum_dtype):
    n_col = seq_kv // block_N

    @T.prim_func
    def qk_scores(Q: T.Tensor((seq_q, head_dim), dtype), K: T.Tensor((seq_kv, head_dim), dtype),
                  S: T.Tensor((seq_q, seq_kv), accum_dtype)):
        with T.Kernel(seq_q // block_M * n_col) as t:
            q_l1 = T.alloc_l1((block_M, head_dim), dtype)
            k_l1 = T.alloc_l1((block_N, head_dim), dtype)
            q_l0 = T.alloc_l0a((block_M, head_dim), dtype)
            k_l0 = T.alloc_l0b((block_N, head_dim), dtype)
            s_acc = T.alloc_l0c((block_M, block_N), accum_dtype)
            T.copy(Q[t // n_col * block_M, 0], q_l1)
            T.copy(K[t % n_col * block_N, 0], k_l1)
            T.copy(q_l1, q_l0)
            T.copy(k_l1, k_l0)
            T.gemm(q_l0, k_l0, s_acc, transpose_B=True, clear_accum=True)
            T.copy(s_acc, S[t // n_col * block_M, t % n_col * block_N])

    return qk_scores


def _softmax(seq_q, seq_kv, rows, dtype, accum_dtype):
    @T.prim_func
    def softmax(S: T.Tensor((seq_q, seq_kv), accum_dtype), P: T.Tensor((seq_q, seq_kv), dtype)):
        with T.Kernel(seq_q // rows) as b:
            s_ub = T.alloc_shared((rows, seq_kv), accum_dtype)
            p_ub = T.alloc_shared((rows, seq_kv), dtype)
            T.copy(S[b * rows, 0], s_ub)
            with T.SimtVF(threads=64):
                s = T.alloc_fragment((rows, seq_kv), accum_dtype)
                m = T.alloc_fragment((rows,), accum_dtype)
                total = T.alloc_fragment((rows,), accum_dtype)
                T.copy(s_ub, s)
                T.reduce_max(s, m, dim=1)
                for r, c in T.Parallel(rows, seq_kv):
                    s[r, c] = T.exp(s[r, c] - m[r])
                T.reduce_sum(s, total, dim=1)
                for r, c in T.Parallel(rows, seq_kv):
                    p_ub[r, c] = T.cast(s[r, c] / total[r], dtype)
            T.copy(p_ub, P[b * rows, 0])

    return softmax


def _pv(seq_q, seq_kv, head_dim, block_M, block_K, dtype, accum_dtype):
    @T.prim_func
    def pv(P: T.Tensor((seq_q, seq_kv), dtype), V: T.Tensor((seq_kv, head_dim), dtype),
           Out: T.Tensor((seq_q, head_dim), accum_dtype)):
        with T.Kernel(seq_q // block_M) as b:
            p_l1 = T.alloc_l1((block_M, block_K), dtype)
            v_l1 = T.alloc_l1((block_K, head_dim), dtype)
            p_l0 = T.alloc_l0a((block_M, block_K), dtype)
            v_l0 = T.alloc_l0b((block_K, head_dim), dtype)
            o_acc = T.alloc_l0c((block_M, head_dim), accum_dtype)
            for kk in T.Pipelined(seq_kv // block_K, num_stages=2):
                T.copy(P[b * block_M, kk * block_K], p_l1)
                T.copy(V[kk * block_K, 0], v_l1)
                T.copy(p_l1, p_l0)
                T.copy(v_l1, v_l0)
                T.gemm(p_l0, v_l0, o_acc, clear_accum=(kk == 0))
            T.copy(o_acc, Out[b * block_M, 0])

    return pv


def attention_unfused(seq_q=1024, seq_kv=1024, head_dim=128, block_M=128, block_N=128, block_K=128,
                      softmax_rows=8, dtype="float16", accum_dtype="float32"):
    """The chain in launch order: (qk_scores, softmax, pv)."""
    return (_qk_scores(seq_q, seq_kv, head_dim, block_M, block_N, dtype, accum_dtype),
            _softmax(seq_q, seq_kv, softmax_rows, dtype, accum_dtype),
            _pv(seq_q, seq_kv, head_dim, block_M, block_K, dtype, accum_dtype))
