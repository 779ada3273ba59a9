/*
 * HellaSwag evaluation (multiple choice), shared by both trainers.
 *
 * Eval file (llm.c's layout, made by dev/data/hellaswag.sh): 256 int32 header (magic 20240522,
 * version 1, number of examples, longest example in bytes), then per example a stream of uint16:
 *   65535 (start), bytes of this example's stream, example index (0, 1, 2, ...), label, number of completions,
 *   context length, context tokens, then per completion: its length and its tokens.
 * On load every count is checked against the file before memory is taken, every length against
 * the stream, and every token id against the model's vocabulary; contexts and completions are
 * never empty (so every row has at least one scored position).
 *
 * Scoring (acc_norm as llm.c reports it): each completion is appended to the context; the model's
 * mean per-token loss over the completion's tokens scores it; the lowest wins. A row longer than
 * T+1 tokens keeps its last T+1 (the context is cut from the left; the completion is kept whole
 * when it fits). Rows of several examples are packed into batches of up to B rows whose length is
 * the longest row in the batch, so short examples do not cost T positions each.
 * Examples are split across ranks (example i on rank i % W) and the counts summed.
 */
#ifndef LLMC_HELLASWAG_H
#define LLMC_HELLASWAG_H

#include "utils.h"

#define EVAL_MAGIC 20240522
#define EVAL_VERSION 1
#define EVAL_HINT "make it with: bash dev/data/hellaswag.sh"
#define EVAL_MAX_COMPLETIONS 16

typedef struct {
    int label;
    int num_completions;
    int ctx_len;
    const uint16_t *ctx;
    int end_len[EVAL_MAX_COMPLETIONS];
    const uint16_t *end[EVAL_MAX_COMPLETIONS];
} EvalExample;

typedef struct {
    int num_examples;
    EvalExample *ex;
    uint16_t *stream;  // the file's token stream, which ex points into
} EvalSet;

// the file's header and its token stream into es->stream; returns the stream's length (uint16s),
// and in *longest the header's longest example in bytes (checked against the examples by the caller)
static inline long long evalset_read_stream(EvalSet *es, const char *path, int *longest) {
    FILE *fp;
    long long size;
    char why[512];
    int e = open_regular(path, &fp, &size, why, sizeof(why));
    if (e != 0) { llmc_die("HellaSwag file '%s' %s (-hf); %s", path, e == ENOENT ? "not found" : why, EVAL_HINT); }
    if (size < 1024 || (size - 1024) % 2 != 0) {
        llmc_die("HellaSwag file '%s' is %lld bytes: truncated or not an eval file; %s", path, size, EVAL_HINT);
    }
    int h[256];
    freadCheck(h, sizeof(int), 256, fp);
    if (h[0] != EVAL_MAGIC) { llmc_die("'%s' is not an eval file (magic %d, expected %d); %s", path, h[0], EVAL_MAGIC, EVAL_HINT); }
    if (h[1] != EVAL_VERSION) {
        llmc_die("HellaSwag file '%s' has version %d, this trainer reads version %d; %s", path, h[1], EVAL_VERSION, EVAL_HINT);
    }
    long long n16 = (size - 1024) / 2;
    es->stream = (uint16_t *)mallocCheck((size_t)(n16 > 0 ? n16 : 1) * 2);
    freadCheck(es->stream, 2, (size_t)n16, fp);
    fcloseCheck(fp);
    es->num_examples = h[2];
    *longest = h[3];
    // an example takes at least 9 uint16: start, bytes, index, label, completions, context length,
    // one context token, one completion length and one completion token
    if (es->num_examples <= 0 || es->num_examples > n16 / 9) {
        llmc_die("HellaSwag file '%s' says it holds %d examples, but its %lld bytes hold at most %lld; %s", path, h[2],
                 size, n16 / 9, EVAL_HINT);
    }
    return n16;
}

// example i, which starts at s[*p] (of n16): its fields into e (pointing into s), *p past it
static inline void eval_parse_example(EvalExample *e, const uint16_t *s, long long n16, long long *p, const char *path, int i) {
    #define EVAL_NEED(k) if (*p + (k) > n16) { llmc_die("HellaSwag file '%s' is truncated in example %d; %s", path, i, EVAL_HINT); }
    EVAL_NEED(6);
    long long start = *p;
    if (s[*p] != 65535) { llmc_die("HellaSwag file '%s' is corrupt: example %d does not start with 65535; %s", path, i, EVAL_HINT); }
    int bytes = s[*p + 1];
    if (s[*p + 2] != (uint16_t)i) {  // the writers number the examples 0, 1, 2, ... (a uint16)
        llmc_die("HellaSwag file '%s' is corrupt: example %d has index %d; %s", path, i, s[*p + 2], EVAL_HINT);
    }
    e->label = s[*p + 3];
    e->num_completions = s[*p + 4];
    if (e->num_completions < 1 || e->num_completions > EVAL_MAX_COMPLETIONS || e->label >= e->num_completions) {
        llmc_die("HellaSwag file '%s': example %d has %d completions and label %d; %s", path, i, e->num_completions, e->label, EVAL_HINT);
    }
    e->ctx_len = s[*p + 5];
    if (e->ctx_len == 0) { llmc_die("HellaSwag file '%s': example %d has an empty context; %s", path, i, EVAL_HINT); }
    *p += 6;
    EVAL_NEED(e->ctx_len);
    e->ctx = s + *p;
    *p += e->ctx_len;
    for (int c = 0; c < e->num_completions; c++) {
        EVAL_NEED(1);
        e->end_len[c] = s[(*p)++];
        EVAL_NEED(e->end_len[c]);
        e->end[c] = s + *p;
        *p += e->end_len[c];
        if (e->end_len[c] == 0) { llmc_die("HellaSwag file '%s': example %d has an empty completion", path, i); }
    }
    #undef EVAL_NEED
    if ((*p - start) * 2 != bytes) {
        llmc_die("HellaSwag file '%s' is corrupt: example %d says %d bytes, holds %lld; %s", path, i, bytes, (*p - start) * 2, EVAL_HINT);
    }
}

// every token of example i (its context, then each completion) below the model's vocab size
static inline void eval_check_tokens(const EvalExample *e, int vocab_size, const char *path, int i) {
    for (int c = -1; c < e->num_completions; c++) {
        const uint16_t *tok = c < 0 ? e->ctx : e->end[c];
        for (int k = 0; k < (c < 0 ? e->ctx_len : e->end_len[c]); k++) {
            if (tok[k] >= vocab_size) {
                llmc_die("HellaSwag file '%s': example %d has token id %d, not below the model's vocab size %d",
                         path, i, tok[k], vocab_size);
            }
        }
    }
}

static inline void evalset_load(EvalSet *es, const char *path, int vocab_size) {
    int header_longest;
    long long n16 = evalset_read_stream(es, path, &header_longest);
    es->ex = (EvalExample *)mallocCheck((size_t)es->num_examples * sizeof(EvalExample));
    long long p = 0, longest = 0;
    for (int i = 0; i < es->num_examples; i++) {
        const long long start = p;
        eval_parse_example(&es->ex[i], es->stream, n16, &p, path, i);
        eval_check_tokens(&es->ex[i], vocab_size, path, i);
        if ((p - start) * 2 > longest) { longest = (p - start) * 2; }
    }
    if (p != n16) { llmc_die("HellaSwag file '%s' has %lld bytes after its %d examples (corrupt?)", path, (n16 - p) * 2, es->num_examples); }
    if (longest != header_longest) {
        llmc_die("HellaSwag file '%s' is corrupt: its header says the longest example is %d bytes, the longest is %lld; %s",
                 path, header_longest, longest, EVAL_HINT);
    }
}

static inline void evalset_free(EvalSet *es) {
    free(es->ex);
    free(es->stream);
    memset(es, 0, sizeof(*es));
}

/*
 * Build row `c` of example e for sequence length T: inputs/targets (len each, len <= T) and the
 * positions [*score_from, len) whose losses score the completion. Returns len.
 */
static inline int eval_row(const EvalExample *e, int c, int T, int *inputs, int *targets, int *score_from) {
    int total = e->ctx_len + e->end_len[c];  // tokens in context + completion
    int skip = total - (T + 1) > 0 ? total - (T + 1) : 0;  // cut from the left to fit T+1 tokens
    int len = total - skip - 1;
    for (int t = 0; t < len + 1; t++) {
        int k = t + skip;
        int tok = k < e->ctx_len ? e->ctx[k] : e->end[c][k - e->ctx_len];
        if (t < len) { inputs[t] = tok; }
        if (t > 0) { targets[t - 1] = tok; }
    }
    // the first completion token is predicted at position ctx_len-1 (shifted by the cut)
    int from = e->ctx_len - 1 - skip;
    *score_from = from > 0 ? from : 0;
    return len;
}

// the losses of B rows of T positions, the batch after `examples_done` whole examples of this rank's
// share; returns nonzero where the evaluation is to stop there (a stop signal)
typedef int (*EvalForwardFn)(void *ctx, int examples_done, const int *inputs, const int *targets, int B, int T,
                             float *losses);

// the examples evalset_run evaluates over all ranks: the first `limit`, or all if limit < 0
static inline int evalset_count(const EvalSet *es, int limit) {
    return limit >= 0 && limit < es->num_examples ? limit : es->num_examples;
}

// the rows (example x completion) that evalset_run gives `rank` to score: its examples rank, rank+W, ...
static inline long long evalset_rank_rows(const EvalSet *es, int limit, int rank, int world) {
    const int n = evalset_count(es, limit);
    long long rows = 0;
    for (int i = rank; i < n; i += world) { rows += es->ex[i].num_completions; }
    return rows;
}

/*
 * Evaluate examples rank, rank+W, ... (the first `limit` examples, or all if limit < 0) with
 * batches of up to B rows of at most T positions. Returns the number this rank got right and
 * writes how many it evaluated; -1 where the forward said stop.
 */
static inline int evalset_run(const EvalSet *es, int limit, int rank, int world, int B, int T, EvalForwardFn fwd,
                              void *ctx, int *evaluated) {
    int n = evalset_count(es, limit);
    int mine = n > rank ? (n - rank + world - 1) / world : 0;  // examples rank, rank+W, ... below n
    int *inputs = (int *)mallocCheck((size_t)B * T * sizeof(int));
    int *targets = (int *)mallocCheck((size_t)B * T * sizeof(int));
    float *losses = (float *)mallocCheck((size_t)B * T * sizeof(float));
    int *row_len = (int *)mallocCheck(B * sizeof(int));
    int *row_from = (int *)mallocCheck(B * sizeof(int));
    int *row_ex = (int *)mallocCheck(B * sizeof(int));  // local example index (0 .. mine-1)
    int *row_c = (int *)mallocCheck(B * sizeof(int));   // completion
    float *score = (float *)mallocCheck(((size_t)mine + 1) * EVAL_MAX_COMPLETIONS * sizeof(float));
    // rows are queued example by example; a batch runs when B rows are queued or the examples end
    int next_ex = 0, next_c = 0, stopped = 0;
    while (next_ex < mine && !stopped) {
        int nrows = 0;
        while (next_ex < mine && nrows < B) {
            row_ex[nrows] = next_ex;
            row_c[nrows] = next_c;
            nrows++;
            if (++next_c == es->ex[rank + next_ex * world].num_completions) { next_c = 0; next_ex++; }
        }
        // the batch runs at the length of its longest row
        int Tb = 1;
        for (int r = 0; r < nrows; r++) {
            const EvalExample *e = &es->ex[rank + row_ex[r] * world];
            int len = e->ctx_len + e->end_len[row_c[r]] - 1;
            if (len > Tb) { Tb = len < T ? len : T; }
        }
        for (int r = 0; r < nrows; r++) {
            const EvalExample *e = &es->ex[rank + row_ex[r] * world];
            int *in = inputs + (size_t)r * Tb, *tg = targets + (size_t)r * Tb;
            row_len[r] = eval_row(e, row_c[r], Tb, in, tg, &row_from[r]);
            // pad with the row's last tokens; causal attention keeps padding out of the scored positions
            for (int t = row_len[r]; t < Tb; t++) { in[t] = in[row_len[r] - 1]; tg[t] = tg[row_len[r] - 1]; }
        }
        if (fwd(ctx, row_ex[0], inputs, targets, nrows, Tb, losses)) {
            stopped = 1;
            break;
        }
        for (int r = 0; r < nrows; r++) {
            double sum = 0.0;
            for (int t = row_from[r]; t < row_len[r]; t++) { sum += losses[(size_t)r * Tb + t]; }
            score[(size_t)row_ex[r] * EVAL_MAX_COMPLETIONS + row_c[r]] = (float)(sum / (row_len[r] - row_from[r]));
        }
    }
    int correct = 0;
    for (int li = 0; li < mine && !stopped; li++) {
        const EvalExample *e = &es->ex[rank + li * world];
        const float *sc = score + (size_t)li * EVAL_MAX_COMPLETIONS;
        int best = 0;
        for (int c = 1; c < e->num_completions; c++) {
            if (sc[c] < sc[best]) { best = c; }
        }
        correct += best == e->label;
    }
    free(inputs); free(targets); free(losses); free(row_len); free(row_from); free(row_ex); free(row_c); free(score);
    *evaluated = stopped ? 0 : mine;
    return stopped ? -1 : correct;
}

#endif  // LLMC_HELLASWAG_H
