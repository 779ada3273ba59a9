/*
 * The classifier head after the LM-head matmul: softmax over the V real tokens, cross-entropy
 * loss per token, and the logit gradient, in one kernel that reads each row of bf16 logits twice
 * and writes the gradient over it. No fp32 logits or probabilities tensor is ever stored.
 *
 * Per row (one block of CLASSIFIER_THREADS threads):
 *   1. each thread keeps an online (max, sum of exp) over its 8-wide chunks of the row, in
 *      order; the block takes the max M, rescales every thread's sum to M and adds them
 *      (fixed reduction trees: deterministic);
 *   2. loss = log(S) + M - logit[target]; with the gradient mode, every column c < V becomes
 *      (exp(logit - M) / S - [c == target]) * dloss and the padded columns V..Vp-1 become 0.
 * Step 2 reads the row again: keeping it in shared memory between the steps (98 KiB at GPT-2's
 * vocabulary, one read instead of two) took 1.09x as long on an H200 (0.6104 against 0.5607 ms at
 * d12 B=8, T=1024; dev/bench/RESULTS.md, 2026-11-27), so it went.
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

static __global__ void __launch_bounds__(CLASSIFIER_THREADS)
fused_classifier_kernel(floatX *logits, float *losses, float dloss, const int *targets, int V, int Vp, int write_dlogits) {
    __shared__ float shared[WARP_SIZE];
    const size_t row = blockIdx.x;
    floatX *x = logits + row * Vp;
    const int target = targets[row];
    // read before any thread can overwrite it (the reductions below are barriers)
    const float x_target = __bfloat162float(x[target]);

    // 1. max and sum of exp
    float m = -INFINITY, s = 0.0f;
    const int full_chunks = V / 8;  // chunks entirely below V
    for (int ch = threadIdx.x; ch < full_chunks; ch += blockDim.x) {
        x128 v = load128(x + ch * 8);  // cached for step 2's second read
        for (int k = 0; k < 8; k++) { online_softmax_add(__bfloat162float(v[k]), m, s); }
    }
    if (threadIdx.x < V % 8) { online_softmax_add(__bfloat162float(x[full_chunks * 8 + threadIdx.x]), m, s); }
    const float M = block_reduce_max(m, shared);
    const float scaled = (m == -INFINITY) ? 0.0f : s * __expf(m - M);
    const float S = block_reduce_sum(scaled, shared);
    if (threadIdx.x == 0) { losses[row] = logf(S) + M - x_target; }
    if (!write_dlogits) { return; }

    // 2. the gradient, over the padded row
    const float inv_S = 1.0f / S;
    for (int ch = threadIdx.x; ch < Vp / 8; ch += blockDim.x) {
        const int c0 = ch * 8;
        x128 g = x128::zeros();
        if (c0 < V) {
            x128 v = load128cs(x + c0);
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
    const int N = B * T;
    cudaRequire(N > 0 && V > 0 && V <= Vp && Vp % 8 == 0, "B = %d, T = %d, V = %d, Vp = %d: need 0 < V <= Vp, Vp %% 8 == 0",
                B, T, V, Vp);
    cudaRequire(is_aligned16(logits), "logits must be 16-byte aligned");
    fused_classifier_kernel<<<N, CLASSIFIER_THREADS, 0, stream>>>(logits, losses, dloss, targets, V, Vp, write_dlogits);
    cudaCheckLaunch();
}

// acc[0] (one fp32 on the device) += scale * sum of losses (N): e.g. scale = 1/(B*T) adds this
// micro-batch's mean loss, so a step's loss is read back once. Deterministic order. No scratch.
static inline void loss_sum_accumulate(float *acc, const float *losses, int N, float scale, cudaStream_t stream) {
    cudaRequire(N > 0, "N = %d", N);
    loss_sum_accumulate_kernel<<<1, LOSS_SUM_THREADS, 0, stream>>>(acc, losses, N, scale);
    cudaCheckLaunch();
}

#endif  // LLMC_FUSED_CLASSIFIER_CUH
