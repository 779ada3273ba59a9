// libFuzzer harness: token shards (llmc/dataloader.h). The input is one shard file; the reader
// opens it, and every window the stream holds is read with and without shuffling. The windows'
// token ids must all be below the vocabulary the loader was given.
#include "fuzz.h"
#include "../../llmc/dataloader.h"

typedef struct {
    const char *path;
    int T, vocab, shuffle;
} ShardCase;

static void read_shard(void *arg) {
    ShardCase *c = (ShardCase *)arg;
    DataLoader dl;
    dataloader_init(&dl, c->path, "-i", c->T, c->vocab, c->shuffle, 1337);
    dataloader_require(&dl, 1, "-i", "this test");
    int inputs[8 * 16], targets[8 * 16];
    long long n = dl.total_windows * 2 < 64 ? dl.total_windows * 2 : 64;  // into the second epoch
    for (long long w = 0; w + 8 <= n; w += 8) {
        dataloader_read(&dl, w, 8, inputs, targets);
        for (int i = 0; i < 8 * c->T; i++) {
            if (inputs[i] < 0 || inputs[i] >= c->vocab || targets[i] < 0 || targets[i] >= c->vocab) {
                fuzz_fail("window %lld holds token %d / %d, outside the vocabulary %d", w, inputs[i], targets[i], c->vocab);
            }
        }
    }
    dataloader_free(&dl);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ShardCase c;
    c.path = fuzz_write("shard.bin", data, size);
    c.T = 1 + (int)(size % 16);              // window length from the size: cheap variety
    c.vocab = size % 3 == 0 ? 512 : 50257;
    c.shuffle = (size / 3) % 2;
    if (fuzz_call(read_shard, &c)) { fuzz_end(); }
    return 0;
}
