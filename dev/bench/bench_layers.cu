/*
 * Where the milliseconds of one training step go, on one GPU (issue 11), and the two numbers the
 * scaling estimate needs (issues 5, 17):
 *   1. phases of the real step: CUDA events around the trainer's own functions, in the order one
 *      micro-step of cuda_train_micro_step runs them, then the gradient norm and the AdamW update:
 *      zeroing the gradients, the forward (with the classifier), the backward's LM head + final
 *      LayerNorm, each layer's backward (the window in which that layer's gradient reduction
 *      overlaps the backward of the layers below), the embeddings' backward, the norm, the update;
 *   2. every operation of the step, run alone at the step's shapes on the model's own buffers (after
 *      the real steps, so the data are real), times how often a step runs it: each one's share of
 *      the step, and the matmuls' TFLOP/s (2 FLOP per multiply-add). The difference between the
 *      sum of the operations and the phases is what the list misses: launch gaps, host waits.
 *      The matmul backward is split into its three parts (bias gradient, weight gradient, input
 *      gradient) to show what the separate bias pass costs (with -bg 1, bias and weight gradient
 *      are one row: the GEMM's epilogue sums the bias gradient). Attention is the -at implementation;
 *   3. one NCCL reduction of one layer's gradients (12 slices in one group, as llmc/cuda/grad_reduce.cuh
 *      launches it) on a 1-rank communicator: the launch and local copy cost, with no link
 *      involved, and the same for all gradients at once.
 * The parameters are uniform random in [-0.04, 0.04), not the trainer's normal init: values do not
 * change the time, never zeros, and the normal init takes ~40 s of host time at d48.
 *
 *   build/bench_layers -e d12 -b 16 -t 1024 [-r 0|1|2 (1)] [-x iterations]   (trainer flags; make build/bench_layers)
 */
#define TESTING
#include <algorithm>
#include "train_gpt2.cu"

// ---- 1. phases of the real step

// one micro-step, forward + backward, with an event after each phase; returns the number of events
// the settings of update 1 at a constant lr of 1e-5 and gradient norm `norm`, as the training loop
// makes them (llmc/optimizer.h: -c 0.1, clipping at 1, AdamW, or Muon with -opt muon)
static OptSettings bench_update_settings(const TrainArgs *a, float norm) {
    TrainArgs b = *a;
    b.weight_decay = 0.1f;
    LRSchedule sched;
    lr_schedule_init(&sched, "constant", 1e-5f, 0, 1, 1.0f, 0.0f);
    return opt_settings(&b, &sched, 0, norm, 1);
}

static int timed_step(GPT2 *m, const TrainArgs *a, const int *x, const int *y, int B, int T, cudaEvent_t *ev) {
    const int L = m->config.num_layers;
    int e = 0;
    cudaCheck(cudaEventRecord(ev[e++], m->stream));
    cudaCheck(cudaMemsetAsync(m->grads_memory, 0, m->red.padded * sizeof(floatX), m->stream));
    cudaCheck(cudaMemsetAsync(m->acts.loss_acc, 0, sizeof(float), m->stream));
    cudaCheck(cudaEventRecord(ev[e++], m->stream));
    gpt2_forward(m, x, y, B, T, FWD_TRAIN, 1.0f / ((float)B * T));
    loss_sum_accumulate(m->acts.loss_acc, m->acts.losses, B * T, 1.0f / ((float)B * T), m->stream);
    cudaCheck(cudaEventRecord(ev[e++], m->stream));
    gpt2_backward_head(m, B, T);
    cudaCheck(cudaEventRecord(ev[e++], m->stream));
    for (int l = L - 1; l >= 0; l--) {
        gpt2_backward_layer(m, l, B, T);
        cudaCheck(cudaEventRecord(ev[e++], m->stream));
    }
    gpt2_backward_embed(m, x, B, T);
    cudaCheck(cudaEventRecord(ev[e++], m->stream));
    float norm = grad_reduce_norm(&m->red, m->grads_memory, m->acts.scratch, m->stream);
    cudaCheck(cudaEventRecord(ev[e++], m->stream));
    const OptSettings o = bench_update_settings(a, norm);
    gpt2_update(m, &o);
    cudaCheck(cudaEventRecord(ev[e++], m->stream));
    cudaCheck(cudaEventSynchronize(ev[e - 1]));
    return e;
}

// ---- 2. the operations one by one

typedef struct {
    cudaStream_t s;
    cudaEvent_t a, b;
    double step_ms;  // the phases' sum, for the shares
    double sum_ms;   // the operations' ms per step so far
} OpTimer;

// median over 5 batches of 10 back-to-back calls of fn (after one warm-up call), in ms per call;
// prints one row: count per step, ms per call, ms per step, share, TFLOP/s when flop > 0
template <class F>
static void op_row(OpTimer *t, const char *name, int count, double flop, F fn) {
    fn();
    double med[5];
    for (int r = 0; r < 5; r++) {
        cudaCheck(cudaEventRecord(t->a, t->s));
        for (int i = 0; i < 10; i++) { fn(); }
        cudaCheck(cudaEventRecord(t->b, t->s));
        cudaCheck(cudaEventSynchronize(t->b));
        float ms;
        cudaCheck(cudaEventElapsedTime(&ms, t->a, t->b));
        med[r] = ms / 10.0;
    }
    std::sort(med, med + 5);
    const double each = med[2], per_step = each * count;
    t->sum_ms += per_step;
    printf("  %-46s %4d %9.4f %9.3f %6.1f%%", name, count, each, per_step, 100.0 * per_step / t->step_ms);
    if (flop > 0) { printf(" %8.0f", flop / (each * 1e-3) / 1e12); }
    printf("\n");
}

// the three parts of matmul_backward (dbias, dweight, dinp) for a linear layer inp (BT, C) -> (BT, OC)
static void matmul_backward_rows(OpTimer *t, const char *layer, int count, floatX *dinp, floatX *dweight, floatX *dbias,
                                 const floatX *dout, const floatX *inp, const floatX *weight, int B, int T, int C, int OC,
                                 const floatX *pre_gelu, float *scratch) {
    char name[96];
    const double flop = 2.0 * B * T * (double)C * OC;
    if (dbias && matmul_bias_grad_epilogue) {  // -bg 1: one GEMM for both, as the step runs them
        snprintf(name, sizeof(name), "bwd  %s: weight + bias gradient (-bg 1)", layer);
        op_row(t, name, count, flop, [&] { matmul_backward(NULL, dweight, dbias, dout, inp, weight, B, T, C, OC, NULL, scratch, t->s); });
    } else {
        if (dbias) {
            snprintf(name, sizeof(name), "bwd  %s: bias gradient", layer);
            op_row(t, name, count, 0.0, [&] { matmul_backward(NULL, NULL, dbias, dout, inp, weight, B, T, C, OC, NULL, scratch, t->s); });
        }
        snprintf(name, sizeof(name), "bwd  %s: weight gradient", layer);
        op_row(t, name, count, flop, [&] { matmul_backward(NULL, dweight, NULL, dout, inp, weight, B, T, C, OC, NULL, scratch, t->s); });
    }
    snprintf(name, sizeof(name), "bwd  %s: input gradient%s", layer, pre_gelu ? " (x dGELU)" : "");
    op_row(t, name, count, flop, [&] { matmul_backward(dinp, NULL, NULL, dout, inp, weight, B, T, C, OC, pre_gelu, scratch, t->s); });
}

// every operation of a step at layer 0's buffers (the layers all have the same shapes)
static void op_table(GPT2 *m, const TrainArgs *args, const int *x, int B, int T, double step_ms) {
    const GPT2Config *c = &m->config;
    const int C = c->channels, L = c->num_layers, V = c->vocab_size, Vp = c->padded_vocab_size;
    const size_t BT = (size_t)B * T, BTC = BT * C;
    ParameterTensors *p = &m->params, *g = &m->grads;
    ActivationTensors *a = &m->acts;
    OpTimer t = {m->stream, NULL, NULL, step_ms, 0.0};
    cudaCheck(cudaEventCreate(&t.a));
    cudaCheck(cudaEventCreate(&t.b));
    cudaStream_t s = m->stream;
    LayerActs la = layer_acts(m, 0, B, T);
    floatX *ln1 = la.ln1, *ln2 = la.ln2, *qkv = la.qkv, *atty = la.atty;
    floatX *residual2 = la.residual2, *fch = la.fch, *fch_gelu = la.fch_gelu, *dbig = a->logits;
    const floatX *last_residual3 = layer_acts(m, L - 1, B, T).residual3;
    const double causal_att = 2.0 * B * (double)T * T * C;  // QK^T and PV over the causal half
    printf("every operation alone at the step's shapes (layer 0's buffers), median of 5 x 10 calls:\n");
    printf("  %-46s %4s %9s %9s %7s %8s\n", "operation", "x", "ms each", "ms/step", "share", "TFLOP/s");
    // forward
    op_row(&t, "fwd  embeddings + first LayerNorm", 1, 0.0, [&] {
        encoder_forward(a->encoded, a->inputs, p->wte, p->wpe, B, T, C, s);
        layernorm_forward(ln1, a->ln1_mean, a->ln1_rstd, a->encoded, p->ln1w, p->ln1b, B, T, C, s);
    });
    op_row(&t, "fwd  qkv matmul + bias", L, 2.0 * BTC * 3 * C,
           [&] { matmul_forward(qkv, ln1, p->qkvw, p->qkvb, B, T, C, 3 * C, NULL, s); });
    op_row(&t, "fwd  attention", L, causal_att, [&] { gpt2_attention_forward(m, atty, a->att_lse, qkv, B, T); });
    op_row(&t, "fwd  attproj matmul + bias", L, 2.0 * BTC * C,
           [&] { matmul_forward(a->btc, atty, p->attprojw, p->attprojb, B, T, C, C, NULL, s); });
    op_row(&t, "fwd  residual add + LayerNorm", 2 * L, 0.0, [&] {
        fused_residual_forward(residual2, ln2, a->ln2_mean, a->ln2_rstd, a->encoded, a->btc, p->ln2w, p->ln2b, (int)BT, C, s);
    });
    if (m->gelu_fusion >= 1) {  // -ge: cuBLASLt's GELU epilogue, or our kernel after a plain matmul
        op_row(&t, "fwd  fc matmul + bias + GELU", L, 2.0 * BTC * 4 * C,
               [&] { matmul_forward(fch_gelu, ln2, p->fcw, p->fcb, B, T, C, 4 * C, fch, s); });
    } else {
        op_row(&t, "fwd  fc matmul + bias", L, 2.0 * BTC * 4 * C,
               [&] { matmul_forward(fch, ln2, p->fcw, p->fcb, B, T, C, 4 * C, NULL, s); });
        op_row(&t, "fwd  GELU (-ge 0)", L, 0.0, [&] { gelu_forward(fch_gelu, fch, BT * 4 * C, s); });
    }
    op_row(&t, "fwd  fcproj matmul + bias", L, 2.0 * BTC * 4 * C,
           [&] { matmul_forward(a->btc, fch_gelu, p->fcprojw, p->fcprojb, B, T, 4 * C, C, NULL, s); });
    op_row(&t, "fwd  classifier matmul (logits)", 1, 2.0 * BTC * Vp,
           [&] { matmul_forward(a->logits, a->lnf, p->wte, NULL, B, T, C, Vp, NULL, s); });
    op_row(&t, "fwd  fused classifier (softmax, loss, dlogits)", 1, 0.0,
           [&] { fused_classifier(a->logits, a->losses, 1.0f / BT, a->targets, B, T, V, Vp, 1, s); });
    op_row(&t, "fwd  loss sum", 1, 0.0, [&] { loss_sum_accumulate(a->loss_acc, a->losses, (int)BT, 1.0f / BT, s); });
    // backward: the head, then one layer in gpt2_backward_layer's order
    matmul_backward_rows(&t, "LM head", 1, a->btc, g->wte, NULL, a->logits, a->lnf, p->wte, B, T, C, Vp, NULL, a->scratch);
    op_row(&t, "bwd  final LayerNorm", 1, 0.0, [&] {
        layernorm_backward(a->dresidual, g->lnfw, g->lnfb, a->btc, last_residual3, p->lnfw, a->lnf_mean, a->lnf_rstd, B, T,
                           C, a->scratch, s);
    });
    if (m->recompute >= 1) {
        op_row(&t, "bwd  GELU recompute (-r >= 1)", L, 0.0, [&] { gelu_forward(fch_gelu, fch, BT * 4 * C, s); });
    }
    matmul_backward_rows(&t, "fcproj", L, dbig, g->fcprojw, g->fcprojb, a->dresidual, fch_gelu, p->fcprojw, B, T, 4 * C, C,
                         m->gelu_fusion >= 2 ? fch : NULL, a->scratch);
    if (m->gelu_fusion < 2) {
        op_row(&t, "bwd  dGELU (-ge 0, 1)", L, 0.0, [&] { gelu_backward(dbig, fch, dbig, BT * 4 * C, s); });
    }
    if (m->recompute >= 2) {
        op_row(&t, "bwd  LayerNorm recompute (-r 2)", 2 * L, 0.0,
               [&] { layernorm_forward(ln2, NULL, NULL, residual2, p->ln2w, p->ln2b, B, T, C, s); });
    }
    matmul_backward_rows(&t, "fc", L, a->btc, g->fcw, g->fcb, dbig, ln2, p->fcw, B, T, C, 4 * C, NULL, a->scratch);
    op_row(&t, "bwd  LayerNorm (ln1, ln2)", 2 * L, 0.0, [&] {
        layernorm_backward(a->dresidual, g->ln2w, g->ln2b, a->btc, residual2, p->ln2w, a->ln2_mean, a->ln2_rstd, B, T, C,
                           a->scratch, s);
    });
    matmul_backward_rows(&t, "attproj", L, a->btc, g->attprojw, g->attprojb, a->dresidual, atty, p->attprojw, B, T, C, C,
                         NULL, a->scratch);
    op_row(&t, "bwd  attention", L, 2.5 * causal_att,
           [&] { gpt2_attention_backward(m, dbig, a->btc, qkv, atty, a->att_lse, B, T); });
    matmul_backward_rows(&t, "qkv", L, a->btc, g->qkvw, g->qkvb, dbig, ln1, p->qkvw, B, T, C, 3 * C, NULL, a->scratch);
    op_row(&t, "bwd  embeddings (with the host's plan)", 1, 0.0, [&] { gpt2_backward_embed(m, x, B, T); });
    // the update
    op_row(&t, "upd  gradient norm (its chunks' sums)", 1, 0.0, [&] {
        global_norm_chunk_sums(a->scratch, m->grads_memory, m->red.norm_starts, 0, m->red.norm_chunks, s);
    });
    const OptSettings o = bench_update_settings(args, 1.0f);
    op_row(&t, o.muon ? "upd  Muon and AdamW" : "upd  AdamW", 1, 0.0, [&] { gpt2_update(m, &o); });
    printf("sum of the operations: %.3f ms per step; the measured phases: %.3f ms; not in the list (launch gaps, "
           "host waits, memsets): %.3f ms (%.1f%%)\n", t.sum_ms, step_ms, step_ms - t.sum_ms,
           100.0 * (step_ms - t.sum_ms) / step_ms);
    cudaCheck(cudaEventDestroy(t.a));
    cudaCheck(cudaEventDestroy(t.b));
}

// ---- 3. NCCL on one rank

#ifdef MULTI_GPU
static void nccl_one_rank(GPT2 *m, const GPT2Config *config, int iters) {
    size_t off[12], len[12];
    const int ns = zero_layer_slices(config, 0, off, len);
    NcclContext ctx;
    memset(&ctx, 0, sizeof(ctx));
    ctx.rank = 0;
    ctx.world_size = 1;
    ctx.timeout_s = 60;
    ncclUniqueId id;
    ncclCheck(ncclGetUniqueId(&id));
    ncclCheck(ncclCommInitRank(&ctx.comm, 1, id, 0));
    nccl_stream_create(&ctx.stream);
    cudaEvent_t a, b;
    cudaCheck(cudaEventCreate(&a));
    cudaCheck(cudaEventCreate(&b));
    for (int mode = 0; mode < 2; mode++) {  // 0: one layer's 12 slices in a group; 1: all gradients in one call
        double total = 0.0;
        for (int it = -3; it < iters; it++) {
            cudaCheck(cudaEventRecord(a, ctx.stream));
            if (mode == 0) {
                ncclCheck(ncclGroupStart());
                for (int i = 0; i < ns; i++) {
                    ncclCheck(ncclAllReduce(m->grads_memory + off[i], m->grads_memory + off[i], len[i], ncclBfloat16, ncclSum,
                                            ctx.comm, ctx.stream));
                }
                ncclCheck(ncclGroupEnd());
            } else {
                ncclCheck(ncclAllReduce(m->grads_memory, m->grads_memory, m->num_params, ncclBfloat16, ncclSum, ctx.comm,
                                        ctx.stream));
            }
            cudaCheck(cudaEventRecord(b, ctx.stream));
            cudaCheck(cudaEventSynchronize(b));
            float ms;
            cudaCheck(cudaEventElapsedTime(&ms, a, b));
            if (it >= 0) { total += ms; }
        }
        printf("NCCL all-reduce on 1 rank, %s: %.4f ms\n", mode == 0 ? "one layer (12 slices, one group)" :
               "all gradients (one call)", total / iters);
    }
    ncclCommDestroy(ctx.comm);
}
#endif

int main(int argc, char **argv) {
    Comm comm;
    comm_init(&comm, &argc, &argv);
    TrainArgs args;
    args_parse(&args, argc, argv);
    comm_apply_args(&comm, &args);
    const int iters = args.max_steps > 0 ? args.max_steps : 20;
    GPT2Config config;
    if (train_resolve_model(&args, &config)) { llmc_die("bench_layers takes a descriptor (-e d12), not a file"); }
    if (args.B == ARGS_AUTO) { llmc_die("bench_layers takes -b as a number, not auto"); }
    if (args.recompute == ARGS_AUTO) { args.recompute = 1; }  // the trainer's memory-plan choice is not made here: -r 1 unless given
    const int device = gpu_select_device(&comm, (const void *)cast_fp32_to_bf16_kernel, LLMC_CUDA_ARCHS);
    cublas_init();
    GPT2 m;
    gpt2_build_from_args(&m, &args, &config, GRAD_REDUCE_NONE, &comm, NULL);
    uint64_t rng = (uint64_t)args.seed;
    float *init = (float *)mallocCheck(m.num_params * sizeof(float));
    for (size_t i = 0; i < m.num_params; i++) { init[i] = 0.08f * ((float)(splitmix64(&rng) >> 40) / 16777216.0f - 0.5f); }
    gpt2_set_params_fp32(&m, init);
    free(init);
    const int B = args.B, T = args.T, L = config.num_layers, C = config.channels;
    const size_t BT = (size_t)B * T;
    int *x = (int *)mallocCheck(BT * sizeof(int)), *y = (int *)mallocCheck(BT * sizeof(int));
    for (size_t i = 0; i < BT; i++) {
        x[i] = (int)(splitmix64(&rng) % (uint64_t)config.vocab_size);
        y[i] = (int)(splitmix64(&rng) % (uint64_t)config.vocab_size);
    }
    cudaDeviceProp prop;
    cudaCheck(cudaGetDeviceProperties(&prop, device));
    printf("bench_layers on %s: -e %s (L %d, C %d), B %d, T %d, -r %d, attention %s, -mt %d, -bg %d, %d timed steps after 3 warm-up\n",
           prop.name, args.model, L, C, B, T, args.recompute, gpt2_attention_describe(&m), args.matmul_tune, args.bias_grad, iters);

    // events: start, after the zeroing, the forward, the head, each layer (L), the embeddings, norm, update
    const int nev = L + 7;
    cudaEvent_t ev[nev];
    for (int i = 0; i < nev; i++) { cudaCheck(cudaEventCreate(&ev[i])); }
    double *ph = (double *)callocCheck(nev, sizeof(double));  // ph[i]: ms from event i to i + 1
    for (int it = -3; it < iters; it++) {
        const int e = timed_step(&m, &args, x, y, B, T, ev);
        if (it < 0) { continue; }
        for (int i = 0; i + 1 < e; i++) {
            float ms;
            cudaCheck(cudaEventElapsedTime(&ms, ev[i], ev[i + 1]));
            ph[i] += ms / iters;
        }
    }
    double lsum = 0.0, lmin = 1e30, lmax = 0.0, step = 0.0;
    for (int i = 0; i < L; i++) {
        const double v = ph[3 + i];
        lsum += v;
        lmin = v < lmin ? v : lmin;
        lmax = v > lmax ? v : lmax;
    }
    for (int i = 0; i + 1 < nev; i++) { step += ph[i]; }
    const double bwd = ph[2] + lsum + ph[L + 3];
    printf("phases of one step (ms, mean of %d):\n", iters);
    printf("  zero gradients %.3f | forward (with the classifier) %.3f | backward %.3f | gradient norm %.3f | AdamW %.3f "
           "| step %.3f ms = %.0f tok/s\n", ph[0], ph[1], bwd, ph[L + 4], ph[L + 5], step, BT / (step * 1e-3));
    printf("backward: LM head + final LayerNorm %.3f ms | per layer mean %.3f ms (min %.3f, max %.3f) | embeddings %.3f ms "
           "| total %.3f ms\n", ph[2], lsum / L, lmin, lmax, ph[L + 3], bwd);
    op_table(&m, &args, x, B, T, step);

    size_t off[12], len[12], layer_elems = 0;
    const int ns = zero_layer_slices(&config, 0, off, len);
    for (int i = 0; i < ns; i++) { layer_elems += len[i]; }
    printf("gradients of one layer: %zu bf16 values (%.2f MB) in %d slices; all gradients %.2f MB\n", layer_elems,
           layer_elems * 2 / 1e6, ns, m.num_params * 2 / 1e6);
#ifdef MULTI_GPU
    nccl_one_rank(&m, &config, iters);
#else
    printf("NCCL all-reduce: not measured (this build has no NCCL; give NCCL_HOME to make)\n");
#endif
    matmul_tune_report();
    matmul_bias_grad_report();
    gpt2_free(&m);
    attention_free();
    cublas_free();
    free(ph); free(x); free(y);
    return 0;
}
