/*
 * export_hf: GPT-2 model .bin <-> Hugging Face (transformers GPT2LMHeadModel) folder.
 *
 *   ./export_hf -i model.bin -o out_dir [--bf16 | --fp32] [--tokenizer DIR] [--force]
 *       writes out_dir/model.safetensors, config.json, generation_config.json
 *       (and vocab.json + merges.txt with --tokenizer)
 *   ./export_hf --to-bin -i hf_dir_or_file.safetensors -o model.bin [--bf16 | --fp32] [--n-head N] [--force]
 *       reads a safetensors GPT-2 (F32, BF16 or F16) back into a model .bin (version 3, or 5 with --bf16)
 *
 * Layout facts this file relies on:
 * - safetensors: 8-byte little-endian header length N, N bytes of JSON
 *   {"__metadata__": {str: str}, "<name>": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, ...}
 *   (offsets relative to the first byte after the header; row-major, little-endian), then the data.
 *   transformers refuses a file whose __metadata__ "format" is not "pt" (or tf/flax/mlx), so we write "pt".
 * - GPT2LMHeadModel keeps its matmul weights in Conv1D modules stored (in, out), transposed relative
 *   to our (out, in); the LM head is tied to wte and is not stored; its vocabulary is V, not Vp.
 * - Checkpoints from the hub omit the "transformer." prefix and may hold the attention-mask buffers
 *   h.N.attn.bias / h.N.attn.masked_bias; both spellings are read.
 */
#include <dirent.h>
#include <math.h>
#include "../../llmc/model_io.h"
#include "../../llmc/dataloader.h"  // SHARD_MAGIC: a shard given as -i is named as one

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "export_hf reads and writes little-endian files by reinterpreting memory; build it on a little-endian host"
#endif

#define ST_MAX_HEADER (100LL << 20)  // the safetensors reference reader rejects larger headers too

static void usage(FILE *f) {
    fprintf(f,
        "usage:\n"
        "  export_hf -i MODEL.bin -o OUT_DIR [options]        model .bin (v3/v5) -> Hugging Face folder\n"
        "  export_hf --to-bin -i HF_DIR|FILE.safetensors -o MODEL.bin [options]   and back\n"
        "\n"
        "  -i PATH          input: a model .bin; with --to-bin a folder holding model.safetensors\n"
        "                   (and config.json) or a .safetensors file (config.json next to it is used if present)\n"
        "  -o PATH          output folder (export) or model .bin (--to-bin)\n"
        "  --to-bin         convert safetensors -> model .bin instead of .bin -> folder\n"
        "  --bf16, --fp32   output precision. Export: safetensors dtype, default that of the .bin\n"
        "                   (v3 -> F32, v5 -> BF16). --to-bin: .bin version 5 (bf16) or 3 (fp32, default)\n"
        "  --force          replace an existing output (files in an existing folder are overwritten; never the input)\n"
        "  --tokenizer DIR  export: also write vocab.json and merges.txt, copied from DIR/encoder.json and\n"
        "                   DIR/vocab.bpe (OpenAI's GPT-2 tokenizer files, e.g. ../shared/data/gpt2)\n"
        "  --n-head N       --to-bin: number of heads when there is no config.json (default: C/64)\n"
        "  -h, --help       this text\n");
}

// a bad flag: one line naming it (the usage is --help's)
static void bad_flag(const char *fmt, const char *what) {
    char msg[512];
    snprintf(msg, sizeof(msg), fmt, what);
    llmc_die("%s (see --help)", msg);
}

static void *reallocCheck(void *p, size_t size) {
    void *q = realloc(p, size > 0 ? size : 1);
    if (q == NULL) { llmc_die("out of host memory reallocating %zu bytes", size); }
    return q;
}

// what: the file's role and flag, for messages ("config.json (-i)")
static char *read_whole_file(const char *path, const char *what, size_t *len) {
    long long size;
    FILE *fp = fopen_regular(path, what, &size);
    char *buf = (char *)mallocCheck((size_t)size + 1);
    if (size > 0 && fread(buf, 1, (size_t)size, fp) != (size_t)size) {
        llmc_die("reading '%s' failed (%lld bytes expected)", path, size);
    }
    fcloseCheck(fp);
    buf[size] = '\0';
    *len = (size_t)size;
    return buf;
}

// ----------------------------------------------------------------------------
// a small JSON reader (RFC 8259) for the safetensors header and config.json

enum { JSON_NULL, JSON_BOOL, JSON_NUMBER, JSON_STRING, JSON_ARRAY, JSON_OBJECT };

typedef struct JsonValue {
    int type;
    int boolean;              // JSON_BOOL
    double number;            // JSON_NUMBER
    int is_integer;           // JSON_NUMBER written without fraction or exponent and fits in long long
    long long integer;        // ... then its exact value
    char *string;             // JSON_STRING, NUL-terminated UTF-8
    int count;                // JSON_ARRAY / JSON_OBJECT: number of items
    struct JsonValue *items;  // their values
    char **keys;              // JSON_OBJECT: their keys
} JsonValue;

// a bound on the values of one JSON text: GPT-2's largest safetensors header (1.5B) has about
// 5,000, and each value parsed costs about 100 bytes, so a header cannot make us take gigabytes
#define JSON_MAX_VALUES 400000
#define TEXT_OF_(x) #x
#define TEXT_OF(x) TEXT_OF_(x)  // a macro's value as a string literal

typedef struct {
    const char *start, *p, *end;
    int depth;
    long values;
    char err[200];
} JsonParser;

static int json_fail(JsonParser *jp, const char *what) {
    if (jp->err[0] == '\0') { snprintf(jp->err, sizeof(jp->err), "%s at byte %ld", what, (long)(jp->p - jp->start)); }
    return 0;
}

static void json_skip_ws(JsonParser *jp) {
    while (jp->p < jp->end && (*jp->p == ' ' || *jp->p == '\t' || *jp->p == '\n' || *jp->p == '\r')) { jp->p++; }
}

static void utf8_put(char *out, size_t *n, unsigned cp) {
    if (cp < 0x80) {
        out[(*n)++] = (char)cp;
    } else if (cp < 0x800) {
        out[(*n)++] = (char)(0xC0 | (cp >> 6));
        out[(*n)++] = (char)(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        out[(*n)++] = (char)(0xE0 | (cp >> 12));
        out[(*n)++] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[(*n)++] = (char)(0x80 | (cp & 0x3F));
    } else {
        out[(*n)++] = (char)(0xF0 | (cp >> 18));
        out[(*n)++] = (char)(0x80 | ((cp >> 12) & 0x3F));
        out[(*n)++] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[(*n)++] = (char)(0x80 | (cp & 0x3F));
    }
}

static int json_hex4(JsonParser *jp, unsigned *cp) {
    if (jp->end - jp->p < 4) { return json_fail(jp, "truncated \\u escape"); }
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        char c = *jp->p++;
        v <<= 4;
        if (c >= '0' && c <= '9') { v |= (unsigned)(c - '0'); }
        else if (c >= 'a' && c <= 'f') { v |= (unsigned)(c - 'a' + 10); }
        else if (c >= 'A' && c <= 'F') { v |= (unsigned)(c - 'A' + 10); }
        else { return json_fail(jp, "bad \\u escape"); }
    }
    *cp = v;
    return 1;
}

// parses a string at jp->p (which is at the opening quote) into a new NUL-terminated buffer
static int json_string(JsonParser *jp, char **out) {
    jp->p++;  // opening quote
    // the decoded string is never longer than the raw text up to the closing quote
    const char *q = jp->p;
    while (q < jp->end && *q != '"') { q += (*q == '\\' && q + 1 < jp->end) ? 2 : 1; }
    if (q >= jp->end) { return json_fail(jp, "unterminated string"); }
    char *s = (char *)mallocCheck((size_t)(q - jp->p) + 1);
    size_t n = 0;
    while (*jp->p != '"') {
        unsigned char c = (unsigned char)*jp->p++;
        if (c < 0x20) { free(s); return json_fail(jp, "control character in string"); }
        if (c != '\\') { s[n++] = (char)c; continue; }
        char e = *jp->p++;
        switch (e) {
            case '"': s[n++] = '"'; break;
            case '\\': s[n++] = '\\'; break;
            case '/': s[n++] = '/'; break;
            case 'b': s[n++] = '\b'; break;
            case 'f': s[n++] = '\f'; break;
            case 'n': s[n++] = '\n'; break;
            case 'r': s[n++] = '\r'; break;
            case 't': s[n++] = '\t'; break;
            case 'u': {
                unsigned cp;
                if (!json_hex4(jp, &cp)) { free(s); return 0; }
                if (cp >= 0xD800 && cp < 0xDC00 && jp->end - jp->p >= 6 && jp->p[0] == '\\' && jp->p[1] == 'u') {
                    unsigned lo;
                    jp->p += 2;
                    if (!json_hex4(jp, &lo)) { free(s); return 0; }
                    if (lo < 0xDC00 || lo > 0xDFFF) { free(s); return json_fail(jp, "bad surrogate pair"); }
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                }
                // an escape is at least as long as its UTF-8 encoding (6 raw bytes -> at most 3,
                // 12 -> 4), so the buffer sized from the raw text is enough
                utf8_put(s, &n, cp);
                break;
            }
            default: free(s); return json_fail(jp, "bad escape in string");
        }
    }
    jp->p++;  // closing quote
    s[n] = '\0';
    *out = s;
    return 1;
}

static int json_value(JsonParser *jp, JsonValue *v);

static int json_container(JsonParser *jp, JsonValue *v, int is_object) {
    char close = is_object ? '}' : ']';
    if (++jp->depth > 64) { return json_fail(jp, "nesting deeper than 64"); }
    jp->p++;
    v->type = is_object ? JSON_OBJECT : JSON_ARRAY;
    int cap = 0;
    json_skip_ws(jp);
    if (jp->p < jp->end && *jp->p == close) { jp->p++; jp->depth--; return 1; }
    for (;;) {
        if (v->count == cap) {
            cap = cap ? 2 * cap : 8;
            v->items = (JsonValue *)reallocCheck(v->items, (size_t)cap * sizeof(JsonValue));
            if (is_object) { v->keys = (char **)reallocCheck(v->keys, (size_t)cap * sizeof(char *)); }
        }
        JsonValue *item = &v->items[v->count];
        memset(item, 0, sizeof(*item));
        json_skip_ws(jp);
        if (is_object) {
            if (jp->p >= jp->end || *jp->p != '"') { return json_fail(jp, "expected a key string"); }
            if (!json_string(jp, &v->keys[v->count])) { return 0; }
            json_skip_ws(jp);
            if (jp->p >= jp->end || *jp->p != ':') { free(v->keys[v->count]); return json_fail(jp, "expected ':'"); }
            jp->p++;
        }
        v->count++;  // counted before parsing so that json_free releases a half-parsed item
        if (!json_value(jp, item)) { return 0; }
        json_skip_ws(jp);
        if (jp->p < jp->end && *jp->p == ',') { jp->p++; continue; }
        if (jp->p < jp->end && *jp->p == close) { jp->p++; break; }
        return json_fail(jp, is_object ? "expected ',' or '}'" : "expected ',' or ']'");
    }
    jp->depth--;
    return 1;
}

static int json_number(JsonParser *jp, JsonValue *v) {
    const char *s = jp->p;
    const char *q = s;
    int integral = 1;
    if (q < jp->end && *q == '-') { q++; }
    if (q >= jp->end || !isdigit((unsigned char)*q)) { return json_fail(jp, "bad number"); }
    if (*q == '0') { q++; } else { while (q < jp->end && isdigit((unsigned char)*q)) { q++; } }
    if (q < jp->end && *q == '.') {
        integral = 0;
        q++;
        if (q >= jp->end || !isdigit((unsigned char)*q)) { return json_fail(jp, "bad number"); }
        while (q < jp->end && isdigit((unsigned char)*q)) { q++; }
    }
    if (q < jp->end && (*q == 'e' || *q == 'E')) {
        integral = 0;
        q++;
        if (q < jp->end && (*q == '+' || *q == '-')) { q++; }
        if (q >= jp->end || !isdigit((unsigned char)*q)) { return json_fail(jp, "bad number"); }
        while (q < jp->end && isdigit((unsigned char)*q)) { q++; }
    }
    char *tmp = (char *)mallocCheck((size_t)(q - s) + 1);  // the text is not NUL-terminated after the number
    memcpy(tmp, s, (size_t)(q - s));
    tmp[q - s] = '\0';
    v->type = JSON_NUMBER;
    v->number = strtod(tmp, NULL);
    if (integral) {
        errno = 0;
        long long x = strtoll(tmp, NULL, 10);
        if (errno == 0) { v->is_integer = 1; v->integer = x; }
    }
    free(tmp);
    jp->p = q;
    return 1;
}

static int json_literal(JsonParser *jp, const char *word) {
    size_t n = strlen(word);
    if ((size_t)(jp->end - jp->p) < n || memcmp(jp->p, word, n) != 0) { return json_fail(jp, "unexpected character"); }
    jp->p += n;
    return 1;
}

static int json_value(JsonParser *jp, JsonValue *v) {
    if (++jp->values > JSON_MAX_VALUES) {
        return json_fail(jp, "more than " TEXT_OF(JSON_MAX_VALUES) " values (a GPT-2 header has a few thousand)");
    }
    json_skip_ws(jp);
    if (jp->p >= jp->end) { return json_fail(jp, "unexpected end of text"); }
    switch (*jp->p) {
        case '{': return json_container(jp, v, 1);
        case '[': return json_container(jp, v, 0);
        case '"': v->type = JSON_STRING; return json_string(jp, &v->string);
        case 't': v->type = JSON_BOOL; v->boolean = 1; return json_literal(jp, "true");
        case 'f': v->type = JSON_BOOL; v->boolean = 0; return json_literal(jp, "false");
        case 'n': v->type = JSON_NULL; return json_literal(jp, "null");
        default: return json_number(jp, v);
    }
}

static void json_free(JsonValue *v) {
    for (int i = 0; i < v->count; i++) {
        json_free(&v->items[i]);
        if (v->type == JSON_OBJECT) { free(v->keys[i]); }
    }
    free(v->items);
    free(v->keys);
    free(v->string);
    memset(v, 0, sizeof(*v));
}

// parses text[0..len) as one JSON value; on failure returns 0 with the reason in err
static int json_parse(const char *text, size_t len, JsonValue *root, char *err, size_t errlen) {
    JsonParser jp = {text, text, text + len, 0, 0, {0}};
    memset(root, 0, sizeof(*root));
    int ok = json_value(&jp, root);
    if (ok) {
        json_skip_ws(&jp);
        if (jp.p != jp.end) { ok = json_fail(&jp, "trailing characters after the JSON value"); }
    }
    if (!ok) {
        snprintf(err, errlen, "%s", jp.err);
        json_free(root);
    }
    return ok;
}

static const JsonValue *json_get(const JsonValue *obj, const char *key) {
    if (obj->type != JSON_OBJECT) { return NULL; }
    for (int i = 0; i < obj->count; i++) {
        if (strcmp(obj->keys[i], key) == 0) { return &obj->items[i]; }
    }
    return NULL;
}

// ----------------------------------------------------------------------------
// the GPT-2 tensor map: our 16 tensors (layers stacked) <-> GPT2LMHeadModel's names

typedef struct {
    const char *suffix;  // name after "transformer.h.<layer>."
    int param;           // index into gpt2_param_names
} LayerTensor;

static const LayerTensor layer_tensors[12] = {
    {"ln_1.weight", 2}, {"ln_1.bias", 3},
    {"attn.c_attn.weight", 4}, {"attn.c_attn.bias", 5},
    {"attn.c_proj.weight", 6}, {"attn.c_proj.bias", 7},
    {"ln_2.weight", 8}, {"ln_2.bias", 9},
    {"mlp.c_fc.weight", 10}, {"mlp.c_fc.bias", 11},
    {"mlp.c_proj.weight", 12}, {"mlp.c_proj.bias", 13}};

// one layer's slice of our tensor `param`: (out, in) for the four matmul weights, (n) otherwise
static void layer_tensor_dims(int param, long long C, long long *out, long long *in) {
    switch (param) {
        case 4: *out = 3 * C; *in = C; break;   // qkvw (3C, C)
        case 6: *out = C; *in = C; break;       // attprojw (C, C)
        case 10: *out = 4 * C; *in = C; break;  // fcw (4C, C)
        case 12: *out = C; *in = 4 * C; break;  // fcprojw (C, 4C)
        case 5: *out = 3 * C; *in = 0; break;   // qkvb (3C)
        case 11: *out = 4 * C; *in = 0; break;  // fcb (4C)
        default: *out = C; *in = 0; break;      // LayerNorm weights/biases and the other biases (C)
    }
}

// ----------------------------------------------------------------------------
// .bin -> Hugging Face folder

typedef struct {
    char name[128];
    const float *src;   // first element, in our layout
    long long shape[2]; // HF shape; shape[1] == 0 for a 1-D tensor
    int transpose;      // src is (shape[1], shape[0]) row-major: Conv1D's (in, out) is our (out, in) transposed
} ExportTensor;

static long long export_numel(const ExportTensor *t) { return t->shape[0] * (t->shape[1] ? t->shape[1] : 1); }

typedef struct { char *buf; size_t len, cap; } StrBuf;

static void sb_printf(StrBuf *sb, const char *fmt, ...) LLMC_PRINTF(2, 3);
static void sb_printf(StrBuf *sb, const char *fmt, ...) {
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(sb->buf ? sb->buf + sb->len : NULL, sb->buf ? sb->cap - sb->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0) { llmc_die("formatting failed"); }
        if (sb->buf && sb->len + (size_t)n < sb->cap) { sb->len += (size_t)n; return; }
        sb->cap = (sb->cap + (size_t)n + 1) * 2;
        sb->buf = (char *)reallocCheck(sb->buf, sb->cap);
    }
}

// writes one tensor's data, converting fp32 -> bf16 (round to nearest even) when bf16
static void export_tensor_data(AtomicFile *af, const ExportTensor *t, int bf16, void *row_buf) {
    long long rows = t->shape[0], cols = t->shape[1] ? t->shape[1] : 1;
    for (long long r = 0; r < rows; r++) {
        for (long long c = 0; c < cols; c++) {
            // HF element [r][c]; transposed tensors read our [c][r]
            float x = t->transpose ? t->src[c * rows + r] : t->src[r * cols + c];
            if (bf16) { ((uint16_t *)row_buf)[c] = float_to_bf16(x); } else { ((float *)row_buf)[c] = x; }
        }
        atomic_write(af, row_buf, (size_t)cols * (bf16 ? 2 : 4), 0);
    }
}

static void write_safetensors(const char *path, const ExportTensor *ts, int n, int bf16, const char *source) {
    const char *dtype = bf16 ? "BF16" : "F32";
    long long elem = bf16 ? 2 : 4;
    StrBuf h = {0};
    // "format": "pt" is what transformers checks before it loads a safetensors file
    sb_printf(&h, "{\"__metadata__\":{\"format\":\"pt\",\"source\":\"export_hf from ");
    for (const char *p = source; *p; p++) {  // the source path, JSON-escaped
        unsigned char c = (unsigned char)*p;
        if (c == '"' || c == '\\') { sb_printf(&h, "\\%c", c); }
        else if (c < 0x20) { sb_printf(&h, "\\u%04x", c); }
        else { sb_printf(&h, "%c", c); }
    }
    sb_printf(&h, "\"}");
    long long offset = 0, max_cols = 1;
    for (int i = 0; i < n; i++) {
        long long bytes = export_numel(&ts[i]) * elem;
        if (ts[i].shape[1]) {
            sb_printf(&h, ",\"%s\":{\"dtype\":\"%s\",\"shape\":[%lld,%lld],\"data_offsets\":[%lld,%lld]}",
                      ts[i].name, dtype, ts[i].shape[0], ts[i].shape[1], offset, offset + bytes);
            if (ts[i].shape[1] > max_cols) { max_cols = ts[i].shape[1]; }
        } else {
            sb_printf(&h, ",\"%s\":{\"dtype\":\"%s\",\"shape\":[%lld],\"data_offsets\":[%lld,%lld]}",
                      ts[i].name, dtype, ts[i].shape[0], offset, offset + bytes);
        }
        offset += bytes;
    }
    sb_printf(&h, "}");
    // pad with spaces so the data starts 8-byte aligned (as the reference writer does); JSON allows it
    while ((8 + h.len) % 8 != 0) { sb_printf(&h, " "); }
    uint64_t header_len = (uint64_t)h.len;
    AtomicFile af;
    atomic_open_for(&af, path, "-o");
    atomic_write(&af, &header_len, 8, 0);
    atomic_write(&af, h.buf, h.len, 0);
    void *row_buf = mallocCheck((size_t)max_cols * 4);
    for (int i = 0; i < n; i++) { export_tensor_data(&af, &ts[i], bf16, row_buf); }
    free(row_buf);
    free(h.buf);
    atomic_commit(&af);
}

static void write_text_file(const char *path, const char *text) {
    AtomicFile af;
    atomic_open_for(&af, path, "-o");
    atomic_write(&af, text, strlen(text), 0);
    atomic_commit(&af);
}

static void copy_file(const char *src, const char *dst) {
    size_t len;
    char *data = read_whole_file(src, "--tokenizer file", &len);
    AtomicFile af;
    atomic_open_for(&af, dst, "-o");
    atomic_write(&af, data, len, 0);
    atomic_commit(&af);
    free(data);
}

static void path_join(char *out, size_t cap, const char *dir, const char *name) {
    if ((size_t)snprintf(out, cap, "%s/%s", dir, name) >= cap) { llmc_die("path too long: %s/%s", dir, name); }
}

// --tokenizer: a GPT-2 vocabulary, and both of OpenAI's files in tok_dir. Checked before anything
// is written, so a mistake leaves no half-made folder.
static void export_check_tokenizer(const char *tok_dir, const char *in_path, long long V) {
    if (V != 50257) {
        llmc_die("--tokenizer: the GPT-2 tokenizer has 50257 tokens but '%s' has vocab_size %lld; export without --tokenizer",
                 in_path, V);
    }
    const char *need[2] = {"encoder.json", "vocab.bpe"};
    for (int i = 0; i < 2; i++) {
        char src[4352];
        path_join(src, sizeof(src), tok_dir, need[i]);
        FILE *fp;
        char why[512];
        if (open_regular(src, &fp, NULL, why, sizeof(why)) != 0) {
            llmc_die("--tokenizer: '%s' %s; pass the folder with OpenAI's GPT-2 encoder.json and vocab.bpe", src, why);
        }
        fclose(fp);
    }
}

// whether the export target folder exists. An existing output is touched only with --force: an
// export never silently mixes two models.
static int export_target_exists(const char *out_dir, int force) {
    struct stat st;
    int exists = stat(out_dir, &st) == 0;
    if (exists && !S_ISDIR(st.st_mode)) {
        llmc_die("export target '%s' exists and is not a folder; choose another -o", out_dir);
    }
    if (exists && !force) {
        llmc_die("export target folder '%s' already exists; choose another -o or pass --force to overwrite its files", out_dir);
    }
    return exists;
}

// the model's parameters in fp32, which holds both versions exactly (bf16 -> fp32 -> bf16 is the
// identity); p[i] points at tensor i. Warns where wte's padded rows, which are dropped, are not 0.
static float *export_load_params(const char *in_path, const ModelFileInfo *info, const float *p[NUM_PARAMETER_TENSORS],
                                 size_t sizes[NUM_PARAMETER_TENSORS]) {
    const long long V = info->config.vocab_size, Vp = info->config.padded_vocab_size, C = info->config.channels;
    float *params = (float *)mallocCheck(info->num_params * sizeof(float));
    model_file_load(in_path, info, params, NULL);
    gpt2_param_sizes(sizes, &info->config);
    p[0] = params;
    for (int i = 1; i < NUM_PARAMETER_TENSORS; i++) { p[i] = p[i - 1] + sizes[i - 1]; }
    for (size_t j = (size_t)(V * C); j < (size_t)(Vp * C); j++) {
        if (p[0][j] != 0.0f) {
            llmc_warn("'%s': padded vocab rows %lld..%lld of wte are not zero; they are dropped (they never reach the logits)",
                      in_path, V, Vp - 1);
            break;
        }
    }
    return params;
}

// GPT2LMHeadModel's tensors in file order, as views of our tensors p; *n gets their count
static ExportTensor *export_tensors(const GPT2Config *cfg, const float *p[NUM_PARAMETER_TENSORS],
                                    const size_t sizes[NUM_PARAMETER_TENSORS], int *n_out) {
    const long long V = cfg->vocab_size, C = cfg->channels, L = cfg->num_layers, maxT = cfg->max_seq_len;
    int n = 0;
    ExportTensor *ts = (ExportTensor *)callocCheck((size_t)(4 + 12 * L), sizeof(ExportTensor));
    snprintf(ts[n].name, sizeof(ts[n].name), "transformer.wte.weight");
    ts[n].src = p[0]; ts[n].shape[0] = V; ts[n].shape[1] = C; n++;  // padded rows dropped: (V, C)
    snprintf(ts[n].name, sizeof(ts[n].name), "transformer.wpe.weight");
    ts[n].src = p[1]; ts[n].shape[0] = maxT; ts[n].shape[1] = C; n++;
    for (long long l = 0; l < L; l++) {
        for (int k = 0; k < 12; k++) {
            int param = layer_tensors[k].param;
            long long out, in;
            layer_tensor_dims(param, C, &out, &in);
            ExportTensor *t = &ts[n++];
            snprintf(t->name, sizeof(t->name), "transformer.h.%lld.%s", l, layer_tensors[k].suffix);
            t->src = p[param] + (size_t)l * (sizes[param] / (size_t)L);
            if (in) { t->shape[0] = in; t->shape[1] = out; t->transpose = 1; } else { t->shape[0] = out; }
        }
    }
    snprintf(ts[n].name, sizeof(ts[n].name), "transformer.ln_f.weight");
    ts[n].src = p[14]; ts[n].shape[0] = C; n++;
    snprintf(ts[n].name, sizeof(ts[n].name), "transformer.ln_f.bias");
    ts[n].src = p[15]; ts[n].shape[0] = C; n++;
    *n_out = n;
    return ts;
}

// the folder the files go into: out_dir itself when it exists (--force: the files are replaced one
// by one, each atomically), else a new folder under a temporary name, renamed at the end, so that a
// folder under the final name is always complete
static char export_tmp_dir[4096];  // the temporary folder while it is written; an error removes it
static void (*export_next_abort_hook)(void);

static void remove_export_tmp_dir(void) {
    DIR *d = export_tmp_dir[0] ? opendir(export_tmp_dir) : NULL;
    if (d) {
        char path[4400];
        for (struct dirent *e; (e = readdir(d)) != NULL;) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) { continue; }
            snprintf(path, sizeof(path), "%s/%s", export_tmp_dir, e->d_name);
            unlink(path);
        }
        closedir(d);
        rmdir(export_tmp_dir);
    }
    export_tmp_dir[0] = '\0';
    if (export_next_abort_hook) { export_next_abort_hook(); }
}

// -o's parent folders, made where missing (as mkdir -p would)
static void make_parent_dirs(const char *out_path) {
    char parent[4096];
    snprintf(parent, sizeof(parent), "%s", out_path);
    char *slash = strrchr(parent, '/');
    if (slash && slash != parent) {
        *slash = '\0';
        make_dirs_for(parent, "-o");
    }
}

static void export_work_dir(char *work_dir, size_t cap, const char *out_dir, int exists) {
    if (exists) {
        snprintf(work_dir, cap, "%s", out_dir);
        return;
    }
    if ((size_t)snprintf(work_dir, cap, "%s.tmp.%d", out_dir, (int)getpid()) >= cap) {
        llmc_die("path too long: %s", out_dir);
    }
    make_parent_dirs(out_dir);  // first, so that an error names them and not the temporary name
    make_dirs(work_dir);
    snprintf(export_tmp_dir, sizeof(export_tmp_dir), "%s", work_dir);
    if (llmc_abort_hook != remove_export_tmp_dir) { export_next_abort_hook = llmc_abort_hook; }
    llmc_abort_hook = remove_export_tmp_dir;
}

// config.json and generation_config.json, what transformers reads besides the weights
static void write_hf_configs(const char *work_dir, const GPT2Config *cfg, int bf16) {
    const long long V = cfg->vocab_size, C = cfg->channels, L = cfg->num_layers, maxT = cfg->max_seq_len;
    // eos/bos: GPT-2's <|endoftext|>; a smaller custom vocabulary gets its last id
    long long eot = V > 50256 ? 50256 : V - 1;
    // dropout 0: our trainers never use dropout, so fine-tuning in transformers behaves as ours would
    char config[4096], path[4352];
    snprintf(config, sizeof(config),
             "{\n"
             "  \"architectures\": [\"GPT2LMHeadModel\"],\n"
             "  \"model_type\": \"gpt2\",\n"
             "  \"vocab_size\": %lld,\n"
             "  \"n_positions\": %lld,\n"
             "  \"n_ctx\": %lld,\n"
             "  \"n_embd\": %lld,\n"
             "  \"n_layer\": %lld,\n"
             "  \"n_head\": %d,\n"
             "  \"n_inner\": null,\n"
             "  \"activation_function\": \"gelu_new\",\n"
             "  \"layer_norm_epsilon\": 1e-05,\n"
             "  \"initializer_range\": 0.02,\n"
             "  \"resid_pdrop\": 0.0,\n"
             "  \"embd_pdrop\": 0.0,\n"
             "  \"attn_pdrop\": 0.0,\n"
             "  \"scale_attn_weights\": true,\n"
             "  \"scale_attn_by_inverse_layer_idx\": false,\n"
             "  \"reorder_and_upcast_attn\": false,\n"
             "  \"tie_word_embeddings\": true,\n"
             "  \"bos_token_id\": %lld,\n"
             "  \"eos_token_id\": %lld,\n"
             "  \"use_cache\": true,\n"
             "  \"torch_dtype\": \"%s\"\n"
             "}\n",
             V, maxT, maxT, C, L, cfg->num_heads, eot, eot, bf16 ? "bfloat16" : "float32");
    path_join(path, sizeof(path), work_dir, "config.json");
    write_text_file(path, config);

    char gen[256];
    snprintf(gen, sizeof(gen), "{\n  \"bos_token_id\": %lld,\n  \"eos_token_id\": %lld\n}\n", eot, eot);
    path_join(path, sizeof(path), work_dir, "generation_config.json");
    write_text_file(path, gen);
}

// transformers' GPT2Tokenizer files are OpenAI's, renamed: vocab.json = encoder.json, merges.txt = vocab.bpe
static void copy_tokenizer_files(const char *tok_dir, const char *work_dir) {
    char src[4352], path[4352];
    path_join(src, sizeof(src), tok_dir, "encoder.json");
    path_join(path, sizeof(path), work_dir, "vocab.json");
    copy_file(src, path);
    path_join(src, sizeof(src), tok_dir, "vocab.bpe");
    path_join(path, sizeof(path), work_dir, "merges.txt");
    copy_file(src, path);
}

// -i's model file checked; a token shard or a safetensors file (often given by mistake) named as such
static void export_model_info(const char *in_path, ModelFileInfo *info) {
    char err[2048];
    if (!model_file_probe_in(in_path, info, err, sizeof(err), 1)) { return; }
    unsigned char head[9] = {0};
    FILE *f;
    char why[512];
    size_t got = 0;
    if (open_regular(in_path, &f, NULL, why, sizeof(why)) == 0) {  // never a FIFO: it would block
        got = fread(head, 1, sizeof(head), f);
        fclose(f);
    }
    int32_t magic;
    uint64_t header_len;
    memcpy(&magic, head, 4);
    memcpy(&header_len, head, 8);
    if (got >= 4 && magic == SHARD_MAGIC) {
        llmc_die("-i '%s' is a token shard, not a model .bin; export a trainer's model_*.bin (its -o folder)", in_path);
    }
    if (got == 9 && head[8] == '{' && header_len >= 2 && header_len <= (uint64_t)ST_MAX_HEADER) {
        llmc_die("-i '%s' is a safetensors file; add --to-bin to turn it into a model .bin", in_path);
    }
    llmc_die("-i: %s", err);
}

// --force into an existing folder: the tokenizer files there that this export does not write stay,
// and transformers' AutoTokenizer reads them with the new model (say so: they may not fit it)
static void warn_stale_tokenizer(const char *out_dir, int writes_tokenizer, int V) {
    static const char *names[] = {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.json",
                                  "merges.txt"};
    const int n = writes_tokenizer ? 3 : 5;  // --tokenizer writes the last two
    char found[256] = "", path[4352];
    for (int i = 0; i < n; i++) {
        path_join(path, sizeof(path), out_dir, names[i]);
        if (access(path, F_OK) == 0) {
            snprintf(found + strlen(found), sizeof(found) - strlen(found), "%s%s", found[0] ? ", " : "", names[i]);
        }
    }
    if (found[0]) {
        llmc_warn("'%s' keeps tokenizer files from before that this export does not write (%s): they may not fit this "
                  "model (V=%d); "
                  "remove them%s", out_dir, found, V, writes_tokenizer ? "" : ", or pass --tokenizer DIR for GPT-2's");
    }
}

static void export_to_hf(const char *in_path, const char *out_dir, int out_dtype, const char *tok_dir, int force) {
    if (dir_exists(in_path)) {
        llmc_die("-i '%s' is a folder; to turn a Hugging Face folder into a model .bin add --to-bin", in_path);
    }
    ModelFileInfo info;
    export_model_info(in_path, &info);
    const GPT2Config *cfg = &info.config;
    const int bf16 = out_dtype ? out_dtype == MODEL_VERSION_BF16 : info.version == MODEL_VERSION_BF16;
    if (tok_dir) { export_check_tokenizer(tok_dir, in_path, cfg->vocab_size); }
    const int exists = export_target_exists(out_dir, force);

    const float *p[NUM_PARAMETER_TENSORS];
    size_t sizes[NUM_PARAMETER_TENSORS];
    float *params = export_load_params(in_path, &info, p, sizes);
    int n;
    ExportTensor *ts = export_tensors(cfg, p, sizes, &n);

    char work_dir[4096], path[4352];
    export_work_dir(work_dir, sizeof(work_dir), out_dir, exists);
    path_join(path, sizeof(path), work_dir, "model.safetensors");
    write_safetensors(path, ts, n, bf16, in_path);
    write_hf_configs(work_dir, cfg, bf16);
    if (tok_dir) { copy_tokenizer_files(tok_dir, work_dir); }
    if (exists) { warn_stale_tokenizer(out_dir, tok_dir != NULL, cfg->vocab_size); }
    if (!exists) {
        if (rename(work_dir, out_dir) != 0) {
            llmc_die("renaming '%s' to '%s' failed: %s", work_dir, out_dir, strerror(errno));
        }
        export_tmp_dir[0] = '\0';
        fsync_dir_of(out_dir);
    }
    printf("wrote %s (GPT2LMHeadModel, %s, L=%d C=%d NH=%d V=%d maxT=%d) from %s (version %d)\n", out_dir,
           bf16 ? "BF16" : "F32", cfg->num_layers, cfg->channels, cfg->num_heads, cfg->vocab_size, cfg->max_seq_len,
           in_path, info.version);
    free(ts);
    free(params);
}

// ----------------------------------------------------------------------------
// safetensors -> .bin

typedef struct {
    const char *name;     // as in the file
    const char *dtype;
    int elem;             // bytes per element, 0 for a dtype we do not know
    int ndim;
    long long shape[8];
    long long begin, end; // absolute file offsets of the data
} StTensor;

typedef struct {
    const char *path;
    JsonValue header;
    StTensor *tensors;
    int count;
    long long data_start, file_size;
} StFile;

static int st_dtype_size(const char *dtype) {
    static const struct { const char *name; int size; } table[] = {
        {"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"I64", 8}, {"I32", 4}, {"I16", 2}, {"I8", 1},
        {"U64", 8}, {"U32", 4}, {"U16", 2}, {"U8", 1}, {"BOOL", 1}, {"F8_E4M3", 1}, {"F8_E5M2", 1}};
    for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
        if (strcmp(dtype, table[i].name) == 0) { return table[i].size; }
    }
    return 0;
}

static int st_cmp_begin(const void *a, const void *b) {
    const StTensor *x = *(const StTensor *const *)a, *y = *(const StTensor *const *)b;
    return x->begin < y->begin ? -1 : x->begin > y->begin;
}

// the length-prefixed JSON header into sf->header; sets the file size and data_start
static void st_read_header(StFile *sf, const char *path) {
    FILE *fp = fopen_regular(path, "safetensors file (-i)", &sf->file_size);
    if (sf->file_size < 8) {
        llmc_die("safetensors file '%s' is %lld bytes, shorter than the 8-byte header length (truncated?)", path,
                 sf->file_size);
    }
    uint64_t n;
    freadCheck(&n, 8, 1, fp);
    if (n < 2 || n > (uint64_t)ST_MAX_HEADER) {
        fcloseCheck(fp);
        if ((uint32_t)n == MODEL_MAGIC) {
            llmc_die("'%s' is a model .bin, not a safetensors file; drop --to-bin to export it", path);
        }
        llmc_die("'%s' is not a safetensors file: header length %llu is not in 2..%lld", path,
                 (unsigned long long)n, ST_MAX_HEADER);
    }
    if ((long long)n > sf->file_size - 8) {
        fcloseCheck(fp);
        llmc_die("safetensors file '%s' is truncated: its header needs %llu bytes but the file has only %lld after the length",
                 path, (unsigned long long)n, sf->file_size - 8);
    }
    char *text = (char *)mallocCheck((size_t)n);
    freadCheck(text, 1, (size_t)n, fp);
    fcloseCheck(fp);
    char err[256];
    if (text[0] != '{') {
        llmc_die("'%s' is not a safetensors file: its header does not start with '{' (header length %llu)", path,
                 (unsigned long long)n);
    }
    if (!json_parse(text, (size_t)n, &sf->header, err, sizeof(err))) {
        llmc_die("safetensors file '%s' has a bad JSON header: %s (truncated or corrupt)", path, err);
    }
    free(text);
    sf->data_start = 8 + (long long)n;
}

// one header entry into t: its dtype, a shape of at most 8 dimensions whose size matches its data
// offsets, which lie inside the data_len bytes after the header
static void st_read_entry(StTensor *t, const StFile *sf, const char *name, const JsonValue *v, long long data_len) {
    const char *path = sf->path;
    const JsonValue *dt = json_get(v, "dtype"), *sh = json_get(v, "shape"), *off = json_get(v, "data_offsets");
    if (!dt || dt->type != JSON_STRING || !sh || sh->type != JSON_ARRAY || !off || off->type != JSON_ARRAY ||
        off->count != 2 || !off->items[0].is_integer || !off->items[1].is_integer || sh->count > 8) {
        llmc_die("safetensors file '%s': entry '%s' needs \"dtype\", \"shape\" and two \"data_offsets\"", path, name);
    }
    t->name = name;
    t->dtype = dt->string;
    t->elem = st_dtype_size(t->dtype);
    t->ndim = sh->count;
    size_t numel = 1, bytes;
    for (int d = 0; d < sh->count; d++) {
        if (!sh->items[d].is_integer || sh->items[d].integer < 0 || sh->items[d].integer > (1LL << 40) ||
            ckd_mul_size(&numel, numel, (size_t)sh->items[d].integer)) {
            llmc_die("safetensors file '%s': tensor '%s' has a bad shape (a dimension is not an integer in "
                     "0..2^40, or their product overflows)", path, name);
        }
        t->shape[d] = sh->items[d].integer;
    }
    long long b = off->items[0].integer, e = off->items[1].integer;
    if (b < 0 || e < b) {
        llmc_die("safetensors file '%s': tensor '%s' has bad data_offsets [%lld, %lld]", path, name, b, e);
    }
    if (e > data_len) {
        llmc_die("safetensors file '%s' is truncated: tensor '%s' ends at data byte %lld but the file holds %lld data bytes",
                 path, name, e, data_len);
    }
    if (t->elem && (ckd_mul_size(&bytes, numel, (size_t)t->elem) || (size_t)(e - b) != bytes)) {
        llmc_die("safetensors file '%s': tensor '%s' (%s, %zu elements) spans %lld bytes, which does not match "
                 "its shape", path, name, t->dtype, numel, e - b);
    }
    t->begin = sf->data_start + b;
    t->end = sf->data_start + e;
}

// no two tensors share bytes (as the format requires), so the tensors a model needs cannot claim
// more data than the file holds: memory sized from the shapes is bounded by the file
static void st_check_no_overlap(const StFile *sf) {
    StTensor **by_begin = (StTensor **)mallocCheck((size_t)(sf->count > 0 ? sf->count : 1) * sizeof(StTensor *));
    for (int i = 0; i < sf->count; i++) { by_begin[i] = &sf->tensors[i]; }
    qsort(by_begin, (size_t)sf->count, sizeof(StTensor *), st_cmp_begin);
    for (int i = 1; i < sf->count; i++) {
        if (by_begin[i]->begin < by_begin[i - 1]->end) {
            llmc_die("safetensors file '%s': tensors '%s' and '%s' overlap in the data (corrupt header)", sf->path,
                     by_begin[i - 1]->name, by_begin[i]->name);
        }
    }
    free(by_begin);
}

// reads and validates the header: every tensor's offsets lie inside the file, match its shape, and
// overlap no other tensor's
static void st_open(StFile *sf, const char *path) {
    sf->path = path;
    st_read_header(sf, path);
    long long data_len = sf->file_size - sf->data_start;
    sf->tensors = (StTensor *)callocCheck((size_t)sf->header.count, sizeof(StTensor));
    sf->count = 0;
    for (int i = 0; i < sf->header.count; i++) {
        if (strcmp(sf->header.keys[i], "__metadata__") == 0) { continue; }
        st_read_entry(&sf->tensors[sf->count++], sf, sf->header.keys[i], &sf->header.items[i], data_len);
    }
    st_check_no_overlap(sf);
}

static void st_close(StFile *sf) {
    json_free(&sf->header);
    free(sf->tensors);
}

static float half_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1F, man = h & 0x3FF, u;
    if (exp == 0x1F) {
        u = sign | 0x7F800000u | (man << 13);  // inf / NaN
    } else if (exp != 0) {
        u = sign | ((exp + 112) << 23) | (man << 13);  // normal: rebias 15 -> 127
    } else if (man == 0) {
        u = sign;  // +-0
    } else {
        // subnormal: value = man * 2^-24, renormalized for fp32
        int e = -1;
        do { man <<= 1; e++; } while ((man & 0x400) == 0);
        u = sign | ((uint32_t)(112 - e) << 23) | ((man & 0x3FF) << 13);
    }
    float f;
    memcpy(&f, &u, 4);
    return f;
}

// reads tensor t into dst (numel fp32 values), converting F32/BF16/F16
static void st_read_fp32(const StFile *sf, const StTensor *t, float *dst, long long numel) {
    if (strcmp(t->dtype, "F32") != 0 && strcmp(t->dtype, "BF16") != 0 && strcmp(t->dtype, "F16") != 0) {
        llmc_die("safetensors file '%s': tensor '%s' has dtype %s; only F32, BF16 and F16 are read", sf->path, t->name,
                 t->dtype);
    }
    size_t bytes = (size_t)(t->end - t->begin);
    unsigned char *buf = (unsigned char *)mallocCheck(bytes);
    FILE *fp = fopen_regular(sf->path, "safetensors file (-i)", NULL);
    if (fseeko(fp, (off_t)t->begin, SEEK_SET) != 0 || fread(buf, 1, bytes, fp) != bytes) {
        llmc_die("reading tensor '%s' from '%s' failed (file changed or truncated while reading?)", t->name, sf->path);
    }
    fcloseCheck(fp);
    if (t->elem == 4) {
        memcpy(dst, buf, bytes);
    } else {
        const uint16_t *s = (const uint16_t *)buf;
        int is_bf16 = strcmp(t->dtype, "BF16") == 0;
        for (long long i = 0; i < numel; i++) { dst[i] = is_bf16 ? bf16_to_float(s[i]) : half_to_float(s[i]); }
    }
    free(buf);
}

static const char *shape_str(const StTensor *t, char *buf, size_t cap) {
    size_t n = (size_t)snprintf(buf, cap, "[");
    for (int d = 0; d < t->ndim && n < cap; d++) { n += (size_t)snprintf(buf + n, cap - n, d ? ", %lld" : "%lld", t->shape[d]); }
    if (n < cap) { snprintf(buf + n, cap - n, "]"); }
    return buf;
}

static void st_expect_shape(const StFile *sf, const StTensor *t, long long d0, long long d1) {
    int ok = d1 ? (t->ndim == 2 && t->shape[0] == d0 && t->shape[1] == d1) : (t->ndim == 1 && t->shape[0] == d0);
    if (!ok) {
        char got[128];
        if (d1) {
            llmc_die("safetensors file '%s': tensor '%s' has shape %s, expected [%lld, %lld] (inconsistent shapes)",
                     sf->path, t->name, shape_str(t, got, sizeof(got)), d0, d1);
        }
        llmc_die("safetensors file '%s': tensor '%s' has shape %s, expected [%lld] (inconsistent shapes)", sf->path,
                 t->name, shape_str(t, got, sizeof(got)), d0);
    }
}

// the name without "transformer." (hub checkpoints of GPT2Model are stored without it)
static const char *st_base_name(const char *name) {
    return strncmp(name, "transformer.", 12) == 0 ? name + 12 : name;
}

static const StTensor *st_find(const StFile *sf, const char *base) {
    for (int i = 0; i < sf->count; i++) {
        if (strcmp(st_base_name(sf->tensors[i].name), base) == 0) { return &sf->tensors[i]; }
    }
    return NULL;
}

// the tensor GPT2LMHeadModel calls "transformer.<base>", which holds (a layer of) our tensor `param`
static const StTensor *st_require(const StFile *sf, const char *base, int param) {
    const StTensor *t = st_find(sf, base);
    if (!t) {
        llmc_die("safetensors file '%s' has no tensor 'transformer.%s' (our %s; missing tensor, not a GPT-2 checkpoint?)",
                 sf->path, base, gpt2_param_names[param]);
    }
    return t;
}

// layer l's tensor k of layer_tensors, checked to have its shape: Conv1D (in, out) for a matmul
// weight, (n) otherwise
static const StTensor *st_layer_tensor(const StFile *sf, long long l, int k, long long C) {
    char base[128];
    snprintf(base, sizeof(base), "h.%lld.%s", l, layer_tensors[k].suffix);
    const StTensor *t = st_require(sf, base, layer_tensors[k].param);
    long long out, in;
    layer_tensor_dims(layer_tensors[k].param, C, &out, &in);
    if (in) { st_expect_shape(sf, t, in, out); } else { st_expect_shape(sf, t, out, 0); }
    return t;
}

static int config_int(const JsonValue *cfg, const char *key, const char *path, long long *out) {
    const JsonValue *v = json_get(cfg, key);
    if (!v || v->type == JSON_NULL) { return 0; }
    if (!v->is_integer) { llmc_die("'%s': \"%s\" is not an integer", path, key); }
    *out = v->integer;
    return 1;
}

static void config_check(const char *path, const char *key, long long want, long long have, const char *st_path,
                         const char *what) {
    if (want != have) {
        llmc_die("'%s' says %s = %lld but '%s' has %s = %lld (inconsistent shapes; config.json from another model?)",
                 path, key, want, st_path, what, have);
    }
}

// what --to-bin reads: in_path's model.safetensors and config.json when it is a folder, else the
// file itself and the config.json beside it (cap bytes each)
static void hf_input_paths(const char *in_path, char *st_path, char *cfg_path, size_t cap) {
    struct stat st;
    if (stat(in_path, &st) != 0) { llmc_die("--to-bin input '%s' not found: %s", in_path, strerror(errno)); }
    if (S_ISDIR(st.st_mode)) {
        path_join(st_path, cap, in_path, "model.safetensors");
        path_join(cfg_path, cap, in_path, "config.json");
        if (access(st_path, F_OK) != 0) {
            char idx[4400];
            path_join(idx, sizeof(idx), in_path, "model.safetensors.index.json");
            llmc_die("'%s' not found%s", st_path, file_exists(idx) ?
                     " (sharded checkpoints are not read; save the model with max_shard_size large enough for one file)" :
                     " (only safetensors are read; in transformers: model.save_pretrained(dir, safe_serialization=True))");
        }
    } else {
        snprintf(st_path, cap, "%s", in_path);
        const char *slash = strrchr(in_path, '/');
        if (slash) {
            snprintf(cfg_path, cap, "%.*s/config.json", (int)(slash - in_path), in_path);
        } else {
            snprintf(cfg_path, cap, "config.json");
        }
    }
}

// --to-bin's output is a file, which only --force replaces, and never the input it reads
static void import_check_output(const char *out_path, const char *st_path, const char *cfg_path, int force) {
    struct stat ost, ist;
    if (stat(out_path, &ost) == 0) {
        if (!S_ISREG(ost.st_mode)) { llmc_die("-o '%s' exists and is not a file; choose another -o", out_path); }
        const char *inputs[2] = {st_path, cfg_path};
        for (int i = 0; i < 2; i++) {
            if (stat(inputs[i], &ist) == 0 && ist.st_dev == ost.st_dev && ist.st_ino == ost.st_ino) {
                llmc_die("-o '%s' is the input '%s' this reads; choose another -o", out_path, inputs[i]);
            }
        }
        if (!force) { llmc_die("output '%s' already exists; choose another -o or pass --force to replace it", out_path); }
    }
}

// the model a safetensors file holds, as its shapes (and config.json or --n-head for NH) give it
typedef struct {
    long long V, C, maxT, L, NH;  // NH 0 until known
    int untied;                   // config.json's tie_word_embeddings is false
} HfDims;

// V and C from wte (V, C), maxT from wpe (maxT, C), L from the highest layer number of h.N.*
static void hf_dims_from_shapes(const StFile *sf, const StTensor *wte, const StTensor *wpe, HfDims *d) {
    if (wte->ndim != 2 || wpe->ndim != 2) {
        llmc_die("safetensors file '%s': wte and wpe must be 2-D (inconsistent shapes)", sf->path);
    }
    d->V = wte->shape[0];
    d->C = wte->shape[1];
    d->maxT = wpe->shape[0];
    d->L = 0;
    st_expect_shape(sf, wpe, d->maxT, d->C);
    for (int i = 0; i < sf->count; i++) {
        const char *base = st_base_name(sf->tensors[i].name);
        char *end;
        if (strncmp(base, "h.", 2) != 0) { continue; }
        long layer = strtol(base + 2, &end, 10);
        if (end == base + 2 || *end != '.' || layer < 0 || layer > 100000) {
            llmc_die("safetensors file '%s': cannot read a layer number in tensor '%s'", sf->path, sf->tensors[i].name);
        }
        if (layer + 1 > d->L) { d->L = layer + 1; }
    }
    if (d->L == 0) { llmc_die("safetensors file '%s' has no transformer.h.0.* tensors (missing tensors)", sf->path); }
}

// config.json's settings that our model does not follow: refused (a different layer_norm_epsilon
// is a warning)
static void hf_config_check_model(const JsonValue *cfg, const char *cfg_path) {
    const JsonValue *mt = json_get(cfg, "model_type");
    if (mt && (mt->type != JSON_STRING || strcmp(mt->string, "gpt2") != 0)) {
        llmc_die("'%s' has model_type %s; only \"gpt2\" is converted", cfg_path,
                 mt->type == JSON_STRING ? mt->string : "(not a string)");
    }
    const JsonValue *act = json_get(cfg, "activation_function");
    if (act && (act->type != JSON_STRING ||
                (strcmp(act->string, "gelu_new") != 0 && strcmp(act->string, "gelu_pytorch_tanh") != 0))) {
        llmc_die("'%s' has activation_function %s; our model uses the tanh GELU (gelu_new)", cfg_path,
                 act->type == JSON_STRING ? act->string : "(not a string)");
    }
    const JsonValue *flag = json_get(cfg, "scale_attn_by_inverse_layer_idx");
    if (flag && (flag->type != JSON_BOOL || flag->boolean)) {
        llmc_die("'%s' sets scale_attn_by_inverse_layer_idx (to something other than false); our attention does "
                 "not scale by layer", cfg_path);
    }
    flag = json_get(cfg, "scale_attn_weights");
    if (flag && (flag->type != JSON_BOOL || !flag->boolean)) {
        llmc_die("'%s' sets scale_attn_weights to something other than true; our attention scales by 1/sqrt(head size)",
                 cfg_path);
    }
    const JsonValue *eps = json_get(cfg, "layer_norm_epsilon");
    if (eps && eps->type != JSON_NUMBER && eps->type != JSON_NULL) {
        llmc_die("'%s': \"layer_norm_epsilon\" is not a number", cfg_path);
    }
    if (eps && eps->type == JSON_NUMBER && fabs(eps->number - 1e-5) > 1e-12) {
        llmc_warn("'%s' has layer_norm_epsilon %g; our LayerNorm uses 1e-5, results will differ slightly",
                  cfg_path, eps->number);
    }
}

// config.json's sizes agree with the shapes of st_path; its n_head, if any, goes into d->NH
static void hf_config_check_dims(const JsonValue *cfg, const char *cfg_path, const char *st_path, HfDims *d) {
    long long x;
    if (config_int(cfg, "n_embd", cfg_path, &x)) { config_check(cfg_path, "n_embd", x, d->C, st_path, "wte columns"); }
    if (config_int(cfg, "n_layer", cfg_path, &x)) { config_check(cfg_path, "n_layer", x, d->L, st_path, "layers"); }
    if (config_int(cfg, "vocab_size", cfg_path, &x)) { config_check(cfg_path, "vocab_size", x, d->V, st_path, "wte rows"); }
    if (config_int(cfg, "n_positions", cfg_path, &x)) { config_check(cfg_path, "n_positions", x, d->maxT, st_path, "wpe rows"); }
    if (config_int(cfg, "n_inner", cfg_path, &x) && x != 4 * d->C) {  // a model property, not one of the file's shapes
        llmc_die("'%s' says n_inner = %lld; these trainers build GPT-2's MLP of 4 * n_embd = %lld only, so this model "
                 "cannot be converted", cfg_path, x, 4 * d->C);
    }
    if (config_int(cfg, "n_head", cfg_path, &d->NH) && d->NH <= 0) {
        llmc_die("'%s' has n_head %lld; the number of heads must be positive", cfg_path, d->NH);
    }
    const JsonValue *tie = json_get(cfg, "tie_word_embeddings");
    if (tie && tie->type != JSON_BOOL) { llmc_die("'%s': \"tie_word_embeddings\" is not true or false", cfg_path); }
    d->untied = tie && !tie->boolean;
}

// checks config.json against our model and the shapes when it is there (returns 1); 0 without one
static int hf_read_config(const char *cfg_path, const char *st_path, HfDims *d) {
    if (access(cfg_path, F_OK) != 0) { return 0; }  // one that is there but no file is an error, not "absent"
    size_t len;
    char *text = read_whole_file(cfg_path, "config.json (-i)", &len);
    JsonValue cfg = {0};
    char err[256];
    const int parsed = json_parse(text, len, &cfg, err, sizeof(err));
    if (!parsed || cfg.type != JSON_OBJECT) {  // err is written only where the parse fails
        llmc_die("'%s' is not a JSON object%s%s", cfg_path, parsed ? "" : ": ", parsed ? "" : err);
    }
    free(text);
    hf_config_check_model(&cfg, cfg_path);
    hf_config_check_dims(&cfg, cfg_path, st_path, d);
    json_free(&cfg);
    return 1;
}

// the number of heads: config.json's, or --n-head's (which must agree with it), or without
// config.json head size 64 (a config.json without n_head would give transformers' default, 12)
static void hf_choose_heads(HfDims *d, int n_head_flag, int have_cfg, const char *cfg_path, const char *st_path) {
    if (n_head_flag > 0) {
        if (d->NH && d->NH != n_head_flag) {
            llmc_die("--n-head %d contradicts n_head %lld in '%s'; drop the flag", n_head_flag, d->NH, cfg_path);
        }
        d->NH = n_head_flag;
    }
    if (d->NH == 0 && have_cfg) {
        llmc_die("'%s' has no n_head (transformers would take 12); add \"n_head\" to it, or pass --n-head N", cfg_path);
    }
    if (d->NH == 0) {
        if (d->C % 64 != 0) {
            llmc_die("'%s' has no config.json with n_head and C = %lld is not a multiple of 64; pass --n-head N", st_path,
                     d->C);
        }
        d->NH = d->C / 64;
        llmc_warn("no config.json next to '%s'; assuming head size 64 (n_head %lld) as in GPT-2; pass --n-head to change",
                  st_path, d->NH);
    }
    if (d->C % d->NH != 0) {  // said by config.json or --n-head, not by the safetensors file
        llmc_die("n_head %lld (%s) does not divide the %lld channels of '%s'; the number of heads must divide n_embd",
                 d->NH, n_head_flag > 0 ? "--n-head" : cfg_path, d->C, st_path);
    }
}

// our config for these dimensions, refused where a model .bin cannot hold it or the model is unusable
static GPT2Config hf_model_config(const HfDims *d, const char *st_path) {
    GPT2Config c;
    c.max_seq_len = (int)d->maxT;
    c.vocab_size = (int)d->V;
    c.padded_vocab_size = round_up_128((int)d->V);
    c.num_layers = (int)d->L;
    c.num_heads = (int)d->NH;
    c.channels = (int)d->C;
    if (d->V > 65536 || d->C > (1 << 20) || d->maxT > (1 << 24) || d->NH > (1 << 20)) {
        llmc_die("safetensors file '%s': dimensions V=%lld C=%lld maxT=%lld are out of range for a model .bin", st_path,
                 d->V, d->C, d->maxT);
    }
    const char *problem = gpt2_config_problem(&c);
    if (problem) { llmc_die("safetensors file '%s' gives an unusable model: %s", st_path, problem); }
    return c;
}

// every layer tensor the model needs is there with its shape, and ln_f's (into *lnfw, *lnfb):
// checked before memory is taken. Tensors do not overlap (st_open), so the sizes allocated after
// this are bounded by the file's size.
static void hf_require_tensors(const StFile *sf, const HfDims *d, const StTensor **lnfw, const StTensor **lnfb) {
    for (long long l = 0; l < d->L; l++) {
        for (int k = 0; k < 12; k++) { st_layer_tensor(sf, l, k, d->C); }
    }
    *lnfw = st_require(sf, "ln_f.weight", 14);
    *lnfb = st_require(sf, "ln_f.bias", 15);
    st_expect_shape(sf, *lnfw, d->C, 0);
    st_expect_shape(sf, *lnfb, d->C, 0);
}

// layer l's 12 tensors into our stacked tensors p (Conv1D weights transposed to our (out, in)
// through tmp), each marked in used
static void hf_read_layer(const StFile *sf, long long l, const HfDims *d, float *const p[NUM_PARAMETER_TENSORS],
                          const size_t sizes[NUM_PARAMETER_TENSORS], float *tmp, char *used) {
    for (int k = 0; k < 12; k++) {
        const StTensor *t = st_layer_tensor(sf, l, k, d->C);
        int param = layer_tensors[k].param;
        long long out, in;
        layer_tensor_dims(param, d->C, &out, &in);
        float *dst = p[param] + (size_t)l * (sizes[param] / (size_t)d->L);
        if (in) {
            st_read_fp32(sf, t, tmp, in * out);
            for (long long o = 0; o < out; o++) {
                for (long long i = 0; i < in; i++) { dst[o * in + i] = tmp[i * out + o]; }
            }
        } else {
            st_read_fp32(sf, t, dst, out);
        }
        used[t - sf->tensors] = 1;
    }
}

// h.N.attn.bias / h.N.attn.masked_bias: the causal-mask buffers of older checkpoints
static int hf_is_mask_buffer(const char *base) {
    const char *dot = strrchr(base, '.');
    return strncmp(base, "h.", 2) == 0 && dot && (strcmp(dot, ".bias") == 0 || strcmp(dot, ".masked_bias") == 0) &&
           dot - base >= 5 && strncmp(dot - 5, ".attn", 5) == 0;
}

// every tensor not read must be a mask buffer, or a stored LM head equal to wte (V, C): our file
// format ties the head to wte. tmp: V x C floats of scratch.
static void hf_check_unused(const StFile *sf, const char *used, const float *wte, float *tmp, const HfDims *d) {
    for (int i = 0; i < sf->count; i++) {
        if (used[i]) { continue; }
        const StTensor *t = &sf->tensors[i];
        if (hf_is_mask_buffer(st_base_name(t->name))) { continue; }
        if (strcmp(t->name, "lm_head.weight") == 0) {
            st_expect_shape(sf, t, d->V, d->C);
            st_read_fp32(sf, t, tmp, d->V * d->C);
            for (long long j = 0; j < d->V * d->C; j++) {
                if (memcmp(&tmp[j], &wte[j], 4) != 0) {
                    llmc_die("safetensors file '%s': lm_head.weight differs from wte (row %lld): an untied LM head "
                             "cannot be stored in a model .bin", sf->path, j / d->C);
                }
            }
            continue;
        }
        llmc_die("safetensors file '%s': unexpected tensor '%s' (not part of a GPT-2 with %lld layers)", sf->path,
                 t->name, d->L);
    }
}

// the parameters of model c from sf, in fp32 (padded wte rows 0); every tensor of the file is
// accounted for
static float *hf_read_params(const StFile *sf, const GPT2Config *c, const HfDims *d, const StTensor *wte,
                             const StTensor *wpe, const StTensor *lnfw, const StTensor *lnfb) {
    char *used = (char *)callocCheck((size_t)sf->count, 1);
    size_t sizes[NUM_PARAMETER_TENSORS];
    gpt2_param_sizes(sizes, c);
    float *params = (float *)callocCheck(gpt2_num_params(c), sizeof(float));
    float *p[NUM_PARAMETER_TENSORS];
    p[0] = params;
    for (int i = 1; i < NUM_PARAMETER_TENSORS; i++) { p[i] = p[i - 1] + sizes[i - 1]; }
    // scratch for a transposed Conv1D weight (at most 4C x C) or a stored lm_head (V x C)
    float *tmp = (float *)mallocCheck((size_t)(d->V > 4 * d->C ? d->V : 4 * d->C) * (size_t)d->C * sizeof(float));
    st_read_fp32(sf, wte, p[0], d->V * d->C);
    used[wte - sf->tensors] = 1;
    st_read_fp32(sf, wpe, p[1], d->maxT * d->C);
    used[wpe - sf->tensors] = 1;
    for (long long l = 0; l < d->L; l++) { hf_read_layer(sf, l, d, p, sizes, tmp, used); }
    st_read_fp32(sf, lnfw, p[14], d->C);
    st_read_fp32(sf, lnfb, p[15], d->C);
    used[lnfw - sf->tensors] = used[lnfb - sf->tensors] = 1;
    hf_check_unused(sf, used, p[0], tmp, d);
    free(tmp);
    free(used);
    return params;
}

static void import_from_hf(const char *in_path, const char *out_path, int out_version, int n_head_flag, int force) {
    char st_path[4352], cfg_path[4352];
    hf_input_paths(in_path, st_path, cfg_path, sizeof(st_path));
    import_check_output(out_path, st_path, cfg_path, force);
    StFile sf;
    st_open(&sf, st_path);

    // shapes define the model: wte (V, C), wpe (maxT, C), layers h.0 .. h.{L-1}
    const StTensor *wte = st_require(&sf, "wte.weight", 0), *wpe = st_require(&sf, "wpe.weight", 1), *lnfw, *lnfb;
    HfDims d = {0};
    hf_dims_from_shapes(&sf, wte, wpe, &d);
    const int have_cfg = hf_read_config(cfg_path, st_path, &d);
    if (d.untied && !st_find(&sf, "lm_head.weight")) {  // transformers would give this folder a new, random head
        llmc_die("'%s' sets tie_word_embeddings to false, and '%s' holds no lm_head.weight: the model's LM head is "
                 "not in the folder, and a model .bin ties it to wte", cfg_path, st_path);
    }
    hf_choose_heads(&d, n_head_flag, have_cfg, cfg_path, st_path);
    const GPT2Config c = hf_model_config(&d, st_path);
    hf_require_tensors(&sf, &d, &lnfw, &lnfb);

    float *params = hf_read_params(&sf, &c, &d, wte, wpe, lnfw, lnfb);
    make_parent_dirs(out_path);  // once the input has been read whole: a bad one leaves no folders
    model_file_write_fp32(out_path, &c, params, out_version);
    printf("wrote %s (version %d, L=%d C=%d NH=%d V=%d Vp=%d maxT=%d) from %s%s\n", out_path, out_version, c.num_layers,
           c.channels, c.num_heads, c.vocab_size, c.padded_vocab_size, c.max_seq_len, st_path,
           have_cfg ? " and its config.json" : "");
    free(params);
    st_close(&sf);
}

// ----------------------------------------------------------------------------

int main(int argc, char **argv) {
    llmc_std_fds_open();
    const char *in = NULL, *out = NULL, *tok_dir = NULL;
    int to_bin = 0, force = 0, dtype = 0, n_head = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) { usage(stdout); return 0; }
        if (strcmp(a, "--to-bin") == 0) { to_bin = 1; continue; }
        if (strcmp(a, "--force") == 0) { force = 1; continue; }
        if (strcmp(a, "--bf16") == 0 || strcmp(a, "--fp32") == 0) {
            int want = a[2] == 'b' ? MODEL_VERSION_BF16 : MODEL_VERSION_FP32;
            if (dtype && dtype != want) { bad_flag("%s: --bf16 and --fp32 exclude each other", a); }
            dtype = want;
            continue;
        }
        if (strcmp(a, "-i") == 0 || strcmp(a, "-o") == 0 || strcmp(a, "--tokenizer") == 0 || strcmp(a, "--n-head") == 0) {
            if (i + 1 >= argc) { bad_flag("flag %s needs a value", a); }
            const char *v = argv[++i];
            if (a[1] == 'i') { in = v; }
            else if (a[1] == 'o') { out = v; }
            else if (a[2] == 't') { tok_dir = v; }
            else {
                char *end;
                long x = strtol(v, &end, 10);
                if (*end != '\0' || x <= 0 || x > 1000000) { bad_flag("--n-head %s: expected a positive integer", v); }
                n_head = (int)x;
            }
            continue;
        }
        bad_flag("unknown flag '%s'", a);
    }
    if (!in || !out) { bad_flag("%s", "both -i (input) and -o (output) are required"); }
    if (!in[0] || !out[0]) { bad_flag("%s", "-i and -o need a path; an empty one was given"); }
    if (to_bin && tok_dir) { bad_flag("%s", "--tokenizer applies to export (.bin -> folder), not to --to-bin"); }
    if (!to_bin && n_head) { bad_flag("%s", "--n-head applies to --to-bin; a model .bin already holds the number of heads"); }
    if (to_bin) {
        import_from_hf(in, out, dtype ? dtype : MODEL_VERSION_FP32, n_head, force);
    } else {
        char folder[4096];  // "out/" is the folder "out" (its temporary sibling is "out.tmp.<pid>")
        snprintf(folder, sizeof(folder), "%s", out);
        for (size_t n = strlen(folder); n > 1 && folder[n - 1] == '/'; n--) { folder[n - 1] = '\0'; }
        export_to_hf(in, folder, dtype, tok_dir, force);
    }
    return 0;
}
