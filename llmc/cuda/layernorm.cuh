/*
 * LayerNorm over the channels of each of the N = B*T rows, with fp32 statistics:
 *   mean = sum(x) / C,  rstd = 1 / sqrt(sum((x - mean)^2) / C + 1e-5),  out = (x - mean) * rstd * w + b
 * (two-pass variance; mean and rstd are saved in fp32 for the backward pass), the residual add
 * fused in front of it, and the backward pass.
 *
 * Gradient convention of this file: layernorm_backward ACCUMULATES into dinp (+=), because dinp
 * is the residual stream's gradient, which the residual branches also add into; dweight and
 * dbias are accumulated as every parameter gradient. dweight and dbias are reduced in two fixed
 * stages (per block of LN_BWD_ROWS rows, then across blocks, llmc/cuda/cuda_common.cuh), so they
 * are bitwise reproducible and independent of the GPU.
 */
#ifndef LLMC_LAYERNORM_CUH
#define LLMC_LAYERNORM_CUH

#include "cuda_common.cuh"

#define LN_EPS 1e-5f
#define LN_FWD_WARPS 8                // rows (one per warp) per forward block
#define LN_BWD_ROWS 64                // rows per backward block: fixes the dweight/dbias summation order
#define LN_BWD_MAX_WARPS 8
#define LN_BWD_SMEM_LIMIT (96 * 1024) // per-warp fp32 accumulators: W * 2C * 4 bytes at most this

// ----------------------------------------------------------------------------
// kernels

// The rest of a LayerNorm row x once its sum is known (the row's warp; lane l the chunks l, l+32, ...): the squared deviations from the mean (a
// second pass over the row: exact where E[x^2] - mean^2 would cancel), then out = (x - mean) *
// rstd * weight + bias, and the row's mean and rstd (either may be NULL). last_read_streams: x is
// not read again after this, so its final pass loads with the streaming hint.
template <bool last_read_streams>
static __device__ __forceinline__ void layernorm_row_finish(floatX *out, float *mean, float *rstd, const floatX *x,
                                                            float sum, const floatX *weight, const floatX *bias,
                                                            int row, int C, int lane) {
    const float m = warp_reduce_sum(sum) / C;
    float var = 0.0f;
    for (int c = lane * 8; c < C; c += WARP_SIZE * 8) {
        x128 v = load128(x + c);
        for (int k = 0; k < 8; k++) {
            float d = __bfloat162float(v[k]) - m;
            var += d * d;
        }
    }
    const float s = rsqrtf(warp_reduce_sum(var) / C + LN_EPS);
    for (int c = lane * 8; c < C; c += WARP_SIZE * 8) {
        x128 v = last_read_streams ? load128cs(x + c) : load128(x + c);
        x128 w = load128(weight + c), b = load128(bias + c), y;
        for (int k = 0; k < 8; k++) {
            float n = (__bfloat162float(v[k]) - m) * s;
            y[k] = __float2bfloat16(n * __bfloat162float(w[k]) + __bfloat162float(b[k]));
        }
        store128(out + c, y);
    }
    if (lane == 0) {
        if (mean) { mean[row] = m; }
        if (rstd) { rstd[row] = s; }
    }
}

// one warp per row; lane l handles the 8-channel chunks l, l+32, ...; the row is read three
// times (sum, squared deviations, output), the repeats mostly from L1
static __global__ void __launch_bounds__(WARP_SIZE * LN_FWD_WARPS)
layernorm_forward_kernel(floatX *out, float *mean, float *rstd, const floatX *inp, const floatX *weight,
                         const floatX *bias, int N, int C) {
    const int lane = threadIdx.x % WARP_SIZE;
    const int row = blockIdx.x * LN_FWD_WARPS + threadIdx.x / WARP_SIZE;
    if (row >= N) { return; }
    const floatX *x = inp + (size_t)row * C;
    float sum = 0.0f;
    for (int c = lane * 8; c < C; c += WARP_SIZE * 8) {
        x128 v = load128(x + c);
        for (int k = 0; k < 8; k++) { sum += __bfloat162float(v[k]); }
    }
    layernorm_row_finish<true>(out + (size_t)row * C, mean, rstd, x, sum, weight, bias, row, C, lane);
}

// residual = inp1 + inp2 (rounded to bf16), then the LayerNorm of that rounded residual
static __global__ void __launch_bounds__(WARP_SIZE * LN_FWD_WARPS)
fused_residual_forward_kernel(floatX *residual, floatX *normed, float *mean, float *rstd, const floatX *inp1,
                              const floatX *inp2, const floatX *weight, const floatX *bias, int N, int C) {
    const int lane = threadIdx.x % WARP_SIZE;
    const int row = blockIdx.x * LN_FWD_WARPS + threadIdx.x / WARP_SIZE;
    if (row >= N) { return; }
    const size_t off = (size_t)row * C;
    floatX *r = residual + off;  // written here, then re-read by the same lanes at the same addresses
    float sum = 0.0f;
    for (int c = lane * 8; c < C; c += WARP_SIZE * 8) {
        x128 a = load128cs(inp1 + off + c), b = load128cs(inp2 + off + c), y;
        for (int k = 0; k < 8; k++) {
            y[k] = __float2bfloat16(__bfloat162float(a[k]) + __bfloat162float(b[k]));
            sum += __bfloat162float(y[k]);
        }
        store128(r + c, y);
    }
    layernorm_row_finish<false>(normed + off, mean, rstd, r, sum, weight, bias, row, C, lane);
}

/*
 * Backward, for the rows [blockIdx.x * LN_BWD_ROWS, + LN_BWD_ROWS). With xhat = (x - mean) * rstd
 * and dnorm = dout * weight (the forward was out = xhat * weight + bias):
 *   dinp    += rstd * (dnorm - mean_c(dnorm) - xhat * mean_c(dnorm * xhat))
 *   dweight += sum_rows dout * xhat,   dbias += sum_rows dout
 * Warp w takes rows w, w+W, ... in increasing order and accumulates dweight/dbias for its
 * lanes' channels in its own shared-memory region (no atomics); at the end the W regions are
 * added in order w = 0..W-1 into this block's partial row [dweight (C), dbias (C)].
 * Shared layout per warp: [dweight | dbias], each C floats with channel 8*c8 + k at k*C/8 + c8
 * (consecutive lanes touch consecutive banks).
 */
static __global__ void __launch_bounds__(WARP_SIZE * LN_BWD_MAX_WARPS)
layernorm_backward_kernel(floatX *dinp, float *partials, const floatX *dout, const floatX *inp, const floatX *weight,
                          const float *mean, const float *rstd, int N, int C) {
    extern __shared__ float smem[];
    const int W = blockDim.x / WARP_SIZE;
    const int lane = threadIdx.x % WARP_SIZE, w = threadIdx.x / WARP_SIZE;
    const int C8 = C / 8;
    float *acc = smem + (size_t)w * 2 * C;
    for (int i = lane; i < 2 * C; i += WARP_SIZE) { acc[i] = 0.0f; }
    __syncwarp();
    const int row0 = blockIdx.x * LN_BWD_ROWS;
    const int row_end = min(N, row0 + LN_BWD_ROWS);
    for (int r = row0 + w; r < row_end; r += W) {
        const size_t off = (size_t)r * C;
        const float m = mean[r], s = rstd[r];
        // 1. the two row means
        float sum_dn = 0.0f, sum_dnx = 0.0f;
        for (int c8 = lane; c8 < C8; c8 += WARP_SIZE) {
            x128 d = load128(dout + off + c8 * 8), x = load128(inp + off + c8 * 8), wt = load128(weight + c8 * 8);
            for (int k = 0; k < 8; k++) {
                float dn = __bfloat162float(d[k]) * __bfloat162float(wt[k]);
                float xh = (__bfloat162float(x[k]) - m) * s;
                sum_dn += dn;
                sum_dnx += dn * xh;
            }
        }
        sum_dn = warp_reduce_sum(sum_dn) / C;
        sum_dnx = warp_reduce_sum(sum_dnx) / C;
        // 2. dinp, and this warp's dweight/dbias
        for (int c8 = lane; c8 < C8; c8 += WARP_SIZE) {
            x128 d = load128(dout + off + c8 * 8), x = load128(inp + off + c8 * 8), wt = load128(weight + c8 * 8);
            x128 di = load128(dinp + off + c8 * 8);
            for (int k = 0; k < 8; k++) {
                float dy = __bfloat162float(d[k]);
                float dn = dy * __bfloat162float(wt[k]);
                float xh = (__bfloat162float(x[k]) - m) * s;
                float g = (dn - sum_dn - xh * sum_dnx) * s;
                di[k] = __float2bfloat16(__bfloat162float(di[k]) + g);
                acc[k * C8 + c8] += dy * xh;
                acc[C + k * C8 + c8] += dy;
            }
            store128(dinp + off + c8 * 8, di);
        }
    }
    __syncthreads();
    for (int i = threadIdx.x; i < 2 * C; i += blockDim.x) {
        const int half = i / C, c = i % C;
        const int idx = half * C + (c % 8) * C8 + c / 8;
        float total = 0.0f;
        for (int ww = 0; ww < W; ww++) { total += smem[(size_t)ww * 2 * C + idx]; }
        partials[(size_t)blockIdx.x * 2 * C + i] = total;
    }
}

// ----------------------------------------------------------------------------
// launchers

/*
 * out (B, T, C) = LayerNorm(inp (B, T, C)) * weight (C) + bias (C), overwritten.
 * mean, rstd (B*T) fp32, overwritten; either may be NULL (inference).
 * Requires C a multiple of 8, 16-byte aligned pointers. No scratch.
 */
static inline void layernorm_forward(floatX *out, float *mean, float *rstd, const floatX *inp, const floatX *weight,
                                     const floatX *bias, int B, int T, int C, cudaStream_t stream) {
    const int N = B * T;
    cudaRequire(N > 0 && C > 0 && C % 8 == 0, "B = %d, T = %d, C = %d: C must be a multiple of 8", B, T, C);
    cudaRequire(is_aligned16(out) && is_aligned16(inp) && is_aligned16(weight) && is_aligned16(bias),
                "pointers must be 16-byte aligned");
    layernorm_forward_kernel<<<CEIL_DIV(N, LN_FWD_WARPS), WARP_SIZE * LN_FWD_WARPS, 0, stream>>>(out, mean, rstd, inp,
                                                                                               weight, bias, N, C);
    cudaCheckLaunch();
}

/*
 * residual (N, C) = inp1 + inp2 (bf16, rounded to nearest), overwritten;
 * normed (N, C) = LayerNorm(residual) * weight + bias, overwritten; mean, rstd (N) as layernorm_forward.
 * N = B*T rows. The statistics are those of the rounded residual that is stored, so the backward
 * pass (which reads residual) sees exactly what the forward normalised.
 * residual must not alias inp1/inp2 in other rows' positions; residual == inp1 is fine (same element).
 */
static inline void fused_residual_forward(floatX *residual, floatX *normed, float *mean, float *rstd, const floatX *inp1,
                                          const floatX *inp2, const floatX *weight, const floatX *bias, int N, int C,
                                          cudaStream_t stream) {
    cudaRequire(N > 0 && C > 0 && C % 8 == 0, "N = %d, C = %d: C must be a multiple of 8", N, C);
    cudaRequire(is_aligned16(residual) && is_aligned16(normed) && is_aligned16(inp1) && is_aligned16(inp2) &&
                    is_aligned16(weight) && is_aligned16(bias),
                "pointers must be 16-byte aligned");
    fused_residual_forward_kernel<<<CEIL_DIV(N, LN_FWD_WARPS), WARP_SIZE * LN_FWD_WARPS, 0, stream>>>(
        residual, normed, mean, rstd, inp1, inp2, weight, bias, N, C);
    cudaCheckLaunch();
}

// warps per backward block: 8, fewer when C is so large that 8 warps' accumulators do not fit
static inline int layernorm_backward_warps(int C) {
    int w = LN_BWD_SMEM_LIMIT / (2 * C * (int)sizeof(float));
    return w > LN_BWD_MAX_WARPS ? LN_BWD_MAX_WARPS : w;
}

// fp32 scratch bytes that layernorm_backward needs
static inline size_t layernorm_backward_scratch_bytes(int B, int T, int C) {
    return (size_t)CEIL_DIV((size_t)B * T, LN_BWD_ROWS) * 2 * (size_t)C * sizeof(float);
}

/*
 * Backward of out = LayerNorm(inp) * weight + bias.
 *   dinp (B, T, C)     += the input gradient (accumulated, see the top of this file)
 *   dweight, dbias (C) += their gradients
 *   dout, inp (B, T, C); weight (C); mean, rstd (B*T) as saved by the forward
 *   scratch            layernorm_backward_scratch_bytes(B, T, C) bytes of fp32
 * Requires C a multiple of 8 and at most 12288, 16-byte aligned pointers; dinp must not alias dout.
 */
static inline void layernorm_backward(floatX *dinp, floatX *dweight, floatX *dbias, const floatX *dout, const floatX *inp,
                                      const floatX *weight, const float *mean, const float *rstd, int B, int T, int C,
                                      float *scratch, cudaStream_t stream) {
    const int N = B * T;
    const int W = layernorm_backward_warps(C);
    cudaRequire(N > 0 && C > 0 && C % 8 == 0 && W >= 1, "B = %d, T = %d, C = %d: C must be a multiple of 8, at most %d",
                B, T, C, LN_BWD_SMEM_LIMIT / 8);
    cudaRequire(is_aligned16(dinp) && is_aligned16(dout) && is_aligned16(inp) && is_aligned16(weight),
                "pointers must be 16-byte aligned");
    cudaRequire((const floatX *)dinp != dout && scratch != NULL, "dinp must not alias dout; scratch must be given");
    const size_t smem = (size_t)W * 2 * C * sizeof(float);
    cudaCheck(cudaFuncSetAttribute(layernorm_backward_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    const int blocks = CEIL_DIV(N, LN_BWD_ROWS);
    layernorm_backward_kernel<<<blocks, WARP_SIZE * W, smem, stream>>>(dinp, scratch, dout, inp, weight, mean, rstd, N, C);
    cudaCheckLaunch();
    column_partials_accumulate(dweight, dbias, C, scratch, blocks, 2 * C, stream);
}

#endif  // LLMC_LAYERNORM_CUH
