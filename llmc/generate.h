/*
 * Sampling and generation, shared by both trainers: the training loop's periodic samples (-s)
 * and the generate mode (--prompt TEXT -g N), which encodes a prompt with the GPT-2 encoder
 * (llmc/bpe.h, needs PCRE2), continues it and exits.
 *
 * A token is drawn from the model's softmax probabilities p (backend forward_probs):
 *   temperature 0    the most likely token (the lowest id on ties): greedy decoding;
 *   temperature t    weights p_i^(1/t), i.e. softmax(logits / t);
 *   top-k k > 0      only the k largest weights stay (ties at the k-th: the lowest ids);
 * then one uniform number (xorshift64*, seeded by -rs, checkpointed with the run) walks the
 * cumulative weights. With temperature 1 and no top-k the walk is over p itself, unchanged from
 * before these options existed, so earlier runs' samples stay bit for bit the same.
 */
#ifndef LLMC_GENERATE_H
#define LLMC_GENERATE_H

#include <signal.h>
#include "args.h"
#include "backend.h"
#include "tokenizer.h"
#ifdef USE_PCRE2
#include "bpe.h"
#endif

#define GPT2_EOT 50256

// the sampling RNG's first state for seed -rs (xorshift64* must not start at 0); train_gpt2.py's twin
static inline unsigned long long sample_rng_seed(unsigned long long seed) {
    unsigned long long state = seed ^ 0x5DEECE66DULL;
    return state ? state : 1;
}

// xorshift64*: the sampling RNG; its state is checkpointed
static inline float sample_random_f32(unsigned long long *state) {
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    return (float)((*state * 0x2545F4914F6CDD1DULL) >> 40) / 16777216.0f;
}

// the first i with coin < w[0] + ... + w[i]. Where rounding leaves the whole sum a hair below the
// coin (a float sum of 50257 probabilities is 1 only to about 1e-5): the last i with w[i] > 0, never
// a token of weight 0 (one cut by top-k, or the last of the vocabulary whatever its probability)
static inline int sample_from_weights(const float *w, int n, float coin) {
    float cdf = 0.0f;
    int last = 0;
    for (int i = 0; i < n; i++) {
        cdf += w[i];
        if (coin < cdf) { return i; }
        if (w[i] > 0.0f) { last = i; }
    }
    return last;
}

// the k-th largest of v[0..n) (1 <= k <= n); reorders v (Hoare selection)
static inline float kth_largest(float *v, int n, int k) {
    int lo = 0, hi = n - 1, want = k - 1;
    while (lo < hi) {
        float pivot = v[lo + (hi - lo) / 2];
        int i = lo, j = hi;
        while (i <= j) {
            while (v[i] > pivot) { i++; }
            while (v[j] < pivot) { j--; }
            if (i <= j) { float t = v[i]; v[i] = v[j]; v[j] = t; i++; j--; }
        }
        if (want <= j) { hi = j; } else if (want >= i) { lo = i; } else { break; }
    }
    return v[want];
}

/*
 * One token from the probabilities of n tokens (see the top comment). scratch: 2n floats.
 */
static inline int sample_token(const float *probs, int n, float temperature, int top_k, float coin, float *scratch) {
    if (temperature == 0.0f) {
        int best = 0;
        for (int i = 1; i < n; i++) { if (probs[i] > probs[best]) { best = i; } }
        return best;
    }
    if (temperature == 1.0f && (top_k <= 0 || top_k >= n)) { return sample_from_weights(probs, n, coin); }
    float *w = scratch, *sorted = scratch + n;
    for (int i = 0; i < n; i++) { w[i] = temperature == 1.0f ? probs[i] : powf(probs[i], 1.0f / temperature); }
    if (top_k > 0 && top_k < n) {
        memcpy(sorted, w, (size_t)n * sizeof(float));
        float thr = kth_largest(sorted, n, top_k);
        int above = 0;
        for (int i = 0; i < n; i++) { above += w[i] > thr; }
        int ties_left = top_k - above;  // how many tokens equal to the threshold stay
        for (int i = 0; i < n; i++) {
            if (w[i] < thr || (w[i] == thr && ties_left-- <= 0)) { w[i] = 0.0f; }
        }
    }
    double total = 0.0;
    for (int i = 0; i < n; i++) { total += w[i]; }
    if (!(total > 0.0)) {  // every kept weight underflowed (a very low temperature): greedy
        return sample_token(probs, n, 0.0f, 0, coin, scratch);
    }
    return sample_from_weights(w, n, (float)(coin * total));
}

// the training loop's sample: -g tokens after EOT, printed through the decode table (-tk). A stop
// signal (*stop set) ends it at the next token, as a long sample could outlast a launcher's grace
// before SIGKILL; the coins it would have drawn are drawn still, so that the RNG checkpointed after
// the step is the uninterrupted run's. Returns 0 where it was cut short.
static inline int train_sample(const TrainArgs *a, Backend *b, Tokenizer *tok, unsigned long long *rng, int *tokens,
                               float *probs, float *scratch, const volatile sig_atomic_t *stop) {
    int V = b->config.vocab_size;
    int n = a->gen_tokens < a->T ? a->gen_tokens : a->T;
    tokens[0] = GPT2_EOT < V ? GPT2_EOT : 0;
    printf("generating:\n---\n");
    for (int t = 1; t <= n; t++) {
        if (*stop) {
            for (; t <= n; t++) { sample_random_f32(rng); }
            printf("\n---\nsample cut short by a stop signal\n");
            fflush(stdout);
            return 0;
        }
        b->forward_probs(b, tokens, t, t - 1, t - 1, probs);  // tokens[0, t-1) as in the previous call
        int next = sample_token(probs, V, a->temperature, a->top_k, sample_random_f32(rng), scratch);
        if (t < a->T) { tokens[t] = next; }
        if (tok->init_ok) { safe_printf(tokenizer_decode(tok, (uint32_t)next)); } else { printf("%d ", next); }
        fflush(stdout);
    }
    printf("\n---\n");
    return 1;
}

#ifdef USE_PCRE2
// GPT-2's encoder from --bpe-dir, its two files checked here to name the flag (bpe_load reads them)
static inline void generate_load_bpe(BPE *bpe, const char *bpe_dir) {
    char enc_path[4096], merges_path[4096];
    snprintf(enc_path, sizeof(enc_path), "%s/encoder.json", bpe_dir);
    snprintf(merges_path, sizeof(merges_path), "%s/vocab.bpe", bpe_dir);
    const char *paths[2] = {enc_path, merges_path};
    for (int i = 0; i < 2; i++) {
        FILE *f;
        char why[512];
        if (open_regular(paths[i], &f, NULL, why, sizeof(why)) != 0) {
            llmc_die("--prompt needs GPT-2's encoder.json and vocab.bpe in --bpe-dir '%s', but '%s' %s; unpack the "
                     "copies this project ships with: bash dev/data/tinyshakespeare.sh, or pass --bpe-dir <dir>",
                     bpe_dir, paths[i], why);
        }
        fclose(f);
    }
    bpe_load(bpe, enc_path, merges_path);
}

// --prompt encoded; every token must be one of the model's V (a model wider than the encoder
// cannot be decoded as text)
static inline void generate_encode_prompt(TokVec *prompt, BPE *bpe, const TrainArgs *a, int V, int Tctx) {
    if (V > bpe->vocab_size) {
        llmc_die("the model (-e %s) has %d tokens, more than the GPT-2 encoder's %d: it cannot be decoded as text", a->model,
                 V, bpe->vocab_size);
    }
    BPEWorker w;
    bpe_worker_init(&w, bpe);
    bpe_encode(&w, a->prompt, strlen(a->prompt), prompt);
    bpe_worker_free(&w);
    for (size_t i = 0; i < prompt->n; i++) {
        if ((int)prompt->data[i] >= V) {
            llmc_die("--prompt encodes to token %u, but the model (-e %s) has only %d tokens", prompt->data[i], a->model, V);
        }
    }
    if (prompt->n > (size_t)Tctx) {
        llmc_warn("the prompt is %zu tokens; the model sees only the last %d (-t / the model's maxT)", prompt->n, Tctx);
    }
}
#endif

/*
 * The generate mode: encode --prompt, draw -g tokens, print the prompt and the continuation on
 * stdout (nothing else goes there) and return 0. The context is the last b->T tokens (the
 * trainer builds the model for min(-t, maxT)); the model's own file is the only input.
 */
static inline int generate_run(const TrainArgs *a, Backend *b) {
#ifndef USE_PCRE2
    (void)b;
    llmc_die("--prompt needs the GPT-2 encoder, and this binary was built without PCRE2: apt-get install libpcre2-dev, "
             "then rebuild (make clean && make)");
    return 1;
#else
    if (a->resume || a->output_dir[0]) {  // a user's guess that -y 1 -o <run> generates from its checkpoint
        llmc_warn("--prompt generates from -e's model (%s); -y and -o are training's and are not read: to generate "
                  "from a checkpoint, pass -e <dir>/model_<step>.bin", a->model);
    }
    BPE bpe;
    generate_load_bpe(&bpe, a->bpe_dir);
    const int V = b->config.vocab_size, Tctx = b->T;
    TokVec prompt = {0};
    generate_encode_prompt(&prompt, &bpe, a, V, Tctx);
    const size_t total = prompt.n + (size_t)a->gen_tokens;
    int *tokens = (int *)mallocCheck(total * sizeof(int));
    for (size_t i = 0; i < prompt.n; i++) { tokens[i] = (int)prompt.data[i]; }
    float *probs = (float *)mallocCheck((size_t)V * sizeof(float));
    float *scratch = (float *)mallocCheck(2 * (size_t)V * sizeof(float));
    unsigned long long rng = sample_rng_seed(a->seed);
    fwrite(a->prompt, 1, strlen(a->prompt), stdout);
    fflush(stdout);
    for (size_t n = prompt.n; n < total; n++) {
        size_t len = n < (size_t)Tctx ? n : (size_t)Tctx;  // the window: the last Tctx tokens
        // the previous call's tokens lead this one's until the window starts to slide
        const int cached = n > prompt.n && n <= (size_t)Tctx ? (int)n - 1 : 0;
        b->forward_probs(b, tokens + (n - len), (int)len, (int)len - 1, cached, probs);
        int next = sample_token(probs, V, a->temperature, a->top_k, sample_random_f32(&rng), scratch);
        tokens[n] = next;
        size_t nb;
        const unsigned char *bytes = bpe_token_bytes(&bpe, (uint32_t)next, &nb);
        fwrite(bytes, 1, nb, stdout);
        fflush(stdout);
    }
    printf("\n");
    free(tokens); free(probs); free(scratch);
    tokvec_free(&prompt);
    bpe_free(&bpe);
    return 0;
#endif
}

#endif  // LLMC_GENERATE_H
