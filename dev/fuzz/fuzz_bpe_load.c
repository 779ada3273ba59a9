// libFuzzer harness: loading encoder.json and vocab.bpe (llmc/bpe.h, its JSON reader included).
// The input is an encoder.json, the separator line "--8<--", and a vocab.bpe. A pair that loads
// must encode any text losslessly: the input itself, and a fixed text, make the round trip.
#include "fuzz.h"
#include "../../llmc/bpe.h"
#include "bpe_check.h"

static void load_and_encode(void *arg) {
    FuzzBytes *c = (FuzzBytes *)arg;
    BPE b;
    bpe_load(&b, fuzz_path("encoder.json"), fuzz_path("vocab.bpe"));
    BPEWorker w;
    bpe_worker_init(&w, &b);
    static const char text[] = "Hello world! It's 2024: caf\xc3\xa9, \xe6\x97\xa5\xe6\x9c\xac, <|endoftext|>\n\n  \xff\xfe end";
    bpe_check_roundtrip(&w, (const uint8_t *)text, sizeof(text) - 1);
    bpe_check_roundtrip(&w, c->data, c->size);
    bpe_worker_free(&w);
    bpe_free(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    size_t enc_len, merges_len;
    const uint8_t *merges;
    fuzz_split(data, size, &enc_len, &merges, &merges_len);
    fuzz_write("encoder.json", data, enc_len);
    fuzz_write("vocab.bpe", merges, merges_len);
    FuzzBytes c = {data, size};
    if (fuzz_call(load_and_encode, &c)) { fuzz_end(); }
    return 0;
}
