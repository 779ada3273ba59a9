/*
 * Workbench: the embedding layer (llmc/cuda/encoder.cuh).
 *
 * Checks, per case:
 *   forward   bitwise against the CPU (one fp32 add of two bf16 values, rounded to nearest: exact)
 *   backward  dwte/dwpe bitwise against emulate.h's CPU emulation of the kernels' fixed summation
 *             order (exact in which positions reach which row; the order itself only as far as
 *             it survives the final bf16 rounding), and within tolerance of a double-precision sum (the accumulated gradients
 *             are bf16: one rounding of an fp32 sum, at most 2^-8 relative, plus fp32 summation
 *             error far below that: rtol 1e-2, atol 1e-2 for sums that cancel to near zero)
 *   determinism: a second backward from the same start is bitwise identical.
 * Tokens are drawn with a heavy head (a few ids make up ~10% of the positions) so that the
 * split path for frequent tokens (more than ENCODER_SEGMENT positions) runs.
 * Timing at GPT-2 124M sizes (B=64, T=1024, C=768), bandwidth from the minimum traffic.
 *
 *   ./encoder
 */
#include "common.h"
#include "emulate.h"
#include "llmc/cuda/encoder.cuh"

static void make_tokens(int *inp, int n, int V, double head_fraction, uint64_t seed) {
    Rng r = {seed};
    for (int i = 0; i < n; i++) {
        const float u = rng_uniform(&r);
        if (u < head_fraction * 0.6) {
            inp[i] = 0;  // one very frequent id (end-of-text-like)
        } else if (u < head_fraction) {
            inp[i] = 1 + rng_int(&r, 20);  // a handful of common ids
        } else {
            inp[i] = rng_int(&r, V);
        }
    }
}

static void run_case(const char *name, int B, int T, int C, int V, int Vp, double head_fraction, int timing) {
    printf("case %s: B=%d T=%d C=%d V=%d Vp=%d\n", name, B, T, C, V, Vp);
    const int BT = B * T;
    const size_t nout = (size_t)BT * C;
    int *inp = (int *)mallocCheck(BT * sizeof(int));
    make_tokens(inp, BT, V, head_fraction, 1234 + C);
    float *wte = host_uniform_bf16((size_t)Vp * C, -1.0f, 1.0f, 1);
    float *wpe = host_uniform_bf16((size_t)T * C, -1.0f, 1.0f, 2);
    float *dout = host_uniform_bf16(nout, -1.0f, 1.0f, 3);
    float *dwte0 = host_uniform_bf16((size_t)Vp * C, -0.5f, 0.5f, 4);  // gradients accumulate into these
    float *dwpe0 = host_uniform_bf16((size_t)T * C, -0.5f, 0.5f, 5);

    int *d_inp = (int *)device_alloc(BT * sizeof(int));
    cudaCheck(cudaMemcpy(d_inp, inp, BT * sizeof(int), cudaMemcpyHostToDevice));
    floatX *d_wte = device_bf16_from(wte, (size_t)Vp * C), *d_wpe = device_bf16_from(wpe, (size_t)T * C);
    floatX *d_dout = device_bf16_from(dout, nout);
    floatX *d_out = (floatX *)device_alloc(nout * sizeof(floatX));
    floatX *d_dwte = device_bf16_from(dwte0, (size_t)Vp * C), *d_dwpe = device_bf16_from(dwpe0, (size_t)T * C);
    EncoderBackwardWork work;
    encoder_backward_work_init(&work, B, T, C);

    // forward
    encoder_forward(d_out, d_inp, d_wte, d_wpe, B, T, C, 0);
    float *out = (float *)mallocCheck(nout * sizeof(float)), *ref = (float *)mallocCheck(nout * sizeof(float));
    download_bf16(out, d_out, nout);
    for (int bt = 0; bt < BT; bt++) {
        for (int c = 0; c < C; c++) {
            ref[(size_t)bt * C + c] = round_bf16(wte[(size_t)inp[bt] * C + c] + wpe[(size_t)(bt % T) * C + c]);
        }
    }
    check_close("forward out (exact)", out, ref, nout, 0.0, 0.0);

    // backward: the plan statistics, then the GPU against the emulation and the double reference
    {
        int *plan = (int *)mallocCheck(encoder_plan_ints(BT) * sizeof(int));
        int *counts = (int *)mallocCheck(ENCODER_TOKEN_RANGE * sizeof(int));
        EncoderPlanCounts n;
        encoder_backward_plan(plan, counts, inp, BT, &n);
        printf("  plan: %d segments, %d frequent tokens split into %d partial rows\n", n.num_segments, n.num_split,
               n.num_slots);
        free(plan);
        free(counts);
    }
    encoder_backward(d_dwte, d_dwpe, d_dout, inp, B, T, C, &work, 0);
    float *dwte = (float *)mallocCheck((size_t)Vp * C * sizeof(float)), *dwpe = (float *)mallocCheck((size_t)T * C * sizeof(float));
    download_bf16(dwte, d_dwte, (size_t)Vp * C);
    download_bf16(dwpe, d_dwpe, (size_t)T * C);
    float *emu_wte = (float *)mallocCheck((size_t)Vp * C * sizeof(float)), *emu_wpe = (float *)mallocCheck((size_t)T * C * sizeof(float));
    memcpy(emu_wte, dwte0, (size_t)Vp * C * sizeof(float));
    memcpy(emu_wpe, dwpe0, (size_t)T * C * sizeof(float));
    emulate_encoder_backward(emu_wte, emu_wpe, dout, inp, B, T, C);
    check_bitwise("dwte == CPU emulation of the summation order", dwte, emu_wte, (size_t)Vp * C * sizeof(float));
    check_bitwise("dwpe == CPU emulation of the summation order", dwpe, emu_wpe, (size_t)T * C * sizeof(float));

    double *acc = (double *)callocCheck((size_t)Vp * C, sizeof(double));
    for (int bt = 0; bt < BT; bt++) {
        for (int c = 0; c < C; c++) { acc[(size_t)inp[bt] * C + c] += dout[(size_t)bt * C + c]; }
    }
    float *ref_wte = (float *)mallocCheck((size_t)Vp * C * sizeof(float));
    for (size_t i = 0; i < (size_t)Vp * C; i++) { ref_wte[i] = (float)(dwte0[i] + acc[i]); }
    float *ref_wpe = (float *)mallocCheck((size_t)T * C * sizeof(float));
    for (int t = 0; t < T; t++) {
        for (int c = 0; c < C; c++) {
            double a = dwpe0[(size_t)t * C + c];
            for (int b = 0; b < B; b++) { a += dout[((size_t)b * T + t) * C + c]; }
            ref_wpe[(size_t)t * C + c] = (float)a;
        }
    }
    check_close("dwte += (vs double sum)", dwte, ref_wte, (size_t)Vp * C, 1e-2, 1e-2);
    check_close("dwpe += (vs double sum)", dwpe, ref_wpe, (size_t)T * C, 1e-2, 1e-2);

    // determinism: the same backward from the same start
    upload_bf16(d_dwte, dwte0, (size_t)Vp * C);
    upload_bf16(d_dwpe, dwpe0, (size_t)T * C);
    encoder_backward(d_dwte, d_dwpe, d_dout, inp, B, T, C, &work, 0);
    float *again = (float *)mallocCheck((size_t)Vp * C * sizeof(float));
    download_bf16(again, d_dwte, (size_t)Vp * C);
    check_bitwise("dwte, second run", dwte, again, (size_t)Vp * C * sizeof(float));

    if (timing) {
        float ms = time_ms([&] { encoder_forward(d_out, d_inp, d_wte, d_wpe, B, T, C, 0); }, 50);
        // ids, one wte row and one wpe row per position (wpe rows are re-read from cache), the output
        report_bandwidth("encoder_forward", ms, BT * 4.0 + 2.0 * nout * 2.0 + (double)T * C * 2.0);
        const double t0 = llmc_wall_seconds();
        const int plan_reps = 20;
        for (int i = 0; i < plan_reps; i++) {
            EncoderPlanCounts n;
            encoder_backward_plan(work.plan_host, work.counts_host, inp, BT, &n);
        }
        printf("  time %-47s %9.4f ms  (host counting sort of %d ids)\n", "encoder_backward plan (host)",
               (llmc_wall_seconds() - t0) * 1e3 / plan_reps, BT);
        ms = time_ms([&] { encoder_backward(d_dwte, d_dwpe, d_dout, inp, B, T, C, &work, 0); }, 20);
        // dout read twice (dwte pass, dwpe pass), dwte rows of the distinct tokens and dwpe read+written
        int distinct = 0;
        {
            char *seen = (char *)callocCheck(Vp, 1);
            for (int i = 0; i < BT; i++) { if (!seen[inp[i]]) { seen[inp[i]] = 1; distinct++; } }
            free(seen);
        }
        report_bandwidth("encoder_backward (plan + copy + kernels)", ms,
                         2.0 * nout * 2.0 + 4.0 * distinct * C + 4.0 * T * C + BT * 4.0);
    }

    encoder_backward_work_free(&work);
    cudaCheck(cudaFree(d_inp)); cudaCheck(cudaFree(d_wte)); cudaCheck(cudaFree(d_wpe)); cudaCheck(cudaFree(d_dout));
    cudaCheck(cudaFree(d_out)); cudaCheck(cudaFree(d_dwte)); cudaCheck(cudaFree(d_dwpe));
    free(inp); free(wte); free(wpe); free(dout); free(dwte0); free(dwpe0); free(out); free(ref); free(dwte); free(dwpe);
    free(emu_wte); free(emu_wpe); free(acc); free(ref_wte); free(ref_wpe); free(again);
}

int main(void) {
    workbench_init("encoder");
    run_case("tiny", 2, 8, 64, 100, 128, 0.1, 0);
    run_case("one dominant token (split into 5 segments)", 4, 256, 768, 1000, 1024, 0.9, 0);
    if (!WB_SIM) {
        run_case("d48 width (C=1600, partial 256-channel slice)", 2, 256, 1600, 50257, 50304, 0.1, 0);
        run_case("GPT-2 124M", 64, 1024, 768, 50257, 50304, 0.1, 1);
    } else {
        run_case("d48 width (C=1600, partial 256-channel slice), simulator size", 2, 128, 1600, 1000, 1024, 0.1, 0);
        run_case("GPT-2 width, simulator size", 4, 128, 768, 2000, 2048, 0.1, 0);
    }
    return workbench_finish("encoder");
}
