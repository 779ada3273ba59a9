/*
 * AdamW over all parameters in one launch (PyTorch's torch.optim.AdamW semantics):
 *   g = grad * scale
 *   m = beta1 m + (1 - beta1) g,     v = beta2 v + (1 - beta2) g^2
 *   p = p - lr (m / (1 - beta1^t) / (sqrt(v / (1 - beta2^t)) + eps) + wd_i p)
 * with wd_i = weight_decay on the tensors the decay table marks (matmul weights and embeddings),
 * 0 elsewhere. With -opt muon the table marks the blocks' matrices ADAMW_SKIP: Muon updates them
 * (llmc/cuda/muon.cuh) and this kernel leaves them alone. m, v and the fp32 master weights (optional) are fp32; the bf16 parameters are
 * stochastically rounded from the fp32 result with random bits keyed to (seed, element index),
 * so the rounding does not depend on the launch or on how the parameters are sharded.
 *
 * Indexing, made for ZeRO-1: the update covers the flat parameter range [offset, offset + n).
 * params and grads are the FULL flat arrays (element offset + k is touched); m, v and master are
 * the rank's SHARD arrays of n elements (element k belongs to parameter offset + k). On one GPU,
 * offset = 0 and n = the number of parameters, and the two views coincide.
 *
 * The settings (learning rate, betas, eps, weight decay, gradient scale, t, seed) arrive as one
 * OptSettings (llmc/optimizer.h), the struct the training loop filled, and go to the kernel as it is.
 */
#ifndef LLMC_ADAMW_CUH
#define LLMC_ADAMW_CUH

#include "cuda_common.cuh"
#include "../model_io.h"
#include "../muon.h"
#include "../optimizer.h"

#define ADAMW_THREADS 512
#define ADAMW_MAX_RANGES 32

// ----------------------------------------------------------------------------
// host: the weight-decay table (plain C, testable without a GPU)

#define ADAMW_SKIP 2  // a range's decay value for parameters that another optimizer updates (Muon)

typedef struct {
    size_t offset;  // first flat parameter index of the range
    size_t size;    // number of parameters
    int decay;      // 1: weight decay applies; 0: none; ADAMW_SKIP: not updated by AdamW
} AdamWRange;

// passed to the kernel by value: range k is [end[k-1], end[k]) (end[-1] = 0), merged so that
// neighbouring ranges differ in decay
typedef struct {
    int count;
    unsigned long long end[ADAMW_MAX_RANGES];
    int decay[ADAMW_MAX_RANGES];
} AdamWDecayTable;

// Builds the table from ranges that must tile [0, total) in order. Returns NULL or the problem.
static inline const char *adamw_decay_table_init(AdamWDecayTable *table, const AdamWRange *ranges, int count) {
    memset(table, 0, sizeof(*table));
    if (count <= 0) { return "no ranges"; }
    size_t expected = 0;
    for (int i = 0; i < count; i++) {
        if (ranges[i].offset != expected) { return "ranges must be contiguous from offset 0, in order"; }
        if (ranges[i].size == 0) { return "a range is empty"; }
        if (ranges[i].decay < 0 || ranges[i].decay > ADAMW_SKIP) { return "decay must be 0, 1 or ADAMW_SKIP"; }
        expected += ranges[i].size;
        if (table->count > 0 && table->decay[table->count - 1] == ranges[i].decay) {
            table->end[table->count - 1] = expected;  // same decay as the previous range: merge
        } else {
            if (table->count == ADAMW_MAX_RANGES) { return "too many ranges of alternating decay (at most 32)"; }
            table->end[table->count] = expected;
            table->decay[table->count] = ranges[i].decay;
            table->count++;
        }
    }
    return NULL;
}

// the GPT-2 table: the 16 tensors of model_io.h in file order, decayed per gpt2_param_is_decayed;
// with muon, the blocks' matrices (muon_is_matrix_tensor) are ADAMW_SKIP
static inline void adamw_decay_table_gpt2(AdamWDecayTable *table, const GPT2Config *config, int muon) {
    size_t sizes[NUM_PARAMETER_TENSORS];
    gpt2_param_sizes(sizes, config);
    AdamWRange ranges[NUM_PARAMETER_TENSORS];
    size_t offset = 0;
    for (int i = 0; i < NUM_PARAMETER_TENSORS; i++) {
        ranges[i].offset = offset;
        ranges[i].size = sizes[i];
        ranges[i].decay = muon && muon_is_matrix_tensor(i) ? ADAMW_SKIP : gpt2_param_is_decayed(i);
        offset += sizes[i];
    }
    const char *problem = adamw_decay_table_init(table, ranges, NUM_PARAMETER_TENSORS);
    if (problem) { llmc_die("adamw_decay_table_gpt2: %s", problem); }
}

static inline size_t adamw_decay_table_total(const AdamWDecayTable *table) {
    return table->count > 0 ? (size_t)table->end[table->count - 1] : 0;
}

// the decay value of flat parameter index i: 1 decayed, 0 not, ADAMW_SKIP (host and device; i < the table's total)
__host__ __device__ __forceinline__ int adamw_decay_of(const AdamWDecayTable &table, unsigned long long i) {
    int k = 0;
    while (k < table.count - 1 && i >= table.end[k]) { k++; }
    return table.decay[k];
}

// 32-bit stochastic-rounding seed from the caller's 64-bit seed
static inline unsigned int adamw_seed32(unsigned long long seed) {
    return (unsigned int)seed ^ ((unsigned int)(seed >> 32) * 0x9E3779B9u);
}

// ----------------------------------------------------------------------------
// kernel: one thread per parameter

static __global__ void __launch_bounds__(ADAMW_THREADS)
adamw_kernel(floatX *params, float *master, const floatX *grads, float *m, float *v, size_t offset, size_t n,
             AdamWDecayTable table, OptSettings o, float bc1, float bc2, unsigned int seed) {
    const size_t k = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= n) { return; }
    const size_t i = offset + k;
    const int decay = adamw_decay_of(table, i);
    if (decay == ADAMW_SKIP) { return; }
    const float g = __bfloat162float(grads[i]) * o.grad_scale;
    const float mk = o.beta1 * m[k] + (1.0f - o.beta1) * g;
    const float vk = o.beta2 * v[k] + (1.0f - o.beta2) * g * g;
    m[k] = mk;
    v[k] = vk;
    const float p = master ? master[k] : __bfloat162float(params[i]);
    const float wd = decay ? o.weight_decay : 0.0f;
    const float update = (mk / bc1) / (sqrtf(vk / bc2) + o.eps) + wd * p;
    const float p_new = p - o.lr * update;
    if (master) { master[k] = p_new; }
    params[i] = stochastic_round_bf16(p_new, random_u32(seed, (unsigned int)i, (unsigned int)(i >> 32)));
}

// ----------------------------------------------------------------------------
// launcher

/*
 * One AdamW step over the flat parameter range [offset, offset + n) (see the top of the file).
 *   params (total) bf16      element offset+k overwritten with the stochastically rounded update
 *   master (n) fp32 or NULL  with master weights: read and overwritten; without: params are read
 *   grads (total) bf16       read
 *   m, v (n) fp32            read and overwritten (zero before the first step)
 *   table                    decay table over all parameters (adamw_decay_table_gpt2); its
 *                            ADAMW_SKIP ranges are left unchanged
 *   o                        the step's settings: lr, beta1, beta2, eps, weight_decay, grad_scale
 *                            (multiplies the gradients: the clip scale), t (1-based, for the bias
 *                            corrections 1 - beta^t), seed (stochastic rounding: same seed, same rounding)
 * No scratch; no host sync.
 */
static inline void adamw_update(floatX *params, float *master, const floatX *grads, float *m, float *v, size_t offset,
                                size_t n, const AdamWDecayTable *table, const OptSettings *o, cudaStream_t stream) {
    cudaRequire(o->t >= 1, "step t = %d must be at least 1", o->t);
    cudaRequire(offset + n <= adamw_decay_table_total(table), "range [%zu, %zu) exceeds the %zu parameters of the table",
                offset, offset + n, adamw_decay_table_total(table));
    cudaRequire(o->beta1 >= 0.0f && o->beta1 < 1.0f && o->beta2 >= 0.0f && o->beta2 < 1.0f,
                "beta1 = %g, beta2 = %g must be in [0, 1)", o->beta1, o->beta2);
    if (n == 0) { return; }
    const float bc1 = (float)(1.0 - pow((double)o->beta1, (double)o->t));
    const float bc2 = (float)(1.0 - pow((double)o->beta2, (double)o->t));
    adamw_kernel<<<grid_for(n, ADAMW_THREADS), ADAMW_THREADS, 0, stream>>>(params, master, grads, m, v, offset, n, *table,
                                                                          *o, bc1, bc2, adamw_seed32(o->seed));
    cudaCheckLaunch();
}

#endif  // LLMC_ADAMW_CUH
