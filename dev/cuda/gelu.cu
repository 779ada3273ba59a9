/*
 * Workbench: the tanh-GELU element-wise kernels (llmc/cuda/gelu.cuh), the unfused alternative to the
 * cuBLASLt GELU epilogues.
 *
 * Tolerance: bf16 outputs (rounding <= 2^-8 relative) of fp32 math in the sigmoid form (fast
 * exp, ~2^-21 relative; no cancellation in the negative tail): rtol 1e-2, atol 1e-5 for outputs
 * near zero. Inputs span [-6, 6], so the tail where gelu(x) ~ 1e-9 is covered.
 * Also checked: in-place use (out == inp, dinp == dout) gives the same bits.
 * Timing at B*T*4C = 16*1024*3072 elements; bandwidth from one read per input, one write.
 *
 *   ./gelu
 */
#include "common.h"
#include "llmc/cuda/gelu.cuh"

static void run_case(const char *name, size_t N, int timing) {
    printf("case %s: N=%zu\n", name, N);
    float *x = host_uniform_bf16(N, -6.0f, 6.0f, 41), *dout = host_uniform_bf16(N, -1.0f, 1.0f, 42);
    floatX *d_x = device_bf16_from(x, N), *d_dout = device_bf16_from(dout, N);
    floatX *d_y = (floatX *)device_alloc(N * sizeof(floatX)), *d_dx = (floatX *)device_alloc(N * sizeof(floatX));
    float *got = (float *)mallocCheck(N * sizeof(float)), *ref = (float *)mallocCheck(N * sizeof(float));

    gelu_forward(d_y, d_x, N, 0);
    download_bf16(got, d_y, N);
    for (size_t i = 0; i < N; i++) { ref[i] = (float)ref_gelu(x[i]); }
    check_close("gelu_forward", got, ref, N, 1e-5, 1e-2);

    gelu_backward(d_dx, d_x, d_dout, N, 0);
    float *gotb = (float *)mallocCheck(N * sizeof(float));
    download_bf16(gotb, d_dx, N);
    for (size_t i = 0; i < N; i++) { ref[i] = (float)(dout[i] * ref_gelu_grad(x[i])); }
    check_close("gelu_backward (dinp = dout * gelu'(inp))", gotb, ref, N, 1e-5, 1e-2);

    // in place: the same bits as out of place
    floatX *d_tmp = device_bf16_from(x, N);
    gelu_forward(d_tmp, d_tmp, N, 0);
    float *again = (float *)mallocCheck(N * sizeof(float));
    download_bf16(again, d_tmp, N);
    check_bitwise("gelu_forward in place", got, again, N * sizeof(float));
    upload_bf16(d_tmp, dout, N);
    gelu_backward(d_tmp, d_x, d_tmp, N, 0);
    download_bf16(again, d_tmp, N);
    check_bitwise("gelu_backward in place", gotb, again, N * sizeof(float));

    if (timing) {
        float ms = time_ms([&] { gelu_forward(d_y, d_x, N, 0); }, 50);
        report_bandwidth("gelu_forward", ms, 2.0 * N * 2);
        ms = time_ms([&] { gelu_backward(d_dx, d_x, d_dout, N, 0); }, 50);
        report_bandwidth("gelu_backward", ms, 3.0 * N * 2);
    }
    cudaCheck(cudaFree(d_x)); cudaCheck(cudaFree(d_dout)); cudaCheck(cudaFree(d_y)); cudaCheck(cudaFree(d_dx));
    cudaCheck(cudaFree(d_tmp));
    free(x); free(dout); free(got); free(ref); free(gotb); free(again);
}

int main(void) {
    workbench_init("gelu");
    run_case("small", 8 * 1000, 0);
    if (!WB_SIM) { run_case("GPT-2 124M MLP activations (B=16, T=1024, 4C=3072)", (size_t)16 * 1024 * 3072, 1); }
    return workbench_finish("gelu");
}
