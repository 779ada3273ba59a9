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
 *     [30..35] model config: maxT V Vp L NH C
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
#include <signal.h>
#include "backend.h"
#include "comm.h"
#include "guard.h"

#define STATE_MAGIC 20240527
#define STATE_VERSION 2
#define CKPT_CHUNK ((size_t)1 << 22)  // elements per chunk of optimizer state moved at once

// what a checkpoint carries besides model and optimizer state
typedef struct {
    int step;                        // completed optimizer steps
    int opt_steps;                   // applied AdamW updates (skipped steps excluded)
    unsigned long long sample_rng;   // state of the sampling RNG
    int max_steps;                   // -x of the run that wrote it (its LR schedule's length); 0: unknown
    int optimizer;                   // 0 AdamW, 1 Muon (-opt): the meaning of the optimizer state
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
 * Fault injection for the crash tests: LLMC_FAULT=<where>:<step> kills this process with SIGKILL
 * in the middle of writing checkpoint <step>. where: state (every rank, once at least half of its
 * state file is written, before it is renamed), done (rank 0, after every file but the marker).
 */
static inline void ckpt_fault(const char *where, int step) {
    const char *f = getenv("LLMC_FAULT");
    if (f == NULL) { return; }
    size_t n = strlen(where);
    if (strncmp(f, where, n) == 0 && f[n] == ':' && atoi(f + n + 1) == step) {
        fflush(NULL);
        raise(SIGKILL);
    }
}

static inline void hdr_set64(int *h, int i, long long v) { memcpy(&h[i], &v, 8); }
static inline long long hdr_get64(const int *h, int i) { long long v; memcpy(&v, &h[i], 8); return v; }

// the slice of the optimizer state that `rank` writes
static inline void ckpt_save_range(const Backend *b, const Comm *c, size_t *lo, size_t *n) {
    if (b->opt_count < b->num_params) {  // ZeRO shard: each rank saves what it holds
        *lo = b->opt_offset;
        *n = b->opt_count;
    } else {
        size_t P = b->num_params;
        *lo = (size_t)((unsigned long long)P * c->rank / c->world_size);
        *n = (size_t)((unsigned long long)P * (c->rank + 1) / c->world_size) - *lo;
    }
}

static inline void state_file_write(const char *path, Backend *b, const Comm *c, const TrainState *st) {
    size_t lo, n;
    ckpt_save_range(b, c, &lo, &n);
    int h[HEADER_INTS];
    memset(h, 0, sizeof(h));
    h[0] = STATE_MAGIC; h[1] = STATE_VERSION; h[2] = c->world_size; h[3] = c->rank; h[4] = b->has_master;
    h[5] = st->shuffle; h[6] = st->B; h[7] = st->T; hdr_set64(h, 8, st->total_batch);
    h[10] = st->step; h[11] = st->opt_steps;
    hdr_set64(h, 12, (long long)b->num_params); hdr_set64(h, 14, (long long)lo); hdr_set64(h, 16, (long long)n);
    hdr_set64(h, 18, (long long)st->seed); hdr_set64(h, 20, (long long)st->sample_rng);
    h[22] = st->guard.count; h[23] = st->guard.head; h[24] = st->guard.consecutive;
    hdr_set64(h, 25, st->guard.total_skipped);
    h[27] = st->max_steps;
    h[28] = st->optimizer;
    const GPT2Config *cf = &b->config;
    h[30] = cf->max_seq_len; h[31] = cf->vocab_size; h[32] = cf->padded_vocab_size;
    h[33] = cf->num_layers; h[34] = cf->num_heads; h[35] = cf->channels;
    h[252] = CRC_TAG;

    AtomicFile af;
    atomic_open(&af, path);
    fwriteCheck(h, sizeof(int), HEADER_INTS, af.fp);
    int nsec = b->has_master ? 3 : 2;
    size_t chunk = n < CKPT_CHUNK ? (n > 0 ? n : 1) : CKPT_CHUNK;
    float *buf[3];
    for (int s = 0; s < 3; s++) { buf[s] = (float *)mallocCheck(chunk * sizeof(float)); }
    uint32_t crc[3] = {0, 0, 0};
    for (size_t off = 0; off < n; off += chunk) {
        size_t m = n - off < chunk ? n - off : chunk;
        b->get_opt_state(b, lo + off, m, buf[0], buf[1], b->has_master ? buf[2] : NULL);
        for (int s = 0; s < nsec; s++) {
            // section s starts after the header and s sections of n floats
            fseekCheck(af.fp, HEADER_BYTES + (long)((s * n + off) * sizeof(float)), SEEK_SET);
            fwriteCheck(buf[s], sizeof(float), m, af.fp);
            crc[s] = crc32_update(crc[s], buf[s], m * sizeof(float));
        }
        if (off + m >= n / 2) { ckpt_fault("state", st->step); }
    }
    for (int s = 0; s < 3; s++) { free(buf[s]); }
    fseekCheck(af.fp, HEADER_BYTES + (long)(nsec * n * sizeof(float)), SEEK_SET);
    uint32_t gcrc = crc32_update(0, st->guard.loss_hist, sizeof(st->guard.loss_hist));
    gcrc = crc32_update(gcrc, st->guard.norm_hist, sizeof(st->guard.norm_hist));
    fwriteCheck(st->guard.loss_hist, sizeof(float), GUARD_WINDOW, af.fp);
    fwriteCheck(st->guard.norm_hist, sizeof(float), GUARD_WINDOW, af.fp);
    h[251] = (int)gcrc; h[253] = (int)crc[0]; h[254] = (int)crc[1]; h[255] = (int)crc[2];
    h[250] = (int)header_crc(h, HEADER_INTS, 250);
    atomic_patch(&af, 0, h, sizeof(h));
    atomic_commit(&af);
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
    if (h[28] != 0 && h[28] != 1) { return "optimizer [28]"; }
    return NULL;
}

// read a state file's header and check it (checksum, ranges, size); 0 if fine, else 1 with the reason in err
static inline int state_file_header(const char *path, int h[HEADER_INTS], char *err, size_t errlen) {
    if (!file_exists(path)) { snprintf(err, errlen, "state file '%s' is missing", path); return 1; }
    long long size = file_size_bytes(path);
    if (size < HEADER_BYTES) { snprintf(err, errlen, "state file '%s' is truncated (%lld bytes)", path, size); return 1; }
    FILE *fp = fopenCheck(path, "rb");
    freadCheck(h, sizeof(int), HEADER_INTS, fp);
    fcloseCheck(fp);
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
    FILE *fp = fopenCheck(path, "rb");
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

// ----------------------------------------------------------------------------
// saving

static inline void checkpoint_prune(const char *dir, int keep);

// all ranks call this; rank 0 writes the model and the DONE marker after everyone's state file
static inline void checkpoint_save(const char *dir, Backend *b, Comm *c, const TrainState *st, int keep) {
    char path[4096];
    if (c->rank == 0) {
        ckpt_path(path, sizeof(path), dir, "model", st->step, -1);
        b->save_model(b, path);
    }
    ckpt_path(path, sizeof(path), dir, "state", st->step, c->rank);
    state_file_write(path, b, c, st);
    c->barrier(c);  // every file of this checkpoint is on disk
    if (c->rank == 0) {
        ckpt_fault("done", st->step);
        ckpt_path(path, sizeof(path), dir, "DONE", st->step, -1);
        AtomicFile af;
        atomic_open(&af, path);
        char text[256];
        int len = snprintf(text, sizeof(text), "step %d\nworld_size %d\n", st->step, c->world_size);
        atomic_write(&af, text, (size_t)len, 0);
        atomic_commit(&af);
        if (keep > 0) { checkpoint_prune(dir, keep); }
    }
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
    char path[4096], text[64];
    ckpt_path(path, sizeof(path), dir, "DONE", step, -1);
    FILE *fp = fopen(path, "rb");
    if (!fp) { return -1; }
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

// delete the files of checkpoint `step` (DONE first, so a crash midway leaves it incomplete, not wrong)
static inline void checkpoint_delete(const char *dir, int step) {
    char path[4096];
    int w = read_done_world_size(dir, step);
    ckpt_path(path, sizeof(path), dir, "DONE", step, -1);
    remove(path);
    ckpt_path(path, sizeof(path), dir, "model", step, -1);
    remove(path);
    for (int r = 0; r < (w > 0 ? w : 0); r++) {
        ckpt_path(path, sizeof(path), dir, "state", step, r);
        remove(path);
    }
}

// keep the newest `keep` complete checkpoints (the newest one is never deleted)
static inline void checkpoint_prune(const char *dir, int keep) {
    int *steps;
    int n = checkpoint_list(dir, &steps);
    for (int i = (keep > 1 ? keep : 1); i < n; i++) { checkpoint_delete(dir, steps[i]); }
    free(steps);
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
    if (model_file_probe(path, &info, err, errlen)) { return 1; }
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
            llmc_die("checkpoint '%s' was written with -t %d -d %lld -sh %d -rs %llu; this run has -t %d -d %lld -sh %d "
                     "-rs %llu; the data position of a resumed run depends on these, so resume with the same values",
                     path, h[7], hdr_get64(h, 8), h[5], (unsigned long long)hdr_get64(h, 18), cur->T, cur->total_batch,
                     cur->shuffle, cur->seed);
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
    for (size_t off = 0; off < n; off += chunk) {
        size_t m = n - off < chunk ? n - off : chunk;
        size_t a = lo + off, z = a + m;  // parameter range of this chunk
        for (int r = 0; r < w; r++) {
            size_t flo = (size_t)hdr_get64(hdr[r], 14), fn = (size_t)hdr_get64(hdr[r], 16);
            size_t s0 = a > flo ? a : flo, s1 = z < flo + fn ? z : flo + fn;
            if (s0 >= s1) { continue; }
            ckpt_path(path, sizeof(path), dir, "state", step, r);
            FILE *fp = fopenCheck(path, "rb");
            for (int s = 0; s < (file_master ? 3 : 2); s++) {
                fseekCheck(fp, HEADER_BYTES + (long)((s * fn + (s0 - flo)) * sizeof(float)), SEEK_SET);
                freadCheck(buf[s] + (s0 - a), sizeof(float), s1 - s0, fp);
            }
            fcloseCheck(fp);
        }
        b->set_opt_state(b, a, m, buf[0], buf[1], (file_master && b->has_master) ? buf[2] : NULL);
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
    ckpt_path(path, sizeof(path), dir, "state", step, 0);
    FILE *fp = fopenCheck(path, "rb");
    long long fn = hdr_get64(h, 16);
    fseekCheck(fp, HEADER_BYTES + (long)((h[4] ? 3 : 2) * fn * (long long)sizeof(float)), SEEK_SET);
    freadCheck(st->guard.loss_hist, sizeof(float), GUARD_WINDOW, fp);
    freadCheck(st->guard.norm_hist, sizeof(float), GUARD_WINDOW, fp);
    fcloseCheck(fp);
    free(hdr);
    for (int s = 0; s < 3; s++) { free(buf[s]); }
}

/*
 * Resume (-y 1): find the newest complete, intact checkpoint in dir and load it. A torn or
 * corrupt one is skipped with a warning naming the file. All ranks agree on the choice.
 * Returns 1 if a checkpoint was loaded, 0 if there was none (the run starts fresh).
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
    }
    free(steps);
    return loaded;
}

// remove temporary files left by a killed writer (call on rank 0 before any rank writes)
static inline void checkpoint_clean_tmp(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) { return; }
    struct dirent *e;
    char path[4096];
    while ((e = readdir(d)) != NULL) {
        if (strstr(e->d_name, ".tmp.") != NULL) {
            snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
            remove(path);
        }
    }
    closedir(d);
}

#endif  // LLMC_CHECKPOINT_H
