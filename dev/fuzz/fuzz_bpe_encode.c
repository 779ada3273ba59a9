// libFuzzer harness: the BPE encoder (llmc/bpe.h) on arbitrary bytes, with the GPT-2 files of
// $FUZZ_GPT2_DIR: decode(encode(x)) == x for every byte string, every id a real token and never
// EOT. The input is the text.
#include "fuzz.h"
#include "../../llmc/bpe.h"
#include "bpe_check.h"

static BPEWorker worker;

static void encode(void *arg) {
    FuzzBytes *t = (FuzzBytes *)arg;
    bpe_check_roundtrip(&worker, t->data, t->size);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (worker.bpe == NULL) { bpe_worker_shared(&worker); }
    FuzzBytes t = {data, size};
    if (fuzz_call(encode, &t)) {
        fuzz_end();
    } else {
        fuzz_fail("the encoder rejected a text: it must take any bytes");
    }
    return 0;
}
