/*
 * The global L2 norm of the gradients (the training loop reads it on the host: the numeric guards,
 * the step line and the clip scale of llmc/optimizer.h need it there).
 *
 * norm^2 = sum of squares of all bf16 gradients, in fp32, in a fixed order that depends only on
 * the element count and the pointer's alignment (never on the GPU):
 *   stage 1: G = global_norm_blocks(n) blocks of 512 threads; thread j of the grid sums the
 *            squares (fused multiply-add) of its units j, j + 512G, j + 2*512G, ... in increasing
 *            order, a unit being 8 consecutive elements (a 16-byte load, when the pointer is
 *            16-byte aligned and n % 8 == 0) or one element otherwise; then block_reduce_sum.
 *   stage 2: one block of 512 threads: thread j sums partials j, j + 512 in order; block_reduce_sum.
 * A non-finite gradient makes norm^2 non-finite (inf^2 = inf, NaN propagates), which is the
 * numeric guard's signal (llmc/guard.h skips the step).
 */
#ifndef LLMC_GLOBAL_NORM_CUH
#define LLMC_GLOBAL_NORM_CUH

#include "cuda_common.cuh"

#define GLOBAL_NORM_THREADS 512
#define GLOBAL_NORM_MAX_BLOCKS 1024

// ----------------------------------------------------------------------------
// kernels

template <bool VECTOR>
static __global__ void __launch_bounds__(GLOBAL_NORM_THREADS)
global_norm_partials_kernel(float *partials, const floatX *grads, size_t n) {
    __shared__ float shared[WARP_SIZE];
    const size_t units = VECTOR ? n / 8 : n;
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    float acc = 0.0f;
    for (size_t u = (size_t)blockIdx.x * blockDim.x + threadIdx.x; u < units; u += stride) {
        if (VECTOR) {
            x128 g = load128cs(grads + u * 8);
            for (int k = 0; k < 8; k++) {
                const float f = __bfloat162float(g[k]);
                acc = __fmaf_rn(f, f, acc);
            }
        } else {
            const float f = __bfloat162float(grads[u]);
            acc = __fmaf_rn(f, f, acc);
        }
    }
    acc = block_reduce_sum(acc, shared);
    if (threadIdx.x == 0) { partials[blockIdx.x] = acc; }
}

static __global__ void __launch_bounds__(GLOBAL_NORM_THREADS)
global_norm_final_kernel(float *norm2, const float *partials, int count) {
    __shared__ float shared[WARP_SIZE];
    float acc = 0.0f;
    for (int i = threadIdx.x; i < count; i += blockDim.x) { acc += partials[i]; }
    acc = block_reduce_sum(acc, shared);
    if (threadIdx.x == 0) { norm2[0] = acc; }
}

// ----------------------------------------------------------------------------
// launchers

static inline int global_norm_vectorized(const floatX *grads, size_t n) { return is_aligned16(grads) && n % 8 == 0; }

// blocks of stage 1 (one per 512 units, at most 1024): a function of n and alignment only
static inline int global_norm_blocks(const floatX *grads, size_t n) {
    const size_t units = global_norm_vectorized(grads, n) ? n / 8 : n;
    size_t blocks = CEIL_DIV(units, (size_t)GLOBAL_NORM_THREADS);
    if (blocks > GLOBAL_NORM_MAX_BLOCKS) { blocks = GLOBAL_NORM_MAX_BLOCKS; }
    return blocks > 0 ? (int)blocks : 1;
}

// fp32 scratch bytes for global_norm_squared
static inline size_t global_norm_scratch_bytes(void) { return GLOBAL_NORM_MAX_BLOCKS * sizeof(float); }

/*
 * norm2[0] (one fp32 on the device) = sum of squares of grads (n bf16), overwritten.
 * scratch: global_norm_scratch_bytes() bytes. With ZeRO, call it on the rank's shard and
 * all-reduce norm2 (a sum).
 */
static inline void global_norm_squared(float *norm2, const floatX *grads, size_t n, float *scratch, cudaStream_t stream) {
    cudaRequire(scratch != NULL && norm2 != NULL, "norm2 and scratch must be given");
    const int blocks = global_norm_blocks(grads, n);
    if (global_norm_vectorized(grads, n)) {
        global_norm_partials_kernel<true><<<blocks, GLOBAL_NORM_THREADS, 0, stream>>>(scratch, grads, n);
    } else {
        global_norm_partials_kernel<false><<<blocks, GLOBAL_NORM_THREADS, 0, stream>>>(scratch, grads, n);
    }
    cudaCheckLaunch();
    global_norm_final_kernel<<<1, GLOBAL_NORM_THREADS, 0, stream>>>(norm2, scratch, blocks);
    cudaCheckLaunch();
}

#endif  // LLMC_GLOBAL_NORM_CUH
