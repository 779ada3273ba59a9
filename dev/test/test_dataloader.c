/*
 * Data-loader tests (llmc/dataloader.h): the documented, rank-count-independent layout.
 *
 * For W = 1, 2, 3, 4 ranks with the same total batch (so 12/W micro-steps each), the windows
 * that all ranks read in a step are exactly the windows one rank reads with 12 micro-steps, in
 * the same global micro-batch order; no window is read twice within an epoch; an epoch visits
 * every window exactly once; without shuffling a micro-batch is B*T+1 contiguous tokens of a
 * shard; with shuffling the order is a real permutation that depends on the seed and the epoch.
 * Shards have different sizes, and one is too short to hold a window.
 */
#include "../../llmc/dataloader.h"

static int failures = 0;
#define CHECK(cond, ...) do { if (!(cond)) { failures++; if (failures <= 10) { printf("FAIL: " __VA_ARGS__); printf("\n"); } } } while (0)

// token at position i of shard s: unique per (shard, position) so windows can be identified by content
static uint16_t token_of(int s, long long i) { return (uint16_t)((s * 7919 + i * 31) % 50000); }

static void write_shard(const char *path, int s, int ntok) {
    FILE *f = fopenCheck(path, "wb");
    int h[256] = {0};
    h[0] = SHARD_MAGIC; h[1] = SHARD_VERSION; h[2] = ntok;
    fwriteCheck(h, sizeof(int), 256, f);
    for (int i = 0; i < ntok; i++) { uint16_t t = token_of(s, i); fwriteCheck(&t, 2, 1, f); }
    fcloseCheck(f);
}

enum { T = 8, B = 2, AW = 12 };  // sequence length, micro-batch, micro-batches per step over all ranks

// the single-rank reference: (shard, local window) of every window of `steps` steps of N windows
typedef struct {
    int *shard;
    long long *local;
    long long N, total;
    int steps;
} Stream;

static Stream reference_stream(DataLoader *ref) {
    Stream st;
    st.N = (long long)AW * B;
    st.steps = (int)(3 * ref->total_windows / st.N);  // about three epochs
    st.total = (long long)st.steps * st.N;
    st.shard = (int *)mallocCheck(st.total * sizeof(int));
    st.local = (long long *)mallocCheck(st.total * sizeof(long long));
    for (int s = 0; s < st.steps; s++) {
        for (int k = 0; k < AW; k++) {
            long long w = dataloader_train_window(s, k, 0, 1, B, st.N);
            for (int i = 0; i < B; i++) {
                long long g = (long long)s * st.N + (long long)k * B + i;
                dataloader_locate(ref, w + i, &st.shard[g], &st.local[g]);
            }
        }
    }
    return st;
}

// every epoch visits each window once; unshuffled the first epoch is the shards in order, shuffled
// it is not, and the second epoch differs from it
static void check_epochs(const Stream *st, const DataLoader *ref, int shuffle) {
    const long long S = ref->total_windows;
    char *seen = (char *)mallocCheck(4 * 4096);
    for (long long e = 0; e + 1 <= st->total / S; e++) {
        memset(seen, 0, 4 * 4096);
        for (long long g = e * S; g < (e + 1) * S; g++) {
            int idx = st->shard[g] * 4096 + (int)st->local[g];
            CHECK(st->local[g] >= 0 && st->local[g] < ref->num_windows[st->shard[g]], "window out of range");
            CHECK(!seen[idx], "shuffle=%d epoch %lld: window (%d,%lld) read twice", shuffle, e, st->shard[g], st->local[g]);
            seen[idx] = 1;
        }
    }
    free(seen);
    int in_order = 1;
    for (long long g = 1; g < S; g++) {
        if (!(st->shard[g] > st->shard[g - 1] || (st->shard[g] == st->shard[g - 1] && st->local[g] == st->local[g - 1] + 1))) {
            in_order = 0;
        }
    }
    CHECK(in_order == !shuffle, "shuffle=%d but the first epoch is %s", shuffle, in_order ? "in order" : "permuted");
    if (shuffle) {
        int same = 1;
        for (long long g = 0; g < S; g++) {
            if (st->shard[g] != st->shard[g + S] || st->local[g] != st->local[g + S]) { same = 0; }
        }
        CHECK(!same, "epochs 0 and 1 have the same order");
    }
}

// the tokens rank r of W read at micro-step k of step s (global micro-batch m = k*W + r) are the
// reference's windows; unshuffled, a micro-batch inside one shard is B*T+1 contiguous tokens
static void check_micro_batch(const Stream *st, const int *inp, const int *tgt, int W, int shuffle, int s, int k, int r) {
    const long long m = (long long)k * W + r;
    for (int i = 0; i < B; i++) {
        long long g = (long long)s * st->N + m * B + i;
        int sh = st->shard[g];
        long long lo = st->local[g];
        for (int t = 0; t < T; t++) {
            uint16_t ex_in = token_of(sh, lo * T + t), ex_tg = token_of(sh, lo * T + t + 1);
            CHECK(inp[i * T + t] == ex_in && tgt[i * T + t] == ex_tg,
                  "W=%d shuffle=%d step %d micro %d rank %d window %d pos %d: got %d/%d expected %d/%d", W, shuffle, s, k, r, i,
                  t, inp[i * T + t], tgt[i * T + t], ex_in, ex_tg);
        }
    }
    const long long g0 = (long long)s * st->N + m * B;
    if (!shuffle && st->shard[g0] == st->shard[g0 + B - 1]) {
        CHECK(st->local[g0 + B - 1] == st->local[g0] + B - 1, "micro-batch not contiguous");
        CHECK(tgt[B * T - 1] == token_of(st->shard[g0], (st->local[g0] + B) * T), "last target not token B*T");
    }
}

// W ranks with AW/W micro-steps each together read exactly the reference's windows of every step
static void check_ranks(const Stream *st, const char *pattern, int W, int shuffle) {
    const int A = AW / W;
    DataLoader *dl = (DataLoader *)mallocCheck(W * sizeof(DataLoader));
    for (int r = 0; r < W; r++) { dataloader_init(&dl[r], pattern, "-i", T, 50257, shuffle, 42); }
    int *inp = (int *)mallocCheck(B * T * sizeof(int)), *tgt = (int *)mallocCheck(B * T * sizeof(int));
    for (int s = 0; s < st->steps; s++) {
        for (int k = 0; k < A; k++) {
            for (int r = 0; r < W; r++) {
                dataloader_read(&dl[r], dataloader_train_window(s, k, r, W, B, st->N), B, inp, tgt);
                check_micro_batch(st, inp, tgt, W, shuffle, s, k, r);
            }
        }
    }
    printf("W=%d ranks x %d micro-steps, shuffle=%d: %d steps read the same windows as 1 rank x 12\n", W, A, shuffle, st->steps);
    for (int r = 0; r < W; r++) { dataloader_free(&dl[r]); }
    free(dl); free(inp); free(tgt);
}

// the shuffle depends on the seed
static void check_seed(const Stream *st, const char *pattern, long long S) {
    DataLoader other;
    dataloader_init(&other, pattern, "-i", T, 50257, 1, 43);
    int differs = 0;
    for (long long g = 0; g < S; g++) {
        int sh; long long lo;
        dataloader_locate(&other, g, &sh, &lo);
        if (sh != st->shard[g] || lo != st->local[g]) { differs = 1; }
    }
    CHECK(differs, "seeds 42 and 43 give the same order");
    dataloader_free(&other);
}

int main(void) {
    char dir[] = "/tmp/test_dataloader_XXXXXX";
    if (!mkdtemp(dir)) { llmc_die("mkdtemp failed"); }
    const int sizes[4] = {1000, 5, 377, 2049};  // shard 1 is shorter than T+1: no windows
    char path[4200], pattern[4200];
    for (int s = 0; s < 4; s++) {
        snprintf(path, sizeof(path), "%s/shard_%02d.bin", dir, s);
        write_shard(path, s, sizes[s]);
    }
    snprintf(pattern, sizeof(pattern), "%s/shard_*.bin", dir);
    long long expected_windows = 0;
    for (int s = 0; s < 4; s++) { expected_windows += sizes[s] >= 1 ? (sizes[s] - 1) / T : 0; }

    for (int shuffle = 0; shuffle <= 1; shuffle++) {
        DataLoader ref;
        dataloader_init(&ref, pattern, "-i", T, 50257, shuffle, 42);
        CHECK(ref.total_windows == expected_windows, "total windows %lld, expected %lld", ref.total_windows, expected_windows);
        Stream st = reference_stream(&ref);
        check_epochs(&st, &ref, shuffle);
        for (int W = 1; W <= 4; W++) {
            if (AW % W == 0) { check_ranks(&st, pattern, W, shuffle); }
        }
        if (shuffle) { check_seed(&st, pattern, ref.total_windows); }
        free(st.shard); free(st.local);
        dataloader_free(&ref);
    }
    char cmd[4300];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    if (system(cmd) != 0) { llmc_warn("could not remove %s", dir); }
    if (failures) { printf("test_dataloader: %d FAILURES\n", failures); return 1; }
    printf("test_dataloader: all checks passed\n");
    return 0;
}
