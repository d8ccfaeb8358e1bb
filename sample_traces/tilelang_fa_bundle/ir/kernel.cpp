#include <tl_templates/ascend/common.h>
#include <tl_templates/ascend/debug.h>
#include <tl_templates/ascend/nd2nz_copy.h>
__simt_vf__ __launch_bounds__(64) inline void flash_fwd_kernel_simt_vf_0(__ubuf__ uint8_t* buf_dyn_shmem) {
  ((__ubuf__ float*)buf_dyn_shmem)[(((int32_t)threadIdx.x) + 28736)] = tl::limits::kFloatNInf;
  ((__ubuf__ float*)buf_dyn_shmem)[(((int32_t)threadIdx.x) + 28800)] = float(0x0p+0f/*0.000000e+00*/);
  #pragma unroll
  for (int32_t i = 0; i < 64; ++i) {
    float broadcast_var = float(0x0p+0f/*0.000000e+00*/);
    *(__ubuf__ float2*)(((__ubuf__ float*)buf_dyn_shmem) + (((i * 128) + (((int32_t)threadIdx.x) * 2)) + 16384)) = make_float2(broadcast_var, broadcast_var);
  }
}

__simt_vf__ __launch_bounds__(64) inline void flash_fwd_kernel_simt_vf_1(__ubuf__ uint8_t* buf_dyn_shmem) {
  float s[128];
  float m_new[1];
  float l_new[1];
  #pragma unroll
  for (int32_t i = 0; i < 64; ++i) {
    *(float2*)(s + (i * 2)) = *(__ubuf__ float2*)(((__ubuf__ float*)buf_dyn_shmem) + ((((int32_t)threadIdx.x) * 128) + (i * 2)));
  }
  m_new[0] = tl::limits::kFloatNInf;
  #pragma unroll
  for (int32_t rv = 0; rv < 128; ++rv) {
    m_new[0] = max(m_new[0], s[rv]);
  }
  m_new[0] = max((m_new[0] * float(0x1.6a09e667f3bcdp-4f/*8.838835e-02*/)), ((__ubuf__ float*)buf_dyn_shmem)[(((int32_t)threadIdx.x) + 28736)]);
  ((__ubuf__ float*)buf_dyn_shmem)[(((int32_t)threadIdx.x) + 28864)] = expf((((__ubuf__ float*)buf_dyn_shmem)[(((int32_t)threadIdx.x) + 28736)] - m_new[0]));
  #pragma unroll
  for (int32_t i_1 = 0; i_1 < 64; ++i_1) {
    float broadcast_var = float(0x1.6a09e667f3bcdp-4f/*8.838835e-02*/);
    float2 _;
      float2 v_ = (*(float2*)(s + (i_1 * 2)) * make_float2(broadcast_var, broadcast_var)) - make_float2(m_new[0], m_new[0]);
      _.x = expf(v_.x);
      _.y = expf(v_.y);
    *(float2*)(s + (i_1 * 2)) = _;
  }
  l_new[0] = float(0x0p+0f/*0.000000e+00*/);
  #pragma unroll
  for (int32_t rv_1 = 0; rv_1 < 128; ++rv_1) {
    l_new[0] = (l_new[0] + s[rv_1]);
  }
  ((__ubuf__ float*)buf_dyn_shmem)[(((int32_t)threadIdx.x) + 28800)] = ((((__ubuf__ float*)buf_dyn_shmem)[(((int32_t)threadIdx.x) + 28800)] * ((__ubuf__ float*)buf_dyn_shmem)[(((int32_t)threadIdx.x) + 28864)]) + l_new[0]);
  ((__ubuf__ float*)buf_dyn_shmem)[(((int32_t)threadIdx.x) + 28736)] = m_new[0];
  #pragma unroll
  for (int32_t i_2 = 0; i_2 < 32; ++i_2) {
    bfloat16_t p_ub_local_cast[4];
    for (int32_t vec = 0; vec < 2; ++vec) {
      uint1 __1;
        float2 v__1 = *(float2*)(s + ((i_2 * 4) + (vec * 2)));
        (reinterpret_cast<bfloat16x2_t*>(&__1))[0] = __float22bfloat162_rn(((float2*)(&v__1))[0]);
      *(uint1*)(p_ub_local_cast + (vec * 2)) = __1;
    }
    *(__ubuf__ uint2*)(((__ubuf__ bfloat16_t*)buf_dyn_shmem) + (((((int32_t)threadIdx.x) * 128) + (i_2 * 4)) + 16384)) = *(uint2*)(p_ub_local_cast + 0);
  }
}

__simt_vf__ __launch_bounds__(64) inline void flash_fwd_kernel_simt_vf_2(__ubuf__ uint8_t* buf_dyn_shmem) {
  #pragma unroll
  for (int32_t i = 0; i < 64; ++i) {
    *(__ubuf__ float2*)(((__ubuf__ float*)buf_dyn_shmem) + (((i * 128) + (((int32_t)threadIdx.x) * 2)) + 16384)) = ((*(__ubuf__ float2*)(((__ubuf__ float*)buf_dyn_shmem) + (((i * 128) + (((int32_t)threadIdx.x) * 2)) + 16384)) * make_float2(((__ubuf__ float*)buf_dyn_shmem)[(i + 28864)], ((__ubuf__ float*)buf_dyn_shmem)[(i + 28864)])) + *(__ubuf__ float2*)(((__ubuf__ float*)buf_dyn_shmem) + (((i * 128) + (((int32_t)threadIdx.x) * 2)) + 8192)));
  }
}

__simt_vf__ __launch_bounds__(64) inline void flash_fwd_kernel_simt_vf_3(__ubuf__ uint8_t* buf_dyn_shmem) {
  #pragma unroll
  for (int32_t i = 0; i < 64; ++i) {
    float2 _;
      float2 v_ = *(__ubuf__ float2*)(((__ubuf__ float*)buf_dyn_shmem) + (((i * 128) + (((int32_t)threadIdx.x) * 2)) + 16384));
      float2 v__1 = make_float2(((__ubuf__ float*)buf_dyn_shmem)[(i + 28800)], ((__ubuf__ float*)buf_dyn_shmem)[(i + 28800)]);
      _.x = (v_.x/v__1.x);
      _.y = (v_.y/v__1.y);
    *(__ubuf__ float2*)(((__ubuf__ float*)buf_dyn_shmem) + (((i * 128) + (((int32_t)threadIdx.x) * 2)) + 16384)) = _;
  }
}

extern "C" __global__ __mix__(1, 2) void flash_fwd_kernel(__gm__ bfloat16_t* K, __gm__ float* Out, __gm__ bfloat16_t* Q, __gm__ bfloat16_t* V) {
  asc_init();
  __cbuf__ uint8_t *buf_dyn_l1 = (__cbuf__ uint8_t *)0;
  __cc__ uint8_t *buf_dyn_l0c = (__cc__ uint8_t *)0;
  __cb__ uint8_t *buf_dyn_l0b = (__cb__ uint8_t *)0;
  __ca__ uint8_t *buf_dyn_l0a = (__ca__ uint8_t *)0;
  __ubuf__ uint8_t *buf_dyn_shmem = (__ubuf__ uint8_t *)0;
  if ASC_IS_AIC {
    asc_sync_notify(PIPE_M, PIPE_MTE1, static_cast<event_t>(0));
    asc_sync_notify(PIPE_MTE1, PIPE_MTE2, static_cast<event_t>(0));
    asc_set_gm2l1_nz_para(1, 1, static_cast<uint16_t>(128), 0);
    asc_copy_gm2l1_nd2nz(((__cbuf__ bfloat16_t*)buf_dyn_l1), (&(Q[(((int32_t)block_idx) * 16384)])), 256, static_cast<asc_load_l2_cache_mode>(0), 128, 128, 0, 0);
    for (int32_t j = 0; j < 16; ++j) {
      asc_sync_wait(PIPE_MTE1, PIPE_MTE2, static_cast<event_t>(0));
      asc_set_gm2l1_nz_para(1, 1, static_cast<uint16_t>(128), 0);
      asc_copy_gm2l1_nd2nz(((__cbuf__ bfloat16_t*)buf_dyn_l1 + 32768), (&(V[(j * 16384)])), 256, static_cast<asc_load_l2_cache_mode>(0), 128, 128, 0, 0);
      asc_set_gm2l1_nz_para(1, 1, static_cast<uint16_t>(128), 0);
      asc_copy_gm2l1_nd2nz(((__cbuf__ bfloat16_t*)buf_dyn_l1 + 16384), (&(K[(j * 16384)])), 256, static_cast<asc_load_l2_cache_mode>(0), 128, 128, 0, 0);
      asc_sync_notify(PIPE_MTE2, PIPE_MTE1, static_cast<event_t>(0));
      asc_sync_wait(PIPE_MTE2, PIPE_MTE1, static_cast<event_t>(0));
      asc_copy_l12l0b(((__cb__ bfloat16_t*)buf_dyn_l0b), ((__cbuf__ bfloat16_t*)buf_dyn_l1 + 16384), 0, 0, 8, 8, 8, 8);
      asc_copy_l12l0a(((__ca__ bfloat16_t*)buf_dyn_l0a), ((__cbuf__ bfloat16_t*)buf_dyn_l1), 0, 0, 8, 8, 8, 8);
      asc_sync_notify(PIPE_MTE1, PIPE_M, static_cast<event_t>(1));
      asc_sync_wait(PIPE_MTE1, PIPE_M, static_cast<event_t>(1));
      asc_mmad(((__cc__ float*)buf_dyn_l0c), ((__ca__ bfloat16_t*)buf_dyn_l0a), ((__cb__ bfloat16_t*)buf_dyn_l0b), 128, 128, 128, 0, 1, 0, (bool)1);
      asc_sync_notify(PIPE_M, PIPE_FIX, static_cast<event_t>(1));
      asc_sync_wait(PIPE_M, PIPE_FIX, static_cast<event_t>(1));
      asc_set_l0c_copy_nz_para(1, 0, 0);
      asc_copy_l0c2ub((&(((__ubuf__ float*)buf_dyn_shmem)[0])), ((__cc__ float*)buf_dyn_l0c), 128, 128, 128, 128, 0, static_cast<asc_dual_dst_mode>(1), static_cast<asc_unit_flag_mode>(0), static_cast<asc_quant_mode>(0), static_cast<asc_relu_pre_mode>(0), 0, 1, 0, 0);
      asc_sync_intra_arrive(PIPE_FIX, 2);
      asc_sync_intra_arrive(PIPE_FIX, 18);
      asc_sync_wait(PIPE_M, PIPE_MTE1, static_cast<event_t>(0));
      asc_copy_l12l0b_transpose(((__cb__ bfloat16_t*)buf_dyn_l0b + 16384), ((__cbuf__ bfloat16_t*)buf_dyn_l1 + 32768), 0, 0, 8, 8, 8, 8);
      asc_sync_notify(PIPE_MTE1, PIPE_MTE2, static_cast<event_t>(0));
      asc_sync_intra_wait(PIPE_MTE1, 17);
      asc_sync_intra_wait(PIPE_MTE1, 1);
      asc_copy_l12l0a(((__ca__ bfloat16_t*)buf_dyn_l0a + 16384), ((__cbuf__ bfloat16_t*)buf_dyn_l1 + 49152), 0, 0, 8, 8, 8, 8);
      asc_sync_notify(PIPE_MTE1, PIPE_M, static_cast<event_t>(0));
      asc_sync_wait(PIPE_MTE1, PIPE_M, static_cast<event_t>(0));
      asc_mmad(((__cc__ float*)buf_dyn_l0c + 16384), ((__ca__ bfloat16_t*)buf_dyn_l0a + 16384), ((__cb__ bfloat16_t*)buf_dyn_l0b + 16384), 128, 128, 128, 0, 1, 0, (bool)1);
      asc_sync_notify(PIPE_M, PIPE_FIX, static_cast<event_t>(0));
      asc_sync_notify(PIPE_M, PIPE_MTE1, static_cast<event_t>(0));
      asc_sync_wait(PIPE_M, PIPE_FIX, static_cast<event_t>(0));
      asc_set_l0c_copy_nz_para(1, 0, 0);
      asc_copy_l0c2ub((&(((__ubuf__ float*)buf_dyn_shmem)[8192])), ((__cc__ float*)buf_dyn_l0c + 16384), 128, 128, 128, 128, 0, static_cast<asc_dual_dst_mode>(1), static_cast<asc_unit_flag_mode>(0), static_cast<asc_quant_mode>(0), static_cast<asc_relu_pre_mode>(0), 0, 1, 0, 0);
      asc_sync_intra_arrive(PIPE_FIX, 0);
      asc_sync_intra_arrive(PIPE_FIX, 16);
    }
    asc_sync_wait(PIPE_M, PIPE_MTE1, static_cast<event_t>(0));
    asc_sync_wait(PIPE_MTE1, PIPE_MTE2, static_cast<event_t>(0));
  }
  if ASC_IS_AIV {
    int32_t sid = asc_get_sub_block_id();
    asc_vf_call<flash_fwd_kernel_simt_vf_0>(cce::dim3(64), buf_dyn_shmem);
    for (int32_t j_1 = 0; j_1 < 16; ++j_1) {
      asc_sync_intra_wait(PIPE_V, 2);
      asc_vf_call<flash_fwd_kernel_simt_vf_1>(cce::dim3(64), buf_dyn_shmem);
      ascend_nd2nz_scatter<64, 128, bfloat16_t, bfloat16_t>((__ubuf__ bfloat16_t*)((&(((__ubuf__ bfloat16_t*)buf_dyn_shmem)[16384]))), (__ubuf__ bfloat16_t*)((&(((__ubuf__ bfloat16_t*)buf_dyn_shmem)[49152]))));
      asc_sync_notify(PIPE_V, PIPE_MTE3, static_cast<event_t>(0));
      asc_sync_wait(PIPE_V, PIPE_MTE3, static_cast<event_t>(0));
      asc_copy_ub2l1((__cbuf__ void*)(((__cbuf__ bfloat16_t*)buf_dyn_l1 + ((sid * 1024) + 49152))), (__ubuf__ void*)((&(((__ubuf__ bfloat16_t*)buf_dyn_shmem)[49152]))), 8, 64, 1, 64);
      asc_sync_intra_arrive(PIPE_MTE3, 1);
      asc_sync_intra_wait(PIPE_V, 0);
      asc_vf_call<flash_fwd_kernel_simt_vf_2>(cce::dim3(64), buf_dyn_shmem);
    }
    asc_vf_call<flash_fwd_kernel_simt_vf_3>(cce::dim3(64), buf_dyn_shmem);
    asc_sync_notify(PIPE_V, PIPE_MTE3, static_cast<event_t>(1));
    asc_sync_wait(PIPE_V, PIPE_MTE3, static_cast<event_t>(1));
    asc_copy_ub2gm_align((__gm__ uint8_t*)((&(Out[((((int32_t)block_idx) * 16384) + (sid * 8192))]))), (__ubuf__ uint8_t*)((&(((__ubuf__ float*)buf_dyn_shmem)[16384]))), 1, 32768, static_cast<asc_store_l2_cache_mode>(0), 32768, 32768);
  }
}

