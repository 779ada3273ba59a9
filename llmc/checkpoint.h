/*
 * Checkpoints: crash-safe writing, verified loading, re-sharding across rank counts, pruning.
 *
 * A checkpoint of step N (N optimizer steps completed) in the output dir is
 *   model_%08d.bin        the model file (model_io.h), written by rank 0
 *   state_%08d_%05d.bin   one per rank: optimizer state of a slice of the parameters, the
 *                         training position, the RNG and the numeric-guard history
 *   DONE_%08d             written last by rank 0, after every rank has finished its files
 * Every file is written under a temporary name, fsync'ed and renamed, so a crash leaves either
 * the old file or the new one. A checkpoint without DONE is incomplete and never used.
 *
 * State file (this project's version 2 of llm.c's state file; all little-endian):
 *   header 256 int32:
 *     [0] 20240527 magic  [1] 2 version  [2] world size  [3] rank  [4] has fp32 master weights
 *     [5] shuffle  [6] B  [7] T  [8..9] total batch d (int64)  [10] step  [11] AdamW updates
 *     [12..13] number of parameters P (int64)  [14..15] slice offset (int64)  [16..17] slice count
 *     [18..19] seed  [20..21] sampling RNG state  [22] guard count  [23] guard head
 *     [24] guard consecutive skips  [25..26] guard total skips (int64)
 *     [27] the run's step count (-x, the LR schedule's length; 0 in files written before it was kept)
 *     [28] the optimizer: 0 AdamW (and every file written before Muon), 1 Muon (llmc/muon.h: the
 *          momentum of the block matrices in m, their v 0)
 *     [29] the -r level of the run + 1 (train_gpt2cu's; 0: none, in the CPU trainer's, train_gpt2.py's
 *          and older files): a -y 1 run with -r auto keeps it where it fits (plan.h), as -b auto keeps [6]
 *     [30..35] model config: maxT V Vp L NH C
 *     [36] steps of data skipped by rollbacks  [37] rollbacks so far (both 0 in older files)
 *     [38] 1 where [39..46] hold the run's optimizer settings (0 in older files): [39] -k (schedule.h's
 *          LRKind)  [40] -u  [41] -l  [42] -q  [43] -kd  [44] -c  [45] -ml  [46] -mm (the floats' bits)
 *     [47] 1 where [48..50] hold train_gpt2cu's kernel choices (0 in the CPU trainer's, train_gpt2.py's
 *          and older files): [48] -ge  [49] -bg  [50] -at (0 ours, 1 cuDNN's); a resume that
 *          changes them or [29] is told it matches only to rounding (train_loop.h)
 *     [250] CRC-32 of the header (read with [250] as 0)  [251] CRC-32 of the guard history
 *     [252] CRC_TAG (model_io.h)  [253] CRC-32 of m  [254] of v  [255] of master
 *   payload: m[count], v[count], master[count] (if [4]), guard loss history[100], norm history[100]
 *   DONE marker: the text "step <N>\nworld_size <W>\n".
 * Every header field and the marker are range-checked on load; a checkpoint that fails a check
 * or a checksum is skipped with a warning naming the file, and the one before it is used. A
 * checkpoint of the other optimizer (-opt) is refused with an error.
 * The slices of the W state files partition [0, P): rank r holds its ZeRO-1 shard, or without
 * ZeRO the even split [P*r/W, P*(r+1)/W) (so no rank writes what another writes). On resume,
 * each rank reads the parts of whichever old files overlap the range it needs: a run saved on
 * 4 ranks resumes on 1, 2 or 8.
 */
#ifndef LLMC_CHECKPOINT_H
#define LLMC_CHECKPOINT_H

#include <dirent.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <sys/file.h>
#include "args.h"
#include "backend.h"
#include "processes.h"
#include "guard.h"
#include "plan.h"
#include "schedule.h"

#define STATE_MAGIC 20240527
#define STATE_VERSION 2
#define CKPT_CHUNK ((size_t)1 << 22)  // elements per chunk of optimizer state moved at once

// the optimizer settings of the run that wrote a checkpoint: a resume may change them, and is told
typedef struct {
    int recorded;                 // 0: a file written before they were kept
    int kind, warmup;             // -k (LRKind), -u
    float lr, final_frac, decay_frac, weight_decay, muon_lr, muon_momentum;  // -l -q -kd -c -ml -mm
} RunSettings;

// what a checkpoint carries besides model and optimizer state
typedef struct {
    int step;                        // completed optimizer steps
    int opt_steps;                   // applied AdamW updates (skipped steps excluded)
    unsigned long long sample_rng;   // state of the sampling RNG
    int max_steps;                   // -x of the run that wrote it (its LR schedule's length); 0: unknown
    int data_skip;                   // steps of data skipped by rollbacks: step s trains on the data of s + data_skip
    int rollbacks;                   // rollbacks so far in this run (-rb)
    int optimizer;                   // 0 AdamW, 1 Muon (-opt): the meaning of the optimizer state
    RunSettings settings;            // of the run that wrote it (the LR schedule's length: max_steps)
    KernelChoices kernels;           // of the run that wrote it (-1: not recorded)
    Guard guard;
    // settings that define the data stream; a resume must use the same
    int B, T, shuffle;
    long long total_batch;
    unsigned long long seed;
} TrainState;

static inline void ckpt_path(char *out, size_t n, const char *dir, const char *kind, int step, int rank) {
    if (rank >= 0) {
        snprintf(out, n, "%s/%s_%08d_%05d.bin", dir, kind, step, rank);
    } else if (!strcmp(kind, "DONE")) {
        snprintf(out, n, "%s/DONE_%08d", dir, step);
    } else {
        snprintf(out, n, "%s/%s_%08d.bin", dir, kind, step);
    }
}

/*
 * Fault injection for the tests: LLMC_FAULT is a comma-separated list of <where>:<step>, each
 * killing the process with SIGKILL at that point, or with :stop:<rank> added freezing rank <rank>
 * there with SIGSTOP (a hung rank, or a pause in which a test changes the disk). where: state (every
 * rank, in the middle of writing its state file of checkpoint <step>: once half of its first
 * section, m, is written), done (rank 0, after every file of checkpoint <step> but the marker),
 * step (every rank, as training step <step> of the step line begins), sample (rank 0, as the
 * sample after <step> steps begins, before the step line's step <step> + 1), start (step 0: the end of
 * start-up, where it always freezes, for a test to signal it; train_loop.h). Any other value is an
 * error, so a typo cannot make a crash test pass without its crash.
 */
#define FAULT_KILL 1
#define FAULT_STOP 2
// what LLMC_FAULT asks of this rank at point `where` of `step`: 0 nothing, FAULT_KILL or FAULT_STOP
static inline int fault_due(const char *where, int step) {
    const char *f = getenv("LLMC_FAULT");
    if (f == NULL || f[0] == '\0') { return 0; }
    int due = 0;
    for (const char *spec = f; spec != NULL;) {
        const char *next = strchr(spec, ',');
        const size_t len = next ? (size_t)(next - spec) : strlen(spec);
        char buf[64], *end = NULL;
        snprintf(buf, sizeof(buf), "%.*s", (int)(len < sizeof(buf) ? len : sizeof(buf) - 1), spec);
        char *colon = strchr(buf, ':');
        long at = colon ? strtol(colon + 1, &end, 10) : -1, rank = -1;
        if (end && !strncmp(end, ":stop:", 6)) { rank = strtol(end + 6, &end, 10); }
        const int known = colon && (!strncmp(buf, "state:", 6) || !strncmp(buf, "done:", 5) || !strncmp(buf, "step:", 5) ||
                                    !strncmp(buf, "sample:", 7) || !strncmp(buf, "start:", 6));
        if (len >= sizeof(buf) || !known || end == colon + 1 || *end != '\0' || at < 0 || at > INT_MAX) {
            llmc_die("LLMC_FAULT=%s: expected a list of state:<step>, done:<step>, step:<step> or sample:<step>, each with :stop:<rank> "
                     "to freeze that rank instead, or start:0 (a test hook; unset it)", f);
        }
        const size_t n = strlen(where);
        if (!strncmp(buf, where, n) && buf[n] == ':' && at == step) {
            if (!strcmp(where, "start") || rank == llmc_rank) { due = FAULT_STOP; }
            else if (rank < 0) { due = FAULT_KILL; }
        }
        spec = next ? next + 1 : NULL;
    }
    return due;
}

static inline void ckpt_fault(const char *where, int step) {
    const int due = fault_due(where, step);
    if (due) {
        fflush(NULL);
        raise(due == FAULT_KILL ? SIGKILL : SIGSTOP);
    }
}

static inline void hdr_set64(int *h, int i, long long v) { memcpy(&h[i], &v, 8); }
static inline long long hdr_get64(const int *h, int i) { long long v; memcpy(&v, &h[i], 8); return v; }
static inline void hdr_set_f32(int *h, int i, float v) { memcpy(&h[i], &v, 4); }
static inline float hdr_get_f32(const int *h, int i) { float v; memcpy(&v, &h[i], 4); return v; }

// RunSettings in header fields [38..46] (layout at the top of the file)
static inline void run_settings_to_header(const RunSettings *r, int *h) {
    h[38] = r->recorded; h[39] = r->kind; h[40] = r->warmup;
    const float f[6] = {r->lr, r->final_frac, r->decay_frac, r->weight_decay, r->muon_lr, r->muon_momentum};
    for (int i = 0; i < 6; i++) { hdr_set_f32(h, 41 + i, f[i]); }
}

static inline RunSettings run_settings_from_header(const int *h) {
    RunSettings r = {h[38], h[39], h[40], hdr_get_f32(h, 41), hdr_get_f32(h, 42), hdr_get_f32(h, 43),
                     hdr_get_f32(h, 44), hdr_get_f32(h, 45), hdr_get_f32(h, 46)};
    return r;
}

// fields [47..50] from the choices (the recompute level has its own field, [29])
static inline void kernel_choices_to_header(const KernelChoices *k, int *h) {
    h[47] = k->gelu_fusion >= 0;
    h[48] = h[47] ? k->gelu_fusion : 0; h[49] = h[47] ? k->bias_grad : 0; h[50] = h[47] ? k->attention : 0;
}

// the choices of [29] and [47..50]; -1 for those the file does not record
static inline KernelChoices kernel_choices_from_header(const int *h) {
    const KernelChoices k = {h[29] - 1, h[47] ? h[48] : -1, h[47] ? h[49] : -1, h[47] ? h[50] : -1};
    return k;
}

// whether fields [38..46] hold settings the flags could have given (args.h's ranges), or none
static inline int run_settings_sound(const int *h) {
    if (h[38] == 0) { return 1; }
    const RunSettings r = run_settings_from_header(h);
    const float f[6] = {r.lr, r.final_frac, r.decay_frac, r.weight_decay, r.muon_lr, r.muon_momentum};
    static const char *flags[6] = {"l", "q", "kd", "c", "ml", "mm"};
    for (int i = 0; i < 6; i++) {
        if (!args_f32_in_range(flags[i], f[i])) { return 0; }
    }
    return h[38] == 1 && r.kind >= LR_COSINE && r.kind <= LR_WSD && r.warmup >= 0;
}

// rank's part [lo, lo + n) of P parameters split evenly over W ranks
static inline void ckpt_even_range(size_t P, int rank, int W, size_t *lo, size_t *n) {
    *lo = (size_t)((unsigned long long)P * rank / W);
    *n = (size_t)((unsigned long long)P * (rank + 1) / W) - *lo;
}

// the slice of the optimizer state that `rank` writes
static inline void ckpt_save_range(const Backend *b, const Comm *c, size_t *lo, size_t *n) {
    if (b->opt_count < b->num_params) {  // ZeRO shard: each rank saves what it holds
        *lo = b->opt_offset;
        *n = b->opt_count;
    } else {
        ckpt_even_range(b->num_params, c->rank, c->world_size, lo, n);
    }
}

#define CKPT_MAX_RANKS 99999  // state file names hold the rank in 5 digits

// the first header field of a state file that is out of range, or NULL (sizes are checked apart)
static inline const char *state_header_problem(const int *h) {
    long long step = h[10], P = hdr_get64(h, 12), lo = hdr_get64(h, 14), n = hdr_get64(h, 16);
    if (h[2] < 1 || h[2] > CKPT_MAX_RANKS) { return "world size [2]"; }
    if (h[3] < 0 || h[3] >= h[2]) { return "rank [3]"; }
    if (h[4] != 0 && h[4] != 1) { return "master weights flag [4]"; }
    if (h[5] != 0 && h[5] != 1) { return "shuffle flag [5]"; }
    if (h[6] < 1 || h[7] < 1 || hdr_get64(h, 8) < 1) { return "batch settings B, T, d [6..9]"; }
    if (step < 0) { return "step [10]"; }
    if (h[11] < 0 || h[11] > step) { return "AdamW update count [11]"; }
    if (P < 1 || lo < 0 || n < 0 || lo > P || n > P - lo) { return "parameter range [12..17]"; }
    if (h[22] < 0 || h[22] > GUARD_WINDOW) { return "guard history count [22]"; }
    if (h[23] < 0 || h[23] >= GUARD_WINDOW) { return "guard history position [23]"; }
    if (h[24] < 0 || h[24] > step || hdr_get64(h, 25) < 0 || hdr_get64(h, 25) > step) { return "guard skip counts [24..26]"; }
    if (h[36] < 0 || h[36] > 1000000000 || h[37] < 0 || h[37] > 1000) { return "rollback fields [36..37]"; }
    if (h[28] != 0 && h[28] != 1) { return "optimizer [28]"; }
    if (h[29] < 0 || h[29] > 3) { return "recompute level [29]"; }
    if (h[47] < 0 || h[47] > 1 || (h[47] && (h[48] < 0 || h[48] > 2 || h[49] < 0 || h[49] > 1 || h[50] < 0 || h[50] > 1))) {
        return "kernel choices [47..50]";
    }
    if (!run_settings_sound(h)) { return "an optimizer setting [38..46]"; }
    return NULL;
}

// read a state file's header and check it (checksum, ranges, size); 0 if fine, else 1 with the reason in err
static inline int state_file_header(const char *path, int h[HEADER_INTS], char *err, size_t errlen) {
    FILE *fp;
    long long size;
    char why[512];
    int e = open_regular(path, &fp, &size, why, sizeof(why));
    if (e != 0) { snprintf(err, errlen, "state file '%s' %s", path, e == ENOENT ? "is missing" : why); return 1; }
    int got = size >= HEADER_BYTES && fread(h, sizeof(int), HEADER_INTS, fp) == HEADER_INTS;
    fclose(fp);
    if (!got) { snprintf(err, errlen, "state file '%s' is truncated (%lld bytes)", path, size); return 1; }
    if (h[0] != STATE_MAGIC || h[1] != STATE_VERSION) {
        snprintf(err, errlen, "'%s' is not a version %d state file of this trainer (magic %d version %d)", path,
                 STATE_VERSION, h[0], h[1]);
        return 1;
    }
    if (h[252] == CRC_TAG && (uint32_t)h[250] != header_crc(h, HEADER_INTS, 250)) {
        snprintf(err, errlen, "state file '%s' has a corrupt header (it fails its checksum)", path);
        return 1;
    }
    const char *bad = state_header_problem(h);
    if (bad) { snprintf(err, errlen, "state file '%s' has a corrupt header: %s is out of range", path, bad); return 1; }
    // n <= P is checked, but P is a file field too: the size arithmetic is checked
    size_t n = (size_t)hdr_get64(h, 16), floats, expected;
    if (ckd_mul_size(&floats, n, h[4] ? 3 : 2) || ckd_add_size(&floats, floats, 2 * GUARD_WINDOW) ||
        ckd_mul_size(&expected, floats, sizeof(float)) || ckd_add_size(&expected, expected, HEADER_BYTES) ||
        (long long)expected != size) {
        snprintf(err, errlen, "state file '%s' is %lld bytes, but its header says it holds %zu parameters "
                 "(truncated or corrupt)", path, size, n);
        return 1;
    }
    return 0;
}

// recompute all CRCs of a state file; 0 if they match
static inline int state_file_verify(const char *path, const int h[HEADER_INTS]) {
    long long n = hdr_get64(h, 16);
    int nsec = h[4] ? 3 : 2;
    FILE *fp = fopen_regular(path, "state file", NULL);
    fseekCheck(fp, HEADER_BYTES, SEEK_SET);
    long long chunk = n < (long long)CKPT_CHUNK ? n : (long long)CKPT_CHUNK;
    if (chunk < 2 * GUARD_WINDOW) { chunk = 2 * GUARD_WINDOW; }  // the buffer also takes the guard history
    float *buf = (float *)mallocCheck((size_t)chunk * sizeof(float));
    int bad = 0;
    for (int s = 0; s < nsec; s++) {
        uint32_t crc = 0;
        for (long long off = 0; off < n; off += chunk) {
            size_t m = (size_t)(n - off < chunk ? n - off : chunk);
            freadCheck(buf, sizeof(float), m, fp);
            crc = crc32_update(crc, buf, m * sizeof(float));
        }
        if (crc != (uint32_t)h[253 + s]) { bad = 1; }
    }
    freadCheck(buf, sizeof(float), 2 * GUARD_WINDOW, fp);
    if (crc32_update(0, buf, 2 * GUARD_WINDOW * sizeof(float)) != (uint32_t)h[251]) { bad = 1; }
    free(buf);
    fcloseCheck(fp);
    return bad;
}

// the value of a run of 1..9 decimal digits at s that ends at `end` (-1 if it is not one)
static inline long long ckpt_digits(const char *s, const char *end) {
    if (end <= s || end - s > 9) { return -1; }
    long long v = 0;
    for (; s < end; s++) {
        if (*s < '0' || *s > '9') { return -1; }
        v = v * 10 + (*s - '0');
    }
    return v;
}

// steps of the DONE markers (named DONE_ and 8 digits) in dir, newest first; returns the count
// (the list is malloc'ed)
static inline int checkpoint_list(const char *dir, int **steps_out) {
    int cap = 16, n = 0;
    int *steps = (int *)mallocCheck((size_t)cap * sizeof(int));
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            if (strncmp(e->d_name, "DONE_", 5) != 0 || strlen(e->d_name) != 13) { continue; }
            long long step = ckpt_digits(e->d_name + 5, e->d_name + 13);
            if (step < 0) { continue; }
            if (n == cap) {
                cap *= 2;
                int *grown = (int *)realloc(steps, (size_t)cap * sizeof(int));
                if (grown == NULL) { llmc_die("out of host memory listing the checkpoints in '%s'", dir); }
                steps = grown;
            }
            steps[n++] = (int)step;
        }
        closedir(d);
    }
    for (int i = 1; i < n; i++) {  // insertion sort, descending
        int v = steps[i], j = i - 1;
        while (j >= 0 && steps[j] < v) { steps[j + 1] = steps[j]; j--; }
        steps[j + 1] = v;
    }
    *steps_out = steps;
    return n;
}

// the world size that the DONE marker of `step` records, or -1 if the marker is missing or is not
// exactly "step <step>\nworld_size <1..99999>\n"
static inline int read_done_world_size(const char *dir, int step) {
    char path[4096], text[64], why[512];
    ckpt_path(path, sizeof(path), dir, "DONE", step, -1);
    FILE *fp;
    if (open_regular(path, &fp, NULL, why, sizeof(why)) != 0) { return -1; }  // a FIFO named DONE_ must not block
    size_t len = fread(text, 1, sizeof(text) - 1, fp);
    fclose(fp);
    text[len] = '\0';
    char *nl1 = strchr(text, '\n'), *nl2 = nl1 ? strchr(nl1 + 1, '\n') : NULL;
    if (strncmp(text, "step ", 5) != 0 || nl2 == NULL || nl2 + 1 != text + len ||
        strncmp(nl1 + 1, "world_size ", 11) != 0 || ckpt_digits(text + 5, nl1) != step) {
        return -1;
    }
    long long w = ckpt_digits(nl1 + 12, nl2);
    return w >= 1 && w <= CKPT_MAX_RANKS ? (int)w : -1;
}

// delete the files of checkpoint `step` (DONE first, so a crash midway leaves it incomplete, not wrong):
// every state file of that step, also those of ranks past the marker's world size (left by a failed
// attempt of a larger job before a resume on fewer ranks wrote the step again)
static inline void checkpoint_delete(const char *dir, int step) {
    char path[4096], prefix[32];
    ckpt_path(path, sizeof(path), dir, "DONE", step, -1);
    remove(path);
    ckpt_path(path, sizeof(path), dir, "model", step, -1);
    remove(path);
    snprintf(prefix, sizeof(prefix), "state_%08d_", step);
    DIR *d = opendir(dir);
    if (d == NULL) { return; }
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (strncmp(e->d_name, prefix, strlen(prefix)) == 0 && strlen(e->d_name) == 24 && !strcmp(e->d_name + 20, ".bin")) {
            snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
            remove(path);
        }
    }
    closedir(d);
}

/*
 * -nk keep, -nm major, after checkpoint `newest` completed: keep the newest `keep` complete
 * checkpoints up to it (it is never deleted) and, with major > 0, every one whose step is a
 * multiple of major (llm.c's major checkpoints: a long run's milestones survive the rotation).
 * Checkpoints past `newest` (an earlier run's, normally retired by -y 1: ckpt_retire_skipped) are
 * neither counted nor deleted, so that they can never push this run's own out.
 */
static inline void checkpoint_prune(const char *dir, int keep, int major, int newest) {
    int *steps;
    int n = checkpoint_list(dir, &steps);
    int kept = 0;
    for (int i = 0; i < n; i++) {  // newest first
        if (steps[i] > newest) { continue; }
        if (kept++ < (keep > 1 ? keep : 1)) { continue; }
        if (major <= 0 || steps[i] % major != 0) { checkpoint_delete(dir, steps[i]); }
    }
    free(steps);
}

// ----------------------------------------------------------------------------
// saving: a snapshot, then the files, written while training goes on

/*
 * Saving checkpoint N, on every rank:
 *  1. checkpoint_begin: with --ckpt-async 1 (the default) the state is first copied out of the
 *     backend into host memory, the snapshot (rank 0: the parameters too; pinned memory for a
 *     GPU; the buffers are kept for the next checkpoint), and a writer thread writes the files
 *     from it while the next steps train. Where the snapshot does not fit the host memory, or with
 *     --ckpt-async 0, the files are written right away, straight from the backend in chunks. At
 *     most one checkpoint is in flight: beginning one settles the previous.
 *  2. Each step the training loop all-reduces its stop flag anyway; with it every rank learns
 *     whether a writer is still busy anywhere and whether one failed (checkpoint_flags). When none
 *     is busy, checkpoint_complete: rank 0 writes DONE_N and prunes (-nk); or, after a failure,
 *     each rank deletes what it wrote of checkpoint N (older complete ones are never touched: -nk
 *     prunes only after a new checkpoint is complete), the failing rank warns with the file and
 *     the error, and the run goes on; CKPT_MAX_FAILURES failed checkpoints in a row stop it.
 *  3. checkpoint_settle waits for the writer and completes, now: at a stop signal, at the end of
 *     the run, before a rollback or an error exit. Any other fatal error settles the checkpoint in
 *     flight too, on the rank that has it (ckpt_on_fatal): with several processes, that rank
 *     writes the marker once every rank's files are on disk.
 */
#define CKPT_MAX_FAILURES 3

typedef struct {
    char dir[4096];
    Backend *b;
    Comm *comm;
    int rank, world_size;
    int async;                // writer thread and snapshot
    // what is saved: the train state, parameters (rank 0), this rank's optimizer slice [lo, lo + n)
    TrainState st;
    size_t lo, n;
    // the snapshot (async), allocated at the start (ckpt_snapshot_alloc): each file's bytes as they go to
    // disk (header, payload, tail), so that the writer sends them out without a copy (utils.h,
    // atomic_open_direct); params, m, v and master point into the payloads
    unsigned char *model_img, *state_img;
    size_t model_img_bytes, state_img_bytes;
    void *params;             // num_params values of the model file's type (rank 0)
    float *m, *v, *master;
    // the write
    int in_flight;            // a checkpoint begun and not yet completed (the same on every rank)
    int busy;                 // this rank's writer is writing (read and written with __atomic)
    int thread_started;
    int background;           // the checkpoint in flight is written by the thread
    pthread_t thread;
    int failed;               // this rank's write failed; err says why
    char err[4400];
    double snapshot_s, write_s;
    int failures;             // failed checkpoints in a row
    int newest;               // the newest complete checkpoint (-1: none)
    int last_begun;           // the step of the last checkpoint begun (-1: none)
    int ends_run;             // the run stops after it (its last step, or a stop signal): a failure ends the run
    int keep, keep_major;     // -nk, -nm: what checkpoint_prune keeps once a checkpoint completes (0: all)
    double stop_grace_s;      // the launcher's seconds from passing a stop signal on to SIGKILL (torchrun's); -1: none,
                              // or warned of already (ckpt_check_stop_grace)
    double step_s;            // the mean step time so far (the training loop's), 0 before it is known
} CkptWriter;

// the images of the snapshot: rank 0's model file, and the state file of an optimizer slice of n
static inline size_t ckpt_model_img_bytes(size_t num_params, int model_version) {
    return HEADER_BYTES + num_params * (model_version == MODEL_VERSION_BF16 ? 2 : sizeof(float));
}
static inline size_t ckpt_state_img_bytes(size_t n, int has_master) {
    return HEADER_BYTES + n * sizeof(float) * (has_master ? 3 : 2) + 2 * GUARD_WINDOW * sizeof(float);
}

// host bytes of the snapshot
static inline size_t ckpt_snapshot_bytes(const Backend *b, int rank, size_t n) {
    return (rank == 0 ? ckpt_model_img_bytes(b->num_params, b->model_version) : 0) + ckpt_state_img_bytes(n, b->has_master);
}

// the same for the memory plan, before there is a backend, with -o, -n and --ckpt-async 1: the most
// any of W ranks needs. bounds (W + 1 entries): the ZeRO shards of the optimizer state (uneven with
// Muon, whose shards follow whole matrices); NULL: the even split of ckpt_save_range
static inline size_t ckpt_snapshot_plan_bytes(const TrainArgs *a, size_t num_params, int model_version, int has_master,
                                              int W, const size_t *bounds) {
    if (!a->output_dir[0] || !a->ckpt_async || a->checkpoint_every <= 0) { return 0; }
    size_t most = 0;
    for (int r = 0; r < W; r++) {
        size_t lo, n;
        if (bounds) { lo = bounds[r]; n = bounds[r + 1] - lo; } else { ckpt_even_range(num_params, r, W, &lo, &n); }
        size_t bytes = (r == 0 ? ckpt_model_img_bytes(num_params, model_version) : 0) + ckpt_state_img_bytes(n, has_master);
        if (bytes > most) { most = bytes; }
    }
    return most;
}

// host memory for the snapshot: the backend's (pinned, for a GPU), or page-aligned (the direct
// writes go out of it without a copy)
static inline void *ckpt_host_alloc(Backend *b, size_t bytes) {
    if (b->host_alloc) { return b->host_alloc(b, bytes); }
    void *p = NULL;
    if (posix_memalign(&p, 4096, bytes) != 0) { llmc_die("out of host memory (%zu bytes) for a checkpoint's snapshot", bytes); }
    return p;
}

static inline void ckpt_host_free(Backend *b, void *p) {
    if (p == NULL) { return; }
    if (b->host_free) { b->host_free(b, p); } else { free(p); }
}

// the snapshot's memory, allocated and touched at the start of a run with -n (and async): its first
// use would otherwise stall the step of the first checkpoint while the kernel maps its pages (1.35
// s for the 1.5 GB of d12 on the 2-core build machine). A checkpoint without it (one at a stop
// signal in a run without -n) is written synchronously.
static inline void ckpt_snapshot_alloc(CkptWriter *w) {
    Backend *b = w->b;
    if (!w->async || w->state_img) { return; }
    if (w->rank == 0) {
        w->model_img_bytes = ckpt_model_img_bytes(b->num_params, b->model_version);
        w->model_img = (unsigned char *)ckpt_host_alloc(b, w->model_img_bytes);
        memset(w->model_img, 0, w->model_img_bytes);
        w->params = w->model_img + HEADER_BYTES;
    }
    w->state_img_bytes = ckpt_state_img_bytes(w->n, b->has_master);
    w->state_img = (unsigned char *)ckpt_host_alloc(b, w->state_img_bytes);
    memset(w->state_img, 0, w->state_img_bytes);
    w->m = (float *)(w->state_img + HEADER_BYTES);
    w->v = w->m + w->n;
    if (b->has_master) { w->master = w->v + w->n; }
}

static CkptWriter *ckpt_fatal_writer = NULL;  // the writer ckpt_on_fatal settles
static void ckpt_on_fatal(void);

/*
 * dir: the output dir (NULL: no checkpoints). async: --ckpt-async; a snapshot that needs more than
 * half of the host memory available now is refused (said on this rank) and the files are then
 * written synchronously. every: -n (the snapshot is allocated now where it is > 0). newest: the
 * checkpoint the run resumed from, or -1.
 */
static inline void ckpt_writer_init(CkptWriter *w, const char *dir, Backend *b, Comm *c, int async, int every, int newest) {
    memset(w, 0, sizeof(*w));
    snprintf(w->dir, sizeof(w->dir), "%s", dir ? dir : "");
    w->b = b;
    w->comm = c;
    w->rank = c->rank;
    w->world_size = c->world_size;
    w->newest = newest;
    w->last_begun = -1;
    w->stop_grace_s = comm_launched_by_torchrun() ? comm_torchrun_grace_s() : -1.0;
    ckpt_save_range(b, c, &w->lo, &w->n);
    if (async && dir && dir[0]) {
        long long avail = host_mem_available();
        double need = (double)ckpt_snapshot_bytes(b, c->rank, w->n);
        int no_room = avail >= 0 && need > 0.5 * (double)avail;
        if (no_room) {
            llmc_warn("checkpoints are written synchronously (training waits): their snapshot needs %.2f GiB of host "
                      "memory and %.2f GiB are available (it may take half)", need / 1073741824.0, avail / 1073741824.0);
        }
        c->allreduce_max_i32(c, &no_room, 1);  // one way for all ranks: a synchronous write completes at once
        w->async = !no_room;
    }
    if (every > 0) { ckpt_snapshot_alloc(w); }
    crc32_update(0, NULL, 0);  // the CRC tables, before a writer thread uses them
    if (w->async) {
        ckpt_fatal_writer = w;
        llmc_add_fatal_hook(ckpt_on_fatal);
    }
}

static inline void ckpt_writer_free(CkptWriter *w) {
    if (ckpt_fatal_writer == w) {
        ckpt_fatal_writer = NULL;
        llmc_remove_fatal_hook(ckpt_on_fatal);
    }
    ckpt_host_free(w->b, w->model_img);
    ckpt_host_free(w->b, w->state_img);
    w->model_img = w->state_img = NULL;
    w->params = w->m = w->v = w->master = NULL;
}

// the model file of the checkpoint (rank 0); 0, or -1 with w->err
static inline int ckpt_write_model(CkptWriter *w, const char *path, void *buf) {
    Backend *b = w->b;
    int header[HEADER_INTS];
    model_header_fill(header, &b->config, b->model_version);
    AtomicFile af;
    if (atomic_open_direct(&af, path, "-o", w->err, sizeof(w->err))) { return -1; }
    if (w->model_img) {  // the snapshot's image: the payload's CRC, the header, then all of it at once
        model_header_set_crc(header, crc32_update(0, w->params, w->model_img_bytes - HEADER_BYTES));
        memcpy(w->model_img, header, HEADER_BYTES);
        atomic_write(&af, w->model_img, w->model_img_bytes, 0);
        return atomic_commit(&af);
    }
    atomic_write(&af, header, sizeof(header), 0);
    size_t elem = b->model_version == MODEL_VERSION_BF16 ? 2 : sizeof(float);
    for (size_t off = 0; off < b->num_params && !af.failed; off += CKPT_CHUNK) {
        size_t m = b->num_params - off < CKPT_CHUNK ? b->num_params - off : CKPT_CHUNK;
        b->copy_params(b, off, m, buf);
        atomic_write(&af, buf, m * elem, 1);
    }
    model_header_seal(&af, header);
    return atomic_commit(&af);
}

// the state file from the snapshot's image: the CRCs and the header first, then the bytes front to
// back, straight from the image (the fault hook halfway, as the chunked write below has it)
static inline void ckpt_state_from_image(CkptWriter *w, AtomicFile *af, int h[HEADER_INTS], int nsec) {
    const size_t sec = w->n * sizeof(float);
    for (int s = 0; s < nsec; s++) { h[253 + s] = (int)crc32_update(0, (const unsigned char *)w->m + s * sec, sec); }
    unsigned char *tail = (unsigned char *)w->m + nsec * sec;
    memcpy(tail, w->st.guard.loss_hist, sizeof(w->st.guard.loss_hist));
    memcpy(tail + sizeof(w->st.guard.loss_hist), w->st.guard.norm_hist, sizeof(w->st.guard.norm_hist));
    h[251] = (int)crc32_update(0, tail, 2 * GUARD_WINDOW * sizeof(float));
    h[250] = (int)header_crc(h, HEADER_INTS, 250);
    memcpy(w->state_img, h, HEADER_BYTES);
    const size_t half = w->state_img_bytes / 2 / 4096 * 4096;
    atomic_write(af, w->state_img, half, 0);
    ckpt_fault("state", w->st.step);
    atomic_write(af, w->state_img + half, w->state_img_bytes - half, 0);
}

// the same straight out of the backend, a chunk of m, v and master at a time (no snapshot)
static inline void ckpt_state_sections_by_chunk(CkptWriter *w, AtomicFile *af, int nsec, uint32_t crc[3], float *buf[3]) {
    const size_t n = w->n;
    Backend *b = w->b;
    for (size_t off = 0; off < n && !af->failed; off += CKPT_CHUNK) {
        size_t m = n - off < CKPT_CHUNK ? n - off : CKPT_CHUNK;
        b->get_opt_state(b, w->lo + off, m, buf[0], buf[1], b->has_master ? buf[2] : NULL);
        for (int s = 0; s < nsec; s++) {  // section s starts after the header and s sections of n floats
            atomic_write_at(af, HEADER_BYTES + (long long)((s * n + off) * sizeof(float)), buf[s], m * sizeof(float));
            crc[s] = crc32_update(crc[s], buf[s], m * sizeof(float));
            if (s == 0 && off + m >= n / 2) { ckpt_fault("state", w->st.step); }
        }
    }
}

// this rank's state file (layout at the top of the file); 0, or -1 with w->err
static inline int ckpt_write_state(CkptWriter *w, const char *path, float *buf[3]) {
    const TrainState *st = &w->st;
    const Backend *b = w->b;
    const size_t lo = w->lo, n = w->n;
    int h[HEADER_INTS];
    memset(h, 0, sizeof(h));
    h[0] = STATE_MAGIC; h[1] = STATE_VERSION; h[2] = w->world_size; h[3] = w->rank; h[4] = b->has_master;
    h[5] = st->shuffle; h[6] = st->B; h[7] = st->T; hdr_set64(h, 8, st->total_batch);
    h[10] = st->step; h[11] = st->opt_steps;
    hdr_set64(h, 12, (long long)b->num_params); hdr_set64(h, 14, (long long)lo); hdr_set64(h, 16, (long long)n);
    hdr_set64(h, 18, (long long)st->seed); hdr_set64(h, 20, (long long)st->sample_rng);
    h[22] = st->guard.count; h[23] = st->guard.head; h[24] = st->guard.consecutive;
    hdr_set64(h, 25, st->guard.total_skipped);
    h[27] = st->max_steps;
    h[28] = st->optimizer;
    h[29] = b->kernels.recompute + 1;  // 0: none (and so in the files of earlier versions and of train_gpt2.py)
    kernel_choices_to_header(&b->kernels, h);
    h[36] = st->data_skip; h[37] = st->rollbacks;
    run_settings_to_header(&st->settings, h);
    const GPT2Config *cf = &b->config;
    h[30] = cf->max_seq_len; h[31] = cf->vocab_size; h[32] = cf->padded_vocab_size;
    h[33] = cf->num_layers; h[34] = cf->num_heads; h[35] = cf->channels;
    h[252] = CRC_TAG;

    AtomicFile af;
    if (atomic_open_direct(&af, path, "-o", w->err, sizeof(w->err))) { return -1; }
    const int nsec = b->has_master ? 3 : 2;
    if (w->state_img) {
        ckpt_state_from_image(w, &af, h, nsec);
        return atomic_commit(&af);
    }
    uint32_t crc[3] = {0, 0, 0};
    ckpt_state_sections_by_chunk(w, &af, nsec, crc, buf);
    if (n == 0) { ckpt_fault("state", st->step); }
    uint32_t gcrc = crc32_update(0, st->guard.loss_hist, sizeof(st->guard.loss_hist));
    gcrc = crc32_update(gcrc, st->guard.norm_hist, sizeof(st->guard.norm_hist));
    const long long tail = HEADER_BYTES + (long long)(nsec * n * sizeof(float));
    atomic_write_at(&af, tail, st->guard.loss_hist, sizeof(st->guard.loss_hist));
    atomic_write_at(&af, tail + (long long)sizeof(st->guard.loss_hist), st->guard.norm_hist, sizeof(st->guard.norm_hist));
    h[251] = (int)gcrc; h[253] = (int)crc[0]; h[254] = (int)crc[1]; h[255] = (int)crc[2];
    h[250] = (int)header_crc(h, HEADER_INTS, 250);
    atomic_write_at(&af, 0, h, sizeof(h));
    return atomic_commit(&af);
}

// the files of the checkpoint in w->st (the writer thread's body, or called directly)
static void *ckpt_write_files(void *arg) {
    CkptWriter *w = (CkptWriter *)arg;
    const double t0 = llmc_wall_seconds();
    // chunk buffers, used when there is no snapshot (synchronous writes straight from the backend)
    float *buf[3] = {NULL, NULL, NULL};
    if (w->state_img == NULL) {
        for (int s = 0; s < 3; s++) { buf[s] = (float *)mallocCheck(CKPT_CHUNK * sizeof(float)); }
    }
    char path[4096];
    int rc = 0;
    if (w->rank == 0) {
        ckpt_path(path, sizeof(path), w->dir, "model", w->st.step, -1);
        rc = ckpt_write_model(w, path, buf[0]);
    }
    if (rc == 0) {
        ckpt_path(path, sizeof(path), w->dir, "state", w->st.step, w->rank);
        rc = ckpt_write_state(w, path, buf);
    }
    for (int s = 0; s < 3; s++) { free(buf[s]); }
    w->failed = rc != 0;
    w->write_s = llmc_wall_seconds() - t0;
    __atomic_store_n(&w->busy, 0, __ATOMIC_RELEASE);
    return NULL;
}

// copy what checkpoint st->step holds out of the backend (allocating the snapshot once)
static inline void ckpt_snapshot(CkptWriter *w) {
    Backend *b = w->b;
    if (w->rank == 0) { b->copy_params(b, 0, b->num_params, w->params); }
    if (w->n > 0) { b->get_opt_state(b, w->lo, w->n, w->m, w->v, w->master); }
}

static inline void checkpoint_settle(CkptWriter *w, Comm *c);

// files of checkpoint `step` (without its marker): the model file on rank 0, the state files of
// ranks first..last
static inline void ckpt_remove_files(const CkptWriter *w, int step, int first, int last) {
    char path[4096];
    if (w->rank == 0) {
        ckpt_path(path, sizeof(path), w->dir, "model", step, -1);
        remove(path);
    }
    for (int r = first; r <= last; r++) {
        ckpt_path(path, sizeof(path), w->dir, "state", step, r);
        remove(path);
    }
}

/*
 * This rank's files of checkpoint `step` left by an earlier attempt that never completed it (no
 * marker), removed before it is written again: from here on such a file on disk is this attempt's,
 * which is what ckpt_on_fatal's look at the other ranks' files relies on. A complete checkpoint's
 * files stay (rewritten atomically, each valid throughout).
 */
static inline void ckpt_remove_incomplete(const CkptWriter *w, int step) {
    char path[4096];
    ckpt_path(path, sizeof(path), w->dir, "DONE", step, -1);
    if (access(path, F_OK) == 0) {
        // an earlier run's complete checkpoint of this step (its files are replaced one by one):
        // incomplete from here on, so that a crash midway cannot leave its marker over a mix of
        // old and new files that all pass their checksums
        if (w->rank == 0) { remove(path); }
        return;
    }
    ckpt_remove_files(w, step, w->rank, w->rank);
}

// begin checkpoint st->step (every rank; see the top of this section)
static inline void checkpoint_begin(CkptWriter *w, Comm *c, const TrainState *st) {
    if (w->in_flight) { checkpoint_settle(w, c); }
    ckpt_remove_incomplete(w, st->step);
    c->barrier(c);  // a stale marker of this step (rank 0 removes it) is gone before any rank's new file
    w->st = *st;
    w->last_begun = st->step;
    w->ends_run = st->step == st->max_steps;
    w->in_flight = 1;
    w->failed = 0;
    w->err[0] = '\0';
    w->snapshot_s = 0.0;
    __atomic_store_n(&w->busy, 1, __ATOMIC_RELEASE);
    if (w->state_img) {  // async, and the run writes checkpoints every -n steps
        const double t0 = llmc_wall_seconds();
        ckpt_snapshot(w);
        w->snapshot_s = llmc_wall_seconds() - t0;
        if (pthread_create(&w->thread, NULL, ckpt_write_files, w) == 0) {
            w->thread_started = w->background = 1;
            return;
        }
    }
    w->background = 0;
    ckpt_write_files(w);
    checkpoint_settle(w, c);  // synchronous: complete it now
}

// for the loop's per-step all-reduce (max over ranks): is this rank's writer busy, has it failed
static inline void checkpoint_flags(CkptWriter *w, int *busy, int *failed) {
    *busy = __atomic_load_n(&w->busy, __ATOMIC_ACQUIRE);
    *failed = *busy ? 0 : w->failed;  // read only once the writer is done
}

// the marker DONE_<step> of the checkpoint in w->st, written last; 0, or -1 with w->err
static inline int ckpt_write_done(CkptWriter *w) {
    char path[4096], text[64];
    ckpt_path(path, sizeof(path), w->dir, "DONE", w->st.step, -1);
    const int len = snprintf(text, sizeof(text), "step %d\nworld_size %d\n", w->st.step, w->world_size);
    AtomicFile af;
    if (atomic_open_soft(&af, path, "-o", w->err, sizeof(w->err)) == 0) { atomic_write(&af, text, (size_t)len, 0); }
    return atomic_commit(&af);
}

/*
 * Rank 0, once a checkpoint completed: a stop signal makes the run finish its step and write one, and
 * where the launcher kills the ranks a fixed time after passing the signal on (torchrun), what this
 * one took says whether that fits. Warned once, at two thirds of the time: the ranks write at once.
 */
static inline void ckpt_check_stop_grace(CkptWriter *w, int step) {
    const double need = w->step_s + w->snapshot_s + w->write_s;
    if (w->stop_grace_s < 0 || w->ends_run || need <= w->stop_grace_s * 2.0 / 3.0) { return; }
    llmc_warn("checkpoint %d took %.2f s to write, and a step %.2f s: stopped by a signal (Ctrl-C, SIGTERM), the ranks "
              "finish their step and write a checkpoint, and torchrun sends SIGKILL %.0f s after passing the signal on: too "
              "little margin (a checkpoint cut short is lost, the older ones stay); give torchrun more time "
              "(--shutdown-timeout N where torchrun --help lists it, or TORCH_ELASTIC_SHUTDOWN_TIMEOUT=N) or write -o to a "
              "faster disk", step, w->snapshot_s + w->write_s, w->step_s, w->stop_grace_s);
    w->stop_grace_s = -1.0;  // once
}

/*
 * Every rank, once no rank's writer is busy; any_failed: whether one failed (max over ranks). DONE
 * and pruning, or the cleanup of a failed checkpoint (see the top of this section).
 */
static inline void checkpoint_complete(CkptWriter *w, Comm *c, int any_failed) {
    if (w->thread_started) { pthread_join(w->thread, NULL); w->thread_started = 0; }
    w->in_flight = 0;
    const int step = w->st.step;
    if (!any_failed && c->rank == 0) {
        ckpt_fault("done", step);
        if (ckpt_write_done(w) != 0) {
            w->failed = 1;  // only rank 0 knows; it deletes the whole checkpoint below
        } else {
            if (w->keep > 0) { checkpoint_prune(w->dir, w->keep, w->keep_major, step); }
            if (w->background) {
                printf("checkpoint %d written to %s (snapshot %.2f s, then %.2f s while training went on)\n", step, w->dir,
                       w->snapshot_s, w->write_s);
            } else {
                printf("checkpoint %d written to %s (%.2f s)\n", step, w->dir, w->write_s);
            }
            fflush(stdout);
            ckpt_check_stop_grace(w, step);
        }
    }
    if (!any_failed && !w->failed) {
        w->failures = 0;
        w->newest = step;
        return;
    }
    // a failed checkpoint: remove its files (DONE was never written), keep the older ones; the state
    // files: this rank's (rank 0 after a failed DONE: all)
    ckpt_remove_files(w, step, any_failed ? c->rank : 0, any_failed ? c->rank : c->world_size - 1);
    w->failures++;
    char newest[64] = "no complete checkpoint exists yet";
    if (w->newest >= 0) { snprintf(newest, sizeof(newest), "checkpoint %d is the newest complete one", w->newest); }
    if (w->failed && w->ends_run) {  // the run's last: checkpoint_require_last ends the run
        llmc_warn("checkpoint %d, this run's last, not written: %s; %s", step, w->err, newest);
    } else if (w->failed) {
        llmc_warn("checkpoint %d not written: %s; %s; training goes on (%d failed in a row; the run stops at %d)", step,
                  w->err, newest, w->failures, CKPT_MAX_FAILURES);
    }
    if (w->failures >= CKPT_MAX_FAILURES) {
        if (c->rank == 0) {
            llmc_die("%d checkpoints in a row could not be written to %s (each rank's warning above says why); free space "
                     "there or choose another -o, then run again with -y 1 (%s)", w->failures, w->dir, newest);
        }
        c->barrier(c);  // rank 0's abort takes everyone down
        exit(EXIT_FAILURE);
    }
}

// wait for the checkpoint in flight, if any, and complete it (every rank)
static inline void checkpoint_settle(CkptWriter *w, Comm *c) {
    if (!w->in_flight) { return; }
    if (w->thread_started) { pthread_join(w->thread, NULL); w->thread_started = 0; }
    int failed = w->failed;
    c->allreduce_max_i32(c, &failed, 1);
    checkpoint_complete(w, c, failed);
}

#define CKPT_FATAL_WAIT_S 600  // the longest a fatal error waits for a checkpoint's files

// wait up to `limit` s for this rank's writer; 1 once it is done (joined), 0 if it is still writing
static inline int ckpt_wait_writer(CkptWriter *w, double limit) {
    const double t0 = llmc_wall_seconds();
    while (__atomic_load_n(&w->busy, __ATOMIC_ACQUIRE)) {
        if (llmc_wall_seconds() - t0 > limit) { return 0; }
        usleep(20 * 1000);
    }
    pthread_join(w->thread, NULL);
    w->thread_started = 0;
    return 1;
}

// whether every file of the checkpoint in w->st is on disk (each appears whole, by its rename), and
// the first one missing in `missing`
static inline int ckpt_files_present(const CkptWriter *w, char *missing, size_t n) {
    ckpt_path(missing, n, w->dir, "model", w->st.step, -1);
    if (access(missing, F_OK) != 0) { return 0; }
    for (int r = 0; r < w->world_size; r++) {
        ckpt_path(missing, n, w->dir, "state", w->st.step, r);
        if (access(missing, F_OK) != 0) { return 0; }
    }
    return 1;
}

/*
 * Several processes, this one on its way out: the others cannot take part in a collective any more,
 * but their writers go on while they wait for this one. Once every rank's files are on disk (a -o
 * that all of them mount), this rank writes the marker itself. It waits for them 10 s and 4 times as
 * long as its own files took (rank 0 writes the model file besides its part of the state: 2.3x the
 * bytes of the others' parts at d12 on 8 ranks with ZeRO-1).
 */
static inline void ckpt_complete_by_files(CkptWriter *w) {
    double limit = 10.0 + 4.0 * w->write_s;
    if (limit > CKPT_FATAL_WAIT_S) { limit = CKPT_FATAL_WAIT_S; }
    const double t0 = llmc_wall_seconds();
    char missing[4096];
    while (!ckpt_files_present(w, missing, sizeof(missing))) {
        if (llmc_wall_seconds() - t0 > limit) {
            llmc_warn("checkpoint %d not completed: '%s' was not on disk after %.0f s (another rank's, still being "
                      "written, or -o not shared between the nodes)", w->st.step, missing, limit);
            return;
        }
        usleep(50 * 1000);
    }
    if (ckpt_write_done(w) != 0) {
        llmc_warn("checkpoint %d not completed: %s", w->st.step, w->err);
        return;
    }
    printf("[rank %d] checkpoint %d written to %s (every rank's files on disk, the marker written by this rank)\n",
           w->rank, w->st.step, w->dir);
    fflush(stdout);
}

/*
 * llmc_die's hook: a checkpoint the writer thread is writing was whole in the snapshot when the
 * error came, so it is finished and completed (its marker written) before the process exits, and
 * the error costs no saved step. Not from the writer thread itself, not while the snapshot is being
 * taken, and not longer than CKPT_FATAL_WAIT_S (a disk that hangs).
 */
static void ckpt_on_fatal(void) {
    CkptWriter *w = ckpt_fatal_writer;
    ckpt_fatal_writer = NULL;  // once
    if (w == NULL || !w->in_flight || !w->thread_started || pthread_equal(pthread_self(), w->thread)) { return; }
    char who[32] = "";
    if (w->world_size > 1) { snprintf(who, sizeof(who), "[rank %d] ", w->rank); }
    printf("%sfinishing checkpoint %d (being written when the error came) before exiting\n", who, w->st.step);
    fflush(stdout);
    if (!ckpt_wait_writer(w, CKPT_FATAL_WAIT_S)) {
        llmc_warn("checkpoint %d still not written after %d s; exiting without it", w->st.step, CKPT_FATAL_WAIT_S);
        return;
    }
    if (w->world_size == 1) {
        checkpoint_complete(w, w->comm, w->failed);
    } else if (w->failed) {
        llmc_warn("checkpoint %d not written: %s", w->st.step, w->err);
    } else {
        ckpt_complete_by_files(w);
    }
}

/*
 * After the last settle: a run's last checkpoint (at its end, or at a stop) that failed ends the
 * run non-zero with what went wrong (an earlier failure only warned: the next checkpoint could make
 * up for it, this one nothing will). Every rank; rank 0 says it.
 */
static inline void checkpoint_require_last(CkptWriter *w, Comm *c, int step) {
    if (w->dir[0] == '\0' || w->last_begun != step || w->newest == step) { return; }
    if (c->rank == 0) {
        char newest[64] = "no complete checkpoint exists";
        if (w->newest >= 0) { snprintf(newest, sizeof(newest), "checkpoint %d is the newest complete one", w->newest); }
        llmc_die("checkpoint %d, this run's last, could not be written: %s; %s; free space there or choose another -o, "
                 "and run again with -y 1", step, w->failed ? w->err : "another rank's file failed (its warning says how)",
                 newest);
    }
    c->barrier(c);  // rank 0's abort takes everyone down
    exit(EXIT_FAILURE);
}

// a checkpoint written now, synchronously, straight from the backend (tests and tools)
static inline void checkpoint_save(const char *dir, Backend *b, Comm *c, const TrainState *st) {
    CkptWriter w;
    ckpt_writer_init(&w, dir, b, c, 0, 0, -1);
    checkpoint_begin(&w, c, st);
    ckpt_writer_free(&w);
}

// ----------------------------------------------------------------------------
// loading

/*
 * Check that checkpoint `step` is complete and intact for this rank: the model file and every
 * old state file whose slice overlaps the range this rank holds. Returns 0, or 1 with the
 * reason in err. Fatal mismatches (another model size, other data settings) die right away:
 * they are mistakes in the command line, not damage, and an older checkpoint would not help.
 */
static inline int checkpoint_verify(const char *dir, int step, Backend *b, const TrainState *cur, char *err, size_t errlen) {
    char path[4096];
    int w = read_done_world_size(dir, step);
    if (w <= 0) { snprintf(err, errlen, "marker DONE_%08d in '%s' is unreadable", step, dir); return 1; }
    ckpt_path(path, sizeof(path), dir, "model", step, -1);
    ModelFileInfo info;
    if (model_file_probe_in(path, &info, err, errlen, 1)) { return 1; }
    model_file_require_config(path, &info, &b->config, "resume with the -e of the run that wrote it, or use another -o");
    if (model_file_verify(path, &info)) { snprintf(err, errlen, "model file '%s' fails its checksum", path); return 1; }
    size_t lo = b->opt_offset, hi = b->opt_offset + b->opt_count;
    long long covered = 0;
    int master0 = 0;
    for (int r = 0; r < w; r++) {
        int h[HEADER_INTS];
        ckpt_path(path, sizeof(path), dir, "state", step, r);
        if (state_file_header(path, h, err, errlen)) { return 1; }
        if (r == 0) { master0 = h[4]; }
        if (h[2] != w || h[3] != r || hdr_get64(h, 12) != (long long)b->num_params || h[10] != step || h[4] != master0) {
            snprintf(err, errlen, "state file '%s' does not belong to checkpoint %d of %d ranks with %zu parameters "
                     "(header: step %d, rank %d of %d, %lld parameters, master weights %d where rank 0 has %d)", path,
                     step, w, b->num_params, h[10], h[3], h[2], hdr_get64(h, 12), h[4], master0);
            return 1;
        }
        if (h[7] != cur->T || hdr_get64(h, 8) != cur->total_batch || h[5] != cur->shuffle ||
            (unsigned long long)hdr_get64(h, 18) != cur->seed) {
            char hint[256] = "";
            if (hdr_get64(h, 8) != cur->total_batch) {  // -d's default follows -b and the process count
                snprintf(hint, sizeof(hint), " (to resume with another -b or number of processes, pass -d %lld, with a -b "
                         "and process count whose B x T x processes divides it: without -d, -d is B x T x processes)",
                         hdr_get64(h, 8));
            }
            llmc_die("checkpoint '%s' was written with -t %d -d %lld -sh %d -rs %llu; this run has -t %d -d %lld -sh %d "
                     "-rs %llu; the data position of a resumed run depends on these, so resume with the same values%s",
                     path, h[7], hdr_get64(h, 8), h[5], (unsigned long long)hdr_get64(h, 18), cur->T, cur->total_batch,
                     cur->shuffle, cur->seed, hint);
        }
        if (h[28] != cur->optimizer) {
            static const char *const names[2] = {"adamw", "muon"};
            llmc_die("checkpoint '%s' was written with -opt %s, this run has -opt %s; the optimizer state of one does "
                     "not continue the other: resume with -opt %s, or start the new run in another -o", path,
                     names[h[28]], names[cur->optimizer], names[h[28]]);
        }
        long long flo = hdr_get64(h, 14), fn = hdr_get64(h, 16);
        if (flo != covered) {
            snprintf(err, errlen, "state files of checkpoint %d do not tile the parameters (rank %d starts at %lld, expected %lld)",
                     step, r, flo, covered);
            return 1;
        }
        covered += fn;
        int overlaps = (size_t)flo < hi && (size_t)(flo + fn) > lo;
        if ((overlaps || r == 0) && state_file_verify(path, h)) {
            snprintf(err, errlen, "state file '%s' fails its checksum", path);
            return 1;
        }
    }
    if (covered != (long long)b->num_params) {
        snprintf(err, errlen, "state files of checkpoint %d cover %lld of %zu parameters", step, covered, b->num_params);
        return 1;
    }
    return 0;
}

// load a verified checkpoint: model, this rank's optimizer range (re-sharded), and the train state
static inline void checkpoint_load(const char *dir, int step, Backend *b, TrainState *st) {
    char path[4096];
    int w = read_done_world_size(dir, step);
    if (w <= 0) { llmc_die("marker DONE_%08d in '%s' changed while it was being loaded", step, dir); }
    ckpt_path(path, sizeof(path), dir, "model", step, -1);
    b->load_model(b, path);
    size_t lo = b->opt_offset, n = b->opt_count;
    size_t chunk = n < CKPT_CHUNK ? (n > 0 ? n : 1) : CKPT_CHUNK;
    float *buf[3];
    for (int s = 0; s < 3; s++) { buf[s] = (float *)mallocCheck(chunk * sizeof(float)); }
    // old files' headers, once
    int (*hdr)[HEADER_INTS] = (int (*)[HEADER_INTS])mallocCheck((size_t)w * sizeof(*hdr));
    char err[1024];
    for (int r = 0; r < w; r++) {
        ckpt_path(path, sizeof(path), dir, "state", step, r);
        if (state_file_header(path, hdr[r], err, sizeof(err))) { llmc_die("%s", err); }
    }
    int file_master = hdr[0][4];
    if (file_master && !b->has_master && b->model_version == MODEL_VERSION_BF16 && llmc_rank == 0) {
        llmc_warn("checkpoint %d in %s holds fp32 master weights, and this run keeps none (-w 0): it goes on from "
                  "their bf16 rounding (-w 1 keeps them)", step, dir);
    }
    for (size_t off = 0; off < n; off += chunk) {
        size_t m = n - off < chunk ? n - off : chunk;
        size_t a = lo + off, z = a + m;  // parameter range of this chunk
        for (int r = 0; r < w; r++) {
            size_t flo = (size_t)hdr_get64(hdr[r], 14), fn = (size_t)hdr_get64(hdr[r], 16);
            size_t s0 = a > flo ? a : flo, s1 = z < flo + fn ? z : flo + fn;
            if (s0 >= s1) { continue; }
            ckpt_path(path, sizeof(path), dir, "state", step, r);
            FILE *fp = fopen_regular(path, "state file", NULL);
            for (int s = 0; s < (file_master ? 3 : 2); s++) {
                fseekCheck(fp, HEADER_BYTES + (long)((s * fn + (s0 - flo)) * sizeof(float)), SEEK_SET);
                freadCheck(buf[s] + (s0 - a), sizeof(float), s1 - s0, fp);
            }
            fcloseCheck(fp);
        }
        b->set_opt_state(b, a, m, buf[0], buf[1], file_master ? buf[2] : NULL);
    }
    // the train state is the same in every file; take rank 0's
    const int *h = hdr[0];
    st->step = h[10];
    st->opt_steps = h[11];
    st->sample_rng = (unsigned long long)hdr_get64(h, 20);
    st->guard.count = h[22];
    st->guard.head = h[23];
    st->guard.consecutive = h[24];
    st->guard.total_skipped = hdr_get64(h, 25);
    st->max_steps = h[27];
    st->data_skip = h[36];
    st->rollbacks = h[37];
    st->settings = run_settings_from_header(h);
    st->kernels = kernel_choices_from_header(h);
    ckpt_path(path, sizeof(path), dir, "state", step, 0);
    FILE *fp = fopen_regular(path, "state file", NULL);
    long long fn = hdr_get64(h, 16);
    fseekCheck(fp, HEADER_BYTES + (long)((h[4] ? 3 : 2) * fn * (long long)sizeof(float)), SEEK_SET);
    freadCheck(st->guard.loss_hist, sizeof(float), GUARD_WINDOW, fp);
    freadCheck(st->guard.norm_hist, sizeof(float), GUARD_WINDOW, fp);
    fcloseCheck(fp);
    free(hdr);
    for (int s = 0; s < 3; s++) { free(buf[s]); }
}

/*
 * The checkpoints newer than the one a resume loaded (steps[0..n), each skipped with a warning)
 * belong to the interrupted run's past: their markers become DONE_<step>.skipped, so that -nk
 * neither counts them nor deletes them and the resumed run never mixes its files with theirs;
 * their files stay for a look (rename the marker back to use one again).
 */
static inline void ckpt_retire_skipped(const char *dir, const int *steps, int n) {
    char from[4096], to[4200];
    for (int i = 0; i < n; i++) {
        ckpt_path(from, sizeof(from), dir, "DONE", steps[i], -1);
        snprintf(to, sizeof(to), "%s.skipped", from);
        if (rename(from, to) == 0) {
            llmc_warn("checkpoint %d stays in %s as it is, its marker renamed DONE_%08d.skipped (rename it back to resume from it)",
                      steps[i], dir, steps[i]);
        }
    }
}

/*
 * Resume (-y 1): find the newest complete, intact checkpoint in dir and load it. A torn or
 * corrupt one is skipped with a warning naming the file. All ranks agree on the choice.
 * Returns 1 if a checkpoint was loaded, 0 if there was none, -1 if there were some and none
 * loaded (then -y 1 stops: a fresh start would write its checkpoints among them).
 */
static inline int checkpoint_resume(const char *dir, Backend *b, Comm *c, TrainState *st) {
    int *steps = NULL;
    int n = 0;
    if (c->rank == 0) { n = checkpoint_list(dir, &steps); }
    int count = n;
    c->bcast(c, &count, sizeof(int));
    if (c->rank != 0) { steps = (int *)mallocCheck((count > 0 ? count : 1) * sizeof(int)); }
    if (count > 0) { c->bcast(c, steps, count * sizeof(int)); }
    int loaded = 0;
    for (int i = 0; i < count && !loaded; i++) {
        char err[2048];
        int bad = checkpoint_verify(dir, steps[i], b, st, err, sizeof(err));
        if (bad) { llmc_warn("skipping checkpoint %d: %s", steps[i], err); }
        int any_bad = bad;
        c->allreduce_max_i32(c, &any_bad, 1);
        if (any_bad) { continue; }
        checkpoint_load(dir, steps[i], b, st);
        loaded = 1;
        if (c->rank == 0) { ckpt_retire_skipped(dir, steps, i); }
    }
    free(steps);
    return count > 0 && !loaded ? -1 : loaded;
}

/*
 * What -b auto and -r auto keep of the run a -y 1 start resumes (plan.h): that of the newest
 * complete checkpoint in -o whose rank 0 state file has a sound header (checkpoint_resume checks
 * more and may fall back to an older one, most likely of the same run). Rank 0, before the memory
 * plan; none without -y 1 and -o.
 */
static inline void checkpoint_plan_resume(PlanResume *out, const TrainArgs *a, int rank) {
    memset(out, 0, sizeof(*out));
    if (rank != 0 || !a->resume || !a->output_dir[0]) { return; }
    int *steps, h[HEADER_INTS];
    const int n = checkpoint_list(a->output_dir, &steps);
    for (int i = 0; i < n && !out->found; i++) {
        char path[4096], err[2048];
        ckpt_path(path, sizeof(path), a->output_dir, "state", steps[i], 0);
        if (read_done_world_size(a->output_dir, steps[i]) < 1 || state_file_header(path, h, err, sizeof(err))) { continue; }
        *out = (PlanResume){1, steps[i], h[6], h[2], h[29] - 1, hdr_get64(h, 8)};
    }
    free(steps);
}

// 1 if `name` is a checkpoint's file (DONE_%08d, model_%08d.bin, state_%08d_%05d.bin, and a
// skipped one's DONE_%08d.skipped), 2 if it is a temporary file a killed writer left of one
// (<name>.tmp.<pid>: never read), else 0
static inline int ckpt_file_kind(const char *name) {
    size_t n = strlen(name);
    const char *tmp = strstr(name, ".tmp.");
    if (tmp) { n = (size_t)(tmp - name); }
    else if (n == 21 && !strcmp(name + 13, ".skipped")) { n = 13; }
    int is = (n == 13 && !strncmp(name, "DONE_", 5) && ckpt_digits(name + 5, name + 13) >= 0) ||
             (n == 18 && !strncmp(name, "model_", 6) && !strncmp(name + 14, ".bin", 4) && ckpt_digits(name + 6, name + 14) >= 0) ||
             (n == 24 && !strncmp(name, "state_", 6) && name[14] == '_' && !strncmp(name + 20, ".bin", 4) &&
              ckpt_digits(name + 6, name + 14) >= 0 && ckpt_digits(name + 15, name + 20) >= 0);
    return is ? (tmp ? 2 : 1) : 0;
}

/*
 * A new run (no -y 1) in an -o that holds checkpoints would write its own among them, and a later
 * -y 1 would resume whichever is newest, maybe the old run's. So it is refused with the three ways
 * out, unless start_over (--start-over 1): then the old checkpoints (and leftovers of killed
 * writers, which alone do not make the refusal), main.log and metrics.jsonl move to
 * <dir>/old_run_<N>/ (the first free N) and the run starts in an empty place. Rank 0, before any
 * rank writes.
 */
static inline void checkpoint_claim_dir(const char *dir, int start_over) {
    int *steps;
    int ndone = checkpoint_list(dir, &steps);
    int newest = ndone > 0 ? steps[0] : -1;
    free(steps);
    int nfiles = 0;
    DIR *d = opendir(dir);
    if (d == NULL) { llmc_die("-o %s: cannot list the folder: %s", dir, strerror(errno)); }
    struct dirent *e;
    while ((e = readdir(d)) != NULL) { nfiles += ckpt_file_kind(e->d_name) == 1; }
    closedir(d);
    if (nfiles == 0) { return; }
    if (!start_over) {
        char newest_text[64] = "";
        if (newest >= 0) { snprintf(newest_text, sizeof(newest_text), ", the newest complete one of step %d", newest); }
        llmc_die("-o %s holds the checkpoints of another run (%d file(s)%s); continue that run with -y 1, keep it "
                 "with another -o, or pass --start-over 1 to move it into %s/old_run_<N>/ and start anew here",
                 dir, nfiles, newest_text, dir);
    }
    char old[4096], from[4608], to[8704];
    for (int k = 1;; k++) {
        snprintf(old, sizeof(old), "%s/old_run_%d", dir, k);
        if (mkdir(old, 0755) == 0) { break; }
        if (errno != EEXIST) { llmc_die("--start-over: cannot create '%s': %s", old, strerror(errno)); }
    }
    d = opendir(dir);
    if (d == NULL) { llmc_die("-o %s: cannot list the folder: %s", dir, strerror(errno)); }
    while ((e = readdir(d)) != NULL) {
        if (!ckpt_file_kind(e->d_name) && strcmp(e->d_name, "main.log") && strcmp(e->d_name, "metrics.jsonl")) { continue; }
        snprintf(from, sizeof(from), "%s/%s", dir, e->d_name);
        snprintf(to, sizeof(to), "%s/%s", old, e->d_name);
        if (rename(from, to) != 0) { llmc_die("--start-over: moving '%s' to '%s' failed: %s", from, to, strerror(errno)); }
    }
    closedir(d);
    fsync_dir_of(old);  // the renames are entries of dir, old's folder
    printf("--start-over: the earlier run in %s (%d checkpoint file(s), its logs) moved to %s\n", dir, nfiles, old);
    fflush(stdout);
}

/*
 * One run per -o: rank 0 holds an exclusive flock(2) on <dir>/llmc_run.lock for its whole life
 * (the kernel drops it however the process ends; an NFS client holds it on the server). A second
 * run started into the same folder would remove the first one's temporary files at its start and
 * then write the same checkpoint names; it stops instead, naming the run that holds the folder
 * (pid, host and start, which the holder writes into the file). train_gpt2.py takes the same
 * lock. A filesystem that has no locks gets a warning, and the run goes on. Rank 0, before any
 * other use of the folder.
 */
#define CKPT_RUN_LOCK "llmc_run.lock"
static int ckpt_lock_fd = -1;        // the locked file, open until the process ends
static size_t ckpt_lock_len;         // the length of its first line (the holder)
static char ckpt_lock_owner[512];    // its second line as this run found it (checkpoint_lock_own's)
static inline void checkpoint_lock_dir(const char *dir) {
    char path[4200];
    snprintf(path, sizeof(path), "%s/" CKPT_RUN_LOCK, dir);
    const int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
        llmc_warn("-o %s: cannot open %s (%s): nothing keeps a second run out of this folder", dir, path, strerror(errno));
        return;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        if (errno != EWOULDBLOCK) {
            llmc_warn("-o %s: cannot lock %s (%s): nothing keeps a second run out of this folder", dir, path, strerror(errno));
            close(fd);
            return;
        }
        char who[256];
        const ssize_t n = pread(fd, who, sizeof(who) - 1, 0);
        who[n > 0 ? n : 0] = '\0';
        who[strcspn(who, "\n")] = '\0';
        for (char *q = who; *q; q++) {  // a file of another making: printable ASCII only, nothing for the terminal
            if (*q < 0x20 || *q > 0x7e) { *q = '?'; }
        }
        llmc_die("-o %s is in use by another run (%s): two runs in one folder overwrite each other's checkpoints; wait "
                 "for it to end, or choose another -o", dir, who[0] ? who : "its details not written yet");
    }
    char host[256], when[64] = "", who[512];
    llmc_hostname(host, sizeof(host), "an unknown host");
    const time_t now = time(NULL);
    struct tm tm_utc;
    strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S UTC", gmtime_r(&now, &tm_utc));
    const int len = snprintf(who, sizeof(who), "pid %d on %s, started %s\n", (int)getpid(), host, when);
    char was[1024];  // the last holder's lines: the second says whose the folder's checkpoints are
    const ssize_t n = pread(fd, was, sizeof(was) - 1, 0);
    was[n > 0 ? n : 0] = '\0';
    const char *second = strchr(was, '\n');
    snprintf(ckpt_lock_owner, sizeof(ckpt_lock_owner), "%s", second ? second + 1 : "");
    // the holder's details, for the message of a run refused here (on a full disk the file stays
    // empty; the lock holds all the same)
    if (ftruncate(fd, 0) == 0) { (void)!pwrite(fd, who, (size_t)len, 0); }
    ckpt_lock_fd = fd;
    ckpt_lock_len = (size_t)len;
}  // fd stays open, and the folder locked, until the process ends

/*
 * torchrun --max-restarts: after a worker fails, torchrun starts all of them again with the same
 * command line (TORCHELASTIC_RESTART_COUNT 1, 2, ...). Their folder then holds the checkpoints of
 * the run's own first workers, which a command without -y 1 would refuse as another run's (using up
 * the restarts), and --start-over 1 would move aside: a restart resumes them instead, as -y 1 does.
 * "Its own" is the lock file's second line, which names the torchrun process (rank 0's parent), its
 * host and run id, and which a run writes only once the folder is its own (checkpoint_lock_own):
 * a first attempt refused by another run's checkpoints leaves that run's line, or none.
 */
static inline int ckpt_torchrun_line(char *out, size_t n) {
    if (!comm_launched_by_torchrun()) { return 0; }
    char host[256], path[64], line[1024];
    llmc_hostname(host, sizeof(host), "an unknown host");
    // the process's start (field 22 of /proc/<pid>/stat, clock ticks after boot): a pid used again
    // by a later torchrun is not the same torchrun
    const int parent = (int)getppid();
    unsigned long long start = 0;
    snprintf(path, sizeof(path), "/proc/%d/stat", parent);
    FILE *f = fopen(path, "r");
    if (f != NULL) {
        const size_t got = fread(line, 1, sizeof(line) - 1, f);
        line[got] = '\0';
        fclose(f);
        const char *p = strrchr(line, ')');  // the command name may hold spaces and parentheses
        for (int field = 2; p != NULL && field < 22; field++) { p = strchr(p + 1, ' '); }
        if (p != NULL) { start = strtoull(p + 1, NULL, 10); }
    }
    snprintf(out, n, "torchrun pid %d (started %llu) on %s, run %s\n", parent, start, host, getenv("TORCHELASTIC_RUN_ID"));
    return 1;
}

// rank 0, after checkpoint_lock_dir: 1 if this process is a torchrun restart of the run that owns the folder
static inline int checkpoint_torchrun_restart(void) {
    char line[512];
    return ckpt_torchrun_line(line, sizeof(line)) && comm_env_int("TORCHELASTIC_RESTART_COUNT") >= 1 &&
           strcmp(line, ckpt_lock_owner) == 0;
}

// rank 0, once the folder is this run's (claimed or resumed): under torchrun, the lock file's second line
static inline void checkpoint_lock_own(void) {
    char line[512];
    if (ckpt_lock_fd < 0 || !ckpt_torchrun_line(line, sizeof(line))) { return; }
    const size_t n = strlen(line);
    if (pwrite(ckpt_lock_fd, line, n, (off_t)ckpt_lock_len) == (ssize_t)n) {
        (void)!ftruncate(ckpt_lock_fd, (off_t)(ckpt_lock_len + n));
    }
}

/*
 * A checkpoint is the files of every rank in one folder (rank 0's model file, each rank's state
 * file, the marker), so with several processes every rank must see -o: a folder on each node's own
 * disk would leave each node a part, complete on none, and a resume would start from scratch. Rank
 * 0 writes a file of a fresh nonce there (where it cannot, a full disk, the check steps aside: the
 * checkpoints fail later and say so, as in one process); every rank looks for it (2 s, for a
 * filesystem that shows it late); if one does not see it, the run stops at once with a line naming
 * the ranks. Every rank calls this, after rank 0 made the folder.
 */
#define CKPT_SHARED_CHECK "llmc_shared_check_"  // the file's name, then the nonce in hex
static inline void checkpoint_check_shared_dir(Comm *c, const char *dir) {
    if (c->world_size == 1) { return; }
    uint64_t sent[2] = {0, 0};  // rank 0's nonce; whether rank 0 could write it into dir
    char path[4200];
    if (c->rank == 0) {
        sent[0] = fs_sync_nonce(0);
        snprintf(path, sizeof(path), "%s/" CKPT_SHARED_CHECK "%016llx", dir, (unsigned long long)sent[0]);
        AtomicFile af;
        char err[4600];
        if (atomic_open_soft(&af, path, "-o", err, sizeof(err)) == 0) {
            atomic_write(&af, &sent[0], sizeof(sent[0]), 0);
            atomic_commit(&af);
        }
        sent[1] = !af.failed;
    }
    c->bcast(c, sent, sizeof(sent));  // after the write: every rank may look for the file
    // a folder rank 0 cannot write to (a full disk): its checkpoints fail and say so, as in one process
    if (!sent[1]) { return; }
    snprintf(path, sizeof(path), "%s/" CKPT_SHARED_CHECK "%016llx", dir, (unsigned long long)sent[0]);
    int *missing = (int *)calloc((size_t)c->world_size, sizeof(int));
    char *seen = (char *)calloc((size_t)c->world_size, 1);
    if (missing == NULL || seen == NULL) { llmc_die("out of host memory"); }
    for (int tries = 0;; tries++) {
        uint64_t got = 0;
        const int ok = fs_sync_read(path, &got, sizeof(got)) == 0 && got == sent[0];
        if (ok || tries == 20) { missing[c->rank] = !ok; break; }
        usleep(100 * 1000);
    }
    c->allreduce_max_i32(c, missing, c->world_size);
    if (c->rank == 0) { remove(path); }
    int n = 0;  // of ranks 1..: rank 0 wrote the file
    for (int r = 0; r < c->world_size; r++) {
        seen[r] = !missing[r];
        n += r > 0 && missing[r];
    }
    char ranks[256];
    missing_ranks_list(ranks, sizeof(ranks), seen, c->world_size);
    free(missing);
    free(seen);
    if (n == 0) { return; }
    if (c->rank == 0) {
        llmc_die("-o %s: rank%s %s %s not see the files rank 0 writes there; a checkpoint is every rank's files in one "
                 "folder, so -o must be one every node mounts at the same path (a shared filesystem), not a node's own "
                 "disk", dir, n > 1 ? "s" : "", ranks, n > 1 ? "do" : "does");
    }
    c->barrier(c);  // rank 0's error takes every rank down
    exit(EXIT_FAILURE);
}

// remove temporary files left by a killed writer, and the file of checkpoint_check_shared_dir of a
// run killed in its start-up (call on rank 0 before any rank writes)
static inline void checkpoint_clean_tmp(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) { return; }
    struct dirent *e;
    char path[4096];
    while ((e = readdir(d)) != NULL) {
        if (strstr(e->d_name, ".tmp.") != NULL || strncmp(e->d_name, CKPT_SHARED_CHECK, strlen(CKPT_SHARED_CHECK)) == 0) {
            snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
            remove(path);
        }
    }
    closedir(d);
}

#endif  // LLMC_CHECKPOINT_H
