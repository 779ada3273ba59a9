/*
 * The CPU trainer's matrix products (llmc/cpu_matmul.h) against a double-precision reference:
 * gemm_nt, gemm_nn and gemm_tn_acc (which adds to what out holds) on random operands, at shapes
 * that are and are not multiples of the built-in kernel's panels, tiles and blocks, with an inner width
 * inside one chunk and across several, and at the layer shapes of GPT-2 124M at B*T = 64.
 * An output passes when its error is within 1e-5 of the sum of the absolute products (fp32
 * rounding over up to a few thousand terms stays well inside it; a wrong element, a missed
 * chunk or a stale edge is off by about one product, far outside).
 * Built with OpenBLAS (run with LLMC_CPU_MATMUL=openblas and =builtin) and without (NO_BLAS),
 * and without at AVX2 and at SSE width (the built-in kernel's other panel sizes). The built-in
 * kernel also gives the same bits on 1 and on 2 threads, and takes no more scratch than
 * gemm_scratch_floats promised for the layer shapes. gemm_serial (the attention's products: any
 * strides, one thread each, the caller's scratch) is checked the same way with products that the
 * threads of a parallel loop run side by side, in the operand layouts the attention uses.
 */
#include <math.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include "../../llmc/cpu_matmul.h"

static int failures = 0;
#define CHECK(cond, ...) do { if (!(cond)) { failures++; if (failures <= 10) { printf("FAIL: " __VA_ARGS__); printf("\n"); } } } while (0)

static unsigned long long rng_state = 42;
static float uniform(void) {  // in [-1, 1)
    rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (float)((rng_state >> 40) / (double)(1ULL << 24)) * 2.0f - 1.0f;
}
static float *random_floats(size_t n) {
    float *x = (float *)mallocCheck(n * sizeof(float));
    for (size_t i = 0; i < n; i++) { x[i] = uniform(); }
    return x;
}

enum { NT, NN, TN };
static const char *shape_name[3] = {"gemm_nt", "gemm_nn", "gemm_tn_acc"};

// the product of shape s at (M, N, K), as in the header: its out's rows and columns, and element
// (i, j) in double with the sum of the absolute products
static void shape_dims(int s, int M, int N, int K, int *rows, int *cols) {
    *rows = s == TN ? N : M;
    *cols = s == NT ? N : K;
}
static double reference(int s, const float *a, const float *w, int M, int N, int K, int i, int j, double *abs_sum) {
    double sum = 0.0, abs = 0.0;
    const int inner = s == NT ? K : (s == NN ? N : M);
    for (int k = 0; k < inner; k++) {
        double p;
        if (s == NT) { p = (double)a[(size_t)i * K + k] * w[(size_t)j * K + k]; }
        else if (s == NN) { p = (double)a[(size_t)i * N + k] * w[(size_t)k * K + j]; }
        else { p = (double)a[(size_t)k * N + i] * w[(size_t)k * K + j]; }
        sum += p;
        abs += fabs(p);
    }
    *abs_sum = abs;
    return sum;
}

static void run(int s, float *out, const float *a, const float *w, int M, int N, int K) {
    if (s == NT) { gemm_nt(out, a, w, M, N, K); }
    else if (s == NN) { gemm_nn(out, a, w, M, N, K); }
    else { gemm_tn_acc(out, a, w, M, N, K); }
}

// the built-in kernel gives the same bits on one thread as on two
static void check_thread_invariance(int s, const float *a, const float *w, const float *before, int M, int N, int K) {
#ifdef _OPENMP
    int rows, cols;
    shape_dims(s, M, N, K, &rows, &cols);
    const size_t bytes = (size_t)rows * cols * sizeof(float);
    float *one = (float *)mallocCheck(bytes), *two = (float *)mallocCheck(bytes);
    memcpy(one, before, bytes);
    memcpy(two, before, bytes);
    const int threads = omp_get_max_threads();
    omp_set_num_threads(1);
    run(s, one, a, w, M, N, K);
    omp_set_num_threads(threads > 1 ? threads : 2);
    run(s, two, a, w, M, N, K);
    omp_set_num_threads(threads);
    CHECK(memcmp(one, two, bytes) == 0, "%s M=%d N=%d K=%d: 1 and 2 threads differ", shape_name[s], M, N, K);
    free(one); free(two);
#else
    (void)s; (void)a; (void)w; (void)before; (void)M; (void)N; (void)K;
#endif
}

// one shape at one size against the reference; the operands' sizes: a is (M,K) for nt and (M,N)
// otherwise, w is (N,K) for nt and nn and x (M,K) for tn
static void check_shape(int s, int M, int N, int K) {
    int rows, cols;
    shape_dims(s, M, N, K, &rows, &cols);
    float *a = random_floats((size_t)M * (s == NT ? K : N));
    float *w = random_floats(s == TN ? (size_t)M * K : (size_t)N * K);
    float *before = random_floats((size_t)rows * cols);
    float *out = (float *)mallocCheck((size_t)rows * cols * sizeof(float));
    memcpy(out, before, (size_t)rows * cols * sizeof(float));
    run(s, out, a, w, M, N, K);
    int bad = 0;
    for (int i = 0; i < rows; i++) {
        for (int j = 0; j < cols; j++) {
            double abs_sum, want = reference(s, a, w, M, N, K, i, j, &abs_sum);
            if (s == TN) { want += before[(size_t)i * cols + j]; abs_sum += fabs(before[(size_t)i * cols + j]); }
            const double got = out[(size_t)i * cols + j];
            if (!(fabs(got - want) <= 1e-5 * abs_sum + 1e-30)) {
                if (bad++ == 0) { CHECK(0, "%s M=%d N=%d K=%d: out[%d][%d] = %.9g, want %.9g", shape_name[s], M, N, K, i, j, got, want); }
            }
        }
    }
    if (bad > 1) { printf("  (%d wrong outputs of %d)\n", bad, rows * cols); }
    if (gemm_builtin()) { check_thread_invariance(s, a, w, before, M, N, K); }
    free(a); free(w); free(before); free(out);
}

// element (i, k) of an operand as gemm_serial reads it
static double operand_at(GemmOperand x, int i, int k) { return x.p[(size_t)i * x.si + (size_t)k * x.sk]; }

// products by gemm_serial, several at once on the threads of one parallel loop, each in its own
// scratch of the size gemm_chunk_floats names: out (rows, cols; ldo = cols + 3) (+)= A . B^T, with
// A and B read row-major (si = row length, sk = 1) or column-major (si = 1, sk = column length) from
// wider matrices, as the attention reads q, k, v from qkv rows; the columns past cols stay as they were
enum { SERIAL_PRODUCTS = 12 };
typedef struct {
    int rows, cols, inner, accumulate;
    size_t ldo;
    GemmOperand a, b;
    float *before, *out, *ap, *bp;
} SerialProduct;

static void check_serial(void) {
    const int dims[SERIAL_PRODUCTS][3] = {{128, 300, 64}, {44, 300, 64}, {128, 64, 300}, {44, 64, 256}, {300, 64, 128},
                                          {256, 64, 44}, {1, 1, 1}, {13, 33, 17}, {97, 129, 513}, {5, 40, 3},
                                          {64, 64, 64}, {2051, 3, 5}};
    SerialProduct pr[SERIAL_PRODUCTS];
    for (int n = 0; n < SERIAL_PRODUCTS; n++) {  // the operands, drawn in order (one generator)
        SerialProduct *p = &pr[n];
        p->rows = dims[n][0], p->cols = dims[n][1], p->inner = dims[n][2], p->accumulate = n % 4 == 1;
        p->ldo = (size_t)p->cols + 3;
        const size_t wide = 3;  // operands inside rows 3x as long, as q, k and v in qkv
        float *a = random_floats((size_t)p->rows * p->inner * wide), *b = random_floats((size_t)p->cols * p->inner * wide);
        p->a = n % 2 ? (GemmOperand){a, p->inner * wide, 1} : (GemmOperand){a, 1, p->rows * wide};
        p->b = n % 3 ? (GemmOperand){b, p->inner * wide, 1} : (GemmOperand){b, 1, p->cols * wide};
        p->before = random_floats((size_t)p->rows * p->ldo);
        p->out = (float *)mallocCheck((size_t)p->rows * p->ldo * sizeof(float));
        memcpy(p->out, p->before, (size_t)p->rows * p->ldo * sizeof(float));
        if (posix_memalign((void **)&p->ap, 64, gemm_chunk_floats(0, p->rows, p->cols, p->inner) * sizeof(float)) != 0 ||
            posix_memalign((void **)&p->bp, 64, gemm_chunk_floats(1, p->rows, p->cols, p->inner) * sizeof(float)) != 0) {
            llmc_die("out of host memory for gemm_serial's scratch");
        }
    }
    #pragma omp parallel for schedule(dynamic, 1)
    for (int n = 0; n < SERIAL_PRODUCTS; n++) {
        SerialProduct *p = &pr[n];
        gemm_serial(p->out, p->ldo, p->a, p->b, p->rows, p->cols, p->inner, p->accumulate, p->ap, p->bp);
    }
    for (int n = 0; n < SERIAL_PRODUCTS; n++) {
        SerialProduct *p = &pr[n];
        int bad = 0;
        for (int i = 0; i < p->rows; i++) {
            for (size_t j = 0; j < p->ldo; j++) {
                const double was = p->before[(size_t)i * p->ldo + j], got = p->out[(size_t)i * p->ldo + j];
                double want = j >= (size_t)p->cols || p->accumulate ? was : 0.0, abs_sum = fabs(want);
                for (int k = 0; k < p->inner && j < (size_t)p->cols; k++) {
                    const double x = operand_at(p->a, i, k) * operand_at(p->b, (int)j, k);
                    want += x;
                    abs_sum += fabs(x);
                }
                if (!(fabs(got - want) <= 1e-5 * abs_sum + 1e-30) && bad++ == 0) {
                    CHECK(0, "gemm_serial rows=%d cols=%d inner=%d (A by %s, B by %s%s): out[%d][%zu] = %.9g, want %.9g", p->rows,
                          p->cols, p->inner, n % 2 ? "rows" : "columns", n % 3 ? "rows" : "columns",
                          p->accumulate ? ", accumulating" : "", i, j, got, want);
                }
            }
        }
        if (bad > 1) { printf("  (%d wrong outputs of %d)\n", bad, (int)(p->rows * p->ldo)); }
        free((void *)p->a.p); free((void *)p->b.p); free(p->before); free(p->out); free(p->ap); free(p->bp);
    }
}

int main(void) {
    // (M, N, K): single elements, edges of every panel and tile size, inner widths across chunks
    const int sizes[][3] = {{1, 1, 1}, {1, 7, 3}, {5, 1, 9}, {13, 33, 17}, {12, 32, 256}, {25, 65, 257},
                            {97, 129, 513}, {6, 16, 700}, {200, 70, 31}, {64, 520, 40},
                            {2051, 2050, 9},  // past one output block (GEMM_BLOCK) both ways
                            {3, 50, 300}, {4, 2304, 768}, {5, 31, 300}};  // gemm_nt's few rows, and one more
    for (size_t n = 0; n < sizeof(sizes) / sizeof(sizes[0]); n++) {
        for (int s = 0; s < 3; s++) { check_shape(s, sizes[n][0], sizes[n][1], sizes[n][2]); }
    }
    // GPT-2 124M's layers at B*T = 64 (K = C, N = OC); the vocabulary's at 1024 of its 50304 rows
    const int C = 768, layers[][2] = {{C, 3 * C}, {C, C}, {C, 4 * C}, {4 * C, C}, {C, 1024}};
    for (size_t n = 0; n < sizeof(layers) / sizeof(layers[0]); n++) {
        const int M = 64, K = layers[n][0], N = layers[n][1];
        for (int which = 0; which < 2; which++) {
            free(gemm_scratch[which]);
            gemm_scratch[which] = NULL;
            gemm_scratch_size[which] = 0;
            gemm_reserve(which, gemm_scratch_floats(which, M, N, K));
        }
        const size_t reserved[2] = {gemm_scratch_size[0], gemm_scratch_size[1]};
        for (int s = 0; s < 3; s++) { check_shape(s, M, N, K); }
        for (int which = 0; which < 2; which++) {
            CHECK(gemm_scratch_size[which] == reserved[which], "K=%d N=%d: scratch %d grew from %zu to %zu floats past gemm_scratch_floats",
                  K, N, which, reserved[which], gemm_scratch_size[which]);
        }
    }
    check_serial();
    char kernel[96];
    gemm_kernel_name(kernel, sizeof(kernel));
    if (gemm_builtin()) { snprintf(kernel + strlen(kernel), sizeof(kernel) - strlen(kernel), ", %dx%d blocks", GEMM_MR, GEMM_NR); }
    if (failures > 0) {
        printf("test_cpu_matmul (%s): %d check(s) FAILED\n", kernel, failures);
        return 1;
    }
    printf("test_cpu_matmul (%s): all products match the double reference\n", kernel);
    return 0;
}
