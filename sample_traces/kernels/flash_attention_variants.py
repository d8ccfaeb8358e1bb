"""Flash-attention forward with the switches issue #14 item 4 is about (TileLang 0.1.15 Ascend dialect).

The kernel of flash_attention.py, single head, with four knobs that each turn one static check on:

- `seq_q` and `block_M`: the grid is `seq_q // block_M` query tiles (one per AI core), so
  `seq_q=1000` drops rows 896..999 (grid-misses-problem, TS509) and `seq_q=1024` gives 8 blocks
  on 24 cores (partial-core-wave, TS508); `seq_q=3072` fills 24 cores exactly.
- `state_dtype`: the running row sum and the output accumulator (`row_sum`, `o_ub`) carried across
  the KV loop; "float16" rounds the running state every iteration (TS510).
- `hoist_q`: copy Q from L1 to L0A once before the KV loop (True) or on every iteration (False,
  loop-invariant copy, TS511).

Defaults are the clean configuration.
"""

import tilelang.ascend.language as T


def flash_attention_variant(seq_q=3072, seq_kv=2048, head_dim=128, block_M=128, block_N=128,
                            num_stages=2, state_dtype="float32", hoist_q=True,
                            dtype="bfloat16", accum_dtype="float32"):
    half = block_M // 2
    sm_scale = head_dim ** -0.5

    @T.prim_func
    def flash_variant(Q: T.Tensor((seq_q, head_dim), dtype), K: T.Tensor((seq_kv, head_dim), dtype),
                      V: T.Tensor((seq_kv, head_dim), dtype),
                      Out: T.Tensor((seq_q, head_dim), accum_dtype)):
        with T.Kernel(seq_q // block_M) as qb:
            q_l1 = T.alloc_l1((block_M, head_dim), dtype)
            k_l1 = T.alloc_l1((block_N, head_dim), dtype)
            v_l1 = T.alloc_l1((block_N, head_dim), dtype)
            p_l1 = T.alloc_l1((block_M, block_N), dtype)
            q_l0 = T.alloc_l0a((block_M, head_dim), dtype)
            k_l0 = T.alloc_l0b((block_N, head_dim), dtype)
            p_l0 = T.alloc_l0a((block_M, block_N), dtype)
            v_l0 = T.alloc_l0b((block_N, head_dim), dtype)
            s_acc = T.alloc_l0c((block_M, block_N), accum_dtype)
            pv_acc = T.alloc_l0c((block_M, head_dim), accum_dtype)
            s_ub = T.alloc_shared((half, block_N), accum_dtype)
            p_ub = T.alloc_shared((half, block_N), dtype)
            pv_ub = T.alloc_shared((half, head_dim), accum_dtype)
            o_ub = T.alloc_shared((half, head_dim), state_dtype)
            o_out = T.alloc_shared((half, head_dim), accum_dtype)
            row_max = T.alloc_shared((half,), accum_dtype)
            row_sum = T.alloc_shared((half,), state_dtype)
            rescale = T.alloc_shared((half,), accum_dtype)

            T.copy(Q[qb * block_M:(qb + 1) * block_M, 0:head_dim], q_l1)
            if hoist_q:
                T.copy(q_l1, q_l0)
            with T.SimtVF(threads=64):
                for r in T.Parallel(half):
                    row_max[r] = -T.infinity(accum_dtype)
                    row_sum[r] = T.cast(0, state_dtype)
                for r, c in T.Parallel(half, head_dim):
                    o_ub[r, c] = T.cast(0, state_dtype)
            for j in T.Pipelined(seq_kv // block_N, num_stages=num_stages):
                T.copy(K[j * block_N:(j + 1) * block_N, 0:head_dim], k_l1)
                if not hoist_q:
                    T.copy(q_l1, q_l0)
                T.copy(k_l1, k_l0)
                T.gemm(q_l0, k_l0, s_acc, transpose_B=True, clear_accum=True)
                T.dual_copy(s_acc, s_ub)
                with T.SimtVF(threads=64):
                    s = T.alloc_fragment((half, block_N), accum_dtype)
                    m_new = T.alloc_fragment((half,), accum_dtype)
                    l_new = T.alloc_fragment((half,), accum_dtype)
                    T.copy(s_ub, s)
                    T.reduce_max(s, m_new, dim=1)
                    for r in T.Parallel(half):
                        m_new[r] = T.max(m_new[r] * sm_scale, row_max[r])
                        rescale[r] = T.exp(row_max[r] - m_new[r])
                    for r, c in T.Parallel(half, block_N):
                        s[r, c] = T.exp(s[r, c] * sm_scale - m_new[r])
                    T.reduce_sum(s, l_new, dim=1)
                    for r in T.Parallel(half):
                        row_sum[r] = T.cast(T.cast(row_sum[r], accum_dtype) * rescale[r] + l_new[r],
                                            state_dtype)
                        row_max[r] = m_new[r]
                    for r, c in T.Parallel(half, block_N):
                        p_ub[r, c] = T.cast(s[r, c], dtype)
                T.dual_copy(p_ub, p_l1)
                T.copy(V[j * block_N:(j + 1) * block_N, 0:head_dim], v_l1)
                T.copy(p_l1, p_l0)
                T.copy(v_l1, v_l0)
                T.gemm(p_l0, v_l0, pv_acc, clear_accum=True)
                T.dual_copy(pv_acc, pv_ub)
                with T.SimtVF(threads=64):
                    for r, c in T.Parallel(half, head_dim):
                        o_ub[r, c] = T.cast(T.cast(o_ub[r, c], accum_dtype) * rescale[r] + pv_ub[r, c],
                                            state_dtype)
            with T.SimtVF(threads=64):
                for r, c in T.Parallel(half, head_dim):
                    o_out[r, c] = T.cast(o_ub[r, c], accum_dtype) / T.cast(row_sum[r], accum_dtype)
            T.dual_copy(o_out, Out[qb * block_M:(qb + 1) * block_M, 0:head_dim])

    return flash_variant
