/*
 * Workbench: Muon's update (llmc/cuda/muon.cuh) on the four block-matrix shapes of GPT-2 124M (qkvw
 * 3C x C and fcw 4C x C tall, attprojw C x C square, fcprojw C x 4C wide; C = 768, each with all
 * 12 layers in one call), against a double-precision CPU reference of llmc/muon.h's algorithm
 * (momentum, normalization, five quintic Newton-Schulz steps on the wide orientation, scaled
 * update with decoupled decay). The reference checks the first and the last matrix of each tensor
 * at full size (every matrix's momentum buffer and parameters are checked), on all cores. Under the
 * simulator: C = 16, qkvw with 13 layers (two batches of MUON_BATCH = 12 and 1), the others with 3,
 * every matrix checked.
 *
 * Checks and tolerances:
 *   momentum buffer (fp32): buf = mu buf + g s, a few fp32 roundings of terms up to |mu buf| <
 *       0.05 (ulp 3.7e-9), which can cancel: atol 1e-8, rtol 1e-6 against double.
 *   the orthogonalized update O, read back from the fp32 master weights as
 *       ((p0 - p1) / lr - wd p0) / scale (fp32 roundings of p ~ 0.1 cost < 1e-5 of O there):
 *       the kernels keep X, A = X X^T and B in bf16 (8 significant bits) through 5 steps whose
 *       polynomial multiplies errors of the small singular values by up to a = 3.4; measured on
 *       the simulator (C = 16, 32, 64): max|O - ref| / max|ref| 1.8e-2 to 3.9e-2 over the four
 *       shapes (the double reference sees no bf16), so the bound is 8e-2 of max|ref| per shape. A wrong transpose flag, stride or
 *       coefficient gives errors of order 1 (max|ref| is about 0.1-0.3).
 *   params (bf16) with master weights: a bf16 neighbour of the GPU's own fp32 master weight.
 *   without master weights: the bf16 parameters read, then within one bf16 ulp of
 *       p0 - lr (scale O + wd p0) with the O of the master run (the same O: the same inputs).
 *   determinism: a second update from the same state is bitwise identical.
 * Timing (GPU only): each d12 tensor's 12 matrices, with Newton-Schulz's FLOPs
 *   steps * (4 r^2 c + 2 r^3) per matrix (r = min, c = max of its sides).
 *
 *   ./muon
 */
#include "common.h"
#include "llmc/cuda/muon.cuh"

// The reference in double, in two parts: the momentum (every matrix, cheap), then Newton-Schulz on
// the matrices that run_shape checks. At full size that is the first and the last matrix of each
// tensor (a wrong matrix offset shows in the last; all 12 cost about a minute even on 16 cores):
// A = X X^T and A A are symmetric, so only their upper triangles are computed, and each loop keeps
// its innermost index contiguous; the rows run on all cores where OpenMP is built in (the GPU
// build; the simulator's is serial and small).

// buf = mu buf + g s (updated in place), U = g s + mu buf (Nesterov), for n elements
static void ref_muon_momentum(double *U, double *buf, const float *g, size_t n, double mu, double gs) {
    for (size_t i = 0; i < n; i++) {
        buf[i] = mu * buf[i] + g[i] * gs;
        U[i] = g[i] * gs + mu * buf[i];
    }
}

// the upper triangle of the r x r product P Q^T (rows of length c), mirrored
static void ref_sym_product(double *out, const double *P, const double *Q, int r, int c) {
#pragma omp parallel for schedule(dynamic, 8)
    for (int i = 0; i < r; i++) {
        for (int j = i; j < r; j++) {
            double s = 0.0;
            for (int e = 0; e < c; e++) { s += P[(size_t)i * c + e] * Q[(size_t)j * c + e]; }
            out[(size_t)i * r + j] = s;
        }
    }
    for (int i = 0; i < r; i++) {
        for (int j = 0; j < i; j++) { out[(size_t)i * r + j] = out[(size_t)j * r + i]; }
    }
}

// O (rows x cols) = Newton-Schulz of U / |U|, on the wide orientation (r = min side rows of c)
static void ref_newton_schulz(double *O, const double *U, int rows, int cols, int steps) {
    const int tall = rows > cols, r = tall ? cols : rows, c = tall ? rows : cols;
    const size_t n = (size_t)rows * cols;
    double *X = (double *)mallocCheck(n * sizeof(double)), *Y = (double *)mallocCheck(n * sizeof(double));
    double *A = (double *)mallocCheck((size_t)r * r * sizeof(double)), *B = (double *)mallocCheck((size_t)r * r * sizeof(double));
    double ss = 0.0;
    for (size_t i = 0; i < n; i++) { ss += U[i] * U[i]; }
    const double inv = 1.0 / (sqrt(ss) + MUON_NORM_EPS);
    for (int i = 0; i < rows; i++) {
        for (int j = 0; j < cols; j++) { X[tall ? (size_t)j * c + i : (size_t)i * c + j] = U[(size_t)i * cols + j] * inv; }
    }
    for (int k = 0; k < steps; k++) {
        ref_sym_product(A, X, X, r, c);      // A = X X^T
        ref_sym_product(B, A, A, r, r);      // A A = A A^T (A is symmetric)
        for (size_t i = 0; i < (size_t)r * r; i++) { B[i] = (double)MUON_NS_B * A[i] + (double)MUON_NS_C * B[i]; }
#pragma omp parallel for
        for (int i = 0; i < r; i++) {        // Y = a X + B X
            double *y = Y + (size_t)i * c;
            for (int j = 0; j < c; j++) { y[j] = (double)MUON_NS_A * X[(size_t)i * c + j]; }
            for (int e = 0; e < r; e++) {
                const double b = B[(size_t)i * r + e];
                const double *x = X + (size_t)e * c;
                for (int j = 0; j < c; j++) { y[j] += b * x[j]; }
            }
        }
        memcpy(X, Y, n * sizeof(double));
    }
    for (int i = 0; i < rows; i++) {
        for (int j = 0; j < cols; j++) { O[(size_t)i * cols + j] = X[tall ? (size_t)j * c + i : (size_t)i * c + j]; }
    }
    free(X); free(Y); free(A); free(B);
}

// whether run_shape checks matrix l of L against the reference (see above)
static int ref_checks_matrix(int l, int L) { return WB_SIM || l == 0 || l == L - 1; }

static void run_shape(const char *name, int rows, int cols, int L, int C, const OptSettings *o, void *scratch) {
    const size_t n = (size_t)rows * cols, total = n * L;
    printf("case %s: %d x %d, %d matrices\n", name, rows, cols, L);
    float *p0 = host_uniform_bf16(total, -0.1f, 0.1f, 91), *g = host_uniform_bf16(total, -1e-2f, 1e-2f, 92);
    float *buf0 = (float *)mallocCheck(total * sizeof(float));
    {
        Rng r = {93};
        for (size_t i = 0; i < total; i++) { buf0[i] = rng_range(&r, -5e-2f, 5e-2f); }
    }
    floatX *d_p = device_bf16_from(p0, total), *d_g = device_bf16_from(g, total);
    float *d_buf = (float *)device_alloc(total * sizeof(float)), *d_master = (float *)device_alloc(total * sizeof(float));
    cudaCheck(cudaMemcpy(d_buf, buf0, total * sizeof(float), cudaMemcpyHostToDevice));
    cudaCheck(cudaMemcpy(d_master, p0, total * sizeof(float), cudaMemcpyHostToDevice));

    // 1. with master weights
    muon_update(d_p, d_g, d_buf, d_master, 0, rows, cols, L, C, o, scratch, 0);
    float *gbuf = (float *)mallocCheck(total * sizeof(float)), *gmaster = (float *)mallocCheck(total * sizeof(float));
    float *gp = (float *)mallocCheck(total * sizeof(float));
    download_f32(gbuf, d_buf, total);
    download_f32(gmaster, d_master, total);
    download_bf16(gp, d_p, total);
    double *rbuf = (double *)mallocCheck(total * sizeof(double)), *rU = (double *)mallocCheck(total * sizeof(double));
    double *rO = (double *)mallocCheck(n * sizeof(double));
    for (size_t i = 0; i < total; i++) { rbuf[i] = buf0[i]; }
    ref_muon_momentum(rU, rbuf, g, total, o->muon_momentum, o->grad_scale);
    // the checked matrices' O, the GPU's and the reference's, one after the other
    float *fb = (float *)mallocCheck(total * sizeof(float)), *fO = (float *)mallocCheck(total * sizeof(float));
    float *gO = (float *)mallocCheck(total * sizeof(float)), *gOc = (float *)mallocCheck(total * sizeof(float));
    const double scale = muon_scale(rows, cols);
    for (size_t i = 0; i < total; i++) {
        fb[i] = (float)rbuf[i];
        gO[i] = (float)((((double)p0[i] - gmaster[i]) / o->muon_lr - (double)o->weight_decay * p0[i]) / scale);
    }
    size_t checked = 0;
    double max_ref = 0.0;
    for (int l = 0; l < L; l++) {
        if (!ref_checks_matrix(l, L)) { continue; }
        ref_newton_schulz(rO, rU + l * n, rows, cols, o->muon_ns_steps);
        for (size_t i = 0; i < n; i++) {
            fO[checked + i] = (float)rO[i];
            gOc[checked + i] = gO[l * n + i];
            max_ref = fmax(max_ref, fabs(rO[i]));
        }
        checked += n;
    }
    check_close("momentum buffer", gbuf, fb, total, 1e-8, 1e-6);
    check_close("orthogonalized update O (bf16 Newton-Schulz)", gOc, fO, checked, 8e-2 * max_ref, 0.0);
    {
        size_t bad = 0;
        for (size_t i = 0; i < total; i++) {
            float lo, hi;
            bf16_neighbours(gmaster[i], &lo, &hi);
            if (gp[i] != lo && gp[i] != hi) { bad++; }
        }
        char detail[64];
        snprintf(detail, sizeof(detail), "%zu not a neighbour", bad);
        check_true("params = a bf16 neighbour of the master weight", bad == 0, detail);
    }

    // 2. determinism
    void *first = download_bytes(d_master, total * sizeof(float));
    upload_bf16(d_p, p0, total);
    cudaCheck(cudaMemcpy(d_buf, buf0, total * sizeof(float), cudaMemcpyHostToDevice));
    cudaCheck(cudaMemcpy(d_master, p0, total * sizeof(float), cudaMemcpyHostToDevice));
    muon_update(d_p, d_g, d_buf, d_master, 0, rows, cols, L, C, o, scratch, 0);
    void *second = download_bytes(d_master, total * sizeof(float));
    check_bitwise("second run", first, second, total * sizeof(float));

    // 3. without master weights: the bf16 parameters are read and written
    upload_bf16(d_p, p0, total);
    cudaCheck(cudaMemcpy(d_buf, buf0, total * sizeof(float), cudaMemcpyHostToDevice));
    muon_update(d_p, d_g, d_buf, NULL, 0, rows, cols, L, C, o, scratch, 0);
    download_bf16(gp, d_p, total);
    {
        float *rp = (float *)mallocCheck(total * sizeof(float)), *tol = (float *)mallocCheck(total * sizeof(float));
        for (size_t i = 0; i < total; i++) {
            rp[i] = (float)(p0[i] - (double)o->muon_lr * (scale * gO[i] + (double)o->weight_decay * p0[i]));
            float lo, hi;
            bf16_neighbours(rp[i], &lo, &hi);
            tol[i] = fabsf(hi - lo) * 1.001f + 1e-8f;
        }
        check_close_tol("params within one bf16 ulp (no master)", gp, rp, tol, total);
        free(rp); free(tol);
    }

    // 4. timing
    if (!WB_SIM) {
        const int r = rows < cols ? rows : cols, c = rows < cols ? cols : rows;
        const double flops = (double)L * o->muon_ns_steps * (4.0 * r * r * c + 2.0 * r * r * r);
        float ms = time_ms([&] { muon_update(d_p, d_g, d_buf, d_master, 0, rows, cols, L, C, o, scratch, 0); }, 10);
        report_flops(name, ms, flops);
    }
    cudaCheck(cudaFree(d_p)); cudaCheck(cudaFree(d_g)); cudaCheck(cudaFree(d_buf)); cudaCheck(cudaFree(d_master));
    free(p0); free(g); free(buf0); free(gbuf); free(gmaster); free(gp); free(rbuf); free(rU); free(rO); free(fb); free(fO); free(gO); free(gOc);
    free(first); free(second);
}

int main(void) {
    workbench_init("muon");
    cublas_init();
    const int C = WB_SIM ? 16 : 768, L = WB_SIM ? 3 : 12;
    OptSettings o;
    memset(&o, 0, sizeof(o));
    o.muon = 1; o.muon_lr = 0.02f; o.muon_momentum = 0.95f; o.muon_ns_steps = 5; o.weight_decay = 0.1f; o.grad_scale = 0.7f;
    o.seed = 0x1234567890abcdefull;
    void *scratch = device_alloc(muon_scratch_bytes(C));
    run_shape("qkvw (tall)", 3 * C, C, WB_SIM ? MUON_BATCH + 1 : L, C, &o, scratch);
    run_shape("attprojw (square)", C, C, L, C, &o, scratch);
    run_shape("fcw (tall)", 4 * C, C, L, C, &o, scratch);
    run_shape("fcprojw (wide)", C, 4 * C, L, C, &o, scratch);
    cudaCheck(cudaFree(scratch));
    cublas_free();
    return workbench_finish("muon");
}
