/*
 * Workbench: the gradient norm (llmc/cuda/global_norm.cuh).
 *
 * Checks:
 *   norm^2 BITWISE equal to emulate.h's CPU emulation of the kernels' fixed order (fp32 fused
 *       multiply-adds and adds only, so exact on both sides), on the vectorized path (aligned,
 *       n % 8 == 0) and on the scalar path (misaligned pointer, odd n); and within rtol 1e-5 of a
 *       double sum (fp32 sums of ~10^3 terms per thread, then trees of ~10^3 values).
 *   empty input: norm^2 = 0.
 *   one inf or one NaN gradient: norm^2 not finite (the numeric guards' signal to skip the step).
 *   determinism: a second run is bitwise identical.
 * Size: the 124,475,904 gradients of GPT-2 124M; bandwidth from one read of the bf16 gradients.
 *
 *   ./global_norm
 */
#include "common.h"
#include "emulate.h"
#include "llmc/cuda/global_norm.cuh"

static float run_norm2(const floatX *d_g, size_t n, float *d_out, float *d_scratch) {
    global_norm_squared(d_out, d_g, n, d_scratch, 0);
    float r;
    download_f32(&r, d_out, 1);
    return r;
}

int main(void) {
    workbench_init("global_norm");
    // GPT-2 124M with Vp = 50304; under the simulator a count whose scalar path still needs more
    // stage-1 blocks (586) than the final kernel has threads (512)
    const size_t n = WB_SIM ? 300000 : 124475904;
    float *g = host_uniform_bf16(n, -1e-2f, 1e-2f, 71);
    floatX *d_g = device_bf16_from(g, n);  // allocated with 16 spare bytes: d_g + 1 stays inside
    float *d_out = (float *)device_alloc(sizeof(float));
    float *d_scratch = (float *)device_alloc(global_norm_scratch_bytes());

    double exact = 0.0;
    for (size_t i = 0; i < n; i++) { exact += (double)g[i] * g[i]; }

    // vectorized path
    printf("case aligned, n %% 8 == 0 (vectorized): n=%zu, %d blocks\n", n, global_norm_blocks(d_g, n));
    float got = run_norm2(d_g, n, d_out, d_scratch);
    float emu = emulate_global_norm_squared(g, n, 1);
    check_bitwise("norm^2 == CPU emulation of the order", &got, &emu, sizeof(float));
    float ref = (float)exact;
    check_close("norm^2 vs double", &got, &ref, 1, 0.0, 1e-5);
    float again = run_norm2(d_g, n, d_out, d_scratch);
    check_bitwise("norm^2, second run", &got, &again, sizeof(float));

    // scalar path: misaligned start, odd count
    const size_t n2 = n - 3;
    printf("case misaligned pointer, odd n (scalar): n=%zu, %d blocks\n", n2, global_norm_blocks(d_g + 1, n2));
    got = run_norm2(d_g + 1, n2, d_out, d_scratch);
    emu = emulate_global_norm_squared(g + 1, n2, 0);
    check_bitwise("norm^2 == CPU emulation of the order", &got, &emu, sizeof(float));
    double exact2 = exact - (double)g[0] * g[0] - (double)g[n - 2] * g[n - 2] - (double)g[n - 1] * g[n - 1];
    ref = (float)exact2;
    check_close("norm^2 vs double", &got, &ref, 1, 0.0, 1e-5);

    // small and empty inputs
    printf("case small and empty\n");
    got = run_norm2(d_g, 1000, d_out, d_scratch);
    emu = emulate_global_norm_squared(g, 1000, 1);
    check_bitwise("n = 1000: norm^2 == CPU emulation", &got, &emu, sizeof(float));
    got = run_norm2(d_g, 0, d_out, d_scratch);
    check_true("n = 0: norm^2 = 0", got == 0.0f, "");

    // non-finite gradients
    printf("case non-finite gradients\n");
    const float specials[2] = {INFINITY, NAN};
    for (int k = 0; k < 2; k++) {
        float saved = g[12345];
        g[12345] = specials[k];
        upload_bf16(d_g, g, n);
        got = run_norm2(d_g, n, d_out, d_scratch);
        char detail[96];
        snprintf(detail, sizeof(detail), "norm^2 = %g", got);
        check_true(k == 0 ? "one inf gradient: norm^2 inf" : "one NaN gradient: norm^2 NaN",
                   k == 0 ? isinf(got) : isnan(got), detail);
        g[12345] = saved;
    }
    upload_bf16(d_g, g, n);

    if (!WB_SIM) {
        float ms = time_ms([&] { global_norm_squared(d_out, d_g, n, d_scratch, 0); }, 50);
        report_bandwidth("global_norm_squared (both stages)", ms, 2.0 * n);
    }

    cudaCheck(cudaFree(d_g)); cudaCheck(cudaFree(d_out)); cudaCheck(cudaFree(d_scratch));
    free(g);
    return workbench_finish("global_norm");
}
