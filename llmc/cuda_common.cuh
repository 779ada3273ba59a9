/*
 * What every CUDA file of the project shares: the bf16 activation type, error checks, 128-bit
 * packed loads and stores, warp reductions and stochastic rounding.
 *
 * Conventions that span the .cuh files:
 * - floatX is the storage type of parameters, gradients and activations (bf16); accumulation is fp32.
 * - Kernels are `static __global__`; each is called through a host launcher in the same file that
 *   takes raw pointers, sizes and a stream, checks what the kernel assumes, and checks the launch.
 * - Gradient kernels accumulate (+=) into parameter gradients and overwrite (=) activation
 *   gradients unless a file says otherwise.
 */
#ifndef LLMC_CUDA_COMMON_CUH
#define LLMC_CUDA_COMMON_CUH

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include "utils.h"

typedef __nv_bfloat16 floatX;

#define CEIL_DIV(a, b) (((a) + (b) - 1) / (b))
#define WARP_SIZE 32

// ----------------------------------------------------------------------------
// error checks: the failing call, file and line, then the same exit path as every other error

static inline void cuda_check(cudaError_t err, const char *call, const char *file, int line) {
    if (err != cudaSuccess) {
        llmc_die("CUDA error %s in %s: %s [%s:%d]", cudaGetErrorName(err), call, cudaGetErrorString(err), file, line);
    }
}
#define cudaCheck(call) cuda_check((call), #call, __FILE__, __LINE__)
// after every kernel launch: catches bad launch configurations at the launch site
#define cudaCheckLaunch() cuda_check(cudaGetLastError(), "kernel launch", __FILE__, __LINE__)

// ----------------------------------------------------------------------------
// 128-bit packed vector for coalesced loads and stores (8 bf16 or 4 float per access)

template <class ElementType>
struct alignas(16) Packed128 {
    static constexpr int size = sizeof(int4) / sizeof(ElementType);
    ElementType payload[size];

    __device__ Packed128() {}
    __device__ explicit Packed128(int4 bits) { memcpy(&payload, &bits, sizeof(bits)); }
    __device__ static Packed128 constant(ElementType value) {
        Packed128 result;
        for (int k = 0; k < size; ++k) { result.payload[k] = value; }
        return result;
    }
    __device__ static Packed128 zeros() { return constant(ElementType(0.0f)); }
    __device__ ElementType &operator[](int index) { return payload[index]; }
    __device__ const ElementType &operator[](int index) const { return payload[index]; }
    __device__ int4 get_bits() const {
        int4 bits;
        memcpy(&bits, &payload, sizeof(bits));
        return bits;
    }
};
typedef Packed128<float> f128;
typedef Packed128<floatX> x128;

template <class T>
__device__ __forceinline__ Packed128<T> load128(const T *address) {
    return Packed128<T>{*reinterpret_cast<const int4 *>(address)};
}
// streaming load: data read once, keep it out of L1/L2 priority
template <class T>
__device__ __forceinline__ Packed128<T> load128cs(const T *address) {
    return Packed128<T>{__ldcs(reinterpret_cast<const int4 *>(address))};
}
template <class T>
__device__ __forceinline__ void store128(T *target, Packed128<T> value) {
    *reinterpret_cast<int4 *>(target) = value.get_bits();
}
template <class T>
__device__ __forceinline__ void store128cs(T *target, Packed128<T> value) {
    __stcs(reinterpret_cast<int4 *>(target), value.get_bits());
}

// ----------------------------------------------------------------------------
// warp and block reductions

__device__ __forceinline__ float warp_reduce_sum(float val) {
    for (int offset = 16; offset > 0; offset /= 2) { val += __shfl_xor_sync(0xffffffff, val, offset); }
    return val;
}
__device__ __forceinline__ float warp_reduce_max(float val) {
    for (int offset = 16; offset > 0; offset /= 2) { val = fmaxf(val, __shfl_xor_sync(0xffffffff, val, offset)); }
    return val;
}

// sum over a block of up to 1024 threads; every thread gets the result. `shared` holds 32 floats.
__device__ __forceinline__ float block_reduce_sum(float val, float *shared) {
    const int lane = threadIdx.x % WARP_SIZE, warp = threadIdx.x / WARP_SIZE;
    const int num_warps = CEIL_DIV((int)blockDim.x, WARP_SIZE);
    val = warp_reduce_sum(val);
    __syncthreads();  // shared may still be read by a previous call
    if (lane == 0) { shared[warp] = val; }
    __syncthreads();
    val = lane < num_warps ? shared[lane] : 0.0f;
    return warp_reduce_sum(val);
}

// ----------------------------------------------------------------------------
// deterministic stochastic rounding fp32 -> bf16: the random bits come from a hash of
// (seed, thread position), so two runs with the same seed round identically.

__device__ __forceinline__ unsigned int squirrel_noise5(unsigned int position, unsigned int seed) {
    constexpr unsigned int N1 = 0xd2a80a3f, N2 = 0xa884f197, N3 = 0x6C736F4B, N4 = 0xB79F3ABB, N5 = 0x1b56c4f5;
    unsigned int m = position;
    m *= N1; m += seed; m ^= (m >> 9);
    m += N2; m ^= (m >> 11);
    m *= N3; m ^= (m >> 13);
    m += N4; m ^= (m >> 15);
    m *= N5; m ^= (m >> 17);
    return m;
}

__device__ __forceinline__ unsigned int random_u32(unsigned int seed, unsigned int x, unsigned int y) {
    constexpr unsigned int PRIME = 198491317;
    return squirrel_noise5(x + PRIME * y, seed);
}

// round `in` up or down to a neighbouring bf16 with probability proportional to the distance
__device__ __forceinline__ void stochastic_rounding(float in, floatX *out, unsigned int seed) {
    unsigned int random = random_u32(seed, threadIdx.x, blockIdx.x * blockDim.x + blockIdx.y);
    unsigned int threshold = random & 0xFFFF;
    unsigned int bits = __float_as_uint(in);
    unsigned int rounded = (bits & 0xFFFF) > threshold ? (bits | 0xFFFF) + 1u : bits & ~0xFFFFu;
    if (isnan(in) || isinf(in)) { rounded = bits; }
    *out = __ushort_as_bfloat16((unsigned short)(rounded >> 16));
}

#endif  // LLMC_CUDA_COMMON_CUH
