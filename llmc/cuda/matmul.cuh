/*
 * The model's linear layers: out (B*T, OC) = inp (B*T, C) @ weight^T + bias, with weight (OC, C)
 * row-major as in the model file. Forward and backward run on cuBLASLt (llmc/cuda/cublas_common.cuh)
 * with fused epilogues: bias, and optionally GELU (the MLP's fc layer) whose pre-activation is
 * saved for the backward pass, where the GELU derivative is fused into the next layer's dinp.
 *
 * Gradient convention: dinp is overwritten (every matmul input feeds exactly one matmul in
 * GPT-2), dweight and dbias are accumulated (+=) so that micro-batches add up.
 *
 * dbias is, by default (-bg 0), reduced by this file's own kernel: the summation order of its
 * two-stage fp32 reduction is fixed by (B*T, OC) alone, so it is deterministic and identical on
 * every GPU, whatever algorithm cuBLASLt picks. It costs one more read of dout (B*T*OC bf16):
 * 3.04 ms of a 122 ms d12 step at B=64 on an H200 (bench_layers, 2026-11-26), near the memory's bandwidth.
 * -bg 1 (matmul_set_bias_grad_epilogue) saves that read: the weight-gradient GEMM, which reads dout
 * anyway, sums it too (cuBLASLt's BGRADB epilogue). The epilogue overwrites its bias gradient while
 * micro-batches must add up, so it writes into scratch (bf16, D's type) and add_bf16 adds that to
 * dbias. Its sums are cuBLASLt's (deterministic for one algorithm, as the GEMMs) and
 * rounded to bf16 once more than ours. Where cuBLASLt has no algorithm with the epilogue for a
 * shape, or refuses to run the one it offered, that shape keeps our kernel (said once per run).
 */
#ifndef LLMC_MATMUL_CUH
#define LLMC_MATMUL_CUH

#include "cublas_common.cuh"

// rows of dout summed by one block of the dbias first stage; fixes the summation order
#define MATMUL_BIAS_ROWS 128
#define MATMUL_BIAS_WARPS 8

// ----------------------------------------------------------------------------
// kernels

// First stage of dbias: partials[y][oc] = sum of dout[r][oc] over the rows r of chunk y
// (rows y*128 .. y*128+127). Block: 8 warps x 32 lanes; lane l covers the 8 columns
// blockIdx.x*256 + 8l ..; warp w sums rows w, w+8, ... of the chunk in increasing order; the
// 8 warp sums are added in order w = 0..7.
static __global__ void __launch_bounds__(WARP_SIZE * MATMUL_BIAS_WARPS)
matmul_backward_bias_kernel(float *partials, const floatX *dout, int N, int OC) {
    __shared__ float sums[MATMUL_BIAS_WARPS][WARP_SIZE * 8];
    const int lane = threadIdx.x % WARP_SIZE, w = threadIdx.x / WARP_SIZE;
    const int c = blockIdx.x * (WARP_SIZE * 8) + lane * 8;
    const int row0 = blockIdx.y * MATMUL_BIAS_ROWS;
    const int row_end = min(N, row0 + MATMUL_BIAS_ROWS);
    float acc[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
    if (c < OC) {
        for (int r = row0 + w; r < row_end; r += MATMUL_BIAS_WARPS) {
            x128 d = load128(dout + (size_t)r * OC + c);
            for (int k = 0; k < 8; k++) { acc[k] += __bfloat162float(d[k]); }
        }
    }
    // element k of lane l sits at column 8l + k of the chunk
    for (int k = 0; k < 8; k++) { sums[w][lane * 8 + k] = acc[k]; }
    __syncthreads();
    const int col = blockIdx.x * (WARP_SIZE * 8) + threadIdx.x;
    if (col < OC) {
        float total = 0.0f;
        for (int i = 0; i < MATMUL_BIAS_WARPS; i++) { total += sums[i][threadIdx.x]; }
        partials[(size_t)blockIdx.y * OC + col] = total;
    }
}

// ----------------------------------------------------------------------------
// launchers

// -bg: 0 = dbias by our column sums, 1 = in the weight-gradient GEMM's epilogue where cuBLASLt can
static int matmul_bias_grad_epilogue = 0;
static long long matmul_bias_grad_count[2] = {0, 0};  // bias gradients by the epilogue [0], by our kernel under -bg 1 [1]

static inline void matmul_set_bias_grad_epilogue(int on) { matmul_bias_grad_epilogue = on; }

// With -bg 1, one line on how this run's bias gradients were summed; without it nothing
static inline void matmul_bias_grad_report(void) {
    if (!matmul_bias_grad_epilogue) { return; }
    printf("bias gradients (-bg 1): %lld in the weight-gradient matmuls' epilogue, %lld by our column sums%s\n",
           matmul_bias_grad_count[0], matmul_bias_grad_count[1],
           matmul_bias_grad_count[1] ? " (cuBLASLt could not sum them in the epilogue for their shapes)" : "");
}

// fp32 scratch bytes that matmul_backward needs for the dbias reduction of a (N = B*T, OC) dout
static inline size_t matmul_backward_scratch_bytes(int B, int T, int OC) {
    return (size_t)CEIL_DIV((size_t)B * T, MATMUL_BIAS_ROWS) * (size_t)OC * sizeof(float);
}

/*
 * dbias (OC) += sum over the N rows of dout (N, OC). Deterministic two-stage fp32 reduction.
 * scratch: matmul_backward_scratch_bytes(N, 1, OC) bytes.
 */
static inline void matmul_backward_bias(floatX *dbias, const floatX *dout, int N, int OC, float *scratch,
                                        cudaStream_t stream) {
    cudaRequire(N > 0 && OC > 0 && OC % 8 == 0, "N = %d, OC = %d: OC must be a positive multiple of 8", N, OC);
    cudaRequire(is_aligned16(dout) && scratch != NULL, "dout must be 16-byte aligned and scratch given");
    dim3 grid(CEIL_DIV(OC, WARP_SIZE * 8), CEIL_DIV(N, MATMUL_BIAS_ROWS));
    matmul_backward_bias_kernel<<<grid, WARP_SIZE * MATMUL_BIAS_WARPS, 0, stream>>>(scratch, dout, N, OC);
    cudaCheckLaunch();
    column_partials_accumulate(dbias, NULL, OC, scratch, (int)grid.y, OC, stream);
}

/*
 * dweight (OC, C) += dout^T @ inp (dout (N, OC), inp (N, C)) and, when dbias is given, dbias (OC) +=
 * the column sums of dout: with -bg 1 from the one GEMM (its epilogue's sums, via scratch), else,
 * or where cuBLASLt has no algorithm with that epilogue for the shape, by matmul_backward_bias.
 * scratch: matmul_backward_scratch_bytes(N, 1, OC) bytes when dbias is given.
 */
static inline void matmul_backward_weight_bias(floatX *dweight, floatX *dbias, const floatX *dout, const floatX *inp, int N,
                                               int C, int OC, float *scratch, cudaStream_t stream) {
    // column-major: dweight^T (C x OC) += inp^T (C x BT) * dout (stored OC x BT, transposed); the
    // epilogue's bias gradient has one entry per column of dweight^T, the sums of dout over BT
    Gemm g = {dweight, inp, dout, NULL, NULL, C, OC, N, 0, 1, 1, 1.0f, 1.0f, 0, 0, 0, MATMUL_PLAIN, NULL};
    if (dbias && matmul_bias_grad_epilogue) {
        cudaRequire(scratch != NULL && is_aligned16(scratch), "scratch must be given and 16-byte aligned");
        g.bias_grad = (floatX *)scratch;
        if (gemm_run(&g, stream)) {
            add_bf16(dbias, dbias, g.bias_grad, OC, stream);  // the epilogue overwrote: accumulate here
            matmul_bias_grad_count[0]++;
            return;
        }
        if (matmul_bias_grad_count[1]++ == 0) {
            llmc_warn("-bg 1: cuBLASLt cannot sum the bias gradient in its epilogue for N = %d, C = %d, OC = %d (no "
                      "algorithm, or it refused to run one); such bias gradients use our column sums", N, C, OC);
        }
        g.bias_grad = NULL;
    }
    if (dbias) { matmul_backward_bias(dbias, dout, N, OC, scratch, stream); }
    gemm_run(&g, stream);
}

/*
 * Forward of a linear layer.
 *   out (B*T, OC)       overwritten: inp @ weight^T + bias, or GELU of that when pre_gelu is given
 *   inp (B*T, C), weight (OC, C), bias (OC) or NULL
 *   pre_gelu (B*T, OC)  NULL: no activation. Else: the GELU (tanh form, cuBLASLt's epilogue) is
 *                       fused, pre_gelu receives the pre-activation inp @ weight^T + bias and out
 *                       receives GELU(pre_gelu) (keep pre_gelu for matmul_backward of the next layer).
 * Requires C and OC multiples of 8 and 16-byte aligned pointers. No scratch.
 */
static inline void matmul_forward(floatX *out, const floatX *inp, const floatX *weight, const floatX *bias, int B, int T,
                                  int C, int OC, floatX *pre_gelu, cudaStream_t stream) {
    cudaRequire(B > 0 && T > 0 && C % 8 == 0 && OC % 8 == 0 && C > 0 && OC > 0,
                "B = %d, T = %d, C = %d, OC = %d: C and OC must be positive multiples of 8", B, T, C, OC);
    // column-major view: out^T (OC x BT) = weight (stored C x OC, transposed) * inp^T (C x BT)
    matmul_cublaslt(out, weight, inp, bias, OC, B * T, C, 1, 0, 1.0f, 0.0f, 1, 0, 0, 0,
                    pre_gelu ? MATMUL_GELU_FORWARD : MATMUL_PLAIN, pre_gelu, stream);
}

/*
 * Backward of a linear layer out = act(inp) @ weight^T + bias.
 *   dinp (B*T, C)      overwritten: dout @ weight, times GELU'(pre_gelu) when pre_gelu is given;
 *                      NULL skips it
 *   dweight (OC, C)    += dout^T @ inp (NULL skips it)
 *   dbias (OC)         += column sums of dout (NULL: the layer has no bias); -bg 1: from the
 *                      dweight GEMM's epilogue where dweight is given (matmul_backward_weight_bias)
 *   dout (B*T, OC), inp (B*T, C) (the layer's input as used in the forward), weight (OC, C)
 *   pre_gelu (B*T, C)  NULL, or the pre-activation whose GELU was this layer's input (the
 *                      pre_gelu written by matmul_forward of the previous layer): then dinp is
 *                      the gradient with respect to that pre-activation.
 *   scratch            matmul_backward_scratch_bytes(B, T, OC) bytes of fp32 when dbias is given
 * Requires C and OC multiples of 8 and 16-byte aligned pointers; dinp must not alias dout.
 */
static inline void matmul_backward(floatX *dinp, floatX *dweight, floatX *dbias, const floatX *dout, const floatX *inp,
                                   const floatX *weight, int B, int T, int C, int OC, const floatX *pre_gelu,
                                   float *scratch, cudaStream_t stream) {
    cudaRequire(B > 0 && T > 0 && C % 8 == 0 && OC % 8 == 0 && C > 0 && OC > 0,
                "B = %d, T = %d, C = %d, OC = %d: C and OC must be positive multiples of 8", B, T, C, OC);
    cudaRequire(dinp == NULL || (const floatX *)dinp != dout, "dinp must not alias dout");
    const int N = B * T;
    if (dweight) {
        matmul_backward_weight_bias(dweight, dbias, dout, inp, N, C, OC, scratch, stream);
    } else if (dbias) {
        matmul_backward_bias(dbias, dout, N, OC, scratch, stream);
    }
    if (dinp) {
        // column-major: dinp^T (C x BT) = weight^T (stored C x OC) * dout^T (OC x BT)
        matmul_cublaslt(dinp, weight, dout, NULL, C, N, OC, 0, 0, 1.0f, 0.0f, 1, 0, 0, 0,
                        pre_gelu ? MATMUL_GELU_BACKWARD : MATMUL_PLAIN, (floatX *)pre_gelu, stream);
    }
}

#endif  // LLMC_MATMUL_CUH
