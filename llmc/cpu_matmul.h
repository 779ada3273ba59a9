/*
 * The CPU trainer's matrix products (train_gpt2.c's matmul layer and Muon), fp32, row-major: with
 * OpenBLAS, or in a NO_BLAS=1 build a dependency-free blocked kernel. Three shapes, named by how
 * the second operand is used:
 *   nt: out (M,N)  = a (M,K) @ w (N,K)^T      forward
 *   nn: out (M,K)  = a (M,N) @ w (N,K)        input gradient
 *   tn: out (N,K) += a (M,N)^T @ x (M,K)      weight gradient (accumulates)
 * The built-in kernel transposes operands into two scratch buffers that grow on demand;
 * gemm_scratch_floats says how large a shape needs them, so that a caller can reserve them up
 * front with gemm_reserve (and count them in its memory plan). OpenBLAS needs none.
 */
#ifndef LLMC_CPU_MATMUL_H
#define LLMC_CPU_MATMUL_H

#include <stddef.h>
#include "utils.h"
#ifdef USE_BLAS
#include <cblas.h>
#endif

#ifdef USE_BLAS
static void gemm_nt(float *out, const float *a, const float *w, int M, int N, int K) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.0f, a, K, w, K, 0.0f, out, N);
}
static void gemm_nn(float *out, const float *a, const float *w, int M, int N, int K) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, K, N, 1.0f, a, N, w, K, 0.0f, out, K);
}
static void gemm_tn_acc(float *out, const float *a, const float *x, int M, int N, int K) {
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, N, K, M, 1.0f, a, N, x, K, 1.0f, out, K);
}
#else
/*
 * The dependency-free matmul (NO_BLAS=1). Every shape is brought to one form,
 *   out (M,N) (+)= a (M,K) . b (N,K)^T       (both operands contiguous along K),
 * by transposing the operand that is not (W for the input gradient; dout and x for the weight
 * gradient) into a reusable scratch buffer. The kernel computes 4x4 blocks of outputs: 16 dot
 * products sharing their loads, each vectorized along K.
 */
static float *gemm_scratch[2];
static size_t gemm_scratch_size[2];

static float *gemm_buffer(int which, size_t n) {
    if (gemm_scratch_size[which] < n) {
        free(gemm_scratch[which]);
        gemm_scratch[which] = (float *)mallocCheck(n * sizeof(float));
        gemm_scratch_size[which] = n;
    }
    return gemm_scratch[which];
}

// dst (cols, rows) = src (rows, cols)^T, in 32x32 tiles
static void transpose(float *dst, const float *src, int rows, int cols) {
    #pragma omp parallel for collapse(2)
    for (int r0 = 0; r0 < rows; r0 += 32) {
        for (int c0 = 0; c0 < cols; c0 += 32) {
            int r1 = r0 + 32 < rows ? r0 + 32 : rows, c1 = c0 + 32 < cols ? c0 + 32 : cols;
            for (int r = r0; r < r1; r++) {
                for (int c = c0; c < c1; c++) { dst[(size_t)c * rows + r] = src[(size_t)r * cols + c]; }
            }
        }
    }
}

// one 4x4 block (fewer at the edges): out[i][j] (+)= dot(a[i], b[j]) over K elements; rows of a
// and b are ld apart
__attribute__((noinline)) static void gemm_block(float *restrict out, int ldo, const float *restrict a,
                                                 const float *restrict b, size_t ld, int mi, int nj, int K,
                                                 int accumulate) {
    if (mi == 4 && nj == 4) {
        const float *a0 = a, *a1 = a + ld, *a2 = a + 2 * ld, *a3 = a + 3 * ld;
        const float *b0 = b, *b1 = b + ld, *b2 = b + 2 * ld, *b3 = b + 3 * ld;
        float c00 = 0, c01 = 0, c02 = 0, c03 = 0, c10 = 0, c11 = 0, c12 = 0, c13 = 0;
        float c20 = 0, c21 = 0, c22 = 0, c23 = 0, c30 = 0, c31 = 0, c32 = 0, c33 = 0;
        #pragma omp simd reduction(+ : c00, c01, c02, c03, c10, c11, c12, c13, c20, c21, c22, c23, c30, c31, c32, c33)
        for (int k = 0; k < K; k++) {
            float x0 = a0[k], x1 = a1[k], x2 = a2[k], x3 = a3[k];
            float y0 = b0[k], y1 = b1[k], y2 = b2[k], y3 = b3[k];
            c00 += x0 * y0; c01 += x0 * y1; c02 += x0 * y2; c03 += x0 * y3;
            c10 += x1 * y0; c11 += x1 * y1; c12 += x1 * y2; c13 += x1 * y3;
            c20 += x2 * y0; c21 += x2 * y1; c22 += x2 * y2; c23 += x2 * y3;
            c30 += x3 * y0; c31 += x3 * y1; c32 += x3 * y2; c33 += x3 * y3;
        }
        float c[4][4] = {{c00, c01, c02, c03}, {c10, c11, c12, c13}, {c20, c21, c22, c23}, {c30, c31, c32, c33}};
        for (int i = 0; i < 4; i++) {
            for (int j = 0; j < 4; j++) { out[(size_t)i * ldo + j] = accumulate ? out[(size_t)i * ldo + j] + c[i][j] : c[i][j]; }
        }
        return;
    }
    for (int i = 0; i < mi; i++) {
        for (int j = 0; j < nj; j++) {
            const float *x = a + i * ld, *y = b + j * ld;
            float sum = 0.0f;
            #pragma omp simd reduction(+ : sum)
            for (int k = 0; k < K; k++) { sum += x[k] * y[k]; }
            out[(size_t)i * ldo + j] = accumulate ? out[(size_t)i * ldo + j] + sum : sum;
        }
    }
}

// K is cut into chunks of GEMM_KC so that a's panel (M x GEMM_KC) stays in cache while b streams
// past it once per chunk; n blocks are the outer (parallel) loop for the same reason
#define GEMM_KC 256
static void gemm_abt(float *out, const float *a, const float *b, int M, int N, int K, int accumulate) {
    for (int k0 = 0; k0 < K; k0 += GEMM_KC) {
        int kc = K - k0 < GEMM_KC ? K - k0 : GEMM_KC;
        int acc = accumulate || k0 > 0;
        #pragma omp parallel for schedule(static)
        for (int n0 = 0; n0 < N; n0 += 4) {
            for (int m0 = 0; m0 < M; m0 += 4) {
                gemm_block(out + (size_t)m0 * N + n0, N, a + (size_t)m0 * K + k0, b + (size_t)n0 * K + k0, (size_t)K,
                           M - m0 < 4 ? M - m0 : 4, N - n0 < 4 ? N - n0 : 4, kc, acc);
            }
        }
    }
}

static void gemm_nt(float *out, const float *a, const float *w, int M, int N, int K) {
    gemm_abt(out, a, w, M, N, K, 0);
}
static void gemm_nn(float *out, const float *a, const float *w, int M, int N, int K) {
    float *wt = gemm_buffer(0, (size_t)N * K);  // w (N,K) -> (K,N)
    transpose(wt, w, N, K);
    gemm_abt(out, a, wt, M, K, N, 0);
}
static void gemm_tn_acc(float *out, const float *a, const float *x, int M, int N, int K) {
    float *at = gemm_buffer(0, (size_t)M * N), *xt = gemm_buffer(1, (size_t)M * K);
    transpose(at, a, M, N);  // (N,M)
    transpose(xt, x, M, K);  // (K,M)
    gemm_abt(out, at, xt, N, K, M, 1);
}
#endif

// the floats of scratch buffer `which` (0, 1) that gemm_nn and gemm_tn_acc take for a product of
// M rows, inner width K and output width N (a matmul layer's M = B*T, K = C, N = OC): gemm_nn's
// N*K and gemm_tn_acc's M*N into buffer 0, its M*K into buffer 1; 0 with OpenBLAS
static size_t gemm_scratch_floats(int which, size_t M, size_t N, size_t K) {
#ifdef USE_BLAS
    (void)which; (void)M; (void)N; (void)K;
    return 0;
#else
    return which == 0 ? (N * K > M * N ? N * K : M * N) : M * K;
#endif
}

// grows scratch buffer `which` to n floats now, so that the matmuls allocate nothing later
static void gemm_reserve(int which, size_t n) {
#ifdef USE_BLAS
    (void)which; (void)n;
#else
    if (n > 0) { gemm_buffer(which, n); }
#endif
}

#endif  // LLMC_CPU_MATMUL_H
