/*
 * Command-line flags of both trainers (train_gpt2 and train_gpt2cu): the defaults in one place,
 * the usage text, parsing and the checks that need no data or model.
 *
 * Flag letters follow llm.c's train_gpt2cu where the meaning is the same. Every flag takes a
 * value ("-b 16"); an unknown flag or a bad value prints the usage and exits non-zero.
 */
#ifndef LLMC_ARGS_H
#define LLMC_ARGS_H

#include <limits.h>
#include "utils.h"

typedef struct {
    // data
    const char *train_glob;    // -i
    const char *val_glob;      // -j
    const char *output_dir;    // -o ("" = no checkpoints, no main.log)
    const char *model;         // -e: a .bin file or a descriptor (d12, L2:C64:H4, ...)
    const char *tokenizer;     // -tk: decode table for samples
    const char *hellaswag;     // -hf: HellaSwag eval file
    // batch
    int B;                     // -b micro-batch per rank
    int T;                     // -t sequence length
    long long total_batch;     // -d tokens per optimizer step over all ranks (-1: B*T*world)
    // optimizer and schedule
    float lr;                  // -l
    int warmup;                // -u
    float final_lr_frac;       // -q
    float weight_decay;        // -c
    const char *schedule;      // -k cosine | linear | constant
    int max_steps;             // -x (-1: one epoch of the train data)
    // evaluation, sampling, checkpoints
    int val_every;             // -v (0: off)
    int val_batches;           // -m (-1: the whole val set)
    int sample_every;          // -s (0: off)
    int gen_tokens;            // -g
    int hellaswag_eval;        // -h (0/1)
    int hellaswag_max;         // -hm examples (-1: all)
    int checkpoint_every;      // -n (0: off)
    int checkpoint_keep;       // -nk (0: keep all)
    int resume;                // -y (0/1)
    // numeric guards
    float guard_z_loss;        // -sl (0: off)
    float guard_z_norm;        // -sg (0: off)
    int guard_max_skips;       // -sm consecutive skipped steps before the run stops
    // memory and precision (GPU)
    int zero_stage;            // -z (0/1)
    int recompute;             // -r (0: off, 1: recompute GELU, 2: also LayerNorm)
    int master_weights;        // -w (0/1)
    const char *backend;       // -pb nccl | mpi (GPU multi-process gradient backend)
    int comm_timeout;          // -pt seconds before a stuck collective or bootstrap is an error
    const char *attention;     // -at own | cudnn (GPU attention implementation)
    // misc
    int shuffle;               // -sh (0/1) shuffle the train data (same permutation on every rank)
    unsigned long long seed;   // -rs
    int overfit_batch;         // -a (0/1) train on the first batch only (debugging)
} TrainArgs;

// the defaults: one commented block
static inline void args_defaults(TrainArgs *a) {
    a->train_glob = "data/tinyshakespeare/tiny_shakespeare_train.bin";
    a->val_glob = "data/tinyshakespeare/tiny_shakespeare_val.bin";
    a->output_dir = "";
    a->model = "d12";
    a->tokenizer = "gpt2_tokenizer.bin";
    a->hellaswag = "data/hellaswag/hellaswag_val.bin";
    a->B = 4;
    a->T = 1024;
    a->total_batch = -1;
    a->lr = 3e-4f;
    a->warmup = 0;
    a->final_lr_frac = 1.0f;
    a->weight_decay = 0.0f;
    a->schedule = "cosine";
    a->max_steps = -1;
    a->val_every = 20;
    a->val_batches = 20;
    a->sample_every = 20;
    a->gen_tokens = 64;
    a->hellaswag_eval = 0;
    a->hellaswag_max = -1;
    a->checkpoint_every = 0;
    a->checkpoint_keep = 0;
    a->resume = 0;
    a->guard_z_loss = 0.0f;
    a->guard_z_norm = 0.0f;
    a->guard_max_skips = 10;
    a->zero_stage = 0;
    a->recompute = 1;
    a->master_weights = 1;
    a->backend = "nccl";
    a->comm_timeout = 300;
    a->attention = "own";
    a->shuffle = 1;
    a->seed = 1337;
    a->overfit_batch = 0;
}

static inline void args_usage(const char *prog) {
    TrainArgs d;
    args_defaults(&d);
    fprintf(stderr,
        "Usage:   %s [options]\n"
        "Options (every flag takes a value; defaults in brackets):\n"
        "  data\n"
        "  -i <glob>   train token shards [%s]\n"
        "  -j <glob>   val token shards [%s]\n"
        "  -o <dir>    output dir for main.log and checkpoints; empty = none [%s]\n"
        "  -e <model>  model .bin (version 3 fp32 or 5 bf16) or descriptor [%s]:\n"
        "              d12 d24 d36 d48 = GPT-2 124M/350M/774M/1558M; dN = N layers, C=64N, NH=N;\n"
        "              L<n>:C<n>:H<n>[:T<maxT>][:V<vocab>] e.g. L2:C64:H4 (maxT 1024, V 50257 by default)\n"
        "  -tk <file>  tokenizer decode table, to print samples as text [%s]\n"
        "  batch\n"
        "  -b <int>    micro-batch size per rank, sequences [%d]\n"
        "  -t <int>    sequence length [%d]\n"
        "  -d <int>    total batch per optimizer step in tokens, all ranks; -1 = B*T*ranks [%lld]\n"
        "              gradient accumulation steps = d / (B*T*ranks), must divide exactly\n"
        "  optimizer (AdamW beta1 0.9, beta2 0.95, eps 1e-8, gradient clipping at global norm 1.0)\n"
        "  -l <float>  peak learning rate [%g]\n"
        "  -u <int>    linear warmup steps [%d]\n"
        "  -q <float>  final learning rate as a fraction of -l; 1.0 = constant after warmup [%g]\n"
        "  -c <float>  weight decay, on 2-D tensors only [%g]\n"
        "  -k <name>   schedule: cosine | linear | constant [%s]\n"
        "  -x <int>    optimizer steps to run; -1 = one epoch of the train data [%d]\n"
        "  evaluation, sampling, checkpoints (0 turns a feature off)\n"
        "  -v <int>    validation loss every N steps [%d]\n"
        "  -m <int>    validation batches of B sequences (same tokens for any rank count); -1 = all [%d]\n"
        "  -h <0|1>    HellaSwag accuracy at every validation [%d]\n"
        "  -hf <file>  HellaSwag eval file [%s]\n"
        "  -hm <int>   HellaSwag examples to evaluate; -1 = all [%d]\n"
        "  -s <int>    sample text every N steps [%d]\n"
        "  -g <int>    tokens to generate per sample [%d]\n"
        "  -n <int>    checkpoint every N steps (needs -o) [%d]\n"
        "  -nk <int>   keep only the newest N complete checkpoints; 0 = keep all [%d]\n"
        "  -y <0|1>    resume from the newest complete checkpoint in -o [%d]\n"
        "  numeric guards (a step with a NaN/Inf loss or gradient norm is always skipped)\n"
        "  -sl <float> skip a step whose loss z-score over the last 100 steps exceeds this; 0 = off [%g]\n"
        "  -sg <float> the same for the gradient norm; 0 = off [%g]\n"
        "  -sm <int>   stop the run after this many consecutive skipped steps [%d]\n"
        "  memory, precision, multi-process (train_gpt2cu; train_gpt2 accepts and ignores -z -r -w -pb -at)\n"
        "  -z <0|1>    ZeRO stage: 1 shards the optimizer state across ranks [%d]\n"
        "  -r <0|1|2>  recompute in backward: 1 = GELU, 2 = GELU and LayerNorm [%d]\n"
        "  -w <0|1>    fp32 master weights [%d]\n"
        "  -pb <name>  gradient all-reduce backend: nccl | mpi (host-staged) [%s]\n"
        "  -pt <int>   seconds before a stuck collective or bootstrap is an error [%d]\n"
        "  -at <name>  attention: own (llmc/attention.cuh) | cudnn (cuDNN's fused SDPA, in builds with cuDNN) [%s]\n"
        "  misc\n"
        "  -sh <0|1>   shuffle the train data (the same permutation on every rank) [%d]\n"
        "  -rs <int>   random seed (init, shuffling, sampling) [%llu]\n"
        "  -a <0|1>    overfit the first batch (debugging) [%d]\n",
        prog, d.train_glob, d.val_glob, d.output_dir, d.model, d.tokenizer, d.B, d.T, d.total_batch,
        d.lr, d.warmup, d.final_lr_frac, d.weight_decay, d.schedule, d.max_steps, d.val_every,
        d.val_batches, d.hellaswag_eval, d.hellaswag, d.hellaswag_max, d.sample_every, d.gen_tokens,
        d.checkpoint_every, d.checkpoint_keep, d.resume, d.guard_z_loss, d.guard_z_norm,
        d.guard_max_skips, d.zero_stage, d.recompute, d.master_weights, d.backend, d.comm_timeout, d.attention,
        d.shuffle, d.seed, d.overfit_batch);
}

// print the usage (rank 0 only) and the reason, exit non-zero
static void args_fail(const char *prog, const char *fmt, ...) LLMC_PRINTF(2, 3);
static void args_fail(const char *prog, const char *fmt, ...) {
    if (llmc_rank == 0) { args_usage(prog); }
    va_list ap;
    va_start(ap, fmt);
    llmc_vprint(stderr, "error", fmt, ap);
    va_end(ap);
    exit(EXIT_FAILURE);
}

static inline long long args_parse_int(const char *prog, const char *flag, const char *s, long long lo, long long hi) {
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0') { args_fail(prog, "%s %s: expected an integer", flag, s); }
    if (v < lo || v > hi) { args_fail(prog, "%s %s: must be in %lld..%lld", flag, s, lo, hi); }
    return v;
}

static inline float args_parse_float(const char *prog, const char *flag, const char *s, double lo, double hi) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno != 0 || end == s || *end != '\0' || v != v) { args_fail(prog, "%s %s: expected a number", flag, s); }
    if (v < lo || v > hi) { args_fail(prog, "%s %s: must be in %g..%g", flag, s, lo, hi); }
    return (float)v;
}

static inline void args_parse(TrainArgs *a, int argc, char **argv) {
    const char *prog = argv[0];
    args_defaults(a);
    if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-help"))) {
        if (llmc_rank == 0) { args_usage(prog); }
        exit(EXIT_SUCCESS);
    }
    for (int i = 1; i < argc; i += 2) {
        const char *f = argv[i];
        if (f[0] != '-' || strlen(f) < 2 || strlen(f) > 3) { args_fail(prog, "unexpected argument '%s'", f); }
        if (i + 1 >= argc) { args_fail(prog, "flag %s needs a value", f); }
        const char *v = argv[i + 1];
        const char *k = f + 1;
        if (!strcmp(k, "i")) { a->train_glob = v; }
        else if (!strcmp(k, "j")) { a->val_glob = v; }
        else if (!strcmp(k, "o")) { a->output_dir = v; }
        else if (!strcmp(k, "e")) { a->model = v; }
        else if (!strcmp(k, "tk")) { a->tokenizer = v; }
        else if (!strcmp(k, "hf")) { a->hellaswag = v; }
        else if (!strcmp(k, "b")) { a->B = (int)args_parse_int(prog, f, v, 1, 1 << 20); }
        else if (!strcmp(k, "t")) { a->T = (int)args_parse_int(prog, f, v, 1, 1 << 20); }
        else if (!strcmp(k, "d")) { a->total_batch = args_parse_int(prog, f, v, -1, LLONG_MAX / 2); }
        else if (!strcmp(k, "l")) { a->lr = args_parse_float(prog, f, v, 0.0, 10.0); }
        else if (!strcmp(k, "u")) { a->warmup = (int)args_parse_int(prog, f, v, 0, INT_MAX); }
        else if (!strcmp(k, "q")) { a->final_lr_frac = args_parse_float(prog, f, v, 0.0, 1.0); }
        else if (!strcmp(k, "c")) { a->weight_decay = args_parse_float(prog, f, v, 0.0, 10.0); }
        else if (!strcmp(k, "k")) { a->schedule = v; }
        else if (!strcmp(k, "x")) { a->max_steps = (int)args_parse_int(prog, f, v, -1, INT_MAX); }
        else if (!strcmp(k, "v")) { a->val_every = (int)args_parse_int(prog, f, v, 0, INT_MAX); }
        else if (!strcmp(k, "m")) { a->val_batches = (int)args_parse_int(prog, f, v, -1, INT_MAX); }
        else if (!strcmp(k, "s")) { a->sample_every = (int)args_parse_int(prog, f, v, 0, INT_MAX); }
        else if (!strcmp(k, "g")) { a->gen_tokens = (int)args_parse_int(prog, f, v, 1, 1 << 20); }
        else if (!strcmp(k, "h")) { a->hellaswag_eval = (int)args_parse_int(prog, f, v, 0, 1); }
        else if (!strcmp(k, "hm")) { a->hellaswag_max = (int)args_parse_int(prog, f, v, -1, INT_MAX); }
        else if (!strcmp(k, "n")) { a->checkpoint_every = (int)args_parse_int(prog, f, v, 0, INT_MAX); }
        else if (!strcmp(k, "nk")) { a->checkpoint_keep = (int)args_parse_int(prog, f, v, 0, INT_MAX); }
        else if (!strcmp(k, "y")) { a->resume = (int)args_parse_int(prog, f, v, 0, 1); }
        else if (!strcmp(k, "sl")) { a->guard_z_loss = args_parse_float(prog, f, v, 0.0, 1e6); }
        else if (!strcmp(k, "sg")) { a->guard_z_norm = args_parse_float(prog, f, v, 0.0, 1e6); }
        else if (!strcmp(k, "sm")) { a->guard_max_skips = (int)args_parse_int(prog, f, v, 1, INT_MAX); }
        else if (!strcmp(k, "z")) { a->zero_stage = (int)args_parse_int(prog, f, v, 0, 1); }
        else if (!strcmp(k, "r")) { a->recompute = (int)args_parse_int(prog, f, v, 0, 2); }
        else if (!strcmp(k, "w")) { a->master_weights = (int)args_parse_int(prog, f, v, 0, 1); }
        else if (!strcmp(k, "pb")) { a->backend = v; }
        else if (!strcmp(k, "pt")) { a->comm_timeout = (int)args_parse_int(prog, f, v, 1, 86400); }
        else if (!strcmp(k, "at")) { a->attention = v; }
        else if (!strcmp(k, "sh")) { a->shuffle = (int)args_parse_int(prog, f, v, 0, 1); }
        else if (!strcmp(k, "rs")) { a->seed = (unsigned long long)args_parse_int(prog, f, v, 0, LLONG_MAX); }
        else if (!strcmp(k, "a")) { a->overfit_batch = (int)args_parse_int(prog, f, v, 0, 1); }
        else { args_fail(prog, "unknown flag %s", f); }
    }
    if (strcmp(a->schedule, "cosine") && strcmp(a->schedule, "linear") && strcmp(a->schedule, "constant")) {
        args_fail(prog, "-k %s: unknown schedule (cosine, linear or constant)", a->schedule);
    }
    if (strcmp(a->backend, "nccl") && strcmp(a->backend, "mpi")) {
        args_fail(prog, "-pb %s: unknown backend (nccl or mpi)", a->backend);
    }
    if (strcmp(a->attention, "own") && strcmp(a->attention, "cudnn")) {
        args_fail(prog, "-at %s: unknown attention implementation (own or cudnn)", a->attention);
    }
    if (a->checkpoint_every > 0 && a->output_dir[0] == '\0') {
        args_fail(prog, "-n %d needs an output directory: add -o <dir>", a->checkpoint_every);
    }
    if (a->resume && a->output_dir[0] == '\0') {
        args_fail(prog, "-y 1 resumes from the checkpoints in -o <dir>; no -o was given");
    }
}

/*
 * Batch arithmetic (DESIGN.md): grad_accum_steps = d / (B * T * world_size), exactly.
 * Returns grad_accum_steps; fills total_batch when it was -1.
 */
static inline int args_grad_accum(TrainArgs *a, int world_size) {
    long long per_step = (long long)a->B * a->T * world_size;
    if (a->total_batch == -1) { a->total_batch = per_step; }
    if (a->total_batch <= 0 || a->total_batch % per_step != 0) {
        llmc_die("-d %lld is not divisible by B*T*ranks = %d*%d*%d = %lld; choose -d as a multiple of %lld",
                 a->total_batch, a->B, a->T, world_size, per_step, per_step);
    }
    return (int)(a->total_batch / per_step);
}

// a hash of every setting that must be identical on all ranks (compared across ranks at start)
static inline uint64_t args_hash(const TrainArgs *a) {
    char buf[8192];
    snprintf(buf, sizeof(buf),
             "%s|%s|%s|%s|%s|%d|%d|%lld|%a|%d|%a|%a|%s|%d|%d|%d|%d|%d|%d|%d|%d|%d|%d|%a|%a|%d|%d|%d|%d|%s|%d|%llu|%d|%s|%d|%s",
             a->train_glob, a->val_glob, a->output_dir, a->model, a->hellaswag, a->B, a->T, a->total_batch,
             (double)a->lr, a->warmup, (double)a->final_lr_frac, (double)a->weight_decay, a->schedule,
             a->max_steps, a->val_every, a->val_batches, a->sample_every, a->gen_tokens, a->hellaswag_eval,
             a->hellaswag_max, a->checkpoint_every, a->checkpoint_keep, a->resume, (double)a->guard_z_loss,
             (double)a->guard_z_norm, a->guard_max_skips, a->zero_stage, a->recompute, a->master_weights,
             a->backend, a->shuffle, a->seed, a->overfit_batch, a->tokenizer, a->comm_timeout, a->attention);
    return fnv1a64(0, buf, strlen(buf));
}

#endif  // LLMC_ARGS_H
