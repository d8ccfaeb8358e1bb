# from tvm.script import tirx as T

@T.prim_func
def flash_fwd(Q_handle: T.handle, K_handle: T.handle, V_handle: T.handle, Out_handle: T.handle):
    Q = T.match_buffer(Q_handle, (1024, 128), "bfloat16", strides=(128, 1))
    K = T.match_buffer(K_handle, (2048, 128), "bfloat16", strides=(128, 1))
    V = T.match_buffer(V_handle, (2048, 128), "bfloat16", strides=(128, 1))
    Out = T.match_buffer(Out_handle, (1024, 128), strides=(128, 1))
    # with T.sblock("root"):
    for bx in T.thread_binding(8, thread="blockIdx.x"):
        tx: T.int32 = T.launch_thread_idx(0)
        ty: T.int32 = T.launch_thread_idx(1)
        tz: T.int32 = T.launch_thread_idx(2)
        with T.sblock("tilelang_root"):
            T.reads()
            T.writes()
            pv_acc = T.handle("float32", "shared.l0c")
            s_acc = T.handle("float32", "shared.l0c")
            T.sblock_attr({"layout_map": {pv_acc: metadata["tl.AscendFractalLayout"][0], s_acc: metadata["tl.AscendFractalLayout"][1]}})
            q_l1 = T.sblock_alloc_buffer((128, 128), "bfloat16", scope="shared.l1")
            k_l1 = T.sblock_alloc_buffer((128, 128), "bfloat16", scope="shared.l1")
            v_l1 = T.sblock_alloc_buffer((128, 128), "bfloat16", scope="shared.l1")
            p_l1 = T.sblock_alloc_buffer((128, 128), "bfloat16", scope="shared.l1")
            q_l0 = T.sblock_alloc_buffer((128, 128), "bfloat16", scope="shared.l0a")
            k_l0 = T.sblock_alloc_buffer((128, 128), "bfloat16", scope="shared.l0b")
            p_l0 = T.sblock_alloc_buffer((128, 128), "bfloat16", scope="shared.l0a")
            v_l0 = T.sblock_alloc_buffer((128, 128), "bfloat16", scope="shared.l0b")
            s_acc_1 = T.sblock_alloc_buffer((128, 128), data=s_acc, scope="shared.l0c")
            pv_acc_1 = T.sblock_alloc_buffer((128, 128), data=pv_acc, scope="shared.l0c")
            s_ub = T.sblock_alloc_buffer((64, 128), scope="shared.dyn")
            p_ub = T.sblock_alloc_buffer((64, 128), "bfloat16", scope="shared.dyn")
            pv_ub = T.sblock_alloc_buffer((64, 128), scope="shared.dyn")
            o_ub = T.sblock_alloc_buffer((64, 128), scope="shared.dyn")
            row_max = T.sblock_alloc_buffer((64,), scope="shared.dyn")
            row_sum = T.sblock_alloc_buffer((64,), scope="shared.dyn")
            rescale = T.sblock_alloc_buffer((64,), scope="shared.dyn")
            T.ascend_copy(T.region(Q[bx * 128, 0], 1, 128, 128), T.region(q_l1[0, 0], 2, 128, 128))
            with T.sblock("SIMT_VF", no_realize=True):
                T.reads()
                T.writes()
                T.sblock_attr({"tl.vf_source_index": T.int64(0)})
                simtvf_tx = T.launch_thread("threadIdx.x", 64)
                simtvf_ty = T.launch_thread("threadIdx.y", 1)
                simtvf_tz = T.launch_thread("threadIdx.z", 1)
                T.attr("simtvf", "tl.simtvf_scope", 1)
                for r in T.parallel(64):
                    row_max[r] = T.infinity("float32") * T.float32(-1.0)
                    row_sum[r] = T.float32(0.0)
                for r in T.parallel(64):
                    for c in T.parallel(128):
                        o_ub[r, c] = T.float32(0.0)
            for j in T.serial(16, annotations={"num_stages": 2}):
                T.ascend_copy(T.region(K[j * 128, 0], 1, 128, 128), T.region(k_l1[0, 0], 2, 128, 128))
                T.ascend_copy(T.region(q_l1[0, 0], 1, 128, 128), T.region(q_l0[0, 0], 2, 128, 128))
                T.ascend_copy(T.region(k_l1[0, 0], 1, 128, 128), T.region(k_l0[0, 0], 2, 128, 128))
                T.gemm(T.region(q_l0[0, 0], 1, 128, 128), T.region(k_l0[0, 0], 1, 128, 128), T.region(s_acc_1[0, 0], 2, 128, 128), T.bool(False), T.bool(True), 128, 128, 128, 0, T.bool(True), 0, 0, 0)
                T.ascend_copy(T.region(s_acc_1[0, 0], 1, 128, 128), T.region(s_ub[0, 0], 2, 64, 128), dual_dst_ctl=1, l2_cache_ctrl=0)
                with T.sblock("SIMT_VF", no_realize=True):
                    T.reads()
                    T.writes()
                    T.sblock_attr({"tl.vf_source_index": T.int64(1)})
                    s = T.sblock_alloc_buffer((64, 128), scope="local.fragment")
                    m_new = T.sblock_alloc_buffer((64,), scope="local.fragment")
                    l_new = T.sblock_alloc_buffer((64,), scope="local.fragment")
                    simtvf_tx = T.launch_thread("threadIdx.x", 64)
                    simtvf_ty = T.launch_thread("threadIdx.y", 1)
                    simtvf_tz = T.launch_thread("threadIdx.z", 1)
                    T.attr("simtvf", "tl.simtvf_scope", 1)
                    T.ascend_copy(T.region(s_ub[0, 0], 1, 64, 128), T.region(s[0, 0], 2, 64, 128))
                    T.reduce(T.region(s[0, 0], 1, 64, 128), T.region(m_new[0], 2, 64), "max", 1, T.bool(True))
                    for r in T.parallel(64):
                        m_new[r] = T.max(m_new[r] * T.float32(0.088388347648318447), row_max[r])
                        rescale[r] = T.exp(row_max[r] - m_new[r])
                    for r in T.parallel(64):
                        for c in T.parallel(128):
                            s[r, c] = T.exp(s[r, c] * T.float32(0.088388347648318447) - m_new[r])
                    T.reduce(T.region(s[0, 0], 1, 64, 128), T.region(l_new[0], 2, 64), "sum", 1, T.bool(True))
                    for r in T.parallel(64):
                        row_sum[r] = row_sum[r] * rescale[r] + l_new[r]
                        row_max[r] = m_new[r]
                    for r in T.parallel(64):
                        for c in T.parallel(128):
                            p_ub[r, c] = T.Cast("bfloat16", s[r, c])
                T.ascend_copy(T.region(p_ub[0, 0], 1, 64, 128), T.region(p_l1[0, 0], 2, 128, 128), dual_dst_ctl=1, double=T.bool(True), l2_cache_ctrl=0)
                T.ascend_copy(T.region(V[j * 128, 0], 1, 128, 128), T.region(v_l1[0, 0], 2, 128, 128))
                T.ascend_copy(T.region(p_l1[0, 0], 1, 128, 128), T.region(p_l0[0, 0], 2, 128, 128))
                T.ascend_copy(T.region(v_l1[0, 0], 1, 128, 128), T.region(v_l0[0, 0], 2, 128, 128))
                T.gemm(T.region(p_l0[0, 0], 1, 128, 128), T.region(v_l0[0, 0], 1, 128, 128), T.region(pv_acc_1[0, 0], 2, 128, 128), T.bool(False), T.bool(False), 128, 128, 128, 0, T.bool(True), 0, 0, 0)
                T.ascend_copy(T.region(pv_acc_1[0, 0], 1, 128, 128), T.region(pv_ub[0, 0], 2, 64, 128), dual_dst_ctl=1, l2_cache_ctrl=0)
                with T.sblock("SIMT_VF", no_realize=True):
                    T.reads()
                    T.writes()
                    T.sblock_attr({"tl.vf_source_index": T.int64(2)})
                    simtvf_tx = T.launch_thread("threadIdx.x", 64)
                    simtvf_ty = T.launch_thread("threadIdx.y", 1)
                    simtvf_tz = T.launch_thread("threadIdx.z", 1)
                    T.attr("simtvf", "tl.simtvf_scope", 1)
                    for r in T.parallel(64):
                        for c in T.parallel(128):
                            o_ub[r, c] = o_ub[r, c] * rescale[r] + pv_ub[r, c]
            with T.sblock("SIMT_VF", no_realize=True):
                T.reads()
                T.writes()
                T.sblock_attr({"tl.vf_source_index": T.int64(3)})
                simtvf_tx = T.launch_thread("threadIdx.x", 64)
                simtvf_ty = T.launch_thread("threadIdx.y", 1)
                simtvf_tz = T.launch_thread("threadIdx.z", 1)
                T.attr("simtvf", "tl.simtvf_scope", 1)
                for r in T.parallel(64):
                    for c in T.parallel(128):
                        o_ub[r, c] = o_ub[r, c] / row_sum[r]
            T.ascend_copy(T.region(o_ub[0, 0], 1, 64, 128), T.region(Out[bx * 128, 0], 2, 128, 128), dual_dst_ctl=1, double=T.bool(True), l2_cache_ctrl=0)

# Metadata omitted. Use show_meta=True in script() method to show it.