// libFuzzer harness: the input formats of gpt2_tokenize (dev/data/gpt2_tokenize.c), built with
// small work items and read windows so that short inputs cross many cut points and refills.
// The first byte of the input picks the format, the rest is the input file:
//   0 doc: the file is one document; 1 sep: documents separated by <|endoftext|> lines;
//   2 jsonl: one {"text": ...} per line; 3 HellaSwag jsonl (-H), made into an eval file that
//   llmc/hellaswag.h must then read back; 4 a token shard decoded to text (-d) with GPT-2's decode
//   table, whose output must be the bytes of its tokens.
// The tokenizer is GPT-2's, from $FUZZ_GPT2_DIR.
// For 0-2, the items the reader emits are encoded one by one, as the tool does; for every document
// their tokens must equal the tokens of the whole document (a cut never changes the tokens), and
// in doc format the document must be the file, byte for byte.
#include "fuzz.h"
#define ITEM_TARGET 48
#define READ_WINDOW 200
#define main gpt2_tokenize_main
#include "../data/gpt2_tokenize.c"
#undef main
#include "../../llmc/hellaswag.h"
#include "bpe_check.h"

static BPEWorker worker;

typedef struct {
    Format fmt;
    char path[600];  // (fuzz_path's buffer is reused by the next call)
    const uint8_t *file;
    size_t file_len;
} InputCase;

// tokens of a document encoded whole must equal the tokens of its items
static void check_document(const ByteBuf *doc, const TokVec *item_toks) {
    TokVec whole = {0};
    bpe_encode(&worker, doc->data, doc->n, &whole);
    if (whole.n != item_toks->n || (whole.n && memcmp(whole.data, item_toks->data, whole.n * sizeof(uint32_t)) != 0)) {
        fuzz_fail("a document of %zu bytes encodes to %zu tokens whole but %zu as cut into items", doc->n, whole.n,
                  item_toks->n);
    }
    tokvec_free(&whole);
}

static void read_documents(void *arg) {
    InputCase *c = (InputCase *)arg;
    char *paths[1] = {(char *)c->path};
    Source src;
    source_init(&src, c->fmt, paths, 1, 4096);  // 4 KiB without a cut point (or a longer JSON line) is an error
    Batch batch = {0};
    batch.cap = 1;
    batch.items = (Item *)callocCheck(1, sizeof(Item));
    ByteBuf doc = {0};
    TokVec toks = {0};
    long long docs = 0;
    for (;;) {
        batch.n = 0;
        batch.arena.n = 0;
        int more = source_next(&src, &batch);
        if (!more || batch.items[0].doc_start) {  // the previous document is complete
            if (docs > 0) { check_document(&doc, &toks); }
            doc.n = 0;
            toks.n = 0;
        }
        if (!more) { break; }
        const Item *it = &batch.items[0];
        if (it->len == 0) { fuzz_fail("an empty item"); }
        docs += it->doc_start;
        bytebuf_put(&doc, batch.arena.data + it->off, it->len);
        bpe_encode(&worker, batch.arena.data + it->off, it->len, &toks);
    }
    if (docs != src.docs) { fuzz_fail("%lld documents seen, the reader counts %lld", docs, src.docs); }
    if (c->fmt == FMT_DOC && docs > 1) { fuzz_fail("a doc-format file made %lld documents", docs); }
    free(src.buf);
    bytebuf_free(&src.doc);
    bytebuf_free(&doc);
    tokvec_free(&toks);
    bytebuf_free(&batch.arena);
    free(batch.items);
}

static void hellaswag_roundtrip(void *arg) {
    InputCase *c = (InputCase *)arg;
    Args a;
    args_defaults(&a);
    char out[600];
    snprintf(out, sizeof(out), "%s", fuzz_path("hellaswag.bin"));
    a.hellaswag = c->path;
    a.output = out;
    a.max_span = 1 << 20;
    hellaswag_convert(&a, &worker);
    // what the tool writes, the trainer reads (ids below the tokenizer's vocabulary)
    EvalSet es;
    evalset_load(&es, out, worker.bpe->vocab_size);
    evalset_free(&es);
}

// -d: what it writes must be the table's bytes of the shard's tokens (the file was accepted, so its
// header is right: 1024 bytes, then the tokens)
static char decode_table[600];
static void decode_shard(void *arg) {
    InputCase *c = (InputCase *)arg;
    Args a;
    args_defaults(&a);
    char out[600];
    snprintf(out, sizeof(out), "%s", fuzz_path("decoded.txt"));
    a.decode = 1;
    a.input = c->path;
    a.table_in = decode_table;
    a.output = out;
    mode_decode(&a);
    FILE *f = fopen(out, "rb");
    size_t pos = 0;
    for (size_t i = 1024; i + 2 <= c->file_len; i += 2) {
        uint16_t id;
        memcpy(&id, c->file + i, 2);
        size_t len;
        const unsigned char *want = bpe_token_bytes(worker.bpe, id, &len);
        unsigned char got[256];
        if (fread(got, 1, len, f) != len || memcmp(got, want, len) != 0) { fuzz_fail("-d: token %zu decodes wrong", (i - 1024) / 2); }
        pos += len;
    }
    if (fgetc(f) != EOF) { fuzz_fail("-d wrote more than the tokens' %zu bytes", pos); }
    fclose(f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) { return 0; }
    if (worker.bpe == NULL) {
        bpe_worker_shared(&worker);
        const BPE *b = worker.bpe;  // the decode table of -d: GPT-2's, made once
        const unsigned char **toks = (const unsigned char **)malloc((size_t)b->vocab_size * sizeof(*toks));
        size_t len;
        for (int i = 0; i < b->vocab_size; i++) { toks[i] = bpe_token_bytes(b, (uint32_t)i, &len); }
        snprintf(decode_table, sizeof(decode_table), "%s", fuzz_path("gpt2_table.bin"));
        tokenizer_write(decode_table, "-w", (uint32_t)b->vocab_size, (uint32_t)b->eot_token, toks, b->tok_len);
        free(toks);
    }
    InputCase c;
    int kind = data[0] % 5;
    c.fmt = (Format)(kind < 3 ? kind : 0);
    snprintf(c.path, sizeof(c.path), "%s", fuzz_write("input.txt", data + 1, size - 1));
    c.file = data + 1;
    c.file_len = size - 1;
    if (fuzz_call(kind == 3 ? hellaswag_roundtrip : kind == 4 ? decode_shard : read_documents, &c)) { fuzz_end(); }
    return 0;
}
