/*
 * Host simulator: the CPU version of llmc/cuda/attention_ptx.cuh, the device primitives of the fused
 * attention kernels. sim_rewrite.py puts this file in its place in the simulator's copy of llmc/, so
 * that the kernels and launchers of llmc/cuda/attention.cuh run unchanged, with every ldmatrix, mma,
 * cp.async, shared and global access emulated and checked by ptx.h (races, bounds, coverage) and
 * every barrier, __syncwarp and shuffle a collective of engine.h. The same functions, the same
 * contracts; the comments on what each does are in llmc/cuda/attention_ptx.cuh.
 * Rounding: ex2.approx and __logf are exp2f and logf here (the GPU's approximations differ in the
 * last bits, within the tolerances of dev/cuda/attention_ref.h).
 */
#ifndef LLMC_ATTENTION_PTX_CUH
#define LLMC_ATTENTION_PTX_CUH

#include <stdint.h>
#include <string.h>

#include "cuda_common.cuh"
#include "ptx.h"

#define ATTN_DEV static inline

ATTN_DEV unsigned char *attn_dynamic_smem() { return sim::dynamic_smem; }

ATTN_DEV void attn_ldsm_x4(uint32_t (&r)[4], const floatX *p) { sim::ldmatrix_x4(r, p, false); }
ATTN_DEV void attn_ldsm_x4_trans(uint32_t (&r)[4], const floatX *p) { sim::ldmatrix_x4(r, p, true); }
ATTN_DEV void attn_mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    sim::mma_m16n8k16(c, a, b0, b1);
}
ATTN_DEV void attn_cp_async16(floatX *dst, const floatX *src, bool valid) { sim::cp_async(dst, src, 16, valid); }
ATTN_DEV void attn_cp_async4(float *dst, const float *src, bool valid) { sim::cp_async(dst, src, 4, valid); }
ATTN_DEV void attn_cp_async_commit() { sim::cp_async_commit(); }
ATTN_DEV void attn_cp_async_wait_all() { sim::cp_async_wait_all(); }
ATTN_DEV void attn_block_sync() { __syncthreads(); }
ATTN_DEV void attn_warp_sync() { __syncwarp(); }
ATTN_DEV float attn_shfl_xor(float v, int mask) { return __shfl_xor_sync(0xffffffffu, v, mask); }
ATTN_DEV uint32_t attn_pack_bf16(float lo, float hi) {
    return (uint32_t)__float2bfloat16(lo).__x | ((uint32_t)__float2bfloat16(hi).__x << 16);
}
ATTN_DEV float attn_bits_to_float(uint32_t u) { return __uint_as_float(u); }
ATTN_DEV float attn_exp2(float x) { return exp2f(x); }
ATTN_DEV float attn_log(float x) { return logf(x); }
ATTN_DEV void attn_st_shared_u32(void *p, uint32_t v) { sim::st_shared(p, v, "st.shared.u32"); }
ATTN_DEV int4 attn_ld_shared_128(const void *p) { return sim::ld_shared<int4>(p, "ld.shared.v4.u32"); }
ATTN_DEV float2 attn_ld_shared_f32x2(const float *p) { return sim::ld_shared<float2>(p, "ld.shared.v2.f32"); }
ATTN_DEV void attn_st_global_128(floatX *p, int4 v) { sim::st_global(p, v, "st.global.v4"); }
ATTN_DEV int4 attn_ld_global_128(const floatX *p) { return sim::ld_global<int4>(p, "ld.global.v4"); }
ATTN_DEV float attn_ld_global_f32(const float *p) { return sim::ld_global<float>(p, "ld.global.f32"); }
ATTN_DEV void attn_st_global_f32(float *p, float v) { sim::st_global(p, v, "st.global.f32"); }

#endif  // LLMC_ATTENTION_PTX_CUH
