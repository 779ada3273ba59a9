/*
 * GELU, tanh approximation (GPT-2's), as separate element-wise kernels: the unfused alternative
 * to the cuBLASLt GELU epilogues of llmc/cuda/matmul.cuh, so the trainer can choose either.
 *   gelu(x)  = 0.5 x (1 + tanh(u)),  u = sqrt(2/pi) (x + 0.044715 x^3)
 *   gelu'(x) = 0.5 (1 + tanh(u)) + 0.5 x (1 - tanh(u)^2) du/dx,  du/dx = sqrt(2/pi) (1 + 3 * 0.044715 x^2)
 * evaluated through the identity 0.5 (1 + tanh(u)) = sigma(2u) = 1 / (1 + exp(-2u)):
 *   gelu(x) = x sigma,  gelu'(x) = sigma + 2 x sigma (1 - sigma) du/dx,  1 - sigma = exp(-2u) sigma.
 * Why: under --use_fast_math tanhf becomes tanh.approx.f32 (relative error up to 2^-11), whose
 * absolute error of ~5e-4 swamps the small negative tail (gelu(-3) = -0.0036) in 1 + tanh(u);
 * the sigmoid form has no cancellation and only the ~2^-21 error of the fast exp.
 * fp32 math on bf16 storage. The backward overwrites dinp (an activation gradient).
 */
#ifndef LLMC_GELU_CUH
#define LLMC_GELU_CUH

#include "cuda_common.cuh"

#define GELU_SCALE 0.7978845608028654f  // sqrt(2 / pi)
#define GELU_CUBE 0.044715f

// exp(-2u), with u clamped to [-40, 40] so that it stays finite (tanh(40) is 1 in fp32, and the
// clamp changes gelu only where it is below 1e-33 in magnitude)
__device__ __forceinline__ float gelu_exp_m2u(float x) {
    float u = GELU_SCALE * (x + GELU_CUBE * x * x * x);
    u = fminf(fmaxf(u, -40.0f), 40.0f);
    return __expf(-2.0f * u);
}

__device__ __forceinline__ float gelu_tanh(float x) {
    return x / (1.0f + gelu_exp_m2u(x));
}

__device__ __forceinline__ float gelu_tanh_grad(float x) {
    const float e = gelu_exp_m2u(x);
    const float sigma = 1.0f / (1.0f + e);
    const float one_minus_sigma = e * sigma;
    const float du_dx = GELU_SCALE * (1.0f + 3.0f * GELU_CUBE * x * x);
    return sigma + 2.0f * x * sigma * one_minus_sigma * du_dx;
}

// ----------------------------------------------------------------------------
// kernels: one thread per 8 elements

static __global__ void gelu_forward_kernel(floatX *out, const floatX *inp, size_t N8) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= N8) { return; }
    x128 x = load128cs(inp + i * 8);
    x128 y;
    for (int k = 0; k < 8; k++) { y[k] = __float2bfloat16(gelu_tanh(__bfloat162float(x[k]))); }
    store128(out + i * 8, y);
}

static __global__ void gelu_backward_kernel(floatX *dinp, const floatX *inp, const floatX *dout, size_t N8) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= N8) { return; }
    x128 x = load128cs(inp + i * 8);
    x128 d = load128cs(dout + i * 8);
    x128 g;
    for (int k = 0; k < 8; k++) {
        g[k] = __float2bfloat16(__bfloat162float(d[k]) * gelu_tanh_grad(__bfloat162float(x[k])));
    }
    store128(dinp + i * 8, g);
}

// ----------------------------------------------------------------------------
// launchers

// out (N) = gelu(inp (N)), overwritten; out may alias inp. N a multiple of 8, 16-byte aligned pointers.
static inline void gelu_forward(floatX *out, const floatX *inp, size_t N, cudaStream_t stream) {
    cudaRequire(N % 8 == 0 && is_aligned16(out) && is_aligned16(inp), "N = %zu must be a multiple of 8, pointers 16-byte aligned", N);
    if (N == 0) { return; }
    gelu_forward_kernel<<<grid_for(N / 8, 256), 256, 0, stream>>>(out, inp, N / 8);
    cudaCheckLaunch();
}

// dinp (N) = dout (N) * gelu'(inp (N)), overwritten; dinp may alias dout (in place).
// N a multiple of 8, 16-byte aligned pointers.
static inline void gelu_backward(floatX *dinp, const floatX *inp, const floatX *dout, size_t N, cudaStream_t stream) {
    cudaRequire(N % 8 == 0 && is_aligned16(dinp) && is_aligned16(inp) && is_aligned16(dout),
                "N = %zu must be a multiple of 8, pointers 16-byte aligned", N);
    if (N == 0) { return; }
    gelu_backward_kernel<<<grid_for(N / 8, 256), 256, 0, stream>>>(dinp, inp, dout, N / 8);
    cudaCheckLaunch();
}

#endif  // LLMC_GELU_CUH
