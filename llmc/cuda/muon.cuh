/*
 * Muon on the GPU (-opt muon): the algorithm, its sources, the Newton-Schulz coefficients and the
 * scaling rule are in llmc/muon.h; this is its CUDA form, for `count` matrices of one Muon tensor
 * (rows x cols each, consecutive in the flat parameter array, e.g. qkvw of layers l0 .. l0+count-1):
 *   1. muon_momentum_kernel: buf = mu buf + g, U = g + mu buf (fp32), and per block a partial sum
 *      of U^2 over a fixed set of the matrix's elements (grid (muon_norm_blocks(n), count): an
 *      order fixed by the shape)
 *   2. muon_norm_kernel: per matrix, inv = 1 / (sqrt(sum of its partials) + eps)
 *   3. muon_normalize_kernel: X = bf16(U inv), in the parameters' layout
 *   4. Newton-Schulz in bf16 through cuBLASLt (fp32 accumulation), batched over the count matrices
 *      (one shape, strided): A = X X^T, B = b A + c A A, X = a X + B X on the wide orientation.
 *      A row-major (rows, cols) array is the column-major cols x rows matrix: for a wide matrix
 *      the wide X is its transpose, for a tall one it is the column-major view itself, so the
 *      transposes are operation flags and nothing is stored transposed
 *   5. muon_apply_kernel: p -= lr (scale O + wd p) into the fp32 master weights (or the bf16
 *      parameters), the bf16 parameters stochastically rounded with bits keyed to the element's
 *      index, as llmc/cuda/adamw.cuh rounds them (same seed, disjoint indices)
 * State: buf is this rank's slice of the m buffer (AdamW's first moment elsewhere). Scratch: one
 * device buffer of muon_scratch_bytes(C) bytes, for up to MUON_BATCH matrices at a time.
 */
#ifndef LLMC_MUON_CUH
#define LLMC_MUON_CUH

#include "cuda_common.cuh"
#include "cublas_common.cuh"
#include "adamw.cuh"
#include "../muon.h"
#include "../optimizer.h"

#define MUON_THREADS 512
#define MUON_NORM_BLOCKS 64  // per matrix at most, stage 1 of the norm (muon_norm_blocks: its summation order)
#define MUON_BATCH 12        // matrices per Newton-Schulz batch (all of a d12 tensor); bounds the scratch

// ----------------------------------------------------------------------------
// kernels

// 1. grid (blocks, count): buf (count * n) = mu buf + g, partials[j][block] = sum of U^2
static __global__ void __launch_bounds__(MUON_THREADS)
muon_momentum_kernel(float *buf, float *partials, const floatX *grads, size_t n, float mu, float grad_scale) {
    __shared__ float shared[WARP_SIZE];
    const size_t j = blockIdx.y, stride = (size_t)gridDim.x * blockDim.x;
    float *b = buf + j * n;
    const floatX *g = grads + j * n;
    float acc = 0.0f;
    for (size_t e = (size_t)blockIdx.x * blockDim.x + threadIdx.x; e < n; e += stride) {
        const float gi = __bfloat162float(g[e]) * grad_scale, bi = mu * b[e] + gi, u = gi + mu * bi;
        b[e] = bi;
        acc = __fmaf_rn(u, u, acc);
    }
    acc = block_reduce_sum(acc, shared);
    if (threadIdx.x == 0) { partials[j * gridDim.x + blockIdx.x] = acc; }
}

// 2. one block per matrix: inv[j] = 1 / (||U_j||_F + eps)
static __global__ void __launch_bounds__(MUON_THREADS) muon_norm_kernel(float *inv, const float *partials, int blocks) {
    __shared__ float shared[WARP_SIZE];
    float acc = 0.0f;
    for (int i = threadIdx.x; i < blocks; i += blockDim.x) { acc += partials[blockIdx.x * blocks + i]; }
    acc = block_reduce_sum(acc, shared);
    if (threadIdx.x == 0) { inv[blockIdx.x] = 1.0f / (sqrtf(acc) + MUON_NORM_EPS); }
}

// 3. X (count * n) = bf16((g + mu buf) inv[matrix]), buf already updated
static __global__ void __launch_bounds__(MUON_THREADS)
muon_normalize_kernel(floatX *X, const float *buf, const floatX *grads, const float *inv, size_t n, size_t total, float mu,
                      float grad_scale) {
    const size_t k = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= total) { return; }
    const float u = __bfloat162float(grads[k]) * grad_scale + mu * buf[k];
    X[k] = __float2bfloat16(u * inv[k / n]);
}

// 5. params[base + k] (and master[k]) -= lr (scale O[k] + wd p) for k < total
static __global__ void __launch_bounds__(MUON_THREADS)
muon_apply_kernel(floatX *params, float *master, const floatX *O, size_t base, size_t total, float lr, float scale,
                  float wd, unsigned int seed) {
    const size_t k = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= total) { return; }
    const size_t i = base + k;
    const float p = master ? master[k] : __bfloat162float(params[i]);
    const float p_new = p - lr * (scale * __bfloat162float(O[k]) + wd * p);
    if (master) { master[k] = p_new; }
    params[i] = stochastic_round_bf16(p_new, random_u32(seed, (unsigned int)i, (unsigned int)(i >> 32)));
}

// ----------------------------------------------------------------------------
// launchers

// blocks per matrix of the norm's stage 1: one per 8192 elements, at most MUON_NORM_BLOCKS; a
// function of the matrix size only, so the summation order never depends on the device
static inline int muon_norm_blocks(size_t n) {
    const size_t b = CEIL_DIV(n, (size_t)MUON_THREADS * 16);
    return b < 1 ? 1 : b > MUON_NORM_BLOCKS ? MUON_NORM_BLOCKS : (int)b;
}

// the Newton-Schulz buffers of MUON_BATCH matrices of the largest Muon shape (C x 4C): X and the
// next X (bf16), A and B (bf16, C x C each), and the norm's partials and inverses (fp32)
static inline size_t muon_scratch_bytes(int C) {
    const size_t n = 4 * (size_t)C * C, rr = (size_t)C * C;
    return MUON_BATCH * ((2 * n + 2 * rr) * sizeof(floatX) + (MUON_NORM_BLOCKS + 1) * sizeof(float)) + 4 * 256;
}

// where muon_update's buffers lie in the scratch (each 256-byte aligned)
typedef struct {
    floatX *X, *Xn, *A, *B;
    float *partials, *inv;
} MuonScratch;

static inline MuonScratch muon_scratch_split(void *scratch, int C) {
    const size_t n = 4 * (size_t)C * C, rr = (size_t)C * C;
    const size_t xb = (MUON_BATCH * n * sizeof(floatX) + 255) / 256 * 256, ab = (MUON_BATCH * rr * sizeof(floatX) + 255) / 256 * 256;
    char *p = (char *)scratch;
    MuonScratch s;
    s.X = (floatX *)p; p += xb;
    s.Xn = (floatX *)p; p += xb;
    s.A = (floatX *)p; p += ab;
    s.B = (floatX *)p; p += ab;
    s.partials = (float *)p; p += (MUON_BATCH * MUON_NORM_BLOCKS * sizeof(float) + 255) / 256 * 256;
    s.inv = (float *)p;
    return s;
}

/*
 * steps of the quintic Newton-Schulz iteration on count (<= MUON_BATCH) matrices rows x cols of X
 * (row-major, n = rows * cols apart), in place (X and Xn swap; the result is copied back into X
 * when it ends in Xn). A and B: count * r * r scratch, r = min(rows, cols).
 */
static inline void muon_newton_schulz(floatX *X, floatX *Xn, floatX *A, floatX *B, int rows, int cols, int count, int steps,
                                      cudaStream_t stream) {
    const int tall = rows > cols, r = tall ? cols : rows, c = tall ? rows : cols;
    const size_t n = (size_t)rows * cols, rr = (size_t)r * r;
    floatX *x = X, *xn = Xn;
    for (int k = 0; k < steps; k++) {
        // A = X X^T (r x r): wide X = Y^T with Y the column-major (c x r) view, or the view itself when tall
        if (tall) {
            matmul_cublaslt(A, x, x, NULL, r, r, c, 0, 1, 1.0f, 0.0f, count, n, n, rr, MATMUL_PLAIN, NULL, stream);
        } else {
            matmul_cublaslt(A, x, x, NULL, r, r, c, 1, 0, 1.0f, 0.0f, count, n, n, rr, MATMUL_PLAIN, NULL, stream);
        }
        // B = b A + c A A (A symmetric, so layouts agree)
        cudaCheck(cudaMemcpyAsync(B, A, count * rr * sizeof(floatX), cudaMemcpyDeviceToDevice, stream));
        matmul_cublaslt(B, A, A, NULL, r, r, r, 0, 0, MUON_NS_C, MUON_NS_B, count, rr, rr, rr, MATMUL_PLAIN, NULL, stream);
        // X' = a X + B X: column-major, wide case Y' = Y B (B symmetric), tall case W' = B W
        cudaCheck(cudaMemcpyAsync(xn, x, count * n * sizeof(floatX), cudaMemcpyDeviceToDevice, stream));
        if (tall) {
            matmul_cublaslt(xn, B, x, NULL, r, c, r, 0, 0, 1.0f, MUON_NS_A, count, rr, n, n, MATMUL_PLAIN, NULL, stream);
        } else {
            matmul_cublaslt(xn, x, B, NULL, c, r, r, 0, 0, 1.0f, MUON_NS_A, count, n, rr, n, MATMUL_PLAIN, NULL, stream);
        }
        floatX *t = x; x = xn; xn = t;
    }
    if (x != X) { cudaCheck(cudaMemcpyAsync(X, x, count * n * sizeof(floatX), cudaMemcpyDeviceToDevice, stream)); }
}

/*
 * Muon on `count` matrices rows x cols of one Muon tensor, starting at flat parameter index base:
 *   params, grads (total) bf16  the full flat arrays (params[base ..] updated, grads read)
 *   buf (count * rows * cols)    fp32 momentum of these matrices (this rank's m slice), updated
 *   master (same) or NULL        fp32 master weights of these matrices, updated; NULL: params read
 *   o                            the step's settings: muon_lr, muon_momentum, muon_ns_steps,
 *                                weight_decay, grad_scale, seed
 *   scratch                      muon_scratch_bytes(C) bytes for the model's width C
 * Any count (batches of MUON_BATCH); rows and cols multiples of 8 (the tensor-core GEMMs). No host sync.
 */
static inline void muon_update(floatX *params, const floatX *grads, float *buf, float *master, size_t base, int rows,
                               int cols, int count, int C, const OptSettings *o, void *scratch, cudaStream_t stream) {
    cudaRequire(rows % 8 == 0 && cols % 8 == 0 && rows > 0 && cols > 0, "rows = %d, cols = %d: multiples of 8", rows, cols);
    cudaRequire((size_t)rows * cols <= 4 * (size_t)C * C && (rows <= C || cols <= C),
                "a %d x %d matrix exceeds the scratch sized for C = %d", rows, cols, C);
    cudaRequire(o->muon_ns_steps >= 1 && o->muon_momentum >= 0.0f && o->muon_momentum < 1.0f,
                "ns_steps = %d, momentum = %g", o->muon_ns_steps, o->muon_momentum);
    const MuonScratch s = muon_scratch_split(scratch, C);
    const size_t n = (size_t)rows * cols;
    const float scale = muon_scale(rows, cols);
    for (int j0 = 0; j0 < count; j0 += MUON_BATCH) {
        const int cnt = count - j0 < MUON_BATCH ? count - j0 : MUON_BATCH;
        const size_t off = (size_t)j0 * n, total = (size_t)cnt * n;
        const floatX *g = grads + base + off;
        float *b = buf + off;
        const int blocks = muon_norm_blocks(n);
        muon_momentum_kernel<<<dim3(blocks, cnt), MUON_THREADS, 0, stream>>>(b, s.partials, g, n, o->muon_momentum,
                                                                            o->grad_scale);
        cudaCheckLaunch();
        muon_norm_kernel<<<cnt, MUON_THREADS, 0, stream>>>(s.inv, s.partials, blocks);
        cudaCheckLaunch();
        muon_normalize_kernel<<<grid_for(total, MUON_THREADS), MUON_THREADS, 0, stream>>>(s.X, b, g, s.inv, n, total,
                                                                                          o->muon_momentum, o->grad_scale);
        cudaCheckLaunch();
        muon_newton_schulz(s.X, s.Xn, s.A, s.B, rows, cols, cnt, o->muon_ns_steps, stream);
        muon_apply_kernel<<<grid_for(total, MUON_THREADS), MUON_THREADS, 0, stream>>>(
            params, master ? master + off : NULL, s.X, base + off, total, o->muon_lr, scale, o->weight_decay,
            adamw_seed32(o->seed));
        cudaCheckLaunch();
    }
}

#endif  // LLMC_MUON_CUH
