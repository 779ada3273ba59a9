/*
 * Workbench: the gradient norm (llmc/cuda/global_norm.cuh).
 *
 * Checks:
 *   every chunk's fp32 sum of squares BITWISE equal to emulate.h's CPU emulation of the kernel's
 *       fixed order (fp32 fused multiply-adds and adds only, so exact on both sides), over the
 *       chunks of a real model's gradients (gpt2_norm_chunks: the vectorized path) and over
 *       hand-cut chunks of a misaligned array (the scalar path); norm^2 (the chunks added in
 *       double) within rtol 1e-5 of a double sum of all squares.
 *   ZeRO-1's split: two ranges of chunks computed apart give the whole run's sums bit for bit, and
 *       a launch leaves the entries of other chunks alone.
 *   one inf or one NaN gradient: norm^2 not finite (the numeric guards' signal to skip the step).
 *   determinism: a second run is bitwise identical.
 * Size: the 124,475,904 gradients of GPT-2 124M (2,046 chunks); bandwidth from one read of them.
 *
 *   ./global_norm
 */
#include "common.h"
#include "emulate.h"
#include "llmc/cuda/global_norm.cuh"

// chunk boundaries on the device
static size_t *device_starts(const size_t *starts, size_t chunks) {
    size_t *d = (size_t *)device_alloc((chunks + 1) * sizeof(size_t));
    cudaCheck(cudaMemcpy(d, starts, (chunks + 1) * sizeof(size_t), cudaMemcpyHostToDevice));
    return d;
}

// sums of chunks [first, first + count) after filling all `chunks` entries with -1 (untouched)
static void run_sums(float *sums, float *d_sums, const floatX *d_g, const size_t *d_starts, size_t chunks, size_t first,
                     size_t count) {
    for (size_t c = 0; c < chunks; c++) { sums[c] = -1.0f; }
    cudaCheck(cudaMemcpy(d_sums, sums, chunks * sizeof(float), cudaMemcpyHostToDevice));
    global_norm_chunk_sums(d_sums, d_g, d_starts, first, count, 0);
    download_f32(sums, d_sums, chunks);
}

static double total_of(const float *sums, size_t chunks) {
    double *d = (double *)mallocCheck(chunks * sizeof(double));
    for (size_t c = 0; c < chunks; c++) { d[c] = sums[c]; }
    const double t = global_norm_total(d, chunks);
    free(d);
    return t;
}

int main(void) {
    workbench_init("global_norm");
    // GPT-2 124M (Vp = 50304); under the simulator a small model whose wte still spans several chunks
    GPT2Config cfg = {1024, 50257, 50304, 12, 12, 768};
    if (WB_SIM) { cfg = (GPT2Config){64, 1000, 1024, 2, 1, 128}; }
    const size_t n = gpt2_num_params(&cfg), chunks = gpt2_norm_chunks(&cfg, NULL);
    size_t *starts = (size_t *)mallocCheck((chunks + 1) * sizeof(size_t));
    gpt2_norm_chunks(&cfg, starts);
    float *g = host_uniform_bf16(n, -1e-2f, 1e-2f, 71);
    floatX *d_g = device_bf16_from(g, n);  // allocated with 16 spare bytes: d_g + 1 stays inside
    size_t *d_starts = device_starts(starts, chunks);
    float *d_sums = (float *)device_alloc(global_norm_scratch_bytes(chunks));
    float *sums = (float *)mallocCheck(chunks * sizeof(float)), *emu = (float *)mallocCheck(chunks * sizeof(float));
    float *again = (float *)mallocCheck(chunks * sizeof(float));

    double exact = 0.0;
    for (size_t i = 0; i < n; i++) { exact += (double)g[i] * g[i]; }

    printf("case the model's chunks (vectorized): n=%zu, %zu chunks\n", n, chunks);
    run_sums(sums, d_sums, d_g, d_starts, chunks, 0, chunks);
    for (size_t c = 0; c < chunks; c++) { emu[c] = emulate_global_norm_chunk(g, starts[c], starts[c + 1], 1); }
    check_bitwise("every chunk's sum == CPU emulation of the order", sums, emu, chunks * sizeof(float));
    float got = (float)total_of(sums, chunks), ref = (float)exact;
    check_close("norm^2 vs double", &got, &ref, 1, 0.0, 1e-5);
    run_sums(again, d_sums, d_g, d_starts, chunks, 0, chunks);
    check_bitwise("chunk sums, second run", sums, again, chunks * sizeof(float));

    printf("case ZeRO-1's split: chunks [0, %zu) and [%zu, %zu) apart\n", chunks / 3, chunks / 3, chunks);
    float *part = (float *)mallocCheck(chunks * sizeof(float));
    run_sums(part, d_sums, d_g, d_starts, chunks, chunks / 3, chunks - chunks / 3);
    int untouched = 1;
    for (size_t c = 0; c < chunks / 3; c++) { untouched &= part[c] == -1.0f; }
    check_true("a launch leaves the other chunks' entries alone", untouched, "");
    run_sums(again, d_sums, d_g, d_starts, chunks, 0, chunks / 3);
    memcpy(again + chunks / 3, part + chunks / 3, (chunks - chunks / 3) * sizeof(float));
    check_bitwise("the two ranges' sums == the whole run's", again, sums, chunks * sizeof(float));
    free(part);

    // scalar path: the array seen from d_g + 1 (misaligned), its first 115,003 cut at odd places
    const size_t cuts[6] = {0, 3, 1000, 50003, 115000, 115003};
    size_t *d_cuts = device_starts(cuts, 5);
    printf("case misaligned array, odd cuts (scalar): 5 chunks of the first %zu\n", cuts[5]);
    float s5[5], e5[5];
    run_sums(s5, d_sums, d_g + 1, d_cuts, 5, 0, 5);
    for (int c = 0; c < 5; c++) { e5[c] = emulate_global_norm_chunk(g + 1, cuts[c], cuts[c + 1], 0); }
    check_bitwise("every chunk's sum == CPU emulation of the order", s5, e5, sizeof(s5));
    got = (float)total_of(s5, 5);
    double exact2 = 0.0;
    for (size_t i = 1; i <= cuts[5]; i++) { exact2 += (double)g[i] * g[i]; }
    ref = (float)exact2;
    check_close("norm^2 vs double", &got, &ref, 1, 0.0, 1e-5);
    cudaCheck(cudaFree(d_cuts));

    printf("case non-finite gradients\n");
    const float specials[2] = {INFINITY, NAN};
    for (int k = 0; k < 2; k++) {
        float saved = g[12345];
        g[12345] = specials[k];
        upload_bf16(d_g, g, n);
        run_sums(again, d_sums, d_g, d_starts, chunks, 0, chunks);
        const double t = total_of(again, chunks);
        char detail[96];
        snprintf(detail, sizeof(detail), "norm^2 = %g", t);
        check_true(k == 0 ? "one inf gradient: norm^2 inf" : "one NaN gradient: norm^2 NaN", k == 0 ? isinf(t) : isnan(t),
                   detail);
        g[12345] = saved;
    }
    upload_bf16(d_g, g, n);

    if (!WB_SIM) {
        float ms = time_ms([&] { global_norm_chunk_sums(d_sums, d_g, d_starts, 0, chunks, 0); }, 50);
        report_bandwidth("global_norm_chunk_sums", ms, 2.0 * n);
    }

    cudaCheck(cudaFree(d_g)); cudaCheck(cudaFree(d_starts)); cudaCheck(cudaFree(d_sums));
    free(g); free(starts); free(sums); free(emu); free(again);
    return workbench_finish("global_norm");
}
