// Shared by the BPE harnesses: encode, check the ids, decode and compare with the input.
#ifndef LLMC_FUZZ_BPE_CHECK_H
#define LLMC_FUZZ_BPE_CHECK_H

// decode(encode(text)) must give back text byte for byte; every id a real token, never EOT
static void bpe_check_roundtrip(BPEWorker *w, const uint8_t *text, size_t n) {
    const BPE *b = w->bpe;
    TokVec toks = {0};
    bpe_encode(w, text, n, &toks);
    if (toks.n > n) { fuzz_fail("%zu bytes gave %zu tokens", n, toks.n); }
    size_t pos = 0;
    for (size_t i = 0; i < toks.n; i++) {
        uint32_t id = toks.data[i];
        if (id >= (uint32_t)b->vocab_size || (int)id == b->eot_token) { fuzz_fail("token %zu is id %u", i, id); }
        size_t len;
        const unsigned char *bytes = bpe_token_bytes(b, id, &len);
        if (len == 0 || pos + len > n || memcmp(bytes, text + pos, len) != 0) {
            fuzz_fail("decode(encode(x)) != x: token %zu (id %u) does not match the input at byte %zu", i, id, pos);
        }
        pos += len;
    }
    if (pos != n) { fuzz_fail("decode(encode(x)) has %zu of %zu bytes", pos, n); }
    tokvec_free(&toks);
}

// the BPE of the GPT-2 files in $FUZZ_GPT2_DIR (encoder.json, vocab.bpe), loaded once
static BPE *bpe_shared(void) {
    static BPE b;
    static int loaded = 0;
    if (!loaded) {
        const char *dir = getenv("FUZZ_GPT2_DIR");
        if (dir == NULL) { fuzz_fail("set FUZZ_GPT2_DIR to a folder with encoder.json and vocab.bpe"); }
        char enc[1024], merges[1024];
        snprintf(enc, sizeof(enc), "%s/encoder.json", dir);
        snprintf(merges, sizeof(merges), "%s/vocab.bpe", dir);
        bpe_load(&b, enc, merges);
        loaded = 1;
    }
    return &b;
}

// a worker of bpe_shared() whose scratch already fits the longest input (FUZZ_MAX_LEN, the
// harness's -max_len), so that inputs never grow it: a rejected input's allocations are released,
// and the worker outlives the input
#define FUZZ_MAX_LEN 65536
static void bpe_worker_shared(BPEWorker *w) {
    bpe_worker_init(w, bpe_shared());
    uint8_t *word = (uint8_t *)malloc(FUZZ_MAX_LEN);
    memset(word, 'a', FUZZ_MAX_LEN);  // one pre-token of FUZZ_MAX_LEN bytes
    TokVec toks = {0};
    bpe_encode(w, word, FUZZ_MAX_LEN, &toks);
    tokvec_free(&toks);
    free(word);
}

#endif
