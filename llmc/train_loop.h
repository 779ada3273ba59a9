/*
 * The training loop shared by both trainers: data, batch arithmetic, schedule, numeric guards,
 * validation, HellaSwag, sampling, logging, checkpoints, resume and preemption. The model side
 * comes in through a Backend (backend.h). Rank 0 prints a step line per step (its ETA counts
 * the evaluations and samples still to come), progress lines during long evaluations, and
 * writes main.log and metrics.jsonl (logger.h).
 *
 * Step numbering: s counts completed optimizer steps. Iteration s evaluates (validation and
 * HellaSwag when s % -v == 0, and at the end), samples (when s > 0 and s % -s == 0, and at the
 * end), then trains step s and prints "step s+1/M". A checkpoint written after it is named s+1.
 */
#ifndef LLMC_TRAIN_LOOP_H
#define LLMC_TRAIN_LOOP_H

#include "args.h"
#include "backend.h"
#include "checkpoint.h"
#include "processes.h"
#include "dataloader.h"
#include "generate.h"
#include "guard.h"
#include "hellaswag.h"
#include "logger.h"
#include "plan.h"
#include "schedule.h"
#include "signals.h"
#include "tokenizer.h"

/*
 * What both trainers' main start from: the ranks (processes.h), the flags (args.h), the model
 * configuration that -e names and the file to read it from (train_resolve_model below).
 */
typedef struct {
    Comm comm;
    TrainArgs args;
    GPT2Config config;
    const char *model_file;  // -e's file, or a checkpoint's standing in for it; NULL: -e is a descriptor
} TrainSetup;

static inline const char *train_resolve_model(TrainArgs *a, GPT2Config *config);
static inline void train_start(TrainSetup *run, int *argc, char ***argv) {
    llmc_std_fds_open();  // before MPI or any file takes a closed stdout's number
    comm_init(&run->comm, argc, argv);
    args_parse(&run->args, *argc, *argv);
    comm_apply_args(&run->comm, &run->args);
    run->model_file = train_resolve_model(&run->args, &run->config);
    if (!run->args.prompt[0] && run->args.plan <= 0) {  // the data a run opens later, checked before a GPU starts
        if (!args_evaluate_only(&run->args)) { dataloader_check(run->args.train_glob, "-i"); }
        if (run->args.val_every > 0) { dataloader_check(run->args.val_glob, "-j"); }
    }
}

/*
 * The file that -e's model is read from: -e itself, or, for -y 1 where -e names a file that is not
 * there (a fine-tune's base model, deleted since or on another machine), the newest complete
 * checkpoint's model file, whose weights the resume loads anyway. -e stays as given (the ranks
 * compare their flags; a rank that found the file and one that did not run the same command).
 */
static inline const char *train_model_file(const TrainArgs *a) {
    if (!a->resume || !a->output_dir[0] || access(a->model, F_OK) == 0) { return a->model; }
    static char path[4096];
    int *steps;
    const int n = checkpoint_list(a->output_dir, &steps);
    const char *file = a->model;
    for (int i = 0; i < n && file == a->model; i++) {
        ckpt_path(path, sizeof(path), a->output_dir, "model", steps[i], -1);
        if (read_done_world_size(a->output_dir, steps[i]) >= 1 && access(path, F_OK) == 0) {
            if (llmc_world_size > 1) { printf("[rank %d] ", llmc_rank); }  // the rank that lacks it says so
            printf("-e %s is not there: -y 1 takes the model from checkpoint %d in %s (%s)\n", a->model, steps[i],
                   a->output_dir, path);
            fflush(stdout);
            file = path;
        }
    }
    free(steps);
    return file;
}

/*
 * The model configuration that -e names (a descriptor or a model file), and the file to read it
 * from (NULL for a descriptor). Checks that -t fits the model; in the generate mode (--prompt) the
 * batch is one sequence and the context min(-t, maxT). Dies with a message otherwise.
 */
static inline const char *train_resolve_model(TrainArgs *a, GPT2Config *config) {
    const char *file = NULL;
    if (!gpt2_parse_descriptor(a->model, config)) {
        file = train_model_file(a);
        ModelFileInfo info;
        char err[2048];
        if (model_file_probe(file, &info, err, sizeof(err))) {
            llmc_die("-e: %s%s", err, access(file, F_OK) != 0 ? " (-e takes a .bin file or a descriptor such as d12 or L2:C64:H4)" : "");
        }
        *config = info.config;
    }
    if (a->prompt[0]) {
        a->B = 1;
        if (a->T > config->max_seq_len) { a->T = config->max_seq_len; }
    }
    if (a->T > config->max_seq_len) {
        llmc_die("-t %d is larger than the model's max_seq_len %d (-e %s); use -t %d or less", a->T,
                 config->max_seq_len, a->model, config->max_seq_len);
    }
    if ((long long)a->B * a->T > INT_MAX) {  // the matmuls' row count (BLAS, cuBLAS) is an int
        llmc_die("-b %d -t %d: B*T = %lld positions per micro-batch, more than the 2^31-1 a matmul takes; use a smaller -b",
                 a->B, a->T, (long long)a->B * a->T);
    }
    return file;
}

// the loop's own buffers (train_run: inputs, targets, losses of B*T; probabilities and sampling scratch of 3V)
static inline size_t train_buffer_bytes(int B, int T, int V) {
    return 3 * (size_t)B * T * sizeof(int) + 3 * (size_t)V * sizeof(float);
}

/*
 * The data loader's row of a trainer's memory plan (on the device for the CPU trainer, the host for
 * the GPU's): the loop's buffers, the train and val loaders' window indexes (from the shard sizes:
 * nothing is read), and with -h 1 the HellaSwag set, with sampling the tokenizer's table on rank 0
 * (about their file sizes). The mapped shards are the page cache's, not counted.
 */
static inline void train_data_plan(MemPlan *p, int on_device, const TrainArgs *a, int B, int V) {
    size_t bytes = train_buffer_bytes(B, a->T, V);
    long long tr = dataloader_plan_bytes(a->train_glob, a->T, NULL);
    long long va = a->val_every > 0 ? dataloader_plan_bytes(a->val_glob, a->T, NULL) : 0;
    bytes += (size_t)(tr > 0 ? tr : 0) + (size_t)(va > 0 ? va : 0);
    long long hs = a->hellaswag_eval ? file_size_bytes(a->hellaswag) : 0, tk = a->sample_every > 0 ? file_size_bytes(a->tokenizer) : 0;
    if (hs > 0) { bytes += (size_t)hs + 3 * (size_t)B * a->T * sizeof(int); }  // the set and its batch buffers
    if (tk > 0) { bytes += (size_t)tk + (size_t)V * (sizeof(char *) + 1); }
    plan_add(p, PLAN_DATA, on_device, bytes);
    plan_note(p, PLAN_DATA, "batch buffers, window index%s%s%s", tr < 0 ? " (no -i shards found: not counted)" : "",
              hs > 0 ? ", HellaSwag set" : "", tk > 0 ? ", tokenizer" : "");
}

static inline void format_duration(char *out, size_t n, double seconds) {
    long s = (long)(seconds + 0.5);
    if (s >= 3600) { snprintf(out, n, "%ldh%02ldm", s / 3600, (s % 3600) / 60); }
    else if (s >= 60) { snprintf(out, n, "%ldm%02lds", s / 60, s % 60); }
    else { snprintf(out, n, "%lds", s); }
}

/*
 * Progress of a long evaluation, printed by rank 0: nothing for the first few seconds, then a line
 * "<what> ... done/total <unit> | elapsed | eta" at most every few seconds. The count is rank 0's
 * fraction of its own share times the total (ranks share the work evenly). The delay and the
 * interval are LLMC_PROGRESS_SECONDS (default 5; the tests set 0 to get a line per batch).
 */
typedef struct {
    int on;             // rank 0
    const char *what, *unit;
    long long total;
    double t0, next;    // start, time of the next allowed line
    double interval;
} Progress;

static inline double progress_interval(void) {
    const char *e = getenv("LLMC_PROGRESS_SECONDS");
    if (e == NULL || e[0] == '\0') { return 5.0; }
    char *end;
    double v = strtod(e, &end);
    if (*end != '\0' || !(v >= 0.0 && v <= 1e6)) {
        llmc_die("LLMC_PROGRESS_SECONDS='%s' is not a number of seconds (0 .. 1e6); unset it for the default 5", e);
    }
    return v;
}

static inline void progress_start(Progress *p, int on, const char *what, const char *unit, long long total) {
    p->on = on;
    p->what = what;
    p->unit = unit;
    p->total = total;
    p->interval = progress_interval();
    p->t0 = llmc_wall_seconds();
    p->next = p->t0 + p->interval;
}

// frac: rank 0's share done so far, 0..1
static inline void progress_update(Progress *p, double frac) {
    if (!p->on || frac >= 1.0) { return; }
    double now = llmc_wall_seconds();
    if (now < p->next || frac <= 0.0) { return; }
    p->next = now + p->interval;
    double elapsed = now - p->t0;
    char eta[32];
    format_duration(eta, sizeof(eta), elapsed / frac * (1.0 - frac));
    printf("%s ... %lld/%lld %s | %.1f s | eta %s\n", p->what, (long long)(frac * p->total), p->total, p->unit, elapsed, eta);
    fflush(stdout);
}

/*
 * A stop signal during an evaluation pass, on several ranks: the ranks agree whether any of them got
 * one every EVAL_STOP_EVERY_* units of their share (batches, examples), so that a signal to one rank
 * (one node's preemption notice) stops the others within a few units, not after their whole share.
 * The k-th agreement falls after k*every units on every rank, for those within `common` (the units
 * each rank's share has at least), so every rank makes the same all-reduces; a rank that got the
 * signal skips its units up to the next one. On one process the signal stops the pass at once.
 */
#define EVAL_STOP_EVERY_BATCHES 4   // validation: an all-reduce of one int per 4 forward batches
#define EVAL_STOP_EVERY_EXAMPLES 16 // HellaSwag: per 16 examples (64 rows, 4 batches of B=16)
typedef struct {
    Comm *c;
    int may_stop;             // 0 in the final evaluation, which runs whole
    long long every, common;  // the agreements: after every, 2*every, ... <= common units
    long long next;           // units after which the next agreement falls
    int agreed;               // some rank got a signal: every rank stops here
    int skipped;              // this rank skipped units of its share (its own signal)
} EvalStop;

static inline void eval_stop_start(EvalStop *e, Comm *c, int may_stop, long long every, long long common) {
    e->c = c;
    e->may_stop = may_stop;
    e->every = every;
    e->common = common;
    e->next = every;
    e->agreed = 0;
    e->skipped = 0;
}

// before unit `done` (0-based) of this rank's share, or with LLONG_MAX after its last: the
// agreements due by then. Returns 1 where the pass stops here, on every rank.
static inline int eval_stop_agreed(EvalStop *e, long long done) {
    if (!e->may_stop) { return 0; }
    if (e->c->world_size == 1) { return e->agreed = llmc_stop_signal != 0; }
    while (!e->agreed && e->next <= done && e->next <= e->common) {
        int flag = llmc_stop_signal != 0;
        e->c->allreduce_max_i32(e->c, &flag, 1);
        e->agreed = flag;
        e->next += e->every;
    }
    return e->agreed;
}

// whether this rank skips its next unit: it got a stop signal, the others hear of it at the next agreement
static inline int eval_stop_skip(EvalStop *e) {
    if (e->may_stop && llmc_stop_signal) { e->skipped = 1; }
    return e->skipped;
}

// after this rank's last unit (or an agreed stop): the agreements still due; 1 where this rank's
// share is void (a stop agreed, or units skipped), which the pass's last all-reduce tells every rank
static inline int eval_stop_finish(EvalStop *e) {
    eval_stop_agreed(e, LLONG_MAX);
    return e->agreed || e->skipped;
}

// HellaSwag's forward (ctx is an EvalCtx): the Backend's, counting rows for the progress line
typedef struct {
    Backend *b;
    Progress progress;
    long long rows_done, rows_total;  // rows (example x completion) of rank 0's share
    EvalStop stop;                    // a stop signal cuts the pass short
} EvalCtx;

static int train_eval_forward(void *ctx, int examples_done, const int *inputs, const int *targets, int B, int T,
                              float *losses) {
    EvalCtx *e = (EvalCtx *)ctx;
    if (eval_stop_agreed(&e->stop, examples_done)) { return 1; }  // the run stops: its checkpoint first
    if (eval_stop_skip(&e->stop)) {  // the result is void: no forward, losses of 0 for the scoring to read
        memset(losses, 0, (size_t)B * T * sizeof(float));
        return 0;
    }
    e->b->forward_losses(e->b, inputs, targets, B, T, losses);
    e->rows_done += B;
    progress_update(&e->progress, (double)e->rows_done / (double)e->rows_total);
    return 0;
}

// HellaSwag acc_norm over the first -hm examples (all with -hm -1), split across ranks; may_stop:
// a stop signal on any rank ends the pass on every rank (EvalStop), and then *stopped (the result is void)
static inline float train_hellaswag(const TrainArgs *a, Comm *c, Backend *b, const EvalSet *hs, int may_stop,
                                    int *stopped) {
    EvalCtx e;
    e.b = b;
    e.rows_done = 0;
    e.rows_total = evalset_rank_rows(hs, a->hellaswag_max, c->rank, c->world_size);
    const int n = evalset_count(hs, a->hellaswag_max);
    eval_stop_start(&e.stop, c, may_stop, EVAL_STOP_EVERY_EXAMPLES, n / c->world_size);
    progress_start(&e.progress, c->rank == 0, "HellaSwag", "examples", n);
    int evaluated;
    int correct = evalset_run(hs, a->hellaswag_max, c->rank, c->world_size, a->B, a->T, train_eval_forward, &e, &evaluated);
    double acc[3] = {(double)correct, (double)evaluated, (double)eval_stop_finish(&e.stop)};  // [2]: stopped
    c->allreduce_sum_f64(c, acc, 3);
    *stopped = acc[2] > 0;
    if (*stopped) { return 0.0f; }
    if (c->rank == 0) {
        printf("HellaSwag: %d/%d = %.4f (%.2f s)\n", (int)acc[0], (int)acc[1], acc[0] / acc[1],
               llmc_wall_seconds() - e.progress.t0);
    }
    return (float)(acc[0] / acc[1]);
}

// mean validation loss over the first -m*B windows of the val data (all with -m -1), any rank count;
// may_stop: a stop signal on any rank ends the pass on every rank (EvalStop), and then *stopped (the result is void)
static inline float train_val_loss(const TrainArgs *a, Comm *c, Backend *b, DataLoader *val, int *inputs,
                                   int *targets, float *losses, int may_stop, int *stopped) {
    int B = a->B, T = a->T;
    long long M = a->val_batches < 0 ? val->total_windows : (long long)a->val_batches * B;
    if (M > val->total_windows) { M = val->total_windows; }
    long long nmb = (M + B - 1) / B;
    long long mine = (nmb + c->world_size - 1) / c->world_size;  // rank 0's batches
    Progress p;
    progress_start(&p, c->rank == 0, "val loss", "batches", nmb);
    EvalStop stop;
    eval_stop_start(&stop, c, may_stop, EVAL_STOP_EVERY_BATCHES, nmb / c->world_size);
    double acc[3] = {0.0, 0.0, 0.0};  // loss sum, token count, the ranks that stopped
    for (long long j = c->rank; j < nmb; j += c->world_size) {
        if (eval_stop_agreed(&stop, j / c->world_size)) { break; }  // the run stops: its checkpoint first
        if (eval_stop_skip(&stop)) { continue; }
        int count = (int)(M - j * B < B ? M - j * B : B);
        dataloader_read(val, j * B, count, inputs, targets);
        b->forward_losses(b, inputs, targets, count, T, losses);
        for (long long i = 0; i < (long long)count * T; i++) { acc[0] += losses[i]; }
        acc[1] += (double)count * T;
        progress_update(&p, (double)(j / c->world_size + 1) / (double)mine);
    }
    acc[2] = eval_stop_finish(&stop);
    c->allreduce_sum_f64(c, acc, 3);
    *stopped = acc[2] > 0;
    if (*stopped) { return 0.0f; }
    float vl = (float)(acc[0] / acc[1]);
    if (c->rank == 0) { printf("val loss %.6f (%.2f s)\n", vl, llmc_wall_seconds() - p.t0); }
    return vl;
}

// iterations s in [from, M] (from >= 1) that run an event due every `every` steps and at s == M
static inline int events_left(int from, int M, int every) {
    if (every <= 0 || from > M) { return 0; }
    return M / every - (from - 1) / every + (M % every != 0);
}

// mean seconds of an event (an evaluation, a sample) so far, for the ETA
typedef struct {
    double seconds;
    int count;
} EventTime;

static inline double event_mean(const EventTime *e) { return e->count > 0 ? e->seconds / e->count : 0.0; }

// the optimizer settings of this run, as its checkpoints keep them
static inline RunSettings run_settings_of(const TrainArgs *a, const LRSchedule *sched) {
    RunSettings r = {1, sched->kind, a->warmup, a->lr, a->final_lr_frac, a->decay_frac, a->weight_decay, a->muon_lr,
                     a->muon_momentum};
    return r;
}

// flags whose values differ between this run and its checkpoint's, for one warning line
typedef struct {
    int n;
    const char *flag[8];
    char now[8][48], was[8][48];
} FlagDiffs;

static inline void flag_diff(FlagDiffs *d, const char *flag, const char *now, const char *was) {
    if (strcmp(now, was) == 0 || d->n == 8) { return; }
    d->flag[d->n] = flag;
    snprintf(d->now[d->n], sizeof(d->now[0]), "%s %s", flag, now);
    snprintf(d->was[d->n], sizeof(d->was[0]), "%s %s", flag, was);
    d->n++;
}

// two float flags that differ, in the fewest significant digits (6 to 9) that tell them apart
static inline void flag_diff_g(FlagDiffs *d, const char *flag, float now, float was) {
    if (now == was) { return; }
    char n[32], w[32];
    for (int digits = 6; digits <= 9; digits++) {
        snprintf(n, sizeof(n), "%.*g", digits, (double)now);
        snprintf(w, sizeof(w), "%.*g", digits, (double)was);
        if (strcmp(n, w) != 0) { break; }
    }
    flag_diff(d, flag, n, w);
}

static inline void flag_diff_d(FlagDiffs *d, const char *flag, int now, int was) {
    char n[16], w[16];
    snprintf(n, sizeof(n), "%d", now);
    snprintf(w, sizeof(w), "%d", was);
    flag_diff(d, flag, n, w);
}

// "a", "a and b", "a, b and c"
static inline void join_flags(char *out, size_t len, char items[][48], int n) {
    out[0] = '\0';
    for (int i = 0; i < n; i++) {
        const char *sep = i == 0 ? "" : i == n - 1 ? " and " : ", ";
        snprintf(out + strlen(out), len - strlen(out), "%s%s", sep, items[i]);
    }
}

static inline void warn_flag_diffs(const FlagDiffs *d, int step, const char *dir, const char *what) {
    char now[512], was[512];
    join_flags(now, sizeof(now), (char (*)[48])d->now, d->n);
    join_flags(was, sizeof(was), (char (*)[48])d->was, d->n);
    llmc_warn("%s %s from the %s of the run that wrote checkpoint %d in %s: %s", now, d->n > 1 ? "differ" : "differs", was,
              step, dir, what);
}

/*
 * A resumed run given other optimizer flags than the run that wrote its checkpoint (kept in it;
 * files of earlier versions kept only -x): one warning on rank 0 naming them. The LR schedule's
 * (-k -l -u -q -kd -x) only where the learning rate of a remaining step changes, naming the first.
 */
static inline void warn_settings_change(const TrainArgs *a, const LRSchedule *now, const TrainState *st) {
    static const char *kinds[] = {"cosine", "linear", "constant", "wsd"};
    const RunSettings *was = &st->settings;
    LRSchedule old = *now;
    if (st->max_steps > 0) { old.max_steps = st->max_steps; }
    if (was->recorded) {
        old.kind = (LRKind)was->kind; old.warmup = was->warmup; old.lr = was->lr;
        old.final_frac = was->final_frac; old.decay_frac = was->decay_frac;
    }
    FlagDiffs d = {0};
    flag_diff(&d, "-k", kinds[now->kind], kinds[old.kind]);
    flag_diff_g(&d, "-l", now->lr, old.lr);
    flag_diff_d(&d, "-u", now->warmup, old.warmup);
    flag_diff_g(&d, "-q", now->final_frac, old.final_frac);
    if (now->kind == LR_WSD || old.kind == LR_WSD) { flag_diff_g(&d, "-kd", now->decay_frac, old.decay_frac); }
    flag_diff_d(&d, "-x", now->max_steps, old.max_steps);
    for (int s = st->step; s < now->max_steps && d.n > 0; s++) {
        float lr_was = lr_at(&old, s), lr_is = lr_at(now, s);
        if (lr_was != lr_is) {
            char what[256];
            snprintf(what, sizeof(what), "the LR schedule depends on %s, so it changes from here on (step %d: lr %.2e "
                     "instead of %.2e)", d.n > 1 ? "them" : d.flag[0], s + 1, lr_is, lr_was);
            warn_flag_diffs(&d, st->step, a->output_dir, what);
            break;
        }
    }
    if (!was->recorded) { return; }
    FlagDiffs o = {0};
    flag_diff_g(&o, "-c", a->weight_decay, was->weight_decay);
    if (opt_is_muon(a)) {
        flag_diff_g(&o, "-ml", a->muon_lr, was->muon_lr);
        flag_diff_g(&o, "-mm", a->muon_momentum, was->muon_momentum);
    }
    if (o.n > 0) { warn_flag_diffs(&o, st->step, a->output_dir, "the updates from here on use the new value(s)"); }
}

/*
 * A resumed train_gpt2cu run whose -r, -ge, -bg or -at differ from the run that wrote its checkpoint
 * (recorded in it): the steps from here on are computed by other kernels, so they match an
 * uninterrupted run only to rounding; one warning on rank 0 naming them. -r auto says its own choice
 * (plan.h), so only a -r given as a number is compared.
 */
static inline void warn_kernel_change(const TrainArgs *a, const KernelChoices *now, const TrainState *st) {
    static const char *attention[] = {"own", "cudnn"};
    const KernelChoices *was = &st->kernels;
    FlagDiffs d = {0};
    if (!plan_recompute_was_auto() && now->recompute >= 0 && was->recompute >= 0) {
        flag_diff_d(&d, "-r", now->recompute, was->recompute);
    }
    if (now->gelu_fusion >= 0 && was->gelu_fusion >= 0) {
        flag_diff_d(&d, "-ge", now->gelu_fusion, was->gelu_fusion);
        flag_diff_d(&d, "-bg", now->bias_grad, was->bias_grad);
        flag_diff(&d, "-at", attention[now->attention], attention[was->attention]);
    }
    if (d.n > 0) {
        warn_flag_diffs(&d, st->step, a->output_dir,
                        "other kernels compute the steps from here on, so they match an uninterrupted run only to rounding, "
                        "not bit for bit");
    }
}

#define TRAIN_MAX_ROLLBACKS 3

/*
 * -rb K: the guards skipped K steps in a row (every rank decides alike). Reload the newest complete
 * checkpoint and pass over the data of the steps since it, so that the batches that led here are
 * not trained on again: the run goes on exactly as one resumed from that checkpoint whose data
 * stream lacks those steps. At most TRAIN_MAX_ROLLBACKS per run (the count is checkpointed).
 */
static inline void train_rollback(const TrainArgs *a, Comm *c, Backend *b, CkptWriter *ckw, Logger *lg, TrainState *st,
                                  const char *reason) {
    checkpoint_settle(ckw, c);  // one in flight completes first: it may be the newest
    if (st->rollbacks >= TRAIN_MAX_ROLLBACKS) {
        llmc_die("%d consecutive steps skipped by the numeric guards (last: %s) after %d rollbacks (-rb); the run is "
                 "diverging: lower -l, raise -u, or resume from an earlier checkpoint", st->guard.consecutive, reason,
                 st->rollbacks);
    }
    const int from = st->step;
    TrainState loaded = *st;  // the data settings, which the checkpoint must match
    flight_where(from, 0, "the rollback");
    if (checkpoint_resume(a->output_dir, b, c, &loaded) <= 0) {
        llmc_die("%d consecutive steps skipped by the numeric guards (last: %s) and -rb found no complete checkpoint "
                 "that loads in %s to roll back to; lower -l or raise -u, and checkpoint more often (-n)",
                 st->guard.consecutive, reason, a->output_dir);
    }
    loaded.guard.z_loss = st->guard.z_loss;
    loaded.guard.z_norm = st->guard.z_norm;
    loaded.guard.max_consecutive = st->guard.max_consecutive;
    loaded.guard.consecutive = 0;
    loaded.data_skip = st->data_skip + (from - loaded.step);
    loaded.rollbacks = st->rollbacks + 1;
    loaded.max_steps = st->max_steps;
    loaded.settings = st->settings;
    *st = loaded;
    logger_rollback(lg, from, st->step, from - st->step);
    if (c->rank == 0) {
        printf("rollback %d of %d: %d steps in a row skipped (last: %s); back to checkpoint %d, passing over the data "
               "of steps %d-%d (step %d now trains on the data of step %lld)\n", st->rollbacks, TRAIN_MAX_ROLLBACKS,
               a->rollback_after, reason, st->step, st->step + 1, from, st->step + 1,
               (long long)st->step + 1 + st->data_skip);
        fflush(stdout);
    }
}

static inline void train_data_free(DataLoader *train, DataLoader *val, EvalSet *hs) {
    dataloader_free(train);
    if (val) { dataloader_free(val); }
    if (hs) { evalset_free(hs); }
}

/*
 * The end of optimizer step s, after this rank's A micro-steps: the gradient reduction across the
 * ranks, the step's mean loss over all of them, the numeric guards and, unless they skip the step,
 * the optimizer update (clipped; optimizer.h) as applied update st->opt_steps + 1. train_run and
 * the model tests (dev/test/model_test.h) both end their steps here.
 */
typedef struct {
    float loss, norm, lr;
    int skipped;
    char reason[256];  // why the guards skipped the step
} StepEnd;

static inline void train_step_end(StepEnd *e, Backend *b, Comm *c, const TrainArgs *a, const LRSchedule *sched,
                                  TrainState *st, int s, int A) {
    double loss_sum = b->step_loss_sum(b);
    flight_where(s + 1, A, "the gradient reduction");
    e->norm = b->reduce_grads(b);
    flight_where(s + 1, 0, "the loss sum");
    c->allreduce_sum_f64(c, &loss_sum, 1);
    e->loss = (float)(loss_sum / ((double)A * c->world_size)) * guard_test_spike((long long)s + st->data_skip + 1);
    e->lr = lr_at(sched, s);
    e->skipped = guard_check(&st->guard, e->loss, e->norm, e->reason, sizeof(e->reason));
    if (!e->skipped) {
        flight_where(s + 1, 0, "the update");
        st->opt_steps++;
        OptSettings o = opt_settings(a, sched, s, e->norm, st->opt_steps);
        b->update(b, &o);
    }
}

// what a training run holds from one of its steps (train_run below) to the next
typedef struct {
    TrainArgs *a;
    Comm *c;
    Backend *b;
    int W, rank, A, B, T, V;  // ranks, this rank, micro-steps per step, micro-batch, sequence, vocabulary
    long long N;              // windows per optimizer step (d / T)
    int M;                    // optimizer steps of the run
    long long epoch_steps;
    int have_out, have_val, resumed;
    int saved_step;           // the step whose checkpoint holds this very state (resumed from, or begun): -1 none
    DataLoader train, val;
    EvalSet hs;
    TrainState st;            // what a checkpoint carries
    LRSchedule sched;
    Logger lg;
    CkptWriter ckw;           // the checkpoint being written in the background, if any
    Tokenizer tok;
    int *inputs, *targets;    // (B, T)
    float *losses;            // (B, T)
    float *probs;             // (V) sampling
    float *sample_scratch;    // (2V)
    double timed;             // seconds of the timed steps (a process's first step warms up, untimed)
    int timed_steps, first_step;
    EventTime eval_time, sample_time;
    PhaseWindow phases;       // -pe
    double eval_ms;           // evaluations, samples and checkpoints since the last step record
} TrainRun;

// the train and val data, the run's length and the HellaSwag set; then every rank must agree
static inline void train_open_data(TrainRun *r) {
    const TrainArgs *a = r->a;
    if (!args_evaluate_only(a)) {  // (-x 0: r->train stays empty)
        dataloader_init(&r->train, a->train_glob, "-i", r->T, r->V, a->shuffle, a->seed);
        dataloader_require(&r->train, r->N, "-i", "one optimizer step (d/T windows)");
    }
    r->have_val = a->val_every > 0;
    if (r->have_val) {
        dataloader_init(&r->val, a->val_glob, "-j", r->T, r->V, 0, 0);
        dataloader_require(&r->val, 1, "-j", "validation");
    }
    r->epoch_steps = r->train.total_windows / r->N;
    r->M = a->max_steps >= 0 ? a->max_steps : (int)(r->epoch_steps < INT_MAX ? r->epoch_steps : INT_MAX);
    memset(&r->hs, 0, sizeof(r->hs));
    if (a->hellaswag_eval) {
        evalset_load(&r->hs, a->hellaswag, r->V);
    }

    // every rank must run the same thing
    uint64_t h = args_hash(a);
    h = dataloader_hash(&r->train, h);  // (-x 0: empty, nothing)
    if (r->have_val) { h = dataloader_hash(&r->val, h); }
    comm_check_same(r->c, h, "flags or data files", "start every rank with the same command line and the same data");
}

/*
 * The output dir and, with -y 1, the newest complete checkpoint; then every rank must hold the
 * same model. Returns 1 when the checkpoint is the run's last step (nothing left to do).
 */
static inline int train_restore(TrainRun *r) {
    TrainArgs *a = r->a;
    Comm *c = r->c;
    Backend *b = r->b;
    TrainState *st = &r->st;
    int restarted = 0;  // a torchrun restart of the run that owns -o: resumed as with -y 1
    if (r->have_out && r->rank == 0) {
        struct stat out_st;
        if (stat(a->output_dir, &out_st) == 0 && !S_ISDIR(out_st.st_mode)) {
            llmc_die("-o %s exists and is not a folder; choose another -o", a->output_dir);
        }
        make_dirs_for(a->output_dir, "-o");
        checkpoint_lock_dir(a->output_dir);
        restarted = !a->resume && checkpoint_torchrun_restart();
        if (a->resume || restarted) {
            checkpoint_clean_tmp(a->output_dir);
        } else {
            checkpoint_claim_dir(a->output_dir, a->start_over);
        }
        checkpoint_lock_own();
    }
    c->bcast(c, &restarted, sizeof(restarted));  // every rank resumes alike
    if (restarted) {
        if (r->rank == 0) {
            printf("torchrun restarted this run's workers (restart %d): resuming from its checkpoints in %s, as -y 1 "
                   "does\n", comm_env_int("TORCHELASTIC_RESTART_COUNT"), a->output_dir);
        }
        a->resume = 1;
        a->start_over = 0;
    }
    c->barrier(c);
    if (r->have_out) { checkpoint_check_shared_dir(c, a->output_dir); }  // a stop signal writes a checkpoint even without -n
    flight_arm(r->have_out ? a->output_dir : NULL);  // from here a fatal error or signal writes the flight record
    memset(st, 0, sizeof(*st));
    st->B = r->B; st->T = r->T; st->total_batch = a->total_batch; st->shuffle = a->shuffle; st->seed = a->seed;
    st->sample_rng = sample_rng_seed(a->seed);
    st->optimizer = opt_is_muon(a);
    guard_init(&st->guard, a->guard_z_loss, a->guard_z_norm, a->guard_max_skips);
    r->resumed = 0;
    r->saved_step = -1;
    if (a->resume) {
        flight_where(0, 0, "resume");
        r->resumed = checkpoint_resume(a->output_dir, b, c, st);
        if (r->resumed > 0) { r->saved_step = st->step; }
        if (r->resumed < 0) {
            llmc_die("-y 1: none of the complete checkpoints in %s loads (the warnings above say why); a fresh start would "
                     "write among them: repair or move them, choose another -o, or pass --start-over 1 (without -y 1) to "
                     "move them into %s/old_run_<N>/ and start anew", a->output_dir, a->output_dir);
        }
        if (r->rank == 0) {
            if (r->resumed) { printf("resumed from checkpoint %d in %s\n", st->step, a->output_dir); }
            else { printf("no complete checkpoint in %s: starting at step 0 from -e %s\n", a->output_dir, a->model); }
            fflush(stdout);  // before any warning on stderr
        }
        st->guard.z_loss = a->guard_z_loss;
        st->guard.z_norm = a->guard_z_norm;
        st->guard.max_consecutive = a->guard_max_skips;
    }
    flight_where(st->step, 0, "the start-up check of the parameters");
    uint32_t crc = b->params_crc(b);
    comm_check_same(c, crc, "model parameters", "every rank must start from the same model");
    if (r->rank == 0 && r->W > 1) { printf("model parameters identical on all %d ranks (crc %08x)\n", r->W, crc); }
    if (st->step > r->M) {
        llmc_die("checkpoint %d in %s is past the end of this run (-x %d); raise -x to continue", st->step, a->output_dir, r->M);
    }
    // a checkpoint its run wrote at its end (-x = its step): its final evaluation and sample followed
    // it, nothing is left to do; one written mid-run (a longer -x, now cut to its step) gets them now
    const int written_last = st->max_steps == st->step || st->max_steps == 0;  // 0: not recorded
    if (r->resumed && st->step == r->M && !written_last && r->rank == 0) {
        printf("checkpoint %d in %s was written mid-run (its run had -x %d): -x %d ends the run there; its final "
               "evaluation and sample follow\n", st->step, a->output_dir, st->max_steps, r->M);
    }
    if (r->resumed && st->step == r->M && written_last) {
        if (r->rank == 0) {
            printf("run complete: checkpoint %d in %s is the last step (-x %d); nothing to do (raise -x to train further)\n",
                   st->step, a->output_dir, r->M);
        }
        return 1;
    }
    return 0;
}

// rank 0's banner: the trainer, the model, the batch, the data, the optimizer, the steps
static inline void train_print_banner(const TrainRun *r) {
    const TrainArgs *a = r->a;
    const Backend *b = r->b;
    printf("trainer %s | %d process(es) (%s) | model %s\n", b->name, r->W, r->c->launcher, a->model);
    const int mpirun = comm_mpirun_pid();
    if (mpirun > 0) {
        printf("to stop with a checkpoint: kill -USR1 %d (mpirun passes it on; Ctrl-C or SIGTERM to mpirun ends the "
               "ranks within 2 s)\n", mpirun);
    }
    printf("model: L %d | C %d | NH %d | maxT %d | V %d | Vp %d | %zu parameters\n", b->config.num_layers,
           b->config.channels, b->config.num_heads, b->config.max_seq_len, r->V, b->config.padded_vocab_size,
           b->num_params);
    printf("batch: B %d | T %d | ranks %d | grad accum %d | total %lld tokens per step\n", r->B, r->T, r->W, r->A,
           a->total_batch);
    if (args_evaluate_only(a)) {
        printf("train data: none read (-x 0: the model is evaluated, not trained)\n");
    } else {
        printf("train data: %lld tokens in %d shard(s), %lld steps per epoch%s\n", r->train.total_tokens,
               r->train.num_shards, r->epoch_steps, a->shuffle ? ", shuffled" : "");
    }
    if (r->have_val) { printf("val data: %lld tokens in %d shard(s)\n", r->val.total_tokens, r->val.num_shards); }
    if (opt_is_muon(a)) {
        printf("optimizer: muon (-ml %g, momentum %g, %d Newton-Schulz steps) on the blocks' matrices, AdamW (-l %g) "
               "on the rest\n", a->muon_lr, a->muon_momentum, a->muon_ns_steps, a->lr);
    }
    printf("steps: %d (starting at %d)\n", r->M, r->st.step);
    fflush(stdout);
}

// the schedule, the logs, the checkpoint writer, the tokenizer of the samples, the banner, the host buffers
static inline void train_prepare(TrainRun *r) {
    const TrainArgs *a = r->a;
    TrainState *st = &r->st;
    lr_schedule_init(&r->sched, a->schedule, a->lr, a->warmup, r->M, a->final_lr_frac, a->decay_frac);
    if (r->resumed && r->rank == 0) {
        warn_settings_change(a, &r->sched, st);
        warn_kernel_change(a, &r->b->kernels, st);
    }
    st->max_steps = r->M;
    st->settings = run_settings_of(a, &r->sched);

    const char *dir = r->have_out ? a->output_dir : NULL;
    logger_init(&r->lg, dir, r->rank, r->resumed, a->tensorboard, r->resumed ? st->step : -1);
    logger_note(&r->lg, plan_auto_note);
    logger_note(&r->lg, plan_recompute_note);
    ckpt_writer_init(&r->ckw, dir, r->b, r->c, a->ckpt_async, a->checkpoint_every, r->resumed ? st->step : -1);
    r->ckw.keep = a->checkpoint_keep;
    r->ckw.keep_major = a->checkpoint_major;
    memset(&r->tok, 0, sizeof(r->tok));
    if (r->rank == 0 && a->sample_every > 0) {
        tokenizer_init(&r->tok, a->tokenizer, "-tk");
        if (r->tok.init_ok && (int)r->tok.vocab_size < r->V) {  // samples would print ids it cannot decode
            llmc_die("-tk %s has %u tokens, fewer than the model's %d (-e %s): it is another tokenizer's decode table; "
                     "give this model's, or -s 0 for no samples", a->tokenizer, r->tok.vocab_size, r->V, a->model);
        }
        if (a->gen_tokens > r->T) {  // a sample is one sequence through the training's forward pass of -t positions
            llmc_warn("-g %d is more than -t %d: the samples during training stop at %d tokens (--prompt generates past "
                      "-t)", a->gen_tokens, r->T, r->T);
        }
    }
    if (r->rank == 0) { train_print_banner(r); }

    const size_t BT = (size_t)r->B * r->T;  // train_buffer_bytes counts these five
    r->inputs = (int *)mallocCheck(BT * sizeof(int));
    r->targets = (int *)mallocCheck(BT * sizeof(int));
    r->losses = (float *)mallocCheck(BT * sizeof(float));
    r->probs = (float *)mallocCheck((size_t)r->V * sizeof(float));
    r->sample_scratch = (float *)mallocCheck(2 * (size_t)r->V * sizeof(float));
    r->timed = 0.0;
    r->timed_steps = 0;
    r->first_step = st->step;
    r->eval_time.seconds = r->sample_time.seconds = 0.0;
    r->eval_time.count = r->sample_time.count = 0;
    memset(&r->phases, 0, sizeof(r->phases));
    r->eval_ms = 0.0;
}

// what runs before step s trains: validation and HellaSwag when due, a sample when due. Returns 0
// where a stop signal voided the evaluation (every rank alike, within a few batches of the signal):
// nothing of it is logged
static inline int train_evaluate(TrainRun *r, int s) {
    const TrainArgs *a = r->a;
    Backend *b = r->b;
    const int last = s == r->M;
    const int evaluate = r->have_val && (s % a->val_every == 0 || last);
    const int sample = r->rank == 0 && a->sample_every > 0 && ((s > 0 && s % a->sample_every == 0) || last);
    if (!evaluate && !sample) { return 1; }
    const double te = llmc_wall_seconds();
    if (b->range) { b->range("eval", 1); }
    if (evaluate) {
        double t0 = llmc_wall_seconds();
        flight_where(s + 1, 0, last ? "the final validation" : "validation before the step");
        // the final evaluation runs whole: it is the run's result, its checkpoint is written already, and
        // a resume of the run's last step would not evaluate again; but -x 0's is all the run does,
        // and a stop signal ends it (nothing is written)
        int stopped_val = 0, stopped_hs = 0;
        const int may_stop = !last || args_evaluate_only(a);
        float vl = train_val_loss(a, r->c, b, &r->val, r->inputs, r->targets, r->losses, may_stop, &stopped_val);
        flight_where(s + 1, 0, last ? "the final HellaSwag" : "HellaSwag before the step");
        float hsw = a->hellaswag_eval && !stopped_val ? train_hellaswag(a, r->c, b, &r->hs, may_stop, &stopped_hs) : -1.0f;
        if (stopped_val || stopped_hs) {
            if (r->rank == 0) { printf("%s cut short by a stop signal\n", stopped_val ? "validation" : "HellaSwag"); }
            if (b->range) { b->range(NULL, 0); }
            return 0;
        }
        double dt = llmc_wall_seconds() - t0;
        logger_eval(&r->lg, s, (long long)s * a->total_batch, vl, hsw, dt * 1000.0);
        r->eval_time.seconds += dt;
        r->eval_time.count++;
    }
    if (sample) {
        ckpt_fault("sample", s);  // a test's hook (LLMC_FAULT=sample:<s>:stop:0): rank 0 frozen as the sample begins
        double t0 = llmc_wall_seconds();
        // cut short by a stop signal, it goes on to train step s (the other ranks are in it already)
        if (train_sample(a, b, &r->tok, &r->st.sample_rng, r->inputs, r->probs, r->sample_scratch, &llmc_stop_signal)) {
            r->sample_time.seconds += llmc_wall_seconds() - t0;
            r->sample_time.count++;
        }
    }
    if (b->range) { b->range(NULL, 0); }
    r->eval_ms += (llmc_wall_seconds() - te) * 1000.0;
    return 1;
}

// rank 0's step line: loss, norm, lr, time, throughput, MFU where known, ETA, SKIPPED
static inline void train_print_step(const TrainRun *r, const StepEnd *e, double dt, double tps, double mfu) {
    const int step = r->st.step, M = r->M;
    // the steps left at the mean step time, plus the evaluations and samples still to come at theirs
    char eta[32] = "";
    double left = r->timed_steps > 0 ? r->timed / r->timed_steps * (M - step) : 0.0;
    left += events_left(step, M, r->have_val ? r->a->val_every : 0) * event_mean(&r->eval_time);
    left += events_left(step, M, r->a->sample_every) * event_mean(&r->sample_time);
    if (r->timed_steps > 0) { format_duration(eta, sizeof(eta), left); }
    printf("step %d/%d | loss %.6f | norm %.4f | lr %.2e | %.1f ms | %.0f tok/s", step, M, e->loss, e->norm, e->lr,
           dt * 1000.0, tps);
    if (mfu >= 0) { printf(" | MFU %.1f%%", mfu); } else if (r->b->peak_flops < 0) { printf(" | MFU n/a"); }
    printf(" | eta %s%s\n", r->timed_steps > 0 ? eta : "-", e->skipped ? " | SKIPPED" : "");
    fflush(stdout);
}

/*
 * Optimizer step s: A micro-steps on this rank, W ranks; then the step line, the logs, the guards'
 * verdict. Returns 1 when the guards rolled the run back (-rb): it goes on from r->st.step.
 */
static inline int train_step(TrainRun *r, int s) {
    const TrainArgs *a = r->a;
    Backend *b = r->b;
    TrainState *st = &r->st;
    ckpt_fault("step", s + 1);
    double t0 = llmc_wall_seconds();
    double phase_ms[NUM_PHASES] = {0.0};
    float dloss = 1.0f / ((float)r->B * r->T * r->A * r->W);
    for (int k = 0; k < r->A; k++) {
        flight_where(s + 1, k + 1, "forward and backward");
        const double td = llmc_wall_seconds();
        if (b->range) { b->range("data", 1); }
        long long w = dataloader_train_window(a->overfit_batch ? 0 : (long long)s + st->data_skip, k, r->rank, r->W,
                                              r->B, r->N);
        dataloader_read(&r->train, w, r->B, r->inputs, r->targets);
        if (b->range) { b->range(NULL, 0); }
        phase_ms[PHASE_DATA] += (llmc_wall_seconds() - td) * 1000.0;
        b->train_micro_step(b, r->inputs, r->targets, r->B, r->T, dloss, k, r->A);
    }
    StepEnd e;
    train_step_end(&e, b, r->c, a, &r->sched, st, s, r->A);
    double dt = llmc_wall_seconds() - t0;
    if (s > r->first_step || r->M - r->first_step == 1) { r->timed += dt; r->timed_steps++; }  // the first step warms up
    st->step = s + 1;
    double tps = (double)a->total_batch / dt;
    double mfu = b->peak_flops > 0 ? 100.0 * b->flops_per_token * tps / r->W / b->peak_flops : -1.0;
    if (r->rank == 0) { train_print_step(r, &e, dt, tps, mfu); }
    DeviceReadings dev;  // -lg: rank 0's device every gpu_log_every steps, on its line and in the logs
    int have_dev = 0;
    if (r->rank == 0 && a->gpu_log_every > 0 && b->device_readings && st->step % a->gpu_log_every == 0) {
        have_dev = b->device_readings(b, &dev);
        if (have_dev) {
            char line[512];
            device_readings_line(&dev, line, sizeof(line));
            printf("  %s\n", line);
            fflush(stdout);
        }
    }
    b->step_phases(b, phase_ms);
    phase_ms[PHASE_EVAL] = r->eval_ms;
    StepRecord rec = {s, (long long)st->step * a->total_batch, e.loss, e.lr, e.norm, dt * 1000.0, tps, mfu,
                      e.skipped ? e.reason : NULL, phase_ms, have_dev ? &dev : NULL};
    logger_step(&r->lg, &rec);
    if (r->rank == 0 && a->phase_every > 0) {
        phase_window_add(&r->phases, phase_ms, dt * 1000.0 + r->eval_ms, st->step);
        if (st->step % a->phase_every == 0) { phase_window_print(&r->phases); }
    }
    r->eval_ms = 0.0;
    if (!e.skipped) { return 0; }
    if (r->rank == 0) { llmc_warn("step %d skipped: %s", st->step, e.reason); }
    if (a->rollback_after > 0 && st->guard.consecutive >= a->rollback_after) {
        train_rollback(a, r->c, b, &r->ckw, &r->lg, st, e.reason);
        return 1;
    }
    if (st->guard.consecutive >= st->guard.max_consecutive) {
        checkpoint_settle(&r->ckw, r->c);  // the one in flight predates the divergence
        llmc_die("%d consecutive steps skipped by the numeric guards (last: %s); the run is diverging: lower "
                 "-l, raise -u, or resume from an earlier checkpoint", st->guard.consecutive, e.reason);
    }
    return 0;
}

/*
 * After a step: the checkpoint in flight completed, a new one begun when due or when a signal asks
 * to stop. One all-reduce tells every rank whether any rank got a signal, and whether the
 * checkpoint being written in the background is done everywhere. Returns 1 to stop the run.
 * in_evaluation: a stop signal cut the evaluation after the step short; where a checkpoint of this
 * very state exists (begun after the step, or the one resumed from) it is not written again.
 */
static inline int train_checkpoint(TrainRun *r, int in_evaluation) {
    const TrainArgs *a = r->a;
    Comm *c = r->c;
    TrainState *st = &r->st;
    int flags[3] = {llmc_stop_signal != 0, 0, 0};
    r->ckw.step_s = r->timed_steps > 0 ? r->timed / r->timed_steps : 0.0;
    checkpoint_flags(&r->ckw, &flags[1], &flags[2]);
    flight_where(st->step, 0, "the stop-signal agreement after the step");
    c->allreduce_max_i32(c, flags, 3);
    const int stop = flags[0];
    flight_where(st->step, 0, "the checkpoint after the step");
    if (r->ckw.in_flight && !flags[1]) { checkpoint_complete(&r->ckw, c, flags[2]); }
    int want_ckpt = a->checkpoint_every > 0 && (st->step % a->checkpoint_every == 0 || st->step == r->M);
    if (r->have_out && (want_ckpt || stop)) {
        double tc = llmc_wall_seconds();
        if (r->b->range) { r->b->range("checkpoint", 1); }
        if (!(in_evaluation && r->saved_step == st->step)) {
            checkpoint_begin(&r->ckw, c, st);
            r->saved_step = st->step;
        }
        if (stop) {
            r->ckw.ends_run = 1;
            checkpoint_settle(&r->ckw, c);
        }
        if (r->b->range) { r->b->range(NULL, 0); }
        r->eval_ms += (llmc_wall_seconds() - tc) * 1000.0;  // counted with the next step's evaluations
    }
    if (stop && r->rank == 0) {
        char line[sizeof(a->output_dir) + 256] = "";
        if (r->have_out && r->ckw.newest == st->step) {
            snprintf(line, sizeof(line), "stopped by a signal after step %d; checkpoint %d is in %s; to resume, run the same "
                     "command with -y 1\n", st->step, st->step, a->output_dir);
        } else if (!r->have_out) {
            snprintf(line, sizeof(line), "stopped by a signal after step %d; nothing was saved (no -o); next time pass -o <dir> "
                     "to be able to resume\n", st->step);
        }
        fputs(line, stdout);
        // stdout's reader gone (SIGPIPE, `| tee` ended by the same Ctrl-C): the line on stderr instead
        if (fflush(stdout) != 0 || ferror(stdout)) { fputs(line, stderr); }
    }
    return stop;
}

// the last checkpoint completed; the mean step time; the host buffers, the logs and the tokenizer freed
static inline void train_finish(TrainRun *r) {
    flight_where(r->st.step, 0, "the last checkpoint");
    checkpoint_settle(&r->ckw, r->c);
    checkpoint_require_last(&r->ckw, r->c, r->st.step);
    ckpt_writer_free(&r->ckw);
    if (r->rank == 0 && r->timed_steps > 0) {
        printf("total average iteration time: %.3f ms\n", r->timed / r->timed_steps * 1000.0);
    }
    free(r->inputs); free(r->targets); free(r->losses); free(r->probs); free(r->sample_scratch);
    logger_free(&r->lg);
    if (r->tok.init_ok) { tokenizer_free(&r->tok); }
}

/*
 * Run training (or, with --prompt, generate). Returns the process exit code (0: finished or stopped by a signal with a
 * checkpoint written). Errors exit through llmc_die.
 */
static inline int train_run(TrainArgs *a, Comm *c, Backend *b) {
    if (a->prompt[0]) {  // the generate mode: no data, no training
        if (c->world_size > 1) { llmc_die("--prompt generates in one process; run it without mpirun/torchrun"); }
        return generate_run(a, b);
    }
    TrainRun r;
    memset(&r, 0, sizeof(r));
    r.a = a; r.c = c; r.b = b;
    r.W = c->world_size;
    r.rank = c->rank;
    r.A = args_grad_accum(a, r.W);
    r.B = a->B; r.T = a->T; r.V = b->config.vocab_size;
    r.N = a->total_batch / r.T;
    r.have_out = a->output_dir[0] != '\0';

    train_open_data(&r);
    if (!train_restore(&r)) {
        train_prepare(&r);
        // Start-up ends here. Until now SIGTERM/SIGINT end the process (nothing is written that a
        // resume needs, and a start-up that waits, on a slow disk or a stuck rank, must stay
        // killable); from here they stop the run after its step, with a checkpoint.
        if (fault_due("start", 0)) { fflush(NULL); raise(SIGSTOP); }
        signals_install();
        for (int s = r.st.step;; s++) {
            if (!train_evaluate(&r, s)) {  // a stop signal: the checkpoint of step s, and -y 1 evaluates again
                if (!args_evaluate_only(a)) { train_checkpoint(&r, 1); }
                else if (r.rank == 0) { printf("stopped by a signal: the evaluation (-x 0) is not finished, nothing was logged\n"); }
                break;
            }
            if (s == r.M) { break; }
            if (train_step(&r, s)) {
                s = r.st.step - 1;  // rolled back: the loop goes on from the checkpoint
                r.saved_step = -1;  // whose file lacks the steps passed over: not this state
                continue;
            }
            if (train_checkpoint(&r, 0)) { break; }
        }
        train_finish(&r);
    }
    train_data_free(&r.train, r.have_val ? &r.val : NULL, a->hellaswag_eval ? &r.hs : NULL);
    return 0;
}

#endif  // LLMC_TRAIN_LOOP_H
