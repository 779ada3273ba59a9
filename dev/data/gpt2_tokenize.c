/*
 * gpt2_tokenize: GPT-2 tokenizer and dataset preparer, C end to end (llm.c file formats).
 * Built by `make gpt2_tokenize` into the repo root; the recipes in dev/data (shell) drive it.
 *
 * Modes (usage() lists every flag and default):
 *   encode    -i input.txt -o out.bin               one token shard, exactly the tokens of the input
 *             [-f 0.9 -O val.bin]                   ... split by characters first (nanoGPT's 90/10)
 *   prepare   -p PREFIX [-x doc|sep|jsonl] inputs   EOT before each document, shards of -S tokens
 *   decode    -d -t gpt2_tokenizer.bin -i out.bin -o text.txt
 *   table     -w gpt2_tokenizer.bin                 the decode table the trainers load
 *   hellaswag -H hellaswag_val.jsonl -o hellaswag_val.bin   llm.c's eval file (magic 20240522)
 *
 * Streaming: input is read in 4 MiB windows and cut into items of about 256 KiB at points where
 * GPT-2's pre-tokenizer is known to start a new piece whatever comes before (is_safe_cut), so a
 * cut never changes the tokens. A batch of items (about 4 MiB per thread) is encoded in parallel
 * (OpenMP, one BPEWorker per thread) while the previous batch is written out in order and the next
 * one read. Memory stays bounded by the two batches and by -b, the longest stretch of text
 * without a cut point (or the longest JSON line).
 *
 * Token shard: 256 int32 header (magic 20240520, version 1, token count), then uint16 tokens.
 */
#include <dirent.h>
#include <getopt.h>
#include <stdint.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include "../../llmc/utils.h"
#include "../../llmc/bpe.h"
#include "../../llmc/tokenizer.h"
#include "../../llmc/dataloader.h"  // the shard format the trainers read (SHARD_MAGIC, SHARD_VERSION)
#include "../../llmc/hellaswag.h"   // the eval file format (EVAL_MAGIC, EVAL_VERSION)
// the sizes that streaming works in; dev/fuzz/fuzz_tokenize.c builds this file with small ones so
// that short inputs cross many cut points and window refills
#ifndef ITEM_TARGET
#define ITEM_TARGET (256 * 1024)  // bytes of text per work item: small enough to balance threads
#endif
#ifndef READ_WINDOW
#define READ_WINDOW (4 << 20)     // bytes read from an input at a time
#endif
static const char EOT_TEXT[] = "<|endoftext|>";
#define EOT_TEXT_LEN 13

// ----------------------------------------------------------------------------
// defaults, in one place

typedef struct {
    const char *encoder;     // -e
    const char *merges;      // -m
    const char *input;       // -i
    const char *output;      // -o
    const char *val_output;  // -O
    double split;            // -f: fraction of characters for -o (0 = no split)
    int decode;              // -d
    const char *table_in;    // -t
    const char *table_out;   // -w
    const char *prefix;      // -p
    const char *format;      // -x
    long long shard_tokens;  // -S
    int val_shards;          // -V
    const char *hellaswag;   // -H
    int threads;             // -n (0 = all cores)
    long long max_span;      // -b, in bytes
} Args;

static void args_defaults(Args *a) {
    memset(a, 0, sizeof(*a));
    a->table_in = "gpt2_tokenizer.bin";
    a->format = "doc";
    a->shard_tokens = 100000000;  // llm.c's FineWeb shards
    a->max_span = 64LL << 20;
}

static void usage(FILE *f) {
    fprintf(f,
"usage:\n"
"  gpt2_tokenize -e encoder.json -m vocab.bpe -i input.txt -o out.bin [-f 0.9 -O val.bin]\n"
"  gpt2_tokenize -e encoder.json -m vocab.bpe -p PREFIX [-x doc|sep|jsonl] [-S N] [-V N] input...\n"
"  gpt2_tokenize -d [-t gpt2_tokenizer.bin] -i out.bin -o text.txt\n"
"  gpt2_tokenize -e encoder.json -m vocab.bpe -w gpt2_tokenizer.bin\n"
"  gpt2_tokenize -e encoder.json -m vocab.bpe -H hellaswag_val.jsonl -o hellaswag_val.bin\n"
"\n"
"  -e FILE  GPT-2 encoder.json (OpenAI's, https://openaipublic.blob.core.windows.net/gpt-2/encodings/main/)\n"
"  -m FILE  GPT-2 vocab.bpe (same place)\n"
"  -i FILE  input: text to encode, or a token shard to decode ('-' = stdin when encoding)\n"
"  -o FILE  output file (its folder must exist)\n"
"  -f FRAC  encode mode: split the input by characters; the first FRAC go to -o, the rest to -O\n"
"  -O FILE  encode mode with -f: the shard for the rest (the validation split)\n"
"  -d       decode a token shard to text (needs only -t)\n"
"  -t FILE  tokenizer decode table for -d (default gpt2_tokenizer.bin)\n"
"  -w FILE  write the tokenizer decode table (llm.c format, magic 20240328, version 2)\n"
"  -p PREFIX  prepare mode: EOT (50256) before each document; shards PREFIX_000000.bin, ...\n"
"             (with -V: PREFIX_val_000000.bin then PREFIX_train_000001.bin, ..., as llm.c's FineWeb)\n"
"  -x FMT   prepare-mode input format (default doc):\n"
"             doc    each input file is one document, byte for byte\n"
"             sep    documents are separated by a line holding only <|endoftext|>; the line break\n"
"                    before that line and one line break at the end of the file are not part of a document\n"
"             jsonl  one JSON object per line; the document is its \"text\" field (FineWeb rows)\n"
"  -S N     prepare mode: tokens per shard (default 100000000; suffixes K and M allowed)\n"
"  -V N     prepare mode: the first N shards are validation shards (default 0 = no split)\n"
"  -H FILE  HellaSwag jsonl (ctx, label, endings) to llm.c's eval file (magic 20240522)\n"
"  -n N     threads (default: all cores)\n"
"  -b MiB   longest stretch of text without a safe cut point, or longest JSON line (default 64)\n"
"  -h       this help\n"
"\n"
"Text is encoded as ordinary text: \"<|endoftext|>\" inside a document is not the EOT token.\n"
"Bytes that are not valid UTF-8 each become their single-byte token (lossless; a warning counts them).\n");
}

// a bad flag or value: one line naming it (the usage is -h's)
static void bad_flag(const char *fmt, ...) LLMC_PRINTF(1, 2) LLMC_NORETURN;
static void bad_flag(const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    llmc_die("%s (see -h)", msg);
}

// ----------------------------------------------------------------------------
// output files: partly written files are removed if we die

#define MAX_OPEN_OUTPUTS 4
static AtomicFile *open_outputs[MAX_OPEN_OUTPUTS];
static void (*next_abort_hook)(void);  // the hook main found set (a fuzz harness's), run after ours

// the shards a run of several (prepare, or -o with -O) completed: a run that fails removes them too,
// so that it leaves nothing (its first shards would otherwise look like a whole dataset to the
// trainer's glob). done_outputs_begin at the start of such a run, done_outputs_end after it.
static char **done_outputs;
static int num_done_outputs;

static void done_outputs_begin(void) {  // (a fuzz harness may have released an earlier run's list)
    done_outputs = NULL;
    num_done_outputs = 0;
}

static void done_outputs_end(void) {
    for (int i = 0; i < num_done_outputs; i++) { free(done_outputs[i]); }
    free(done_outputs);
    done_outputs_begin();
}

static void done_outputs_add(const char *path) {
    if ((num_done_outputs & (num_done_outputs - 1)) == 0) {  // 0, 1, 2, 4, ...: room for twice as many
        char **grown = (char **)mallocCheck((size_t)(2 * num_done_outputs + 1) * sizeof(char *));
        if (num_done_outputs > 0) { memcpy(grown, done_outputs, (size_t)num_done_outputs * sizeof(char *)); }
        free(done_outputs);
        done_outputs = grown;
    }
    const size_t len = strlen(path) + 1;
    done_outputs[num_done_outputs] = (char *)mallocCheck(len);
    memcpy(done_outputs[num_done_outputs++], path, len);
}

static void remove_partial_outputs(void) {
    for (int i = 0; i < MAX_OPEN_OUTPUTS; i++) {
        if (open_outputs[i] && open_outputs[i]->fp) {
            fclose(open_outputs[i]->fp);
            open_outputs[i]->fp = NULL;
            unlink(open_outputs[i]->tmp_path);
        }
        open_outputs[i] = NULL;
    }
    for (int i = 0; i < num_done_outputs; i++) { unlink(done_outputs[i]); }
    if (next_abort_hook) { next_abort_hook(); }
}

// flag: the flag that named the output (-o, -O, -p, -w), for messages
static void output_open(AtomicFile *af, const char *path, const char *flag) {
    atomic_open_for(af, path, flag);
    for (int i = 0; i < MAX_OPEN_OUTPUTS; i++) {
        if (open_outputs[i] == NULL) { open_outputs[i] = af; return; }
    }
    llmc_die("internal error: too many open outputs");
}

static void output_commit(AtomicFile *af) {
    atomic_commit(af);
    for (int i = 0; i < MAX_OPEN_OUTPUTS; i++) {
        if (open_outputs[i] == af) { open_outputs[i] = NULL; }
    }
}

// whether paths a and b name the same file: the same inode where both exist, else the same name in
// the same folder (an output not yet written)
static int same_file(const char *a, const char *b) {
    struct stat sa, sb;
    if (stat(a, &sa) == 0 && stat(b, &sb) == 0) { return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino; }
    const char *na = strrchr(a, '/'), *nb = strrchr(b, '/');
    na = na ? na + 1 : a;
    nb = nb ? nb + 1 : b;
    if (strcmp(na, nb) != 0) { return 0; }
    char da[4096], db[4096];
    snprintf(da, sizeof(da), "%.*s", na == a ? 1 : (int)(na - a), na == a ? "." : a);
    snprintf(db, sizeof(db), "%.*s", nb == b ? 1 : (int)(nb - b), nb == b ? "." : b);
    return stat(da, &sa) == 0 && stat(db, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

// an output (out, named by out_flag) must be none of the files the run reads or writes besides it:
// others[] alternates path and flag, a NULL path skipped
static void check_distinct(const char *out, const char *out_flag, const char *const *others, int n) {
    for (int i = 0; i < n; i += 2) {
        if (others[i] != NULL && strcmp(others[i], "-") != 0 && same_file(out, others[i])) {
            llmc_die("%s %s is the same file as %s %s: writing it would destroy that; choose another %s", out_flag, out,
                     others[i + 1], others[i], out_flag);
        }
    }
}

// the folder of an output path must exist: we do not guess where data should go
static void check_output_dir(const char *path, const char *flag) {
    char dir[4096];
    if (strlen(path) >= sizeof(dir)) { llmc_die("%s: path too long: %s", flag, path); }
    strcpy(dir, path);
    char *slash = strrchr(dir, '/');
    if (slash == NULL) { return; }
    if (slash == dir) { return; }
    *slash = '\0';
    if (!dir_exists(dir)) {
        llmc_die("%s %s: output folder '%s' does not exist (create it first: mkdir -p %s)", flag, path, dir, dir);
    }
}

// token shards: header, then uint16 tokens; the count is patched in when the shard is closed
typedef struct {
    // naming: a fixed path, or PREFIX_%06d / PREFIX_{val,train}_%06d
    const char *path;
    const char *prefix;
    const char *flag;        // the flag that named path or prefix
    long long shard_tokens;  // tokens per shard (prefix mode)
    int val_shards;          // the first val_shards shards are named _val_
    int index;               // current shard
    AtomicFile af;
    int is_open;
    long long in_shard;      // tokens in the current shard
    long long total;         // tokens written in all shards
    int shards_done;
    uint16_t buf[32768];
    size_t nbuf;
    char name[4200];
} ShardWriter;

static void shard_name(ShardWriter *w, char *out, size_t n) {
    if (w->path) { snprintf(out, n, "%s", w->path); return; }
    if (w->val_shards > 0) {
        snprintf(out, n, "%s_%s_%06d.bin", w->prefix, w->index < w->val_shards ? "val" : "train", w->index);
    } else {
        snprintf(out, n, "%s_%06d.bin", w->prefix, w->index);
    }
}

static void shard_flush(ShardWriter *w) {
    atomic_write(&w->af, w->buf, w->nbuf * sizeof(uint16_t), 0);
    w->nbuf = 0;
}

static void shard_writer_open(ShardWriter *w) {
    shard_name(w, w->name, sizeof(w->name));
    output_open(&w->af, w->name, w->flag);
    int32_t header[256];
    memset(header, 0, sizeof(header));
    header[0] = SHARD_MAGIC;
    header[1] = SHARD_VERSION;
    atomic_write(&w->af, header, sizeof(header), 0);
    w->is_open = 1;
    w->in_shard = 0;
}

static void shard_close(ShardWriter *w) {
    shard_flush(w);
    int32_t count = (int32_t)w->in_shard;
    atomic_patch(&w->af, 2 * (long)sizeof(int32_t), &count, sizeof(count));
    output_commit(&w->af);
    done_outputs_add(w->name);
    printf("wrote %s: %lld tokens\n", w->name, w->in_shard);
    fflush(stdout);
    w->is_open = 0;
    w->shards_done++;
    w->index++;
}

static void shard_put(ShardWriter *w, const uint32_t *toks, size_t n) {
    const size_t cap = sizeof(w->buf) / sizeof(w->buf[0]);
    while (n > 0) {
        if (!w->is_open) { shard_writer_open(w); }
        if (w->path && w->in_shard + (long long)n > INT32_MAX) {
            llmc_die("%s: more than %d tokens do not fit one shard (its header holds an int32 count); "
                     "use prepare mode (-p) to write several shards", w->path, INT32_MAX);
        }
        size_t k = cap - w->nbuf;  // a run that fits the buffer and the current shard
        if (k > n) { k = n; }
        if (w->path == NULL && (long long)k > w->shard_tokens - w->in_shard) { k = (size_t)(w->shard_tokens - w->in_shard); }
        for (size_t i = 0; i < k; i++) { w->buf[w->nbuf + i] = (uint16_t)toks[i]; }
        w->nbuf += k;
        w->in_shard += (long long)k;
        w->total += (long long)k;
        toks += k;
        n -= k;
        if (w->nbuf == cap) { shard_flush(w); }
        if (w->path == NULL && w->in_shard == w->shard_tokens) { shard_close(w); }
    }
}

// ----------------------------------------------------------------------------
// input: work items cut at safe points

typedef struct {
    size_t off, len;  // the item's text in the batch's arena
    int doc_start;    // emit EOT before this item (prepare mode)
    TokVec toks;
} Item;

// a batch: the text of its items in one arena, so many small documents make one batch too
typedef struct {
    ByteBuf arena;
    Item *items;
    int n, cap;
} Batch;

static void batch_add(Batch *b, const unsigned char *s, size_t n, int doc_start) {
    Item *it = &b->items[b->n++];
    it->off = b->arena.n;
    it->len = n;
    it->doc_start = doc_start;
    bytebuf_put(&b->arena, s, n);
}

static inline int ascii_ws(unsigned char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}
static inline int ascii_alpha(unsigned char c) { return (c | 0x20) >= 'a' && (c | 0x20) <= 'z'; }
static inline int ascii_digit(unsigned char c) { return c >= '0' && c <= '9'; }

// Is p a safe cut, i.e. does every encoding of the text start a new pre-token at p, with all
// pre-tokens before p ending the same way if the text stopped at p? True when (ASCII only, so a
// cut never splits a UTF-8 character):
//  - s[p-1] is not whitespace and s[p] is: no pattern branch continues from non-space into space,
//    and the match at p (a whitespace run, or " ?\p{L}+" etc. for a single space) only looks ahead;
//  - s[p-1] is a letter and s[p] a digit, or the other way round: " ?\p{L}+" and " ?\p{N}+" stop
//    there, the contractions end in a letter, and the branch that matches at p looks only ahead.
// No branch looks behind, and the only look-ahead, (?!\S), belongs to whitespace matches that end
// before a non-space character, so they cannot reach past p.
static inline int is_safe_cut(const unsigned char *s, size_t p) {
    unsigned char a = s[p - 1], b = s[p];
    if (a >= 0x80 || b >= 0x80) { return 0; }
    if (!ascii_ws(a) && ascii_ws(b)) { return 1; }
    return (ascii_alpha(a) && ascii_digit(b)) || (ascii_digit(a) && ascii_alpha(b));
}

// the last safe cut p with lo <= p <= hi (s[hi] must be readable), or 0
static size_t last_safe_cut(const unsigned char *s, size_t lo, size_t hi) {
    for (size_t p = hi; p >= lo && p > 0; p--) {
        if (is_safe_cut(s, p)) { return p; }
    }
    return 0;
}
// the first safe cut p with lo <= p <= hi, or 0
static size_t first_safe_cut(const unsigned char *s, size_t lo, size_t hi) {
    for (size_t p = lo; p <= hi; p++) {
        if (p > 0 && is_safe_cut(s, p)) { return p; }
    }
    return 0;
}

typedef enum { FMT_DOC, FMT_SEP, FMT_JSONL } Format;

// a sequence of input files read as documents
typedef struct {
    Format fmt;
    size_t max_span;
    char **paths;
    int npaths, next_path;
    // byte range of the current file (encode mode with -f): [range_lo, range_hi), -1 = to the end
    long long range_lo, range_hi;
    // current file
    FILE *fp;
    const char *path;
    long long file_read;       // bytes read from this file
    unsigned char *buf;
    size_t cap, start, len;
    int eof;
    long long buf_off;         // file offset of buf[0]
    int line_start;            // buf[start] begins a line (file start, or right after a separator)
    size_t sep_scanned;        // no separator begins in [start, sep_scanned)
    size_t cut_scanned;        // no safe cut in [start+1, cut_scanned)
    int need_doc_start;        // the next item begins a document
    // jsonl: the current document, decoded
    ByteBuf doc;
    size_t doc_off;
    long long line_no;
    long long bad_surrogates;
    // statistics
    long long docs, bytes_in;
} Source;

static void source_init(Source *src, Format fmt, char **paths, int npaths, long long max_span) {
    memset(src, 0, sizeof(*src));
    src->fmt = fmt;
    src->paths = paths;
    src->npaths = npaths;
    src->max_span = (size_t)max_span;
    src->range_lo = 0;
    src->range_hi = -1;
}

static int source_open_next(Source *src) {
    if (src->next_path >= src->npaths) { return 0; }
    src->path = src->paths[src->next_path++];
    if (strcmp(src->path, "-") == 0) {
        src->fp = stdin;  // the one documented pipe
    } else {
        src->fp = fopen_regular(src->path, "input", NULL);
        if (src->range_lo > 0) { fseekCheck(src->fp, (long)src->range_lo, SEEK_SET); }
    }
    src->file_read = 0;
    src->start = src->len = 0;
    src->eof = 0;
    src->buf_off = src->range_lo;
    src->line_start = 1;
    src->sep_scanned = src->cut_scanned = 0;
    src->need_doc_start = 1;
    src->line_no = 0;
    return 1;
}

static void source_close_file(Source *src) {
    if (src->fp && src->fp != stdin) { fclose(src->fp); }
    src->fp = NULL;
}

// read more of the current file into the window; returns bytes read (0 at the end)
static size_t source_fill(Source *src) {
    if (src->start > 0) {  // keep only the unconsumed part
        memmove(src->buf, src->buf + src->start, src->len - src->start);
        src->buf_off += (long long)src->start;
        src->len -= src->start;
        src->sep_scanned = src->sep_scanned > src->start ? src->sep_scanned - src->start : 0;
        src->cut_scanned = src->cut_scanned > src->start ? src->cut_scanned - src->start : 0;
        src->start = 0;
    }
    size_t want = READ_WINDOW;
    if (src->cap - src->len < want) {
        size_t cap = src->len + want;
        unsigned char *p = (unsigned char *)realloc(src->buf, cap);
        if (p == NULL) { llmc_die("out of host memory growing the input window to %zu bytes", cap); }
        src->buf = p;
        src->cap = cap;
    }
    size_t room = src->cap - src->len;
    if (src->range_hi >= 0) {
        long long left = src->range_hi - src->range_lo - src->file_read;
        if ((long long)room > left) { room = (size_t)left; }
    }
    size_t got = room > 0 ? fread(src->buf + src->len, 1, room, src->fp) : 0;
    if (got == 0 && room > 0 && ferror(src->fp)) { llmc_die("reading '%s' failed: %s", src->path, strerror(errno)); }
    src->len += got;
    src->file_read += (long long)got;
    if (got == 0) { src->eof = 1; }
    return got;
}

// emit the next item from [start, end), where end is a valid end of text (a safe cut, the end of a
// document, or the end of the input): about ITEM_TARGET bytes if a safe cut allows, else up to end
static void source_emit(Source *src, Batch *batch, size_t end) {
    size_t cut = end;
    if (end - src->start > ITEM_TARGET) {
        size_t c = last_safe_cut(src->buf, src->start + 1, src->start + ITEM_TARGET);
        if (c == 0) { c = first_safe_cut(src->buf, src->start + ITEM_TARGET + 1, end - 1); }
        if (c != 0) { cut = c; }
    }
    batch_add(batch, src->buf + src->start, cut - src->start, src->need_doc_start);
    if (src->need_doc_start) { src->docs++; }
    src->need_doc_start = 0;
    src->bytes_in += (long long)(cut - src->start);
    src->start = cut;
    src->cut_scanned = 0;
    src->line_start = 0;
}

static void die_no_cut(Source *src) {
    llmc_die("%s: %zu bytes from offset %lld have no place where the text can be cut safely "
             "(a space or line break after a non-space character, or a letter/digit boundary); this "
             "does not look like text. Raise the limit with -b MiB (now %zu) if it is meant to be one piece",
             src->path, src->len - src->start, src->buf_off + (long long)src->start, src->max_span >> 20);
}

// next item of a plain-text or separated-text file; 0 when the file is done
static int source_next_text(Source *src, Batch *batch) {
    const int sep = src->fmt == FMT_SEP;
    for (;;) {
        size_t avail = src->len - src->start;
        if (sep) {
            // find a separator line "<|endoftext|>" that starts a line and ends one (or the file)
            size_t from = src->sep_scanned > src->start ? src->sep_scanned : src->start;
            while (from + EOT_TEXT_LEN <= src->len) {
                unsigned char *q = (unsigned char *)memmem(src->buf + from, src->len - from, EOT_TEXT, EOT_TEXT_LEN);
                if (q == NULL) { from = src->len - (EOT_TEXT_LEN - 1); break; }
                size_t qs = (size_t)(q - src->buf);
                size_t after = qs + EOT_TEXT_LEN;
                int starts_line = (qs == src->start) ? src->line_start : src->buf[qs - 1] == '\n';
                if (after == src->len && !src->eof) { from = qs; break; }  // undecided until more is read
                int ends_line = after == src->len || src->buf[after] == '\n';
                if (!(starts_line && ends_line)) { from = qs + 1; continue; }
                // a separator: the document ends before the line break that precedes it
                size_t doc_end = qs > src->start ? qs - 1 : qs;
                if (doc_end > src->start) {
                    src->sep_scanned = qs;
                    source_emit(src, batch, doc_end);
                    return 1;
                }
                src->start = after < src->len ? after + 1 : after;  // the separator and its line break
                src->line_start = 1;
                src->need_doc_start = 1;
                src->sep_scanned = src->start;
                src->cut_scanned = 0;
                from = src->start;
                avail = src->len - src->start;
            }
            src->sep_scanned = from;
        }
        if (src->eof) {
            size_t end = src->len;
            if (sep && end > src->start && src->buf[end - 1] == '\n') { end--; }  // the file's last line break
            if (end > src->start) { source_emit(src, batch, end); return 1; }
            src->start = src->len;
            return 0;
        }
        // text that may be emitted now: leave room for a separator that is not complete yet, and
        // one byte after a cut
        size_t limit = sep ? (src->sep_scanned > src->start ? src->sep_scanned : src->start) : src->len;
        if (limit > src->start + 1) { limit -= 1; } else { limit = src->start; }
        if (limit > src->start + ITEM_TARGET) {
            size_t c = last_safe_cut(src->buf, src->start + 1, src->start + ITEM_TARGET);
            if (c == 0) {
                size_t lo = src->cut_scanned > src->start + ITEM_TARGET ? src->cut_scanned : src->start + ITEM_TARGET + 1;
                c = first_safe_cut(src->buf, lo, limit);
                src->cut_scanned = limit + 1;
            }
            if (c != 0) { source_emit(src, batch, c); return 1; }
        }
        if (avail >= src->max_span) { die_no_cut(src); }
        source_fill(src);
    }
}

// the next line of the current file without its line break, at *line (n bytes, valid until the
// next read); 0 at the end of the file. A line longer than -b is an error.
static int source_next_line(Source *src, unsigned char **line, size_t *n) {
    unsigned char *nl = NULL;
    size_t scan = src->start;
    for (;;) {
        nl = src->len > scan ? (unsigned char *)memchr(src->buf + scan, '\n', src->len - scan) : NULL;
        if (nl || src->eof) { break; }
        if (src->len - src->start > src->max_span) {
            llmc_die("%s line %lld: longer than %zu MiB; raise the limit with -b MiB", src->path, src->line_no + 1,
                     src->max_span >> 20);
        }
        scan = src->len - src->start;  // offsets move when the window is compacted
        source_fill(src);
        scan += src->start;
    }
    size_t end = nl ? (size_t)(nl - src->buf) : src->len;
    if (end == src->start && !nl) { return 0; }  // end of file
    src->line_no++;
    if (end - src->start > src->max_span) {
        llmc_die("%s line %lld: longer than %zu MiB; raise the limit with -b MiB", src->path, src->line_no,
                 src->max_span >> 20);
    }
    *line = src->buf + src->start;
    *n = end - src->start;
    src->start = nl ? end + 1 : end;
    return 1;
}

// the JSON key just read is `name`
static int key_is(const ByteBuf *key, const char *name) {
    const size_t n = strlen(name);
    return key->n == n && memcmp(key->data, name, n) == 0;
}

// reads one field's value: j is at the value of `key`, and the function consumes it (json_skip the
// fields it does not want); 0 with j->err set at bad JSON
typedef int (*JsonFieldFn)(void *ctx, JsonCur *j, const ByteBuf *key);

// the fields of a JSON object whose '{' has been read, each handed to field; 0 with j->err set at
// bad JSON
static int json_object_fields(JsonCur *j, JsonFieldFn field, void *ctx) {
    if (json_eat(j, '}')) { return 1; }
    ByteBuf key = {0};
    int ok = 0;
    for (;;) {
        key.n = 0;
        if (!json_string(j, &key) || !json_eat(j, ':')) { json_fail(j, "expected ':'"); break; }
        if (!field(ctx, j, &key)) { break; }
        if (json_eat(j, ',')) { continue; }
        if (json_eat(j, '}')) { ok = 1; break; }
        j->err = "expected ',' or '}'";
        break;
    }
    bytebuf_free(&key);
    return ok;
}

// a FineWeb-style row: its "text" field, decoded; the other fields are skipped
typedef struct {
    ByteBuf *text;
    int found;
} TextField;

static int jsonl_text_field(void *ctx, JsonCur *j, const ByteBuf *key) {
    TextField *tf = (TextField *)ctx;
    if (!key_is(key, "text")) { return json_skip(j); }
    json_ws(j);
    if (j->p >= j->end || *j->p != '"') { j->err = "\"text\" is not a string"; return 0; }
    if (!json_string(j, tf->text)) { return 0; }
    tf->found = 1;
    return 1;
}

// jsonl: read the next line into src->doc as the decoded "text" field; 0 at the end of the file
static int source_read_json_doc(Source *src) {
    unsigned char *line;
    size_t n;
    while (source_next_line(src, &line, &n)) {
        src->bytes_in += (long long)n;
        while (n > 0 && (line[n - 1] == '\r' || line[n - 1] == ' ' || line[n - 1] == '\t')) { n--; }
        size_t k = 0;
        while (k < n && (line[k] == ' ' || line[k] == '\t')) { k++; }
        if (k == n) { continue; }  // blank line
        JsonCur j;
        json_init(&j, line, n);
        src->doc.n = 0;
        TextField tf = {&src->doc, 0};
        int ok = json_eat(&j, '{');
        if (!ok) {
            j.err = "expected '{' (one JSON object per line)";
        } else if ((ok = json_object_fields(&j, jsonl_text_field, &tf))) {
            json_ws(&j);
            if (j.p != j.end) { j.err = "unexpected data after the object"; ok = 0; }
        }
        if (!ok) {
            llmc_die("%s line %lld: bad JSON at column %lld: %s", src->path, src->line_no, json_offset(&j) + 1, j.err);
        }
        if (!tf.found) {
            llmc_die("%s line %lld: no \"text\" field (expected FineWeb-style rows {\"text\": ...})", src->path, src->line_no);
        }
        src->bad_surrogates += j.bad_surrogates;
        src->doc_off = 0;
        return 1;
    }
    return 0;
}

// next item of a jsonl file; 0 when the file is done
static int source_next_jsonl(Source *src, Batch *batch) {
    for (;;) {
        if (src->doc_off < src->doc.n) {
            const unsigned char *s = src->doc.data;
            size_t start = src->doc_off, n = src->doc.n - start, cut = src->doc.n;
            if (n > ITEM_TARGET) {
                size_t c = last_safe_cut(s, start + 1, start + ITEM_TARGET);
                if (c == 0) { c = first_safe_cut(s, start + ITEM_TARGET + 1, src->doc.n - 1); }
                if (c != 0) { cut = c; }
            }
            batch_add(batch, s + start, cut - start, start == 0);
            if (start == 0) { src->docs++; }
            src->doc_off = cut;
            return 1;
        }
        src->doc.n = src->doc_off = 0;
        if (!source_read_json_doc(src)) { return 0; }
    }
}

// next item from all inputs; 0 at the end of the last one
static int source_next(Source *src, Batch *batch) {
    for (;;) {
        if (src->fp == NULL && !source_open_next(src)) { return 0; }
        int got = src->fmt == FMT_JSONL ? source_next_jsonl(src, batch) : source_next_text(src, batch);
        if (got) { return 1; }
        source_close_file(src);
    }
}

// ----------------------------------------------------------------------------
// the encoding pipeline: read a batch of items, encode them in parallel, write them in order

typedef struct {
    BPE bpe;
    BPEWorker *workers;
    int nworkers;
    Batch batch[2];      // one is encoded while the other is written and refilled
    size_t batch_bytes;  // text per batch: enough work per parallel region, memory stays bounded
} Pipeline;

static void pipeline_init(Pipeline *p, const Args *a) {
    memset(p, 0, sizeof(*p));
    if (a->encoder == NULL || a->merges == NULL) {
        llmc_die("encoding needs -e encoder.json and -m vocab.bpe (OpenAI's GPT-2 files; see -h)");
    }
    bpe_load(&p->bpe, a->encoder, a->merges);
    int nt = 1;
#ifdef _OPENMP
    nt = a->threads > 0 ? a->threads : omp_get_max_threads();
    omp_set_num_threads(nt);
#else
    if (a->threads > 1) { llmc_warn("built without OpenMP: -n %d ignored, using one thread", a->threads); }
#endif
    p->nworkers = nt;
    p->workers = (BPEWorker *)mallocCheck((size_t)nt * sizeof(BPEWorker));
    for (int i = 0; i < nt; i++) { bpe_worker_init(&p->workers[i], &p->bpe); }
    p->batch_bytes = (size_t)(nt < 2 ? 2 : nt) * (4 << 20);
    for (int k = 0; k < 2; k++) {
        p->batch[k].cap = 8192;
        p->batch[k].items = (Item *)callocCheck((size_t)p->batch[k].cap, sizeof(Item));
    }
}

static void pipeline_free(Pipeline *p) {
    for (int i = 0; i < p->nworkers; i++) { bpe_worker_free(&p->workers[i]); }
    for (int k = 0; k < 2; k++) {
        for (int i = 0; i < p->batch[k].cap; i++) { tokvec_free(&p->batch[k].items[i].toks); }
        free(p->batch[k].items);
        bytebuf_free(&p->batch[k].arena);
    }
    free(p->workers);
    bpe_free(&p->bpe);
}

static void batch_read(Pipeline *p, Source *src, Batch *b) {
    b->n = 0;
    b->arena.n = 0;
    while (b->n < b->cap && b->arena.n < p->batch_bytes && source_next(src, b)) {}
}

static void batch_write(Batch *b, ShardWriter *w, int with_eot, uint32_t eot) {
    for (int i = 0; i < b->n; i++) {
        if (with_eot && b->items[i].doc_start) { shard_put(w, &eot, 1); }
        shard_put(w, b->items[i].toks.data, b->items[i].toks.n);
    }
    b->n = 0;
}

// encode everything from src into w; with_eot puts EOT before each document.
// Two batches take turns: while the threads encode one, the first thread to arrive writes the
// previous one out and reads the next input into it, then joins the encoding.
static void pipeline_run(Pipeline *p, Source *src, ShardWriter *w, int with_eot) {
    const uint32_t eot = (uint32_t)p->bpe.eot_token;
    Batch *cur = &p->batch[0], *other = &p->batch[1];
    other->n = 0;
    batch_read(p, src, cur);
    while (cur->n > 0) {
        #pragma omp parallel
        {
            #pragma omp single nowait
            {
                batch_write(other, w, with_eot, eot);
                batch_read(p, src, other);
            }
            #pragma omp for schedule(dynamic, 1) nowait
            for (int i = 0; i < cur->n; i++) {
                int t = 0;
#ifdef _OPENMP
                t = omp_get_thread_num();
#endif
                // encode into a vector on this thread's stack: items sit side by side in memory,
                // and updating their counts from two threads at once would share cache lines
                TokVec v = cur->items[i].toks;
                v.n = 0;
                bpe_encode(&p->workers[t], cur->arena.data + cur->items[i].off, cur->items[i].len, &v);
                cur->items[i].toks = v;
            }
        }
        Batch *t = cur;  // the encoded batch waits to be written; the refilled one is next
        cur = other;
        other = t;
    }
    batch_write(other, w, with_eot, eot);
}

static void warn_invalid(const Pipeline *p, const char *what) {
    long long bad = 0;
    for (int i = 0; i < p->nworkers; i++) { bad += p->workers[i].invalid_bytes; }
    if (bad > 0) {
        llmc_warn("%s: %lld bytes are not valid UTF-8; each was encoded as its single-byte token (decoding gives "
                  "the bytes back)", what, bad);
    }
}

// ----------------------------------------------------------------------------
// modes

static Format parse_format(const char *s) {
    if (strcmp(s, "doc") == 0) { return FMT_DOC; }
    if (strcmp(s, "sep") == 0) { return FMT_SEP; }
    if (strcmp(s, "jsonl") == 0) { return FMT_JSONL; }
    bad_flag("-x %s: unknown input format; use doc, sep or jsonl", s);
}

// character split point: the byte offset where character floor(chars * frac) starts, as Python's
// text[:int(len(text) * frac)] (characters = UTF-8 lead bytes, i.e. code points for valid UTF-8)
static long long split_offset(const char *path, double frac, long long *nchars_out, long long *k_out) {
    FILE *f = fopen_regular(path, "-i input", NULL);
    unsigned char *buf = (unsigned char *)mallocCheck(1 << 20);
    long long nchars = 0;
    size_t got;
    while ((got = fread(buf, 1, 1 << 20, f)) > 0) {
        for (size_t i = 0; i < got; i++) { nchars += (buf[i] & 0xC0) != 0x80; }
    }
    long long k = (long long)((double)nchars * frac);
    fseekCheck(f, 0, SEEK_SET);
    long long off = 0, seen = 0, found = -1;
    while (found < 0 && (got = fread(buf, 1, 1 << 20, f)) > 0) {
        for (size_t i = 0; i < got; i++) {
            if ((buf[i] & 0xC0) != 0x80) {
                if (seen == k) { found = off + (long long)i; break; }
                seen++;
            }
        }
        off += (long long)got;
    }
    if (found < 0) { found = off; }  // k == nchars: the split is at the end
    fclose(f);
    free(buf);
    *nchars_out = nchars;
    *k_out = k;
    return found;
}

static void mode_encode(const Args *a) {
    if (a->input == NULL || a->output == NULL) { llmc_die("encode mode needs -i input and -o output (see -h)"); }
    if ((a->split > 0) != (a->val_output != NULL)) { llmc_die("-f FRAC and -O val.bin go together"); }
    check_output_dir(a->output, "-o");
    if (a->val_output) { check_output_dir(a->val_output, "-O"); }
    const char *reads[] = {a->input, "-i", a->encoder, "-e", a->merges, "-m", a->val_output, "-O"};
    check_distinct(a->output, "-o", reads, 8);
    if (a->val_output) { check_distinct(a->val_output, "-O", reads, 6); }
    int is_stdin = strcmp(a->input, "-") == 0;
    if (!is_stdin) {
        long long size;
        fclose(fopen_regular(a->input, "-i input", &size));
        if (size == 0) { llmc_die("-i %s: the file is empty; there is nothing to tokenize", a->input); }
    } else if (a->split > 0) {
        llmc_die("-f needs a file (-i -, stdin, cannot be read twice)");
    }
    double t0 = llmc_wall_seconds();
    done_outputs_begin();
    Pipeline p;
    pipeline_init(&p, a);
    char *paths[1] = {(char *)a->input};
    struct { const char *out; long long lo, hi; } parts[2];
    int nparts = 1;
    parts[0].out = a->output; parts[0].lo = 0; parts[0].hi = -1;
    if (a->split > 0) {
        long long nchars, k;
        long long off = split_offset(a->input, a->split, &nchars, &k);
        long long size = file_size_bytes(a->input);
        if (off == 0 || off == size) {
            llmc_die("-f %g on %s: %lld characters split at character %lld leaves the %s part empty; "
                     "use a larger input or a fraction that keeps both parts", a->split, a->input, nchars, k,
                     off == 0 ? "-o" : "-O");
        }
        printf("%s: %lld characters, split at character %lld (byte %lld)\n", a->input, nchars, k, off);
        parts[0].hi = off;
        parts[1].out = a->val_output; parts[1].lo = off; parts[1].hi = size;
        nparts = 2;
    }
    long long bytes = 0, total = 0;
    for (int i = 0; i < nparts; i++) {
        Source src;
        source_init(&src, FMT_DOC, paths, 1, a->max_span);
        src.range_lo = parts[i].lo;
        src.range_hi = parts[i].hi;
        ShardWriter w;
        memset(&w, 0, sizeof(w));
        w.path = parts[i].out;
        w.flag = i == 0 ? "-o" : "-O";
        pipeline_run(&p, &src, &w, 0);
        if (src.bytes_in == 0) { llmc_die("-i %s: no input (empty stdin?); there is nothing to tokenize", a->input); }
        shard_close(&w);
        bytes += src.bytes_in;
        total += w.total;
        free(src.buf);
    }
    double dt = llmc_wall_seconds() - t0;
    warn_invalid(&p, a->input);
    printf("%s: %lld bytes -> %lld tokens in %.2f s (%.1f MB/s, %d threads)\n", a->input, bytes, total, dt,
           bytes / 1e6 / dt, p.nworkers);
    pipeline_free(&p);
    done_outputs_end();
}

// a whole number in lo..hi, with an optional suffix K or M (what: the value's meaning, for messages)
static long long parse_count(const char *s, const char *flag, const char *what, long long lo, long long hi) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || errno) { bad_flag("%s %s: expected a number", flag, s); }
    if (*end == 'K' || *end == 'k') { v *= 1e3; end++; }
    else if (*end == 'M' || *end == 'm') { v *= 1e6; end++; }
    // the range before the conversion: a double outside long long's range does not convert (UB)
    if (*end != '\0' || !(v >= (double)lo && v <= (double)hi) || v != (double)(long long)v) {
        bad_flag("%s %s: %s must be a whole number in %lld..%lld (suffix K or M allowed)", flag, s, what, lo, hi);
    }
    return (long long)v;
}

// whether name is one of prefix base's shards: base_NNNNNN.bin, base_val_NNNNNN.bin or base_train_NNNNNN.bin
static int is_shard_of(const char *name, const char *base) {
    const size_t n = strlen(base);
    if (strncmp(name, base, n) != 0 || name[n] != '_') { return 0; }
    const char *p = name + n + 1;
    if (!strncmp(p, "val_", 4)) { p += 4; } else if (!strncmp(p, "train_", 6)) { p += 6; }
    for (int i = 0; i < 6; i++) { if (!isdigit((unsigned char)p[i])) { return 0; } }
    return strcmp(p + 6, ".bin") == 0;
}

// shards of an earlier run under the same -p would mix with this run's in the trainer's glob (and
// be replaced only in part): refused, nothing written
static void check_no_earlier_shards(const char *prefix) {
    const char *slash = strrchr(prefix, '/');
    const char *base = slash ? slash + 1 : prefix;
    char dir[4096];
    snprintf(dir, sizeof(dir), "%.*s", slash ? (int)(slash - prefix) + (slash == prefix) : 1, slash ? prefix : ".");
    DIR *d = opendir(dir);
    if (d == NULL) { return; }  // check_output_dir has said what is wrong with the folder
    int count = 0;
    char first[256] = "";
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (is_shard_of(e->d_name, base)) {
            if (count++ == 0) { snprintf(first, sizeof(first), "%s", e->d_name); }
        }
    }
    closedir(d);
    if (count > 0) {
        llmc_die("-p %s: %d shard(s) of an earlier run are there (%s%s); this run's would mix with them: remove them "
                 "first (rm %s_*[0-9].bin) or choose another -p", prefix, count, first, count > 1 ? ", ..." : "", prefix);
    }
}

static void mode_prepare(const Args *a, char **inputs, int ninputs) {
    if (ninputs == 0) { llmc_die("-p %s: no input files given (they follow the flags; '-' reads stdin)", a->prefix); }
    Format fmt = parse_format(a->format);
    check_output_dir(a->prefix, "-p");
    if (a->prefix[0] == '\0' || a->prefix[strlen(a->prefix) - 1] == '/') {
        llmc_die("-p %s: the prefix ends in a folder; give the shards' name too, as in -p %sdata", a->prefix, a->prefix);
    }
    for (int i = 0; i < ninputs; i++) {  // every input is checked before the first shard is written
        if (strcmp(inputs[i], "-") != 0) { fclose(fopen_regular(inputs[i], "input", NULL)); }
    }
    check_no_earlier_shards(a->prefix);  // an input among them too
    double t0 = llmc_wall_seconds();
    done_outputs_begin();
    Pipeline p;
    pipeline_init(&p, a);
    Source src;
    source_init(&src, fmt, inputs, ninputs, a->max_span);
    ShardWriter w;
    memset(&w, 0, sizeof(w));
    w.prefix = a->prefix;
    w.flag = "-p";
    w.shard_tokens = a->shard_tokens;
    w.val_shards = a->val_shards;
    pipeline_run(&p, &src, &w, 1);
    if (src.docs == 0) {
        llmc_die("%s%s: no documents (the input is empty); there is nothing to tokenize", inputs[0], ninputs > 1 ? " ..." : "");
    }
    if (a->val_shards > 0 && w.index + (w.is_open ? 1 : 0) <= a->val_shards) {
        llmc_die("all %lld tokens fit in the first %d shard(s) of %lld tokens, which -V %d makes validation shards: "
                 "nothing is left for training. Use a smaller -S (or -V), or more data",
                 w.total, a->val_shards, a->shard_tokens, a->val_shards);
    }
    if (w.is_open) { shard_close(&w); }
    double dt = llmc_wall_seconds() - t0;
    warn_invalid(&p, inputs[0]);
    if (src.bad_surrogates > 0) {
        llmc_warn("%lld lone UTF-16 surrogate escapes (\\uD800-\\uDFFF) in JSON strings were read as U+FFFD", src.bad_surrogates);
    }
    printf("%lld documents, %lld bytes -> %lld tokens (%lld EOT + %lld text) in %d shard(s), %.2f s (%.1f MB/s, %d threads)\n",
           src.docs, src.bytes_in, w.total, src.docs, w.total - src.docs, w.shards_done, dt, src.bytes_in / 1e6 / dt,
           p.nworkers);
    free(src.buf);
    bytebuf_free(&src.doc);
    pipeline_free(&p);
    done_outputs_end();
}

static void mode_table(const Args *a) {
    check_output_dir(a->table_out, "-w");
    BPE b;
    if (a->encoder == NULL || a->merges == NULL) { llmc_die("-w needs -e encoder.json and -m vocab.bpe"); }
    const char *reads[] = {a->encoder, "-e", a->merges, "-m"};
    check_distinct(a->table_out, "-w", reads, 4);
    bpe_load(&b, a->encoder, a->merges);
    const unsigned char **toks = (const unsigned char **)mallocCheck((size_t)b.vocab_size * sizeof(*toks));
    size_t len;
    for (int i = 0; i < b.vocab_size; i++) {
        toks[i] = bpe_token_bytes(&b, (uint32_t)i, &len);
        if (len > 255) {  // a BPE token may be longer than the table's uint8 length can say
            llmc_die("-w %s: token %d of -e %s is %zu bytes long, but the decode table (llm.c's format) stores at "
                     "most 255 bytes per token; this tokenizer cannot have one", a->table_out, i, a->encoder, len);
        }
    }
    tokenizer_write(a->table_out, "-w", (uint32_t)b.vocab_size, (uint32_t)b.eot_token, toks, b.tok_len);
    printf("wrote %s: %d tokens, EOT %d\n", a->table_out, b.vocab_size, b.eot_token);
    free(toks);
    bpe_free(&b);
}

static void mode_decode(const Args *a) {
    if (a->input == NULL || a->output == NULL) { llmc_die("decode mode needs -i shard.bin and -o text.txt (see -h)"); }
    check_output_dir(a->output, "-o");
    const char *reads[] = {a->input, "-i", a->table_in, "-t"};
    check_distinct(a->output, "-o", reads, 4);
    if (access(a->table_in, F_OK) != 0) {  // decoding needs the table (tokenizer_init only warns)
        llmc_die("-t %s: tokenizer file not found; make it with: %s", a->table_in, TOKENIZER_HOWTO);
    }
    Tokenizer tok;
    tokenizer_init(&tok, a->table_in, "-t");
    long long size;
    FILE *f = fopen_regular(a->input, "-i token shard", &size);
    int32_t header[256];
    if (fread(header, sizeof(int32_t), 256, f) != 256) { llmc_die("-i %s: too short for a token shard header", a->input); }
    if (header[0] != SHARD_MAGIC || header[1] != SHARD_VERSION) {
        llmc_die("-i %s: not a GPT-2 token shard (magic %d version %d, expected %d version %d)", a->input, header[0],
                 header[1], SHARD_MAGIC, SHARD_VERSION);
    }
    long long count = header[2];
    if (count < 0 || size != 1024 + 2 * count) {
        llmc_die("-i %s: header says %lld tokens, so %lld bytes, but the file has %lld (truncated?)", a->input, count,
                 1024 + 2 * count, size);
    }
    AtomicFile out;
    output_open(&out, a->output, "-o");
    uint16_t buf[16384];
    long long done = 0;
    while (done < count) {
        size_t want = count - done < 16384 ? (size_t)(count - done) : 16384;
        if (fread(buf, sizeof(uint16_t), want, f) != want) { llmc_die("-i %s: read failed", a->input); }
        for (size_t i = 0; i < want; i++) {
            if (buf[i] >= tok.vocab_size) {
                llmc_die("-i %s: token %u at position %lld is not below the vocab size %u of %s", a->input, buf[i],
                         done + (long long)i, tok.vocab_size, a->table_in);
            }
            atomic_write(&out, tok.token_table[buf[i]], tok.token_length[buf[i]], 0);
        }
        done += (long long)want;
    }
    fclose(f);
    output_commit(&out);
    printf("%s: %lld tokens -> %s (%lld bytes)\n", a->input, count, a->output, out.bytes);
    tokenizer_free(&tok);
}

// HellaSwag, rendered as llm.c: context = ctx, each ending encoded as " " + ending, 4 candidates.
// Eval file (llm.c's write_evalfile): 256 int32 header (magic 20240522, version 1, examples,
// longest example in bytes), then per example a stream of uint16: 65535, bytes of this example
// (all fields included), example index, label, number of completions (4), context length,
// context tokens, then for each completion its length and tokens.

// one example as its JSON line gives it
typedef struct {
    ByteBuf ctx;         // "ctx"
    ByteBuf endings[4];  // "endings", each with a leading space: GPT-2 words carry theirs
    int have_ctx, have_label, nends;
    long long label;     // "label"; -1 for a string that is not one digit
} HsExample;

// "label": a number, or in some copies a one-digit string
static int hs_parse_label(JsonCur *j, long long *label) {
    json_ws(j);
    if (j->p >= j->end || *j->p != '"') { return json_int(j, label); }
    ByteBuf lb = {0};
    const int ok = json_string(j, &lb);
    if (ok) { *label = (lb.n == 1 && lb.data[0] >= '0' && lb.data[0] <= '9') ? lb.data[0] - '0' : -1; }
    bytebuf_free(&lb);
    return ok;
}

// "endings": an array of at most 4 strings
static int hs_parse_endings(JsonCur *j, HsExample *ex) {
    if (!json_eat(j, '[')) { j->err = "\"endings\" is not an array"; return 0; }
    if (json_eat(j, ']')) { return 1; }
    for (;;) {
        if (ex->nends == 4) { j->err = "more than 4 endings"; return 0; }
        ByteBuf *e = &ex->endings[ex->nends];
        e->n = 0;
        bytebuf_putc(e, ' ');
        if (!json_string(j, e)) { return 0; }
        ex->nends++;
        if (json_eat(j, ',')) { continue; }
        if (json_eat(j, ']')) { return 1; }
        j->err = "expected ',' or ']' in \"endings\"";
        return 0;
    }
}

// the fields of an example that are read ("ctx", "label", "endings"); the others are skipped
static int hs_example_field(void *ctx, JsonCur *j, const ByteBuf *key) {
    HsExample *ex = (HsExample *)ctx;
    if (key_is(key, "ctx")) { return (ex->have_ctx = json_string(j, &ex->ctx)); }
    if (key_is(key, "label")) { return (ex->have_label = hs_parse_label(j, &ex->label)); }
    if (key_is(key, "endings")) { return hs_parse_endings(j, ex); }
    return json_skip(j);
}

// one example from the JSON object at j; 0 with j->err set at bad JSON
static int hs_parse_example(JsonCur *j, HsExample *ex) {
    ex->ctx.n = 0;
    ex->have_ctx = ex->have_label = ex->nends = 0;
    ex->label = -1;
    if (!json_eat(j, '{')) { j->err = "expected '{'"; return 0; }
    return json_object_fields(j, hs_example_field, ex);
}

// the example of line `line` has what the eval file needs, and there is room for its index
static void hs_check_example(const HsExample *ex, const char *path, long long line, long long index) {
    if (!ex->have_ctx || !ex->have_label || ex->nends != 4) {
        llmc_die("%s line %lld: needs \"ctx\", \"label\" and 4 \"endings\" (has ctx: %s, label: %s, %d endings)", path,
                 line, ex->have_ctx ? "yes" : "no", ex->have_label ? "yes" : "no", ex->nends);
    }
    if (ex->label < 0 || ex->label > 3) { llmc_die("%s line %lld: label must be 0..3", path, line); }
    if (index >= 65535) { llmc_die("%s: more than 65535 examples; the eval file stores indices as uint16", path); }
}

// the example's record (the stream above, its byte count left 0) into stream, encoded by wk; ctx
// holds the context's tokens afterwards, ending is scratch
static void hs_encode_example(BPEWorker *wk, const HsExample *ex, long long index, TokVec *ctx, TokVec *ending,
                              TokVec *stream) {
    ctx->n = 0;
    bpe_encode(wk, ex->ctx.data, ex->ctx.n, ctx);
    stream->n = 0;
    tokvec_push(stream, 65535);
    tokvec_push(stream, 0);  // bytes of this example, filled in when it is written
    tokvec_push(stream, (uint32_t)index);
    tokvec_push(stream, (uint32_t)ex->label);
    tokvec_push(stream, 4);
    tokvec_push(stream, (uint32_t)ctx->n);
    for (size_t i = 0; i < ctx->n; i++) { tokvec_push(stream, ctx->data[i]); }
    for (int e = 0; e < 4; e++) {
        ending->n = 0;
        bpe_encode(wk, ex->endings[e].data, ex->endings[e].n, ending);
        tokvec_push(stream, (uint32_t)ending->n);
        for (size_t i = 0; i < ending->n; i++) { tokvec_push(stream, ending->data[i]); }
    }
}

// the eval file being written: its header's counts are patched in when it is closed
typedef struct {
    AtomicFile out;
    long long examples, longest;
    int label_count[4];
} EvalWriter;

static void eval_open(EvalWriter *w, const char *path) {
    memset(w, 0, sizeof(*w));
    output_open(&w->out, path, "-o");
    int32_t header[256];
    memset(header, 0, sizeof(header));
    atomic_write(&w->out, header, sizeof(header), 0);
}

// appends an example's record (from hs_encode_example) of line `line`, filling in its byte count
static void eval_put(EvalWriter *w, TokVec *stream, int label, const char *path, long long line) {
    long long nbytes = (long long)stream->n * 2;
    if (nbytes >= 65536) { llmc_die("%s line %lld: example of %lld bytes; the format allows < 65536", path, line, nbytes); }
    stream->data[1] = (uint32_t)nbytes;
    if (nbytes > w->longest) { w->longest = nbytes; }
    uint16_t u16[32768];
    for (size_t i = 0; i < stream->n; i++) { u16[i] = (uint16_t)stream->data[i]; }
    atomic_write(&w->out, u16, stream->n * sizeof(uint16_t), 0);
    w->label_count[label]++;
    w->examples++;
}

// the header's counts, then the file in place, and a summary line
static void eval_close(EvalWriter *w, const char *path, const char *input) {
    if (w->examples == 0) { llmc_die("-H %s: no examples (empty file?)", input); }
    int32_t header[4] = {EVAL_MAGIC, EVAL_VERSION, (int32_t)w->examples, (int32_t)w->longest};
    atomic_patch(&w->out, 0, header, sizeof(header));
    output_commit(&w->out);
    printf("wrote %s: %lld examples (labels 0/1/2/3: %d/%d/%d/%d), longest example %lld bytes\n", path, w->examples,
           w->label_count[0], w->label_count[1], w->label_count[2], w->label_count[3], w->longest);
}

// the eval file a->output from the HellaSwag jsonl a->hellaswag, encoded by wk
static void hellaswag_convert(const Args *a, BPEWorker *wk) {
    char *paths[1] = {(char *)a->hellaswag};
    fclose(fopen_regular(a->hellaswag, "-H HellaSwag file", NULL));  // checked before the output is created
    Source src;
    source_init(&src, FMT_JSONL, paths, 1, a->max_span);
    if (!source_open_next(&src)) { llmc_die("internal error opening %s", a->hellaswag); }
    EvalWriter w;
    eval_open(&w, a->output);
    HsExample ex = {0};
    TokVec ctx = {0}, ending = {0}, stream = {0};
    unsigned char *line;
    size_t n;
    while (source_next_line(&src, &line, &n)) {
        JsonCur j;
        json_init(&j, line, n);
        json_ws(&j);
        if (j.p == j.end) { continue; }  // blank line
        if (!hs_parse_example(&j, &ex)) {
            llmc_die("%s line %lld: bad JSON at column %lld: %s", a->hellaswag, src.line_no, json_offset(&j) + 1, j.err);
        }
        hs_check_example(&ex, a->hellaswag, src.line_no, w.examples);
        hs_encode_example(wk, &ex, w.examples, &ctx, &ending, &stream);
        if (ctx.n == 0) { llmc_die("%s line %lld: empty context", a->hellaswag, src.line_no); }
        eval_put(&w, &stream, (int)ex.label, a->hellaswag, src.line_no);
    }
    eval_close(&w, a->output, a->hellaswag);
    source_close_file(&src);
    free(src.buf);
    tokvec_free(&ctx); tokvec_free(&ending); tokvec_free(&stream); bytebuf_free(&ex.ctx);
    for (int e = 0; e < 4; e++) { bytebuf_free(&ex.endings[e]); }
}

static void mode_hellaswag(const Args *a) {
    if (a->output == NULL) { llmc_die("-H needs -o hellaswag_val.bin"); }
    check_output_dir(a->output, "-o");
    const char *reads[] = {a->hellaswag, "-H", a->encoder, "-e", a->merges, "-m"};
    check_distinct(a->output, "-o", reads, 6);
    Pipeline p;
    Args one = *a;
    one.threads = 1;
    pipeline_init(&p, &one);
    hellaswag_convert(a, &p.workers[0]);
    warn_invalid(&p, a->hellaswag);
    pipeline_free(&p);
}

// ----------------------------------------------------------------------------

// the flags each mode reads (-n, the thread count, is accepted by all): a flag that the chosen mode
// does not read is an error, not ignored
static const char *mode_flags(const Args *a, const char **mode) {
    if (a->decode) { *mode = "decoding (-d)"; return "dtion"; }
    if (a->table_out) { *mode = "writing the decode table (-w)"; return "emwn"; }
    if (a->hellaswag) { *mode = "converting HellaSwag (-H)"; return "emHobn"; }
    if (a->prefix) { *mode = "prepare mode (-p)"; return "emxpSVnb"; }
    *mode = "encoding (-i/-o)";
    return "emioOfnb";
}

int main(int argc, char **argv) {
    llmc_std_fds_open();
    if (llmc_abort_hook != remove_partial_outputs) { next_abort_hook = llmc_abort_hook; }
    // no shards of an earlier run to remove: main runs again in one process in the fuzz harness,
    // after a run that died, whose list the harness released
    done_outputs_begin();
    llmc_abort_hook = remove_partial_outputs;
    Args a;
    args_defaults(&a);
    int c;
    char given[64] = "";  // the flags on the command line, in order
    opterr = 0;  // we print our own messages
    static const char optstring[] = ":e:m:i:o:O:f:dt:w:p:x:S:V:H:n:b:h";
    for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++) {  // getopt reads "--help" as the flag "-"
        if (strcmp(argv[i], "--help") == 0) { usage(stdout); return 0; }
        if (strncmp(argv[i], "--", 2) == 0) { bad_flag("unknown flag %s (this tool's flags are short ones)", argv[i]); }
        for (const char *c = argv[i][0] == '-' ? argv[i] + 1 : ""; *c; c++) {  // a cluster, as getopt reads it
            const char *f = strchr(optstring + 1, *c);
            if (f && f[1] == ':') {  // the rest of the word is its value, or else the next word
                if (c[1] == '\0') { i++; }
                break;
            }
        }
    }
    while ((c = getopt(argc, argv, optstring)) != -1) {
        size_t ng = strlen(given);
        if (c != ':' && c != '?' && !strchr(given, c) && ng + 1 < sizeof(given)) { given[ng] = (char)c; given[ng + 1] = '\0'; }
        switch (c) {
            case 'e': a.encoder = optarg; break;
            case 'm': a.merges = optarg; break;
            case 'i': a.input = optarg; break;
            case 'o': a.output = optarg; break;
            case 'O': a.val_output = optarg; break;
            case 'f': {
                char *end;
                a.split = strtod(optarg, &end);
                if (*end != '\0' || !(a.split > 0.0 && a.split < 1.0)) { bad_flag("-f %s: the train fraction must be between 0 and 1", optarg); }
                break;
            }
            case 'd': a.decode = 1; break;
            case 't': a.table_in = optarg; break;
            case 'w': a.table_out = optarg; break;
            case 'p': a.prefix = optarg; break;
            case 'x': a.format = optarg; break;
            // -S: a shard's header holds an int32 count; -n threads; -b MiB
            case 'S': a.shard_tokens = parse_count(optarg, "-S", "tokens per shard", 1, INT32_MAX); break;
            case 'V': a.val_shards = (int)parse_count(optarg, "-V", "the number of validation shards", 0, INT32_MAX); break;
            case 'H': a.hellaswag = optarg; break;
            case 'n': a.threads = (int)parse_count(optarg, "-n", "threads", 1, 1024); break;
            case 'b': a.max_span = parse_count(optarg, "-b", "MiB", 1, 65536) << 20; break;
            case 'h': usage(stdout); return 0;
            case ':': bad_flag("flag -%c needs a value", optopt);
            default: bad_flag("unknown flag -%c", optopt);
        }
    }
    int modes = (a.decode != 0) + (a.table_out != NULL) + (a.prefix != NULL) + (a.hellaswag != NULL);
    if (modes > 1) { bad_flag("choose one of -d, -w, -p, -H"); }
    if (a.prefix == NULL && optind < argc) { bad_flag("unexpected argument '%s' (inputs without -i are for -p)", argv[optind]); }
    if (modes == 0 && !a.input && !a.output) { bad_flag("nothing to do: give -i/-o, -p, -d, -w or -H"); }
    const char *mode, *reads = mode_flags(&a, &mode);
    for (const char *f = given; *f; f++) {
        if (!strchr(reads, *f)) { bad_flag("-%c does not apply to %s; drop it", *f, mode); }
    }
    if (a.decode) { mode_decode(&a); }
    else if (a.table_out) { mode_table(&a); }
    else if (a.hellaswag) { mode_hellaswag(&a); }
    else if (a.prefix) { mode_prepare(&a, argv + optind, argc - optind); }
    else { mode_encode(&a); }
    return 0;
}
