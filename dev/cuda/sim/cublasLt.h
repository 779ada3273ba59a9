/*
 * Host simulator, cuBLASLt: a stand-in for <cublasLt.h> that implements cublasLtMatmul's documented
 * semantics on the CPU, written from the cuBLASLt documentation (not from our callers), so that the
 * row-major -> column-major mapping of llmc/cuda/matmul.cuh and the epilogue setup of
 * llmc/cuda/cublas_common.cuh are checked against the contract:
 *   D = alpha * op(A) op(B) + beta * C, column-major, op(X) = X or X^T per CUBLASLT_MATMUL_DESC_TRANS*;
 *   A's layout is (m x k) or, transposed, (k x m); B's (k x n) or (n x k); C and D (m x n);
 *   CUBLASLT_EPILOGUE_BIAS: bias (length m, D's rows) added to every column;
 *   CUBLASLT_EPILOGUE_GELU_AUX(_BIAS): aux = the (biased) product, D = GELU(aux), aux has
 *     CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD >= m, divisible by 8;
 *   CUBLASLT_EPILOGUE_DGELU: D = product * GELU'(aux), aux as above;
 *   CUBLASLT_EPILOGUE_BGRADB: the bias pointer (length n, D's columns, type D's) receives the sums
 *     of op(B) over the GEMM's k dimension; one batch, alpha 1 (what alpha would do to the sums is
 *     not documented);
 *   strided batches per layout (CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT / STRIDED_BATCH_OFFSET).
 * Every attribute set must have the documented size and type; pointers must meet the alignment
 * the heuristic was asked for (the MIN_ALIGNMENT preferences, recorded in the returned algo).
 * The product is summed in double and rounded once to bf16 (the GPU sums in fp32). The heuristic
 * answers up to 3 candidates, the first the slowest (matmul_tune's timing then has one to find;
 * SIM_LT_BURST=1 makes the fastest one fast only in a first burst per shape).
 * GELU is the tanh form.
 */
#ifndef SIM_CUBLASLT_H
#define SIM_CUBLASLT_H

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "cuda_bf16.h"
#include "cuda_runtime.h"

typedef enum {
    CUBLAS_STATUS_SUCCESS = 0,
    CUBLAS_STATUS_NOT_INITIALIZED = 1,
    CUBLAS_STATUS_INVALID_VALUE = 7,
    CUBLAS_STATUS_EXECUTION_FAILED = 13,
    CUBLAS_STATUS_NOT_SUPPORTED = 15,
} cublasStatus_t;
typedef enum { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1 } cublasOperation_t;
typedef enum { CUBLAS_COMPUTE_32F = 68 } cublasComputeType_t;
typedef enum {
    CUBLASLT_EPILOGUE_DEFAULT = 1,
    CUBLASLT_EPILOGUE_BIAS = 4,
    CUBLASLT_EPILOGUE_GELU = 32,
    CUBLASLT_EPILOGUE_GELU_BIAS = 36,
    CUBLASLT_EPILOGUE_GELU_AUX = 160,
    CUBLASLT_EPILOGUE_GELU_AUX_BIAS = 164,
    CUBLASLT_EPILOGUE_DGELU = 192,
    CUBLASLT_EPILOGUE_DGELU_BGRAD = 208,
    CUBLASLT_EPILOGUE_BGRADA = 256,
    CUBLASLT_EPILOGUE_BGRADB = 512,
} cublasLtEpilogue_t;
typedef enum {
    CUBLASLT_MATMUL_DESC_TRANSA = 3,
    CUBLASLT_MATMUL_DESC_TRANSB = 4,
    CUBLASLT_MATMUL_DESC_EPILOGUE = 7,
    CUBLASLT_MATMUL_DESC_BIAS_POINTER = 8,
    CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER = 11,
    CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD = 12,
    CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE = 13,
    CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE = 22,
    CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE = 26,
} cublasLtMatmulDescAttributes_t;
typedef enum {
    CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT = 5,
    CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET = 6,
} cublasLtMatrixLayoutAttribute_t;
typedef enum {
    CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES = 1,
    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES = 5,
    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES = 6,
    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES = 7,
    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES = 8,
} cublasLtMatmulPreferenceAttributes_t;

typedef enum { CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID = 8 } cublasLtMatmulAlgoConfigAttributes_t;
typedef enum { CUBLASLT_CLUSTER_SHAPE_AUTO = 0, CUBLASLT_CLUSTER_SHAPE_1x1x1 = 2, CUBLASLT_CLUSTER_SHAPE_2x1x1 = 3 } cublasLtClusterShape_t;

typedef struct {
    uint64_t data[8];
} cublasLtMatmulAlgo_t;
typedef struct {
    cublasLtMatmulAlgo_t algo;
    size_t workspaceSize;
    cublasStatus_t state;
    float wavesCount;
    int reserved[4];
} cublasLtMatmulHeuristicResult_t;

struct SimLtHandle { int magic; };
struct SimLtDesc {
    int compute, scale;
    int32_t transa = CUBLAS_OP_N, transb = CUBLAS_OP_N;
    uint32_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
    const void *bias = NULL, *aux = NULL;
    int64_t aux_ld = 0, aux_stride = 0;
    int32_t aux_type = -1, bias_type = -1;
};
struct SimLtLayout {
    int type;
    uint64_t rows, cols;
    int64_t ld;
    int32_t batch = 1;
    int64_t stride = 0;
};
struct SimLtPref {
    uint64_t workspace = 0;
    uint32_t align[4] = {256, 256, 256, 256};
};
typedef SimLtHandle *cublasLtHandle_t;
typedef SimLtDesc *cublasLtMatmulDesc_t;
typedef SimLtLayout *cublasLtMatrixLayout_t;
typedef SimLtPref *cublasLtMatmulPreference_t;

static inline const char *cublasGetStatusName(cublasStatus_t s) {
    switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    default: return "CUBLAS_STATUS_NOT_SUPPORTED";
    }
}
static inline const char *cublasGetStatusString(cublasStatus_t s) { return cublasGetStatusName(s); }

static inline cublasStatus_t sim_lt_fail(const char *what) {
    printf("  SIM cuBLASLt: %s\n", what);
    sim::errors++;
    return CUBLAS_STATUS_INVALID_VALUE;
}

static inline cublasStatus_t cublasLtCreate(cublasLtHandle_t *h) { *h = new SimLtHandle{1}; return CUBLAS_STATUS_SUCCESS; }
static inline cublasStatus_t cublasLtDestroy(cublasLtHandle_t h) { delete h; return CUBLAS_STATUS_SUCCESS; }

static inline cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *d, cublasComputeType_t compute, cudaDataType_t scale) {
    if (compute != CUBLAS_COMPUTE_32F || scale != CUDA_R_32F) { return sim_lt_fail("only CUBLAS_COMPUTE_32F with CUDA_R_32F scale is simulated"); }
    *d = new SimLtDesc();
    (*d)->compute = compute;
    (*d)->scale = scale;
    return CUBLAS_STATUS_SUCCESS;
}
static inline cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t d) { delete d; return CUBLAS_STATUS_SUCCESS; }

// copies an attribute whose documented type has `expect` bytes
template <class T>
static inline cublasStatus_t sim_lt_attr(T *dst, const void *buf, size_t size, const char *name) {
    if (size != sizeof(T)) {
        char msg[160];
        snprintf(msg, sizeof(msg), "attribute %s set with %zu bytes, documented type has %zu", name, size, sizeof(T));
        return sim_lt_fail(msg);
    }
    memcpy(dst, buf, size);
    return CUBLAS_STATUS_SUCCESS;
}

static inline cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t a,
                                                            const void *buf, size_t size) {
    switch (a) {
    case CUBLASLT_MATMUL_DESC_TRANSA: return sim_lt_attr(&d->transa, buf, size, "TRANSA (int32)");
    case CUBLASLT_MATMUL_DESC_TRANSB: return sim_lt_attr(&d->transb, buf, size, "TRANSB (int32)");
    case CUBLASLT_MATMUL_DESC_EPILOGUE: return sim_lt_attr(&d->epilogue, buf, size, "EPILOGUE (uint32)");
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER: return sim_lt_attr(&d->bias, buf, size, "BIAS_POINTER (pointer)");
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER: return sim_lt_attr(&d->aux, buf, size, "EPILOGUE_AUX_POINTER (pointer)");
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD: return sim_lt_attr(&d->aux_ld, buf, size, "EPILOGUE_AUX_LD (int64)");
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE: return sim_lt_attr(&d->aux_stride, buf, size, "EPILOGUE_AUX_BATCH_STRIDE (int64)");
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE: return sim_lt_attr(&d->aux_type, buf, size, "EPILOGUE_AUX_DATA_TYPE (int32)");
    case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE: return sim_lt_attr(&d->bias_type, buf, size, "BIAS_DATA_TYPE (int32)");
    }
    return sim_lt_fail("unknown matmul descriptor attribute");
}

static inline cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *l, cudaDataType_t type, uint64_t rows,
                                                        uint64_t cols, int64_t ld) {
    if (ld < (int64_t)rows) { return sim_lt_fail("layout leading dimension smaller than its rows"); }
    *l = new SimLtLayout();
    (*l)->type = type;
    (*l)->rows = rows;
    (*l)->cols = cols;
    (*l)->ld = ld;
    return CUBLAS_STATUS_SUCCESS;
}
static inline cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t l) { delete l; return CUBLAS_STATUS_SUCCESS; }
static inline cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t l, cublasLtMatrixLayoutAttribute_t a,
                                                              const void *buf, size_t size) {
    switch (a) {
    case CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT: return sim_lt_attr(&l->batch, buf, size, "BATCH_COUNT (int32)");
    case CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET: return sim_lt_attr(&l->stride, buf, size, "STRIDED_BATCH_OFFSET (int64)");
    }
    return sim_lt_fail("unknown layout attribute");
}

static inline cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *p) { *p = new SimLtPref(); return CUBLAS_STATUS_SUCCESS; }
static inline cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t p) { delete p; return CUBLAS_STATUS_SUCCESS; }
static inline cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t p,
                                                                  cublasLtMatmulPreferenceAttributes_t a, const void *buf,
                                                                  size_t size) {
    switch (a) {
    case CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES: return sim_lt_attr(&p->workspace, buf, size, "MAX_WORKSPACE_BYTES (uint64)");
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES: return sim_lt_attr(&p->align[0], buf, size, "MIN_ALIGNMENT_A_BYTES (uint32)");
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES: return sim_lt_attr(&p->align[1], buf, size, "MIN_ALIGNMENT_B_BYTES (uint32)");
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES: return sim_lt_attr(&p->align[2], buf, size, "MIN_ALIGNMENT_C_BYTES (uint32)");
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES: return sim_lt_attr(&p->align[3], buf, size, "MIN_ALIGNMENT_D_BYTES (uint32)");
    }
    return sim_lt_fail("unknown preference attribute");
}

// the shapes a descriptor and its layouts describe; returns NULL or what is inconsistent
static inline const char *sim_lt_shape(const SimLtDesc *d, const SimLtLayout *A, const SimLtLayout *B, const SimLtLayout *C,
                                       const SimLtLayout *D, uint64_t *m, uint64_t *n, uint64_t *k) {
    if (A->type != CUDA_R_16BF || B->type != CUDA_R_16BF || C->type != CUDA_R_16BF || D->type != CUDA_R_16BF) {
        return "only bf16 A, B, C, D are simulated";
    }
    *m = D->rows;
    *n = D->cols;
    const uint64_t am = d->transa ? A->cols : A->rows, ak = d->transa ? A->rows : A->cols;
    const uint64_t bk = d->transb ? B->cols : B->rows, bn = d->transb ? B->rows : B->cols;
    *k = ak;
    if (am != *m) { return "op(A) rows differ from D rows"; }
    if (bn != *n) { return "op(B) columns differ from D columns"; }
    if (bk != ak) { return "op(A) columns differ from op(B) rows (k)"; }
    if (C->rows != D->rows || C->cols != D->cols || C->ld != D->ld) { return "C and D layouts differ"; }
    if (A->batch != D->batch || B->batch != D->batch || C->batch != D->batch) { return "batch counts differ"; }
    const uint32_t e = d->epilogue;
    if (e != CUBLASLT_EPILOGUE_DEFAULT && e != CUBLASLT_EPILOGUE_BIAS && e != CUBLASLT_EPILOGUE_GELU_AUX &&
        e != CUBLASLT_EPILOGUE_GELU_AUX_BIAS && e != CUBLASLT_EPILOGUE_DGELU && e != CUBLASLT_EPILOGUE_BGRADB) {
        return "epilogue not simulated";
    }
    // the epilogue's vector: a bias it reads, or the bias gradient BGRADB writes
    if (((e & CUBLASLT_EPILOGUE_BIAS) && e != CUBLASLT_EPILOGUE_DGELU) || e == CUBLASLT_EPILOGUE_BGRADB) {
        if (d->bias == NULL) { return "bias (gradient) epilogue without CUBLASLT_MATMUL_DESC_BIAS_POINTER"; }
        if (d->bias_type != -1 && d->bias_type != CUDA_R_16BF) { return "bias (gradient) type is not D's type (bf16)"; }
    }
    if (e == CUBLASLT_EPILOGUE_BGRADB && D->batch != 1) { return "a batched bias gradient is not simulated"; }
    if (e == CUBLASLT_EPILOGUE_GELU_AUX || e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS || e == CUBLASLT_EPILOGUE_DGELU) {
        if (d->aux == NULL) { return "GELU aux epilogue without CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER"; }
        if (d->aux_ld < (int64_t)*m || d->aux_ld % 8 != 0) { return "EPILOGUE_AUX_LD must be >= m and divisible by 8"; }
        if (d->aux_type != -1 && d->aux_type != CUDA_R_16BF) { return "aux type is not D's type (bf16)"; }
        if (D->batch > 1 && (d->aux_stride <= 0 || d->aux_stride % 8 != 0)) { return "batched aux needs a stride divisible by 8"; }
    }
    return NULL;
}

// SIM_CUBLASLT_NO_BGRADB is `mode`
static inline int sim_lt_no_bgradb(const char *mode) {
    const char *v = getenv("SIM_CUBLASLT_NO_BGRADB");
    return v != NULL && strcmp(v, mode) == 0;
}

#define SIM_LT_CANDIDATES 3
#define SIM_LT_CANDIDATE_WAIT_US 5000
// SIM_LT_BURST=1: the last candidate (waiting for nothing) is fast only in a burst, the first
// SIM_LT_BURST_CALLS calls of each shape (one timing of -mt 1's: a warm-up and 5 calls), and slower
// than the first afterwards, as an algorithm whose speed a GPU at its power cap does not sustain
#define SIM_LT_BURST_CALLS 6
static inline int sim_lt_burst(void) {
    const char *v = getenv("SIM_LT_BURST");
    return v != NULL && strcmp(v, "1") == 0;
}
// the candidates' wait step: 4x under SIM_LT_BURST=1 or SIM_LT_WIDE=1, for the tests that need a
// faster candidate to win its timings on a loaded machine too (5 ms went under scheduling noise in
// CI twice, once for each of the two -mt 1 tests); 1x elsewhere, where the first waits in every call
#define SIM_LT_WIDE_FACTOR 4
static inline uint64_t sim_lt_wait_unit(void) {
    const char *wide = getenv("SIM_LT_WIDE");
    const int x4 = sim_lt_burst() || (wide != NULL && strcmp(wide, "1") == 0);
    return (x4 ? SIM_LT_WIDE_FACTOR : 1) * (uint64_t)SIM_LT_CANDIDATE_WAIT_US;
}
static inline uint64_t sim_lt_burst_wait(const SimLtDesc *d, const SimLtLayout *A, const SimLtLayout *B,
                                         const SimLtLayout *D, float beta, const cublasLtMatmulAlgo_t *algo) {
    // the shape as the trainer's GEMM key has it: sizes, transposes, strides, epilogue, beta, alignments
    const uint64_t key[16] = {A->rows, A->cols, B->rows, B->cols, D->rows, D->cols, (uint64_t)A->stride, (uint64_t)B->stride,
                              (uint64_t)D->stride, (uint64_t)D->batch, (uint64_t)d->transa * 2 + (uint64_t)d->transb,
                              d->epilogue, beta != 0.0f, (uint64_t)(uintptr_t)d->bias % 256, algo->data[0] * 512 + algo->data[1],
                              algo->data[2] * 512 + algo->data[3]};
    static uint64_t seen[256][16];
    static int calls[256], nseen = 0;
    if (!sim_lt_burst()) { return 0; }
    int i = 0;
    while (i < nseen && memcmp(seen[i], key, sizeof(key)) != 0) { i++; }
    if (i == nseen) {
        if (nseen == 256) { return 0; }
        memcpy(seen[nseen++], key, sizeof(key));
    }
    return ++calls[i] > SIM_LT_BURST_CALLS ? (uint64_t)SIM_LT_CANDIDATES * sim_lt_wait_unit() : 0;
}

// a candidate's extra time, on the host's clock that the events read (sim/streams.h): slept to a
// deadline, not spun, so that it takes no core from the processes beside it (spun, the -mt 1 runs
// of test_cuda_sim.sh kept a core busy for about a minute)
static inline void sim_lt_wait(uint64_t us) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    const uint64_t ns = (uint64_t)t.tv_nsec + us * 1000;
    t.tv_sec += (time_t)(ns / 1000000000);
    t.tv_nsec = (long)(ns % 1000000000);
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &t, NULL) == EINTR) {}
}

static inline cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t h, cublasLtMatmulDesc_t d, cublasLtMatrixLayout_t A,
                                                            cublasLtMatrixLayout_t B, cublasLtMatrixLayout_t C,
                                                            cublasLtMatrixLayout_t D, cublasLtMatmulPreference_t pref,
                                                            int requested, cublasLtMatmulHeuristicResult_t *results,
                                                            int *returned) {
    if (h == NULL) { return CUBLAS_STATUS_NOT_INITIALIZED; }
    uint64_t m, n, k;
    const char *problem = sim_lt_shape(d, A, B, C, D, &m, &n, &k);
    if (problem) { return sim_lt_fail(problem); }
    if (requested < 1) { return sim_lt_fail("requested algorithm count < 1"); }
    // SIM_CUBLASLT_NO_BGRADB=1: no algorithm for the bias-gradient epilogue, as a cuBLASLt without
    // one answers (CUBLAS_STATUS_NOT_SUPPORTED, none returned), so that the callers' way around it
    // runs; =run: algorithms offered, but cublasLtMatmul refuses them (NOT_SUPPORTED, nothing run)
    if (d->epilogue == CUBLASLT_EPILOGUE_BGRADB && sim_lt_no_bgradb("1")) {
        *returned = 0;
        return CUBLAS_STATUS_NOT_SUPPORTED;
    }
    // up to SIM_LT_CANDIDATES algorithms, all computing the same product; candidate i of c waits
    // (c - 1 - i) * sim_lt_wait_unit() per call, so a choice by timing has a faster one than
    // the first to find (a single answer waits for nothing)
    const int count = requested < SIM_LT_CANDIDATES ? requested : SIM_LT_CANDIDATES;
    memset(results, 0, (size_t)count * sizeof(*results));
    for (int c = 0; c < count; c++) {
        results[c].state = CUBLAS_STATUS_SUCCESS;
        for (int i = 0; i < 4; i++) { results[c].algo.data[i] = pref->align[i]; }  // the alignment the algo may assume
        results[c].algo.data[4] = 0x51u;  // marks a heuristic-made algo
        results[c].algo.data[5] = (uint64_t)(count - 1 - c) * sim_lt_wait_unit();
        // the first with a thread-block cluster, as cuBLASLt's first choice often has on Hopper
        results[c].algo.data[6] = c == 0 ? CUBLASLT_CLUSTER_SHAPE_2x1x1 : CUBLASLT_CLUSTER_SHAPE_1x1x1;
    }
    *returned = count;
    return CUBLAS_STATUS_SUCCESS;
}

// the stand-in's version number (cuBLASLt 13.0.0's encoding); -mt 1's file of choices records it
static inline size_t cublasLtGetVersion(void) { return 130000; }

// whether algo is one the stand-in's heuristic could have made: its mark, a wait of one of its
// candidates (at either wait step: -mt 1's file may come from a run with the other), alignments that are powers of two up to 256 (cublasLtMatmul divides by them)
static inline int sim_lt_algo_valid(const cublasLtMatmulAlgo_t *algo) {
    if (algo == NULL || algo->data[4] != 0x51u || algo->data[5] > (uint64_t)(SIM_LT_CANDIDATES - 1) * SIM_LT_WIDE_FACTOR * SIM_LT_CANDIDATE_WAIT_US ||
        (algo->data[6] != CUBLASLT_CLUSTER_SHAPE_1x1x1 && algo->data[6] != CUBLASLT_CLUSTER_SHAPE_2x1x1)) {
        return 0;
    }
    for (int i = 0; i < 4; i++) {
        const uint64_t a = algo->data[i];
        if (a < 2 || a > 256 || (a & (a - 1)) != 0) { return 0; }
    }
    return 1;
}

// the one configuration attribute the trainer touches, the cluster shape (uint16, in data[6])
static inline cublasStatus_t cublasLtMatmulAlgoConfigGetAttribute(const cublasLtMatmulAlgo_t *algo,
                                                                  cublasLtMatmulAlgoConfigAttributes_t a, void *buf,
                                                                  size_t size, size_t *written) {
    if (a != CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID) { return sim_lt_fail("algo config attribute not simulated"); }
    if (size != sizeof(uint16_t)) { return sim_lt_fail("CLUSTER_SHAPE_ID is a uint16"); }
    const uint16_t v = (uint16_t)algo->data[6];
    memcpy(buf, &v, sizeof(v));
    if (written) { *written = sizeof(v); }
    return CUBLAS_STATUS_SUCCESS;
}
static inline cublasStatus_t cublasLtMatmulAlgoConfigSetAttribute(cublasLtMatmulAlgo_t *algo,
                                                                  cublasLtMatmulAlgoConfigAttributes_t a, const void *buf,
                                                                  size_t size) {
    if (a != CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID) { return sim_lt_fail("algo config attribute not simulated"); }
    if (size != sizeof(uint16_t)) { return sim_lt_fail("CLUSTER_SHAPE_ID is a uint16"); }
    uint16_t v;
    memcpy(&v, buf, sizeof(v));
    algo->data[6] = v;  // cublasLtMatmulAlgoCheck judges the value
    return CUBLAS_STATUS_SUCCESS;
}

// SIM_CUBLASLT_CLUSTER_FAULT=1: a GEMM whose algorithm has a thread-block cluster fails as it runs
// (EXECUTION_FAILED), as under compute-sanitizer's racecheck on an H200 (llmc/cuda/cublas_common.cuh,
// gemm_no_cluster)
static inline int sim_lt_cluster_fault(const cublasLtMatmulAlgo_t *algo) {
    const char *v = getenv("SIM_CUBLASLT_CLUSTER_FAULT");
    return v != NULL && strcmp(v, "1") == 0 && algo->data[6] != CUBLASLT_CLUSTER_SHAPE_1x1x1;
}

// an algorithm from elsewhere (-mt 1's file) for the problem: SUCCESS if the stand-in could have
// made it, quietly INVALID_VALUE otherwise (what cuBLASLt answers for one it cannot run), so that
// a damaged record is refused before cublasLtMatmul divides by its alignments or waits its wait
static inline cublasStatus_t cublasLtMatmulAlgoCheck(cublasLtHandle_t h, cublasLtMatmulDesc_t d, cublasLtMatrixLayout_t A,
                                                     cublasLtMatrixLayout_t B, cublasLtMatrixLayout_t C,
                                                     cublasLtMatrixLayout_t D, const cublasLtMatmulAlgo_t *algo,
                                                     cublasLtMatmulHeuristicResult_t *result) {
    if (h == NULL) { return CUBLAS_STATUS_NOT_INITIALIZED; }
    uint64_t m, n, k;
    const char *problem = sim_lt_shape(d, A, B, C, D, &m, &n, &k);
    if (problem) { return sim_lt_fail(problem); }
    if (!sim_lt_algo_valid(algo)) { return CUBLAS_STATUS_INVALID_VALUE; }
    if (result) {
        memset(result, 0, sizeof(*result));
        result->algo = *algo;
        result->state = CUBLAS_STATUS_SUCCESS;
    }
    return CUBLAS_STATUS_SUCCESS;
}

static inline double sim_lt_gelu(double x) {
    const double s = 0.7978845608028654, u = s * (x + 0.044715 * x * x * x);
    return 0.5 * x * (1.0 + tanh(u));
}
static inline double sim_lt_gelu_grad(double x) {
    const double s = 0.7978845608028654, u = s * (x + 0.044715 * x * x * x), t = tanh(u);
    return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * s * (1.0 + 3.0 * 0.044715 * x * x);
}
static inline double sim_lt_get(const void *base, const SimLtLayout *L, int b, uint64_t r, uint64_t c) {
    const __nv_bfloat16 *p = (const __nv_bfloat16 *)base + (int64_t)b * L->stride + (int64_t)c * L->ld + (int64_t)r;
    return __bfloat162float(*p);
}

// D = epilogue(alpha op(A) op(B) + beta C) of the shapes sim_lt_shape checked
static inline void sim_lt_product(const SimLtDesc *d, float a, const void *A, const SimLtLayout *Al, const void *B,
                                  const SimLtLayout *Bl, float bt, const void *C, const SimLtLayout *Cl, void *D,
                                  const SimLtLayout *Dl, uint64_t m, uint64_t n, uint64_t k) {
    const uint32_t e = d->epilogue;
    if (e == CUBLASLT_EPILOGUE_BGRADB) {  // summed in double, rounded once
        for (uint64_t j = 0; j < n; j++) {
            double sum = 0.0;
            for (uint64_t p = 0; p < k; p++) { sum += d->transb ? sim_lt_get(B, Bl, 0, j, p) : sim_lt_get(B, Bl, 0, p, j); }
            ((__nv_bfloat16 *)d->bias)[j] = __float2bfloat16((float)sum);
        }
    }
    for (int b = 0; b < Dl->batch; b++) {
        for (uint64_t j = 0; j < n; j++) {
            for (uint64_t i = 0; i < m; i++) {
                double acc = 0.0;
                for (uint64_t p = 0; p < k; p++) {
                    const double x = d->transa ? sim_lt_get(A, Al, b, p, i) : sim_lt_get(A, Al, b, i, p);
                    const double y = d->transb ? sim_lt_get(B, Bl, b, j, p) : sim_lt_get(B, Bl, b, p, j);
                    acc += x * y;
                }
                double v = a * acc + (bt != 0.0f ? bt * sim_lt_get(C, Cl, b, i, j) : 0.0);
                if ((e & CUBLASLT_EPILOGUE_BIAS) && e != CUBLASLT_EPILOGUE_DGELU) {
                    v += __bfloat162float(((const __nv_bfloat16 *)d->bias)[i]);
                }
                if (e == CUBLASLT_EPILOGUE_GELU_AUX || e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS || e == CUBLASLT_EPILOGUE_DGELU) {
                    __nv_bfloat16 *aux = (__nv_bfloat16 *)d->aux + (int64_t)b * d->aux_stride + (int64_t)j * d->aux_ld + (int64_t)i;
                    if (e == CUBLASLT_EPILOGUE_DGELU) {
                        v *= sim_lt_gelu_grad(__bfloat162float(*aux));
                    } else {
                        *aux = __float2bfloat16((float)v);
                        v = sim_lt_gelu(v);
                    }
                }
                ((__nv_bfloat16 *)D)[(int64_t)b * Dl->stride + (int64_t)j * Dl->ld + (int64_t)i] = __float2bfloat16((float)v);
            }
        }
    }
}

static inline cublasStatus_t cublasLtMatmul(cublasLtHandle_t h, cublasLtMatmulDesc_t d, const void *alpha, const void *A,
                                            cublasLtMatrixLayout_t Al, const void *B, cublasLtMatrixLayout_t Bl,
                                            const void *beta, const void *C, cublasLtMatrixLayout_t Cl, void *D,
                                            cublasLtMatrixLayout_t Dl, const cublasLtMatmulAlgo_t *algo, void *workspace,
                                            size_t workspace_bytes, cudaStream_t stream) {
    if (h == NULL) { return CUBLAS_STATUS_NOT_INITIALIZED; }
    uint64_t m, n, k;
    const char *problem = sim_lt_shape(d, Al, Bl, Cl, Dl, &m, &n, &k);
    if (problem) { return sim_lt_fail(problem); }
    if (!sim_lt_algo_valid(algo)) { return sim_lt_fail("algo not from cublasLtMatmulAlgoGetHeuristic"); }
    if (d->epilogue == CUBLASLT_EPILOGUE_BGRADB && sim_lt_no_bgradb("run")) { return CUBLAS_STATUS_NOT_SUPPORTED; }
    if (sim_lt_cluster_fault(algo)) { return CUBLAS_STATUS_EXECUTION_FAILED; }
    const void *ptrs[4] = {A, B, C, D};
    for (int i = 0; i < 4; i++) {
        if ((uintptr_t)ptrs[i] % algo->data[i] != 0) { return sim_lt_fail("a matrix pointer is less aligned than the algo assumes"); }
    }
    if (workspace == NULL && workspace_bytes > 0) { return sim_lt_fail("workspace size without a workspace"); }
    // the product runs in stream order (sim/streams.h): it keeps copies of what it reads from the host
    const float a = *(const float *)alpha, bt = *(const float *)beta;
    if (d->epilogue == CUBLASLT_EPILOGUE_BGRADB && a != 1.0f) { return sim_lt_fail("a bias gradient with alpha != 1 is not simulated"); }
    if (d->bias != NULL && (uintptr_t)d->bias % 16 != 0) { return sim_lt_fail("bias (gradient) pointer not 16-byte aligned"); }
    const uint64_t wait_us = algo->data[5] > 0 ? algo->data[5] : sim_lt_burst_wait(d, Al, Bl, Dl, bt, algo);
    sim::enqueue(stream, [=, dd = *d, Al = *Al, Bl = *Bl, Cl = *Cl, Dl = *Dl]() {
        sim_lt_product(&dd, a, A, &Al, B, &Bl, bt, C, &Cl, D, &Dl, m, n, k);
        if (wait_us > 0) { sim_lt_wait(wait_us); }
    });
    return CUBLAS_STATUS_SUCCESS;
}

#endif  // SIM_CUBLASLT_H
