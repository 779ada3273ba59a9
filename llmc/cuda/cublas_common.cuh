/*
 * cuBLASLt for every matmul of the model: one handle, one 32 MiB workspace, the cublasCheck
 * wrapper, and matmul_cublaslt(), a general bf16 GEMM with the fused epilogues the model uses
 * (bias, GELU with its pre-activation saved, GELU backward, and with -bg 1 the bias gradient of a
 * weight-gradient GEMM). llmc/cuda/matmul.cuh maps the model's row-major layers onto it.
 *
 * Conventions:
 * - cuBLASLt is column-major. A row-major (R, K) array is a column-major (K x R) matrix with
 *   leading dimension K, so a row-major product is written as the transposed column-major one.
 * - Inputs and outputs are bf16, the compute type is CUBLAS_COMPUTE_32F (fp32 accumulation on
 *   tensor cores), alpha and beta are fp32 host scalars.
 * - Determinism: cuBLAS gives bitwise-identical results run to run for the same toolkit, GPU
 *   architecture and SM count; with cublasLtMatmul and a user-owned workspace this also holds
 *   when several streams are active (cuBLAS documentation, "Results reproducibility"). The
 *   algorithm for a problem is chosen once by the heuristic and cached, so it never changes
 *   within a run. With -mt 1 it is the fastest of the heuristic's candidates by timing instead,
 *   so two runs may choose differently (matmul_tune below).
 */
#ifndef LLMC_CUBLAS_COMMON_CUH
#define LLMC_CUBLAS_COMMON_CUH

#include <cublasLt.h>
#include <cublas_v2.h>
#include "cuda_common.cuh"
#include "../matmul_algo_file.h"

#define CUBLASLT_WORKSPACE_BYTES ((size_t)32 * 1024 * 1024)  // recommended for Hopper; ample for Ampere

static cublasLtHandle_t cublaslt_handle = NULL;
static void *cublaslt_workspace = NULL;

static inline void cublas_check(cublasStatus_t status, const char *call, const char *file, int line) {
    if (status != CUBLAS_STATUS_SUCCESS) {
        llmc_die("cuBLAS error %s in %s: %s [%s:%d]", cublasGetStatusName(status), call, cublasGetStatusString(status),
                 file, line);
    }
}
#define cublasCheck(call) cublas_check((call), #call, __FILE__, __LINE__)

// create the handle and the workspace on the current device; call once after cudaSetDevice
static inline void cublas_init(void) {
    if (cublaslt_handle != NULL) { return; }
    cublasCheck(cublasLtCreate(&cublaslt_handle));
    const cudaError_t err = cudaMalloc(&cublaslt_workspace, CUBLASLT_WORKSPACE_BYTES);
    if (err == cudaErrorMemoryAllocation) {  // before the memory plan's check: say what it would
        (void)cudaGetLastError();
        size_t free_b = 0, total_b = 0;
        cudaMemGetInfo(&free_b, &total_b);
        llmc_die("the GPU has %.0f MiB free of %.2f GiB, less than cuBLAS's %d MiB workspace before the model's memory: "
                 "other processes hold it (nvidia-smi lists them)", free_b / 1048576.0, total_b / 1073741824.0,
                 (int)(CUBLASLT_WORKSPACE_BYTES >> 20));
    }
    cudaCheck(err);
}

static inline void cublas_free(void) {
    if (cublaslt_handle == NULL) { return; }
    cudaCheck(cudaFree(cublaslt_workspace));
    cublasCheck(cublasLtDestroy(cublaslt_handle));
    cublaslt_workspace = NULL;
    cublaslt_handle = NULL;
}

// ----------------------------------------------------------------------------
// the general GEMM

typedef enum {
    MATMUL_PLAIN = 0,        // D = alpha * op(A) op(B) (+ bias) + beta * D
    MATMUL_GELU_FORWARD = 1, // aux = op(A) op(B) + bias (the pre-activation), D = GELU(aux)
    MATMUL_GELU_BACKWARD = 2 // D = (op(A) op(B)) * GELU'(aux), aux read (the forward's pre-activation)
} MatmulGelu;

// largest power of two (up to 256) that divides the address and every byte stride
static inline uint32_t matmul_alignment(const void *ptr, size_t ld_bytes, size_t stride_bytes) {
    uintptr_t bits = (uintptr_t)ptr | (uintptr_t)ld_bytes | (uintptr_t)stride_bytes | 256;
    return (uint32_t)(bits & (~bits + 1));
}

// The heuristic's answer depends on the shapes, the epilogue and the alignment of every pointer
// (cuBLASLt reads the alignment from the pointer values), so all of them are the key.
typedef struct {
    int m, n, k, transa, transb, batch, epilogue, accumulate;
    long long stride_a, stride_b, stride_d;
    uint32_t align_a, align_b, align_d, align_bias, align_aux;
} MatmulAlgoKey;

typedef struct {
    MatmulAlgoKey key;
    cublasLtMatmulAlgo_t algo;
    int none;                   // cuBLASLt has no algorithm for the key (asked only where the caller has another way)
    int tuned;                  // -mt 1: 1 its candidates were timed, 2 the choice was read from the file of an
    float first_ms, chosen_ms;  // earlier run (either way one call's time with the heuristic's first and with the
    int chosen;                 // chosen, its index chosen), -1 they could not be timed (the heuristic's first kept),
                                // 0 not tried
    long long calls;            // the calls that used it
} MatmulAlgoEntry;

#define MATMUL_ALGO_CACHE_SIZE 256
static MatmulAlgoEntry matmul_algo_cache[MATMUL_ALGO_CACHE_SIZE];
static int matmul_algo_cache_count = 0;

// the cached entry of a GEMM key, or NULL
static inline MatmulAlgoEntry *matmul_algo_cached(const MatmulAlgoKey *key) {
    for (int i = 0; i < matmul_algo_cache_count; i++) {
        if (memcmp(&matmul_algo_cache[i].key, key, sizeof(*key)) == 0) { return &matmul_algo_cache[i]; }
    }
    return NULL;
}

/*
 * -mt 1 (cublas_set_tuning): the algorithm of each GEMM key is the fastest of up to
 * MATMUL_TUNE_CANDIDATES of the heuristic's, timed on the key's first call, instead of its first.
 * Timing decides, so two runs may choose differently and differ in the last bits; hence the
 * choices are kept in a file (llmc/matmul_algo_file.h) when the run has an output directory, and
 * a run that finds the file there (a resume) takes its choices instead of timing: the same
 * algorithms, the same bits. What the choice gained is estimated from the timings and each key's
 * number of calls (matmul_tune_report).
 */
#define MATMUL_TUNE_CANDIDATES 8
#define MATMUL_TUNE_REPS 5
#define MATMUL_TUNE_ROUNDS 3        // the second timing of a winner against the first (gemm_fastest); median3's 3
#define MATMUL_TUNE_MIN_GAIN 0.03f  // the gain that second timing must show for the winner to replace the first
static int matmul_tune = 0;
static int matmul_tune_unconfirmed = 0;  // winners of the first timing that the second did not confirm

// the file of this rank's choices ("": none), the choices read from it, and whether choices were
// made since it was last written
static char matmul_algo_path[4096];
static MatmulAlgoEntry matmul_algo_read[MATMUL_ALGO_CACHE_SIZE];
static int matmul_algo_read_count = 0, matmul_algo_unsaved = 0;
static int matmul_algo_rejected = 0;  // choices read that cuBLASLt's check refused (timed again)
static AlgoOrigin matmul_algo_here;   // this run's GPU and cuBLASLt, which the file records

static inline AlgoOrigin matmul_algo_origin(void) {
    AlgoOrigin o;
    memset(&o, 0, sizeof(o));
    int device = 0;
    cudaDeviceProp prop;
    cudaCheck(cudaGetDevice(&device));
    cudaCheck(cudaGetDeviceProperties(&prop, device));
    snprintf(o.device, sizeof(o.device), "%s", prop.name);
    o.sm_count = prop.multiProcessorCount;
    o.cublaslt_version = (uint64_t)cublasLtGetVersion();
    return o;
}

// a file record: the key, the algorithm, the two times and the index (llmc/matmul_algo_file.h)
#define MATMUL_ALGO_RECORD_BYTES (sizeof(MatmulAlgoKey) + sizeof(cublasLtMatmulAlgo_t) + ALGO_FILE_TIMES_BYTES)

static inline void matmul_algo_pack(unsigned char *r, const MatmulAlgoEntry *e) {
    const int32_t chosen = e->chosen;
    memcpy(r, &e->key, sizeof(e->key));
    r += sizeof(e->key);
    memcpy(r, &e->algo, sizeof(e->algo));
    r += sizeof(e->algo);
    memcpy(r, &e->first_ms, 4);
    memcpy(r + 4, &e->chosen_ms, 4);
    memcpy(r + 8, &chosen, 4);
}

static inline void matmul_algo_unpack(MatmulAlgoEntry *e, const unsigned char *r) {
    int32_t chosen;
    memset(e, 0, sizeof(*e));
    memcpy(&e->key, r, sizeof(e->key));
    r += sizeof(e->key);
    memcpy(&e->algo, r, sizeof(e->algo));
    r += sizeof(e->algo);
    memcpy(&e->first_ms, r, 4);
    memcpy(&e->chosen_ms, r + 4, 4);
    memcpy(&chosen, r + 8, 4);
    // the times and the index only feed the report: a damaged one must not make it print nonsense
    if (!(e->first_ms >= 0.0f && e->first_ms < 1e9f) || !(e->chosen_ms >= 0.0f && e->chosen_ms <= e->first_ms)) {
        e->first_ms = e->chosen_ms = 0.0f;
    }
    e->chosen = chosen >= 0 && chosen < MATMUL_TUNE_CANDIDATES ? chosen : 0;
    e->tuned = 2;
}

// read the choices of <out>/matmul_algos_<rank>.bin, if there is one; a file that cannot be used
// is named in a warning and the run times its GEMMs instead
static inline void matmul_algos_load(void) {
    static unsigned char records[MATMUL_ALGO_CACHE_SIZE * MATMUL_ALGO_RECORD_BYTES];
    char why[512];
    const int n = algo_file_read(matmul_algo_path, &matmul_algo_here, sizeof(MatmulAlgoKey), sizeof(cublasLtMatmulAlgo_t), records,
                                 MATMUL_ALGO_CACHE_SIZE, why, sizeof(why));
    if (n == -2) {
        llmc_warn("-mt 1: %s %s; its matmul algorithms are not used: they are timed again (and the file rewritten), so "
                  "this run may differ in the last bits from the one that wrote it", matmul_algo_path, why);
    }
    matmul_algo_read_count = n > 0 ? n : 0;
    for (int i = 0; i < matmul_algo_read_count; i++) {
        matmul_algo_unpack(&matmul_algo_read[i], records + (size_t)i * MATMUL_ALGO_RECORD_BYTES);
    }
}

/*
 * -mt: on or off; out_dir (NULL or "": none) and rank name the file of this rank's choices, which
 * is read now (after cublas_init, on the run's device) and written by matmul_algos_save.
 */
static inline void cublas_set_tuning(int on, const char *out_dir, int rank) {
    matmul_tune = on;
    matmul_algo_path[0] = '\0';
    matmul_algo_read_count = matmul_algo_unsaved = matmul_algo_rejected = 0;
    if (!on || out_dir == NULL || out_dir[0] == '\0') { return; }
    if (snprintf(matmul_algo_path, sizeof(matmul_algo_path), "%s/matmul_algos_%05d.bin", out_dir, rank) >=
        (int)sizeof(matmul_algo_path)) {
        llmc_die("-o %s: path too long", out_dir);
    }
    matmul_algo_here = matmul_algo_origin();
    matmul_algos_load();
}

// the file that keeps -mt 1's choices ("" where the run has none)
static inline const char *matmul_algo_file(void) { return matmul_algo_path; }

// the number of choices read from the file
static inline int matmul_algos_read(void) { return matmul_algo_read_count; }

/*
 * -mt 1 with a file: writes every choice known (made in this run, or read and not needed yet) if
 * any was made since the last write. Called after each optimizer step and at the end. A failed
 * write is one warning: the run goes on, only a resume would time again.
 */
static inline void matmul_algos_save(void) {
    static unsigned char records[MATMUL_ALGO_CACHE_SIZE * MATMUL_ALGO_RECORD_BYTES];  // at most the cache's size
    static int warned = 0;
    if (!matmul_algo_unsaved || matmul_algo_path[0] == '\0') { return; }
    int n = 0;
    for (int i = 0; i < matmul_algo_cache_count; i++) {  // count <= MATMUL_ALGO_CACHE_SIZE
        if (matmul_algo_cache[i].tuned > 0) { matmul_algo_pack(records + (size_t)n++ * MATMUL_ALGO_RECORD_BYTES, &matmul_algo_cache[i]); }
    }
    for (int i = 0; i < matmul_algo_read_count && n < MATMUL_ALGO_CACHE_SIZE; i++) {
        if (!matmul_algo_cached(&matmul_algo_read[i].key)) {  // read, not met in this run yet: kept as read
            matmul_algo_pack(records + (size_t)n++ * MATMUL_ALGO_RECORD_BYTES, &matmul_algo_read[i]);
        }
    }
    char err[4600];
    if (algo_file_write(matmul_algo_path, &matmul_algo_here, sizeof(MatmulAlgoKey), sizeof(cublasLtMatmulAlgo_t), records, n, err,
                        sizeof(err)) != 0 && !warned) {
        llmc_warn("-mt 1: the matmul algorithms chosen could not be kept (%s); a resume will time them again", err);
        warned = 1;
    }
    matmul_algo_unsaved = 0;
}

// forget every cached algorithm: the next call of each GEMM chooses again
static inline void cublas_forget_algorithms(void) { matmul_algo_cache_count = 0; }

// the cached GEMM keys whose candidates -mt 1 timed, those whose choice it read from the file, and
// those it could not time
static inline void matmul_tune_counts(int *timed, int *read, int *untimed) {
    *timed = *read = *untimed = 0;
    for (int i = 0; i < matmul_algo_cache_count; i++) {
        *timed += matmul_algo_cache[i].tuned == 1;
        *read += matmul_algo_cache[i].tuned == 2;
        *untimed += matmul_algo_cache[i].tuned < 0;
    }
}

// With -mt 1, one line on what it chose so far: the keys timed, and over the calls of the timed
// keys so far, their time by the timings with the heuristic's first choices and with the chosen.
// Without -mt 1 nothing.
static inline void matmul_tune_report(void) {
    if (!matmul_tune) { return; }
    double first = 0.0, chosen = 0.0;
    long long calls = 0;
    int timed = 0, read = 0, untimed = 0, kept_first = 0;
    matmul_tune_counts(&timed, &read, &untimed);
    for (int i = 0; i < matmul_algo_cache_count; i++) {
        const MatmulAlgoEntry *e = &matmul_algo_cache[i];
        if (e->tuned <= 0) { continue; }
        kept_first += e->chosen == 0;
        first += (double)e->calls * e->first_ms;
        chosen += (double)e->calls * e->chosen_ms;
        calls += e->calls;
    }
    const double saved = first > 0.0 ? 100.0 * (1.0 - chosen / first) : 0.0;
    char overturned[96] = "";
    if (matmul_tune_unconfirmed > 0) {
        snprintf(overturned, sizeof(overturned), " (for %d of them a second timing overturned another's lead)",
                 matmul_tune_unconfirmed);
    }
    printf("matmul algorithms (-mt 1): %d GEMM shapes timed, up to %d candidates each; the heuristic's first was the "
           "fastest for %d%s; their %lld calls: %.1f ms with the heuristic's first choices, %.1f ms with the fastest "
           "(%.1f%% less, by the timings)", timed + read, MATMUL_TUNE_CANDIDATES, kept_first, overturned, calls, first,
           chosen, saved);
    if (read > 0 || matmul_algo_rejected > 0) {
        printf("; %d of them by an earlier run (%s)", read, matmul_algo_path);
        if (matmul_algo_rejected > 0) { printf(", %d read there refused by cuBLASLt's check and timed again", matmul_algo_rejected); }
    }
    if (untimed > 0) {
        printf("; %d kept the heuristic's first untimed (no memory for a scratch copy of d, or it failed)", untimed);
    }
    printf("\n");
}

/*
 * One GEMM: d[b] (m x n, column-major, ld m) = alpha * op(A[b]) op(B[b]) + beta * d[b], for b < batch_count,
 * with the epilogue given by `gelu` and `bias`:
 *   op(A) is m x k: A is stored (k x m, ld k) when transa, else (m x k, ld m);
 *   op(B) is k x n: B is stored (n x k, ld n) when transb, else (k x n, ld k);
 *   bias (m) or NULL: added to every column before the GELU (not with MATMUL_GELU_BACKWARD);
 *   aux (m x n, ld m): written by MATMUL_GELU_FORWARD, read by MATMUL_GELU_BACKWARD, else NULL;
 *   bias_grad (n) or NULL: overwritten with the sums of op(B) over k, one per column of d
 *     (cuBLASLt's BGRADB epilogue: a weight-gradient GEMM's bias gradient); MATMUL_PLAIN, no
 *     bias, one batch, and cuBLASLt may have no algorithm for it (gemm_run then returns 0);
 *   stride_*: elements between consecutive batch matrices (aux uses stride_d).
 * beta = 0 overwrites d; beta = 1 accumulates into it (d is also the C matrix).
 * Every pointer, leading dimension and stride must be 16-byte aligned (tensor-core paths).
 */
typedef struct {
    floatX *d;
    const floatX *a, *b, *bias;
    floatX *aux;
    int m, n, k, transa, transb, batch_count;
    float alpha, beta;
    size_t stride_a, stride_b, stride_d;
    MatmulGelu gelu;
    floatX *bias_grad;
} Gemm;

// cuBLASLt's description of a Gemm: the operation, the three matrix layouts, the algorithm cache key
typedef struct {
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t la, lb, ld;
    MatmulAlgoKey key;
} GemmPlan;

static inline void gemm_plan_create(GemmPlan *p, const Gemm *g) {
    const int m = g->m, n = g->n, k = g->k, transa = g->transa, transb = g->transb, batch_count = g->batch_count;
    cudaRequire(cublaslt_handle != NULL, "cublas_init() was not called");
    cudaRequire(m > 0 && n > 0 && k > 0 && batch_count > 0, "m = %d, n = %d, k = %d, batch = %d", m, n, k, batch_count);
    cudaRequire((g->gelu == MATMUL_PLAIN) == (g->aux == NULL), "aux must be given exactly with a GELU epilogue");
    cudaRequire(g->gelu != MATMUL_GELU_BACKWARD || g->bias == NULL, "the GELU-backward epilogue takes no bias");
    cudaRequire(g->gelu == MATMUL_PLAIN || m % 8 == 0, "m = %d: the GELU aux leading dimension must be a multiple of 8", m);
    cudaRequire(g->bias_grad == NULL || (g->gelu == MATMUL_PLAIN && g->bias == NULL && batch_count == 1),
                "a bias gradient goes with a plain, unbiased, unbatched GEMM");
    const int lda = transa ? k : m, ldb = transb ? n : k, ldd = m;
    const size_t e = sizeof(floatX);
    const size_t sa = batch_count > 1 ? g->stride_a * e : 0, sb = batch_count > 1 ? g->stride_b * e : 0,
                 sd = batch_count > 1 ? g->stride_d * e : 0;

    MatmulAlgoKey *key = &p->key;
    memset(key, 0, sizeof(*key));  // padding too: keys are compared with memcmp
    key->m = m; key->n = n; key->k = k; key->transa = transa; key->transb = transb; key->batch = batch_count;
    key->accumulate = g->beta != 0.0f;
    key->stride_a = (long long)sa; key->stride_b = (long long)sb; key->stride_d = (long long)sd;
    key->align_a = matmul_alignment(g->a, lda * e, sa);
    key->align_b = matmul_alignment(g->b, ldb * e, sb);
    key->align_d = matmul_alignment(g->d, ldd * e, sd);
    const floatX *bias = g->bias ? g->bias : g->bias_grad;  // the epilogue's one vector: read, or written
    key->align_bias = bias ? matmul_alignment(bias, 0, 0) : 0;
    key->align_aux = g->aux ? matmul_alignment(g->aux, ldd * e, sd) : 0;
    cudaRequire(key->align_a >= 16 && key->align_b >= 16 && key->align_d >= 16 && (bias == NULL || key->align_bias >= 16) &&
                    (g->aux == NULL || key->align_aux >= 16),
                "pointers, leading dimensions (m = %d, n = %d, k = %d) and strides must be 16-byte aligned", m, n, k);

    cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
    if (g->gelu == MATMUL_GELU_FORWARD) {
        epilogue = g->bias ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX;
    } else if (g->gelu == MATMUL_GELU_BACKWARD) {
        epilogue = CUBLASLT_EPILOGUE_DGELU;
    } else if (g->bias) {
        epilogue = CUBLASLT_EPILOGUE_BIAS;
    } else if (g->bias_grad) {
        epilogue = CUBLASLT_EPILOGUE_BGRADB;  // the sums over k of op(B), whose columns are d's
    }
    key->epilogue = (int)epilogue;

    // the operation: fp32 compute and scale type, transposes, epilogue and its pointers
    cublasLtMatmulDesc_t desc;
    cublasCheck(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasOperation_t opa = transa ? CUBLAS_OP_T : CUBLAS_OP_N, opb = transb ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasCheck(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof(opa)));
    cublasCheck(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof(opb)));
    cublasCheck(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue)));
    if (bias) {  // bf16, D's type: the documented type of a bias and of a bias gradient
        cudaDataType_t bias_type = CUDA_R_16BF;
        cublasCheck(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof(bias_type)));
        cublasCheck(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
    }
    if (g->aux) {
        cudaDataType_t aux_type = CUDA_R_16BF;
        int64_t aux_ld = ldd, aux_stride = batch_count > 1 ? (int64_t)g->stride_d : 0;
        cublasCheck(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE, &aux_type, sizeof(aux_type)));
        cublasCheck(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &g->aux, sizeof(g->aux)));
        cublasCheck(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &aux_ld, sizeof(aux_ld)));
        if (batch_count > 1) {
            cublasCheck(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE, &aux_stride,
                                                       sizeof(aux_stride)));
        }
    }
    p->desc = desc;

    // the matrices as stored: rows x cols of the stored (not transposed) array, column-major
    cublasCheck(cublasLtMatrixLayoutCreate(&p->la, CUDA_R_16BF, transa ? k : m, transa ? m : k, lda));
    cublasCheck(cublasLtMatrixLayoutCreate(&p->lb, CUDA_R_16BF, transb ? n : k, transb ? k : n, ldb));
    cublasCheck(cublasLtMatrixLayoutCreate(&p->ld, CUDA_R_16BF, m, n, ldd));
    if (batch_count > 1) {
        int32_t count = batch_count;
        int64_t sta = (int64_t)g->stride_a, stb = (int64_t)g->stride_b, std_ = (int64_t)g->stride_d;
        cublasLtMatrixLayout_t layouts[3] = {p->la, p->lb, p->ld};
        int64_t strides[3] = {sta, stb, std_};
        for (int i = 0; i < 3; i++) {
            cublasCheck(cublasLtMatrixLayoutSetAttribute(layouts[i], CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)));
            cublasCheck(cublasLtMatrixLayoutSetAttribute(layouts[i], CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &strides[i],
                                                         sizeof(int64_t)));
        }
    }
}

static inline void gemm_plan_destroy(GemmPlan *p) {
    cublasCheck(cublasLtMatrixLayoutDestroy(p->la));
    cublasCheck(cublasLtMatrixLayoutDestroy(p->lb));
    cublasCheck(cublasLtMatrixLayoutDestroy(p->ld));
    cublasCheck(cublasLtMatmulDescDestroy(p->desc));
}

// The heuristic's algorithms for the plan, best first, at most `requested` (those it marks usable),
// into results and *usable; returns the heuristic's status, unchecked (NOT_SUPPORTED: it has none)
static inline cublasStatus_t gemm_candidates_status(const GemmPlan *p, cublasLtMatmulHeuristicResult_t *results, int requested,
                                                    int *usable) {
    cublasLtMatmulPreference_t pref;
    cublasCheck(cublasLtMatmulPreferenceCreate(&pref));
    size_t workspace = CUBLASLT_WORKSPACE_BYTES;
    cublasCheck(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof(workspace)));
    cublasCheck(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &p->key.align_a, sizeof(uint32_t)));
    cublasCheck(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &p->key.align_b, sizeof(uint32_t)));
    cublasCheck(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &p->key.align_d, sizeof(uint32_t)));
    cublasCheck(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &p->key.align_d, sizeof(uint32_t)));
    int found = 0;
    const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(cublaslt_handle, p->desc, p->la, p->lb, p->ld, p->ld, pref,
                                                                 requested, results, &found);
    cublasCheck(cublasLtMatmulPreferenceDestroy(pref));
    *usable = 0;
    for (int i = 0; status == CUBLAS_STATUS_SUCCESS && i < found; i++) {
        if (results[i].state == CUBLAS_STATUS_SUCCESS) { results[(*usable)++] = results[i]; }
    }
    return status;
}

// gemm_candidates_status's usable count; a status other than success or NOT_SUPPORTED (none for the
// configuration) stops the run
static inline int gemm_candidates(const GemmPlan *p, cublasLtMatmulHeuristicResult_t *results, int requested) {
    int usable = 0;
    const cublasStatus_t status = gemm_candidates_status(p, results, requested, &usable);
    if (status != CUBLAS_STATUS_NOT_SUPPORTED) { cublasCheck(status); }
    return usable;
}

/*
 * LLMC_TEST_GEMM_NO_CLUSTER=1, a test hook for compute-sanitizer's racecheck: every GEMM takes an
 * algorithm without a thread-block cluster. On an H200 (2026-11-27) racecheck stopped with
 * "Internal Sanitizer Error" in the first cuBLASLt kernel, one with a cluster of 2x4x1, before any
 * of our kernels ran, although racecheck follows only ours. The heuristic's candidates with a
 * cluster are offered at 1x1x1 where cuBLASLt's check accepts that, else left out. A choice that
 * -mt 1 reads from -o's file is taken as it is.
 */
static inline int gemm_no_cluster(void) {
    return env_digit("LLMC_TEST_GEMM_NO_CLUSTER", 1, "expected 0 or 1 (a test hook; unset it)", 0);
}

// whether cuBLASLt's check accepts `algo` for the plan within our workspace: for an algorithm not
// from the heuristic's answer for this plan (read from -mt 1's file, or changed here)
static inline int gemm_algo_accepted(const GemmPlan *p, const cublasLtMatmulAlgo_t *algo) {
    cublasLtMatmulHeuristicResult_t check;
    return cublasLtMatmulAlgoCheck(cublaslt_handle, p->desc, p->la, p->lb, p->ld, p->ld, algo, &check) ==
               CUBLAS_STATUS_SUCCESS && check.workspaceSize <= CUBLASLT_WORKSPACE_BYTES;
}

// the candidates without a cluster (see gemm_no_cluster), in their order; returns how many
static inline int gemm_unclustered(const GemmPlan *p, cublasLtMatmulHeuristicResult_t *cands, int count) {
    int kept = 0;
    for (int i = 0; i < count; i++) {
        cublasLtMatmulAlgo_t algo = cands[i].algo;
        uint16_t shape = 0;
        size_t written = 0;
        cublasCheck(cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, &shape, sizeof(shape),
                                                         &written));
        if (shape != CUBLASLT_CLUSTER_SHAPE_1x1x1) {
            shape = CUBLASLT_CLUSTER_SHAPE_1x1x1;
            cublasCheck(cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, &shape, sizeof(shape)));
            if (!gemm_algo_accepted(p, &algo)) { continue; }
        }
        cands[kept] = cands[i];
        cands[kept++].algo = algo;
    }
    return kept;
}

// the GEMM with `algo`, its result into d (g->d, or a stand-in of the same shape); the status, unchecked
static inline cublasStatus_t gemm_launch(const Gemm *g, const GemmPlan *p, const cublasLtMatmulAlgo_t *algo, floatX *d,
                                         cudaStream_t stream) {
    return cublasLtMatmul(cublaslt_handle, p->desc, &g->alpha, g->a, p->la, g->b, p->lb, &g->beta, d, p->ld, d, p->ld, algo,
                          cublaslt_workspace, CUBLASLT_WORKSPACE_BYTES, stream);
}

// one call's time with algo: the mean of MATMUL_TUNE_REPS calls after one to warm up; -1 where it does not run
static inline float gemm_time(const Gemm *g, const GemmPlan *p, const cublasLtMatmulAlgo_t *algo, floatX *target,
                              cudaEvent_t start, cudaEvent_t stop, cudaStream_t stream) {
    if (gemm_launch(g, p, algo, target, stream) != CUBLAS_STATUS_SUCCESS) { return -1.0f; }
    cudaCheck(cudaEventRecord(start, stream));
    for (int r = 0; r < MATMUL_TUNE_REPS; r++) { cublasCheck(gemm_launch(g, p, algo, target, stream)); }
    cudaCheck(cudaEventRecord(stop, stream));
    cudaCheck(cudaEventSynchronize(stop));
    float ms = 0.0f;
    cudaCheck(cudaEventElapsedTime(&ms, start, stop));
    return ms / MATMUL_TUNE_REPS;
}

static inline float median3(float a, float b, float c) { return fmaxf(fminf(a, b), fminf(fmaxf(a, b), c)); }

/*
 * -mt 1 (matmul_tune): the fastest of the heuristic's candidates, each timed once (gemm_time) on
 * the call's own operands. The least of several noisy timings is biased low, and a GPU at its power
 * cap may run a short burst faster than the sustained work of a step (on the H200 the choices
 * promised 7.5% less matmul time and a step gained nothing: dev/bench/RESULTS.md); so the winner
 * is timed again against the first, MATMUL_TUNE_ROUNDS times in alternating order, and replaces it
 * only if the medians show it MATMUL_TUNE_MIN_GAIN faster. A GEMM that overwrites d (beta = 0) runs
 * into d and aux, which the real call then writes again; one that accumulates runs into a scratch
 * allocation of d's size, so the timing leaves d as it was. Where the scratch cannot be allocated,
 * or no candidate runs, the heuristic's first is kept. Returns the index; how it went goes into
 * *entry (the second timing's figures where there was one).
 */
static inline int gemm_fastest(const Gemm *g, const GemmPlan *p, const cublasLtMatmulHeuristicResult_t *cands, int count,
                               MatmulAlgoEntry *entry, cudaStream_t stream) {
    floatX *target = g->d;
    void *scratch = NULL;
    if (g->beta != 0.0f) {
        const size_t elems = (size_t)(g->batch_count - 1) * (g->batch_count > 1 ? g->stride_d : 0) + (size_t)g->m * g->n;
        if (cudaMalloc(&scratch, elems * sizeof(floatX)) != cudaSuccess) {
            (void)cudaGetLastError();
            entry->tuned = -1;
            return 0;
        }
        cudaCheck(cudaMemsetAsync(scratch, 0, elems * sizeof(floatX), stream));
        target = (floatX *)scratch;
    }
    cudaEvent_t start, stop;
    cudaCheck(cudaEventCreate(&start));
    cudaCheck(cudaEventCreate(&stop));
    int best = -1;
    float best_ms = 0.0f, first_ms = -1.0f;
    for (int i = 0; i < count; i++) {
        const float ms = gemm_time(g, p, &cands[i].algo, target, start, stop, stream);
        if (ms < 0.0f) { continue; }
        if (i == 0) { first_ms = ms; }
        if (best < 0 || ms < best_ms) { best = i; best_ms = ms; }
    }
    if (best > 0 && first_ms >= 0.0f) {  // the second timing: first and winner alternately
        const cublasLtMatmulAlgo_t *pair[2] = {&cands[0].algo, &cands[best].algo};
        float t[2][MATMUL_TUNE_ROUNDS];
        int ran = 1;  // both ran in every round (else the first timing's verdict stands)
        for (int r = 0; r < MATMUL_TUNE_ROUNDS; r++) {
            for (int j = 0; j < 2; j++) {
                const int which = (j + r) % 2;  // the first leads in even rounds, the winner in odd ones
                t[which][r] = gemm_time(g, p, pair[which], target, start, stop, stream);
                ran &= t[which][r] >= 0.0f;
            }
        }
        static_assert(MATMUL_TUNE_ROUNDS == 3, "the medians below take 3 rounds");
        if (ran) {
            first_ms = median3(t[0][0], t[0][1], t[0][2]);
            best_ms = median3(t[1][0], t[1][1], t[1][2]);
            if (!(best_ms < (1.0f - MATMUL_TUNE_MIN_GAIN) * first_ms)) {
                best = 0;
                best_ms = first_ms;
                matmul_tune_unconfirmed++;
            }
        }
    }
    cudaCheck(cudaEventDestroy(start));
    cudaCheck(cudaEventDestroy(stop));
    if (scratch) { cudaCheck(cudaFree(scratch)); }
    if (best < 0) {  // no candidate could run: the real call with the first says why
        entry->tuned = -1;
        return 0;
    }
    entry->tuned = 1;
    entry->first_ms = first_ms >= 0.0f ? first_ms : best_ms;  // a first that could not run counts as the chosen
    entry->chosen_ms = best_ms;
    return best;
}

// -mt 1: the choice an earlier run made for the plan's key, if the file held one and cuBLASLt's
// check accepts it for this plan, into *entry (the key's call count kept); else 0
static inline int matmul_algo_from_file(const GemmPlan *p, MatmulAlgoEntry *entry) {
    for (int i = 0; i < matmul_algo_read_count; i++) {
        const MatmulAlgoEntry *r = &matmul_algo_read[i];
        if (memcmp(&r->key, &p->key, sizeof(p->key)) != 0) { continue; }
        if (!gemm_algo_accepted(p, &r->algo)) {
            matmul_algo_rejected++;
            return 0;
        }
        const long long calls = entry->calls;
        *entry = *r;
        entry->calls = calls;
        return 1;
    }
    return 0;
}

// a new key's entry into the cache (where it is full, the key chooses again at each call)
static inline void matmul_algo_remember(const MatmulAlgoEntry *e) {
    if (matmul_algo_cache_count < MATMUL_ALGO_CACHE_SIZE) { matmul_algo_cache[matmul_algo_cache_count++] = *e; }
}

// the algorithm for the GEMM: from the cache, or chosen once for its key (the heuristic's first,
// or with -mt 1 the fastest of its candidates) and cached; *held receives it. Returns 0 where
// cuBLASLt has none for a GEMM with a bias gradient (also cached), and stops the run for any other.
static inline int gemm_algo(const Gemm *g, const GemmPlan *p, cublasLtMatmulAlgo_t *held, cudaStream_t stream) {
    MatmulAlgoEntry *cached = matmul_algo_cached(&p->key);
    if (cached) {
        *held = cached->algo;
        cached->calls++;
        return !cached->none;
    }
    MatmulAlgoEntry entry;
    memset(&entry, 0, sizeof(entry));
    entry.key = p->key;
    entry.calls = 1;
    if (matmul_tune && matmul_algo_from_file(p, &entry)) {  // an earlier run's choice: no timing
        *held = entry.algo;
        matmul_algo_remember(&entry);
        return 1;
    }
    cublasLtMatmulHeuristicResult_t cands[MATMUL_TUNE_CANDIDATES];
    const int no_cluster = gemm_no_cluster();
    int count = gemm_candidates(p, cands, matmul_tune || no_cluster ? MATMUL_TUNE_CANDIDATES : 1);
    if (no_cluster) { count = gemm_unclustered(p, cands, count); }
    if (count == 0 && g->bias_grad) {
        entry.none = 1;
        matmul_algo_remember(&entry);
        return 0;
    }
    if (count == 0) {
        llmc_die("cuBLASLt has no algorithm for m = %d, n = %d, k = %d, transa = %d, transb = %d, batch = %d, "
                 "epilogue = %d%s", g->m, g->n, g->k, g->transa, g->transb, g->batch_count, p->key.epilogue,
                 no_cluster ? " without a thread-block cluster (LLMC_TEST_GEMM_NO_CLUSTER=1: unset it)"
                            : "; the GPU may be unsupported (bf16 matmuls need sm_80 or newer)");
    }
    entry.chosen = matmul_tune && count > 1 ? gemm_fastest(g, p, cands, count, &entry, stream) : 0;
    entry.algo = cands[entry.chosen].algo;
    matmul_algo_unsaved |= entry.tuned == 1;
    *held = entry.algo;
    matmul_algo_remember(&entry);
    return 1;
}

// run the GEMM on `stream`; returns 0, having run nothing, where cuBLASLt has no algorithm for a GEMM
// with a bias gradient, or offers one that it then refuses to run (the key is then cached as having
// none). Uses the shared workspace, so calls on different streams must not overlap in time.
static inline int gemm_run(const Gemm *g, cudaStream_t stream) {
    GemmPlan p;
    gemm_plan_create(&p, g);
    cublasLtMatmulAlgo_t algo;
    int ran = gemm_algo(g, &p, &algo, stream);
    if (ran) {
        const cublasStatus_t status = gemm_launch(g, &p, &algo, g->d, stream);
        if (status != CUBLAS_STATUS_SUCCESS && g->bias_grad) {  // refused before it ran: the caller's other way
            MatmulAlgoEntry *cached = matmul_algo_cached(&p.key);
            if (cached) { cached->none = 1; }
            ran = 0;
        } else {
            cublasCheck(status);
        }
    }
    gemm_plan_destroy(&p);
    return ran;
}

// gemm_run with the fields of Gemm as arguments, in its order
static inline void matmul_cublaslt(floatX *d, const floatX *a, const floatX *b, const floatX *bias, int m, int n, int k,
                                   int transa, int transb, float alpha, float beta, int batch_count, size_t stride_a,
                                   size_t stride_b, size_t stride_d, MatmulGelu gelu, floatX *aux, cudaStream_t stream) {
    const Gemm g = {d, a, b, bias, aux, m, n, k, transa, transb, batch_count, alpha, beta, stride_a, stride_b, stride_d, gelu, NULL};
    gemm_run(&g, stream);
}

#endif  // LLMC_CUBLAS_COMMON_CUH
