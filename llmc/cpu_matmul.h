/*
 * The CPU trainer's matrix products (train_gpt2.c's matmul layer and Muon), fp32, row-major:
 * OpenBLAS's, or a built-in kernel (dependency-free; the only one in a NO_BLAS=1 build). Three
 * shapes, named by how the second operand is used:
 *   nt: out (M,N)  = a (M,K) @ w (N,K)^T      forward
 *   nn: out (M,K)  = a (M,N) @ w (N,K)        input gradient
 *   tn: out (N,K) += a (M,N)^T @ x (M,K)      weight gradient (accumulates)
 * Which one runs is decided once (gemm_builtin): OpenBLAS, except where the built-in kernel has
 * AVX-512 and OpenBLAS's chosen kernels do not, as on an AMD Zen 5 whose OPENBLAS_CORETYPE=Haswell
 * keeps an OpenBLAS older than the CPU on its AVX2 kernels (its AVX-512 ones can crash or
 * miscompute on CPUs it does not know): there the built-in kernel's d12 step is 1.36x faster.
 * LLMC_CPU_MATMUL=openblas or builtin in the environment overrides the choice.
 * gemm_serial runs one product of any operand layout with the built-in kernel on the calling
 * thread alone, in the caller's scratch: the attention's small products, one per thread.
 * The built-in kernel packs its operands into two scratch buffers that grow on demand;
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

/*
 * The built-in kernel, laid out as optimized BLAS libraries lay out theirs.
 * Every shape is one product, out (rows, cols) (+)= A (rows, inner) . B (cols, inner)^T, where A
 * and B are read through two strides each (row- or column-major: no operand is transposed first).
 * The output is cut into blocks of up to GEMM_BLOCK x GEMM_BLOCK, and for each block the inner
 * dimension into chunks of GEMM_KC. For each chunk both operands are packed:
 * A in panels of GEMM_MR rows and B in panels of GEMM_NR columns, each panel k-major (for every k
 * its MR or NR values side by side, zero past the edge), into the two scratch buffers; an operand
 * whose k values lie side by side is transposed on the way, a vector-wide square at a time. Then the
 * output is cut into tiles of GEMM_MC x GEMM_NC that the threads take in turn; within a tile the
 * micro-kernel holds an MR x NR block of outputs in vector registers and, for each k, loads NR
 * values of B (two vectors), broadcasts MR values of A and does 2 MR fused multiply-adds. A tile's
 * panels of A (MC x KC floats) stay in L2 while each panel of B (KC x NR) is in L1.
 * Every output is summed by one thread in the order of k, so the result does not depend on the
 * thread count.
 */
#if defined(__AVX512F__)
#define GEMM_VL 16  // floats per vector: 32 vector registers, an MR of 12 uses 24 for outputs
#define GEMM_MR 12
#elif defined(__AVX__)
#define GEMM_VL 8   // 16 vector registers: 12 for outputs, 2 for B, 1 for the broadcast
#define GEMM_MR 6
#else
#define GEMM_VL 4
#define GEMM_MR 6
#endif
#define GEMM_NR (2 * GEMM_VL)
#define GEMM_KC 384
#define GEMM_MC (8 * GEMM_MR)
#define GEMM_NC (8 * GEMM_NR)
#define GEMM_BLOCK 2048
typedef float gemm_vec __attribute__((vector_size(GEMM_VL * sizeof(float))));

// one operand of the product: element (i, k) is at p[i * si + k * sk]
typedef struct {
    const float *p;
    size_t si, sk;
} GemmOperand;

static float *gemm_scratch[2];
static size_t gemm_scratch_size[2];

// scratch buffer `which` with room for n floats, 64-byte aligned (the packed panels are read as vectors)
static float *gemm_buffer(int which, size_t n) {
    if (gemm_scratch_size[which] < n) {
        free(gemm_scratch[which]);
        gemm_scratch[which] = NULL;
        if (posix_memalign((void **)&gemm_scratch[which], 64, n * sizeof(float)) != 0) {
            llmc_die("out of host memory allocating %zu bytes for the matmul's packed operands; use a smaller -b or -t",
                     n * sizeof(float));
        }
        gemm_scratch_size[which] = n;
    }
    return gemm_scratch[which];
}

// dst[k * w + i] = src[k * sk + i] for k < kc, i < w; inlined where w is a constant
__attribute__((always_inline)) static inline void gemm_copy_rows(float *restrict dst, const float *restrict src, size_t sk,
                                                                  int kc, int w) {
    for (int k = 0; k < kc; k++) { __builtin_memcpy(dst + (size_t)k * w, src + (size_t)k * sk, (size_t)w * sizeof(float)); }
}

typedef int gemm_ivec __attribute__((vector_size(GEMM_VL * sizeof(int))));

// r[0..VL), one row of VL floats each, transposed in place (r[k][i] = r[i][k] before): log2(VL)
// rounds of two-vector shuffles, round b swapping the off-diagonal b x b blocks of each 2b x 2b block
__attribute__((always_inline)) static inline void gemm_transpose(gemm_vec r[GEMM_VL]) {
    gemm_ivec j;
    for (int i = 0; i < GEMM_VL; i++) { j[i] = i; }
    #pragma GCC unroll 4
    for (int b = GEMM_VL / 2; b >= 1; b /= 2) {
        const gemm_ivec second = (j & b) != 0;  // -1 where lane j comes from the pair's second row
        const gemm_ivec lo = j + (second & (GEMM_VL - b)), hi = lo + b;  // indices into (row i, row i + b)
        #pragma GCC unroll 16
        for (int i = 0; i < GEMM_VL; i++) {
            if (i & b) { continue; }
            const gemm_vec x = r[i], y = r[i + b];
            r[i] = __builtin_shuffle(x, y, lo);
            r[i + b] = __builtin_shuffle(x, y, hi);
        }
    }
}

// dst[k * w + i] = src[i * si + k] for k < kc, i < w: a whole panel of rows whose k values lie side
// by side (nt's operands, nn's a), VL x VL blocks at a time transposed in vector registers (the
// float-by-float gather it replaced took a sixth of the classifier's input-gradient product, nn at
// 2048 x 256 x 50304 on one thread); inlined where w is a constant
__attribute__((always_inline)) static inline void gemm_transpose_rows(float *restrict dst, const float *restrict src,
                                                                       size_t si, int kc, int w) {
    int k = 0;
    for (; k + GEMM_VL <= kc; k += GEMM_VL) {
        #pragma GCC unroll 4
        for (int g = 0; g < w; g += GEMM_VL) {
            const int n = w - g < GEMM_VL ? w - g : GEMM_VL;  // rows of this group (MR need not be a multiple of VL)
            gemm_vec r[GEMM_VL];
            #pragma GCC unroll 16
            for (int i = 0; i < GEMM_VL; i++) {
                r[i] = (gemm_vec){0};
                if (i < n) { __builtin_memcpy(&r[i], src + (size_t)(g + i) * si + k, sizeof r[i]); }
            }
            gemm_transpose(r);
            #pragma GCC unroll 16
            for (int kk = 0; kk < GEMM_VL; kk++) { __builtin_memcpy(dst + (size_t)(k + kk) * w + g, &r[kk], (size_t)n * sizeof(float)); }
        }
    }
    for (; k < kc; k++) {
        for (int i = 0; i < w; i++) { dst[(size_t)k * w + i] = src[(size_t)i * si + k]; }
    }
}

// a whole panel of width w (a constant where inlined) from src = its element (0, 0), where either
// index is contiguous: w values of each k side by side (tn's operands, nn's w) are copies of a size
// known at compile time, a few vector moves each (a call of memcpy for each 48 or 128 bytes was 6%
// of a small model's step); k values side by side are transposed
__attribute__((always_inline)) static inline void gemm_pack_whole(float *restrict dst, const float *restrict src,
                                                                   GemmOperand x, int kc, int w) {
    if (x.si == 1) { gemm_copy_rows(dst, src, x.sk, kc, w); }
    else { gemm_transpose_rows(dst, src, x.si, kc, w); }
}

// panel p of width w (MR or NR) of operand x over k0 .. k0+kc: dst[k * w + i] = x(p w + i, k0 + k),
// 0 past n rows (the outputs those feed are never stored, but they stay finite)
static void gemm_pack_panel(float *restrict dst, GemmOperand x, int p, int w, int n, int k0, int kc) {
    const int i0 = p * w, valid = n - i0 < w ? n - i0 : w;
    if (valid == w && (w == GEMM_NR || w == GEMM_MR) && (x.si == 1 || x.sk == 1)) {
        const float *src = x.p + (size_t)i0 * x.si + (size_t)k0 * x.sk;
        if (w == GEMM_NR) { gemm_pack_whole(dst, src, x, kc, GEMM_NR); }
        else { gemm_pack_whole(dst, src, x, kc, GEMM_MR); }
        return;
    }
    for (int k = 0; k < kc; k++) {
        const float *src = x.p + (size_t)i0 * x.si + (size_t)(k0 + k) * x.sk;
        float *d = dst + (size_t)k * w;
        for (int i = 0; i < valid; i++) { d[i] = src[(size_t)i * x.si]; }
        for (int i = valid; i < w; i++) { d[i] = 0.0f; }
    }
}

// out[i][j] (ldo apart) (+)= the MR x NR block of a panel of A times a panel of B over kc; only
// the first mi rows and nj columns are written (the edges)
static inline void gemm_micro(float *restrict out, size_t ldo, const float *restrict ap, const float *restrict bp,
                              int kc, int mi, int nj, int accumulate) {
    gemm_vec c[GEMM_MR][2];
    #pragma GCC unroll 16
    for (int i = 0; i < GEMM_MR; i++) { c[i][0] = c[i][1] = (gemm_vec){0}; }
    // the output block is read and written after the k loop: fetched now, for writing, it arrives
    // while the loop runs (without this, its cache misses were ~15% of this function's time)
    for (int i = 0; i < mi; i++) {  // NR floats span up to 3 lines where a row is not 64-byte aligned
        __builtin_prefetch(out + (size_t)i * ldo, 1, 3);
        __builtin_prefetch(out + (size_t)i * ldo + nj / 2, 1, 3);
        __builtin_prefetch(out + (size_t)i * ldo + nj - 1, 1, 3);
    }
    for (int k = 0; k < kc; k++) {
        const gemm_vec b0 = *(const gemm_vec *)(bp + (size_t)k * GEMM_NR);
        const gemm_vec b1 = *(const gemm_vec *)(bp + (size_t)k * GEMM_NR + GEMM_VL);
        #pragma GCC unroll 16
        for (int i = 0; i < GEMM_MR; i++) {
            const gemm_vec a = (gemm_vec){0} + ap[(size_t)k * GEMM_MR + i];
            c[i][0] += a * b0;
            c[i][1] += a * b1;
        }
    }
    for (int i = 0; i < mi; i++) {
        float *o = out + (size_t)i * ldo;
        if (nj == GEMM_NR) {
            gemm_vec o0, o1;
            __builtin_memcpy(&o0, o, sizeof o0);
            __builtin_memcpy(&o1, o + GEMM_VL, sizeof o1);
            o0 = accumulate ? o0 + c[i][0] : c[i][0];
            o1 = accumulate ? o1 + c[i][1] : c[i][1];
            __builtin_memcpy(o, &o0, sizeof o0);
            __builtin_memcpy(o + GEMM_VL, &o1, sizeof o1);
        } else {
            float row[GEMM_NR];
            __builtin_memcpy(row, &c[i][0], sizeof c[i][0]);
            __builtin_memcpy(row + GEMM_VL, &c[i][1], sizeof c[i][1]);
            for (int j = 0; j < nj; j++) { o[j] = accumulate ? o[j] + row[j] : row[j]; }
        }
    }
}

// tile t of the output (MC x NC) over one chunk of kc, from the packed panels
static void gemm_tile(float *out, size_t ldo, int rows, int cols, const float *ap, const float *bp, int kc, int t,
                      int accumulate) {
    const int tiles_n = (cols + GEMM_NC - 1) / GEMM_NC;
    const int m0 = (t / tiles_n) * GEMM_MC, n0 = (t % tiles_n) * GEMM_NC;
    const int m1 = m0 + GEMM_MC < rows ? m0 + GEMM_MC : rows, n1 = n0 + GEMM_NC < cols ? n0 + GEMM_NC : cols;
    for (int n = n0; n < n1; n += GEMM_NR) {
        const float *b = bp + (size_t)(n / GEMM_NR) * kc * GEMM_NR;
        for (int m = m0; m < m1; m += GEMM_MR) {
            gemm_micro(out + (size_t)m * ldo + n, ldo, ap + (size_t)(m / GEMM_MR) * kc * GEMM_MR, b, kc,
                       m1 - m < GEMM_MR ? m1 - m : GEMM_MR, n1 - n < GEMM_NR ? n1 - n : GEMM_NR, accumulate);
        }
    }
}

// one block of the output, rows x cols of out (ldo apart), over the whole inner dimension: the
// chunks in turn, each packed by all threads, then its tiles shared out
static void gemm_block(float *out, size_t ldo, GemmOperand a, GemmOperand b, int rows, int cols, int inner,
                       int accumulate, float *ap, float *bp) {
    const int panels_a = (rows + GEMM_MR - 1) / GEMM_MR, panels_b = (cols + GEMM_NR - 1) / GEMM_NR;
    const int tiles = ((rows + GEMM_MC - 1) / GEMM_MC) * ((cols + GEMM_NC - 1) / GEMM_NC);
    for (int k0 = 0; k0 < inner; k0 += GEMM_KC) {
        const int kc = inner - k0 < GEMM_KC ? inner - k0 : GEMM_KC;
        #pragma omp for schedule(static) nowait
        for (int p = 0; p < panels_a; p++) { gemm_pack_panel(ap + (size_t)p * kc * GEMM_MR, a, p, GEMM_MR, rows, k0, kc); }
        #pragma omp for schedule(static)
        for (int p = 0; p < panels_b; p++) { gemm_pack_panel(bp + (size_t)p * kc * GEMM_NR, b, p, GEMM_NR, cols, k0, kc); }
        #pragma omp for schedule(dynamic, 1)
        for (int t = 0; t < tiles; t++) { gemm_tile(out, ldo, rows, cols, ap, bp, kc, t, accumulate || k0 > 0); }
    }
}

static size_t gemm_round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

// the floats of scratch buffer `which` (0: A's packed chunk, 1: B's) that one product of
// rows x cols over inner takes
static size_t gemm_chunk_floats(int which, size_t rows, size_t cols, size_t inner) {
    const size_t kc = inner < GEMM_KC ? inner : GEMM_KC;
    return which == 0 ? gemm_round_up(rows < GEMM_BLOCK ? rows : GEMM_BLOCK, GEMM_MR) * kc
                      : gemm_round_up(cols < GEMM_BLOCK ? cols : GEMM_BLOCK, GEMM_NR) * kc;
}

// out (rows, cols; rows ldo apart) (+)= A (rows, inner) . B (cols, inner)^T, in blocks of at most
// GEMM_BLOCK x GEMM_BLOCK outputs, so that the packed chunks of a block (at most 3 MiB each) stay
// in the last-level cache however wide the product (the vocabulary's 50304 columns or rows); by
// all threads (share 1), or by the calling thread alone (0: a team of one, whose work-sharing
// loops bind to it and not to a parallel region the caller is in)
static void gemm_blocks(float *out, size_t ldo, GemmOperand a, GemmOperand b, int rows, int cols, int inner,
                        int accumulate, float *ap, float *bp, int share) {
    #pragma omp parallel if (share)
    for (int i0 = 0; i0 < rows; i0 += GEMM_BLOCK) {
        for (int j0 = 0; j0 < cols; j0 += GEMM_BLOCK) {
            const GemmOperand ab = {a.p + (size_t)i0 * a.si, a.si, a.sk}, bb = {b.p + (size_t)j0 * b.si, b.si, b.sk};
            gemm_block(out + (size_t)i0 * ldo + j0, ldo, ab, bb, rows - i0 < GEMM_BLOCK ? rows - i0 : GEMM_BLOCK,
                       cols - j0 < GEMM_BLOCK ? cols - j0 : GEMM_BLOCK, inner, accumulate, ap, bp);
        }
    }
}

// the product above by all threads, in the shared scratch buffers
static void gemm_packed(float *out, size_t ldo, GemmOperand a, GemmOperand b, int rows, int cols, int inner,
                        int accumulate) {
    float *ap = gemm_buffer(0, gemm_chunk_floats(0, rows, cols, inner));
    float *bp = gemm_buffer(1, gemm_chunk_floats(1, rows, cols, inner));
    gemm_blocks(out, ldo, a, b, rows, cols, inner, accumulate, ap, bp, 1);
}

// the product above on the calling thread alone, in the caller's scratch (ap and bp: 64-byte
// aligned, gemm_chunk_floats(0 and 1, rows, cols, inner) floats): for the small products that the
// threads of a parallel loop run side by side, each its own (the CPU trainer's attention). Any
// operand layout (the strides of GemmOperand), and the built-in kernel whatever gemm_builtin says.
static void gemm_serial(float *out, size_t ldo, GemmOperand a, GemmOperand b, int rows, int cols, int inner,
                        int accumulate, float *ap, float *bp) {
    gemm_blocks(out, ldo, a, b, rows, cols, inner, accumulate, ap, bp, 0);
}

// up to this many rows, the forward's product is gemm_nt_few_rows, with either kernel
#define GEMM_FEW_ROWS 4

/*
 * out (M,N) = a (M,K) @ w (N,K)^T for a few rows, as generation's forward has (its one new token):
 * each output is a dot product of two contiguous rows, so w is read once, straight from memory,
 * where the built-in kernel's packing would read it and write it again for a single use, and
 * OpenBLAS took 2.3x as long (one token of a d12 forward: dev/bench/RESULTS.md). The threads take
 * columns; each output is one thread's sum.
 */
static void gemm_nt_few_rows(float *out, const float *a, const float *w, int M, int N, int K) {
    #pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *wn = w + (size_t)n * K;
        for (int m = 0; m < M; m++) {
            const float *am = a + (size_t)m * K;
            float sum = 0.0f;
            #pragma omp simd reduction(+ : sum)
            for (int k = 0; k < K; k++) { sum += am[k] * wn[k]; }
            out[(size_t)m * N + n] = sum;
        }
    }
}

static void builtin_nt(float *out, const float *a, const float *w, int M, int N, int K) {
    gemm_packed(out, N, (GemmOperand){a, K, 1}, (GemmOperand){w, K, 1}, M, N, K, 0);
}
static void builtin_nn(float *out, const float *a, const float *w, int M, int N, int K) {
    gemm_packed(out, K, (GemmOperand){a, N, 1}, (GemmOperand){w, 1, K}, M, K, N, 0);
}
static void builtin_tn_acc(float *out, const float *a, const float *x, int M, int N, int K) {
    gemm_packed(out, K, (GemmOperand){a, 1, N}, (GemmOperand){x, 1, K}, N, K, M, 1);
}

// whether OpenBLAS runs its AVX-512 kernels here (their names in OpenBLAS 0.3)
static int openblas_has_avx512_kernels(void) {
#if defined(USE_BLAS) && defined(OPENBLAS_VERSION)
    const char *core = openblas_get_corename();
    return strcasestr(core, "skylakex") || strcasestr(core, "cooperlake") || strcasestr(core, "sapphire");
#else
    return 0;
#endif
}

// 1: the built-in kernel runs the products, 0: OpenBLAS (see the top of this file); decided at the
// first call, which the trainer makes while it builds the model
static int gemm_builtin(void) {
    static int chosen = -1;
    if (chosen >= 0) { return chosen; }
    const char *env = getenv("LLMC_CPU_MATMUL");
    const int pick = env == NULL || env[0] == '\0' || strcmp(env, "auto") == 0;
    if (!pick && strcmp(env, "openblas") != 0 && strcmp(env, "builtin") != 0) {
        llmc_die("LLMC_CPU_MATMUL=%s: the CPU matmul is auto, openblas or builtin", env);
    }
#ifdef USE_BLAS
    chosen = pick ? GEMM_VL == 16 && !openblas_has_avx512_kernels() : strcmp(env, "builtin") == 0;
#else
    if (!pick && strcmp(env, "openblas") == 0) {
        llmc_die("LLMC_CPU_MATMUL=openblas: this build has no OpenBLAS (built with NO_BLAS=1 or without "
                 "libopenblas-openmp-dev); unset it or rebuild");
    }
    chosen = 1;
#endif
    return chosen;
}

#ifdef USE_BLAS
static void openblas_nt(float *out, const float *a, const float *w, int M, int N, int K) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.0f, a, K, w, K, 0.0f, out, N);
}
static void openblas_nn(float *out, const float *a, const float *w, int M, int N, int K) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, K, N, 1.0f, a, N, w, K, 0.0f, out, K);
}
static void openblas_tn_acc(float *out, const float *a, const float *x, int M, int N, int K) {
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, N, K, M, 1.0f, a, N, x, K, 1.0f, out, K);
}
#else  // never chosen: without OpenBLAS gemm_builtin() is 1
#define openblas_nt builtin_nt
#define openblas_nn builtin_nn
#define openblas_tn_acc builtin_tn_acc
#endif

static void gemm_nt(float *out, const float *a, const float *w, int M, int N, int K) {
    if (M <= GEMM_FEW_ROWS) {
        gemm_nt_few_rows(out, a, w, M, N, K);
        return;
    }
    (gemm_builtin() ? builtin_nt : openblas_nt)(out, a, w, M, N, K);
}
static void gemm_nn(float *out, const float *a, const float *w, int M, int N, int K) {
    (gemm_builtin() ? builtin_nn : openblas_nn)(out, a, w, M, N, K);
}
static void gemm_tn_acc(float *out, const float *a, const float *x, int M, int N, int K) {
    (gemm_builtin() ? builtin_tn_acc : openblas_tn_acc)(out, a, x, M, N, K);
}

// the floats of scratch buffer `which` (0, 1) that the built-in kernel takes for the three products
// of M rows, inner width K and output width N (a matmul layer's M = B*T, K = C, N = OC): the
// packed chunk of A (0) and of B (1) of the shape that needs the most; 0 when OpenBLAS runs them
static size_t gemm_scratch_floats(int which, size_t M, size_t N, size_t K) {
    if (!gemm_builtin()) { return 0; }
    const size_t shapes[3][3] = {{M, N, K}, {M, K, N}, {N, K, M}};  // rows, cols, inner: nt, nn, tn
    size_t most = 0;
    for (int s = 0; s < 3; s++) {
        const size_t need = gemm_chunk_floats(which, shapes[s][0], shapes[s][1], shapes[s][2]);
        if (need > most) { most = need; }
    }
    return most;
}

// grows scratch buffer `which` to n floats now, so that the matmuls allocate nothing later
static void gemm_reserve(int which, size_t n) {
    if (n > 0) { gemm_buffer(which, n); }
}

// the matmul kernel, for the trainer's banner: "OpenBLAS, Haswell kernels" or "built-in matmul, ..."
static void gemm_kernel_name(char *buf, size_t n) {
#ifdef USE_BLAS
    if (!gemm_builtin()) {
#ifdef OPENBLAS_VERSION
        snprintf(buf, n, "OpenBLAS, %s kernels", openblas_get_corename());
#else
        snprintf(buf, n, "OpenBLAS");
#endif
        return;
    }
#endif
    snprintf(buf, n, "built-in matmul, %d-float vectors", GEMM_VL);
}

// a line for the trainer to print when a faster matmul is to be had here, else NULL: a build
// without OpenBLAS on a CPU without AVX-512, where OpenBLAS's kernels are faster (1.15x per d12
// step at AVX2 width), or on another architecture, where ours runs generic vectors (ARM: NEON's
// 4 floats) and OpenBLAS has kernels for the CPU
static const char *gemm_hint(void) {
#ifndef USE_BLAS
#if defined(__x86_64__)
    if (GEMM_VL < 16) {
        return "the built-in kernel is slower than OpenBLAS on CPUs without AVX-512; apt-get install "
               "libopenblas-openmp-dev and rebuild";
    }
#else
    return "the built-in kernel has no code of its own for this CPU (generic 4-float vectors), OpenBLAS has; "
           "apt-get install libopenblas-openmp-dev and rebuild";
#endif
#endif
    return NULL;
}

#endif  // LLMC_CPU_MATMUL_H
