/*
 * GPT-2 training on NVIDIA GPUs (sm_80 and newer; built for Hopper sm_90a and Ampere sm_80):
 * bf16 parameters, gradients and activations with fp32 master weights and AdamW state, cuBLASLt
 * matmuls with fused bias (and, -ge, GELU) epilogues, fused flash attention, LayerNorm with the residual add
 * fused in, a fused classifier that never stores fp32 logits; data-parallel across processes with
 * NCCL (or host-staged MPI) and optional ZeRO-1. Same flags, files and step line as train_gpt2.c.
 *
 * This file holds the model (memory, forward, backward, update, file I/O) and its Backend; the
 * training loop and all host logic live in the llmc .h files (shared with the CPU trainer), the
 * kernels in the llmc .cuh files behind launchers (there is no kernel launch in this file), the
 * multi-process parts in llmc/cuda/processes.cuh and llmc/cuda/grad_reduce.cuh.
 *
 * Shapes (legend in llmc/model_io.h): B batch, T time, C channels, NH heads, HS = C/NH, L layers,
 * V vocab, Vp padded vocab. Tensors are row-major; per-layer activations are stacked (L, B, T, ...)
 * with the B and T of the call (a call may use less than the allocated maxima).
 * Precision: floatX (bf16) storage everywhere except LayerNorm statistics, the attention
 * log-sum-exp, the losses, the master weights and AdamW's moments (fp32); every matmul and
 * reduction accumulates in fp32. bf16 parameters are stochastically rounded from the fp32 update,
 * seeded by the training loop (so runs are reproducible bit for bit).
 * Gradient convention (as train_gpt2.c): parameter gradients accumulate (+=) over micro-steps;
 * activation gradients are overwritten, except the residual stream's (dresidual), into which the
 * LayerNorm backward adds (llmc/cuda/layernorm.cuh).
 *
 * Memory and recomputation (-r): per token and layer the activations kept for the backward pass
 * take 16C bf16 values (ln1 C, qkv 3C, atty C, residual2 C, ln2 C, fch 4C, fch_gelu 4C, residual3
 * C) plus 16 + 4*NH bytes of fp32 statistics. -r 1 recomputes the GELU output in the backward
 * pass from its saved input (12C), -r 2 also the two LayerNorm outputs (10C); the default, -r auto,
 * the least of 0, 1, 2 that fits the GPU (llmc/plan.h). The rest
 * is per model: params 2 B, grads 2 B, master 4 B, m 4 B, v 4 B per parameter (16 B; with -z 1
 * the 12 B of optimizer state are divided by the ranks), and a (B, T, max(Vp, 4C)) bf16 buffer
 * for the logits that the backward pass reuses. gpt2_plan() adds it all up, row by row (--plan
 * prints it), before anything is allocated, and the allocations are sized by the same functions. GPT-2 1.5B (d48: C 1600, 1.56e9 parameters, 23.2 GiB of parameters, gradients and
 * optimizer state) at T = 1024 needs by that arithmetic 1.60 GiB per sequence with -r 2, 1.88 GiB
 * with -r 1 and 2.46 GiB with -r 0. Measured on an H200 (2026-11-27, dev/bench/RESULTS.md): B = 48
 * with -r 1 allocated 116.6 GiB (the plan: 116.5), B = 64 with -r 2 129.1 GiB (129.1); -b auto
 * with -r 2 takes B = 66-68 there.
 *
 * Attention (-at): our fused kernel (llmc/cuda/attention.cuh, deterministic) or, in builds with cuDNN,
 * cuDNN's fused SDPA (llmc/cuda/cudnn_att.h; its workspace joins the memory plan). Both read qkv and write
 * out and lse in the same layouts. cuDNN builds a graph per shape, so it serves the calls at the built
 * T (training, validation); the shorter ones (sampling, HellaSwag's rows) run our kernel. Generation
 * (--prompt, -s) computes only a growing text's new rows, their attention by attention_forward_rows.
 */
#include <math.h>
#include "llmc/utils.h"
#include "llmc/model_io.h"
#include "llmc/gpt2_views.h"
#include "llmc/args.h"
#include "llmc/processes.h"
#include "llmc/backend.h"
#include "llmc/train_loop.h"
#include "llmc/cuda/cuda_common.cuh"
#include "llmc/cuda/cublas_common.cuh"
#include "llmc/cuda/encoder.cuh"
#include "llmc/cuda/layernorm.cuh"
#include "llmc/cuda/matmul.cuh"
#include "llmc/cuda/gelu.cuh"
#include "llmc/cuda/attention_choice.cuh"  // -at: our kernel or cuDNN's
#include "llmc/cuda/fused_classifier.cuh"
#include "llmc/cuda/adamw.cuh"
#include "llmc/cuda/muon.cuh"
#include "llmc/cuda/global_norm.cuh"
#include "llmc/cuda/processes.cuh"
#include "llmc/cuda/grad_reduce.cuh"
#include "llmc/cuda/gpu_telemetry.cuh"  // -lg: the GPU's clocks, power, temperature (NVML, loaded at run time)
#include <nvtx3/nvToolsExt.h>
#include "llmc/gpu_peak.h"


// ----------------------------------------------------------------------------
// the model

// ParameterTensors, LayerParams, point_parameters, layer_params (llmc/gpt2_views.h). Every tensor
// size is a multiple of C (and C of 8), so every tensor and every layer slice starts 16-byte aligned.
GPT2_DECLARE_VIEWS(floatX)

// activations, sized for the maximum B and T
typedef struct {
    floatX *encoded;    // (B, T, C)
    floatX *ln1;        // (L, B, T, C); one (B, T, C) with -r 2 (recomputed in backward)
    float *ln1_mean;    // (L, B, T)
    float *ln1_rstd;    // (L, B, T)
    floatX *qkv;        // (L, B, T, 3C)
    floatX *atty;       // (L, B, T, C) attention output (the attention backward reads it)
    float *att_lse;     // (L, B, NH, T) log-sum-exp of each attention row
    floatX *residual2;  // (L, B, T, C)
    floatX *ln2;        // (L, B, T, C); one (B, T, C) with -r 2
    float *ln2_mean;    // (L, B, T)
    float *ln2_rstd;    // (L, B, T)
    floatX *fch;        // (L, B, T, 4C) fc output before GELU (the fused dGELU reads it)
    floatX *fch_gelu;   // (L, B, T, 4C); one (B, T, 4C) with -r >= 1
    floatX *residual3;  // (L, B, T, C)
    floatX *lnf;        // (B, T, C)
    float *lnf_mean;    // (B, T)
    float *lnf_rstd;    // (B, T)
    floatX *logits;     // (B, T, max(Vp, 4C)): logits, then dlogits; then, in the layers' backward,
                        // the (B, T, 4C) and (B, T, 3C) gradients (dlogits are dead by then)
    float *losses;      // (B, T)
    floatX *dresidual;  // (B, T, C) gradient of the residual stream
    floatX *btc;        // (B, T, C) forward: a projection's output before its residual add;
                        // backward: the input gradient of a layer's matmul
    float *scratch;     // fp32 scratch of the reductions, the attention backward and generation's rows (one stream)
    size_t scratch_bytes;  // its size
    int *inputs;        // (B, T) token ids
    int *targets;       // (B, T)
    float *loss_acc;    // (1) sum over micro-steps of the micro-batch mean loss
} ActivationTensors;

typedef struct {
    GPT2Config config;
    size_t param_sizes[NUM_PARAMETER_TENSORS];
    size_t num_params;        // P
    floatX *params_memory;    // (padded) bf16, file order; the tail past P is ZeRO-1 padding
    floatX *grads_memory;     // (padded)
    float *master;            // (opt count) fp32 master weights of the optimizer range, or NULL (-w 0)
    float *m_memory;          // (opt count) AdamW first moment, or Muon's momentum for the block matrices
    float *v_memory;          // (opt count) AdamW second moment (0 for Muon's matrices)
    void *muon_scratch;       // Newton-Schulz buffers (-opt muon; llmc/cuda/muon.cuh), else NULL
    ParameterTensors params;
    ParameterTensors grads;
    ActivationTensors acts;
    void *acts_memory;
    int batch_size, seq_len;  // maxima the activations were sized for
    int recompute;            // -r
    int gelu_fusion;          // -ge: GELU in cuBLASLt's epilogue, 0 none, 1 forward, 2 forward and backward
    AttentionImpl attention;  // -at
    void *att_workspace;      // cuDNN's attention workspace (NULL with our kernel)
    size_t att_workspace_bytes;
    AdamWDecayTable decay;
    EncoderBackwardWork enc_work;
    GradReducer red;          // across ranks (llmc/cuda/grad_reduce.cuh); kind NONE on one process
    cudaStream_t stream;      // everything of the model runs here, in order
    cudaEvent_t sync_ev;      // host waits (gpu_sync)
    cudaEvent_t staged_ev;    // the last host->device copy of token ids finished
    int *inputs_pinned;       // (B, T) staging for the token ids
    int *targets_pinned;      // (B, T)
    float *losses_pinned;     // (B, T)
    uint16_t *row_pinned;     // (Vp) one row of logits
    float *scalar_pinned;     // (1)
    // phase timers (llmc/phase.h): events on the stream, read after the waits a step has anyway
    cudaEvent_t *micro_ev;    // 3 per micro-step: forward start, backward start, backward end
    int micro_ev_steps;       // micro-steps with events so far
    int micro_steps;          // of the current step
    cudaEvent_t comm_ev[2];   // around the wait for the gradient reduction (its end starts the norm)
    cudaEvent_t update_ev[2][2];  // around the update, two pairs taking turns (one may still run)
    int update_turn, update_unread[2];
    int updated;              // this step ran the update (a skipped step does not)
    double update_ms;         // the last update whose time was read
    size_t planned_bytes;     // the memory plan's GPU total (gpt2_plan)
} GPT2;

// wait on the host for everything queued on the model's stream (with the watchdog when NCCL runs)
static void gpt2_sync(GPT2 *m, const char *what) {
    cudaCheck(cudaEventRecord(m->sync_ev, m->stream));
    gpu_wait_event(m->sync_ev, what);
}

// ---- memory

// one activation tensor: where its pointer goes, how many elements, element bytes, its row of the memory plan
typedef struct {
    void **ptr;
    size_t count;
    size_t elem;
    PlanRow row;
} ActSlot;

static int gpt2_activation_slots(ActSlot *slots, ActivationTensors *a, const GPT2Config *c, int B, int T, int recompute) {
    const size_t L = c->num_layers, C = c->channels, NH = c->num_heads, Vp = c->padded_vocab_size;
    const size_t BT = (size_t)B * T;
    const size_t ln_layers = recompute >= 2 ? 1 : L, gelu_layers = recompute >= 1 ? 1 : L;
    const size_t wide = Vp > 4 * C ? Vp : 4 * C;
    size_t scratch = layernorm_backward_scratch_bytes(B, T, (int)C);
    size_t s2 = matmul_backward_scratch_bytes(B, T, 4 * (int)C);
    size_t s3 = attention_backward_scratch_bytes(B, T, (int)C, (int)NH);
    if (s2 > scratch) { scratch = s2; }
    if (s3 > scratch) { scratch = s3; }
    const size_t norm_scratch = global_norm_scratch_bytes(gpt2_norm_chunks(c, NULL));
    if (norm_scratch > scratch) { scratch = norm_scratch; }
    const size_t rows_scratch = attention_rows_scratch_bytes((int)C, (int)NH);  // one row of generation
    if (rows_scratch > scratch) { scratch = rows_scratch; }
    a->scratch_bytes = scratch;
    const size_t X = sizeof(floatX), F = sizeof(float);
    const PlanRow ACT = PLAN_ACTS, SCR = PLAN_SCRATCH;
    ActSlot table[] = {
        {(void **)&a->encoded, BT * C, X, ACT},          {(void **)&a->ln1, ln_layers * BT * C, X, ACT},
        {(void **)&a->ln1_mean, L * BT, F, ACT},         {(void **)&a->ln1_rstd, L * BT, F, ACT},
        {(void **)&a->qkv, L * BT * 3 * C, X, ACT},      {(void **)&a->atty, L * BT * C, X, ACT},
        {(void **)&a->att_lse, L * B * NH * T, F, ACT},  {(void **)&a->residual2, L * BT * C, X, ACT},
        {(void **)&a->ln2, ln_layers * BT * C, X, ACT},  {(void **)&a->ln2_mean, L * BT, F, ACT},
        {(void **)&a->ln2_rstd, L * BT, F, ACT},         {(void **)&a->fch, L * BT * 4 * C, X, ACT},
        {(void **)&a->fch_gelu, gelu_layers * BT * 4 * C, X, ACT}, {(void **)&a->residual3, L * BT * C, X, ACT},
        {(void **)&a->lnf, BT * C, X, ACT},              {(void **)&a->lnf_mean, BT, F, ACT},
        {(void **)&a->lnf_rstd, BT, F, ACT},             {(void **)&a->logits, BT * wide, X, PLAN_LOGITS},
        {(void **)&a->losses, BT, F, ACT},               {(void **)&a->dresidual, BT * C, X, SCR},
        {(void **)&a->btc, BT * C, X, SCR},              {(void **)&a->scratch, scratch / F + 1, F, SCR},
        {(void **)&a->inputs, BT, sizeof(int), PLAN_DATA}, {(void **)&a->targets, BT, sizeof(int), PLAN_DATA},
        {(void **)&a->loss_acc, 1, F, ACT},
    };
    const int n = (int)(sizeof(table) / sizeof(table[0]));
    for (int i = 0; i < n; i++) { slots[i] = table[i]; }
    return n;
}

// what the model's pinned staging takes on the host (gpt2_build: token ids, losses, a row of logits, a scalar)
static size_t gpt2_pinned_bytes(const GPT2Config *c, int B, int T) {
    const size_t BT = (size_t)B * T;
    return 2 * cuda_alloc_bytes(BT * sizeof(int)) + cuda_alloc_bytes(BT * sizeof(float)) +
           cuda_alloc_bytes((size_t)c->padded_vocab_size * sizeof(uint16_t)) + cuda_alloc_bytes(sizeof(float));
}

/*
 * The memory plan of one rank (llmc/plan.h), before any allocation: everything gpt2_build,
 * cublas_init, grad_reduce_init and nccl_init allocate, on the GPU and pinned or not on the host
 * (with -opt muon also Newton-Schulz's scratch; the momentum is in m).
 * padded and opt_count come from the reduction plan (grad_reduce_plan: ZeRO-1 padding and this
 * rank's optimizer range). cuDNN's workspace (-at cudnn) is asked of cuDNN, which needs the GPU;
 * without one (have_gpu 0) the row says it is unknown. a (may be NULL) adds the data loader's row.
 */
typedef struct {
    GPT2Config config;
    int T, master, world_size, zero, have_gpu, muon;
    int probing;              // -b auto's trials, --plan: a B cuDNN cannot build attention for does not fit
    AttentionImpl attention;
    GradReduceKind kind;
    size_t padded, opt_count;
    size_t staging;           // ZeRO-1's reduce-scatter staging, bf16 elements (llmc/cuda/grad_reduce.cuh)
    const TrainArgs *a;
    size_t runtime;           // resident host bytes before the model (code, libraries), measured
} CudaPlan;

static void gpt2_plan(void *ctx, int B, int recompute, MemPlan *p) {
    const CudaPlan *cp = (const CudaPlan *)ctx;
    const GPT2Config *c = &cp->config;
    const int T = cp->T;
    const size_t P = gpt2_num_params(c), F = sizeof(float);
    const int sharded = cp->zero && cp->world_size > 1;
    char shard[96] = "all of them";
    if (sharded) { snprintf(shard, sizeof(shard), "this rank's ZeRO-1 shard: %zu of %zu", cp->opt_count, P); }
    plan_add(p, PLAN_PARAMS, 1, cuda_alloc_bytes(cp->padded * sizeof(floatX)));
    plan_note(p, PLAN_PARAMS, "bf16, %zu%s", P, cp->padded > P ? " (+ ZeRO-1 padding)" : "");
    plan_add(p, PLAN_GRADS, 1, cuda_alloc_bytes(cp->padded * sizeof(floatX)));
    plan_note(p, PLAN_GRADS, "bf16, every rank all of them");
    if (cp->master) {
        plan_add(p, PLAN_MASTER, 1, cuda_alloc_bytes(cp->opt_count * F));
        plan_note(p, PLAN_MASTER, "fp32, %s", shard);
    } else {
        plan_note(p, PLAN_MASTER, "none (-w 0)");
    }
    plan_add(p, PLAN_ADAMW, 1, 2 * cuda_alloc_bytes(cp->opt_count * F));
    if (cp->muon) { plan_add(p, PLAN_ADAMW, 1, cuda_alloc_bytes(muon_scratch_bytes(c->channels))); }
    plan_note(p, PLAN_ADAMW, "fp32 m and v, %s%s", shard, cp->muon ? "; Muon's Newton-Schulz scratch" : "");
    ActSlot slots[32];
    ActivationTensors unused;
    const int n = gpt2_activation_slots(slots, &unused, c, B, T, recompute);
    for (int i = 0; i < n; i++) { plan_add(p, slots[i].row, 1, cuda_alloc_bytes(slots[i].count * slots[i].elem)); }
    plan_note(p, PLAN_ACTS, "bf16, kept for the backward; -r %d recomputes %s", recompute,
              recompute == 0 ? "nothing" : recompute == 1 ? "GELU" : "GELU and LayerNorm");
    plan_note(p, PLAN_LOGITS, "(B, T, max(Vp, 4C)) bf16, reused by the backward");
    if (cp->attention == ATTENTION_CUDNN && cp->have_gpu) {
        size_t ws = 0;
        const char *err = attention_workspace_probe(cp->attention, c, B, T, &ws);
        if (!cp->probing) { cudnn_att_check(err); }  // the run's own shape: a refusal stops it
        plan_add(p, PLAN_ATTENTION, 1, err ? (size_t)1 << 60 : cuda_alloc_bytes(ws));
        if (err) { plan_note(p, PLAN_ATTENTION, "cuDNN cannot build its attention at this B: %s", err); }
        else { plan_note(p, PLAN_ATTENTION, "cuDNN's workspace"); }
    } else if (cp->attention == ATTENTION_CUDNN) {
        // cuDNN sizes it on the GPU. Measured on an H200 (cuDNN 9.19, deterministic backward, 12 and
        // 25 heads): 2 B NH T (T + 2) bytes to 256 bytes at T 256 and 1024, about twice that at T 64
        const size_t ws = 2 * (size_t)B * c->num_heads * T * (T + 2) * (T < 256 ? 2 : 1);
        plan_add(p, PLAN_ATTENTION, 1, cuda_alloc_bytes(ws));
        plan_note(p, PLAN_ATTENTION, "cuDNN's workspace, estimated without a GPU from an H200's (cuDNN tells it there)");
    } else {
        plan_note(p, PLAN_ATTENTION, "none: our kernel keeps the log-sum-exp, its backward uses the scratch");
    }
    plan_add(p, PLAN_SCRATCH, 1, encoder_backward_work_device_bytes(B, T, c->channels) + cuda_alloc_bytes(CUBLASLT_WORKSPACE_BYTES) +
                                     grad_reduce_device_bytes(gpt2_norm_chunks(c, NULL)));
    plan_add(p, PLAN_SCRATCH, 0, encoder_backward_work_host_bytes(B, T));
    plan_note(p, PLAN_SCRATCH, "reductions' and attention's fp32 scratch, dresidual, cuBLASLt and embedding-gradient work");
    plan_add(p, PLAN_COMM, 0, grad_reduce_host_bytes(cp->kind, cp->padded, gpt2_norm_chunks(c, NULL)));
    if (cp->kind == GRAD_REDUCE_NCCL) {
        plan_add(p, PLAN_COMM, 1, cuda_alloc_bytes(nccl_staging_bytes(cp->world_size)));
        plan_add(p, PLAN_COMM, 0, cuda_alloc_bytes(nccl_staging_bytes(cp->world_size)));
        plan_add(p, PLAN_COMM, 1, cp->staging > 0 ? cuda_alloc_bytes(cp->staging * sizeof(floatX)) : 0);
        plan_note(p, PLAN_COMM, "NCCL staging%s (NCCL's own buffers are NCCL's: not counted, in the margin)",
                  cp->staging > 0 ? ", ZeRO-1's reduce-scatter staging" : "");
    } else if (cp->kind == GRAD_REDUCE_MPI) {
        plan_note(p, PLAN_COMM, "-pb mpi: the gradients staged on the host, bf16 pinned and fp32");
    } else {
        plan_note(p, PLAN_COMM, "none (one process)");
    }
    plan_add(p, PLAN_DATA, 0, gpt2_pinned_bytes(c, B, T));
    if (cp->a) { train_data_plan(p, 0, cp->a, B, c->vocab_size); }
    plan_add(p, PLAN_RUNTIME, 0, cp->runtime);
    plan_note(p, PLAN_RUNTIME, "host: code and libraries resident before the model (measured); the CUDA context is not counted");
}

// the plan of a model of `config` at T, -w master and -at attention, reduced by red (grad_reduce_plan:
// the ranks, ZeRO-1's padding and this rank's optimizer range); a: the flags, for the data loader's row
static void gpt2_plan_of(CudaPlan *cp, const GPT2Config *config, int T, int master, AttentionImpl attention,
                         const GradReducer *red, int muon, int have_gpu, const TrainArgs *a) {
    memset(cp, 0, sizeof(*cp));
    cp->config = *config;
    cp->T = T;
    cp->master = master;
    cp->world_size = red->world_size;
    cp->zero = red->zero;
    cp->have_gpu = have_gpu;
    cp->muon = muon;
    cp->attention = attention;
    cp->kind = red->kind;
    cp->padded = red->padded;
    cp->opt_count = red->count;
    cp->staging = red->staging;
    cp->a = a;
    cp->runtime = a ? plan_process_rss() : 0;
}

static const double GiB = 1024.0 * 1024.0 * 1024.0;

// cudaMalloc with the memory hint instead of a bare "out of memory"
static void gpu_malloc(void **p, size_t bytes, const char *what) {
    cudaError_t err = cudaMalloc(p, bytes > 0 ? bytes : 1);
    if (err == cudaErrorMemoryAllocation) {
        (void)cudaGetLastError();
        llmc_die("out of GPU memory allocating %s (%.2f GiB); use a smaller -b, -r 2 (recompute LayerNorm and GELU), "
                 "or -z 1 with several GPUs (shards the optimizer state)", what, bytes / GiB);
    }
    cudaCheck(err);
}

// ---- build and free

/*
 * Allocates everything for the maximum B and T after checking that it fits. red: the reduction
 * plan (grad_reduce_plan) that fixes the buffer padding and the optimizer range; nccl: the
 * communicator for the NCCL backend, else NULL; muon: -opt muon. Parameters are left uninitialised.
 */
void gpt2_build(GPT2 *m, const GPT2Config *config, int B, int T, int recompute, int master_weights,
                AttentionImpl attention, const GradReducer *red, void *nccl, int muon) {
    memset(m, 0, sizeof(*m));
    m->config = *config;
    const int C = config->channels, NH = config->num_heads;
    if (C % 8 != 0) {
        llmc_die("model width C = %d: the CUDA kernels need C to be a multiple of 8 (GPT-2 sizes are); use ./train_gpt2 "
                 "for this model", C);
    }
    if (config->padded_vocab_size % 8 != 0) {
        llmc_die("padded vocabulary Vp = %d (V = %d): the CUDA kernels need Vp to be a multiple of 8 (the LM head's "
                 "matmul and the classifier read rows of 8); -e descriptors and llm.c's files pad to a multiple of 128, "
                 "so rewrite this model with such a Vp, or train it with ./train_gpt2", config->padded_vocab_size,
                 config->vocab_size);
    }
    if (C / NH != 64 && C / NH != 128) {
        llmc_die("head size C/NH = %d/%d = %d: the fused attention supports head sizes 64 and 128 (every GPT-2 size, "
                 "dN descriptors, L2:C128:H2); use one of those, or ./train_gpt2 for other shapes", C, NH, C / NH);
    }
    gpt2_param_sizes(m->param_sizes, config);
    m->num_params = gpt2_num_params(config);
    m->batch_size = B;
    m->seq_len = T;
    m->recompute = recompute;
    m->attention = attention;
    m->red = *red;

    // the plan counts the cuBLASLt workspace and the NCCL staging, allocated before this check: it
    // asks for up to 33 MiB more than is still needed
    CudaPlan cp;
    gpt2_plan_of(&cp, config, T, master_weights, attention, red, muon, 1, NULL);
    MemPlan plan;
    memset(&plan, 0, sizeof(plan));
    gpt2_plan(&cp, B, recompute, &plan);
    const size_t need = plan_total(&plan, 1);
    m->planned_bytes = need;
    size_t free_bytes = 0, total_bytes = 0;
    cudaCheck(cudaMemGetInfo(&free_bytes, &total_bytes));
    if (need > free_bytes) {
        llmc_die("B=%d T=%d needs %.2f GiB of GPU memory (parameters+gradients %.2f, optimizer state %.2f, activations "
                 "and logits %.2f with -r %d, scratch and workspaces %.2f) but %.2f GiB of %.2f are free; use a smaller "
                 "-b or -b auto, -r 2 (recompute LayerNorm and GELU), or -z 1 with several GPUs (shards the optimizer "
                 "state); --plan %d prints the plan", B, T, need / GiB, (plan.device[PLAN_PARAMS] + plan.device[PLAN_GRADS]) / GiB,
                 (plan.device[PLAN_MASTER] + plan.device[PLAN_ADAMW]) / GiB, (plan.device[PLAN_ACTS] + plan.device[PLAN_LOGITS]) / GiB,
                 recompute, (plan.device[PLAN_SCRATCH] + plan.device[PLAN_ATTENTION] + plan.device[PLAN_COMM]) / GiB,
                 free_bytes / GiB, total_bytes / GiB, red->world_size);
    }

    cudaCheck(cudaStreamCreate(&m->stream));
    cudaCheck(cudaEventCreateWithFlags(&m->sync_ev, cudaEventDisableTiming));
    cudaCheck(cudaEventCreateWithFlags(&m->staged_ev, cudaEventDisableTiming));
    gpu_malloc((void **)&m->params_memory, red->padded * sizeof(floatX), "parameters");
    gpu_malloc((void **)&m->grads_memory, red->padded * sizeof(floatX), "gradients");
    // zero: the padding tail must stay 0 (it is all-gathered and its norm summed)
    cudaCheck(cudaMemsetAsync(m->params_memory, 0, red->padded * sizeof(floatX), m->stream));
    cudaCheck(cudaMemsetAsync(m->grads_memory, 0, red->padded * sizeof(floatX), m->stream));
    point_parameters(&m->params, m->params_memory, m->param_sizes);
    point_parameters(&m->grads, m->grads_memory, m->param_sizes);
    const size_t opt_bytes = red->count * sizeof(float);
    gpu_malloc((void **)&m->m_memory, opt_bytes, "AdamW state");
    gpu_malloc((void **)&m->v_memory, opt_bytes, "AdamW state");
    cudaCheck(cudaMemsetAsync(m->m_memory, 0, opt_bytes, m->stream));
    cudaCheck(cudaMemsetAsync(m->v_memory, 0, opt_bytes, m->stream));
    if (master_weights) { gpu_malloc((void **)&m->master, opt_bytes, "master weights"); }
    if (muon) { gpu_malloc(&m->muon_scratch, muon_scratch_bytes(C), "Muon's Newton-Schulz scratch"); }

    ActSlot slots[32];
    const int n = gpt2_activation_slots(slots, &m->acts, config, B, T, recompute);
    size_t total = 0;
    for (int i = 0; i < n; i++) { total += cuda_alloc_bytes(slots[i].count * slots[i].elem); }
    gpu_malloc(&m->acts_memory, total, "activations");
    char *p = (char *)m->acts_memory;
    for (int i = 0; i < n; i++) {
        *slots[i].ptr = p;
        p += cuda_alloc_bytes(slots[i].count * slots[i].elem);
    }
    m->att_workspace_bytes = attention_workspace_bytes(attention, config, B, T);  // graphs cached: no second build
    if (m->att_workspace_bytes > 0) { gpu_malloc(&m->att_workspace, m->att_workspace_bytes, "cuDNN's attention workspace"); }
    encoder_backward_work_init(&m->enc_work, B, T, C);
    adamw_decay_table_gpt2(&m->decay, config, muon);
    grad_reduce_init(&m->red, nccl);

    const size_t BT = (size_t)B * T;
    cudaCheck(cudaMallocHost((void **)&m->inputs_pinned, BT * sizeof(int)));
    cudaCheck(cudaMallocHost((void **)&m->targets_pinned, BT * sizeof(int)));
    cudaCheck(cudaMallocHost((void **)&m->losses_pinned, BT * sizeof(float)));
    cudaCheck(cudaMallocHost((void **)&m->row_pinned, (size_t)config->padded_vocab_size * sizeof(uint16_t)));
    cudaCheck(cudaMallocHost((void **)&m->scalar_pinned, sizeof(float)));
    for (int i = 0; i < 2; i++) {  // timed events (default flags)
        cudaCheck(cudaEventCreate(&m->comm_ev[i]));
        for (int j = 0; j < 2; j++) { cudaCheck(cudaEventCreate(&m->update_ev[i][j])); }
    }
    cudaCheck(cudaEventRecord(m->staged_ev, m->stream));
    gpt2_sync(m, "the model's setup");
}

void gpt2_free(GPT2 *m) {
    gpt2_sync(m, "the end of training");
    encoder_backward_work_free(&m->enc_work);
    grad_reduce_free(&m->red);
    cudaCheck(cudaFree(m->params_memory));
    cudaCheck(cudaFree(m->grads_memory));
    cudaCheck(cudaFree(m->m_memory));
    cudaCheck(cudaFree(m->v_memory));
    if (m->master) { cudaCheck(cudaFree(m->master)); }
    if (m->muon_scratch) { cudaCheck(cudaFree(m->muon_scratch)); }
    cudaCheck(cudaFree(m->acts_memory));
    if (m->att_workspace) { cudaCheck(cudaFree(m->att_workspace)); }
    cudaCheck(cudaFreeHost(m->inputs_pinned));
    cudaCheck(cudaFreeHost(m->targets_pinned));
    cudaCheck(cudaFreeHost(m->losses_pinned));
    cudaCheck(cudaFreeHost(m->row_pinned));
    cudaCheck(cudaFreeHost(m->scalar_pinned));
    cudaCheck(cudaEventDestroy(m->sync_ev));
    cudaCheck(cudaEventDestroy(m->staged_ev));
    for (int i = 0; i < 3 * m->micro_ev_steps; i++) { cudaCheck(cudaEventDestroy(m->micro_ev[i])); }
    free(m->micro_ev);
    for (int i = 0; i < 2; i++) {
        cudaCheck(cudaEventDestroy(m->comm_ev[i]));
        for (int j = 0; j < 2; j++) { cudaCheck(cudaEventDestroy(m->update_ev[i][j])); }
    }
    cudaCheck(cudaStreamDestroy(m->stream));
}

// ---- parameters in and out

// set the parameters from fp32 values of all P parameters: bf16 rounded to nearest even, and the
// master weights of this rank's range exactly
static void gpt2_set_params_fp32(GPT2 *m, const float *values) {
    const size_t P = m->num_params;
    uint16_t *bf = (uint16_t *)mallocCheck(P * sizeof(uint16_t));
    for (size_t i = 0; i < P; i++) { bf[i] = float_to_bf16(values[i]); }
    cudaCheck(cudaMemcpyAsync(m->params_memory, bf, P * sizeof(uint16_t), cudaMemcpyHostToDevice, m->stream));
    if (m->master && m->red.count > 0) {
        cudaCheck(cudaMemcpyAsync(m->master, values + m->red.offset, m->red.count * sizeof(float), cudaMemcpyHostToDevice,
                                  m->stream));
    }
    gpt2_sync(m, "the parameter upload");
    free(bf);
}

// load a model file (v3: fp32, the master weights exact; v5: bf16, masters widened from it)
void gpt2_load(GPT2 *m, const char *path) {
    ModelFileInfo info;
    model_file_info(path, &info);
    model_file_require_config(path, &info, &m->config, "pass the matching -e descriptor, or the file alone as -e");
    const size_t P = m->num_params;
    if (info.version == MODEL_VERSION_FP32 && m->master) {
        float *values = (float *)mallocCheck(P * sizeof(float));
        model_file_load(path, &info, values, NULL);
        gpt2_set_params_fp32(m, values);
        free(values);
        return;
    }
    uint16_t *bf = (uint16_t *)mallocCheck(P * sizeof(uint16_t));
    model_file_load(path, &info, NULL, bf);
    cudaCheck(cudaMemcpyAsync(m->params_memory, bf, P * sizeof(uint16_t), cudaMemcpyHostToDevice, m->stream));
    if (m->master && m->red.count > 0) {
        cast_bf16_to_fp32(m->master, m->params_memory + m->red.offset, m->red.count, m->stream);
    }
    gpt2_sync(m, "the model upload");
    free(bf);
}

// bf16 parameters [offset, offset+count) as the model file stores them, into host memory
static void gpt2_params_download(GPT2 *m, size_t offset, size_t count, uint16_t *dst) {
    cudaCheck(cudaMemcpyAsync(dst, m->params_memory + offset, count * sizeof(uint16_t), cudaMemcpyDeviceToHost, m->stream));
    gpt2_sync(m, "the parameter download");
}

static uint16_t *gpt2_params_to_host(GPT2 *m) {
    uint16_t *bf = (uint16_t *)mallocCheck(m->num_params * sizeof(uint16_t));
    gpt2_params_download(m, 0, m->num_params, bf);
    return bf;
}

// ---- forward

/*
 * Layer l's slices of the stacked activations at runtime B and T: the forward writes them, the
 * backward reads them (one definition of where each lives). With recomputation the per-layer ln1,
 * ln2 (-r 2) and fch_gelu (-r >= 1) buffers are one buffer that the backward refills.
 */
typedef struct {
    const floatX *residual;      // (B, T, C) the layer's input: the embeddings or the previous residual3
    floatX *ln1;                 // (B, T, C)
    float *ln1_mean, *ln1_rstd;  // (B, T)
    floatX *qkv;                 // (B, T, 3C)
    floatX *atty;                // (B, T, C)
    float *lse;                  // (B, NH, T)
    floatX *residual2;           // (B, T, C)
    floatX *ln2;                 // (B, T, C)
    float *ln2_mean, *ln2_rstd;  // (B, T)
    floatX *fch;                 // (B, T, 4C) fc output before GELU
    floatX *fch_gelu;            // (B, T, 4C)
    floatX *residual3;           // (B, T, C) the layer's output
} LayerActs;

static LayerActs layer_acts(GPT2 *m, int l, int B, int T) {
    ActivationTensors *a = &m->acts;
    const size_t C = m->config.channels, NH = m->config.num_heads, BT = (size_t)B * T, BTC = BT * C;
    const size_t ln_l = m->recompute >= 2 ? 0 : l, gelu_l = m->recompute >= 1 ? 0 : l;
    LayerActs la;
    la.residual = l == 0 ? a->encoded : a->residual3 + (l - 1) * BTC;
    la.ln1 = a->ln1 + ln_l * BTC;
    la.ln1_mean = a->ln1_mean + l * BT;
    la.ln1_rstd = a->ln1_rstd + l * BT;
    la.qkv = a->qkv + l * 3 * BTC;
    la.atty = a->atty + l * BTC;
    la.lse = a->att_lse + l * NH * BT;
    la.residual2 = a->residual2 + l * BTC;
    la.ln2 = a->ln2 + ln_l * BTC;
    la.ln2_mean = a->ln2_mean + l * BT;
    la.ln2_rstd = a->ln2_rstd + l * BT;
    la.fch = a->fch + l * 4 * BTC;
    la.fch_gelu = a->fch_gelu + gelu_l * 4 * BTC;
    la.residual3 = a->residual3 + l * BTC;
    return la;
}

// copy B*T token ids from the host to a device buffer through pinned staging
static void gpt2_stage_tokens(GPT2 *m, int *dst, int *pinned, const int *src, size_t n) {
    gpu_wait_event(m->staged_ev, "the previous token copy");  // it has left the pinned buffers
    memcpy(pinned, src, n * sizeof(int));
    cudaCheck(cudaMemcpyAsync(dst, pinned, n * sizeof(int), cudaMemcpyHostToDevice, m->stream));
}

// the implementation of a call at T: cuDNN's serves the calls at the built T; the others run our
// kernel (see the top comment)
static AttentionImpl gpt2_attention_at(const GPT2 *m, int T) {
    return m->attention == ATTENTION_CUDNN && T == m->seq_len ? ATTENTION_CUDNN : ATTENTION_OWN;
}

// out (B, T, C), lse (B, NH, T) from qkv (B, T, 3C), with the model's attention implementation
static void gpt2_attention_forward(GPT2 *m, floatX *out, float *lse, const floatX *qkv, int B, int T) {
    attention_forward_with(gpt2_attention_at(m, T), out, lse, qkv, B, T, m->config.channels, m->config.num_heads,
                           m->att_workspace, m->att_workspace_bytes, m->stream);
}

// dqkv (B, T, 3C) overwritten from dout (B, T, C) and the forward's qkv, out, lse
static void gpt2_attention_backward(GPT2 *m, floatX *dqkv, const floatX *dout, const floatX *qkv, const floatX *out,
                                    const float *lse, int B, int T) {
    attention_backward_with(gpt2_attention_at(m, T), dqkv, dout, qkv, out, lse, m->acts.scratch, B, T,
                            m->config.channels, m->config.num_heads, m->att_workspace, m->att_workspace_bytes, m->stream);
}

// 1 if the attention backward is bitwise reproducible
static int gpt2_attention_deterministic(const GPT2 *m) { return attention_deterministic(m->attention); }

// the banner's description of the attention implementation
static const char *gpt2_attention_describe(const GPT2 *m) { return attention_describe(m->attention, m->att_workspace_bytes); }

/*
 * The forward up to the logits of rows [from, to) of B sequences laid out at Tl positions each, from
 * the token ids already in acts.inputs: all rows (from 0, to Tl) in training and evaluation; in
 * generation one sequence (B 1) laid out at the built T, whose rows before `from` hold an earlier
 * call's activations of the same tokens, so that a growing text computes only its new rows (their
 * attention reads the kept keys and values: attention_forward_rows).
 */
static void gpt2_forward_rows(GPT2 *m, int B, int Tl, int from, int to) {
    if (B > m->batch_size || Tl > m->seq_len || B < 1 || from < 0 || from >= to || to > Tl ||
        (B > 1 && (from > 0 || to < Tl))) {
        llmc_die("internal: forward with B=%d T=%d rows %d..%d, built for B=%d T=%d", B, Tl, from, to, m->batch_size,
                 m->seq_len);
    }
    const int C = m->config.channels, NH = m->config.num_heads, L = m->config.num_layers;
    const int Vp = m->config.padded_vocab_size;
    const size_t o = from, N = (size_t)B * to - from;  // the first row computed, and how many
    ParameterTensors *p = &m->params;
    ActivationTensors *a = &m->acts;
    cudaStream_t s = m->stream;

    encoder_forward(a->encoded + o * C, a->inputs + o, p->wte, p->wpe + o * C, B, to - from, C, s);
    LayerActs first = layer_acts(m, 0, B, Tl);
    layernorm_forward(first.ln1 + o * C, first.ln1_mean + o, first.ln1_rstd + o, a->encoded + o * C, p->ln1w, p->ln1b, 1,
                      (int)N, C, s);
    for (int l = 0; l < L; l++) {
        LayerParams lp = layer_params(p, &m->config, l);
        LayerActs la = layer_acts(m, l, B, Tl);
        // residual2 = residual + attproj(attention(qkv(ln1(residual))))
        matmul_forward(la.qkv + o * 3 * C, la.ln1 + o * C, lp.qkvw, lp.qkvb, 1, (int)N, C, 3 * C, NULL, s);
        if (from == 0) {
            gpt2_attention_forward(m, la.atty, la.lse, la.qkv, B, to);
        } else {  // no lse: nothing of generation goes backward
            attention_forward_rows(la.atty, NULL, la.qkv, from, to, C, NH, Tl, a->scratch, a->scratch_bytes, s);
        }
        matmul_forward(a->btc + o * C, la.atty + o * C, lp.attprojw, lp.attprojb, 1, (int)N, C, C, NULL, s);
        fused_residual_forward(la.residual2 + o * C, la.ln2 + o * C, la.ln2_mean + o, la.ln2_rstd + o,
                               la.residual + o * C, a->btc + o * C, lp.ln2w, lp.ln2b, (int)N, C, s);
        // residual3 = residual2 + fcproj(gelu(fc(ln2))); the GELU's input is kept in fch for the backward.
        // -ge >= 1: the GELU is cuBLASLt's epilogue of the fc matmul, else our kernel (llmc/cuda/gelu.cuh)
        floatX *fch = la.fch + o * 4 * C, *fch_gelu = la.fch_gelu + o * 4 * C;
        if (m->gelu_fusion >= 1) {
            matmul_forward(fch_gelu, la.ln2 + o * C, lp.fcw, lp.fcb, 1, (int)N, C, 4 * C, fch, s);
        } else {
            matmul_forward(fch, la.ln2 + o * C, lp.fcw, lp.fcb, 1, (int)N, C, 4 * C, NULL, s);
            gelu_forward(fch_gelu, fch, N * 4 * C, s);
        }
        matmul_forward(a->btc + o * C, fch_gelu, lp.fcprojw, lp.fcprojb, 1, (int)N, 4 * C, C, NULL, s);
        // the residual add, fused with the next LayerNorm: the next layer's ln1, or lnf after the last
        if (l < L - 1) {
            LayerParams np = layer_params(p, &m->config, l + 1);
            LayerActs next = layer_acts(m, l + 1, B, Tl);
            fused_residual_forward(la.residual3 + o * C, next.ln1 + o * C, next.ln1_mean + o, next.ln1_rstd + o,
                                   la.residual2 + o * C, a->btc + o * C, np.ln1w, np.ln1b, (int)N, C, s);
        } else {
            fused_residual_forward(la.residual3 + o * C, a->lnf + o * C, a->lnf_mean + o, a->lnf_rstd + o,
                                   la.residual2 + o * C, a->btc + o * C, p->lnfw, p->lnfb, (int)N, C, s);
        }
    }
    // logits = lnf @ wte^T over the padded vocabulary (padded rows of wte are zero)
    matmul_forward(a->logits + o * Vp, a->lnf + o * C, p->wte, NULL, 1, (int)N, C, Vp, NULL, s);
}

typedef enum {
    FWD_EVAL = 1,   // per-token losses; logits left in acts.logits
    FWD_TRAIN = 2,  // per-token losses; acts.logits becomes dlogits (scaled by dloss)
} ForwardMode;

/*
 * Forward pass of B sequences of T tokens with their targets (host ids; B, T at most the built
 * sizes): acts.losses (B, T) holds the per-token losses. (Generation: cuda_forward_probs.)
 */
void gpt2_forward(GPT2 *m, const int *inputs, const int *targets, int B, int T, ForwardMode mode, float dloss) {
    const int V = m->config.vocab_size, Vp = m->config.padded_vocab_size;
    const size_t BT = (size_t)B * T;
    ActivationTensors *a = &m->acts;
    cudaStream_t s = m->stream;
    if (B > m->batch_size || T > m->seq_len || B < 1 || T < 1) {
        llmc_die("internal: forward with B=%d T=%d, built for B=%d T=%d", B, T, m->batch_size, m->seq_len);
    }
    gpt2_stage_tokens(m, a->inputs, m->inputs_pinned, inputs, BT);
    memcpy(m->targets_pinned, targets, BT * sizeof(int));
    cudaCheck(cudaMemcpyAsync(a->targets, m->targets_pinned, BT * sizeof(int), cudaMemcpyHostToDevice, s));
    cudaCheck(cudaEventRecord(m->staged_ev, s));
    gpt2_forward_rows(m, B, T, 0, T);
    fused_classifier(a->logits, a->losses, dloss, a->targets, B, T, V, Vp, mode == FWD_TRAIN, s);
}

// ---- backward, in three parts so that a benchmark can time the layers one by one

// the LM head and the final LayerNorm: dresidual = d(loss)/d(residual3 of the last layer)
void gpt2_backward_head(GPT2 *m, int B, int T) {
    const int C = m->config.channels, L = m->config.num_layers, Vp = m->config.padded_vocab_size;
    const size_t BT = (size_t)B * T, BTC = BT * C;
    ParameterTensors *p = &m->params, *g = &m->grads;
    ActivationTensors *a = &m->acts;
    cudaStream_t s = m->stream;
    // logits = lnf @ wte^T: dlnf (in btc) = dlogits @ wte, dwte += dlogits^T @ lnf
    matmul_backward(a->btc, g->wte, NULL, a->logits, a->lnf, p->wte, B, T, C, Vp, NULL, a->scratch, s);
    cudaCheck(cudaMemsetAsync(a->dresidual, 0, BTC * sizeof(floatX), s));
    layernorm_backward(a->dresidual, g->lnfw, g->lnfb, a->btc, layer_acts(m, L - 1, B, T).residual3, p->lnfw, a->lnf_mean,
                       a->lnf_rstd, B, T, C, a->scratch, s);
}

// layer l, from dresidual = d(loss)/d(residual3[l]) to d(loss)/d(residual3[l-1]) (or d encoded)
void gpt2_backward_layer(GPT2 *m, int l, int B, int T) {
    const int C = m->config.channels;
    const size_t BT = (size_t)B * T;
    LayerParams lp = layer_params(&m->params, &m->config, l), lg = layer_params(&m->grads, &m->config, l);
    LayerActs la = layer_acts(m, l, B, T);
    ActivationTensors *a = &m->acts;
    cudaStream_t s = m->stream;
    floatX *dbig = a->logits;  // (B, T, 4C) then (B, T, 3C)

    // residual3 = residual2 + fcproj(gelu(fch)), fch = fc(ln2(residual2)): dresidual passes through
    if (m->recompute >= 1) { gelu_forward(la.fch_gelu, la.fch, BT * 4 * C, s); }
    // d fch = (dresidual @ fcprojw) * gelu'(fch): -ge 2 fuses the dGELU into the matmul, else our kernel
    // turns d fch_gelu into d fch in place
    const int fused = m->gelu_fusion >= 2;
    matmul_backward(dbig, lg.fcprojw, lg.fcprojb, a->dresidual, la.fch_gelu, lp.fcprojw, B, T, 4 * C, C,
                    fused ? la.fch : NULL, a->scratch, s);
    if (!fused) { gelu_backward(dbig, la.fch, dbig, BT * 4 * C, s); }
    if (m->recompute >= 2) { layernorm_forward(la.ln2, NULL, NULL, la.residual2, lp.ln2w, lp.ln2b, B, T, C, s); }
    matmul_backward(a->btc, lg.fcw, lg.fcb, dbig, la.ln2, lp.fcw, B, T, C, 4 * C, NULL, a->scratch, s);
    layernorm_backward(a->dresidual, lg.ln2w, lg.ln2b, a->btc, la.residual2, lp.ln2w, la.ln2_mean, la.ln2_rstd, B, T, C,
                       a->scratch, s);
    // residual2 = residual + attproj(attention(qkv(ln1(residual))))
    matmul_backward(a->btc, lg.attprojw, lg.attprojb, a->dresidual, la.atty, lp.attprojw, B, T, C, C, NULL, a->scratch, s);
    gpt2_attention_backward(m, dbig, a->btc, la.qkv, la.atty, la.lse, B, T);
    if (m->recompute >= 2) { layernorm_forward(la.ln1, NULL, NULL, la.residual, lp.ln1w, lp.ln1b, B, T, C, s); }
    matmul_backward(a->btc, lg.qkvw, lg.qkvb, dbig, la.ln1, lp.qkvw, B, T, C, 3 * C, NULL, a->scratch, s);
    layernorm_backward(a->dresidual, lg.ln1w, lg.ln1b, a->btc, la.residual, lp.ln1w, la.ln1_mean, la.ln1_rstd, B, T, C,
                       a->scratch, s);
}

// encoded = wte[inputs] + wpe: the embeddings' gradients (inputs: the host ids of the forward)
void gpt2_backward_embed(GPT2 *m, const int *inputs, int B, int T) {
    // encoder_backward waits for its previous plan copy with cudaEventSynchronize; waiting here
    // first puts that wait under the watchdog (the stream may sit behind a collective)
    gpu_wait_event(m->enc_work.plan_copied, "the previous embedding-gradient plan copy");
    encoder_backward(m->grads.wte, m->grads.wpe, m->acts.dresidual, inputs, B, T, m->config.channels, &m->enc_work,
                     m->stream);
}

/*
 * Backward of the last FWD_TRAIN forward; parameter gradients accumulate. On the last micro-step
 * of a step (last = 1), each layer's gradient reduction across ranks starts as soon as the layer
 * is done (llmc/cuda/grad_reduce.cuh), the embeddings' after the encoder backward.
 */
void gpt2_backward(GPT2 *m, const int *inputs, int B, int T, int last) {
    gpt2_backward_head(m, B, T);
    for (int l = m->config.num_layers - 1; l >= 0; l--) {
        gpt2_backward_layer(m, l, B, T);
        if (last) { grad_reduce_layer(&m->red, m->grads_memory, l, m->stream); }
    }
    gpt2_backward_embed(m, inputs, B, T);
    if (last) { grad_reduce_layer(&m->red, m->grads_memory, m->config.num_layers, m->stream); }
}

// ---- update

// AdamW on this rank's optimizer range (weight decay on the 2-D tensors; with -opt muon, all but
// the blocks' matrices), Muon on the matrices in the range (whole ones: muon_zero_shard), then
// ZeRO-1's all-gather
void gpt2_update(GPT2 *m, const OptSettings *o) {
    adamw_update(m->params_memory, m->master, m->grads_memory, m->m_memory, m->v_memory, m->red.offset, m->red.count,
                 &m->decay, o, m->stream);
    if (o->muon) {
        size_t start = 0;
        const size_t lo = m->red.offset, hi = m->red.offset + m->red.count;
        for (int i = 0; i < NUM_PARAMETER_TENSORS; i++) {
            if (muon_is_matrix_tensor(i)) {
                int rows, cols;
                muon_matrix_shape(&m->config, i, &rows, &cols);
                const size_t n = (size_t)rows * cols, end = start + m->param_sizes[i];
                const size_t a = lo > start ? lo : start, z = hi < end ? hi : end;  // the held part: whole matrices
                cudaRequire(z <= a || ((a - start) % n == 0 && (z - start) % n == 0), "range [%zu, %zu) splits a matrix", lo, hi);
                if (z > a) {
                    muon_update(m->params_memory, m->grads_memory, m->m_memory + (a - lo), m->master ? m->master + (a - lo) : NULL,
                                a, rows, cols, (int)((z - a) / n), m->config.channels, o, m->muon_scratch, m->stream);
                }
            }
            start += m->param_sizes[i];
        }
    }
    grad_reduce_gather_params(&m->red, m->params_memory, m->stream);
}

// peak dense bf16 tensor FLOP/s of the GPU, for MFU (llmc/gpu_peak.h), and its explanation for the
// banner (why may be NULL); -1 when it is unknown: the step line then prints MFU n/a
static double gpu_peak_flops(int device, char *why, size_t why_size) {
    cudaDeviceProp prop;
    cudaCheck(cudaGetDeviceProperties(&prop, device));
    int clock_khz = 0;
    cudaCheck(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, device));
    const double peak = gpu_peak_lookup(prop.name, prop.multiProcessorCount, clock_khz, why, why_size);
    return peak > 0 ? peak : -1.0;
}

// ----------------------------------------------------------------------------
// the Backend for the shared training loop

// ---- phase timers: events on the stream around each phase, and NVTX ranges around the same
// phases for Nsight Systems (host side); nothing here waits

// the events of micro-step k (three: forward start, backward start, backward end), created on first use
static cudaEvent_t *gpt2_micro_events(GPT2 *m, int k) {
    if (k >= m->micro_ev_steps) {
        cudaEvent_t *grown = (cudaEvent_t *)mallocCheck(3 * (size_t)(k + 1) * sizeof(cudaEvent_t));
        if (m->micro_ev_steps > 0) { memcpy(grown, m->micro_ev, 3 * (size_t)m->micro_ev_steps * sizeof(cudaEvent_t)); }
        free(m->micro_ev);
        m->micro_ev = grown;
        for (int i = 3 * m->micro_ev_steps; i < 3 * (k + 1); i++) { cudaCheck(cudaEventCreate(&m->micro_ev[i])); }
        m->micro_ev_steps = k + 1;
    }
    return m->micro_ev + 3 * k;
}

// milliseconds between two completed events
static double gpt2_event_ms(cudaEvent_t from, cudaEvent_t to) {
    float ms = 0.0f;
    cudaCheck(cudaEventElapsedTime(&ms, from, to));
    return (double)ms;
}

static void cuda_range(const char *name, int push) {
    if (push) { nvtxRangePushA(name); } else { nvtxRangePop(); }
}

static void cuda_train_micro_step(Backend *b, const int *inputs, const int *targets, int B, int T, float dloss, int k,
                                  int n) {
    GPT2 *m = (GPT2 *)b->self;
    cudaEvent_t *ev = gpt2_micro_events(m, k);
    if (k == 0) {
        cudaCheck(cudaMemsetAsync(m->grads_memory, 0, m->red.padded * sizeof(floatX), m->stream));
        cudaCheck(cudaMemsetAsync(m->acts.loss_acc, 0, sizeof(float), m->stream));
    }
    nvtxRangePushA("forward");
    cudaCheck(cudaEventRecord(ev[0], m->stream));
    gpt2_forward(m, inputs, targets, B, T, FWD_TRAIN, dloss);
    loss_sum_accumulate(m->acts.loss_acc, m->acts.losses, B * T, 1.0f / ((float)B * T), m->stream);
    cudaCheck(cudaEventRecord(ev[1], m->stream));
    nvtxRangePop();
    nvtxRangePushA("backward");
    gpt2_backward(m, inputs, B, T, k == n - 1);
    cudaCheck(cudaEventRecord(ev[2], m->stream));
    nvtxRangePop();
    m->micro_steps = k + 1;
}

static double cuda_step_loss_sum(Backend *b) {
    GPT2 *m = (GPT2 *)b->self;
    cudaCheck(cudaMemcpyAsync(m->scalar_pinned, m->acts.loss_acc, sizeof(float), cudaMemcpyDeviceToHost, m->stream));
    gpt2_sync(m, "the step's loss");
    return (double)m->scalar_pinned[0];
}

// comm: the stream's wait for the reduction (exposed communication); optimizer: the norm up to the
// reduction's norm_ready event, which grad_reduce_norm waits for
static float cuda_reduce_grads(Backend *b) {
    GPT2 *m = (GPT2 *)b->self;
    nvtxRangePushA("comm");
    cudaCheck(cudaEventRecord(m->comm_ev[0], m->stream));
    grad_reduce_finish(&m->red, m->grads_memory, m->stream);
    cudaCheck(cudaEventRecord(m->comm_ev[1], m->stream));
    nvtxRangePop();
    nvtxRangePushA("optimizer");
    float norm = grad_reduce_norm(&m->red, m->grads_memory, m->acts.scratch, m->stream);
    nvtxRangePop();
    return norm;
}

static void cuda_update(Backend *b, const OptSettings *o) {
    GPT2 *m = (GPT2 *)b->self;
    cudaEvent_t *ev = m->update_ev[m->update_turn];
    nvtxRangePushA("optimizer");
    cudaCheck(cudaEventRecord(ev[0], m->stream));
    gpt2_update(m, o);
    cudaCheck(cudaEventRecord(ev[1], m->stream));
    nvtxRangePop();
    m->update_unread[m->update_turn] = 1;
    m->updated = 1;
    matmul_algos_save();  // -mt 1: the choices of this step's new GEMM shapes, for a resume
}

/*
 * The step's phases from its events. Forward, backward, comm and the norm are complete (the loss and
 * the norm were waited for). The update usually still runs: its time is read when its end event has
 * completed, else the previous update's stands (read now: this step's waits came after it).
 */
static void cuda_step_phases(Backend *b, double ms[NUM_PHASES]) {
    GPT2 *m = (GPT2 *)b->self;
    ms[PHASE_FORWARD] = ms[PHASE_BACKWARD] = 0.0;
    for (int k = 0; k < m->micro_steps; k++) {
        const cudaEvent_t *ev = m->micro_ev + 3 * k;
        ms[PHASE_FORWARD] += gpt2_event_ms(ev[0], ev[1]);
        ms[PHASE_BACKWARD] += gpt2_event_ms(ev[1], ev[2]);
    }
    ms[PHASE_COMM] = gpt2_event_ms(m->comm_ev[0], m->comm_ev[1]);
    const int now = m->update_turn, before = 1 - now;
    if (m->update_unread[before]) {
        m->update_ms = gpt2_event_ms(m->update_ev[before][0], m->update_ev[before][1]);
        m->update_unread[before] = 0;
    }
    if (m->update_unread[now]) {
        cudaError_t q = cudaEventQuery(m->update_ev[now][1]);
        if (q == cudaSuccess) {
            m->update_ms = gpt2_event_ms(m->update_ev[now][0], m->update_ev[now][1]);
            m->update_unread[now] = 0;
        } else if (q != cudaErrorNotReady) {
            cudaCheck(q);
        }
        m->update_turn = before;  // the next update records into the other pair
    }
    ms[PHASE_OPTIMIZER] = gpt2_event_ms(m->comm_ev[1], m->red.norm_ready) + (m->updated ? m->update_ms : 0.0);
    m->updated = 0;
}

static void cuda_forward_losses(Backend *b, const int *inputs, const int *targets, int B, int T, float *losses) {
    GPT2 *m = (GPT2 *)b->self;
    gpt2_forward(m, inputs, targets, B, T, FWD_EVAL, 1.0f);
    const size_t BT = (size_t)B * T;
    cudaCheck(cudaMemcpyAsync(m->losses_pinned, m->acts.losses, BT * sizeof(float), cudaMemcpyDeviceToHost, m->stream));
    gpt2_sync(m, "the evaluation losses");
    memcpy(losses, m->losses_pinned, BT * sizeof(float));
}

// generation: one sequence laid out at the built T, so that a growing text keeps its rows where they
// are and each call computes only the tokens after `cached` (gpt2_forward_rows); then the softmax
// over the V real tokens of the logits at position pos, on the host (V values, once per sampled
// token: not worth a kernel), from the bf16 logits
static void cuda_forward_probs(Backend *b, const int *tokens, int T, int pos, int cached, float *probs) {
    GPT2 *m = (GPT2 *)b->self;
    const int V = m->config.vocab_size, Vp = m->config.padded_vocab_size, from = cached < pos ? cached : pos;
    gpt2_stage_tokens(m, m->acts.inputs + from, m->inputs_pinned, tokens + from, (size_t)(T - from));
    cudaCheck(cudaEventRecord(m->staged_ev, m->stream));
    gpt2_forward_rows(m, 1, m->seq_len, from, T);
    cudaCheck(cudaMemcpyAsync(m->row_pinned, m->acts.logits + (size_t)pos * Vp, (size_t)Vp * sizeof(uint16_t),
                              cudaMemcpyDeviceToHost, m->stream));
    gpt2_sync(m, "the sampling logits");
    float maxv = -INFINITY;
    for (int i = 0; i < V; i++) {
        probs[i] = bf16_to_float(m->row_pinned[i]);
        if (probs[i] > maxv) { maxv = probs[i]; }
    }
    double sum = 0.0;
    for (int i = 0; i < V; i++) {
        probs[i] = expf(probs[i] - maxv);
        sum += probs[i];
    }
    const float inv = (float)(1.0 / sum);
    for (int i = 0; i < V; i++) { probs[i] *= inv; }
}

static void cuda_copy_params(Backend *b, size_t offset, size_t count, void *dst) {
    gpt2_params_download((GPT2 *)b->self, offset, count, (uint16_t *)dst);
}

static void *cuda_host_alloc(Backend *b, size_t bytes) {
    (void)b;
    void *p = NULL;
    cudaCheck(cudaMallocHost(&p, bytes > 0 ? bytes : 1));
    return p;
}

static void cuda_host_free(Backend *b, void *p) {
    (void)b;
    cudaCheck(cudaFreeHost(p));
}

static void cuda_load_model(Backend *b, const char *path) { gpt2_load((GPT2 *)b->self, path); }

static void cuda_get_opt_state(Backend *b, size_t offset, size_t count, float *mo, float *vo, float *master) {
    GPT2 *m = (GPT2 *)b->self;
    cudaRequire(offset >= m->red.offset && offset + count <= m->red.offset + m->red.count,
                "range [%zu, %zu) outside the held range", offset, offset + count);
    const size_t k = offset - m->red.offset, bytes = count * sizeof(float);
    cudaCheck(cudaMemcpyAsync(mo, m->m_memory + k, bytes, cudaMemcpyDeviceToHost, m->stream));
    cudaCheck(cudaMemcpyAsync(vo, m->v_memory + k, bytes, cudaMemcpyDeviceToHost, m->stream));
    if (master && m->master) { cudaCheck(cudaMemcpyAsync(master, m->master + k, bytes, cudaMemcpyDeviceToHost, m->stream)); }
    gpt2_sync(m, "the optimizer state download");
}

static void cuda_set_opt_state(Backend *b, size_t offset, size_t count, const float *mi, const float *vi,
                               const float *master) {
    GPT2 *m = (GPT2 *)b->self;
    cudaRequire(offset >= m->red.offset && offset + count <= m->red.offset + m->red.count,
                "range [%zu, %zu) outside the held range", offset, offset + count);
    const size_t k = offset - m->red.offset, bytes = count * sizeof(float);
    cudaCheck(cudaMemcpyAsync(m->m_memory + k, mi, bytes, cudaMemcpyHostToDevice, m->stream));
    cudaCheck(cudaMemcpyAsync(m->v_memory + k, vi, bytes, cudaMemcpyHostToDevice, m->stream));
    // a state file without master weights (the CPU trainer's, train_gpt2.py's, a -w 0 run's) leaves
    // them as loading the model file set them: exact from an fp32 file, widened from a bf16 one
    if (m->master && master) {
        cudaCheck(cudaMemcpyAsync(m->master + k, master, bytes, cudaMemcpyHostToDevice, m->stream));
    }
    gpt2_sync(m, "the optimizer state upload");
}

static int cuda_device_readings(Backend *b, DeviceReadings *out) {
    (void)b;
    return gpu_telemetry_read(out);
}

static uint32_t cuda_params_crc(Backend *b) {
    GPT2 *m = (GPT2 *)b->self;
    uint16_t *bf = gpt2_params_to_host(m);
    uint32_t crc = crc32_update(0, bf, m->num_params * sizeof(uint16_t));
    free(bf);
    return crc;
}

void gpt2_make_backend(Backend *b, GPT2 *m, int T, double peak_flops) {
    memset(b, 0, sizeof(*b));
    b->self = m;
    b->name = "cuda (bf16, fp32 master weights)";
    if (!m->master) { b->name = "cuda (bf16, no master weights)"; }
    b->config = m->config;
    b->num_params = m->num_params;
    b->B = m->batch_size;
    b->T = m->seq_len;
    b->has_master = m->master != NULL;
    const KernelChoices kernels = {m->recompute, m->gelu_fusion, matmul_bias_grad_epilogue, (int)m->attention};
    b->kernels = kernels;
    b->opt_offset = m->red.offset;
    b->opt_count = m->red.count;
    b->flops_per_token = gpt2_flops_per_token(&m->config, T);
    b->peak_flops = peak_flops;
    b->train_micro_step = cuda_train_micro_step;
    b->step_loss_sum = cuda_step_loss_sum;
    b->reduce_grads = cuda_reduce_grads;
    b->update = cuda_update;
    b->forward_losses = cuda_forward_losses;
    b->forward_probs = cuda_forward_probs;
    b->model_version = MODEL_VERSION_BF16;
    b->copy_params = cuda_copy_params;
    b->host_alloc = cuda_host_alloc;
    b->host_free = cuda_host_free;
    b->load_model = cuda_load_model;
    b->get_opt_state = cuda_get_opt_state;
    b->set_opt_state = cuda_set_opt_state;
    b->params_crc = cuda_params_crc;
    b->step_phases = cuda_step_phases;
    b->range = cuda_range;
    b->device_readings = cuda_device_readings;
}

// ----------------------------------------------------------------------------
// processes

/*
 * The model that the flags describe, on this process's GPU (after cublas_init): the gradient
 * reduction plan of `kind` with -z, then the memory check and the allocations for -b, -t, -r, -w
 * and -at (gpt2_build), and -ge, -mt, -bg. nccl: the communicator of kind NCCL, else NULL. Parameters are left
 * unset: gpt2_init_from_args fills them. Used by main, test_gpt2.cu and dev/bench/bench_layers.cu.
 */
static void gpt2_build_from_args(GPT2 *m, const TrainArgs *a, const GPT2Config *config, GradReduceKind kind, Comm *c,
                                 void *nccl) {
    GradReducer plan;
    const int muon = opt_is_muon(a);
    grad_reduce_plan(&plan, kind, c, a->zero_stage, muon, config);
    gpt2_build(m, config, a->B, a->T, a->recompute, a->master_weights, attention_impl(a->attention, "-at", a->T), &plan,
               kind == GRAD_REDUCE_NCCL ? nccl : NULL, muon);
    m->gelu_fusion = a->gelu_fusion;
    cublas_set_tuning(a->matmul_tune, a->output_dir, c->rank);
    matmul_set_bias_grad_epilogue(a->bias_grad);
}

// the parameters of -e: its file (model_file: train_resolve_model's), or the seeded init of the
// descriptor (the same seed on every rank gives the same model, which the training loop checks)
static void gpt2_init_from_args(GPT2 *m, const TrainArgs *a, const char *model_file) {
    if (model_file) {
        gpt2_load(m, model_file);
        return;
    }
    float *init = (float *)mallocCheck(m->num_params * sizeof(float));
    gpt2_init_params(init, &m->config, a->seed);
    gpt2_set_params_fp32(m, init);
    free(init);
}

// The memory of GPU `device` (cudaMemGetInfo), or, with device < 0, of local rank's GPU if one is
// visible: not known without one (--plan then prints the plan without it). `unallocated`: bytes a run
// holds when it measures but this process does not (--plan: the cuBLASLt workspace), taken off the
// free memory so that --plan sees a run's budget.
static DeviceMemory gpu_device_memory(int device, int local_rank, size_t unallocated) {
    DeviceMemory d;
    memset(&d, 0, sizeof(d));
    d.name = "GPU";
    d.margin = 0.05;  // CUDA's, cuBLAS's and NCCL's own allocations, the allocator's rounding
    int count = 0;
    cudaError_t err = cudaGetDeviceCount(&count);
    if (err == cudaErrorInsufficientDriver) {
        (void)cudaGetLastError();
        char problem[160];
        gpu_driver_problem(problem, sizeof(problem));
        snprintf(d.what, sizeof(d.what), "unknown: %s", problem);
        return d;
    }
    if (err != cudaSuccess || count == 0) {
        (void)cudaGetLastError();
        snprintf(d.what, sizeof(d.what), "unknown: no CUDA GPU is visible (%s)",
                 err != cudaSuccess ? cudaGetErrorString(err) : "0 devices");
        return d;
    }
    if (device < 0) {
        device = local_rank % count;
        cudaCheck(cudaSetDevice(device));
    }
    cudaDeviceProp prop;
    cudaCheck(cudaGetDeviceProperties(&prop, device));
    cudaCheck(cudaMemGetInfo(&d.free, &d.total));
    d.free = d.free > unallocated ? d.free - unallocated : 0;
    d.known = 1;
    snprintf(d.what, sizeof(d.what), "GPU %d (%s): %.2f GiB free of %.2f (cudaMemGetInfo)", device, prop.name, d.free / GiB,
             d.total / GiB);
    return d;
}

/*
 * --plan N: the memory plan of the flags' run on N ranks (the gradient reduction -pb would use:
 * none for one rank, else -pb's), printed by rank 0, with this machine's GPU if one is visible (the
 * plan itself needs none). Returns the exit code.
 */
static int cuda_plan_main(TrainSetup *run, AttentionImpl attention) {
    const int W = run->args.plan;
    const DeviceMemory dev = gpu_device_memory(-1, run->comm.local_rank, cuda_alloc_bytes(CUBLASLT_WORKSPACE_BYTES));
    const GradReduceKind kind = W == 1 ? GRAD_REDUCE_NONE : !strcmp(run->args.backend, "mpi") ? GRAD_REDUCE_MPI : GRAD_REDUCE_NCCL;
    Comm ranks;  // rank 0 of W, for the reduction plan's arithmetic
    memset(&ranks, 0, sizeof(ranks));
    ranks.world_size = W;
    GradReducer red;
    grad_reduce_plan(&red, kind, &ranks, run->args.zero_stage, opt_is_muon(&run->args), &run->config);
    CudaPlan cp;
    gpt2_plan_of(&cp, &run->config, run->args.T, run->args.master_weights, attention, &red, opt_is_muon(&run->args),
                 dev.known, &run->args);
    cp.probing = 1;  // a plan to read: a B that cuDNN refuses shows as not fitting, with cuDNN's reason
    Planner planner = {"train_gpt2cu", gpt2_plan, &cp, 3, dev, 0};
    size_t *bounds = NULL;  // the optimizer's ZeRO shards, which the checkpoint snapshot copies
    if (red.zero) {
        bounds = (size_t *)mallocCheck(((size_t)W + 1) * sizeof(size_t));
        zero_bounds(&run->config, W, red.uneven, bounds);
    }
    planner.ckpt_snapshot = ckpt_snapshot_plan_bytes(&run->args, gpt2_num_params(&run->config), MODEL_VERSION_BF16,
                                                     run->args.master_weights, W, bounds);
    free(bounds);
    checkpoint_plan_resume(&planner.resume, &run->args, run->comm.rank);  // with -y 1: the choices of the resume
    if (run->comm.rank == 0) { plan_print(&planner, &run->args, W, &run->config); }
    attention_free();
    comm_finalize(&run->comm);
    return 0;
}

// ----------------------------------------------------------------------------
#ifndef TESTING
// -b auto and -r auto: the largest B, then the least recomputation, whose plan fits the memory free
// after NCCL and cuBLAS have their own
static void cuda_auto_plan(TrainSetup *run, GradReduceKind kind, AttentionImpl attention, int device) {
    GradReducer red;
    grad_reduce_plan(&red, kind, &run->comm, run->args.zero_stage, opt_is_muon(&run->args), &run->config);
    CudaPlan cp;
    gpt2_plan_of(&cp, &run->config, run->args.T, run->args.master_weights, attention, &red, opt_is_muon(&run->args), 1,
                 &run->args);
    cp.probing = 1;
    Planner planner = {"train_gpt2cu", gpt2_plan, &cp, 3, gpu_device_memory(device, 0, 0)};  // after cublas_init
    checkpoint_plan_resume(&planner.resume, &run->args, run->comm.rank);
    plan_auto(&run->args, &run->comm, &planner);
    attention_forget_probes();  // the graphs of the B tried: only the run's own count (determinism)
}

// rank 0's startup lines: the device and how the run uses it, the MFU peak, a warning where the
// run is not bitwise reproducible
static void cuda_banner(const TrainSetup *run, GPT2 *model, ProcessGroup *group, int device, const char *peak_why) {
    cudaDeviceProp prop;
    cudaCheck(cudaGetDeviceProperties(&prop, device));
    const TrainArgs *a = &run->args;
    char reduction[96];
    process_group_describe(group, reduction, sizeof(reduction));
    printf("device: %s (sm_%d%d, %d SMs) | gradient reduction: %s%s | recompute -r %d | attention: %s%s | GELU -ge %d | "
           "matmul algorithms: %s | bias gradients: %s | GPU memory planned %.2f GiB (--plan %d prints its rows)\n", prop.name, prop.major,
           prop.minor, prop.multiProcessorCount, reduction, a->zero_stage && run->comm.world_size > 1 ? ", ZeRO-1" : "",
           a->recompute, gpt2_attention_describe(model), strcmp(a->attention, "auto") ? "" : " by -at auto",
           a->gelu_fusion, a->matmul_tune ? "the fastest by timing (-mt 1)" : "the heuristic's (-mt 0)",
           a->bias_grad ? "in the weight-gradient matmuls (-bg 1)" : "column sums (-bg 0)",
           model->planned_bytes / GiB, run->comm.world_size);
    printf("MFU peak: %s\n", peak_why);
    fflush(stdout);  // the lines above before a warning on stderr
    if (a->matmul_tune && matmul_algo_file()[0] == '\0') {
        llmc_warn("-mt 1 without -o: the matmul algorithms are chosen by timing and not kept, so another run may choose "
                  "others and differ in the last bits; with -o they are kept there for a resume");
    } else if (a->matmul_tune) {  // the choices of an earlier run into -o (a resume) make this one compute its bits
        printf("matmul algorithms (-mt 1): kept in %s; %d read from there, new shapes timed and added\n",
               matmul_algo_file(), matmul_algos_read());
    }
    if (!gpt2_attention_deterministic(model)) {
        llmc_warn("-at cudnn: cuDNN refused its deterministic attention backward for this shape, so this run is not "
                  "bitwise reproducible (nor is a resume); -at own is");
    }
    fflush(stdout);
}

// the trainer allocates everything up front, so what is in use at the end is the peak (for this
// GPU: other processes on it are included); this process's part is counted from after its CUDA
// context was made (free_at_start; cuBLAS's and NCCL's own allocations are in it, not in the plan)
static void cuda_memory_end(size_t free_at_start, const GPT2 *model) {
    size_t free_bytes = 0, total_bytes = 0;
    cudaCheck(cudaMemGetInfo(&free_bytes, &total_bytes));
    printf("GPU memory in use at the end: %.2f GiB of %.2f (all processes on this GPU); allocated by this run %.3f "
           "GiB, planned %.3f GiB\n", (total_bytes - free_bytes) / GiB, total_bytes / GiB,
           ((double)free_at_start - (double)free_bytes) / GiB, model->planned_bytes / GiB);
}

int main(int argc, char **argv) {
    TrainSetup run;
    train_start(&run, &argc, &argv);
    const AttentionImpl attention = attention_impl(run.args.attention, "-at", run.args.T);  // before the GPU: a bad -at stops at once
    if (run.args.plan > 0) { return cuda_plan_main(&run, attention); }

    const int device = gpu_select_device(&run.comm, (const void *)cast_fp32_to_bf16_kernel, LLMC_CUDA_ARCHS);
    size_t free_at_start = 0, total_bytes = 0;  // after the CUDA context: the baseline of this process's allocations
    cudaCheck(cudaMemGetInfo(&free_at_start, &total_bytes));
    ProcessGroup group;
    process_group_init(&group, &run.comm, run.args.backend, run.args.comm_timeout, device);
    const GradReduceKind kind = group.kind;
    void *nccl = process_group_nccl(&group);
    cublas_init();
    if (run.args.B == ARGS_AUTO || run.args.recompute == ARGS_AUTO) {  // after NCCL and cuBLAS
        cuda_auto_plan(&run, kind, attention, device);
    }
    GPT2 model;
    gpt2_build_from_args(&model, &run.args, &run.config, kind, &run.comm, nccl);
    gpt2_init_from_args(&model, &run.args, run.model_file);
    Backend backend;
    char peak_why[256];
    gpt2_make_backend(&backend, &model, run.args.T, gpu_peak_flops(device, peak_why, sizeof(peak_why)));
    const int chatty = run.comm.rank == 0 && !run.args.prompt[0];  // the generate mode prints only its text
    if (chatty) { cuda_banner(&run, &model, &group, device, peak_why); }
    int rc = train_run(&run.args, &run.comm, &backend);
    gpt2_sync(&model, "the end of training");
    matmul_algos_save();  // the shapes first met in the last evaluations and samples
    if (chatty) {
        cuda_memory_end(free_at_start, &model);
        matmul_tune_report();
        matmul_bias_grad_report();
    }
    gpt2_free(&model);
    attention_free();
    cublas_free();
    process_group_free(&group);
    comm_finalize(&run.comm);
    return rc;
}
#endif
