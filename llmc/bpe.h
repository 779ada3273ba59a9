/*
 * GPT-2 byte-level BPE: loads OpenAI's encoder.json + vocab.bpe and turns UTF-8 text into
 * exactly the token ids of OpenAI's encoder.py (and of tiktoken's "gpt2" encoding).
 *
 * Encoding a text, in order:
 *   1. UTF-8 check. The text is cut into maximal valid UTF-8 runs. Each byte that is not part of
 *      a valid UTF-8 sequence (stray continuation bytes, truncated sequences, overlong forms,
 *      surrogates, code points above U+10FFFF) becomes its own single-byte token: GPT-2 has one
 *      token for each of the 256 byte values, so nothing is dropped or replaced and
 *      decode(encode(x)) == x for every byte string. The valid runs on either side are encoded
 *      as if the invalid byte were the end / the start of the text. Workers count such bytes
 *      (BPEWorker.invalid_bytes) so tools can warn.
 *   2. Pre-tokenization with GPT-2's regular expression, through PCRE2 in UTF mode with Unicode
 *      properties:  's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 *      \s is spelled out as the Unicode White_Space property (the 25 code points below), which is
 *      what tiktoken's Rust regex means by \s; PCRE2's own \s would also take U+180E.
 *   3. Byte-level BPE on each piece: start from one token per byte and repeatedly apply the merge
 *      of lowest rank (line order of vocab.bpe), leftmost first. Because every merge only uses
 *      symbols made by earlier merges (checked at load), this gives the same result as
 *      encoder.py's "merge all occurrences of the best pair" loop.
 * The text "<|endoftext|>" is ordinary text here; only tools add the EOT token (eot_token).
 *
 * Threads: a BPE is read-only after bpe_load() and shared; each thread owns a BPEWorker (match
 * data, JIT stack, scratch and a bounded cache of recently encoded pieces).
 *
 * Also here: a small JSON reader (strings with all escapes, integers, skipping any value), used for
 * encoder.json and by the tools for JSON-lines input.
 */
#ifndef LLMC_BPE_H
#define LLMC_BPE_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <limits.h>
#include <stdint.h>
#include "utils.h"

// ----------------------------------------------------------------------------
// growable token vector

typedef struct {
    uint32_t *data;
    size_t n, cap;
} TokVec;

static inline void tokvec_reserve(TokVec *v, size_t extra) {
    if (v->n + extra <= v->cap) { return; }
    size_t cap = v->cap ? v->cap : 1024;
    while (cap < v->n + extra) { cap *= 2; }
    uint32_t *p = (uint32_t *)realloc(v->data, cap * sizeof(uint32_t));
    if (p == NULL) { llmc_die("out of host memory growing a token buffer to %zu tokens", cap); }
    v->data = p;
    v->cap = cap;
}
static inline void tokvec_push(TokVec *v, uint32_t t) {
    if (v->n == v->cap) { tokvec_reserve(v, 1); }
    v->data[v->n++] = t;
}
static inline void tokvec_free(TokVec *v) { free(v->data); v->data = NULL; v->n = v->cap = 0; }

// growable byte buffer
typedef struct {
    unsigned char *data;
    size_t n, cap;
} ByteBuf;

static inline void bytebuf_reserve(ByteBuf *b, size_t extra) {
    if (b->n + extra <= b->cap) { return; }
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->n + extra) { cap *= 2; }
    unsigned char *p = (unsigned char *)realloc(b->data, cap);
    if (p == NULL) { llmc_die("out of host memory growing a text buffer to %zu bytes", cap); }
    b->data = p;
    b->cap = cap;
}
static inline void bytebuf_put(ByteBuf *b, const void *src, size_t n) {
    if (n == 0) { return; }
    bytebuf_reserve(b, n);
    memcpy(b->data + b->n, src, n);
    b->n += n;
}
static inline void bytebuf_putc(ByteBuf *b, unsigned char c) {
    if (b->n == b->cap) { bytebuf_reserve(b, 1); }
    b->data[b->n++] = c;
}
static inline void bytebuf_free(ByteBuf *b) { free(b->data); b->data = NULL; b->n = b->cap = 0; }

// ----------------------------------------------------------------------------
// UTF-8

// append code point cp as UTF-8
static inline void utf8_put(ByteBuf *b, uint32_t cp) {
    unsigned char s[4];
    size_t n;
    if (cp < 0x80) { s[0] = (unsigned char)cp; n = 1; }
    else if (cp < 0x800) { s[0] = (unsigned char)(0xC0 | (cp >> 6)); s[1] = (unsigned char)(0x80 | (cp & 0x3F)); n = 2; }
    else if (cp < 0x10000) {
        s[0] = (unsigned char)(0xE0 | (cp >> 12)); s[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        s[2] = (unsigned char)(0x80 | (cp & 0x3F)); n = 3;
    } else {
        s[0] = (unsigned char)(0xF0 | (cp >> 18)); s[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
        s[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F)); s[3] = (unsigned char)(0x80 | (cp & 0x3F)); n = 4;
    }
    bytebuf_put(b, s, n);
}

// length of the valid UTF-8 sequence starting at s[0] (1..4), or 0 if s[0] starts no valid
// sequence within n bytes (RFC 3629: no overlongs, no surrogates, nothing above U+10FFFF)
static inline int utf8_seq_len(const unsigned char *s, size_t n) {
    unsigned char c = s[0];
    if (c < 0x80) { return 1; }
    if (c < 0xC2) { return 0; }  // continuation byte, or overlong 2-byte lead
    if (c < 0xE0) { return (n >= 2 && (s[1] & 0xC0) == 0x80) ? 2 : 0; }
    if (c < 0xF0) {
        if (n < 3 || (s[1] & 0xC0) != 0x80 || (s[2] & 0xC0) != 0x80) { return 0; }
        if (c == 0xE0 && s[1] < 0xA0) { return 0; }   // overlong
        if (c == 0xED && s[1] >= 0xA0) { return 0; }  // UTF-16 surrogate
        return 3;
    }
    if (c < 0xF5) {
        if (n < 4 || (s[1] & 0xC0) != 0x80 || (s[2] & 0xC0) != 0x80 || (s[3] & 0xC0) != 0x80) { return 0; }
        if (c == 0xF0 && s[1] < 0x90) { return 0; }   // overlong
        if (c == 0xF4 && s[1] >= 0x90) { return 0; }  // above U+10FFFF
        return 4;
    }
    return 0;
}

// end of the valid UTF-8 run that starts at s[0]: the first invalid position, or n
static inline size_t utf8_valid_prefix(const unsigned char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        // ASCII fast path, 8 bytes at a time
        while (i + 8 <= n) {
            uint64_t w;
            memcpy(&w, s + i, 8);
            if (w & 0x8080808080808080ULL) { break; }
            i += 8;
        }
        if (i >= n) { break; }
        if (s[i] < 0x80) { i++; continue; }
        int k = utf8_seq_len(s + i, n - i);
        if (k == 0) { return i; }
        i += (size_t)k;
    }
    return n;
}

// ----------------------------------------------------------------------------
// a small JSON reader: enough for encoder.json and JSON-lines records; errors carry an offset

typedef struct {
    const unsigned char *p, *start, *end;
    const char *err;      // first error, or NULL
    long long bad_surrogates;  // lone \uD800-\uDFFF escapes, decoded as U+FFFD
} JsonCur;

static inline void json_init(JsonCur *j, const void *data, size_t n) {
    j->start = j->p = (const unsigned char *)data;
    j->end = j->p + n;
    j->err = NULL;
    j->bad_surrogates = 0;
}
static inline long long json_offset(const JsonCur *j) { return (long long)(j->p - j->start); }
static inline int json_fail(JsonCur *j, const char *what) {
    if (j->err == NULL) { j->err = what; }
    return 0;
}
static inline void json_ws(JsonCur *j) {
    while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r')) { j->p++; }
}
// skip whitespace, then consume c if it is next; returns 1 if consumed
static inline int json_eat(JsonCur *j, char c) {
    json_ws(j);
    if (j->p < j->end && *j->p == (unsigned char)c) { j->p++; return 1; }
    return 0;
}
static inline int json_hex4(JsonCur *j, uint32_t *v) {
    if (j->end - j->p < 4) { return json_fail(j, "truncated \\u escape"); }
    uint32_t x = 0;
    for (int i = 0; i < 4; i++) {
        unsigned char c = j->p[i];
        x <<= 4;
        if (c >= '0' && c <= '9') { x |= (uint32_t)(c - '0'); }
        else if (c >= 'a' && c <= 'f') { x |= (uint32_t)(c - 'a' + 10); }
        else if (c >= 'A' && c <= 'F') { x |= (uint32_t)(c - 'A' + 10); }
        else { return json_fail(j, "bad hex digit in \\u escape"); }
    }
    j->p += 4;
    *v = x;
    return 1;
}
// a JSON string, decoded to UTF-8 and appended to out (out may be NULL to skip)
static inline int json_string(JsonCur *j, ByteBuf *out) {
    json_ws(j);
    if (j->p >= j->end || *j->p != '"') { return json_fail(j, "expected a string"); }
    j->p++;
    for (;;) {
        const unsigned char *q = j->p;
        while (q < j->end && *q != '"' && *q != '\\' && *q >= 0x20) { q++; }
        if (out && q > j->p) { bytebuf_put(out, j->p, (size_t)(q - j->p)); }
        j->p = q;
        if (q >= j->end) { return json_fail(j, "unterminated string"); }
        if (*q == '"') { j->p++; return 1; }
        if (*q < 0x20) { return json_fail(j, "control character inside a string"); }
        // escape
        if (j->end - q < 2) { return json_fail(j, "unterminated string"); }
        unsigned char e = q[1];
        j->p = q + 2;
        unsigned char c;
        switch (e) {
            case '"': c = '"'; break;
            case '\\': c = '\\'; break;
            case '/': c = '/'; break;
            case 'b': c = '\b'; break;
            case 'f': c = '\f'; break;
            case 'n': c = '\n'; break;
            case 'r': c = '\r'; break;
            case 't': c = '\t'; break;
            case 'u': {
                uint32_t u;
                if (!json_hex4(j, &u)) { return 0; }
                if (u >= 0xD800 && u <= 0xDBFF && j->end - j->p >= 6 && j->p[0] == '\\' && j->p[1] == 'u') {
                    const unsigned char *save = j->p;
                    uint32_t lo;
                    j->p += 2;
                    if (!json_hex4(j, &lo)) { return 0; }
                    if (lo >= 0xDC00 && lo <= 0xDFFF) {
                        u = 0x10000 + ((u - 0xD800) << 10) + (lo - 0xDC00);
                    } else {
                        j->p = save;  // the next escape is read on its own
                        u = 0xFFFD;
                        j->bad_surrogates++;
                    }
                } else if (u >= 0xD800 && u <= 0xDFFF) {
                    u = 0xFFFD;  // a lone surrogate has no UTF-8 form
                    j->bad_surrogates++;
                }
                if (out) { utf8_put(out, u); }
                continue;
            }
            default: return json_fail(j, "bad escape in string");
        }
        if (out) { bytebuf_putc(out, c); }
    }
}
static inline int json_int(JsonCur *j, long long *v) {
    json_ws(j);
    int neg = 0;
    if (j->p < j->end && *j->p == '-') { neg = 1; j->p++; }
    if (j->p >= j->end || *j->p < '0' || *j->p > '9') { return json_fail(j, "expected an integer"); }
    long long x = 0;
    while (j->p < j->end && *j->p >= '0' && *j->p <= '9') {
        if (x > (LLONG_MAX - 9) / 10) { return json_fail(j, "integer too large"); }
        x = x * 10 + (*j->p - '0');
        j->p++;
    }
    if (j->p < j->end && (*j->p == '.' || *j->p == 'e' || *j->p == 'E')) { return json_fail(j, "expected an integer, got a fraction"); }
    *v = neg ? -x : x;
    return 1;
}
// skip any JSON value; containers are tracked on a small explicit stack, so deep nesting
// is an error rather than a stack overflow
static inline int json_skip(JsonCur *j) {
    char stack[256];  // '{' or '[' per open container
    int depth = 0;
    for (;;) {
        // one value
        json_ws(j);
        if (j->p >= j->end) { return json_fail(j, "unexpected end of input"); }
        unsigned char c = *j->p;
        if (c == '{' || c == '[') {
            if (depth == (int)sizeof(stack)) { return json_fail(j, "nested too deeply"); }
            stack[depth++] = (char)c;
            j->p++;
            if (json_eat(j, c == '{' ? '}' : ']')) {
                depth--;  // empty container: a complete value
            } else {
                if (c == '{' && (!json_string(j, NULL) || !json_eat(j, ':'))) { return json_fail(j, "expected a key and ':'"); }
                continue;
            }
        } else if (c == '"') {
            if (!json_string(j, NULL)) { return 0; }
        } else if (c == '-' || (c >= '0' && c <= '9')) {
            j->p++;
            while (j->p < j->end && *j->p != '\0' && strchr("0123456789+-.eE", *j->p) != NULL) { j->p++; }
        } else if (j->end - j->p >= 4 && (memcmp(j->p, "true", 4) == 0 || memcmp(j->p, "null", 4) == 0)) {
            j->p += 4;
        } else if (j->end - j->p >= 5 && memcmp(j->p, "false", 5) == 0) {
            j->p += 5;
        } else {
            return json_fail(j, "unexpected character");
        }
        // after a value: close containers until one continues with ','
        for (;;) {
            if (depth == 0) { return 1; }
            char open = stack[depth - 1];
            if (json_eat(j, ',')) {
                if (open == '{' && (!json_string(j, NULL) || !json_eat(j, ':'))) { return json_fail(j, "expected a key and ':'"); }
                break;
            }
            if (json_eat(j, open == '{' ? '}' : ']')) { depth--; continue; }
            return json_fail(j, open == '{' ? "expected ',' or '}'" : "expected ',' or ']'");
        }
    }
}

// ----------------------------------------------------------------------------
// the tokenizer

#define BPE_NONE 0xFFFFFFFFu

typedef struct {
    uint64_t key;   // left id << 32 | right id; UINT64_MAX = empty
    uint32_t rank;  // line of the merge in vocab.bpe (0 = first merge)
    uint32_t id;    // the merged token
} BpePair;

typedef struct {
    int vocab_size;           // entries of encoder.json, <|endoftext|> included (50257)
    int eot_token;            // id of <|endoftext|> (50256)
    int num_merges;           // lines of vocab.bpe after the version line (50000)
    // token id -> bytes
    unsigned char *tok_bytes;
    uint32_t *tok_off, *tok_len;
    uint32_t byte_token[256];  // token of each single byte
    // merge table: key (left id << 32 | right id) -> rank and merged id; open addressing, one
    // 16-byte slot per pair so a lookup touches one cache line
    BpePair *pairs;
    uint32_t pair_mask;
    int pair_shift;
    // pre-tokenizer
    pcre2_code *re;
    int jit;                  // 1 if PCRE2's JIT compiled the pattern
} BPE;

// GPT-2's pattern; \s and \S spelled out as White_Space (see the top comment)
#define BPE_WS "\\t\\n\\x{0B}\\f\\r\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}"
static const char bpe_pattern[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^" BPE_WS "\\p{L}\\p{N}]+|[" BPE_WS "]+(?![^" BPE_WS "])|[" BPE_WS "]+";

// the merge of (a, b): its rank, or BPE_NONE; *id receives the merged token
static inline uint32_t bpe_pair_lookup(const BPE *b, uint32_t a, uint32_t c, uint32_t *id) {
    uint64_t key = ((uint64_t)a << 32) | c;
    uint32_t slot = (uint32_t)((key * 0x9E3779B97F4A7C15ULL) >> b->pair_shift);
    for (;;) {
        const BpePair *p = &b->pairs[slot];
        if (p->key == key) { *id = p->id; return p->rank; }
        if (p->key == UINT64_MAX) { return BPE_NONE; }
        slot = (slot + 1) & b->pair_mask;
    }
}

// GPT-2's byte <-> printable code point map (bytes_to_unicode in encoder.py): printable Latin-1
// bytes map to themselves, the other 68 bytes to U+0100.. in byte order
static inline void bpe_byte_map(uint32_t byte_to_cp[256]) {
    int n = 0;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        byte_to_cp[b] = printable ? (uint32_t)b : (uint32_t)(256 + n++);
    }
}

// decode a UTF-8 symbol of the byte map back into raw bytes; 0 if some character is not in the map
static inline int bpe_unmap(const unsigned char *s, size_t n, const int cp_to_byte[324], ByteBuf *out) {
    size_t i = 0;
    while (i < n) {
        int k = utf8_seq_len(s + i, n - i);
        if (k == 0) { return 0; }
        uint32_t cp;
        if (k == 1) { cp = s[i]; }
        else if (k == 2) { cp = ((uint32_t)(s[i] & 0x1F) << 6) | (s[i + 1] & 0x3F); }
        else { return 0; }  // the map only uses code points below U+0144
        if (cp >= 324 || cp_to_byte[cp] < 0) { return 0; }
        bytebuf_putc(out, (unsigned char)cp_to_byte[cp]);
        i += (size_t)k;
    }
    return 1;
}

// a temporary bytes -> id map used while loading
typedef struct {
    uint32_t *slot;  // id + 1, 0 = empty
    uint32_t mask;
} BpeStrMap;

static inline uint64_t bpe_hash_bytes(const unsigned char *s, size_t n) {
    uint64_t h = 0x9E3779B97F4A7C15ULL ^ (uint64_t)n;
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, s, 8);
        h = (h ^ w) * 0xff51afd7ed558ccdULL;
        h ^= h >> 29;
        s += 8;
        n -= 8;
    }
    uint64_t w = 0;
    memcpy(&w, s, n);
    h = (h ^ w) * 0xc4ceb9fe1a85ec53ULL;
    h ^= h >> 32;
    return h;
}

static inline uint32_t bpe_strmap_find(const BPE *b, const BpeStrMap *m, const unsigned char *s, size_t n, int insert_id) {
    uint32_t i = (uint32_t)bpe_hash_bytes(s, n) & m->mask;
    for (;;) {
        uint32_t v = m->slot[i];
        if (v == 0) {
            if (insert_id >= 0) { m->slot[i] = (uint32_t)insert_id + 1; }
            return BPE_NONE;
        }
        uint32_t id = v - 1;
        if (b->tok_len[id] == n && memcmp(b->tok_bytes + b->tok_off[id], s, n) == 0) { return id; }
        i = (i + 1) & m->mask;
    }
}

static inline unsigned char *bpe_read_file(const char *path, size_t *n, const char *what) {
    FILE *f;
    long long size;
    char why[512];
    if (open_regular(path, &f, &size, why, sizeof(why)) != 0) {
        llmc_die("cannot open %s '%s': it %s (download it from "
                 "https://openaipublic.blob.core.windows.net/gpt-2/encodings/main/%s or pass the right path)",
                 what, path, why, what);
    }
    unsigned char *buf = (unsigned char *)mallocCheck((size_t)size + 1);
    if (size > 0 && fread(buf, 1, (size_t)size, f) != (size_t)size) {
        llmc_die("reading %s '%s' failed: %s", what, path, strerror(errno));
    }
    fclose(f);
    buf[size] = '\0';
    *n = (size_t)size;
    return buf;
}

// line number (1-based) of a byte offset, for messages
static inline long bpe_line_of(const unsigned char *buf, size_t off) {
    long line = 1;
    for (size_t i = 0; i < off; i++) { line += buf[i] == '\n'; }
    return line;
}

static inline void bpe_free(BPE *b) {
    free(b->tok_bytes); free(b->tok_off); free(b->tok_len);
    free(b->pairs);
    if (b->re) { pcre2_code_free(b->re); }
    memset(b, 0, sizeof(*b));
}

// GPT-2's byte map inverted: code point -> byte, -1 for code points the map does not use
static inline void bpe_cp_to_byte(int cp_to_byte[324]) {
    uint32_t byte_to_cp[256];
    bpe_byte_map(byte_to_cp);
    for (int i = 0; i < 324; i++) { cp_to_byte[i] = -1; }
    for (int i = 0; i < 256; i++) { cp_to_byte[byte_to_cp[i]] = i; }
}

// encoder.json as read: entry i is token ids[i] with bytes all[offs[i] .. offs[i]+lens[i])
typedef struct {
    size_t n, cap;
    long long *ids;
    uint32_t *offs, *lens;
    ByteBuf all;
    long long eot;  // the id of <|endoftext|>, -1 until found
} BpeEntries;

static inline void bpe_entries_add(BpeEntries *e, long long id, const ByteBuf *raw, const char *path) {
    if (e->n == e->cap) {
        e->cap = e->cap ? 2 * e->cap : 65536;
        e->ids = (long long *)realloc(e->ids, e->cap * sizeof(long long));
        e->offs = (uint32_t *)realloc(e->offs, e->cap * sizeof(uint32_t));
        e->lens = (uint32_t *)realloc(e->lens, e->cap * sizeof(uint32_t));
        if (!e->ids || !e->offs || !e->lens) { llmc_die("out of host memory reading %s", path); }
    }
    e->ids[e->n] = id;
    e->offs[e->n] = (uint32_t)e->all.n;
    e->lens[e->n] = (uint32_t)raw->n;
    bytebuf_put(&e->all, raw->data, raw->n);
    e->n++;
}

// 1. encoder.json, {"token": id, ...}, into e: each key decoded from the byte map into raw bytes
static inline void bpe_read_encoder(BpeEntries *e, const char *encoder_path, const int cp_to_byte[324]) {
    size_t jn;
    unsigned char *js = bpe_read_file(encoder_path, &jn, "encoder.json");
    JsonCur j;
    json_init(&j, js, jn);
    ByteBuf key = {0}, raw = {0};
    memset(e, 0, sizeof(*e));
    e->eot = -1;
    if (!json_eat(&j, '{')) {
        llmc_die("%s: bad JSON at byte %lld: expected '{' (is this GPT-2's encoder.json?)", encoder_path, json_offset(&j));
    }
    if (!json_eat(&j, '}')) {
        for (;;) {
            key.n = 0;
            long long id;
            if (!json_string(&j, &key) || !json_eat(&j, ':') || !json_int(&j, &id)) {
                llmc_die("%s: bad JSON at byte %lld (line %ld): %s", encoder_path, json_offset(&j),
                         bpe_line_of(js, (size_t)json_offset(&j)), j.err ? j.err : "expected ':'");
            }
            raw.n = 0;
            if (key.n == 13 && memcmp(key.data, "<|endoftext|>", 13) == 0) {
                if (e->eot >= 0) { llmc_die("%s: <|endoftext|> appears twice", encoder_path); }
                e->eot = id;
                bytebuf_put(&raw, key.data, key.n);
            } else if (key.n == 0 || !bpe_unmap(key.data, key.n, cp_to_byte, &raw)) {
                llmc_die("%s: token \"%.*s\" (id %lld) is not in GPT-2's byte encoding; the file is not a "
                         "GPT-2 byte-level BPE encoder.json", encoder_path, (int)(key.n < 60 ? key.n : 60),
                         (const char *)key.data, id);
            }
            bpe_entries_add(e, id, &raw, encoder_path);
            if (json_eat(&j, ',')) { continue; }
            if (json_eat(&j, '}')) { break; }
            llmc_die("%s: bad JSON at byte %lld (line %ld): expected ',' or '}'", encoder_path,
                     json_offset(&j), bpe_line_of(js, (size_t)json_offset(&j)));
        }
    }
    json_ws(&j);
    if (j.p != j.end) { llmc_die("%s: bad JSON: unexpected data after the closing '}' at byte %lld", encoder_path, json_offset(&j)); }
    free(js);
    bytebuf_free(&key);
    bytebuf_free(&raw);
    if (e->n == 0) { llmc_die("%s: holds no tokens", encoder_path); }
    if (e->n > 65535) { llmc_die("%s: %zu tokens; token shards store ids as uint16, so at most 65535", encoder_path, e->n); }
    if (e->eot < 0) { llmc_die("%s: has no <|endoftext|> entry; this is not GPT-2's encoder.json", encoder_path); }
}

// 2. the token table id -> bytes from the entries, whose ids must be exactly 0..n-1 (takes e->all)
static inline void bpe_set_tokens(BPE *b, BpeEntries *e, const char *encoder_path) {
    const size_t n = e->n;
    b->vocab_size = (int)n;
    b->eot_token = (int)e->eot;
    b->tok_off = (uint32_t *)mallocCheck(n * sizeof(uint32_t));
    b->tok_len = (uint32_t *)mallocCheck(n * sizeof(uint32_t));
    for (size_t i = 0; i < n; i++) { b->tok_len[i] = UINT32_MAX; }
    for (size_t i = 0; i < n; i++) {
        if (e->ids[i] < 0 || e->ids[i] >= (long long)n) {
            llmc_die("%s: id %lld is out of range; %zu entries need ids 0..%zu", encoder_path, e->ids[i], n, n - 1);
        }
        if (b->tok_len[e->ids[i]] != UINT32_MAX) { llmc_die("%s: id %lld is used twice", encoder_path, e->ids[i]); }
        b->tok_off[e->ids[i]] = e->offs[i];
        b->tok_len[e->ids[i]] = e->lens[i];
    }
    b->tok_bytes = e->all.data;  // owned by b from here on
    free(e->ids); free(e->offs); free(e->lens);
}

// 3. bytes -> id (to check for duplicates and to resolve merges), and the token of every single byte
static inline void bpe_index_tokens(BPE *b, BpeStrMap *m, const char *encoder_path) {
    const size_t n = (size_t)b->vocab_size;
    m->mask = 1;
    while (m->mask < 4 * n) { m->mask <<= 1; }
    m->slot = (uint32_t *)callocCheck(m->mask, sizeof(uint32_t));
    m->mask -= 1;
    for (size_t id = 0; id < n; id++) {
        if ((int)id == b->eot_token) { continue; }  // special: never the result of BPE
        uint32_t prev = bpe_strmap_find(b, m, b->tok_bytes + b->tok_off[id], b->tok_len[id], (int)id);
        if (prev != BPE_NONE) { llmc_die("%s: ids %u and %zu are the same token", encoder_path, prev, id); }
    }
    for (int c = 0; c < 256; c++) {
        unsigned char byte = (unsigned char)c;
        uint32_t id = bpe_strmap_find(b, m, &byte, 1, -1);
        if (id == BPE_NONE) { llmc_die("%s: has no token for the single byte 0x%02x; not a byte-level BPE", encoder_path, c); }
        b->byte_token[c] = id;
    }
    // GPT-2 numbers the byte tokens 0..255 in the order of their code points in the byte map (as
    // tiktoken checks too): other ids would encode every text into other tokens without a word
    int cp_to_byte[324];
    bpe_cp_to_byte(cp_to_byte);
    for (uint32_t cp = 0, want = 0; cp < 324; cp++) {
        const int c = cp_to_byte[cp];
        if (c < 0) { continue; }
        if (b->byte_token[c] != want) {
            llmc_die("%s: the byte 0x%02x has id %u, but GPT-2 numbers the 256 byte tokens first, in its byte order "
                     "(expected id %u): not GPT-2's encoder.json", encoder_path, c, b->byte_token[c], want);
        }
        want++;
    }
}

// the empty merge table: open addressing at load factor <= 0.5
static inline void bpe_pairs_init(BPE *b) {
    size_t pcap = 1;
    while (pcap < 2 * (size_t)b->vocab_size) { pcap <<= 1; }
    b->pairs = (BpePair *)mallocCheck(pcap * sizeof(BpePair));
    for (size_t i = 0; i < pcap; i++) { b->pairs[i].key = UINT64_MAX; }
    b->pair_mask = (uint32_t)(pcap - 1);
    b->pair_shift = 64;
    for (size_t c = pcap; c > 1; c >>= 1) { b->pair_shift--; }
}

// what reading vocab.bpe needs from line to line
typedef struct {
    const char *path, *encoder_path;
    const unsigned char *text;  // the whole file (for line numbers in messages)
    const int *cp_to_byte;
    const BpeStrMap *map;
    int32_t *created;           // created[id] = rank of the merge that makes token id (bytes: -1)
    ByteBuf left, right, both;
} BpeMergeReader;

// the merge on line [pos, line_end) of vocab.bpe ("left right"), with rank `rank`, into the table
static inline void bpe_add_merge(BPE *b, BpeMergeReader *r, size_t pos, size_t line_end, int rank) {
    const unsigned char *vs = r->text;
    const char *merges_path = r->path, *encoder_path = r->encoder_path;
    const size_t n = (size_t)b->vocab_size;
    const unsigned char *sp = (const unsigned char *)memchr(vs + pos, ' ', line_end - pos);
    if (sp == NULL || sp == vs + pos || sp + 1 == vs + line_end ||
        memchr(sp + 1, ' ', (size_t)(vs + line_end - (sp + 1))) != NULL) {
        llmc_die("%s line %ld: expected two symbols separated by one space, got \"%.*s\"", merges_path,
                 bpe_line_of(vs, pos), (int)(line_end - pos < 60 ? line_end - pos : 60), (const char *)(vs + pos));
    }
    r->left.n = r->right.n = r->both.n = 0;
    if (!bpe_unmap(vs + pos, (size_t)(sp - (vs + pos)), r->cp_to_byte, &r->left) ||
        !bpe_unmap(sp + 1, (size_t)(vs + line_end - (sp + 1)), r->cp_to_byte, &r->right)) {
        llmc_die("%s line %ld: a symbol is not in GPT-2's byte encoding", merges_path, bpe_line_of(vs, pos));
    }
    uint32_t a = bpe_strmap_find(b, r->map, r->left.data, r->left.n, -1);
    uint32_t c = bpe_strmap_find(b, r->map, r->right.data, r->right.n, -1);
    bytebuf_put(&r->both, r->left.data, r->left.n);
    bytebuf_put(&r->both, r->right.data, r->right.n);
    uint32_t t = bpe_strmap_find(b, r->map, r->both.data, r->both.n, -1);
    if (a == BPE_NONE || c == BPE_NONE || t == BPE_NONE) {
        llmc_die("%s line %ld: merge \"%.*s\" uses or makes a token that %s does not have; "
                 "encoder.json and vocab.bpe must come from the same tokenizer", merges_path,
                 bpe_line_of(vs, pos), (int)(line_end - pos < 60 ? line_end - pos : 60),
                 (const char *)(vs + pos), encoder_path);
    }
    if (r->created[a] >= rank || r->created[c] >= rank) {
        llmc_die("%s line %ld: merge uses a symbol before the merge that makes it; the merges are not in rank order",
                 merges_path, bpe_line_of(vs, pos));
    }
    if (t != (uint32_t)(256 + rank)) {
        llmc_die("%s line %ld: this merge makes token id %u in %s, but GPT-2 numbers merges in file order "
                 "(expected id %d): the two files disagree on the merge order", merges_path,
                 bpe_line_of(vs, pos), t, encoder_path, 256 + rank);
    }
    if (r->created[t] != INT32_MAX) {
        llmc_die("%s line %ld: this merge makes a token that an earlier line (or a single byte) already makes",
                 merges_path, bpe_line_of(vs, pos));
    }
    r->created[t] = rank;
    uint64_t k = ((uint64_t)a << 32) | c;
    uint32_t slot = (uint32_t)((k * 0x9E3779B97F4A7C15ULL) >> b->pair_shift);
    while (b->pairs[slot].key != UINT64_MAX) {
        if (b->pairs[slot].key == k) { llmc_die("%s line %ld: duplicate merge", merges_path, bpe_line_of(vs, pos)); }
        slot = (slot + 1) & b->pair_mask;
    }
    if ((size_t)rank + 1 >= n) {
        llmc_die("%s: more merges than %s can hold (%zu tokens = 256 bytes + merges + <|endoftext|>)",
                 merges_path, encoder_path, n);
    }
    b->pairs[slot].key = k;
    b->pairs[slot].rank = (uint32_t)rank;
    b->pairs[slot].id = t;
}

// 4. vocab.bpe: "#version: 0.2" then one merge per line, "left right", in rank order
static inline void bpe_read_merges(BPE *b, const BpeStrMap *m, const char *merges_path, const char *encoder_path,
                                   const int cp_to_byte[324]) {
    const size_t n = (size_t)b->vocab_size;
    size_t vn;
    unsigned char *vs = bpe_read_file(merges_path, &vn, "vocab.bpe");
    size_t pos = 0;
    if (vn > 0 && vs[0] == '#') {  // the version line
        while (pos < vn && vs[pos] != '\n') { pos++; }
        pos++;
    }
    BpeMergeReader r;
    memset(&r, 0, sizeof(r));
    r.path = merges_path;
    r.encoder_path = encoder_path;
    r.text = vs;
    r.cp_to_byte = cp_to_byte;
    r.map = m;
    r.created = (int32_t *)mallocCheck(n * sizeof(int32_t));  // checks training order
    for (size_t i = 0; i < n; i++) { r.created[i] = INT32_MAX; }
    for (int c = 0; c < 256; c++) { r.created[b->byte_token[c]] = -1; }
    bpe_pairs_init(b);
    int rank = 0;
    while (pos < vn) {
        size_t eol = pos;
        while (eol < vn && vs[eol] != '\n') { eol++; }
        size_t line_end = eol;
        if (line_end > pos && vs[line_end - 1] == '\r') { line_end--; }
        if (line_end == pos) { pos = eol + 1; continue; }  // blank line (the file's final newline)
        bpe_add_merge(b, &r, pos, line_end, rank);
        rank++;
        pos = eol + 1;
    }
    b->num_merges = rank;
    free(vs); free(r.created);
    bytebuf_free(&r.left); bytebuf_free(&r.right); bytebuf_free(&r.both);
    if ((size_t)(256 + b->num_merges + 1) != n) {
        llmc_die("%s has %zu tokens but %s has %d merges: a GPT-2 tokenizer has 256 byte tokens + one token "
                 "per merge + <|endoftext|> = %d; the two files do not belong together (or one is truncated)",
                 encoder_path, n, merges_path, b->num_merges, 256 + b->num_merges + 1);
    }
}

// 5. the pre-tokenizer: GPT-2's pattern, JIT-compiled where PCRE2 can
static inline void bpe_compile_pattern(BPE *b) {
    int errcode;
    PCRE2_SIZE erroff;
    b->re = pcre2_compile((PCRE2_SPTR)bpe_pattern, PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP, &errcode, &erroff, NULL);
    if (b->re == NULL) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(errcode, msg, sizeof(msg));
        llmc_die("PCRE2 cannot compile GPT-2's pattern at offset %zu: %s (PCRE2 built without Unicode support?)",
                 (size_t)erroff, (const char *)msg);
    }
    b->jit = pcre2_jit_compile(b->re, PCRE2_JIT_COMPLETE) == 0;
}

// load encoder.json and vocab.bpe; every inconsistency is fatal with the file and the reason
static inline void bpe_load(BPE *b, const char *encoder_path, const char *merges_path) {
    memset(b, 0, sizeof(*b));
    int cp_to_byte[324];
    bpe_cp_to_byte(cp_to_byte);
    BpeEntries e;
    bpe_read_encoder(&e, encoder_path, cp_to_byte);
    bpe_set_tokens(b, &e, encoder_path);
    BpeStrMap m;
    bpe_index_tokens(b, &m, encoder_path);
    bpe_read_merges(b, &m, merges_path, encoder_path, cp_to_byte);
    free(m.slot);
    bpe_compile_pattern(b);
}

// ----------------------------------------------------------------------------
// per-thread encoder state

// Cache of recently encoded pieces, per worker. Most pieces of real text are common words, and
// encoding them again costs more than looking them up. One 64-byte cache line per entry, two
// entries per set (least recently used one is replaced): fixed memory, nothing to clear.
#define BPE_CACHE_KEY 24         // longest cached piece, bytes
#define BPE_CACHE_TOKS 15        // most tokens of a cached piece
#define BPE_CACHE_BITS 16        // 65536 entries (32768 sets of 2), 4 MiB per worker

typedef struct {
    uint64_t hash;
    unsigned char key[BPE_CACHE_KEY];  // zero-padded
    uint16_t toks[BPE_CACHE_TOKS];     // ids fit in 16 bits (bpe_load checks vocab <= 65535)
    uint8_t len, ntok;                 // len 0 = empty entry
} BpeCacheEntry;
typedef char bpe_cache_entry_is_one_cache_line[sizeof(BpeCacheEntry) == 64 ? 1 : -1];

typedef struct {
    const BPE *bpe;
    pcre2_match_data *md;
    pcre2_match_context *mctx;
    pcre2_jit_stack *jstack;
    // scratch for one piece: symbols as a linked list, and a heap of candidate merges
    uint32_t *sym_id;
    int32_t *sym_next, *sym_prev;
    uint64_t *heap;
    size_t scratch_cap;
    BpeCacheEntry *cache;      // [1 << BPE_CACHE_BITS]
    // statistics
    long long invalid_bytes;   // bytes encoded as lone byte tokens because they were not valid UTF-8
} BPEWorker;

static inline void bpe_worker_init(BPEWorker *w, const BPE *b) {
    memset(w, 0, sizeof(*w));
    w->bpe = b;
    w->md = pcre2_match_data_create_from_pattern(b->re, NULL);
    if (w->md == NULL) { llmc_die("PCRE2: out of memory creating match data"); }
    if (b->jit) {
        // a JIT stack that may grow to 8 MiB (PCRE2's default is 32 KiB): headroom for unusual
        // inputs; the memory is only used as the stack grows
        w->mctx = pcre2_match_context_create(NULL);
        w->jstack = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, NULL);
        if (w->mctx == NULL || w->jstack == NULL) { llmc_die("PCRE2: out of memory creating the JIT stack"); }
        pcre2_jit_stack_assign(w->mctx, NULL, w->jstack);
    }
    size_t cache_bytes = ((size_t)1 << BPE_CACHE_BITS) * sizeof(BpeCacheEntry);
    if (posix_memalign((void **)&w->cache, 64, cache_bytes) != 0) {
        llmc_die("out of host memory allocating the %zu-byte piece cache", cache_bytes);
    }
    memset(w->cache, 0, cache_bytes);
}

static inline void bpe_worker_free(BPEWorker *w) {
    if (w->md) { pcre2_match_data_free(w->md); }
    if (w->mctx) { pcre2_match_context_free(w->mctx); }
    if (w->jstack) { pcre2_jit_stack_free(w->jstack); }
    free(w->sym_id); free(w->sym_next); free(w->sym_prev); free(w->heap);
    free(w->cache);
    memset(w, 0, sizeof(*w));
}

static inline void bpe_heap_push(uint64_t *h, size_t *n, uint64_t v) {
    size_t i = (*n)++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (h[p] <= v) { break; }
        h[i] = h[p];
        i = p;
    }
    h[i] = v;
}
static inline uint64_t bpe_heap_pop(uint64_t *h, size_t *n) {
    uint64_t top = h[0];
    uint64_t v = h[--(*n)];
    size_t i = 0, m = *n;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= m) { break; }
        if (c + 1 < m && h[c + 1] < h[c]) { c++; }
        if (v <= h[c]) { break; }
        h[i] = h[c];
        i = c;
    }
    if (m > 0) { h[i] = v; }
    return top;
}

// BPE on one pre-tokenized piece (n >= 2 bytes): O(n log n) with a heap keyed by (rank, position),
// so the lowest rank wins and ties go to the leftmost pair
static inline void bpe_merge_piece(BPEWorker *w, const unsigned char *s, size_t n, TokVec *out) {
    const BPE *b = w->bpe;
    if (n >= 0x7FFFFFFF) { llmc_die("a single pre-token of %zu bytes is too long to encode", n); }
    if (n > w->scratch_cap) {
        size_t cap = n < 256 ? 256 : n;
        free(w->sym_id); free(w->sym_next); free(w->sym_prev); free(w->heap);
        w->sym_id = (uint32_t *)mallocCheck(cap * sizeof(uint32_t));
        w->sym_next = (int32_t *)mallocCheck(cap * sizeof(int32_t));
        w->sym_prev = (int32_t *)mallocCheck(cap * sizeof(int32_t));
        w->heap = (uint64_t *)mallocCheck(3 * cap * sizeof(uint64_t));  // n-1 initial + 2 per merge
        w->scratch_cap = cap;
    }
    uint32_t *id = w->sym_id;
    int32_t *next = w->sym_next, *prev = w->sym_prev;
    uint64_t *heap = w->heap;
    size_t hn = 0;
    for (size_t i = 0; i < n; i++) {
        id[i] = b->byte_token[s[i]];
        next[i] = (i + 1 < n) ? (int32_t)(i + 1) : -1;
        prev[i] = (int32_t)i - 1;
    }
    uint32_t merged;
    for (size_t i = 0; i + 1 < n; i++) {
        uint32_t r = bpe_pair_lookup(b, id[i], id[i + 1], &merged);
        if (r != BPE_NONE) { bpe_heap_push(heap, &hn, ((uint64_t)r << 32) | i); }
    }
    while (hn > 0) {
        uint64_t e = bpe_heap_pop(heap, &hn);
        uint32_t r = (uint32_t)(e >> 32);
        int32_t i = (int32_t)(e & 0xFFFFFFFFu);
        // stale entries: the left symbol was absorbed, or the pair at i changed since the push
        // (a rank names exactly one pair, so an equal rank means the same pair)
        if (id[i] == BPE_NONE) { continue; }
        int32_t k = next[i];
        if (k < 0) { continue; }
        if (bpe_pair_lookup(b, id[i], id[k], &merged) != r) { continue; }
        id[i] = merged;
        id[k] = BPE_NONE;
        next[i] = next[k];
        if (next[k] >= 0) { prev[next[k]] = i; }
        if (prev[i] >= 0) {
            uint32_t rr = bpe_pair_lookup(b, id[prev[i]], id[i], &merged);
            if (rr != BPE_NONE) { bpe_heap_push(heap, &hn, ((uint64_t)rr << 32) | (uint32_t)prev[i]); }
        }
        if (next[i] >= 0) {
            uint32_t rr = bpe_pair_lookup(b, id[i], id[next[i]], &merged);
            if (rr != BPE_NONE) { bpe_heap_push(heap, &hn, ((uint64_t)rr << 32) | (uint32_t)i); }
        }
    }
    for (int32_t i = 0; i >= 0; i = next[i]) { tokvec_push(out, id[i]); }
}

static inline int bpe_cache_match(const BpeCacheEntry *e, uint64_t h, size_t n, const uint64_t key[3]) {
    uint64_t ek[BPE_CACHE_KEY / 8];
    memcpy(ek, e->key, sizeof(ek));
    return e->hash == h && e->len == n && ek[0] == key[0] && ek[1] == key[1] && ek[2] == key[2];
}

static inline void bpe_encode_piece(BPEWorker *w, const unsigned char *s, size_t n, TokVec *out) {
    if (n == 1) { tokvec_push(out, w->bpe->byte_token[s[0]]); return; }
    if (n > BPE_CACHE_KEY) { bpe_merge_piece(w, s, n, out); return; }
    uint64_t key[BPE_CACHE_KEY / 8] = {0, 0, 0};
    memcpy(key, s, n);
    uint64_t h = bpe_hash_bytes(s, n);
    BpeCacheEntry *set = &w->cache[(h & ((((uint64_t)1 << BPE_CACHE_BITS) - 1) >> 1)) << 1];
    BpeCacheEntry *e = NULL;
    if (bpe_cache_match(&set[0], h, n, key)) {
        e = &set[0];
    } else if (bpe_cache_match(&set[1], h, n, key)) {
        BpeCacheEntry t = set[1];  // most recently used goes first
        set[1] = set[0];
        set[0] = t;
        e = &set[0];
    }
    if (e != NULL) {
        tokvec_reserve(out, e->ntok);
        for (int i = 0; i < e->ntok; i++) { out->data[out->n + i] = e->toks[i]; }
        out->n += e->ntok;
        return;
    }
    size_t before = out->n;
    bpe_merge_piece(w, s, n, out);
    size_t nt = out->n - before;
    if (nt <= BPE_CACHE_TOKS) {
        set[1] = set[0];  // evict the least recently used
        e = &set[0];
        e->hash = h;
        memcpy(e->key, key, sizeof(key));
        e->len = (uint8_t)n;
        e->ntok = (uint8_t)nt;
        for (size_t i = 0; i < nt; i++) { e->toks[i] = (uint16_t)out->data[before + i]; }
    }
}

// pre-tokenize and encode one valid UTF-8 run
static inline void bpe_encode_valid(BPEWorker *w, const unsigned char *s, size_t n, TokVec *out) {
    const BPE *b = w->bpe;
    PCRE2_SIZE *ov = pcre2_get_ovector_pointer(w->md);
    size_t pos = 0;
    while (pos < n) {
        int rc = b->jit ? pcre2_jit_match(b->re, s, n, pos, 0, w->md, w->mctx)
                        : pcre2_match(b->re, s, n, pos, PCRE2_NO_UTF_CHECK, w->md, NULL);
        if (rc < 0) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(rc, msg, sizeof(msg));
            llmc_die("PCRE2 match failed at byte %zu of a text run: %s", pos, (const char *)msg);
        }
        // the pattern matches every character, so each match starts where the previous ended
        if (ov[0] != pos || ov[1] <= pos) { llmc_die("internal error: pre-tokenizer skipped text at byte %zu", pos); }
        bpe_encode_piece(w, s + pos, ov[1] - pos, out);
        pos = ov[1];
    }
}

// encode a text (any bytes; see the top comment for invalid UTF-8); appends to out
static inline void bpe_encode(BPEWorker *w, const void *text, size_t n, TokVec *out) {
    const unsigned char *s = (const unsigned char *)text;
    size_t pos = 0;
    while (pos < n) {
        size_t run = utf8_valid_prefix(s + pos, n - pos);
        if (run > 0) { bpe_encode_valid(w, s + pos, run, out); }
        pos += run;
        if (pos < n) {
            tokvec_push(out, w->bpe->byte_token[s[pos]]);
            w->invalid_bytes++;
            pos++;
        }
    }
}

// bytes of a token
static inline const unsigned char *bpe_token_bytes(const BPE *b, uint32_t id, size_t *len) {
    *len = b->tok_len[id];
    return b->tok_bytes + b->tok_off[id];
}

#endif  // LLMC_BPE_H
