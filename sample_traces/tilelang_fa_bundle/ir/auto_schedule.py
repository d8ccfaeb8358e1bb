# from tvm.script import ir as I
# from tvm.script import tirx as T

@I.ir_module
class Module:
    @T.prim_func
    def flash_fwd(Q_handle: T.handle, K_handle: T.handle, V_handle: T.handle, Out_handle: T.handle):
        T.func_attr({"target": T.target({"host": {"keys": ["cpu"], "kind": "c", "tag": ""}, "keys": ["ascend"], "kind": "ascend", "launch_grid_only": True, "max_vector_bits": 64, "supports_kernel_status_return": False, "supports_vector_predicate": True, "tag": ""})})
        Q = T.match_buffer(Q_handle, (1024, 128), "bfloat16", strides=(128, 1))
        K = T.match_buffer(K_handle, (2048, 128), "bfloat16", strides=(128, 1))
        V = T.match_buffer(V_handle, (2048, 128), "bfloat16", strides=(128, 1))
        Out = T.match_buffer(Out_handle, (1024, 128), strides=(128, 1))
        with T.sblock("root"):
            T.reads()
            T.writes()
            pv_acc = T.Buffer((128, 128), scope="shared.l0c")
            s_acc = T.Buffer((128, 128), scope="shared.l0c")
            q_l1 = T.Buffer((128, 128), "bfloat16", scope="shared.l1")
            k_l1 = T.Buffer((128, 128), "bfloat16", scope="shared.l1")
            q_l0 = T.Buffer((128, 128), "bfloat16", scope="shared.l0a")
            k_l0 = T.Buffer((128, 128), "bfloat16", scope="shared.l0b")
            p_l1 = T.Buffer((128, 128), "bfloat16", scope="shared.l1")
            v_l1 = T.Buffer((128, 128), "bfloat16", scope="shared.l1")
            p_l0 = T.Buffer((128, 128), "bfloat16", scope="shared.l0a")
            v_l0 = T.Buffer((128, 128), "bfloat16", scope="shared.l0b")
            m_new = T.Buffer((64,), scope="local.fragment")
            l_new = T.Buffer((64,), scope="local.fragment")
            s = T.Buffer((64, 128), scope="local.fragment")
            T.sblock_attr({"layout_map": {pv_acc: metadata["tl.AscendFractalLayout"][0], s_acc: metadata["tl.AscendFractalLayout"][1], q_l1: metadata["tl.AscendFractalLayout"][2], k_l1: metadata["tl.AscendFractalLayout"][3], q_l0: metadata["tl.AscendFractalLayout"][4], k_l0: metadata["tl.AscendFractalLayout"][5], p_l1: metadata["tl.AscendFractalLayout"][6], v_l1: metadata["tl.AscendFractalLayout"][7], p_l0: metadata["tl.AscendFractalLayout"][8], v_l0: metadata["tl.AscendFractalLayout"][9], m_new: metadata["tl.Fragment"][0], l_new: metadata["tl.Fragment"][1], s: metadata["tl.Fragment"][2]}})
            bx = T.launch_thread("blockIdx.x", 8)
            sid = T.launch_thread("cthread", 2)
            with T.sblock("tilelang_root"):
                T.reads()
                T.writes()
                s_ub = T.handle("float32", "shared.dyn")
                rescale = T.handle("float32", "shared.dyn")
                p_ub = T.handle("bfloat16", "shared.dyn")
                nz_scratch = T.handle("bfloat16", "shared.dyn")
                pv_ub = T.handle("float32", "shared.dyn")
                T.sblock_attr({"layout_map": {pv_acc: metadata["tl.AscendFractalLayout"][0], s_acc: metadata["tl.AscendFractalLayout"][1], q_l1: metadata["tl.AscendFractalLayout"][2], k_l1: metadata["tl.AscendFractalLayout"][3], q_l0: metadata["tl.AscendFractalLayout"][4], k_l0: metadata["tl.AscendFractalLayout"][5], p_l1: metadata["tl.AscendFractalLayout"][6], v_l1: metadata["tl.AscendFractalLayout"][7], p_l0: metadata["tl.AscendFractalLayout"][8], v_l0: metadata["tl.AscendFractalLayout"][9], m_new: metadata["tl.Fragment"][0], l_new: metadata["tl.Fragment"][1], s: metadata["tl.Fragment"][2]}, "tl.buffer_versions_map": {k_l1.data: 1, q_l0.data: 1, k_l0.data: 1, s_acc.data: 1, s_ub: 1, rescale: 1, p_ub: 1, nz_scratch: 1, p_l1.data: 1, v_l1.data: 1, p_l0.data: 1, v_l0.data: 1, pv_acc.data: 1, pv_ub: 1}})
                q_l1 = T.sblock_alloc_buffer((128, 128), "bfloat16", data=q_l1.data, scope="shared.l1")
                k_l1 = T.sblock_alloc_buffer((128, 128), "bfloat16", data=k_l1.data, scope="shared.l1")
                v_l1 = T.sblock_alloc_buffer((128, 128), "bfloat16", data=v_l1.data, scope="shared.l1")
                p_l1 = T.sblock_alloc_buffer((128, 128), "bfloat16", data=p_l1.data, scope="shared.l1")
                q_l0 = T.sblock_alloc_buffer((128, 128), "bfloat16", data=q_l0.data, scope="shared.l0a")
                k_l0 = T.sblock_alloc_buffer((128, 128), "bfloat16", data=k_l0.data, scope="shared.l0b")
                p_l0 = T.sblock_alloc_buffer((128, 128), "bfloat16", data=p_l0.data, scope="shared.l0a")
                v_l0 = T.sblock_alloc_buffer((128, 128), "bfloat16", data=v_l0.data, scope="shared.l0b")
                s_acc = T.sblock_alloc_buffer((128, 128), data=s_acc.data, scope="shared.l0c")
                pv_acc = T.sblock_alloc_buffer((128, 128), data=pv_acc.data, scope="shared.l0c")
                s_ub_1 = T.sblock_alloc_buffer((64, 128), data=s_ub, scope="shared.dyn")
                p_ub_1 = T.sblock_alloc_buffer((64, 128), "bfloat16", data=p_ub, scope="shared.dyn")
                pv_ub_1 = T.sblock_alloc_buffer((64, 128), data=pv_ub, scope="shared.dyn")
                o_ub = T.sblock_alloc_buffer((64, 128), scope="shared.dyn")
                row_max = T.sblock_alloc_buffer((64,), scope="shared.dyn")
                row_sum = T.sblock_alloc_buffer((64,), scope="shared.dyn")
                rescale_1 = T.sblock_alloc_buffer((64,), data=rescale, scope="shared.dyn")
                nz_scratch_1 = T.sblock_alloc_buffer((8320,), "bfloat16", data=nz_scratch, scope="shared.dyn")
                with T.attr({"stage": 0}, "tl.schedule_unit", 1):
                    T.attr({"ii": T.int64(1895), "latency": T.int64(1895)}, "tl.ascend_task", 1)
                    with T.sblock("SIMT_VF", no_realize=True):
                        T.reads()
                        T.writes()
                        T.sblock_attr({"layout_map": {pv_acc: metadata["tl.AscendFractalLayout"][0], s_acc: metadata["tl.AscendFractalLayout"][1], q_l1: metadata["tl.AscendFractalLayout"][2], k_l1: metadata["tl.AscendFractalLayout"][3], q_l0: metadata["tl.AscendFractalLayout"][4], k_l0: metadata["tl.AscendFractalLayout"][5], p_l1: metadata["tl.AscendFractalLayout"][6], v_l1: metadata["tl.AscendFractalLayout"][7], p_l0: metadata["tl.AscendFractalLayout"][8], v_l0: metadata["tl.AscendFractalLayout"][9], m_new: metadata["tl.Fragment"][0], l_new: metadata["tl.Fragment"][1], s: metadata["tl.Fragment"][2]}, "tl.vf_source_index": T.int64(0)})
                        simtvf_tx = T.launch_thread("threadIdx.x", 64)
                        simtvf_ty = T.launch_thread("threadIdx.y", 1)
                        simtvf_tz = T.launch_thread("threadIdx.z", 1)
                        T.attr("simtvf", "tl.simtvf_scope", 1)
                        for r in T.parallel(64, annotations={"parallel_loop_layout": metadata["tl.Fragment"][3], "parallel_loop_requires_padding_guard": T.bool(True)}):
                            row_max[r] = T.infinity("float32") * T.float32(-1.0)
                            row_sum[r] = T.float32(0.0)
                        for r_c_fused in T.parallel(8192, annotations={"parallel_loop_layout": metadata["tl.Fragment"][4], "parallel_loop_requires_padding_guard": T.bool(True)}):
                            o_ub[r_c_fused % 8192 // 128, r_c_fused % 128] = T.float32(0.0)
                with T.attr({"stage": 0}, "tl.schedule_unit", 1):
                    T.attr({"ii": T.int64(328), "latency": T.int64(518)}, "tl.ascend_task", 1)
                    T.ascend_copy(T.region(Q[bx * 128, 0], 1, 128, 128), T.region(q_l1[0, 0], 2, 128, 128))
                with T.attr({"stage": 0}, "tl.schedule_unit", 1):
                    for j in T.serial(16, annotations={"multi_buffer_eligible": [k_l1.data, q_l0.data, k_l0.data, s_acc.data, s_ub, rescale, p_ub, nz_scratch, p_l1.data, v_l1.data, p_l0.data, v_l0.data, pv_acc.data, pv_ub], "num_stages": 2}):
                        with T.attr({"stage": 0}, "tl.schedule_unit", 1):
                            T.attr({"ii": T.int64(328), "latency": T.int64(518)}, "tl.ascend_task", 1)
                            T.ascend_copy(T.region(V[j * 128, 0], 1, 128, 128), T.region(v_l1[0, 0], 2, 128, 128))
                        with T.attr({"stage": 0}, "tl.schedule_unit", 1):
                            T.attr({"ii": T.int64(328), "latency": T.int64(518)}, "tl.ascend_task", 1)
                            T.ascend_copy(T.region(K[j * 128, 0], 1, 128, 128), T.region(k_l1[0, 0], 2, 128, 128))
                        with T.attr({"stage": 0}, "tl.schedule_unit", 1):
                            T.attr({"ii": T.int64(131), "latency": T.int64(133)}, "tl.ascend_task", 1)
                            T.ascend_copy(T.region(k_l1[0, 0], 1, 128, 128), T.region(k_l0[0, 0], 2, 128, 128))
                        with T.attr({"stage": 0}, "tl.schedule_unit", 1):
                            T.attr({"ii": T.int64(131), "latency": T.int64(133)}, "tl.ascend_task", 1)
                            T.ascend_copy(T.region(q_l1[0, 0], 1, 128, 128), T.region(q_l0[0, 0], 2, 128, 128))
                        with T.attr({"stage": 0}, "tl.schedule_unit", 1):
                            T.attr({"ii": T.int64(512), "latency": T.int64(520)}, "tl.ascend_task", 1)
                            T.gemm(T.region(q_l0[0, 0], 1, 128, 128), T.region(k_l0[0, 0], 1, 128, 128), T.region(s_acc[0, 0], 2, 128, 128), T.bool(False), T.bool(True), 128, 128, 128, 0, T.bool(True), 0, 0, 0)
                        with T.attr({"stage": 0}, "tl.schedule_unit", 1):
                            T.attr({"ii": T.int64(258), "latency": T.int64(311)}, "tl.ascend_task", 1)
                            T.ascend_copy(T.region(s_acc[0, 0], 1, 128, 128), T.region(s_ub_1[0, 0], 2, 64, 128), dual_dst_ctl=1, l2_cache_ctrl=0)
                        with T.attr({"stage": 0}, "tl.schedule_unit", 1):
                            T.attr({"ii": T.int64(342), "latency": T.int64(342)}, "tl.ascend_task", 1)
                            with T.sblock("SIMT_VF", no_realize=True):
                                T.reads()
                                T.writes()
                                T.sblock_attr({"layout_map": {pv_acc: metadata["tl.AscendFractalLayout"][0], s_acc: metadata["tl.AscendFractalLayout"][1], q_l1: metadata["tl.AscendFractalLayout"][2], k_l1: metadata["tl.AscendFractalLayout"][3], q_l0: metadata["tl.AscendFractalLayout"][4], k_l0: metadata["tl.AscendFractalLayout"][5], p_l1: metadata["tl.AscendFractalLayout"][6], v_l1: metadata["tl.AscendFractalLayout"][7], p_l0: metadata["tl.AscendFractalLayout"][8], v_l0: metadata["tl.AscendFractalLayout"][9], m_new: metadata["tl.Fragment"][0], l_new: metadata["tl.Fragment"][1], s: metadata["tl.Fragment"][2]}, "tl.vf_source_index": T.int64(1)})
                                s = T.sblock_alloc_buffer((64, 128), data=s.data, scope="local.fragment")
                                m_new = T.sblock_alloc_buffer((64,), data=m_new.data, scope="local.fragment")
                                l_new = T.sblock_alloc_buffer((64,), data=l_new.data, scope="local.fragment")
                                simtvf_tx = T.launch_thread("threadIdx.x", 64)
                                simtvf_ty = T.launch_thread("threadIdx.y", 1)
                                simtvf_tz = T.launch_thread("threadIdx.z", 1)
                                T.attr("simtvf", "tl.simtvf_scope", 1)
                                T.ascend_copy(T.region(s_ub_1[0, 0], 1, 64, 128), T.region(s[0, 0], 2, 64, 128))
                                T.reduce(T.region(s[0, 0], 1, 64, 128), T.region(m_new[0], 2, 64), "max", 1, T.bool(True))
                                for r in T.parallel(64, annotations={"parallel_loop_layout": metadata["tl.Fragment"][5]}):
                                    m_new[r] = T.max(m_new[r] * T.float32(0.088388347648318447), row_max[r])
                                    rescale_1[r] = T.exp(row_max[r] - m_new[r])
                                for r in T.parallel(64, annotations={"parallel_loop_layout": metadata["tl.Fragment"][6]}):
                                    for c in T.parallel(128):
                                        s[r, c] = T.exp(s[r, c] * T.float32(0.088388347648318447) - m_new[r])
                                T.reduce(T.region(s[0, 0], 1, 64, 128), T.region(l_new[0], 2, 64), "sum", 1, T.bool(True))
                                for r in T.parallel(64, annotations={"parallel_loop_layout": metadata["tl.Fragment"][0]}):
                                    row_sum[r] = row_sum[r] * rescale_1[r] + l_new[r]
                                    row_max[r] = m_new[r]
                                for r in T.parallel(64, annotations={"parallel_loop_layout": metadata["tl.Fragment"][2]}):
                                    for c in T.parallel(128):
                                        p_ub_1[r, c] = T.Cast("bfloat16", s[r, c])
                        with T.attr({"stage": 0}, "tl.schedule_unit", 1):
                            T.attr({"ii": T.int64(148), "latency": T.int64(148)}, "tl.ascend_task", 1)
                            T.ascend_nd2nz_scatter(T.access_ptr(p_ub_1[0, 0], 8192, 1), T.access_ptr(nz_scratch_1[0], 8320, 2), 64, 128, "bfloat16_t", "bfloat16_t")
                        with T.attr({"stage": 0}, "tl.schedule_unit", 1):
                            T.attr({"ii": T.int64(128), "latency": T.int64(171)}, "tl.ascend_task", 1)
                            T.ascend_nd2nz_post_copy(T.access_ptr(p_l1[sid * 64, 0], 8192, 2), T.access_ptr(nz_scratch_1[0], 8320, 1), 64, 128, 128, "bfloat16_t")
                        with T.attr({"stage": 0}, "tl.schedule_unit", 1):
                            T.attr({"ii": T.int64(131), "latency": T.int64(133)}, "tl.ascend_task", 1)
                            T.ascend_copy(T.region(v_l1[0, 0], 1, 128, 128), T.region(v_l0[0, 0], 2, 128, 128))
                        with T.attr({"stage": 0}, "tl.schedule_unit", 1):
                            T.attr({"ii": T.int64(131), "latency": T.int64(133)}, "tl.ascend_task", 1)
                            T.ascend_copy(T.region(p_l1[0, 0], 1, 128, 128), T.region(p_l0[0, 0], 2, 128, 128))
                        with T.attr({"stage": 0}, "tl.schedule_unit", 1):
                            T.attr({"ii": T.int64(512), "latency": T.int64(520)}, "tl.ascend_task", 1)
                            T.gemm(T.region(p_l0[0, 0], 1, 128, 128), T.region(v_l0[0, 0], 1, 128, 128), T.region(pv_acc[0, 0], 2, 128, 128), T.bool(False), T.bool(False), 128, 128, 128, 0, T.bool(True), 0, 0, 0)
                        with T.attr({"stage": 0}, "tl.schedule_unit", 1):
                            T.attr({"ii": T.int64(258), "latency": T.int64(311)}, "tl.ascend_task", 1)
                            T.ascend_copy(T.region(pv_acc[0, 0], 1, 128, 128), T.region(pv_ub_1[0, 0], 2, 64, 128), dual_dst_ctl=1, l2_cache_ctrl=0)
                        T.attr({"stage": 0}, "tl.schedule_unit", 1)
                        T.attr({"ii": T.int64(7263), "latency": T.int64(7263)}, "tl.ascend_task", 1)
                        with T.sblock("SIMT_VF", no_realize=True):
                            T.reads()
                            T.writes()
                            T.sblock_attr({"layout_map": {pv_acc: metadata["tl.AscendFractalLayout"][0], s_acc: metadata["tl.AscendFractalLayout"][1], q_l1: metadata["tl.AscendFractalLayout"][2], k_l1: metadata["tl.AscendFractalLayout"][3], q_l0: metadata["tl.AscendFractalLayout"][4], k_l0: metadata["tl.AscendFractalLayout"][5], p_l1: metadata["tl.AscendFractalLayout"][6], v_l1: metadata["tl.AscendFractalLayout"][7], p_l0: metadata["tl.AscendFractalLayout"][8], v_l0: metadata["tl.AscendFractalLayout"][9], m_new: metadata["tl.Fragment"][0], l_new: metadata["tl.Fragment"][1], s: metadata["tl.Fragment"][2]}, "tl.vf_source_index": T.int64(2)})
                            simtvf_tx = T.launch_thread("threadIdx.x", 64)
                            simtvf_ty = T.launch_thread("threadIdx.y", 1)
                            simtvf_tz = T.launch_thread("threadIdx.z", 1)
                            T.attr("simtvf", "tl.simtvf_scope", 1)
                            for r_c_fused in T.parallel(8192, annotations={"parallel_loop_layout": metadata["tl.Fragment"][7], "parallel_loop_requires_padding_guard": T.bool(True)}):
                                o_ub[r_c_fused % 8192 // 128, r_c_fused % 128] = o_ub[r_c_fused % 8192 // 128, r_c_fused % 128] * rescale_1[r_c_fused % 8192 // 128] + pv_ub_1[r_c_fused % 8192 // 128, r_c_fused % 128]
                with T.attr({"stage": 0}, "tl.schedule_unit", 1):
                    T.attr({"ii": T.int64(5679), "latency": T.int64(5679)}, "tl.ascend_task", 1)
                    with T.sblock("SIMT_VF", no_realize=True):
                        T.reads()
                        T.writes()
                        T.sblock_attr({"layout_map": {pv_acc: metadata["tl.AscendFractalLayout"][0], s_acc: metadata["tl.AscendFractalLayout"][1], q_l1: metadata["tl.AscendFractalLayout"][2], k_l1: metadata["tl.AscendFractalLayout"][3], q_l0: metadata["tl.AscendFractalLayout"][4], k_l0: metadata["tl.AscendFractalLayout"][5], p_l1: metadata["tl.AscendFractalLayout"][6], v_l1: metadata["tl.AscendFractalLayout"][7], p_l0: metadata["tl.AscendFractalLayout"][8], v_l0: metadata["tl.AscendFractalLayout"][9], m_new: metadata["tl.Fragment"][0], l_new: metadata["tl.Fragment"][1], s: metadata["tl.Fragment"][2]}, "tl.vf_source_index": T.int64(3)})
                        simtvf_tx = T.launch_thread("threadIdx.x", 64)
                        simtvf_ty = T.launch_thread("threadIdx.y", 1)
                        simtvf_tz = T.launch_thread("threadIdx.z", 1)
                        T.attr("simtvf", "tl.simtvf_scope", 1)
                        for r_c_fused in T.parallel(8192, annotations={"parallel_loop_layout": metadata["tl.Fragment"][8], "parallel_loop_requires_padding_guard": T.bool(True)}):
                            o_ub[r_c_fused % 8192 // 128, r_c_fused % 128] = o_ub[r_c_fused % 8192 // 128, r_c_fused % 128] / row_sum[r_c_fused % 8192 // 128]
                T.attr({"stage": 0}, "tl.schedule_unit", 1)
                T.attr({"ii": T.int64(570), "latency": T.int64(750)}, "tl.ascend_task", 1)
                T.ascend_copy(T.region(o_ub[0, 0], 1, 64, 128), T.region(Out[bx * 128 + sid * 64, 0], 2, 64, 128), l2_cache_ctrl=0)

# Metadata omitted. Use show_meta=True in script() method to show it.