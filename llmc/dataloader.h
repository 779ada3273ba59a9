/*
 * Token-shard data loading, shared by both trainers.
 *
 * A shard (llm.c format): 256 int32 header (magic 20240520, version 1, token count), then the
 * tokens as uint16. Shards are memory-mapped; headers and sizes are checked when opened, token
 * ids when read (and a shard cut short on disk meanwhile is an error, not a SIGBUS).
 *
 * The data layout (rank-count independent):
 * - The shards matched by a glob, in sorted order, are cut into *windows*: window j of a shard
 *   holds its tokens j*T .. j*T+T (T+1 tokens: T inputs, and the same shifted by one as targets).
 *   A shard of n tokens has floor((n-1)/T) windows; consecutive windows share one token.
 * - The windows of all shards, in order, form one stream of S windows per epoch. With shuffling
 *   (-sh 1) each epoch e visits the shards in a permuted order and the windows of each shard in a
 *   permuted order; both permutations depend only on (seed, e, shard), so every rank computes the
 *   same stream.
 * - An optimizer step consumes N = d / T consecutive windows of the stream: step s starts at
 *   window s*N (counting across epochs). Its global micro-batch m (m = 0 .. N/B-1) is windows
 *   s*N + m*B .. s*N + m*B + B-1, and rank r runs global micro-batch m = k*W + r at its micro-step
 *   k (W ranks, k = 0 .. grad_accum-1). Without shuffling those B windows are B*T+1 contiguous
 *   tokens. So the tokens of a step do not depend on W: 1 rank with 8 micro-steps and 8 ranks with
 *   1 see the same N windows.
 * - The position in the data is therefore a pure function of the step; a checkpoint stores the
 *   step and the data-defining settings (T, d, seed, shuffle) and nothing else.
 * - Validation uses the val stream unshuffled from window 0: M = -m * B windows (all with -m -1),
 *   in micro-batches of B; rank r evaluates micro-batches r, r+W, ...; the last may be partial.
 */
#ifndef LLMC_DATALOADER_H
#define LLMC_DATALOADER_H

#include <glob.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/mman.h>
#include "utils.h"

#define SHARD_MAGIC 20240520
#define SHARD_VERSION 1
#define HEADER_BYTES_SHARD 1024
#define SHARD_HINT "make shards with ./gpt2_tokenize or the recipes in dev/data/"

typedef struct {
    int num_shards;
    char **paths;              // (num_shards) file names, sorted
    const uint16_t **tokens;   // (num_shards) mapped tokens, after the header
    long long *num_tokens;     // (num_shards)
    long long *num_windows;    // (num_shards) floor((num_tokens - 1) / T)
    long long *first_window;   // (num_shards) prefix sums of num_windows (unshuffled stream)
    long long total_windows;   // S
    long long total_tokens;
    void **maps;
    size_t *map_bytes;
    int T;
    int vocab_size;            // token ids must be < this
    const char *glob_pattern;
    // shuffling
    int shuffle;
    unsigned long long seed;
    long long cached_epoch;    // epoch whose shard order is in shard_order
    int *shard_order;          // (num_shards) visiting order of the cached epoch
    long long *order_first;    // (num_shards) first window of each visited shard in the epoch
    int cached_shard;          // shard whose window permutation is in window_perm (-1: none)
    long long cached_perm_epoch;
    long long *window_perm;    // (max windows per shard)
} DataLoader;

// one shard of glob `pattern`, opened and its header checked (dies otherwise): the open file, its
// size in bytes and token count
static inline FILE *shard_open_checked(const char *path, const char *pattern, const char *flag, long long *size_out,
                                       long long *ntok_out) {
    FILE *fp;
    long long size;
    char why[512];
    if (open_regular(path, &fp, &size, why, sizeof(why)) != 0) {
        llmc_die("%s %s: '%s' %s; the glob must match token shards only (%s)", flag, pattern, path, why, SHARD_HINT);
    }
    if (size < HEADER_BYTES_SHARD) {
        llmc_die("%s: shard '%s' is %lld bytes, smaller than its 1024-byte header (truncated?); %s", flag, path, size, SHARD_HINT);
    }
    int header[HEADER_BYTES_SHARD / 4];
    if (fread(header, sizeof(header), 1, fp) != 1) {
        llmc_die("%s: reading the header of shard '%s' failed: %s", flag, path, feof(fp) ? "it is shorter now" : strerror(errno));
    }
    if (header[0] != SHARD_MAGIC) {
        llmc_die("%s: '%s' is not a token shard (magic %d, expected %d); %s", flag, path, header[0], SHARD_MAGIC, SHARD_HINT);
    }
    if (header[1] != SHARD_VERSION) {
        llmc_die("%s: shard '%s' has version %d, expected %d; %s", flag, path, header[1], SHARD_VERSION, SHARD_HINT);
    }
    long long ntok = (unsigned int)header[2];
    long long expected = HEADER_BYTES_SHARD + 2 * ntok;
    if (size != expected) {
        llmc_die("%s: shard '%s' is %lld bytes but its header says %lld tokens (%lld bytes): %s; %s", flag, path,
                 size, ntok, expected, size < expected ? "truncated" : "trailing bytes", SHARD_HINT);
    }
    *size_out = size;
    *ntok_out = ntok;
    return fp;
}

// one shard: header checks, then the mapping (of the descriptor the checks read: what is mapped is
// what was checked)
static inline void shard_open(DataLoader *dl, int i, const char *flag) {
    const char *path = dl->paths[i];
    long long size, ntok;
    FILE *fp = shard_open_checked(path, dl->glob_pattern, flag, &size, &ntok);
    void *map = mmap(NULL, (size_t)size, PROT_READ, MAP_PRIVATE, fileno(fp), 0);
    int map_errno = errno;
    fclose(fp);
    if (map == MAP_FAILED) { llmc_die("%s: cannot map shard '%s': %s", flag, path, strerror(map_errno)); }
    dl->maps[i] = map;
    dl->map_bytes[i] = (size_t)size;
    dl->tokens[i] = (const uint16_t *)((const char *)map + HEADER_BYTES_SHARD);
    dl->num_tokens[i] = ntok;
    dl->num_windows[i] = ntok >= 1 ? (ntok - 1) / dl->T : 0;
}

// the window permutation of the largest shard (max_windows windows)
static inline size_t dataloader_index_bytes(long long max_windows) {
    return (size_t)(max_windows > 0 ? max_windows : 1) * sizeof(long long);
}

/*
 * What dataloader_init will allocate for `pattern` at T, from the file sizes (nothing is read; a
 * shard's header is assumed right): the window index and the per-shard tables. -1 if nothing
 * matches. The mapped shards are not counted: their pages are the page cache's (reclaimable).
 * windows (may be NULL): the windows of all shards, or -1.
 */
static inline long long dataloader_plan_bytes(const char *pattern, int T, long long *windows) {
    glob_t g;
    if (windows) { *windows = -1; }
    if (glob(pattern, 0, NULL, &g) != 0 || g.gl_pathc == 0) { return -1; }
    long long total = 0;
    long long max_windows = 0, bytes = 0;
    for (size_t i = 0; i < g.gl_pathc; i++) {
        long long size = file_size_bytes(g.gl_pathv[i]), ntok = (size - HEADER_BYTES_SHARD) / 2;
        long long windows = ntok >= 1 ? (ntok - 1) / T : 0;
        if (windows > max_windows) { max_windows = windows; }
        total += windows;
        bytes += 9 * (long long)sizeof(long long) + (long long)strlen(g.gl_pathv[i]) + 1;  // the per-shard tables
    }
    globfree(&g);
    if (windows) { *windows = total; }
    return bytes + (long long)dataloader_index_bytes(max_windows);
}

// the shards that `pattern` matches, sorted (dies if none)
static inline void shard_glob(glob_t *g, const char *pattern, const char *flag) {
    int rc = glob(pattern, 0, NULL, g);
    if (rc != 0 || g->gl_pathc == 0) {
        if (rc == 0) { globfree(g); }
        llmc_die("%s %s: no files match; prepare data first (e.g. bash dev/data/tinyshakespeare.sh) or fix the path",
                 flag, pattern);
    }
}

/*
 * The checks dataloader_init makes of the shards' files (they match, open, have a right header and
 * size), nothing mapped or kept: a trainer runs them before its slow start-up (a GPU, NCCL), so a
 * mistyped -i fails at once.
 */
static inline void dataloader_check(const char *pattern, const char *flag) {
    glob_t g;
    shard_glob(&g, pattern, flag);
    for (size_t i = 0; i < g.gl_pathc; i++) {
        long long size, ntok;
        fclose(shard_open_checked(g.gl_pathv[i], pattern, flag, &size, &ntok));
    }
    globfree(&g);
}

/*
 * Open all shards matching `pattern` for windows of T+1 tokens.
 * flag: "-i" or "-j", for messages. Dies if nothing matches or a shard is bad.
 */
static inline void dataloader_init(DataLoader *dl, const char *pattern, const char *flag, int T, int vocab_size,
                                   int shuffle, unsigned long long seed) {
    memset(dl, 0, sizeof(*dl));
    dl->T = T;
    dl->vocab_size = vocab_size;
    dl->glob_pattern = pattern;
    dl->shuffle = shuffle;
    dl->seed = seed;
    glob_t g;
    shard_glob(&g, pattern, flag);
    dl->num_shards = (int)g.gl_pathc;  // glob() returns the names sorted
    int n = dl->num_shards;
    dl->paths = (char **)mallocCheck(n * sizeof(char *));
    dl->tokens = (const uint16_t **)mallocCheck(n * sizeof(uint16_t *));
    dl->num_tokens = (long long *)mallocCheck(n * sizeof(long long));
    dl->num_windows = (long long *)mallocCheck(n * sizeof(long long));
    dl->first_window = (long long *)mallocCheck(n * sizeof(long long));
    dl->maps = (void **)mallocCheck(n * sizeof(void *));
    dl->map_bytes = (size_t *)mallocCheck(n * sizeof(size_t));
    dl->shard_order = (int *)mallocCheck(n * sizeof(int));
    dl->order_first = (long long *)mallocCheck(n * sizeof(long long));
    for (int i = 0; i < n; i++) {
        dl->paths[i] = (char *)mallocCheck(strlen(g.gl_pathv[i]) + 1);
        strcpy(dl->paths[i], g.gl_pathv[i]);
    }
    globfree(&g);
    long long max_windows = 0;
    for (int i = 0; i < n; i++) {
        shard_open(dl, i, flag);
        dl->first_window[i] = dl->total_windows;
        dl->total_windows += dl->num_windows[i];
        dl->total_tokens += dl->num_tokens[i];
        if (dl->num_windows[i] > max_windows) { max_windows = dl->num_windows[i]; }
        if (dl->num_windows[i] == 0) {
            llmc_warn("%s: shard '%s' has %lld tokens, fewer than T+1 = %d; it contributes no data", flag,
                      dl->paths[i], dl->num_tokens[i], T + 1);
        }
    }
    dl->window_perm = (long long *)mallocCheck(dataloader_index_bytes(max_windows));
    dl->cached_epoch = -1;
    dl->cached_shard = -1;
    dl->cached_perm_epoch = -1;
}

// dies unless the data holds at least `windows` windows (one step's worth, or one val batch)
static inline void dataloader_require(const DataLoader *dl, long long windows, const char *flag, const char *what) {
    if (dl->total_windows < windows) {
        llmc_die("%s %s: %lld tokens in %d shard(s) make %lld windows of T+1 = %d tokens, but %s needs %lld "
                 "(B*T+1 tokens per rank per micro-step); use a smaller -b, -t or -d, or more data",
                 flag, dl->glob_pattern, dl->total_tokens, dl->num_shards, dl->total_windows, dl->T + 1, what, windows);
    }
}

static inline void dataloader_free(DataLoader *dl) {
    for (int i = 0; i < dl->num_shards; i++) {
        munmap(dl->maps[i], dl->map_bytes[i]);
        free(dl->paths[i]);
    }
    free(dl->paths); free(dl->tokens); free(dl->num_tokens); free(dl->num_windows); free(dl->first_window);
    free(dl->maps); free(dl->map_bytes); free(dl->shard_order); free(dl->order_first); free(dl->window_perm);
    memset(dl, 0, sizeof(*dl));
}

// a deterministic permutation of 0..n-1 (Fisher-Yates driven by splitmix64 of the key)
static inline void dl_permute_ll(long long *a, long long n, uint64_t key) {
    for (long long i = 0; i < n; i++) { a[i] = i; }
    uint64_t s = key;
    for (long long i = n - 1; i > 0; i--) {
        long long j = (long long)(splitmix64(&s) % (uint64_t)(i + 1));
        long long t = a[i]; a[i] = a[j]; a[j] = t;
    }
}

// the last i with first[i] <= idx (first is non-decreasing, first[0] = 0). An empty shard shares
// its first window with the next shard, so this never lands on one.
static inline int dl_last_at_or_below(const long long *first, int n, long long idx) {
    int lo = 0, hi = n - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (first[mid] <= idx) { lo = mid; } else { hi = mid - 1; }
    }
    return lo;
}

// map window index `w` of the (infinite, epoch-repeating) stream to (shard, window within shard)
static inline void dataloader_locate(DataLoader *dl, long long w, int *shard, long long *local) {
    long long S = dl->total_windows;
    long long epoch = w / S, idx = w % S;
    if (!dl->shuffle) {
        int lo = dl_last_at_or_below(dl->first_window, dl->num_shards, idx);
        *shard = lo;
        *local = idx - dl->first_window[lo];
        return;
    }
    if (dl->cached_epoch != epoch) {
        // shard visiting order of this epoch
        long long *tmp = (long long *)mallocCheck(dl->num_shards * sizeof(long long));
        dl_permute_ll(tmp, dl->num_shards, dl->seed * 0x100000001B3ULL ^ (uint64_t)(epoch * 2 + 1));
        long long acc = 0;
        for (int i = 0; i < dl->num_shards; i++) {
            dl->shard_order[i] = (int)tmp[i];
            dl->order_first[i] = acc;
            acc += dl->num_windows[tmp[i]];
        }
        free(tmp);
        dl->cached_epoch = epoch;
    }
    int lo = dl_last_at_or_below(dl->order_first, dl->num_shards, idx);
    int s = dl->shard_order[lo];
    long long pos = idx - dl->order_first[lo];
    if (dl->cached_shard != s || dl->cached_perm_epoch != epoch) {
        dl_permute_ll(dl->window_perm, dl->num_windows[s],
                      (dl->seed + 0x51ED27ULL) * 0x9E3779B97F4A7C15ULL ^ ((uint64_t)epoch << 20) ^ (uint64_t)s);
        dl->cached_shard = s;
        dl->cached_perm_epoch = epoch;
    }
    *shard = s;
    *local = dl->window_perm[pos];
}

// A shard made shorter on disk while it is mapped (rewritten in place by another program) loses the
// pages past its new end, and reading them raises SIGBUS. The copy of a window catches that on its
// own thread, so that the run ends with an error naming the shard rather than a crash.
static __thread sigjmp_buf dl_bus_jump;
static __thread volatile sig_atomic_t dl_bus_armed;
static struct sigaction dl_bus_prev;

static void dl_on_bus(int sig, siginfo_t *info, void *ctx) {
    (void)sig; (void)info; (void)ctx;
    if (dl_bus_armed) {
        dl_bus_armed = 0;
        siglongjmp(dl_bus_jump, 1);
    }
    sigaction(SIGBUS, &dl_bus_prev, NULL);  // another thread's fault: it repeats, under the handler before
}

// window src (T+1 tokens) into inputs and targets (T each); 0, or -1 where its pages are gone
static inline int dl_copy_window(const uint16_t *src, int T, int *inputs, int *targets) {
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = dl_on_bus;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGBUS, &sa, &dl_bus_prev);
    int rc = 0;
    if (sigsetjmp(dl_bus_jump, 1) == 0) {
        dl_bus_armed = 1;
        for (int t = 0; t < T; t++) {
            inputs[t] = src[t];
            targets[t] = src[t + 1];
        }
        dl_bus_armed = 0;
    } else {
        rc = -1;
    }
    sigaction(SIGBUS, &dl_bus_prev, NULL);
    return rc;
}

/*
 * Fill inputs/targets (count*T ints each) with the `count` windows starting at stream window `w`.
 * Token ids are checked against the vocabulary here, where they enter.
 */
static inline void dataloader_read(DataLoader *dl, long long w, int count, int *inputs, int *targets) {
    int T = dl->T;
    for (int i = 0; i < count; i++) {
        int s;
        long long local;
        dataloader_locate(dl, w + i, &s, &local);
        int *in = inputs + (size_t)i * T, *tg = targets + (size_t)i * T;
        if (dl_copy_window(dl->tokens[s] + local * T, T, in, tg) != 0) {
            llmc_die("shard '%s' became shorter on disk than its %zu bytes while this run read it (another program "
                     "rewrote it in place?); restore it, then resume with -y 1", dl->paths[s], dl->map_bytes[s]);
        }
        for (int t = 0; t <= T; t++) {
            const int id = t < T ? in[t] : tg[T - 1];
            if (id >= dl->vocab_size) {
                llmc_die("shard '%s' has token id %d at position %lld, not below the model's vocab size %d (data "
                         "tokenized for another vocabulary?); %s, or give -e a model with that vocabulary",
                         dl->paths[s], id, local * T + t, dl->vocab_size, SHARD_HINT);
            }
        }
    }
}

// the stream window where rank `rank` of `world` reads micro-step `k` of optimizer step `step`
static inline long long dataloader_train_window(long long step, int k, int rank, int world, int B, long long windows_per_step) {
    return step * windows_per_step + ((long long)k * world + rank) * B;
}

// a hash of the shard list, compared across ranks at start: each shard's name and token count, and
// HASH_SAMPLES runs of HASH_SAMPLE_TOKENS tokens spread evenly over it (first and last included),
// so that a node's stale, zeroed or re-tokenized copy of the same size differs too; a few pages
// of each mapping are read
#define HASH_SAMPLES 16
#define HASH_SAMPLE_TOKENS 64
static inline uint64_t dataloader_hash(const DataLoader *dl, uint64_t h) {
    for (int i = 0; i < dl->num_shards; i++) {
        const char *base = strrchr(dl->paths[i], '/');
        base = base ? base + 1 : dl->paths[i];
        h = fnv1a64(h, base, strlen(base) + 1);
        const long long n = dl->num_tokens[i];
        h = fnv1a64(h, &n, sizeof(long long));
        const long long take = n < HASH_SAMPLE_TOKENS ? n : HASH_SAMPLE_TOKENS;
        for (int s = 0; s < HASH_SAMPLES && take > 0; s++) {
            const long long at = (n - take) * s / (HASH_SAMPLES - 1);
            h = fnv1a64(h, dl->tokens[i] + at, (size_t)take * sizeof(uint16_t));
        }
    }
    return h;
}

#endif  // LLMC_DATALOADER_H
