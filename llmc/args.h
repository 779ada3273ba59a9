/*
 * Command-line flags of both trainers (train_gpt2 and train_gpt2cu), defined once in a table:
 * LLMC_FLAGS below generates the TrainArgs struct, the defaults, the usage text, the parser and
 * the cross-rank hash, so adding a flag is one line and cannot miss any of them.
 *
 * Flag letters follow llm.c's train_gpt2cu where the meaning is the same; the common flags also
 * have long names (--lr, --batch, ...). Every flag takes a value ("-b 16", "--batch 16" or
 * "--batch=16"). `--help` prints the usage on stdout and exits 0; an unknown flag or a bad value
 * prints one line (with "did you mean" for a near miss) and "see --help", and exits non-zero.
 */
#ifndef LLMC_ARGS_H
#define LLMC_ARGS_H

#include <limits.h>
#include <strings.h>
#include "utils.h"

/*
 * The table. One X(...) per flag, in usage order; SECTION rows are the usage text's headings.
 *   X(type, field, short, long, metavar, default, min, max, help)
 * type: STR (any string), CHOICE (one of the '|'-separated words of metavar), INT (int), I64
 * (long long), U64 (unsigned long long, at most LLONG_MAX), F32 (float). min and max bound the
 * numeric types (inclusive); long is "" for a flag with a short name only.
 */
// the value of an INT flag given as "auto" (-b and -r offer it; below every such flag's minimum)
#define ARGS_AUTO (-1)
#define LLMC_FLAGS(X)                                                                                                  \
    X(SECTION, _data, "", "", "", 0, 0, 0, "data")                                                                      \
    X(STR, train_glob, "i", "train", "<glob>", "data/tinyshakespeare/tiny_shakespeare_train.bin", 0, 0,               \
      "train token shards")                                                                                            \
    X(STR, val_glob, "j", "val", "<glob>", "data/tinyshakespeare/tiny_shakespeare_val.bin", 0, 0, "val token shards")   \
    X(STR, output_dir, "o", "out", "<dir>", "", 0, 0, "output dir for main.log and checkpoints; empty = none")          \
    X(STR, model, "e", "model", "<model>", "d12", 0, 0,                                                                \
      "model .bin (version 3 fp32 or 5 bf16) or descriptor:\n"                                                         \
      "d12 d24 d36 d48 = GPT-2 124M/350M/774M/1558M; d60 d72 d84 = llm.c's 2.7B/7.3B/12.2B;\n"                      \
      "dN = N layers, C=64N, NH=N; gpt2:dN = dN; gpt3:c768 etc. = llm.c's GPT-3 shapes (maxT 2048);\n"                \
      "L<n>:C<n>:H<n>[:T<maxT>][:V<vocab>] e.g. L2:C64:H4 (maxT 1024, V 50257 by default)")                            \
    X(STR, tokenizer, "tk", "tokenizer", "<file>", "gpt2_tokenizer.bin", 0, 0, "tokenizer decode table, to print text")  \
    X(SECTION, _batch, "", "", "", 0, 0, 0, "batch")                                                                    \
    X(INT, B, "b", "batch", "<int|auto>", 4, 1, 1 << 20,                                                               \
      "micro-batch size per rank, sequences; auto = the largest that fits the memory\n"                             \
      "plan with a margin and divides -d over the ranks (see --plan)")                                                \
    X(INT, T, "t", "seq-len", "<int>", 1024, 1, 1 << 20, "sequence length")                                             \
    X(I64, total_batch, "d", "total-batch", "<int>", -1, -1, LLONG_MAX / 2,                                           \
      "total batch per optimizer step in tokens, all ranks; -1 = B*T*ranks\n"                                          \
      "gradient accumulation steps = d / (B*T*ranks), must divide exactly")                                            \
    X(SECTION, _opt, "", "", "", 0, 0, 0,                                                                               \
      "optimizer (AdamW beta1 0.9, beta2 0.95, eps 1e-8, gradient clipping at global norm 1.0)")                       \
    X(F32, lr, "l", "lr", "<float>", 3e-4, 0.0, 10.0, "peak learning rate")                                            \
    X(INT, warmup, "u", "warmup", "<int>", 0, 0, INT_MAX, "linear warmup steps")                                        \
    X(F32, final_lr_frac, "q", "final-lr-frac", "<float>", 1.0, 0.0, 1.0,                                               \
      "final learning rate as a fraction of -l; 1.0 = constant after warmup")                                          \
    X(F32, weight_decay, "c", "weight-decay", "<float>", 0.0, 0.0, 10.0, "weight decay, on 2-D tensors only")           \
    X(CHOICE, schedule, "k", "schedule", "cosine|linear|constant|wsd", "cosine", 0, 0,                                 \
      "learning rate schedule after warmup: decay to -q*lr over the -x steps (cosine,\n"                                \
      "linear), none (constant), or wsd: constant, then 1-sqrt decay over the last -kd of them")                       \
    X(F32, decay_frac, "kd", "decay-frac", "<float>", 0.2, 0.0, 1.0, "wsd: the fraction of the -x steps that decays")   \
    X(CHOICE, optimizer, "opt", "optimizer", "adamw|muon", "adamw", 0, 0,                                              \
      "adamw, or muon: Muon for the blocks' 2-D matrices, AdamW (-l) for the rest")                     \
    X(F32, muon_lr, "ml", "muon-lr", "<float>", 0.02, 0.0, 10.0, "Muon: peak learning rate of the matrices (-k's schedule)") \
    X(F32, muon_momentum, "mm", "muon-momentum", "<float>", 0.95, 0.0, 0.999, "Muon: Nesterov momentum")              \
    X(INT, muon_ns_steps, "mns", "muon-ns-steps", "<int>", 5, 1, 100, "Muon: Newton-Schulz iterations")               \
    X(INT, max_steps, "x", "steps", "<int>", -1, -1, INT_MAX, "optimizer steps to run; -1 = one epoch of the train data; 0 = evaluate -e only (reads no -i)") \
    X(SECTION, _eval, "", "", "", 0, 0, 0, "evaluation, sampling, checkpoints (0 turns a feature off)")                 \
    X(INT, val_every, "v", "val-every", "<int>", 20, 0, INT_MAX, "validation loss every N steps")                       \
    X(INT, val_batches, "m", "val-batches", "<int>", 20, -1, INT_MAX,                                                   \
      "validation batches of B sequences (same tokens for any rank count); -1 = all")                                  \
    X(INT, hellaswag_eval, "h", "hellaswag", "<0|1>", 0, 0, 1, "HellaSwag accuracy at every validation")                \
    X(STR, hellaswag, "hf", "hellaswag-file", "<file>", "data/hellaswag/hellaswag_val.bin", 0, 0, "HellaSwag eval file") \
    X(INT, hellaswag_max, "hm", "hellaswag-max", "<int>", -1, -1, INT_MAX, "HellaSwag examples to evaluate; -1 = all")   \
    X(INT, sample_every, "s", "sample-every", "<int>", 20, 0, INT_MAX, "sample text every N steps")                     \
    X(INT, gen_tokens, "g", "gen-tokens", "<int>", 64, 1, 1 << 20, "tokens to generate per sample")                     \
    X(INT, checkpoint_every, "n", "ckpt-every", "<int>", 0, 0, INT_MAX, "checkpoint every N steps (needs -o)")          \
    X(INT, checkpoint_keep, "nk", "ckpt-keep", "<int>", 0, 0, INT_MAX,                                                  \
      "keep only the newest N complete checkpoints; 0 = keep all")                                                     \
    X(INT, checkpoint_major, "nm", "ckpt-major", "<int>", 0, 0, INT_MAX,                                                \
      "with -nk: also keep every checkpoint whose step is a multiple of N (a multiple of -n)")                         \
    X(INT, resume, "y", "resume", "<0|1>", 0, 0, 1, "resume from the newest complete checkpoint in -o")                 \
    X(INT, ckpt_async, "", "ckpt-async", "<0|1>", 1, 0, 1,                                                             \
      "write checkpoints while training goes on, from a copy in host memory\n"                                         \
      "(synchronously where the copy does not fit; 0 = always synchronously)")                                         \
    X(INT, start_over, "", "start-over", "<0|1>", 0, 0, 1,                                                             \
      "a new run where -o holds another run's checkpoints (refused without -y 1 or\n"                                   \
      "this): they and its logs move to <dir>/old_run_<N>/ first")                                                      \
    X(SECTION, _guards, "", "", "", 0, 0, 0, "numeric guards (a step with a NaN/Inf loss or gradient norm is always skipped)") \
    X(F32, guard_z_loss, "sl", "guard-loss-z", "<float>", 0.0, 0.0, 1e6,                                                \
      "skip a step whose loss z-score over the last 100 steps exceeds this; 0 = off")                                  \
    X(F32, guard_z_norm, "sg", "guard-norm-z", "<float>", 0.0, 0.0, 1e6, "the same for the gradient norm; 0 = off")     \
    X(INT, guard_max_skips, "sm", "guard-max-skips", "<int>", 10, 1, INT_MAX,                                          \
      "stop the run after this many consecutive skipped steps")                                                        \
    X(INT, rollback_after, "rb", "rollback", "<int>", 0, 0, INT_MAX,                                                    \
      "after this many consecutive skipped steps, reload the newest complete checkpoint and skip\n"                     \
      "the data of the steps since it (at most 3 times per run; needs -o and -n); 0 = off")                            \
    X(SECTION, _gpu, "", "", "", 0, 0, 0,                                                                               \
      "memory, precision, multi-process (train_gpt2cu; train_gpt2 accepts and ignores -z -r -w -pb -at -ge -mt -bg -lg -pi -ps -pf)")      \
    X(INT, zero_stage, "z", "zero", "<0|1>", 0, 0, 1, "ZeRO stage: 1 shards the optimizer state across ranks")          \
    X(INT, recompute, "r", "recompute", "<0|1|2|auto>", ARGS_AUTO, 0, 2,                                                \
      "recompute in backward: 0 = none, 1 = GELU, 2 = GELU and LayerNorm;\n"                                            \
      "auto = the least that fits the GPU's memory at -b")                                                              \
    X(INT, master_weights, "w", "master-weights", "<0|1>", 1, 0, 1, "fp32 master weights")                              \
    X(CHOICE, backend, "pb", "backend", "nccl|mpi", "nccl", 0, 0, "gradient all-reduce backend (mpi: host-staged)")     \
    X(INT, num_processes, "pn", "num-processes", "<int>", 0, 0, 1000000,                                               \
      "processes of the run, for processes started by hand (llm.c's -pn); 0 = the launcher's")                        \
    X(INT, process_rank, "pr", "process-rank", "<int>", -1, -1, 999999, "this process's rank (llm.c's -pr); -1 = the launcher's") \
    X(INT, gpus_per_node, "pg", "gpus-per-node", "<int>", 0, 0, 1 << 20,                                                \
      "processes per node (llm.c's -pg): started by hand, the GPU is -pr mod -pg; 0 = the launcher's")                \
    X(CHOICE, init_method, "pi", "init-method", "auto|mpi|tcp|fs", "auto", 0, 0,                                       \
      "how the ranks get rank 0's NCCL id: mpi (mpirun), tcp (rank 0's host -ps, else MASTER_ADDR),\n"               \
      "fs (files in the shared directory -pf); auto = mpi under mpirun, else tcp")                                    \
    X(STR, init_server, "ps", "server", "<host>", "", 0, 0,                                                            \
      "-pi tcp: rank 0's host (port LLMC_BOOTSTRAP_PORT, MASTER_PORT+1, else 12345); empty = MASTER_ADDR")           \
    X(STR, init_dir, "pf", "sync-dir", "<dir>", "", 0, 0, "-pi fs: a directory every node mounts; empty = -o")         \
    X(INT, comm_timeout, "pt", "comm-timeout", "<int>", 300, 1, 86400,                                                  \
      "seconds before a collective (MPI, NCCL), the bootstrap or MPI_Init that has not completed is "                  \
      "an error")                                                                                                      \
    X(CHOICE, attention, "at", "attention", "auto|own|cudnn", "auto", 0, 0,                                            \
      "attention: own (llmc/cuda/attention.cuh), cudnn (cuDNN's fused SDPA, in builds with cuDNN);\nauto = cudnn "     \
      "where the build has it and -t >= 256 (measured faster there), else own")                                       \
    X(INT, gelu_fusion, "ge", "gelu-fusion", "<0|1|2>", 2, 0, 2,                                                       \
      "GELU in cuBLASLt's matmul epilogue: 0 = our kernels (llmc/cuda/gelu.cuh), 1 = forward, 2 = both")                    \
    X(INT, matmul_tune, "mt", "matmul-tune", "<0|1>", 0, 0, 1,                                                          \
      "cuBLASLt's algorithm of each matmul shape: 0 = its heuristic's first; 1 = the fastest of its first 8,\n"      \
      "timed at the shape's first call (then two runs may differ in the last bits)")                                \
    X(INT, bias_grad, "bg", "bias-grad", "<0|1>", 0, 0, 1,                                                             \
      "the linear layers' bias gradients: 0 = our column sums (their order fixed by the shapes);\n"                 \
      "1 = summed by the weight-gradient matmul as it reads the same data (cuBLASLt's BGRADB epilogue)")            \
    X(INT, gpu_log_every, "lg", "gpu-log", "<int>", 0, -1, 1000000000,                                                 \
      "every this many steps, a line on rank 0's GPU: clocks, power, temperature, use, throttling (NVML);\n"            \
      "0 or -1 = off (llm.c's -lg)")                                                                                   \
    X(SECTION, _gen, "", "", "", 0, 0, 0,                                                                               \
      "generation: with --prompt, generate -g tokens after the prompt from -e and exit (no data read)")                \
    X(STR, prompt, "", "prompt", "<text>", "", 0, 0, "the text to continue; empty = train")                             \
    X(F32, temperature, "", "temperature", "<float>", 1.0, 0.0, 100.0,                                                  \
      "sampling temperature (samples and --prompt); 0 = greedy")                                                       \
    X(INT, top_k, "", "top-k", "<int>", 0, 0, INT_MAX, "sample from the K most likely tokens only; 0 = all")            \
    X(STR, bpe_dir, "", "bpe-dir", "<dir>", "data/gpt2", 0, 0, "folder with encoder.json and vocab.bpe (--prompt)")     \
    X(SECTION, _obs, "", "", "", 0, 0, 0, "memory plan, timers, TensorBoard")                                          \
    X(INT, plan, "", "plan", "<ranks>", 0, 0, 1 << 20,                                                                 \
      "print the memory plan of this run on this many ranks and exit (no data read); 0 = train")                     \
    X(INT, phase_every, "pe", "phase-every", "<int>", 100, 0, INT_MAX,                                                  \
      "print where the step time goes (data, forward, backward, comm, optimizer, eval) every N steps")               \
    X(INT, tensorboard, "tb", "tensorboard", "<0|1>", 0, 0, 1, "write TensorBoard events to -o (events.out.tfevents.*)") \
    X(SECTION, _misc, "", "", "", 0, 0, 0, "misc")                                                                      \
    X(INT, shuffle, "sh", "shuffle", "<0|1>", 1, 0, 1, "shuffle the train data (the same permutation on every rank)")   \
    X(U64, seed, "rs", "seed", "<int>", 1337, 0, LLONG_MAX, "random seed (init, shuffling, sampling)")                  \
    X(INT, overfit_batch, "a", "overfit", "<0|1>", 0, 0, 1, "overfit the first batch (debugging)")

// ---- the struct
#define ARGS_CTYPE_SECTION(f)
#define ARGS_CTYPE_STR(f) const char *f;
#define ARGS_CTYPE_CHOICE(f) const char *f;
#define ARGS_CTYPE_INT(f) int f;
#define ARGS_CTYPE_I64(f) long long f;
#define ARGS_CTYPE_U64(f) unsigned long long f;
#define ARGS_CTYPE_F32(f) float f;
#define ARGS_FIELD(type, f, ...) ARGS_CTYPE_##type(f)
typedef struct {
    LLMC_FLAGS(ARGS_FIELD)
} TrainArgs;

// ---- the table as data: one row per flag, pointing into a TrainArgs
typedef enum { ARG_SECTION, ARG_STR, ARG_CHOICE, ARG_INT, ARG_I64, ARG_U64, ARG_F32 } ArgType;
typedef struct {
    ArgType type;
    size_t offset;          // of the field in TrainArgs
    const char *name;       // short name without '-' ("" for none)
    const char *long_name;  // without "--" ("" for none)
    const char *metavar;    // CHOICE: the allowed words, '|'-separated
    const char *def_str;    // STR, CHOICE
    double def_num;         // the numeric types (exact for every default in the table)
    double lo, hi;
    const char *help;       // SECTION: the heading
} ArgSpec;

#define ARGS_OFFSET_SECTION(f) 0
#define ARGS_OFFSET_STR(f) offsetof(TrainArgs, f)
#define ARGS_OFFSET_CHOICE(f) offsetof(TrainArgs, f)
#define ARGS_OFFSET_INT(f) offsetof(TrainArgs, f)
#define ARGS_OFFSET_I64(f) offsetof(TrainArgs, f)
#define ARGS_OFFSET_U64(f) offsetof(TrainArgs, f)
#define ARGS_OFFSET_F32(f) offsetof(TrainArgs, f)
// a string default goes to def_str, a numeric one to def_num (the other slot gets a dummy)
#define ARGS_DEF_STR_SECTION(d) ""
#define ARGS_DEF_STR_STR(d) d
#define ARGS_DEF_STR_CHOICE(d) d
#define ARGS_DEF_STR_INT(d) ""
#define ARGS_DEF_STR_I64(d) ""
#define ARGS_DEF_STR_U64(d) ""
#define ARGS_DEF_STR_F32(d) ""
#define ARGS_DEF_NUM_SECTION(d) 0.0
#define ARGS_DEF_NUM_STR(d) 0.0
#define ARGS_DEF_NUM_CHOICE(d) 0.0
#define ARGS_DEF_NUM_INT(d) (double)(d)
#define ARGS_DEF_NUM_I64(d) (double)(d)
#define ARGS_DEF_NUM_U64(d) (double)(d)
#define ARGS_DEF_NUM_F32(d) (double)(d)
#define ARGS_ROW(type, f, name, long_name, metavar, def, lo, hi, help) \
    {ARG_##type, ARGS_OFFSET_##type(f), name, long_name, metavar, ARGS_DEF_STR_##type(def), ARGS_DEF_NUM_##type(def), (double)(lo), (double)(hi), help},
static const ArgSpec args_table[] = {LLMC_FLAGS(ARGS_ROW)};
#define ARGS_COUNT ((int)(sizeof(args_table) / sizeof(args_table[0])))

// whether a float32 value lies in the range of flag -name (compared in float, as the flag is kept;
// NaN does not): for values read back from a file that the flag once gave
static inline int args_f32_in_range(const char *name, float v) {
    for (int i = 0; i < ARGS_COUNT; i++) {
        if (!strcmp(args_table[i].name, name)) { return v >= (float)args_table[i].lo && v <= (float)args_table[i].hi; }
    }
    return 0;
}

// -x 0: the run evaluates -e's model (validation, HellaSwag, a sample), trains no step and reads no -i
static inline int args_evaluate_only(const TrainArgs *a) { return a->max_steps == 0; }

static inline void *args_field(TrainArgs *a, const ArgSpec *s) { return (char *)a + s->offset; }
static inline const void *args_cfield(const TrainArgs *a, const ArgSpec *s) { return (const char *)a + s->offset; }

// ---- defaults
static inline void args_defaults(TrainArgs *a) {
    memset(a, 0, sizeof(*a));
    for (int i = 0; i < ARGS_COUNT; i++) {
        const ArgSpec *s = &args_table[i];
        void *p = args_field(a, s);
        switch (s->type) {
        case ARG_SECTION: break;
        case ARG_STR: case ARG_CHOICE: *(const char **)p = s->def_str; break;
        case ARG_INT: *(int *)p = (int)s->def_num; break;
        case ARG_I64: *(long long *)p = (long long)s->def_num; break;
        case ARG_U64: *(unsigned long long *)p = (unsigned long long)s->def_num; break;
        case ARG_F32: *(float *)p = (float)s->def_num; break;
        }
    }
}

// ---- usage
static inline void args_format_value(char *out, size_t n, const TrainArgs *a, const ArgSpec *s) {
    const void *p = args_cfield(a, s);
    switch (s->type) {
    case ARG_SECTION: out[0] = '\0'; break;
    case ARG_STR: case ARG_CHOICE: snprintf(out, n, "%s", *(const char *const *)p); break;
    case ARG_INT:
        if (*(const int *)p == ARGS_AUTO && strstr(s->metavar, "|auto>")) { snprintf(out, n, "auto"); break; }
        snprintf(out, n, "%d", *(const int *)p);
        break;
    case ARG_I64: snprintf(out, n, "%lld", *(const long long *)p); break;
    case ARG_U64: snprintf(out, n, "%llu", *(const unsigned long long *)p); break;
    case ARG_F32: snprintf(out, n, "%g", (double)*(const float *)p); break;
    }
}

static inline void args_usage(FILE *f, const char *prog) {
    TrainArgs d;
    args_defaults(&d);
    fprintf(f, "Usage:   %s [options]\n"
               "Options (every flag takes a value: -b 16, --batch 16 or --batch=16; defaults in brackets):\n", prog);
    for (int i = 0; i < ARGS_COUNT; i++) {
        const ArgSpec *s = &args_table[i];
        if (s->type == ARG_SECTION) { fprintf(f, "  %s\n", s->help); continue; }
        char names[64], meta[64], def[256];
        snprintf(names, sizeof(names), "%s%s%s%s%s", s->name[0] ? "-" : "", s->name, s->name[0] && s->long_name[0] ? ", " : "",
                 s->long_name[0] ? "--" : "", s->long_name);
        snprintf(meta, sizeof(meta), s->type == ARG_CHOICE ? "<%s>" : "%s", s->metavar);
        args_format_value(def, sizeof(def), &d, s);
        fprintf(f, "  %-22s %-14s ", names, meta);
        // the help text's lines after the first are indented under the first
        for (const char *h = s->help; *h; h++) {
            if (*h == '\n') { fprintf(f, "\n  %-22s %-14s ", "", ""); } else { fputc(*h, f); }
        }
        fprintf(f, " [%s]\n", def);
    }
}

// ---- parsing

// one line: the reason, then where to look; from every process ("[rank R] " where there are
// several), as the flags may differ between them
static void args_fail(const char *fmt, ...) LLMC_PRINTF(1, 2) LLMC_NORETURN;
static void args_fail(const char *fmt, ...) {
    char msg[1024], line[1100];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    snprintf(line, sizeof(line), "%s (see --help)", msg);
    llmc_fatal_line(line);
    exit(EXIT_FAILURE);
}

// `also`: what else the flag takes, for the messages ("" or " or auto")
static inline long long args_parse_int(const char *flag, const char *s, double lo, double hi, const char *also) {
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0') { args_fail("%s %s: expected an integer%s", flag, s, also); }
    // the bounds as integers: LLONG_MAX is 2^63 as a double, one past the largest value taken
    const long long lo_i = lo <= (double)LLONG_MIN ? LLONG_MIN : (long long)lo;
    const long long hi_i = hi >= (double)LLONG_MAX ? LLONG_MAX : (long long)hi;
    if (v < lo_i || v > hi_i) { args_fail("%s %s: must be in %lld..%lld%s", flag, s, lo_i, hi_i, also); }
    return v;
}

static inline float args_parse_float(const char *flag, const char *s, double lo, double hi) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno != 0 || end == s || *end != '\0' || v != v) { args_fail("%s %s: expected a number", flag, s); }
    if (v < lo || v > hi) { args_fail("%s %s: must be in %g..%g", flag, s, lo, hi); }
    return (float)v;
}

// is word one of the '|'-separated words of list?
static inline int args_choice_ok(const char *list, const char *word) {
    size_t n = strlen(word);
    for (const char *p = list; *p;) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (len == n && n > 0 && strncmp(p, word, n) == 0) { return 1; }
        p += len + (bar ? 1 : 0);
    }
    return 0;
}

static inline void args_set(TrainArgs *a, const ArgSpec *s, const char *flag, const char *v) {
    void *p = args_field(a, s);
    switch (s->type) {
    case ARG_SECTION: break;
    case ARG_STR: *(const char **)p = v; break;
    case ARG_CHOICE:
        if (!args_choice_ok(s->metavar, v)) { args_fail("%s %s: expected one of %s", flag, v, s->metavar); }
        *(const char **)p = v;
        break;
    case ARG_INT:
        // a flag whose metavar offers "auto" (-b, -r) takes it as ARGS_AUTO, resolved later (llmc/plan.h)
        if (strstr(s->metavar, "|auto>")) {
            if (!strcmp(v, "auto")) { *(int *)p = ARGS_AUTO; break; }
            *(int *)p = (int)args_parse_int(flag, v, s->lo, s->hi, " or auto");
            break;
        }
        *(int *)p = (int)args_parse_int(flag, v, s->lo, s->hi, "");
        break;
    case ARG_I64: *(long long *)p = args_parse_int(flag, v, s->lo, s->hi, ""); break;
    case ARG_U64: *(unsigned long long *)p = (unsigned long long)args_parse_int(flag, v, s->lo, s->hi, ""); break;
    case ARG_F32: *(float *)p = args_parse_float(flag, v, s->lo, s->hi); break;
    }
}

// Levenshtein distance of two short strings (capped at 64 characters; longer ones count as far)
static inline int args_edit_distance(const char *x, const char *y) {
    int n = (int)strlen(x), m = (int)strlen(y);
    if (n > 64 || m > 64) { return 99; }
    int row[65];
    for (int j = 0; j <= m; j++) { row[j] = j; }
    for (int i = 1; i <= n; i++) {
        int diag = row[0];
        row[0] = i;
        for (int j = 1; j <= m; j++) {
            int up = row[j];
            int best = diag + (x[i - 1] != y[j - 1]);
            if (up + 1 < best) { best = up + 1; }
            if (row[j - 1] + 1 < best) { best = row[j - 1] + 1; }
            row[j] = best;
            diag = up;
        }
    }
    return row[m];
}

// the spec of "-x" / "--long", or NULL; an unknown flag close to a known one gets "did you mean"
static inline const ArgSpec *args_find(const char *flag, char *hint, size_t hint_n) {
    int dashes = flag[1] == '-' ? 2 : 1;
    const char *key = flag + dashes;
    int best = 99;
    hint[0] = '\0';
    for (int i = 0; i < ARGS_COUNT; i++) {
        const ArgSpec *s = &args_table[i];
        if (s->type == ARG_SECTION) { continue; }
        const char *names[2] = {s->name, s->long_name};
        for (int k = 0; k < 2; k++) {
            if (!names[k][0]) { continue; }
            if ((k == 0) == (dashes == 1) && !strcmp(key, names[k])) { return s; }
            // a near miss: the right name in the wrong case or with the wrong number of dashes, or
            // a long name one or two edits away (every short name is one edit from every other)
            int d = strcasecmp(key, names[k]) == 0 ? 0 : args_edit_distance(key, names[k]);
            int limit = k == 0 && dashes == 1 ? 0 : strlen(names[k]) > 4 ? 2 : 1;
            if (d <= limit && d < best) {
                best = d;
                snprintf(hint, hint_n, "; did you mean %s%s?", k == 0 ? "-" : "--", names[k]);
            }
        }
    }
    return NULL;
}

// argv[*i] split into its flag and its value (--name=value, else the next argument, *i moved onto
// it; NULL where there is none); 0 where argv[*i] is no flag or too long to be one
static inline int args_split(int argc, char **argv, int *i, char *flag, size_t flag_n, const char **value) {
    const char *arg = argv[*i];
    const char *eq = arg[0] == '-' && arg[1] == '-' ? strchr(arg, '=') : NULL;
    const size_t flag_len = eq ? (size_t)(eq - arg) : strlen(arg);
    if (arg[0] != '-' || arg[1] == '\0' || flag_len >= flag_n) { return 0; }
    memcpy(flag, arg, flag_len);
    flag[flag_len] = '\0';
    *value = eq ? eq + 1 : *i + 1 < argc ? argv[++*i] : NULL;
    return 1;
}

// the integer flag `name`'s value on the command line, where it is there and sound, else fallback:
// for what runs before the flags are parsed (MPI_Init, bounded by -pt); args_parse reports errors
static inline int args_peek_int(int argc, char **argv, const char *name, int fallback) {
    int v = fallback;
    for (int i = 1; i < argc; i++) {
        char flag[128], hint[96], *end;
        const char *value;
        if (!args_split(argc, argv, &i, flag, sizeof(flag), &value)) { continue; }
        const ArgSpec *s = args_find(flag, hint, sizeof(hint));
        if (s == NULL || strcmp(s->name, name) != 0 || value == NULL) { continue; }
        errno = 0;
        const long long x = strtoll(value, &end, 10);
        if (errno == 0 && end != value && *end == '\0' && x >= s->lo && x <= s->hi) { v = (int)x; }
    }
    return v;
}

static inline void args_parse(TrainArgs *a, int argc, char **argv) {
    args_defaults(a);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-help")) {
            if (llmc_rank == 0) { args_usage(stdout, argv[0]); }
            exit(EXIT_SUCCESS);
        }
    }
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i], *value;
        char flag[128], hint[96];
        if (arg[0] != '-' || arg[1] == '\0') { args_fail("unexpected argument '%s': flags come as -x <value>", arg); }
        if (!args_split(argc, argv, &i, flag, sizeof(flag), &value)) { args_fail("unknown flag '%.40s...'", arg); }
        const ArgSpec *s = args_find(flag, hint, sizeof(hint));
        if (!s) { args_fail("unknown flag %s%s", flag, hint); }
        if (value == NULL) {  // -h alone is mostly someone asking for help: -h is llm.c's HellaSwag flag
            args_fail("flag %s needs a value%s", flag, !strcmp(flag, "-h") ? ": -h is HellaSwag's 0|1" : "");
        }
        args_set(a, s, flag, value);
    }
    // the longest name written under it (state_<step>_<rank>.bin.tmp and the like) must fit the 4095
    // bytes of a path the system takes
    if (strlen(a->output_dir) > 4000) {
        args_fail("-o: the directory's path is %zu characters; the files under it would pass the 4095 a path may have: "
                  "use one of at most 4000", strlen(a->output_dir));
    }
    if (a->checkpoint_every > 0 && a->output_dir[0] == '\0') {
        args_fail("-n %d needs an output directory: add -o <dir>", a->checkpoint_every);
    }
    if (a->checkpoint_major > 0 && (a->checkpoint_every <= 0 || a->checkpoint_major % a->checkpoint_every != 0)) {
        args_fail("-nm %d keeps the checkpoints at multiples of %d steps; it must be a multiple of -n (now %d), "
                  "which writes them", a->checkpoint_major, a->checkpoint_major, a->checkpoint_every);
    }
    if (a->resume && a->output_dir[0] == '\0') {
        args_fail("-y 1 resumes from the checkpoints in -o <dir>; no -o was given");
    }
    if (a->tensorboard && a->output_dir[0] == '\0') {
        args_fail("-tb 1 writes the TensorBoard events into the output directory: add -o <dir>");
    }
    if (a->start_over && (a->resume || a->output_dir[0] == '\0')) {
        args_fail("--start-over 1 starts a new run in -o <dir> in place of the one there; it needs -o and excludes -y 1");
    }
    if (a->rollback_after > 0 && (a->output_dir[0] == '\0' || a->checkpoint_every <= 0)) {
        args_fail("-rb %d rolls back to a checkpoint: give the run -o <dir> and -n <steps>", a->rollback_after);
    }
    if (a->rollback_after > a->guard_max_skips) {
        args_fail("-rb %d is more than -sm %d, which stops the run first; use -rb %d or less, or raise -sm",
                  a->rollback_after, a->guard_max_skips, a->guard_max_skips);
    }
    if (a->hellaswag_eval && a->val_every <= 0) { args_fail("-h 1 evaluates HellaSwag at every validation; set -v > 0"); }
    // values whose result would mean nothing (a loss or an accuracy over no data)
    if (a->val_batches == 0) { args_fail("-m 0 validates on no batches; give -m N >= 1, -1 for all, or -v 0 for no validation"); }
    if (a->hellaswag_max == 0) { args_fail("-hm 0 evaluates no examples; give -hm N >= 1, -1 for all, or -h 0 for no HellaSwag"); }
    if (a->total_batch == 0) { args_fail("-d 0: the total batch is -1 (= B*T*ranks) or a multiple of B*T*ranks tokens"); }
    if (args_evaluate_only(a) && a->val_every <= 0 && a->sample_every <= 0 && !a->prompt[0]) {
        args_fail("-x 0 trains no step, and with -v 0 and -s 0 there is nothing to evaluate; give -v N to validate, "
                  "-s N to sample, or -x N to train");
    }
}

/*
 * Batch arithmetic: grad_accum_steps = d / (B * T * world_size), exactly; a -d that does not
 * divide is an error naming the four numbers.
 * Returns grad_accum_steps; fills total_batch when it was -1. -b auto must be resolved before.
 */
static inline int args_grad_accum(TrainArgs *a, int world_size) {
    if (a->B == ARGS_AUTO) { llmc_die("internal: -b auto was not resolved before the batch arithmetic"); }
    long long per_step = (long long)a->B * a->T * world_size;
    if (a->total_batch == -1) { a->total_batch = per_step; }
    if (a->total_batch <= 0 || a->total_batch % per_step != 0) {
        llmc_die("-d %lld is not divisible by B*T*ranks = %d*%d*%d = %lld; choose -d as a multiple of %lld",
                 a->total_batch, a->B, a->T, world_size, per_step, per_step);
    }
    const long long accum = a->total_batch / per_step;
    if (accum > INT_MAX) {  // the micro-step count is an int everywhere
        llmc_die("-d %lld is %lld micro-steps of B*T*ranks = %lld tokens per optimizer step; at most %d: choose a smaller -d "
                 "or a larger -b or -t", a->total_batch, accum, per_step, INT_MAX);
    }
    return (int)accum;
}

// a hash of every flag's value (compared across ranks at start: all must run the same thing)
static inline uint64_t args_hash(const TrainArgs *a) {
    uint64_t h = 0;
    for (int i = 0; i < ARGS_COUNT; i++) {
        const ArgSpec *s = &args_table[i];
        if (s->type == ARG_SECTION) { continue; }
        char buf[4096];
        if (s->type == ARG_F32) {
            snprintf(buf, sizeof(buf), "%a|", (double)*(const float *)args_cfield(a, s));  // exact
        } else {
            args_format_value(buf, sizeof(buf) - 1, a, s);
            strcat(buf, "|");
        }
        h = fnv1a64(h, buf, strlen(buf));
    }
    return h;
}

#endif  // LLMC_ARGS_H
