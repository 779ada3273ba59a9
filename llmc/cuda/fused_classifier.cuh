/*
 * The classifier head after the LM-head matmul: softmax over the V real tokens, cross-entropy
 * loss per token, and the logit gradient, in one kernel that reads each row of bf16 logits from
 * memory once and writes the gradient over it. No fp32 logits or probabilities tensor is ever stored.
 *
 * Per row (one block of CLASSIFIER_THREADS threads):
 *   1. each thread keeps an online (max, sum of exp) over its 8-wide chunks of the row, in
 *      order; the block takes the max M, rescales every thread's sum to M and adds them
 *      (fixed reduction trees: deterministic);
 *   2. loss = log(S) + M - logit[target]; with the gradient mode, every column c < V becomes
 *      (exp(logit - M) / S - [c == target]) * dloss and the padded columns V..Vp-1 become 0.
 * With the gradient mode, step 1 also keeps the row's chunks in shared memory (V * 2 bytes: 98
 * KiB for GPT-2's vocabulary), from which step 2 reads them: one read of the logits from memory
 * instead of two. Where two such blocks do not fit on an SM (an A100 at GPT-2's vocabulary), the
 * row is read twice (row_in_smem false), with the same results bit for bit.
 * All math is fp32; logits, targets and losses are indexed by row = b*T + t.
 */
#ifndef LLMC_FUSED_CLASSIFIER_CUH
#define LLMC_FUSED_CLASSIFIER_CUH

#include "cuda_common.cuh"

#define CLASSIFIER_THREADS 1024
#define LOSS_SUM_THREADS 1024

// ----------------------------------------------------------------------------
// kernels

__device__ __forceinline__ void online_softmax_add(float x, float &m, float &s) {
    if (x > m) {
        s = s * __expf(m - x) + 1.0f;  // m = -inf at the start: exp(-inf) = 0
        m = x;
    } else {
        s += __expf(x - m);
    }
}

template <bool row_in_smem>
static __global__ void __launch_bounds__(CLASSIFIER_THREADS)
fused_classifier_kernel(floatX *logits, float *losses, float dloss, const int *targets, int V, int Vp, int write_dlogits) {
    __shared__ float shared[WARP_SIZE];
    extern __shared__ x128 row_chunks[];  // row_in_smem: the chunks below V / 8 * 8 of this row
    const size_t row = blockIdx.x;
    floatX *x = logits + row * Vp;
    const int target = targets[row];
    // read before any thread can overwrite it (the reductions below are barriers)
    const float x_target = __bfloat162float(x[target]);

    // 1. max and sum of exp
    float m = -INFINITY, s = 0.0f;
    const int full_chunks = V / 8;  // chunks entirely below V
    for (int ch = threadIdx.x; ch < full_chunks; ch += blockDim.x) {
        // kept in smem: streamed past the caches; else cached for step 2's second read
        x128 v = row_in_smem ? load128cs(x + ch * 8) : load128(x + ch * 8);
        if (row_in_smem) { row_chunks[ch] = v; }
        for (int k = 0; k < 8; k++) { online_softmax_add(__bfloat162float(v[k]), m, s); }
    }
    if (threadIdx.x < V % 8) { online_softmax_add(__bfloat162float(x[full_chunks * 8 + threadIdx.x]), m, s); }
    const float M = block_reduce_max(m, shared);
    const float scaled = (m == -INFINITY) ? 0.0f : s * __expf(m - M);
    const float S = block_reduce_sum(scaled, shared);
    if (threadIdx.x == 0) { losses[row] = logf(S) + M - x_target; }
    if (!write_dlogits) { return; }

    // 2. the gradient, over the padded row; each thread's chunks are those it kept in step 1
    // (the same ch), and the one chunk that straddles V is read again from memory
    const float inv_S = 1.0f / S;
    for (int ch = threadIdx.x; ch < Vp / 8; ch += blockDim.x) {
        const int c0 = ch * 8;
        x128 g = x128::zeros();
        if (c0 < V) {
            x128 v = row_in_smem && ch < full_chunks ? row_chunks[ch] : load128cs(x + c0);
            for (int k = 0; k < 8; k++) {
                const int c = c0 + k;
                if (c < V) {
                    float p = __expf(__bfloat162float(v[k]) - M) * inv_S;
                    g[k] = __float2bfloat16((p - (c == target ? 1.0f : 0.0f)) * dloss);
                }
            }
        }
        store128cs(x + c0, g);
    }
}

// acc[0] += scale * sum(losses), one block, fixed order: thread t sums t, t+1024, ..., then the block tree
static __global__ void __launch_bounds__(LOSS_SUM_THREADS)
loss_sum_accumulate_kernel(float *acc, const float *losses, int N, float scale) {
    __shared__ float shared[WARP_SIZE];
    float s = 0.0f;
    for (int i = threadIdx.x; i < N; i += blockDim.x) { s += losses[i]; }
    s = block_reduce_sum(s, shared);
    if (threadIdx.x == 0) { acc[0] += scale * s; }
}

// ----------------------------------------------------------------------------
// launchers

// shared memory bytes of a row's chunks below V (the gradient mode keeps them)
static inline size_t fused_classifier_row_bytes(int V) { return (size_t)(V / 8) * sizeof(x128); }

// A block's shared memory beside the row: its static reduction array, and the 1 KiB per block
// that CUDA reserves on sm_80 and newer
#define CLASSIFIER_SMEM_OVERHEAD (WARP_SIZE * sizeof(float) + 1024)

// whether the row is kept in shared memory: where two such blocks fit on an SM, as two of the
// two-read kernel's (1024 threads each) run, so occupancy stays as it was: GPT-2's vocabulary on an
// H100 or H200 (228 KiB per SM), not on an A100 (164 KiB), which reads the row twice
static inline int fused_classifier_keeps_row(int V, size_t optin_per_block, size_t per_sm) {
    const size_t block = fused_classifier_row_bytes(V) + CLASSIFIER_SMEM_OVERHEAD;
    return fused_classifier_row_bytes(V) <= optin_per_block && 2 * block <= per_sm;
}
static inline int fused_classifier_row_fits(int V) {
    static int optin = -1, per_sm = -1;  // the GPU's limits, asked once (each launch needs them)
    if (optin < 0) {
        optin = max_dynamic_smem_optin();
        per_sm = device_attribute(cudaDevAttrMaxSharedMemoryPerMultiprocessor);
    }
    return fused_classifier_keeps_row(V, (size_t)optin, (size_t)per_sm);
}

// fused_classifier with the variant named: keep_row (with write_dlogits, where the row fits) keeps
// each row in shared memory between the two steps, else step 2 reads it again from memory
static inline void fused_classifier_launch(floatX *logits, float *losses, float dloss, const int *targets, int B, int T,
                                           int V, int Vp, int write_dlogits, int keep_row, cudaStream_t stream) {
    const int N = B * T;
    cudaRequire(N > 0 && V > 0 && V <= Vp && Vp % 8 == 0, "B = %d, T = %d, V = %d, Vp = %d: need 0 < V <= Vp, Vp %% 8 == 0",
                B, T, V, Vp);
    cudaRequire(is_aligned16(logits), "logits must be 16-byte aligned");
    cudaRequire(!keep_row || (write_dlogits && fused_classifier_row_fits(V)),
                "keep_row needs the gradient mode and shared memory for V = %d", V);
    if (keep_row) {
        const size_t smem = fused_classifier_row_bytes(V);
        cudaCheck(cudaFuncSetAttribute(fused_classifier_kernel<true>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
        fused_classifier_kernel<true><<<N, CLASSIFIER_THREADS, smem, stream>>>(logits, losses, dloss, targets, V, Vp, 1);
    } else {
        fused_classifier_kernel<false><<<N, CLASSIFIER_THREADS, 0, stream>>>(logits, losses, dloss, targets, V, Vp,
                                                                             write_dlogits);
    }
    cudaCheckLaunch();
}

/*
 * logits (B*T, Vp) bf16: read; with write_dlogits = 1 overwritten by the logit gradient
 *     dlogits = (softmax(logits[:V]) - onehot(target)) * dloss, and 0 in the padded columns;
 *     with write_dlogits = 0 (validation, evaluation) left unchanged.
 * losses (B*T) fp32: overwritten with -log softmax(logits)[target] per token.
 * dloss: d(step loss)/d(token loss), e.g. 1 / (B*T*grad_accum*world_size).
 * targets (B*T) int32 on the device, each in [0, V).
 * Requires Vp a multiple of 8, 0 < V <= Vp, logits 16-byte aligned. No scratch.
 */
static inline void fused_classifier(floatX *logits, float *losses, float dloss, const int *targets, int B, int T, int V,
                                    int Vp, int write_dlogits, cudaStream_t stream) {
    const int keep_row = write_dlogits && fused_classifier_row_fits(V);
    fused_classifier_launch(logits, losses, dloss, targets, B, T, V, Vp, write_dlogits, keep_row, stream);
}

// acc[0] (one fp32 on the device) += scale * sum of losses (N): e.g. scale = 1/(B*T) adds this
// micro-batch's mean loss, so a step's loss is read back once. Deterministic order. No scratch.
static inline void loss_sum_accumulate(float *acc, const float *losses, int N, float scale, cudaStream_t stream) {
    cudaRequire(N > 0, "N = %d", N);
    loss_sum_accumulate_kernel<<<1, LOSS_SUM_THREADS, 0, stream>>>(acc, losses, N, scale);
    cudaCheckLaunch();
}

#endif  // LLMC_FUSED_CLASSIFIER_CUH
