/*
 * Workbench: LayerNorm forward, fused residual + LayerNorm forward, residual add, and LayerNorm
 * backward (llmc/cuda/layernorm.cuh), against double-precision CPU references.
 *
 * Tolerances and why:
 *   bf16 outputs (out, normed, dinp): one rounding to bf16 (<= 2^-8 relative) of an fp32 result
 *       whose own error is ~1e-6 relative: rtol 1e-2, atol 2e-3 for values near zero.
 *   mean (fp32): fp32 sum of C values: rtol 1e-5, atol 1e-5.
 *   rstd (fp32): two-pass fp32 variance and the hardware rsqrt (2 ulp): rtol 1e-4.
 *   residual: fp32 add of two bf16 values rounded to nearest, the same on the CPU: exact.
 *   dweight, dbias (bf16, accumulated over N = B*T rows): the bf16 rounding (2^-8 relative) and
 *       the fp32 two-stage sum of N terms (~sqrt(N) * 2^-24 * |partial sums|, ~1e-2 absolute at
 *       N = 65536): rtol 1e-2, atol 5e-2.
 * The backward takes mean/rstd from the CPU reference (uploaded), so it is tested on its own.
 * Determinism: a second backward from the same start is bitwise identical.
 *
 *   ./layernorm
 */
#include "common.h"
#include "llmc/cuda/layernorm.cuh"

static void cpu_layernorm(double *out, double *mean, double *rstd, const float *x, const float *w, const float *b, int N,
                          int C) {
    for (int r = 0; r < N; r++) {
        const float *xr = x + (size_t)r * C;
        double m = 0.0, v = 0.0;
        for (int c = 0; c < C; c++) { m += xr[c]; }
        m /= C;
        for (int c = 0; c < C; c++) { v += (xr[c] - m) * (xr[c] - m); }
        const double s = 1.0 / sqrt(v / C + 1e-5);
        for (int c = 0; c < C; c++) { out[(size_t)r * C + c] = (xr[c] - m) * s * w[c] + b[c]; }
        mean[r] = m;
        rstd[r] = s;
    }
}

static float *to_float(const double *x, size_t n) {
    float *y = (float *)mallocCheck(n * sizeof(float));
    for (size_t i = 0; i < n; i++) { y[i] = (float)x[i]; }
    return y;
}

// a downloaded output against its double reference
static void check_vs_ref(const char *what, const float *got, const double *ref, size_t n, double atol, double rtol) {
    float *f = to_float(ref, n);
    check_close(what, got, f, n, atol, rtol);
    free(f);
}

// a forward's out (named out_name in the messages), mean and rstd on the device against
// cpu_layernorm of `in` (N rows of C); the reference statistics go to mean_ref and rstd_ref if given
static void check_forward(const char *who, const char *out_name, const floatX *d_out, const float *d_mean,
                          const float *d_rstd, const float *in, const float *w, const float *b, int N, int C,
                          float *mean_ref, float *rstd_ref) {
    const size_t NC = (size_t)N * C;
    double *ref = (double *)mallocCheck(NC * sizeof(double)), *rmean = (double *)mallocCheck(N * sizeof(double)),
           *rrstd = (double *)mallocCheck(N * sizeof(double));
    float *got = (float *)mallocCheck(NC * sizeof(float));
    char what[96];
    cpu_layernorm(ref, rmean, rrstd, in, w, b, N, C);
    download_bf16(got, d_out, NC);
    snprintf(what, sizeof(what), "%s %s", who, out_name);
    check_vs_ref(what, got, ref, NC, 2e-3, 1e-2);
    download_f32(got, d_mean, N);
    snprintf(what, sizeof(what), "%s mean", who);
    check_vs_ref(what, got, rmean, N, 1e-5, 1e-5);
    download_f32(got, d_rstd, N);
    snprintf(what, sizeof(what), "%s rstd", who);
    check_vs_ref(what, got, rrstd, N, 0.0, 1e-4);
    for (int r = 0; mean_ref && r < N; r++) {
        mean_ref[r] = (float)rmean[r];
        rstd_ref[r] = (float)rrstd[r];
    }
    free(ref); free(rmean); free(rrstd); free(got);
}

static void run_case(const char *name, int B, int T, int C, int timing) {
    const int N = B * T;
    const size_t NC = (size_t)N * C;
    printf("case %s: B=%d T=%d C=%d (backward: %d warps per block)\n", name, B, T, C, layernorm_backward_warps(C));
    // inputs like a residual stream: a per-row offset plus spread
    float *x = (float *)mallocCheck(NC * sizeof(float));
    {
        Rng r = {11};
        for (int row = 0; row < N; row++) {
            const float offset = rng_range(&r, -2.0f, 2.0f), spread = rng_range(&r, 0.5f, 3.0f);
            for (int c = 0; c < C; c++) { x[(size_t)row * C + c] = round_bf16(offset + spread * rng_normal(&r)); }
        }
    }
    float *x2 = host_uniform_bf16(NC, -1.0f, 1.0f, 12);
    float *w = host_uniform_bf16(C, 0.5f, 1.5f, 13), *b = host_uniform_bf16(C, -0.5f, 0.5f, 14);
    float *dout = host_uniform_bf16(NC, -1.0f, 1.0f, 15);
    float *dinp0 = host_uniform_bf16(NC, -1.0f, 1.0f, 16);
    float *dw0 = host_uniform_bf16(C, -1.0f, 1.0f, 17), *db0 = host_uniform_bf16(C, -1.0f, 1.0f, 18);

    floatX *d_x = device_bf16_from(x, NC), *d_x2 = device_bf16_from(x2, NC), *d_w = device_bf16_from(w, C),
           *d_b = device_bf16_from(b, C), *d_dout = device_bf16_from(dout, NC);
    floatX *d_out = (floatX *)device_alloc(NC * sizeof(floatX)), *d_res = (floatX *)device_alloc(NC * sizeof(floatX));
    float *d_mean = (float *)device_alloc(N * sizeof(float)), *d_rstd = (float *)device_alloc(N * sizeof(float));
    floatX *d_dinp = device_bf16_from(dinp0, NC), *d_dw = device_bf16_from(dw0, C), *d_db = device_bf16_from(db0, C);
    float *d_scratch = (float *)device_alloc(layernorm_backward_scratch_bytes(B, T, C));

    float *got = (float *)mallocCheck(NC * sizeof(float));
    float *mean_f = (float *)mallocCheck(N * sizeof(float)), *rstd_f = (float *)mallocCheck(N * sizeof(float));

    // 1. forward (the backward below takes these reference statistics)
    layernorm_forward(d_out, d_mean, d_rstd, d_x, d_w, d_b, B, T, C, 0);
    check_forward("layernorm_forward", "out", d_out, d_mean, d_rstd, x, w, b, N, C, mean_f, rstd_f);

    // 2. fused residual + layernorm: residual = x2 + x
    fused_residual_forward(d_res, d_out, d_mean, d_rstd, d_x2, d_x, d_w, d_b, N, C, 0);
    float *res = (float *)mallocCheck(NC * sizeof(float));
    for (size_t i = 0; i < NC; i++) { res[i] = round_bf16(x2[i] + x[i]); }
    download_bf16(got, d_res, NC);
    check_close("fused_residual_forward residual (exact)", got, res, NC, 0.0, 0.0);
    check_forward("fused_residual_forward", "normed", d_out, d_mean, d_rstd, res, w, b, N, C, NULL, NULL);

    // 3. the residual add alone (add_bf16, llmc/cuda/cuda_common.cuh)
    add_bf16(d_out, d_x2, d_x, NC, 0);
    download_bf16(got, d_out, NC);
    check_close("add_bf16, the residual add alone (exact)", got, res, NC, 0.0, 0.0);

    // 4. backward of the layernorm of x, with the reference statistics
    cudaCheck(cudaMemcpy(d_mean, mean_f, N * sizeof(float), cudaMemcpyHostToDevice));
    cudaCheck(cudaMemcpy(d_rstd, rstd_f, N * sizeof(float), cudaMemcpyHostToDevice));
    layernorm_backward(d_dinp, d_dw, d_db, d_dout, d_x, d_w, d_mean, d_rstd, B, T, C, d_scratch, 0);
    double *rdw = (double *)callocCheck(C, sizeof(double)), *rdb = (double *)callocCheck(C, sizeof(double));
    float *rdinp = (float *)mallocCheck(NC * sizeof(float));
    for (int r = 0; r < N; r++) {
        const size_t off = (size_t)r * C;
        const double m = mean_f[r], s = rstd_f[r];
        double mdn = 0.0, mdnx = 0.0;
        for (int c = 0; c < C; c++) {
            const double xh = (x[off + c] - m) * s, dn = (double)dout[off + c] * w[c];
            mdn += dn;
            mdnx += dn * xh;
        }
        mdn /= C;
        mdnx /= C;
        for (int c = 0; c < C; c++) {
            const double xh = (x[off + c] - m) * s, dn = (double)dout[off + c] * w[c];
            rdinp[off + c] = (float)(dinp0[off + c] + s * (dn - mdn - xh * mdnx));
            rdw[c] += dout[off + c] * xh;
            rdb[c] += dout[off + c];
        }
    }
    float *rdw_f = (float *)mallocCheck(C * sizeof(float)), *rdb_f = (float *)mallocCheck(C * sizeof(float));
    for (int c = 0; c < C; c++) {
        rdw_f[c] = (float)(dw0[c] + rdw[c]);
        rdb_f[c] = (float)(db0[c] + rdb[c]);
    }
    download_bf16(got, d_dinp, NC);
    check_close("layernorm_backward dinp +=", got, rdinp, NC, 2e-3, 1e-2);
    float *gw = (float *)mallocCheck(C * sizeof(float)), *gb = (float *)mallocCheck(C * sizeof(float));
    download_bf16(gw, d_dw, C);
    download_bf16(gb, d_db, C);
    check_close("layernorm_backward dweight +=", gw, rdw_f, C, 5e-2, 1e-2);
    check_close("layernorm_backward dbias +=", gb, rdb_f, C, 5e-2, 1e-2);

    // 5. determinism
    upload_bf16(d_dinp, dinp0, NC);
    upload_bf16(d_dw, dw0, C);
    upload_bf16(d_db, db0, C);
    layernorm_backward(d_dinp, d_dw, d_db, d_dout, d_x, d_w, d_mean, d_rstd, B, T, C, d_scratch, 0);
    float *again = (float *)mallocCheck(NC * sizeof(float)), *againw = (float *)mallocCheck(C * sizeof(float)),
          *againb = (float *)mallocCheck(C * sizeof(float));
    download_bf16(again, d_dinp, NC);
    download_bf16(againw, d_dw, C);
    download_bf16(againb, d_db, C);
    check_bitwise("layernorm_backward dinp, second run", got, again, NC * sizeof(float));
    check_bitwise("layernorm_backward dweight, second run", gw, againw, C * sizeof(float));
    check_bitwise("layernorm_backward dbias, second run", gb, againb, C * sizeof(float));

    if (timing) {  // each line names the width: d12's and d48's are timed
        char what[96];
        auto at_c = [&](const char *op) { snprintf(what, sizeof(what), "%s, C=%d", op, C); return what; };
        float ms = time_ms([&] { layernorm_forward(d_out, d_mean, d_rstd, d_x, d_w, d_b, B, T, C, 0); }, 50);
        report_bandwidth(at_c("layernorm_forward"), ms, 2.0 * NC * 2 + 8.0 * N);
        ms = time_ms([&] { fused_residual_forward(d_res, d_out, d_mean, d_rstd, d_x2, d_x, d_w, d_b, N, C, 0); }, 50);
        report_bandwidth(at_c("fused_residual_forward"), ms, 4.0 * NC * 2 + 8.0 * N);
        ms = time_ms([&] { add_bf16(d_out, d_x2, d_x, NC, 0); }, 50);
        report_bandwidth(at_c("add_bf16, the residual add alone"), ms, 3.0 * NC * 2);
        ms = time_ms([&] { layernorm_backward(d_dinp, d_dw, d_db, d_dout, d_x, d_w, d_mean, d_rstd, B, T, C, d_scratch, 0); }, 50);
        report_bandwidth(at_c("layernorm_backward (both stages)"), ms, 4.0 * NC * 2 + 8.0 * N);
    }

    cudaCheck(cudaFree(d_x)); cudaCheck(cudaFree(d_x2)); cudaCheck(cudaFree(d_w)); cudaCheck(cudaFree(d_b));
    cudaCheck(cudaFree(d_dout)); cudaCheck(cudaFree(d_out)); cudaCheck(cudaFree(d_res)); cudaCheck(cudaFree(d_mean));
    cudaCheck(cudaFree(d_rstd)); cudaCheck(cudaFree(d_dinp)); cudaCheck(cudaFree(d_dw)); cudaCheck(cudaFree(d_db));
    cudaCheck(cudaFree(d_scratch));
    free(x); free(x2); free(w); free(b); free(dout); free(dinp0); free(dw0); free(db0); free(got); free(mean_f); free(rstd_f); free(res); free(rdw); free(rdb); free(rdinp);
    free(rdw_f); free(rdb_f); free(gw); free(gb); free(again); free(againw); free(againb);
}

int main(void) {
    workbench_init("layernorm");
    run_case("tiny, rows not a multiple of the block", 2, 5, 64, 0);
    if (!WB_SIM) {
        // d48's width, timed: its backward ran at about half of d12's bandwidth in the 2026-11-27 profile
        run_case("GPT-2 1.5B width (C=1600), B=16", 16, 1024, 1600, 1);
        run_case("GPT-2 124M", 64, 1024, 768, 1);
    } else {
        run_case("d48 width (C=1600), simulator size", 2, 64, 1600, 0);
        run_case("more row blocks (19) than column-sum warps (16)", 4, 300, 64, 0);
        run_case("row blocks (132) past one round of the column sums' 16 x 8 running sums", 4, 2100, 64, 0);
        run_case("GPT-2 width, simulator size", 2, 100, 768, 0);
    }
    return workbench_finish("layernorm");
}
