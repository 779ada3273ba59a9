// libFuzzer harness: the tokenizer decode table gpt2_tokenizer.bin (llmc/tokenizer.h). The input
// is a table file; an accepted table is decoded for every id (and one past the end).
#include "fuzz.h"
#include "../../llmc/tokenizer.h"

static void load_table(void *arg) {
    Tokenizer t;
    tokenizer_init(&t, (const char *)arg, "-tk");
    if (!t.init_ok) { fuzz_fail("an existing table file was not loaded"); }
    if (t.eot_token < 0 || (uint32_t)t.eot_token >= t.vocab_size) { fuzz_fail("EOT %d outside the table", t.eot_token); }
    for (uint32_t i = 0; i < t.vocab_size; i++) {
        const char *s = tokenizer_decode(&t, i);
        if (s == NULL || strlen(s) > t.token_length[i]) { fuzz_fail("token %u does not decode to its bytes", i); }
    }
    if (tokenizer_decode(&t, t.vocab_size) != NULL) { fuzz_fail("an id past the table decodes"); }
    tokenizer_free(&t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_write("tokenizer.bin", data, size);
    if (fuzz_call(load_table, (void *)path)) { fuzz_end(); }
    return 0;
}
