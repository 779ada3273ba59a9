/*
 * Workbench: the linear layers on cuBLASLt (llmc/cuda/matmul.cuh, llmc/cuda/cublas_common.cuh) with their
 * fused epilogues, the dbias reduction kernel, and the unfused GELU alternative for timing.
 *
 * Every GPT-2 124M layer shape is run at B*T = 16384 (the LM head at 8192) and checked on
 * sampled rows (outputs, dinp), sampled rows of dweight, and all of dbias, against double sums.
 * Tolerance per element, and why:
 *   bf16 result of an fp32 (tensor-core) dot product: rounding to bf16 is <= 2^-8 relative ->
 *   1e-2 * |ref|; fp32 accumulation of K exact bf16 products, even with truncating adders, is
 *   below K * 2^-23 * S where S = sum of |terms| -> 1e-3 * S (1.2e-3 * S where a GELU or its
 *   derivative, slope <= 1.13, follows);
 *   GELU epilogue: cuBLASLt's GELU form is not documented; the tanh and erf forms differ by at
 *   most 4.7e-4 (value) and 8.7e-4 (derivative), and a tanh evaluated with the hardware
 *   tanh.approx (relative error 2^-11) is off by up to ~1e-3 (value, |x| <= 4) and ~2e-3
 *   (derivative), so +2e-3 absolute on GELU outputs and +4e-3 * |dout @ W| on GELU-backward
 *   outputs. The workbench prints which form the epilogue's output is closer to.
 * dweight and dbias start from random values (they accumulate); dinp is overwritten.
 * Determinism: a second backward from the same start is bitwise identical (dinp, dweight, dbias).
 * Timing: TFLOP/s from 2*N*C*OC per GEMM; fused GELU epilogues against matmul + gelu kernels.
 * Then all of it again with the algorithms chosen by timing (-mt 1, cublas_set_tuning): the same
 * checks on the chosen algorithms, and times to hold against the heuristic's first choices.
 * Then the layers with a bias once more with -bg 1 (matmul_set_bias_grad_epilogue): dbias from the
 * weight-gradient GEMM's BGRADB epilogue, checked like ours (+ 4e-3 * |column sum|: the epilogue
 * rounds its sum to bf16 before it is added), and whether cuBLASLt took the epilogue for every
 * shape; the timing pass puts the dweight GEMM + our dbias beside the GEMM with the epilogue. On
 * the simulator the tiny layer also runs with the epilogue refused (SIM_CUBLASLT_NO_BGRADB: no
 * algorithm, or one that cublasLtMatmul then refuses): our kernel must take over.
 * Last, on a GPU, a probe of the bias-gradient epilogues that this cuBLASLt has for the biased
 * layers' shapes (beta 1 as -bg 1 runs it, and 0; a bf16 or fp32 bias gradient; DGELU_BGRAD on the
 * fcproj dinp GEMM): algorithm counts and times beside the plain GEMM, for the next design should
 * -bg 1's find none or a slow one.
 *
 *   ./matmul
 */
#include "common.h"
#include "llmc/cuda/gelu.cuh"
#include "llmc/cuda/matmul.cuh"

static double ref_gelu_erf(double x) { return 0.5 * x * (1.0 + erf(x / sqrt(2.0))); }

// sampled row indices: the first two, the last, and random ones
static int *sample_rows(int N, int count, uint64_t seed) {
    int *rows = (int *)mallocCheck(count * sizeof(int));
    Rng r = {seed};
    for (int i = 0; i < count; i++) { rows[i] = i == 0 ? 0 : i == 1 ? N - 1 : i == 2 ? 1 : rng_int(&r, N); }
    return rows;
}

typedef struct {
    const char *name;
    int B, T, C, OC;
    int bias;       // the layer has a bias
    int gelu_fwd;   // forward with the fused GELU (the MLP fc layer)
    int gelu_bwd;   // backward with the fused GELU derivative (the MLP fcproj layer)
    int rows;       // sampled rows to check (N = all)
    int timing;
    int offset;     // elements: every bf16 device pointer is offset by this much from its allocation
} Layer;

// acc[c] = sum_k a[k * a_stride] M[k][c] in double over K rows of C, and S[c] = sum_k |a[k * a_stride] M[k][c]|
// (the scale of the fp32 summation error): one row of a matmul backward's reference
static void ref_vec_mat(double *acc, double *S, const float *a, size_t a_stride, const float *M, int K, int C) {
    for (int c = 0; c < C; c++) { acc[c] = 0.0; S[c] = 0.0; }
    for (int k = 0; k < K; k++) {
        const double d = a[(size_t)k * a_stride];
        const float *mr = M + (size_t)k * C;
        for (int c = 0; c < C; c++) { acc[c] += d * mr[c]; S[c] += fabs(d * mr[c]); }
    }
}

// a device copy of h at `offset` elements into a fresh allocation (16-byte but not 256-byte
// aligned views for offset 8, like per-layer slices of a parameter buffer); free with view_free
static floatX *view_from(const float *h, size_t n, int offset) {
    floatX *base = (floatX *)device_alloc((n + offset) * sizeof(floatX));
    upload_bf16(base + offset, h, n);
    return base + offset;
}
static floatX *view_alloc(size_t n, int offset) { return (floatX *)device_alloc((n + offset) * sizeof(floatX)) + offset; }
static void view_free(floatX *p, int offset) {
    if (p) { cudaCheck(cudaFree(p - offset)); }
}

// one layer's inputs on the host and the device, its sampled rows, and the GPU's backward results
typedef struct {
    const Layer *L;
    int N, C, OC;
    size_t nin, nout, nw;
    float *inp, *w, *bias, *dout, *dw0, *db0, *pre_in;  // host (bias, pre_in NULL where the layer has none)
    floatX *d_inp, *d_w, *d_dout, *d_bias, *d_out, *d_pre, *d_pre_in, *d_dinp, *d_dw, *d_db;
    float *d_scratch;
    int R;                  // rows checked
    int *rows;              // the sampled rows, NULL where all N are checked
    float *gdinp, *gdw, *gdb;  // the GPU's first backward
} LayerRun;

// the i-th checked row
static int row_of(const LayerRun *d, int i) { return d->rows ? d->rows[i] : i; }

// prints the layer's line, makes its random inputs and their device views, picks the rows to check
static void layer_setup(LayerRun *d, const Layer *L) {
    const int N = L->B * L->T, C = L->C, OC = L->OC;
    d->L = L; d->N = N; d->C = C; d->OC = OC;
    printf("case %s: N=B*T=%d C=%d OC=%d%s%s%s%s\n", L->name, N, C, OC, L->bias ? " bias" : "", L->gelu_fwd ? " gelu-fwd" : "",
           L->gelu_bwd ? " gelu-bwd" : "", L->offset ? " (pointers 16 bytes past 256-byte alignment)" : "");
    const size_t nin = (size_t)N * C, nout = (size_t)N * OC, nw = (size_t)OC * C;
    d->nin = nin; d->nout = nout; d->nw = nw;
    const float a = sqrtf(3.0f / C);  // weights with variance 1/C keep outputs O(1)
    d->inp = host_uniform_bf16(nin, -1.0f, 1.0f, 21);
    d->w = host_uniform_bf16(nw, -a, a, 22);
    d->bias = L->bias ? host_uniform_bf16(OC, -0.5f, 0.5f, 23) : NULL;
    d->dout = host_uniform_bf16(nout, -1.0f, 1.0f, 24);
    d->dw0 = host_uniform_bf16(nw, -1.0f, 1.0f, 25);
    d->db0 = host_uniform_bf16(OC, -1.0f, 1.0f, 26);
    d->pre_in = L->gelu_bwd ? host_uniform_bf16(nin, -3.0f, 3.0f, 27) : NULL;  // pre-activation of this layer's input

    const int off = L->offset;
    d->d_inp = view_from(d->inp, nin, off); d->d_w = view_from(d->w, nw, off); d->d_dout = view_from(d->dout, nout, off);
    d->d_bias = d->bias ? view_from(d->bias, OC, off) : NULL;
    d->d_out = view_alloc(nout, off);
    d->d_pre = L->gelu_fwd ? view_alloc(nout, off) : NULL;
    d->d_pre_in = d->pre_in ? view_from(d->pre_in, nin, off) : NULL;
    d->d_dinp = view_alloc(nin, off);
    d->d_dw = view_from(d->dw0, nw, off); d->d_db = view_from(d->db0, OC, off);
    d->d_scratch = (float *)device_alloc(matmul_backward_scratch_bytes(L->B, L->T, OC));

    d->R = L->rows < N ? L->rows : N;
    d->rows = d->R == N ? NULL : sample_rows(N, d->R, 99);
}

// frees what layer_setup and run_backward made
static void layer_free(LayerRun *d) {
    const int off = d->L->offset;
    view_free(d->d_inp, off); view_free(d->d_w, off); view_free(d->d_dout, off); view_free(d->d_out, off);
    view_free(d->d_dinp, off); view_free(d->d_dw, off); view_free(d->d_db, off); view_free(d->d_bias, off);
    view_free(d->d_pre, off); view_free(d->d_pre_in, off);
    cudaCheck(cudaFree(d->d_scratch));
    free(d->inp); free(d->w); free(d->bias); free(d->dout); free(d->dw0); free(d->db0); free(d->pre_in); free(d->gdinp);
    free(d->gdw); free(d->gdb); free(d->rows);
}

// forward on the sampled rows: out (and the GELU aux pre-activation) against double sums; prints the GELU form
static void check_forward(const LayerRun *d) {
    const Layer *L = d->L;
    const int R = d->R, C = d->C, OC = d->OC;
    const float *inp = d->inp, *w = d->w, *bias = d->bias;
    matmul_forward(d->d_out, d->d_inp, d->d_w, d->d_bias, L->B, L->T, C, OC, d->d_pre, 0);
    float *got = (float *)mallocCheck(d->nout * sizeof(float));
    float *gotp = L->gelu_fwd ? (float *)mallocCheck(d->nout * sizeof(float)) : NULL;
    download_bf16(got, d->d_out, d->nout);
    if (gotp) { download_bf16(gotp, d->d_pre, d->nout); }
    float *g = (float *)mallocCheck((size_t)R * OC * sizeof(float)), *gp = (float *)mallocCheck((size_t)R * OC * sizeof(float));
    float *ref = (float *)mallocCheck((size_t)R * OC * sizeof(float)), *refp = (float *)mallocCheck((size_t)R * OC * sizeof(float));
    float *tol = (float *)mallocCheck((size_t)R * OC * sizeof(float)), *tolp = (float *)mallocCheck((size_t)R * OC * sizeof(float));
    double max_tanh = 0.0, max_erf = 0.0;
    for (int i = 0; i < R; i++) {
        const int r = row_of(d, i);
        for (int o = 0; o < OC; o++) {
            double s = bias ? bias[o] : 0.0, S = bias ? fabs(bias[o]) : 0.0;
            for (int c = 0; c < C; c++) {
                const double t = (double)inp[(size_t)r * C + c] * w[(size_t)o * C + c];
                s += t;
                S += fabs(t);
            }
            const size_t j = (size_t)i * OC + o, src = (size_t)r * OC + o;
            g[j] = got[src];
            if (L->gelu_fwd) {
                gp[j] = gotp[src];
                refp[j] = (float)s;
                tolp[j] = (float)(1e-2 * fabs(s) + 1e-3 * S);
                ref[j] = (float)ref_gelu(s);
                tol[j] = (float)(1e-2 * fabs(ref_gelu(s)) + 1.2e-3 * S + 2e-3);
                const double pre_gpu = gotp[src];  // which GELU form: judged from the GPU's own pre-activation
                max_tanh = max_keep_nan(max_tanh, fabs(got[src] - ref_gelu(pre_gpu)));
                max_erf = max_keep_nan(max_erf, fabs(got[src] - ref_gelu_erf(pre_gpu)));
            } else {
                ref[j] = (float)s;
                tol[j] = (float)(1e-2 * fabs(s) + 1e-3 * S);
            }
        }
    }
    if (L->gelu_fwd) {
        check_close_tol("forward pre-activation (GELU aux)", gp, refp, tolp, (size_t)R * OC);
        check_close_tol("forward out = GELU(pre) (epilogue)", g, ref, tol, (size_t)R * OC);
        printf("    GELU epilogue: max |out - tanh-GELU(aux)| %.3g, max |out - erf-GELU(aux)| %.3g\n", max_tanh, max_erf);
    } else {
        check_close_tol("forward out", g, ref, tol, (size_t)R * OC);
    }
    free(g); free(gp); free(ref); free(refp); free(tol); free(tolp); free(got); free(gotp);
}

// the backward from the current dweight and dbias (dbias only where the layer has a bias)
static void matmul_backward_layer(const LayerRun *d, const floatX *pre_in) {
    const Layer *L = d->L;
    matmul_backward(d->d_dinp, d->d_dw, L->bias ? d->d_db : NULL, d->d_dout, d->d_inp, d->d_w, L->B, L->T, d->C, d->OC, pre_in,
                    d->d_scratch, 0);
}

// the first backward, from dw0 and db0; its dinp, dweight and dbias downloaded into gdinp, gdw, gdb
static void run_backward(LayerRun *d) {
    matmul_backward_layer(d, d->d_pre_in);
    d->gdinp = (float *)mallocCheck(d->nin * sizeof(float));
    d->gdw = (float *)mallocCheck(d->nw * sizeof(float));
    d->gdb = (float *)mallocCheck(d->OC * sizeof(float));
    download_bf16(d->gdinp, d->d_dinp, d->nin);
    download_bf16(d->gdw, d->d_dw, d->nw);
    download_bf16(d->gdb, d->d_db, d->OC);
}

// backward dinp on the sampled rows (times GELU'(pre) where fused) against double sums
static void check_dinp(const LayerRun *d) {
    const int R = d->R, C = d->C, OC = d->OC;
    const float *pre_in = d->pre_in;
    float *g = (float *)mallocCheck((size_t)R * C * sizeof(float)), *ref = (float *)mallocCheck((size_t)R * C * sizeof(float)),
          *tol = (float *)mallocCheck((size_t)R * C * sizeof(float));
    double *acc = (double *)mallocCheck(C * sizeof(double)), *S = (double *)mallocCheck(C * sizeof(double));
    for (int i = 0; i < R; i++) {
        const int r = row_of(d, i);
        ref_vec_mat(acc, S, d->dout + (size_t)r * OC, 1, d->w, OC, C);
        for (int c = 0; c < C; c++) {
            const size_t j = (size_t)i * C + c;
            g[j] = d->gdinp[(size_t)r * C + c];
            if (pre_in) {
                const double gg = ref_gelu_grad(pre_in[(size_t)r * C + c]);
                ref[j] = (float)(acc[c] * gg);
                tol[j] = (float)(1e-2 * fabs(acc[c] * gg) + 1.2e-3 * S[c] + 4e-3 * fabs(acc[c]));
            } else {
                ref[j] = (float)acc[c];
                tol[j] = (float)(1e-2 * fabs(acc[c]) + 1e-3 * S[c]);
            }
        }
    }
    check_close_tol(pre_in ? "backward dinp = (dout @ W) * GELU'(pre) (epilogue)" : "backward dinp = dout @ W", g, ref, tol,
                    (size_t)R * C);
    free(g); free(ref); free(tol); free(acc); free(S);
}

// backward dweight on sampled rows o (all C columns), accumulated onto dw0, against double sums
static void check_dweight(const LayerRun *d) {
    const int N = d->N, C = d->C, OC = d->OC;
    const float *dw0 = d->dw0;
    const int RO = OC < 8 ? OC : 8;
    int *orows = sample_rows(OC, RO, 7);
    float *g = (float *)mallocCheck((size_t)RO * C * sizeof(float)), *ref = (float *)mallocCheck((size_t)RO * C * sizeof(float)),
          *tol = (float *)mallocCheck((size_t)RO * C * sizeof(float));
    double *acc = (double *)mallocCheck(C * sizeof(double)), *S = (double *)mallocCheck(C * sizeof(double));
    for (int i = 0; i < RO; i++) {
        const int o = orows[i];
        ref_vec_mat(acc, S, d->dout + o, OC, d->inp, N, C);
        for (int c = 0; c < C; c++) {
            const size_t j = (size_t)i * C + c;
            const double v = dw0[(size_t)o * C + c] + acc[c];
            g[j] = d->gdw[(size_t)o * C + c];
            ref[j] = (float)v;
            tol[j] = (float)(1e-2 * fabs(v) + 1e-3 * (S[c] + fabs(dw0[(size_t)o * C + c])));
        }
    }
    check_close_tol("backward dweight += dout^T @ inp (sampled rows)", g, ref, tol, (size_t)RO * C);
    free(orows); free(g); free(ref); free(tol); free(acc); free(S);
}

// backward dbias (the own reduction kernel), accumulated onto db0, against double column sums over all N rows
static void check_dbias(const LayerRun *d) {
    const int N = d->N, OC = d->OC;
    const float *dout = d->dout, *db0 = d->db0;
    double *acc = (double *)callocCheck(OC, sizeof(double)), *S = (double *)callocCheck(OC, sizeof(double));
    for (int r = 0; r < N; r++) {
        for (int o = 0; o < OC; o++) { acc[o] += dout[(size_t)r * OC + o]; S[o] += fabs(dout[(size_t)r * OC + o]); }
    }
    float *ref = (float *)mallocCheck(OC * sizeof(float)), *tol = (float *)mallocCheck(OC * sizeof(float));
    const double rounded = matmul_bias_grad_epilogue ? 4e-3 : 0.0;  // -bg 1: the epilogue's bf16 sum
    for (int o = 0; o < OC; o++) {
        const double v = db0[o] + acc[o];
        ref[o] = (float)v;
        tol[o] = (float)(1e-2 * fabs(v) + 1e-3 * (S[o] + fabs(db0[o])) + rounded * fabs(acc[o]));
    }
    check_close_tol(matmul_bias_grad_epilogue ? "backward dbias += column sums (-bg 1: the dweight GEMM's epilogue where cuBLASLt has it)"
                                              : "backward dbias += column sums (own kernel)", d->gdb, ref, tol, OC);
    free(acc); free(S); free(ref); free(tol);
}

// determinism: a second backward from dw0 and db0 gives the first's dinp, dweight and dbias bitwise
static void check_determinism(const LayerRun *d) {
    const size_t nin = d->nin, nw = d->nw;
    upload_bf16(d->d_dw, d->dw0, nw);
    upload_bf16(d->d_db, d->db0, d->OC);
    matmul_backward_layer(d, d->d_pre_in);
    float *again = (float *)mallocCheck((nin > nw ? nin : nw) * sizeof(float));
    download_bf16(again, d->d_dinp, nin);
    check_bitwise("dinp, second run", d->gdinp, again, nin * sizeof(float));
    download_bf16(again, d->d_dw, nw);
    check_bitwise("dweight, second run", d->gdw, again, nw * sizeof(float));
    if (d->L->bias) {
        download_bf16(again, d->d_db, d->OC);
        check_bitwise("dbias, second run", d->gdb, again, d->OC * sizeof(float));
    }
    free(again);
}

// timing: TFLOP/s of forward and backward, fused GELU epilogues against matmul + gelu kernels, the dbias reduction
static void time_layer(const LayerRun *d) {
    const Layer *L = d->L;
    const int N = d->N, C = d->C, OC = d->OC;
    const double flops = 2.0 * N * C * OC;
    float ms = time_ms([&] { matmul_forward(d->d_out, d->d_inp, d->d_w, d->d_bias, L->B, L->T, C, OC, d->d_pre, 0); }, 20);
    report_flops(L->gelu_fwd ? "forward (bias + GELU epilogue)" : "forward", ms, flops);
    if (L->gelu_fwd) {
        ms = time_ms([&] {
            matmul_forward(d->d_pre, d->d_inp, d->d_w, d->d_bias, L->B, L->T, C, OC, NULL, 0);
            gelu_forward(d->d_out, d->d_pre, d->nout, 0);
        }, 20);
        report_flops("forward unfused (bias epilogue + gelu_forward)", ms, flops);
    }
    ms = time_ms([&] { matmul_backward_layer(d, d->d_pre_in); }, 20);
    report_flops(L->gelu_bwd ? "backward (dinp with dGELU epilogue, dweight, dbias)" : "backward (dinp, dweight, dbias)", ms,
                 2.0 * flops);
    if (L->gelu_bwd) {
        ms = time_ms([&] {
            matmul_backward_layer(d, NULL);
            gelu_backward(d->d_dinp, d->d_pre_in, d->d_dinp, d->nin, 0);
        }, 20);
        report_flops("backward unfused (+ gelu_backward)", ms, 2.0 * flops);
    }
    if (L->bias) {
        ms = time_ms([&] { matmul_backward_bias(d->d_db, d->d_dout, N, OC, d->d_scratch, 0); }, 50);
        report_bandwidth("dbias reduction alone (both stages)", ms, (double)d->nout * 2.0);
        // -bg: the dweight GEMM and our dbias, against the GEMM that sums dbias in its epilogue
        const int was = matmul_bias_grad_epilogue;
        for (int bg = 0; bg <= 1; bg++) {
            matmul_set_bias_grad_epilogue(bg);
            ms = time_ms([&] { matmul_backward(NULL, d->d_dw, d->d_db, d->d_dout, d->d_inp, d->d_w, L->B, L->T, C, OC, NULL,
                                               d->d_scratch, 0); }, 20);
            report_flops(bg ? "dweight + dbias: one GEMM, BGRADB (-bg 1)" : "dweight + dbias: GEMM, then our kernel (-bg 0)",
                         ms, flops);
        }
        matmul_set_bias_grad_epilogue(was);
    }
}

// one layer: forward, backward (dinp, dweight, dbias), determinism, timing where asked
static void run_layer(const Layer *L) {
    LayerRun d;
    layer_setup(&d, L);
    check_forward(&d);
    run_backward(&d);
    check_dinp(&d);
    check_dweight(&d);
    if (L->bias) { check_dbias(&d); }
    check_determinism(&d);
    if (L->timing) { time_layer(&d); }
    layer_free(&d);
}

// the general GEMM with batches, a transposed A, alpha != 1 (as an attention score product would use it)
static void run_batched(void) {
    const int batch = 3, m = 64, n = 48, k = 32;
    printf("case strided batched: batch=%d m=%d n=%d k=%d, transa, alpha=0.125\n", batch, m, n, k);
    const size_t sa = (size_t)k * m, sb = (size_t)k * n, sd = (size_t)m * n;
    float *A = host_uniform_bf16(batch * sa, -1.0f, 1.0f, 31), *Bm = host_uniform_bf16(batch * sb, -1.0f, 1.0f, 32);
    floatX *dA = device_bf16_from(A, batch * sa), *dB = device_bf16_from(Bm, batch * sb);
    floatX *dD = (floatX *)device_alloc(batch * sd * sizeof(floatX));
    matmul_cublaslt(dD, dA, dB, NULL, m, n, k, 1, 0, 0.125f, 0.0f, batch, sa, sb, sd, MATMUL_PLAIN, NULL, 0);
    float *got = (float *)mallocCheck(batch * sd * sizeof(float)), *ref = (float *)mallocCheck(batch * sd * sizeof(float)),
          *tol = (float *)mallocCheck(batch * sd * sizeof(float));
    download_bf16(got, dD, batch * sd);
    for (int b = 0; b < batch; b++) {
        for (int j = 0; j < n; j++) {
            for (int i = 0; i < m; i++) {
                double s = 0.0, S = 0.0;
                for (int p = 0; p < k; p++) {
                    // A stored (k x m) column-major, transposed: op(A)[i][p] = A[i * k + p]; B (k x n): B[j * k + p]
                    const double t = (double)A[b * sa + (size_t)i * k + p] * Bm[b * sb + (size_t)j * k + p];
                    s += t;
                    S += fabs(t);
                }
                const size_t idx = b * sd + (size_t)j * m + i;
                ref[idx] = (float)(0.125 * s);
                tol[idx] = (float)(1e-2 * fabs(0.125 * s) + 1e-3 * 0.125 * S);
            }
        }
    }
    check_close_tol("batched D = 0.125 * A^T B", got, ref, tol, batch * sd);
    cudaCheck(cudaFree(dA)); cudaCheck(cudaFree(dB)); cudaCheck(cudaFree(dD));
    free(A); free(Bm); free(got); free(ref); free(tol);
}

// -bg 1: the layers with a bias again, dbias from the dweight GEMM's epilogue (checks only)
static void check_bias_grad_epilogue(const Layer *run, size_t count) {
    printf("with the bias gradients in the weight-gradient GEMMs' epilogue (-bg 1):\n");
    cublas_forget_algorithms();
    cublas_set_tuning(0, NULL, 0);
    matmul_set_bias_grad_epilogue(1);
    matmul_bias_grad_count[0] = matmul_bias_grad_count[1] = 0;  // this pass's, not the timing's
    const size_t checked = WB_SIM ? 3 : count;  // the simulator: the tiny layers and the qkv shape
    for (size_t i = 0; i < checked; i++) {
        if (!run[i].bias) { continue; }
        Layer untimed = run[i];
        untimed.timing = 0;
        run_layer(&untimed);
    }
    matmul_bias_grad_report();
    char line[96];
    snprintf(line, sizeof(line), "%lld by the epilogue, %lld by our kernel", matmul_bias_grad_count[0], matmul_bias_grad_count[1]);
    if (WB_SIM) {  // the stand-in has the epilogue; a GPU's cuBLASLt may not (the line above says)
        check_true("-bg 1: every bias gradient from the epilogue", matmul_bias_grad_count[0] > 0 && matmul_bias_grad_count[1] == 0, line);
        // a cuBLASLt without the epilogue (1), or that offers it and then refuses to run it (run):
        // our kernel takes over, with the same checks
        const char *modes[2] = {"1", "run"};
        for (int i = 0; i < 2; i++) {
            setenv("SIM_CUBLASLT_NO_BGRADB", modes[i], 1);
            cublas_forget_algorithms();
            const long long before = matmul_bias_grad_count[1];
            run_layer(&run[0]);
            unsetenv("SIM_CUBLASLT_NO_BGRADB");
            check_true(i ? "-bg 1 where cuBLASLt refuses to run its epilogue: our kernel instead"
                         : "-bg 1 where cuBLASLt has no epilogue algorithm: our kernel instead",
                       matmul_bias_grad_count[1] > before, "");
        }
    }
    matmul_set_bias_grad_epilogue(0);
}

// one probe line: the heuristic's algorithms for g's plan with `epilogue` (0: the plan's own) whose
// bias gradient goes to `bias` as fp32 or bf16, and the time of its first beside plain_ms, or why none
static void probe_line(const char *what, const Gemm *g, cublasLtEpilogue_t epilogue, void *bias, int fp32_bias, float plain_ms) {
    GemmPlan p;
    gemm_plan_create(&p, g);
    if (epilogue) {
        cublasCheck(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue)));
        cublasCheck(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
    }
    cudaDataType_t t = fp32_bias ? CUDA_R_32F : CUDA_R_16BF;
    cublasCheck(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &t, sizeof(t)));
    cublasLtMatmulHeuristicResult_t res[MATMUL_TUNE_CANDIDATES];
    int count = 0;
    const cublasStatus_t status = gemm_candidates_status(&p, res, MATMUL_TUNE_CANDIDATES, &count);
    printf("  probe %-58s %d algorithm(s) (%s)", what, count, cublasGetStatusName(status));
    if (count > 0 && gemm_launch(g, &p, &res[0].algo, g->d, 0) != CUBLAS_STATUS_SUCCESS) {
        printf(", the first refused to run\n");
    } else if (count > 0) {
        const float ms = time_ms([&] { cublasCheck(gemm_launch(g, &p, &res[0].algo, g->d, 0)); }, 20);
        printf(", the first %.4f ms (the GEMM without it %.4f ms)\n", ms, plain_ms);
    } else {
        printf("\n");
    }
    gemm_plan_destroy(&p);
}

// the time of the heuristic's first algorithm for g (no epilogue change)
static float probe_plain_ms(const Gemm *g) {
    GemmPlan p;
    gemm_plan_create(&p, g);
    cublasLtMatmulHeuristicResult_t res[1];
    float ms = -1.0f;
    int count = 0;
    if (gemm_candidates_status(&p, res, 1, &count) == CUBLAS_STATUS_SUCCESS && count > 0) {
        ms = time_ms([&] { cublasCheck(gemm_launch(g, &p, &res[0].algo, g->d, 0)); }, 20);
    }
    gemm_plan_destroy(&p);
    return ms;
}

// which bias-gradient epilogues this GPU's cuBLASLt has for the biased layers' shapes (N = 16384)
static void probe_bias_grad_epilogues(void) {
    if (WB_SIM) { printf("probe of cuBLASLt's bias-gradient epilogues: on a GPU only\n"); return; }
    printf("probe of cuBLASLt's bias-gradient epilogues (N = B*T = 16384):\n");
    const int N = 16384, CMAX = 3072;
    float *h = host_uniform_bf16((size_t)N * CMAX, -1.0f, 1.0f, 41);
    floatX *inp = device_bf16_from(h, (size_t)N * CMAX), *dout = device_bf16_from(h, (size_t)N * CMAX);
    floatX *pre = device_bf16_from(h, (size_t)N * CMAX), *dinp = (floatX *)device_alloc((size_t)N * CMAX * sizeof(floatX));
    floatX *w = device_bf16_from(h, (size_t)CMAX * 768), *dw = (floatX *)device_alloc((size_t)CMAX * 768 * sizeof(floatX));
    void *bias = device_alloc(CMAX * sizeof(float));
    cudaCheck(cudaMemset(dw, 0, (size_t)CMAX * 768 * sizeof(floatX)));
    const struct { const char *name; int C, OC; } shapes[] = {{"qkv", 768, 2304}, {"attproj", 768, 768}, {"fc", 768, 3072},
                                                              {"fcproj", 3072, 768}};
    char what[96];
    for (int i = 0; i < 4; i++) {
        const int C = shapes[i].C, OC = shapes[i].OC;
        // the dweight GEMM as matmul_backward_weight_bias runs it, with the bias gradient of dout
        Gemm g = {dw, inp, dout, NULL, NULL, C, OC, N, 0, 1, 1, 1.0f, 1.0f, 0, 0, 0, MATMUL_PLAIN, NULL};
        const float plain = probe_plain_ms(&g);
        g.bias_grad = (floatX *)bias;
        for (int beta = 1; beta >= 0; beta--) {
            for (int fp32 = 0; fp32 <= 1; fp32++) {
                g.beta = (float)beta;
                snprintf(what, sizeof(what), "%s dweight BGRADB, beta %d, bias gradient %s", shapes[i].name, beta, fp32 ? "fp32" : "bf16");
                probe_line(what, &g, (cublasLtEpilogue_t)0, NULL, fp32, plain);
            }
        }
    }
    // fc's bias gradient from the GEMM that writes its dinp: fcproj's dinp (N x 3072) with dGELU
    Gemm g = {dinp, w, dout, NULL, pre, 3072, N, 768, 0, 0, 1, 1.0f, 0.0f, 0, 0, 0, MATMUL_GELU_BACKWARD, NULL};
    const float plain = probe_plain_ms(&g);
    for (int fp32 = 0; fp32 <= 1; fp32++) {
        snprintf(what, sizeof(what), "fcproj dinp DGELU_BGRAD, bias gradient %s", fp32 ? "fp32" : "bf16");
        probe_line(what, &g, CUBLASLT_EPILOGUE_DGELU_BGRAD, bias, fp32, plain);
    }
    cudaCheck(cudaFree(inp)); cudaCheck(cudaFree(dout)); cudaCheck(cudaFree(pre)); cudaCheck(cudaFree(dinp));
    cudaCheck(cudaFree(w)); cudaCheck(cudaFree(dw)); cudaCheck(cudaFree(bias));
    free(h);
}

int main(void) {
    workbench_init("matmul");
    cublas_init();
    const Layer layers[] = {
        {"tiny (all rows checked)", 2, 16, 64, 192, 1, 1, 1, 1 << 30, 0, 0},
        {"tiny, 16-byte aligned views", 2, 16, 64, 192, 1, 1, 1, 1 << 30, 0, 8},
        {"qkv", 16, 1024, 768, 2304, 1, 0, 0, 24, 1, 0},
        {"attproj", 16, 1024, 768, 768, 1, 0, 0, 24, 1, 0},
        {"fc (GELU fused forward)", 16, 1024, 768, 3072, 1, 1, 0, 24, 1, 0},
        {"fcproj (GELU-derivative fused backward)", 16, 1024, 3072, 768, 1, 0, 1, 24, 1, 0},
        {"lm head (no bias)", 8, 1024, 768, 50304, 0, 0, 0, 6, 1, 0},
    };
    // the simulator's cuBLASLt is a plain CPU GEMM: the same layers with few rows, a narrower head
    const Layer sim_layers[] = {
        {"tiny (all rows checked)", 2, 16, 64, 192, 1, 1, 1, 1 << 30, 0, 0},
        {"tiny, 16-byte aligned views", 2, 16, 64, 192, 1, 1, 1, 1 << 30, 0, 8},
        {"qkv, simulator size", 1, 40, 768, 2304, 1, 0, 0, 1 << 30, 0, 0},
        {"fc (GELU fused forward), simulator size", 1, 24, 768, 3072, 1, 1, 0, 1 << 30, 0, 0},
        {"fcproj (GELU-derivative fused backward), simulator size", 1, 24, 3072, 768, 1, 0, 1, 1 << 30, 0, 0},
        {"head without bias, simulator size", 1, 8, 768, 1024, 0, 0, 0, 1 << 30, 0, 0},
    };
    const Layer *run = WB_SIM ? sim_layers : layers;
    const size_t count = WB_SIM ? sizeof(sim_layers) / sizeof(sim_layers[0]) : sizeof(layers) / sizeof(layers[0]);
    for (size_t i = 0; i < count; i++) { run_layer(&run[i]); }
    run_batched();
    printf("cuBLASLt algorithms cached: %d\n", matmul_algo_cache_count);

    // -mt 1: every algorithm chosen again by timing, the same checks (the timing runs of an
    // accumulating GEMM must leave its dweight as it was) and, on a GPU, the times to compare
    printf("with the algorithms chosen by timing (-mt 1):\n");
    cublas_forget_algorithms();
    cublas_set_tuning(1, NULL, 0);
    const size_t tuned = WB_SIM ? 2 : count;  // the simulator times each candidate's CPU GEMM: the tiny layers only
    for (size_t i = 0; i < tuned; i++) { run_layer(&run[i]); }
    run_batched();
    matmul_tune_report();
    int timed = 0, read = 0, untimed = 0;
    matmul_tune_counts(&timed, &read, &untimed);
    char line[64];
    snprintf(line, sizeof(line), "%d of %d shapes timed", timed, matmul_algo_cache_count);
    check_true("-mt 1 timed candidates for every GEMM shape", timed == matmul_algo_cache_count && untimed == 0, line);
    check_bias_grad_epilogue(run, count);
    probe_bias_grad_epilogues();
    cublas_free();
    return workbench_finish("matmul");
}
