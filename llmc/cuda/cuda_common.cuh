/*
 * What every CUDA file of the project shares: the bf16 activation type, error checks, 128-bit
 * packed loads and stores, warp and block reductions, stochastic rounding, launcher precondition
 * checks (cudaRequire), the deterministic column-sum stage of the two-stage reductions, and
 * bf16 <-> fp32 buffer casts.
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

#ifndef LLMC_CUDA_ARCHS
#define LLMC_CUDA_ARCHS "unknown"  // the Makefile passes the CUDA_ARCHS it built for
#endif

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include "../utils.h"

typedef __nv_bfloat16 floatX;

#define CEIL_DIV(a, b) (((a) + (b) - 1) / (b))

// What one cudaMalloc (or cudaMallocHost) of n bytes is counted as in the memory plan (llmc/plan.h):
// blocks are 256-byte aligned. The GPU's allocator rounds large blocks further; -b auto's margin
// covers that.
static inline size_t cuda_alloc_bytes(size_t n) { return (n + 255) / 256 * 256; }
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

// The same rounding with the random bits given by the caller, so that they can be keyed to an
// element's index (AdamW): the result then does not depend on the launch configuration or on
// how the parameters are sharded across ranks.
__device__ __forceinline__ floatX stochastic_round_bf16(float in, unsigned int random) {
    unsigned int threshold = random & 0xFFFF;
    unsigned int bits = __float_as_uint(in);
    unsigned int rounded = (bits & 0xFFFF) > threshold ? (bits | 0xFFFF) + 1u : bits & ~0xFFFFu;
    if (isnan(in) || isinf(in)) { rounded = bits; }
    return __ushort_as_bfloat16((unsigned short)(rounded >> 16));
}

// ----------------------------------------------------------------------------
// more reductions

// maximum over a block of up to 1024 threads; every thread gets the result. `shared` holds 32 floats.
__device__ __forceinline__ float block_reduce_max(float val, float *shared) {
    const int lane = threadIdx.x % WARP_SIZE, warp = threadIdx.x / WARP_SIZE;
    const int num_warps = CEIL_DIV((int)blockDim.x, WARP_SIZE);
    val = warp_reduce_max(val);
    __syncthreads();  // shared may still be read by a previous call
    if (lane == 0) { shared[warp] = val; }
    __syncthreads();
    val = lane < num_warps ? shared[lane] : -INFINITY;
    return warp_reduce_max(val);
}

// ----------------------------------------------------------------------------
// launcher helpers

// A launcher's precondition: on failure, one line naming the launcher, the condition and why.
static inline void cuda_require_fail(const char *func, const char *cond, const char *file, int line, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    llmc_die("%s: %s (requires %s) [%s:%d]", func, msg, cond, file, line);
}
#define cudaRequire(cond, ...) \
    do { if (!(cond)) { cuda_require_fail(__func__, #cond, __FILE__, __LINE__, __VA_ARGS__); } } while (0)

static inline int is_aligned16(const void *p) { return ((uintptr_t)p & 15) == 0; }

// the most dynamic shared memory one block of this GPU may opt in to (cudaFuncSetAttribute)
static inline int max_dynamic_smem_optin(void) {
    int device = 0, value = 0;
    cudaCheck(cudaGetDevice(&device));
    cudaCheck(cudaDeviceGetAttribute(&value, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    return value;
}

// grid size for a one-thread-per-item launch; items beyond 2^31 blocks are not a real case here
static inline unsigned int grid_for(size_t items, int block) {
    size_t blocks = (items + block - 1) / block;
    return (unsigned int)(blocks > 0 ? blocks : 1);
}

// ----------------------------------------------------------------------------
// deterministic column sums: the second stage of the fp32 two-stage reductions of layernorm.cuh
// (dweight, dbias) and matmul.cuh (dbias). A first-stage kernel writes P rows of M partial sums
// (partials[p * M + m], p in the fixed order of its row chunks); this adds them up and
// accumulates into bf16 outputs:
//     out[m] += sum_p partials[p * M + m],   out = out0[m] for m < split, out1[m - split] otherwise.
// Summation order (fixed, independent of the device): warp w of a block takes p = w, w + 16,
// w + 32, ... into COLUMN_SUM_LANES running sums, the i-th of them p = w + 16 i, w + 16 (i + 8), ...
// in increasing p (8 independent loads in flight per thread: the loop is bound by memory latency,
// with only M / 32 blocks), adds them in order i = 0..7; the 16 warp sums are then added in order
// w = 0..15.

#define COLUMN_SUM_WARPS 16
#define COLUMN_SUM_LANES 8

static __global__ void __launch_bounds__(WARP_SIZE * COLUMN_SUM_WARPS)
column_partials_accumulate_kernel(floatX *out0, floatX *out1, int split, const float *partials, int P, int M) {
    __shared__ float warp_sums[COLUMN_SUM_WARPS][WARP_SIZE];
    const int lane = threadIdx.x, w = threadIdx.y;
    const int m = blockIdx.x * WARP_SIZE + lane;
    float sums[COLUMN_SUM_LANES] = {0.0f};
    if (m < M) {
        const int stride = COLUMN_SUM_WARPS * COLUMN_SUM_LANES;
        int p0 = w;
        for (; p0 + (COLUMN_SUM_LANES - 1) * COLUMN_SUM_WARPS < P; p0 += stride) {
#pragma unroll
            for (int i = 0; i < COLUMN_SUM_LANES; i++) { sums[i] += partials[(size_t)(p0 + i * COLUMN_SUM_WARPS) * M + m]; }
        }
        for (int i = 0; p0 + i * COLUMN_SUM_WARPS < P; i++) { sums[i] += partials[(size_t)(p0 + i * COLUMN_SUM_WARPS) * M + m]; }
    }
    float acc = 0.0f;
#pragma unroll
    for (int i = 0; i < COLUMN_SUM_LANES; i++) { acc += sums[i]; }
    warp_sums[w][lane] = acc;
    __syncthreads();
    if (w == 0 && m < M) {
        float total = 0.0f;
        for (int i = 0; i < COLUMN_SUM_WARPS; i++) { total += warp_sums[i][lane]; }
        floatX *out = m < split ? out0 + m : out1 + (m - split);
        *out = __float2bfloat16(__bfloat162float(*out) + total);
    }
}

// out0 (split) and out1 (M - split; may be NULL when split == M): bf16, accumulated (+=).
// partials: (P, M) fp32, as written by a first-stage kernel. No scratch.
static inline void column_partials_accumulate(floatX *out0, floatX *out1, int split, const float *partials, int P,
                                              int M, cudaStream_t stream) {
    cudaRequire(P > 0 && M > 0 && split >= 0 && split <= M, "P = %d, M = %d, split = %d", P, M, split);
    cudaRequire(out1 != NULL || split == M, "out1 is NULL but split = %d < M = %d", split, M);
    dim3 block(WARP_SIZE, COLUMN_SUM_WARPS);
    column_partials_accumulate_kernel<<<CEIL_DIV(M, WARP_SIZE), block, 0, stream>>>(out0, out1, split, partials, P, M);
    cudaCheckLaunch();
}

// ----------------------------------------------------------------------------
// elementwise bf16

static __global__ void add_bf16_kernel(floatX *out, const floatX *a, const floatX *b, size_t n8) {
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n8) { return; }
    x128 x = load128cs(a + i * 8), y = load128cs(b + i * 8), z;
    for (int k = 0; k < 8; k++) { z[k] = __float2bfloat16(__bfloat162float(x[k]) + __bfloat162float(y[k])); }
    store128(out + i * 8, z);
}

// out (n) = a + b, bf16, rounded to nearest once; out may be a or b (a residual add, or a gradient
// accumulated: += b). n a multiple of 8, pointers 16-byte aligned.
static inline void add_bf16(floatX *out, const floatX *a, const floatX *b, size_t n, cudaStream_t stream) {
    cudaRequire(n % 8 == 0 && is_aligned16(out) && is_aligned16(a) && is_aligned16(b),
                "n = %zu must be a multiple of 8, pointers 16-byte aligned", n);
    if (n == 0) { return; }
    add_bf16_kernel<<<grid_for(n / 8, 256), 256, 0, stream>>>(out, a, b, n / 8);
    cudaCheckLaunch();
}

// ----------------------------------------------------------------------------
// conversions between bf16 and fp32 buffers (master weights, checkpoints)

static __global__ void cast_bf16_to_fp32_kernel(float *out, const floatX *in, size_t n) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { out[i] = __bfloat162float(in[i]); }
}

static __global__ void cast_fp32_to_bf16_kernel(floatX *out, const float *in, size_t n) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { out[i] = __float2bfloat16(in[i]); }  // round to nearest even
}

// out (n) fp32 = in (n) bf16, exact. Overwrites out.
static inline void cast_bf16_to_fp32(float *out, const floatX *in, size_t n, cudaStream_t stream) {
    if (n == 0) { return; }
    cast_bf16_to_fp32_kernel<<<grid_for(n, 512), 512, 0, stream>>>(out, in, n);
    cudaCheckLaunch();
}

// out (n) bf16 = in (n) fp32, rounded to nearest even. Overwrites out.
static inline void cast_fp32_to_bf16(floatX *out, const float *in, size_t n, cudaStream_t stream) {
    if (n == 0) { return; }
    cast_fp32_to_bf16_kernel<<<grid_for(n, 512), 512, 0, stream>>>(out, in, n);
    cudaCheckLaunch();
}

#endif  // LLMC_CUDA_COMMON_CUH
