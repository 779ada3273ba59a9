/*
 * cuBLASLt for every matmul of the model: one handle, one 32 MiB workspace, the cublasCheck
 * wrapper, and matmul_cublaslt(), a general bf16 GEMM with the fused epilogues the model uses
 * (bias, GELU with its pre-activation saved, GELU backward). llmc/cuda/matmul.cuh maps the model's
 * row-major layers onto it.
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
 *   within a run.
 */
#ifndef LLMC_CUBLAS_COMMON_CUH
#define LLMC_CUBLAS_COMMON_CUH

#include <cublasLt.h>
#include <cublas_v2.h>
#include "cuda_common.cuh"

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
    cudaCheck(cudaMalloc(&cublaslt_workspace, CUBLASLT_WORKSPACE_BYTES));
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
} MatmulAlgoEntry;

#define MATMUL_ALGO_CACHE_SIZE 256
static MatmulAlgoEntry matmul_algo_cache[MATMUL_ALGO_CACHE_SIZE];
static int matmul_algo_cache_count = 0;

/*
 * d[b] (m x n, column-major, ld m) = alpha * op(A[b]) op(B[b]) + beta * d[b], for b < batch_count,
 * with the epilogue given by `gelu` and `bias`:
 *   op(A) is m x k: A is stored (k x m, ld k) when transa, else (m x k, ld m);
 *   op(B) is k x n: B is stored (n x k, ld n) when transb, else (k x n, ld k);
 *   bias (m) or NULL: added to every column before the GELU (not with MATMUL_GELU_BACKWARD);
 *   aux (m x n, ld m): written by MATMUL_GELU_FORWARD, read by MATMUL_GELU_BACKWARD, else NULL;
 *   stride_*: elements between consecutive batch matrices (aux uses stride_d).
 * beta = 0 overwrites d; beta = 1 accumulates into it (d is also the C matrix).
 * Requires every pointer, leading dimension and stride to be 16-byte aligned (tensor-core paths).
 * Uses the shared workspace, so calls on different streams must not overlap in time.
 */
static inline void matmul_cublaslt(floatX *d, const floatX *a, const floatX *b, const floatX *bias, int m, int n, int k,
                                   int transa, int transb, float alpha, float beta, int batch_count, size_t stride_a,
                                   size_t stride_b, size_t stride_d, MatmulGelu gelu, floatX *aux, cudaStream_t stream) {
    cudaRequire(cublaslt_handle != NULL, "cublas_init() was not called");
    cudaRequire(m > 0 && n > 0 && k > 0 && batch_count > 0, "m = %d, n = %d, k = %d, batch = %d", m, n, k, batch_count);
    cudaRequire((gelu == MATMUL_PLAIN) == (aux == NULL), "aux must be given exactly with a GELU epilogue");
    cudaRequire(gelu != MATMUL_GELU_BACKWARD || bias == NULL, "the GELU-backward epilogue takes no bias");
    cudaRequire(gelu == MATMUL_PLAIN || m % 8 == 0, "m = %d: the GELU aux leading dimension must be a multiple of 8", m);
    const int lda = transa ? k : m, ldb = transb ? n : k, ldd = m;
    const size_t e = sizeof(floatX);
    const size_t sa = batch_count > 1 ? stride_a * e : 0, sb = batch_count > 1 ? stride_b * e : 0,
                 sd = batch_count > 1 ? stride_d * e : 0;

    MatmulAlgoKey key;
    memset(&key, 0, sizeof(key));  // padding too: keys are compared with memcmp
    key.m = m; key.n = n; key.k = k; key.transa = transa; key.transb = transb; key.batch = batch_count;
    key.accumulate = beta != 0.0f;
    key.stride_a = (long long)sa; key.stride_b = (long long)sb; key.stride_d = (long long)sd;
    key.align_a = matmul_alignment(a, lda * e, sa);
    key.align_b = matmul_alignment(b, ldb * e, sb);
    key.align_d = matmul_alignment(d, ldd * e, sd);
    key.align_bias = bias ? matmul_alignment(bias, 0, 0) : 0;
    key.align_aux = aux ? matmul_alignment(aux, ldd * e, sd) : 0;
    cudaRequire(key.align_a >= 16 && key.align_b >= 16 && key.align_d >= 16 && (bias == NULL || key.align_bias >= 16) &&
                    (aux == NULL || key.align_aux >= 16),
                "pointers, leading dimensions (m = %d, n = %d, k = %d) and strides must be 16-byte aligned", m, n, k);

    cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
    if (gelu == MATMUL_GELU_FORWARD) {
        epilogue = bias ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX;
    } else if (gelu == MATMUL_GELU_BACKWARD) {
        epilogue = CUBLASLT_EPILOGUE_DGELU;
    } else if (bias) {
        epilogue = CUBLASLT_EPILOGUE_BIAS;
    }
    key.epilogue = (int)epilogue;

    // the operation: fp32 compute and scale type, transposes, epilogue and its pointers
    cublasLtMatmulDesc_t desc;
    cublasCheck(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasOperation_t opa = transa ? CUBLAS_OP_T : CUBLAS_OP_N, opb = transb ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasCheck(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof(opa)));
    cublasCheck(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof(opb)));
    cublasCheck(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue)));
    if (bias) {
        cudaDataType_t bias_type = CUDA_R_16BF;
        cublasCheck(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof(bias_type)));
        cublasCheck(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
    }
    if (aux) {
        cudaDataType_t aux_type = CUDA_R_16BF;
        int64_t aux_ld = ldd, aux_stride = batch_count > 1 ? (int64_t)stride_d : 0;
        cublasCheck(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE, &aux_type, sizeof(aux_type)));
        cublasCheck(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof(aux)));
        cublasCheck(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &aux_ld, sizeof(aux_ld)));
        if (batch_count > 1) {
            cublasCheck(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE, &aux_stride,
                                                       sizeof(aux_stride)));
        }
    }

    // the matrices as stored: rows x cols of the stored (not transposed) array, column-major
    cublasLtMatrixLayout_t la, lb, ld;
    cublasCheck(cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, transa ? k : m, transa ? m : k, lda));
    cublasCheck(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, transb ? n : k, transb ? k : n, ldb));
    cublasCheck(cublasLtMatrixLayoutCreate(&ld, CUDA_R_16BF, m, n, ldd));
    if (batch_count > 1) {
        int32_t count = batch_count;
        int64_t sta = (int64_t)stride_a, stb = (int64_t)stride_b, std_ = (int64_t)stride_d;
        cublasCheck(cublasLtMatrixLayoutSetAttribute(la, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)));
        cublasCheck(cublasLtMatrixLayoutSetAttribute(lb, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)));
        cublasCheck(cublasLtMatrixLayoutSetAttribute(ld, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)));
        cublasCheck(cublasLtMatrixLayoutSetAttribute(la, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &sta, sizeof(sta)));
        cublasCheck(cublasLtMatrixLayoutSetAttribute(lb, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stb, sizeof(stb)));
        cublasCheck(cublasLtMatrixLayoutSetAttribute(ld, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &std_, sizeof(std_)));
    }

    // the algorithm: from the cache, or once from the heuristic for this key
    const cublasLtMatmulAlgo_t *algo = NULL;
    for (int i = 0; i < matmul_algo_cache_count; i++) {
        if (memcmp(&matmul_algo_cache[i].key, &key, sizeof(key)) == 0) { algo = &matmul_algo_cache[i].algo; break; }
    }
    cublasLtMatmulHeuristicResult_t heuristic;
    if (algo == NULL) {
        cublasLtMatmulPreference_t pref;
        cublasCheck(cublasLtMatmulPreferenceCreate(&pref));
        size_t workspace = CUBLASLT_WORKSPACE_BYTES;
        cublasCheck(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof(workspace)));
        cublasCheck(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &key.align_a, sizeof(uint32_t)));
        cublasCheck(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &key.align_b, sizeof(uint32_t)));
        cublasCheck(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &key.align_d, sizeof(uint32_t)));
        cublasCheck(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &key.align_d, sizeof(uint32_t)));
        int found = 0;
        cublasCheck(cublasLtMatmulAlgoGetHeuristic(cublaslt_handle, desc, la, lb, ld, ld, pref, 1, &heuristic, &found));
        cublasCheck(cublasLtMatmulPreferenceDestroy(pref));
        if (found == 0 || heuristic.state != CUBLAS_STATUS_SUCCESS) {
            llmc_die("cuBLASLt has no algorithm for m = %d, n = %d, k = %d, transa = %d, transb = %d, batch = %d, "
                     "epilogue = %d; the GPU may be unsupported (bf16 matmuls need sm_80 or newer)",
                     m, n, k, transa, transb, batch_count, (int)epilogue);
        }
        algo = &heuristic.algo;
        if (matmul_algo_cache_count < MATMUL_ALGO_CACHE_SIZE) {
            matmul_algo_cache[matmul_algo_cache_count].key = key;
            matmul_algo_cache[matmul_algo_cache_count].algo = heuristic.algo;
            matmul_algo_cache_count++;
        }
    }

    cublasCheck(cublasLtMatmul(cublaslt_handle, desc, &alpha, a, la, b, lb, &beta, d, ld, d, ld, algo, cublaslt_workspace,
                               CUBLASLT_WORKSPACE_BYTES, stream));

    cublasCheck(cublasLtMatrixLayoutDestroy(la));
    cublasCheck(cublasLtMatrixLayoutDestroy(lb));
    cublasCheck(cublasLtMatrixLayoutDestroy(ld));
    cublasCheck(cublasLtMatmulDescDestroy(desc));
}

#endif  // LLMC_CUBLAS_COMMON_CUH
