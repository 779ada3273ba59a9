/*
 * Host simulator, bf16: a stand-in for <cuda_bf16.h>: bf16 as 16 bits, conversions from fp32
 * rounding to nearest even (as cvt.rn.bf16.f32 on sm_80+), to fp32 exact.
 */
#ifndef SIM_CUDA_BF16_H
#define SIM_CUDA_BF16_H

#include <stdint.h>
#include <string.h>

struct __nv_bfloat16 {
    unsigned short __x;
    __nv_bfloat16() = default;
    __nv_bfloat16(float f) {
        uint32_t u;
        memcpy(&u, &f, 4);
        if ((u & 0x7fffffffu) > 0x7f800000u) {
            __x = (unsigned short)((u >> 16) | 0x40);  // NaN stays a quiet NaN
        } else {
            u += 0x7fffu + ((u >> 16) & 1u);
            __x = (unsigned short)(u >> 16);
        }
    }
};

static inline __nv_bfloat16 __float2bfloat16(float f) { return __nv_bfloat16(f); }
static inline float __bfloat162float(__nv_bfloat16 b) {
    uint32_t u = (uint32_t)b.__x << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 b) { return b.__x; }
static inline __nv_bfloat16 __ushort_as_bfloat16(unsigned short s) {
    __nv_bfloat16 b;
    b.__x = s;
    return b;
}

#endif  // SIM_CUDA_BF16_H
