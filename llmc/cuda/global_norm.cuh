/*
 * The global L2 norm of the gradients (the training loop reads it on the host: the numeric guards,
 * the step line and the clip scale of llmc/optimizer.h need it there).
 *
 * norm^2 = the sum, in double on the host and in chunk order, of each chunk's fp32 sum of squares.
 * The chunks are fixed by the model (gpt2_norm_chunks, llmc/model_io.h: cuts at every multiple of
 * GRAD_NORM_CHUNK and at every tensor's layer slice), and so is the order within a chunk:
 *   one block of 512 threads per chunk; thread j sums the squares (fused multiply-add) of the
 *   chunk's units j, j + 512, j + 1024, ... in increasing order, a unit being 8 consecutive
 *   elements (a 16-byte load, where the chunk's start and length are multiples of 8 and the array
 *   is 16-byte aligned) or one element otherwise; then block_reduce_sum.
 * So a chunk's sum depends on nothing but its gradients: with ZeRO-1 each rank sums the chunks of
 * its shard (whole chunks, llmc/cuda/grad_reduce.cuh), the ranks' sums are put together, and the
 * norm is bitwise the one a single process computes from the same gradients, on any number of ranks.
 * A non-finite gradient makes norm^2 non-finite (inf^2 = inf, NaN propagates), which is the
 * numeric guard's signal (llmc/guard.h skips the step).
 */
#ifndef LLMC_GLOBAL_NORM_CUH
#define LLMC_GLOBAL_NORM_CUH

#include <limits.h>
#include "cuda_common.cuh"

#define GLOBAL_NORM_THREADS 512

// ----------------------------------------------------------------------------
// kernel: block b sums the squares of chunk c = first + b, [starts[c], starts[c + 1]), into sums[c];
// aligned: grads is 16-byte aligned

static __global__ void __launch_bounds__(GLOBAL_NORM_THREADS)
global_norm_chunks_kernel(float *sums, const floatX *grads, const size_t *starts, size_t first, int aligned) {
    __shared__ float shared[WARP_SIZE];
    const size_t c = first + blockIdx.x, lo = starts[c], hi = starts[c + 1];
    float acc = 0.0f;
    if (aligned && lo % 8 == 0 && hi % 8 == 0) {  // the same for every thread of the block
        for (size_t u = lo / 8 + threadIdx.x; u < hi / 8; u += blockDim.x) {
            x128 g = load128cs(grads + u * 8);
            for (int k = 0; k < 8; k++) {
                const float f = __bfloat162float(g[k]);
                acc = __fmaf_rn(f, f, acc);
            }
        }
    } else {
        for (size_t i = lo + threadIdx.x; i < hi; i += blockDim.x) {
            const float f = __bfloat162float(grads[i]);
            acc = __fmaf_rn(f, f, acc);
        }
    }
    acc = block_reduce_sum(acc, shared);
    if (threadIdx.x == 0) { sums[c] = acc; }
}

// ----------------------------------------------------------------------------
// launcher and the host's total

// fp32 scratch bytes for global_norm_chunk_sums over `chunks` chunks
static inline size_t global_norm_scratch_bytes(size_t chunks) { return (chunks > 0 ? chunks : 1) * sizeof(float); }

/*
 * sums[c] (fp32, device) = the sum of squares of grads over chunk c, for chunks [first, first + count)
 * of the boundary table starts (device, chunks + 1 entries, gpt2_norm_chunks); grads is the whole
 * flat array. Other entries of sums are left alone.
 */
static inline void global_norm_chunk_sums(float *sums, const floatX *grads, const size_t *starts, size_t first,
                                          size_t count, cudaStream_t stream) {
    cudaRequire(sums != NULL && starts != NULL, "sums and starts must be given");
    if (count == 0) { return; }
    cudaRequire(count <= (size_t)INT_MAX, "%zu chunks exceed one launch", count);
    global_norm_chunks_kernel<<<(unsigned)count, GLOBAL_NORM_THREADS, 0, stream>>>(sums, grads, starts, first,
                                                                                 is_aligned16(grads));
    cudaCheckLaunch();
}

// norm^2 from the chunks' sums: added in double, in chunk order
static inline double global_norm_total(const double *sums, size_t chunks) {
    double total = 0.0;
    for (size_t c = 0; c < chunks; c++) { total += sums[c]; }
    return total;
}

#endif  // LLMC_GLOBAL_NORM_CUH
