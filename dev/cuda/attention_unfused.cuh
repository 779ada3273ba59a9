/*
 * The unfused attention: the test oracle of the fused kernels of llmc/cuda/attention.cuh (same launcher
 * contract, any head size), in simple fp32 kernels whose correctness is evident. Used by the
 * attention workbench (attention.cu, on a GPU) and the attention simulator test (attention_sim.cpp);
 * the trainer never runs it.
 *
 * Shapes and conventions as in llmc/cuda/attention.cuh: qkv (B, T, 3C), out (B, T, C), lse (B, NH, T),
 * dqkv (B, T, 3C); causal, scale 1/sqrt(HS). Scratch: (B, NH, T, T) fp32 scores / probabilities,
 * and for the backward also dS.
 */
#ifndef DEV_CUDA_ATTENTION_UNFUSED_CUH
#define DEV_CUDA_ATTENTION_UNFUSED_CUH

#include "llmc/cuda/attention.cuh"

// ----------------------------------------------------------------------------
// kernels: fp32 scores and probabilities in a (B, NH, T, T) scratch, plain loops

// att[b, h, t, s] = scale * q_t . k_s for s <= t, -inf above the diagonal
static __global__ void attention_scores_unfused_kernel(float *att, const floatX *qkv, int B, int T, int NH, int HS,
                                                       float scale) {
    const int C = NH * HS;
    const size_t total = (size_t)B * NH * T * T;
    for (size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x; idx < total;
         idx += (size_t)gridDim.x * blockDim.x) {
        const int s = (int)(idx % T), t = (int)(idx / T % T), bh = (int)(idx / T / T), b = bh / NH, h = bh % NH;
        float val = -INFINITY;
        if (s <= t) {
            const floatX *q = qkv + ((size_t)b * T + t) * 3 * C + h * HS;
            const floatX *k = qkv + ((size_t)b * T + s) * 3 * C + C + h * HS;
            float acc = 0.0f;
            for (int d = 0; d < HS; d++) { acc += __bfloat162float(q[d]) * __bfloat162float(k[d]); }
            val = acc * scale;
        }
        att[idx] = val;
    }
}

// one warp per row (b, h, t): att row -> probabilities (0 above the diagonal), lse = max + log(sum)
static __global__ void attention_softmax_unfused_kernel(float *att, float *lse, int rows, int T) {
    const int row = blockIdx.x * (blockDim.x / WARP_SIZE) + threadIdx.x / WARP_SIZE, lane = threadIdx.x % WARP_SIZE;
    if (row >= rows) { return; }  // the whole warp leaves together
    const int t = row % T;
    float *x = att + (size_t)row * T;
    float mx = -INFINITY;
    for (int s = lane; s <= t; s += WARP_SIZE) { mx = fmaxf(mx, x[s]); }
    mx = warp_reduce_max(mx);
    float sum = 0.0f;
    for (int s = lane; s <= t; s += WARP_SIZE) { sum += expf(x[s] - mx); }
    sum = warp_reduce_sum(sum);
    for (int s = lane; s < T; s += WARP_SIZE) { x[s] = s <= t ? expf(x[s] - mx) / sum : 0.0f; }
    if (lane == 0) { lse[row] = mx + logf(sum); }
}

// out[b, t, h, d] = sum_{s <= t} P[b, h, t, s] v[b, s, h, d]; one thread per output element
static __global__ void attention_values_unfused_kernel(floatX *out, const float *att, const floatX *qkv, int B, int T,
                                                       int NH, int HS) {
    const int C = NH * HS;
    const size_t total = (size_t)B * T * C;
    for (size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x; idx < total;
         idx += (size_t)gridDim.x * blockDim.x) {
        const int c = (int)(idx % C), t = (int)(idx / C % T), b = (int)(idx / C / T), h = c / HS, d = c % HS;
        const float *p = att + (((size_t)b * NH + h) * T + t) * T;
        float acc = 0.0f;
        for (int s = 0; s <= t; s++) {
            acc += p[s] * __bfloat162float(qkv[((size_t)b * T + s) * 3 * C + 2 * C + h * HS + d]);
        }
        out[idx] = __float2bfloat16(acc);
    }
}

// P[b, h, t, s] = exp(scale q_t . k_s - lse_t) and dS = P (dO_t . v_s - dO_t . O_t), zero above the diagonal
static __global__ void attention_backward_scores_unfused_kernel(float *P, float *dS, const floatX *qkv,
                                                                const floatX *out, const floatX *dout, const float *lse,
                                                                int B, int T, int NH, int HS, float scale) {
    const int C = NH * HS;
    const size_t total = (size_t)B * NH * T * T;
    for (size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x; idx < total;
         idx += (size_t)gridDim.x * blockDim.x) {
        const int s = (int)(idx % T), t = (int)(idx / T % T), bh = (int)(idx / T / T), b = bh / NH, h = bh % NH;
        float p = 0.0f, ds = 0.0f;
        if (s <= t) {
            const floatX *q = qkv + ((size_t)b * T + t) * 3 * C + h * HS;
            const floatX *k = qkv + ((size_t)b * T + s) * 3 * C + C + h * HS;
            const floatX *v = k + C;
            const floatX *o = out + ((size_t)b * T + t) * C + h * HS;
            const floatX *dO = dout + ((size_t)b * T + t) * C + h * HS;
            float qk = 0.0f, dp = 0.0f, Dt = 0.0f;
            for (int d = 0; d < HS; d++) {
                qk += __bfloat162float(q[d]) * __bfloat162float(k[d]);
                dp += __bfloat162float(dO[d]) * __bfloat162float(v[d]);
                Dt += __bfloat162float(dO[d]) * __bfloat162float(o[d]);
            }
            p = expf(scale * qk - lse[(size_t)bh * T + t]);
            ds = p * (dp - Dt);
        }
        P[idx] = p;
        dS[idx] = ds;
    }
}

// dq[b, t, h, d] = scale * sum_{s <= t} dS[b, h, t, s] k[b, s, h, d]
static __global__ void attention_backward_dq_unfused_kernel(floatX *dqkv, const float *dS, const floatX *qkv, int B,
                                                            int T, int NH, int HS, float scale) {
    const int C = NH * HS;
    const size_t total = (size_t)B * T * C;
    for (size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x; idx < total;
         idx += (size_t)gridDim.x * blockDim.x) {
        const int c = (int)(idx % C), t = (int)(idx / C % T), b = (int)(idx / C / T), h = c / HS;
        const float *ds = dS + (((size_t)b * NH + h) * T + t) * T;
        float acc = 0.0f;
        for (int s = 0; s <= t; s++) { acc += ds[s] * __bfloat162float(qkv[((size_t)b * T + s) * 3 * C + C + c]); }
        dqkv[((size_t)b * T + t) * 3 * C + c] = __float2bfloat16(scale * acc);
    }
}

// dk[b, s, h, d] = scale * sum_{t >= s} dS[b, h, t, s] q[b, t, h, d];  dv = sum_{t >= s} P[b, h, t, s] dO[b, t, h, d]
static __global__ void attention_backward_dkv_unfused_kernel(floatX *dqkv, const float *P, const float *dS,
                                                             const floatX *qkv, const floatX *dout, int B, int T,
                                                             int NH, int HS, float scale) {
    const int C = NH * HS;
    const size_t total = (size_t)B * T * C;
    for (size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x; idx < total;
         idx += (size_t)gridDim.x * blockDim.x) {
        const int c = (int)(idx % C), s = (int)(idx / C % T), b = (int)(idx / C / T), h = c / HS;
        const size_t col = ((size_t)b * NH + h) * T * T + s;  // P[b, h, t, s] = P[col + t * T]
        float dk = 0.0f, dv = 0.0f;
        for (int t = s; t < T; t++) {
            dk += dS[col + (size_t)t * T] * __bfloat162float(qkv[((size_t)b * T + t) * 3 * C + c]);
            dv += P[col + (size_t)t * T] * __bfloat162float(dout[((size_t)b * T + t) * C + c]);
        }
        dqkv[((size_t)b * T + s) * 3 * C + C + c] = __float2bfloat16(scale * dk);
        dqkv[((size_t)b * T + s) * 3 * C + 2 * C + c] = __float2bfloat16(dv);
    }
}

// ----------------------------------------------------------------------------
// launchers

// blocks of 256 threads for the unfused kernels' grid-stride loops over n items (capped: B NH T T
// exceeds 2^31 at the larger sizes)
static inline unsigned int attention_unfused_grid(size_t n) {
    const unsigned int blocks = grid_for(n, 256);
    return blocks < (1u << 20) ? blocks : (1u << 20);
}

// the unfused forward's scratch: the (B, NH, T, T) fp32 probabilities
static inline size_t attention_forward_unfused_scratch_bytes(int B, int T, int C, int NH) {
    (void)C;
    return (size_t)B * NH * T * T * sizeof(float);
}
// the unfused backward's scratch: P and dS, each (B, NH, T, T) fp32
static inline size_t attention_backward_unfused_scratch_bytes(int B, int T, int C, int NH) {
    return 2 * attention_forward_unfused_scratch_bytes(B, T, C, NH);
}

// The oracle forward: same outputs and conventions as attention_forward, any head size.
static inline void attention_forward_unfused(floatX *out, float *lse, const floatX *qkv, float *scratch, int B, int T,
                                             int C, int NH, cudaStream_t stream) {
    attention_check_shapes("attention_forward_unfused", B, T, C, NH);
    cudaRequire(scratch != NULL, "needs attention_forward_unfused_scratch_bytes() of scratch");
    const int HS = C / NH;
    const float scale = 1.0f / sqrtf((float)HS);
    attention_scores_unfused_kernel<<<attention_unfused_grid((size_t)B * NH * T * T), 256, 0, stream>>>(
        scratch, qkv, B, T, NH, HS, scale);
    cudaCheckLaunch();
    attention_softmax_unfused_kernel<<<CEIL_DIV(B * NH * T, 8), 256, 0, stream>>>(scratch, lse, B * NH * T, T);
    cudaCheckLaunch();
    attention_values_unfused_kernel<<<grid_for((size_t)B * T * C, 256), 256, 0, stream>>>(out, scratch, qkv, B, T, NH,
                                                                                          HS);
    cudaCheckLaunch();
}

// The oracle backward: same inputs, outputs and conventions as attention_backward, any head size.
static inline void attention_backward_unfused(floatX *dqkv, const floatX *dout, const floatX *qkv, const floatX *out,
                                              const float *lse, float *scratch, int B, int T, int C, int NH,
                                              cudaStream_t stream) {
    attention_check_shapes("attention_backward_unfused", B, T, C, NH);
    cudaRequire(scratch != NULL, "needs attention_backward_unfused_scratch_bytes() of scratch");
    const int HS = C / NH;
    const float scale = 1.0f / sqrtf((float)HS);
    float *P = scratch, *dS = scratch + (size_t)B * NH * T * T;
    attention_backward_scores_unfused_kernel<<<attention_unfused_grid((size_t)B * NH * T * T), 256, 0, stream>>>(
        P, dS, qkv, out, dout, lse, B, T, NH, HS, scale);
    cudaCheckLaunch();
    attention_backward_dq_unfused_kernel<<<grid_for((size_t)B * T * C, 256), 256, 0, stream>>>(dqkv, dS, qkv, B, T, NH,
                                                                                               HS, scale);
    cudaCheckLaunch();
    attention_backward_dkv_unfused_kernel<<<grid_for((size_t)B * T * C, 256), 256, 0, stream>>>(dqkv, P, dS, qkv, dout,
                                                                                                B, T, NH, HS, scale);
    cudaCheckLaunch();
}

#endif  // DEV_CUDA_ATTENTION_UNFUSED_CUH
