/*
 * The device primitives of the fused attention kernels (llmc/cuda/attention.cuh): the inline PTX they
 * use (mma.sync m16n8k16, ldmatrix, cp.async, st/ld.shared, ex2.approx) and every shared-memory,
 * global-memory and cross-lane operation, each a small function. The kernels do nothing to memory or
 * across lanes except through these, so that the CPU simulator can replace this one file with
 * checked CPU versions of the same functions (dev/cuda/sim/attention_ptx.cuh: mma, ldmatrix and
 * cp.async emulated per the PTX ISA, shared-memory races, bounds and coverage checked) and run the
 * kernels unchanged.
 */
#ifndef LLMC_ATTENTION_PTX_CUH
#define LLMC_ATTENTION_PTX_CUH

#include <stdint.h>
#include <string.h>

#include "cuda_common.cuh"

#define ATTN_DEV __device__ __forceinline__

extern __shared__ __align__(16) unsigned char attn_smem[];
ATTN_DEV unsigned char *attn_dynamic_smem() { return attn_smem; }

ATTN_DEV uint32_t attn_smem_addr(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }

// four 8x8 b16 matrices: lane L gives the address of row L % 8 of matrix L / 8 (16 contiguous
// bytes); matrix i lands in r[i], lane L holding row L / 4, columns 2 (L % 4) and 2 (L % 4) + 1.
ATTN_DEV void attn_ldsm_x4(uint32_t (&r)[4], const floatX *p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(attn_smem_addr(p))
                 : "memory");
}
// the same with each matrix transposed: lane L holds rows 2 (L % 4), 2 (L % 4) + 1 of column L / 4
ATTN_DEV void attn_ldsm_x4_trans(uint32_t (&r)[4], const floatX *p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(attn_smem_addr(p))
                 : "memory");
}
// c (16x8 fp32) += a (16x16 bf16, row) * b (16x8 bf16, col); fragment layouts in the PTX ISA,
// "Matrix Fragments for mma.m16n8k16 with floating point type" (g = lane / 4, t = lane % 4):
//   a[0] = A[g][2t, 2t+1]  a[1] = A[g+8][2t, 2t+1]  a[2] = A[g][2t+8, 2t+9]  a[3] = A[g+8][2t+8, 2t+9]
//   b0 = B[2t, 2t+1][g]    b1 = B[2t+8, 2t+9][g]
//   c[0], c[1] = C[g][2t, 2t+1]                     c[2], c[3] = C[g+8][2t, 2t+1]
ATTN_DEV void attn_mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
                 "{%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
// 16 bytes global -> shared, asynchronous (source size 0 when !valid: 16 zero bytes, nothing read)
ATTN_DEV void attn_cp_async16(floatX *dst, const floatX *src, bool valid) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(attn_smem_addr(dst)),
                 "l"(__cvta_generic_to_global(src)), "r"(valid ? 16 : 0)
                 : "memory");
}
// 4 bytes, same rules
ATTN_DEV void attn_cp_async4(float *dst, const float *src, bool valid) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(attn_smem_addr(dst)),
                 "l"(__cvta_generic_to_global(src)), "r"(valid ? 4 : 0)
                 : "memory");
}
// closes the group of this thread's cp.asyncs issued since the last commit
ATTN_DEV void attn_cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
// every committed group of this thread has landed; other threads see the data only after a
// following attn_block_sync
ATTN_DEV void attn_cp_async_wait_all() { asm volatile("cp.async.wait_group 0;\n" ::: "memory"); }
ATTN_DEV void attn_block_sync() { __syncthreads(); }
ATTN_DEV void attn_warp_sync() { __syncwarp(); }
ATTN_DEV float attn_shfl_xor(float v, int mask) { return __shfl_xor_sync(0xffffffffu, v, mask); }
// two floats -> bf16x2 (round to nearest even), lo in the low half (the lower column/row index)
ATTN_DEV uint32_t attn_pack_bf16(float lo, float hi) {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    uint32_t u;
    memcpy(&u, &v, sizeof(u));
    return u;
}
ATTN_DEV float attn_bits_to_float(uint32_t u) { return __uint_as_float(u); }
// 2^x with the hardware approximation whatever the compile flags (2^-inf = +0)
ATTN_DEV float attn_exp2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}
ATTN_DEV float attn_log(float x) { return __logf(x); }
ATTN_DEV void attn_st_shared_u32(void *p, uint32_t v) {
    asm volatile("st.shared.u32 [%0], %1;\n" ::"r"(attn_smem_addr(p)), "r"(v) : "memory");
}
ATTN_DEV int4 attn_ld_shared_128(const void *p) {
    int4 v;
    asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "r"(attn_smem_addr(p))
                 : "memory");
    return v;
}
ATTN_DEV float2 attn_ld_shared_f32x2(const float *p) {
    float2 v;
    asm volatile("ld.shared.v2.f32 {%0, %1}, [%2];\n" : "=f"(v.x), "=f"(v.y) : "r"(attn_smem_addr(p)) : "memory");
    return v;
}
ATTN_DEV void attn_st_global_128(floatX *p, int4 v) { *reinterpret_cast<int4 *>(p) = v; }
ATTN_DEV int4 attn_ld_global_128(const floatX *p) { return *reinterpret_cast<const int4 *>(p); }
ATTN_DEV float attn_ld_global_f32(const float *p) { return *p; }
ATTN_DEV void attn_st_global_f32(float *p, float v) { *p = v; }

#endif  // LLMC_ATTENTION_PTX_CUH
