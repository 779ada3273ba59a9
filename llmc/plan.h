/*
 * The memory plan (--plan) and the automatic micro-batch (-b auto), shared by both trainers.
 *
 * A trainer describes what it will allocate as a MemPlan: bytes per row (parameters, gradients,
 * master weights, AdamW moments, activations, logits, attention workspace, scratch, communication
 * buffers, data loader, runtime), on the device (the memory -b auto must fit: the GPU's for
 * train_gpt2cu, RAM for train_gpt2) and on the host besides (train_gpt2cu's pinned staging and
 * host buffers). Its allocations are sized by the same functions that fill its plan, and it
 * checks the plan against the device before allocating, so the printed plan and what is
 * allocated cannot disagree. Every row is what one rank holds: rank 0's (with ZeRO-1 the largest
 * shard).
 *
 * The device: a GPU's free memory (cudaMemGetInfo), or the RAM available (MemAvailable of
 * /proc/meminfo) shared by the ranks on this machine. -b auto keeps a margin of it free (the
 * trainer states it: on a GPU CUDA, cuBLAS and NCCL allocate outside the plan; on a CPU the C
 * library's heap and the page cache), takes the largest B whose plan fits on the smallest device
 * of all ranks (every rank gets the same B), among those that divide -d over the ranks (with
 * -d -1 any B that the train data can serve: -d becomes B*T*ranks), and says why on rank 0 and in
 * main.log's header. -r auto (train_gpt2cu) then takes the least recomputation whose plan fits at
 * that B, the same on every rank; with -b auto, B is chosen at -r 1 first.
 */
#ifndef LLMC_PLAN_H
#define LLMC_PLAN_H

#include "args.h"
#include "processes.h"
#include "dataloader.h"

typedef enum {
    PLAN_PARAMS, PLAN_GRADS, PLAN_MASTER, PLAN_ADAMW, PLAN_ACTS, PLAN_LOGITS, PLAN_ATTENTION, PLAN_SCRATCH,
    PLAN_COMM, PLAN_DATA, PLAN_RUNTIME, PLAN_ROWS
} PlanRow;

static const char *const plan_row_name[PLAN_ROWS] = {
    "parameters", "gradients", "master weights", "AdamW moments", "activations", "logits", "attention workspace",
    "scratch", "communication buffers", "data loader", "runtime"};

typedef struct {
    size_t device[PLAN_ROWS];  // bytes in the device's memory (RAM for the CPU trainer)
    size_t host[PLAN_ROWS];    // bytes in host RAM besides (the GPU trainer's host side)
    char note[PLAN_ROWS][160]; // what the row holds, or why it is empty
} MemPlan;

static inline void plan_add(MemPlan *p, PlanRow row, int on_device, size_t bytes) {
    if (on_device) { p->device[row] += bytes; } else { p->host[row] += bytes; }
}

static void plan_note(MemPlan *p, PlanRow row, const char *fmt, ...) LLMC_PRINTF(3, 4);
static void plan_note(MemPlan *p, PlanRow row, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->note[row], sizeof(p->note[row]), fmt, ap);
    va_end(ap);
}

static inline size_t plan_total(const MemPlan *p, int on_device) {
    size_t t = 0;
    for (int i = 0; i < PLAN_ROWS; i++) { t += on_device ? p->device[i] : p->host[i]; }
    return t;
}

// the plan of a trainer at micro-batch B and recompute level r (its other settings are in ctx)
typedef void (*PlanFn)(void *ctx, int B, int recompute, MemPlan *out);

typedef struct {
    int known;            // 0: nothing to measure (train_gpt2cu where no GPU is visible)
    size_t total, free;   // bytes, for one rank
    double margin;        // fraction of total that -b auto leaves free
    const char *name;     // "GPU" or "RAM"
    char what[256];       // where the figures come from, or why they are unknown
} DeviceMemory;

/*
 * The run a -y 1 start resumes, as its newest checkpoint's rank 0 state file tells (checkpoint.h
 * reads it on rank 0; plan_auto passes it on to every rank). -b auto and -r auto keep that run's B
 * and -r level where they fit: a resume is bitwise only with the same B on as many ranks and at the
 * same level (-r 0 and -r 1 round GELU's output apart), and -d -1 must mean the batch it had.
 */
typedef struct {
    int found;              // 0: none (a fresh start, or no readable checkpoint)
    int step, B, world_size;
    int recompute;          // its -r level; -1 where the checkpoint records none
    long long total_batch;  // its -d
} PlanResume;

typedef struct {
    const char *trainer;   // for the heading
    PlanFn fn;
    void *ctx;
    int recompute_levels;  // 3 (-r 0, 1, 2), or 1 where the trainer ignores -r
    DeviceMemory dev;
    size_t ckpt_snapshot;  // host bytes of the largest rank copy for background checkpoints (checkpoint.h); 0: none
    PlanResume resume;     // what -b auto and -r auto keep on a resume (zero: none)
} Planner;

static const double PLAN_GiB = 1024.0 * 1024.0 * 1024.0;

static inline void plan_format_bytes(char *out, size_t n, size_t b) {
    if (b == 0) { snprintf(out, n, "-"); }
    else if (b < 1024) { snprintf(out, n, "%zu B", b); }
    else if (b < ((size_t)1 << 20)) { snprintf(out, n, "%.1f KiB", b / 1024.0); }
    else if (b < ((size_t)1 << 30)) { snprintf(out, n, "%.1f MiB", b / 1048576.0); }
    else { snprintf(out, n, "%.2f GiB", b / PLAN_GiB); }
}

// the bytes -b auto may plan for: the free memory less the margin (0 if the margin takes it all)
static inline size_t plan_budget(const DeviceMemory *d) {
    double keep = d->margin * (double)d->total;
    return (double)d->free > keep ? (size_t)((double)d->free - keep) : 0;
}

// the largest B (1 .. the -b maximum) whose plan fits `budget` bytes on the device; 0 if B = 1 does not
static inline int plan_max_batch(const Planner *pl, int recompute, size_t budget) {
    const int hi = 1 << 20;  // -b's maximum (args.h)
    MemPlan p;
    int lo = 0, up = 1;      // plan(lo) fits (lo = 0: none known), plan(up) is to be tried
    while (up <= hi) {       // doubling, then bisection: plans grow with B
        memset(&p, 0, sizeof(p));
        pl->fn(pl->ctx, up, recompute, &p);
        if (plan_total(&p, 1) > budget) { break; }
        lo = up;
        up = up == hi ? hi + 1 : (up * 2 > hi ? hi : up * 2);
    }
    if (up > hi) { return lo; }
    while (up - lo > 1) {
        int mid = lo + (up - lo) / 2;
        memset(&p, 0, sizeof(p));
        pl->fn(pl->ctx, mid, recompute, &p);
        if (plan_total(&p, 1) > budget) { up = mid; } else { lo = mid; }
    }
    return lo;
}

// the largest B <= fit that divides -d over W ranks at T; with -d -1 any B whose step (B*W windows)
// the train shards hold, when they are there to count (file sizes only); 0 if none
static inline int plan_divisible_batch(const TrainArgs *a, int W, int fit) {
    if (a->total_batch == -1) {
        long long windows;
        dataloader_plan_bytes(a->train_glob, a->T, &windows);
        if (windows >= 0 && windows / W < fit) { return (int)(windows / W); }
        return fit;
    }
    for (int b = fit; b >= 1; b--) {
        long long per = (long long)b * a->T * W;
        if (a->total_batch % per == 0) { return b; }
    }
    return 0;
}

// RAM: MemTotal and MemAvailable of /proc/meminfo, shared by `ranks` processes of this machine
static inline DeviceMemory plan_ram(int ranks) {
    DeviceMemory d;
    memset(&d, 0, sizeof(d));
    d.name = "RAM";
    d.margin = 0.10;
    FILE *f = fopen("/proc/meminfo", "r");
    long long total_kb = -1, avail_kb = -1;
    char line[256];
    while (f && fgets(line, sizeof(line), f)) {
        sscanf(line, "MemTotal: %lld kB", &total_kb);
        sscanf(line, "MemAvailable: %lld kB", &avail_kb);
    }
    if (f) { fclose(f); }
    if (total_kb <= 0 || avail_kb < 0) {
        snprintf(d.what, sizeof(d.what), "unknown (no MemTotal/MemAvailable in /proc/meminfo)");
        return d;
    }
    if (ranks < 1) { ranks = 1; }
    d.known = 1;
    d.total = (size_t)total_kb * 1024 / (size_t)ranks;
    d.free = (size_t)avail_kb * 1024 / (size_t)ranks;
    snprintf(d.what, sizeof(d.what), "RAM %.2f GiB available of %.2f (/proc/meminfo)%s", avail_kb / 1048576.0,
             total_kb / 1048576.0, ranks > 1 ? ", shared by the ranks on this machine" : "");
    return d;
}

// resident memory of this process now (code, libraries, what is allocated so far), from /proc/self/statm
static inline size_t plan_process_rss(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    long long size = 0, resident = 0;
    if (f) {
        if (fscanf(f, "%lld %lld", &size, &resident) != 2) { resident = 0; }
        fclose(f);
    }
    return (size_t)resident * (size_t)sysconf(_SC_PAGESIZE);
}

// -b auto's and -r auto's choices and their reasons, for rank 0's output and main.log's header
// (empty: the flags were given)
static char plan_auto_note[640];
static char plan_recompute_note[512];

// whether -r auto chose this run's level (it then says why, and warns where a resume's level does not fit)
static inline int plan_recompute_was_auto(void) { return plan_recompute_note[0] != '\0'; }

// the -r at which -b auto searches: -r itself, or 1 (the level before -r auto existed) for -r auto
static inline int plan_batch_recompute(const TrainArgs *a) { return a->recompute == ARGS_AUTO ? 1 : a->recompute; }

// -r auto's level at micro-batch B: the least recomputation whose plan fits `budget` (0, else 1,
// ...), or the most the trainer has where none fits (its own check then stops the run with the
// sizes); 1 where the trainer ignores -r. *plan_bytes receives that level's plan.
static inline int plan_least_recompute(const Planner *pl, int B, size_t budget, size_t *plan_bytes) {
    if (pl->recompute_levels < 2) { *plan_bytes = 0; return 1; }
    MemPlan p;
    int r = 0;
    for (;; r++) {
        memset(&p, 0, sizeof(p));
        pl->fn(pl->ctx, B, r, &p);
        *plan_bytes = plan_total(&p, 1);
        if (*plan_bytes <= budget || r + 1 == pl->recompute_levels) { break; }
    }
    return r;
}

/*
 * -b auto's B on W ranks where up to `fit` fits everywhere: the resumed checkpoint's B where it fits
 * and divides -d on as many ranks (*kept = 1), else the largest that divides -d (0: none). With
 * -d -1 a resume takes the checkpoint's -d into a->total_batch. One rule for the run and --plan.
 */
static inline int plan_batch_choice(TrainArgs *a, const PlanResume *R, int W, int fit, int *kept) {
    if (R->found && a->total_batch == -1) { a->total_batch = R->total_batch; }
    *kept = R->found && R->world_size == W && R->B >= 1 && R->B <= fit && a->total_batch % ((long long)R->B * a->T * W) == 0;
    return *kept ? R->B : plan_divisible_batch(a, W, fit);
}

// -r auto's level where `least` is the least recomputation that fits: the resumed checkpoint's
// level where it is more (*kept = 1; it fits too), else `least`. One rule for the run and --plan.
static inline int plan_recompute_choice(const PlanResume *R, int least, int levels, int *kept) {
    const int resumed = R->found ? R->recompute : -1;
    *kept = resumed > least && resumed < levels;
    return *kept ? resumed : least;
}

/*
 * -b auto: sets a->B (every rank the same) or stops with the reason. Collective: every rank calls
 * it (with its own device). No-op when -b was given. A resume on as many ranks keeps the B of the
 * checkpoint where it fits and divides -d; with -d -1 a resume takes the checkpoint's -d (which
 * it must keep).
 */
static inline void plan_auto_batch(TrainArgs *a, Comm *c, const Planner *pl) {
    if (a->B != ARGS_AUTO) { return; }
    if (!pl->dev.known) {
        llmc_die("-b auto needs to know the %s's memory, but it is %s; give -b a number (--plan %d prints the plan)",
                 pl->dev.name, pl->dev.what, c->world_size);
    }
    const int recompute = plan_batch_recompute(a);
    const size_t budget = plan_budget(&pl->dev);
    int fit = plan_max_batch(pl, recompute, budget);
    int neg = -fit;  // the smallest fit over the ranks
    c->allreduce_max_i32(c, &neg, 1);
    const int fit_all = -neg, W = c->world_size;
    if (fit_all < 1) {
        llmc_die("-b auto: not even B = 1 fits%s: %s less a %.0f%% margin leaves %.2f GiB; use -r 2, -z 1 with several "
                 "ranks, a shorter -t or a smaller model (--plan %d prints the plan)", fit < 1 ? "" : " on every rank",
                 pl->dev.what, 100 * pl->dev.margin, budget / PLAN_GiB, W);
    }
    const PlanResume *R = &pl->resume;
    int keep;
    const int B = plan_batch_choice(a, R, W, fit_all, &keep);
    if (B < 1 && a->total_batch == -1) {
        llmc_die("-b auto: the train data (-i %s) holds fewer windows of T+1 = %d tokens than the %d rank(s), one each; "
                 "use more data or a shorter -t", a->train_glob, a->T + 1, W);
    }
    if (B < 1) {
        llmc_die("-b auto: up to B = %d fits, but none of 1..%d divides -d %lld over %d rank(s) at T %d; choose -d as a "
                 "multiple of B*T*ranks for a B that fits, or -d -1", fit_all, fit_all, a->total_batch, W, a->T);
    }
    MemPlan p;
    memset(&p, 0, sizeof(p));
    pl->fn(pl->ctx, B, recompute, &p);
    char kept[96] = "";
    if (keep) { snprintf(kept, sizeof(kept), ", checkpoint %d's, kept for a bitwise resume", R->step); }
    snprintf(plan_auto_note, sizeof(plan_auto_note),
             "-b auto: B %d%s; up to %d fit%s%s (%s less a %.0f%% margin: %.2f GiB), %s; plan %.2f GiB per rank", B, kept,
             fit_all, W > 1 ? " on the smallest device of all ranks" : "", a->recompute == ARGS_AUTO ? " at -r 1" : "",
             pl->dev.what, 100 * pl->dev.margin, budget / PLAN_GiB,
             a->total_batch == -1 ? (B < fit_all ? "-d -1: as many as the train data holds per step" : "-d -1 becomes B*T*ranks")
             : keep || B == fit_all ? "and it divides -d over the ranks"
                                                                             : "the largest of those dividing -d over the ranks",
             plan_total(&p, 1) / PLAN_GiB);
    if (c->rank == 0) {
        printf("%s\n", plan_auto_note);
        fflush(stdout);
    }
    a->B = B;
}

/*
 * -r auto (the default): sets a->recompute to the least recomputation whose plan fits at a->B on
 * every rank's device (the most any rank needs), and says so on rank 0. A resume keeps the level
 * of the checkpoint where that fits (more recomputation, less memory); where it does not, a
 * warning says the resume may match only to rounding. Collective; after -b auto. No-op when -r
 * was given; 1 where the trainer ignores -r.
 */
static inline void plan_auto_recompute(TrainArgs *a, Comm *c, const Planner *pl) {
    if (a->recompute != ARGS_AUTO) { return; }
    if (pl->recompute_levels < 2) {
        a->recompute = 1;
        return;
    }
    if (!pl->dev.known) {
        llmc_die("-r auto needs to know the %s's memory, but it is %s; give -r 0, 1 or 2 (--plan %d prints the plan)",
                 pl->dev.name, pl->dev.what, c->world_size);
    }
    const int resumed = pl->resume.found ? pl->resume.recompute : -1;
    const size_t budget = plan_budget(&pl->dev);
    size_t bytes = 0;
    int v[2];  // the level, and whether even the most recomputation does not fit (the trainer's own check then
    v[0] = plan_least_recompute(pl, a->B, budget, &bytes);  // stops the run with the sizes)
    v[1] = bytes > budget;
    c->allreduce_max_i32(c, v, 2);
    const int least = v[0];
    int keep;
    const int r = plan_recompute_choice(&pl->resume, least, pl->recompute_levels, &keep);
    a->recompute = r;
    if (v[1]) { return; }
    MemPlan p;  // this rank's plan at the level of all
    memset(&p, 0, sizeof(p));
    pl->fn(pl->ctx, a->B, r, &p);
    bytes = plan_total(&p, 1);
    char why[128] = "the least recomputation whose plan fits";
    if (keep) {
        snprintf(why, sizeof(why), "checkpoint %d's level, kept for a bitwise resume; -r %d, the least recomputation, fits too",
                 pl->resume.step, least);
    }
    snprintf(plan_recompute_note, sizeof(plan_recompute_note),
             "-r auto: -r %d, %s at B %d%s (%s less a %.0f%% margin: %.2f GiB); plan %.2f GiB%s", r, why, a->B,
             c->world_size > 1 ? " on every rank" : "", pl->dev.what, 100 * pl->dev.margin, budget / PLAN_GiB,
             bytes / PLAN_GiB, c->world_size > 1 ? " on rank 0" : "");
    if (c->rank == 0 && !a->prompt[0]) {  // --prompt prints its text alone
        printf("%s\n", plan_recompute_note);
        fflush(stdout);
        if (resumed >= 0 && resumed < least) {
            llmc_warn("checkpoint %d was written at -r %d, which does not fit now: at -r %d the resumed steps may match an "
                      "uninterrupted run only to rounding, not bit for bit", pl->resume.step, resumed, least);
        }
    }
}

// -b auto, then -r auto (each a no-op where its flag was given), with rank 0's pl->resume on every rank
static inline void plan_auto(TrainArgs *a, Comm *c, const Planner *pl) {
    if (a->B != ARGS_AUTO && a->recompute != ARGS_AUTO) { return; }
    Planner all = *pl;
    c->bcast(c, &all.resume, sizeof(all.resume));
    plan_auto_batch(a, c, &all);
    plan_auto_recompute(a, c, &all);
}

/*
 * --plan: the plan of the flags' run on W ranks, row by row, the device, the largest -b that fits
 * for each -r and -b auto's choice; rank 0 prints it. With -y 1, -b auto and -r auto choose as the
 * run would on resuming pl->resume. For -b auto without a known device the plan is shown at B = 1.
 */
static inline void plan_print(const Planner *pl, const TrainArgs *flags, int W, const GPT2Config *cfg) {
    TrainArgs args = *flags;  // -b auto on a resume with -d -1 takes the checkpoint's -d
    const TrainArgs *a = &args;
    const PlanResume *R = &pl->resume;
    const size_t num_params = gpt2_num_params(cfg);
    const DeviceMemory *d = &pl->dev;
    const size_t budget = d->known ? plan_budget(d) : 0;
    const int rb = plan_batch_recompute(a);
    const int fit = d->known ? plan_max_batch(pl, rb, budget) : 0;
    int b_kept = 0, r_kept = 0;
    const int chosen = d->known ? plan_batch_choice(&args, R, W, fit, &b_kept) : 0;
    int B = a->B, r = a->recompute;
    const char *b_note = "", *r_note = "";
    if (B == ARGS_AUTO) {
        B = chosen;
        b_note = !d->known ? " (-b auto needs the device's memory: shown at B 1)" : b_kept ? " (-b auto: the checkpoint's)" : " (-b auto)";
        if (B < 1) { B = 1; }
    }
    size_t least_bytes = 0;  // -r auto's level at this B, and its plan
    const int least = d->known ? plan_least_recompute(pl, B, budget, &least_bytes) : 1;
    const int r_auto = d->known ? plan_recompute_choice(R, least, pl->recompute_levels, &r_kept) : least;
    if (r == ARGS_AUTO) {
        r = r_auto;
        r_note = pl->recompute_levels < 2 ? ""
               : !d->known              ? " (-r auto needs the device's memory: shown at -r 1)"
               : r_kept                 ? " (-r auto: the checkpoint's)"
                                        : " (-r auto)";
    }
    MemPlan p;
    memset(&p, 0, sizeof(p));
    pl->fn(pl->ctx, B, r, &p);
    const int two = plan_total(&p, 0) > 0;  // a host column besides the device's
    printf("memory plan of %s: -e %s (L %d, C %d, H %d, maxT %d: %zu parameters) | -b %d%s | -t %d | -r %d%s | -w %d | "
           "-z %d | %d rank(s); per rank:\n", pl->trainer, a->model, cfg->num_layers, cfg->channels, cfg->num_heads,
           cfg->max_seq_len, num_params, B, b_note, a->T, r, r_note, a->master_weights, a->zero_stage, W);
    printf("  %-22s %11s %11s\n", "", d->name, two ? "host" : "");
    char x[32], y[32];
    for (int i = 0; i < PLAN_ROWS; i++) {
        plan_format_bytes(x, sizeof(x), p.device[i]);
        plan_format_bytes(y, sizeof(y), p.host[i]);
        printf("  %-22s %11s %11s  %s\n", plan_row_name[i], x, two ? y : "", p.note[i]);
    }
    const size_t total = plan_total(&p, 1);
    plan_format_bytes(x, sizeof(x), total);
    plan_format_bytes(y, sizeof(y), plan_total(&p, 0));
    printf("  %-22s %11s %11s  (%s: %zu bytes)\n", "total", x, two ? y : "", d->name, total);
    if (pl->ckpt_snapshot > 0) {
        plan_format_bytes(x, sizeof(x), pl->ckpt_snapshot);
        printf("  besides, for checkpoints: %s of host memory from the start, the copy they are written from in the "
               "background (synchronously instead where it would take over half of the memory available)\n", x);
    }
    if (!d->known) {
        printf("device: %s\n", d->what);
        return;
    }
    printf("device: %s; -b auto keeps %.0f%% of %.2f GiB free: %.2f GiB to plan\n", d->what, 100 * d->margin,
           d->total / PLAN_GiB, budget / PLAN_GiB);
    printf("largest -b that fits:");
    for (int r = 0; r < pl->recompute_levels; r++) {
        const int f = plan_max_batch(pl, r, budget);
        if (pl->recompute_levels > 1) { printf(" -r %d: %d%s", r, f, r + 1 < pl->recompute_levels ? " |" : ""); }
        else { printf(" %d (-r does not change this trainer's memory)", f); }
    }
    printf("\n");
    if (R->found) {
        char level[16] = "";
        if (R->recompute >= 0) { snprintf(level, sizeof(level), ", -r %d", R->recompute); }
        printf("-y 1 resumes checkpoint %d: -b %d on %d rank(s), -d %lld%s\n", R->step, R->B, R->world_size, R->total_batch, level);
    }
    printf("-b auto at -r %d: ", rb);
    if (chosen > 0) {
        printf("B %d%s\n", chosen, b_kept ? " (the checkpoint's, kept for a bitwise resume)"
                                   : a->total_batch == -1 ? " (-d -1: B*T*ranks)" : " (divides -d over the ranks)");
    } else { printf("none (up to %d fits, none divides -d %lld over %d rank(s) at T %d)\n", fit, a->total_batch, W, a->T); }
    if (pl->recompute_levels > 1) {
        if (least_bytes > budget) { printf("-r auto at -b %d: none fits (-r %d needs %.2f GiB)\n", B, least, least_bytes / PLAN_GiB); }
        else if (r_kept) {
            printf("-r auto at -b %d: -r %d (the checkpoint's, kept for a bitwise resume; -r %d, the least recomputation, fits too)\n",
                   B, r_auto, least);
        } else if (R->found && R->recompute >= 0 && R->recompute < least) {
            printf("-r auto at -b %d: -r %d (the least recomputation that fits; the checkpoint's -r %d does not, so the resumed "
                   "steps may match only to rounding)\n", B, least, R->recompute);
        } else { printf("-r auto at -b %d: -r %d (the least recomputation that fits)\n", B, least); }
    }
    if (total > budget) { printf("does not fit: -b %d needs %.2f GiB, %.2f GiB can be planned\n", B, total / PLAN_GiB, budget / PLAN_GiB); }
}

#endif  // LLMC_PLAN_H
