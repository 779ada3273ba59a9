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

static void run_layer(const Layer *L) {
    const int N = L->B * L->T, C = L->C, OC = L->OC;
    printf("case %s: N=B*T=%d C=%d OC=%d%s%s%s%s\n", L->name, N, C, OC, L->bias ? " bias" : "", L->gelu_fwd ? " gelu-fwd" : "",
           L->gelu_bwd ? " gelu-bwd" : "", L->offset ? " (pointers 16 bytes past 256-byte alignment)" : "");
    const size_t nin = (size_t)N * C, nout = (size_t)N * OC, nw = (size_t)OC * C;
    const float a = sqrtf(3.0f / C);  // weights with variance 1/C keep outputs O(1)
    float *inp = host_uniform_bf16(nin, -1.0f, 1.0f, 21), *w = host_uniform_bf16(nw, -a, a, 22);
    float *bias = L->bias ? host_uniform_bf16(OC, -0.5f, 0.5f, 23) : NULL;
    float *dout = host_uniform_bf16(nout, -1.0f, 1.0f, 24);
    float *dw0 = host_uniform_bf16(nw, -1.0f, 1.0f, 25), *db0 = host_uniform_bf16(OC, -1.0f, 1.0f, 26);
    float *pre_in = L->gelu_bwd ? host_uniform_bf16(nin, -3.0f, 3.0f, 27) : NULL;  // pre-activation of this layer's input

    const int off = L->offset;
    floatX *d_inp = view_from(inp, nin, off), *d_w = view_from(w, nw, off), *d_dout = view_from(dout, nout, off);
    floatX *d_bias = bias ? view_from(bias, OC, off) : NULL;
    floatX *d_out = view_alloc(nout, off);
    floatX *d_pre = L->gelu_fwd ? view_alloc(nout, off) : NULL;
    floatX *d_pre_in = pre_in ? view_from(pre_in, nin, off) : NULL;
    floatX *d_dinp = view_alloc(nin, off);
    floatX *d_dw = view_from(dw0, nw, off), *d_db = view_from(db0, OC, off);
    float *d_scratch = (float *)device_alloc(matmul_backward_scratch_bytes(L->B, L->T, OC));

    const int R = L->rows < N ? L->rows : N;
    int *rows = R == N ? NULL : sample_rows(N, R, 99);
    #define ROW(i) (rows ? rows[i] : (i))

    // ---- forward
    matmul_forward(d_out, d_inp, d_w, d_bias, L->B, L->T, C, OC, d_pre, 0);
    float *got = (float *)mallocCheck(nout * sizeof(float)), *gotp = L->gelu_fwd ? (float *)mallocCheck(nout * sizeof(float)) : NULL;
    download_bf16(got, d_out, nout);
    if (gotp) { download_bf16(gotp, d_pre, nout); }
    {
        float *g = (float *)mallocCheck((size_t)R * OC * sizeof(float)), *gp = (float *)mallocCheck((size_t)R * OC * sizeof(float));
        float *ref = (float *)mallocCheck((size_t)R * OC * sizeof(float)), *refp = (float *)mallocCheck((size_t)R * OC * sizeof(float));
        float *tol = (float *)mallocCheck((size_t)R * OC * sizeof(float)), *tolp = (float *)mallocCheck((size_t)R * OC * sizeof(float));
        double max_tanh = 0.0, max_erf = 0.0;
        for (int i = 0; i < R; i++) {
            const int r = ROW(i);
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
        free(g); free(gp); free(ref); free(refp); free(tol); free(tolp);
    }

    // ---- backward
    matmul_backward(d_dinp, d_dw, L->bias ? d_db : NULL, d_dout, d_inp, d_w, L->B, L->T, C, OC, d_pre_in, d_scratch, 0);
    float *gdinp = (float *)mallocCheck(nin * sizeof(float)), *gdw = (float *)mallocCheck(nw * sizeof(float)),
          *gdb = (float *)mallocCheck(OC * sizeof(float));
    download_bf16(gdinp, d_dinp, nin);
    download_bf16(gdw, d_dw, nw);
    download_bf16(gdb, d_db, OC);
    {   // dinp on the sampled rows
        float *g = (float *)mallocCheck((size_t)R * C * sizeof(float)), *ref = (float *)mallocCheck((size_t)R * C * sizeof(float)),
              *tol = (float *)mallocCheck((size_t)R * C * sizeof(float));
        double *acc = (double *)mallocCheck(C * sizeof(double)), *S = (double *)mallocCheck(C * sizeof(double));
        for (int i = 0; i < R; i++) {
            const int r = ROW(i);
            ref_vec_mat(acc, S, dout + (size_t)r * OC, 1, w, OC, C);
            for (int c = 0; c < C; c++) {
                const size_t j = (size_t)i * C + c;
                g[j] = gdinp[(size_t)r * C + c];
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
    {   // dweight on sampled rows o (all C columns), accumulated onto dw0
        const int RO = OC < 8 ? OC : 8;
        int *orows = sample_rows(OC, RO, 7);
        float *g = (float *)mallocCheck((size_t)RO * C * sizeof(float)), *ref = (float *)mallocCheck((size_t)RO * C * sizeof(float)),
              *tol = (float *)mallocCheck((size_t)RO * C * sizeof(float));
        double *acc = (double *)mallocCheck(C * sizeof(double)), *S = (double *)mallocCheck(C * sizeof(double));
        for (int i = 0; i < RO; i++) {
            const int o = orows[i];
            ref_vec_mat(acc, S, dout + o, OC, inp, N, C);
            for (int c = 0; c < C; c++) {
                const size_t j = (size_t)i * C + c;
                const double v = dw0[(size_t)o * C + c] + acc[c];
                g[j] = gdw[(size_t)o * C + c];
                ref[j] = (float)v;
                tol[j] = (float)(1e-2 * fabs(v) + 1e-3 * (S[c] + fabs(dw0[(size_t)o * C + c])));
            }
        }
        check_close_tol("backward dweight += dout^T @ inp (sampled rows)", g, ref, tol, (size_t)RO * C);
        free(orows); free(g); free(ref); free(tol); free(acc); free(S);
    }
    if (L->bias) {
        double *acc = (double *)callocCheck(OC, sizeof(double)), *S = (double *)callocCheck(OC, sizeof(double));
        for (int r = 0; r < N; r++) {
            for (int o = 0; o < OC; o++) { acc[o] += dout[(size_t)r * OC + o]; S[o] += fabs(dout[(size_t)r * OC + o]); }
        }
        float *ref = (float *)mallocCheck(OC * sizeof(float)), *tol = (float *)mallocCheck(OC * sizeof(float));
        for (int o = 0; o < OC; o++) {
            const double v = db0[o] + acc[o];
            ref[o] = (float)v;
            tol[o] = (float)(1e-2 * fabs(v) + 1e-3 * (S[o] + fabs(db0[o])));
        }
        check_close_tol("backward dbias += column sums (own kernel)", gdb, ref, tol, OC);
        free(acc); free(S); free(ref); free(tol);
    }

    // ---- determinism
    upload_bf16(d_dw, dw0, nw);
    upload_bf16(d_db, db0, OC);
    matmul_backward(d_dinp, d_dw, L->bias ? d_db : NULL, d_dout, d_inp, d_w, L->B, L->T, C, OC, d_pre_in, d_scratch, 0);
    {
        float *again = (float *)mallocCheck((nin > nw ? nin : nw) * sizeof(float));
        download_bf16(again, d_dinp, nin);
        check_bitwise("dinp, second run", gdinp, again, nin * sizeof(float));
        download_bf16(again, d_dw, nw);
        check_bitwise("dweight, second run", gdw, again, nw * sizeof(float));
        if (L->bias) {
            download_bf16(again, d_db, OC);
            check_bitwise("dbias, second run", gdb, again, OC * sizeof(float));
        }
        free(again);
    }

    // ---- timing
    if (L->timing) {
        const double flops = 2.0 * N * C * OC;
        float ms = time_ms([&] { matmul_forward(d_out, d_inp, d_w, d_bias, L->B, L->T, C, OC, d_pre, 0); }, 20);
        report_flops(L->gelu_fwd ? "forward (bias + GELU epilogue)" : "forward", ms, flops);
        if (L->gelu_fwd) {
            ms = time_ms([&] {
                matmul_forward(d_pre, d_inp, d_w, d_bias, L->B, L->T, C, OC, NULL, 0);
                gelu_forward(d_out, d_pre, nout, 0);
            }, 20);
            report_flops("forward unfused (bias epilogue + gelu_forward)", ms, flops);
        }
        ms = time_ms([&] {
            matmul_backward(d_dinp, d_dw, L->bias ? d_db : NULL, d_dout, d_inp, d_w, L->B, L->T, C, OC, d_pre_in, d_scratch, 0);
        }, 20);
        report_flops(L->gelu_bwd ? "backward (dinp with dGELU epilogue, dweight, dbias)" : "backward (dinp, dweight, dbias)", ms,
                     2.0 * flops);
        if (L->gelu_bwd) {
            ms = time_ms([&] {
                matmul_backward(d_dinp, d_dw, L->bias ? d_db : NULL, d_dout, d_inp, d_w, L->B, L->T, C, OC, NULL, d_scratch, 0);
                gelu_backward(d_dinp, d_pre_in, d_dinp, nin, 0);
            }, 20);
            report_flops("backward unfused (+ gelu_backward)", ms, 2.0 * flops);
        }
        if (L->bias) {
            ms = time_ms([&] { matmul_backward_bias(d_db, d_dout, N, OC, d_scratch, 0); }, 50);
            report_bandwidth("dbias reduction alone (both stages)", ms, (double)nout * 2.0);
        }
    }
    #undef ROW

    view_free(d_inp, off); view_free(d_w, off); view_free(d_dout, off); view_free(d_out, off); view_free(d_dinp, off);
    view_free(d_dw, off); view_free(d_db, off); view_free(d_bias, off); view_free(d_pre, off); view_free(d_pre_in, off);
    cudaCheck(cudaFree(d_scratch));
    free(inp); free(w); free(bias); free(dout); free(dw0); free(db0); free(pre_in); free(got); free(gotp); free(gdinp);
    free(gdw); free(gdb); free(rows);
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
    cublas_free();
    return workbench_finish("matmul");
}
