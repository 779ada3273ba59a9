/*
 * The GPT-2 model: its configuration, the 16 parameter tensors in llm.c's order, the model
 * descriptors (-e d12, -e L2:C64:H4) and the model .bin file (llm.c layout, byte-compatible).
 *
 * Dimension legend used across the project:
 *   B  micro-batch size (sequences per rank per micro-step)   T  sequence length
 *   C  channels (model width)      NH  attention heads        HS = C / NH, head size
 *   L  layers                      V   vocabulary size (50257) Vp  padded vocabulary (50304)
 *   maxT  max sequence length (positions in wpe)
 *
 * Model file: 256 int32 header, then the parameters in the order of gpt2_param_names.
 *   header[0] = 20240326 (magic)   header[1] = 3 (fp32) or 5 (bf16)
 *   header[2] = maxT  header[3] = V  header[4] = L  header[5] = NH  header[6] = C  header[7] = Vp
 *   header[252] = CRC_TAG, header[253] = CRC-32 of the payload, header[254] = CRC-32 of the
 *   1024 header bytes with header[254] read as 0, when written by this project (llm.c leaves these
 *   zero and ignores them; files without a tag load unchecked, files with CRC_TAG_V1, written
 *   before the header CRC existed, have their payload checked).
 * Every header field is range-checked before it is used (gpt2_config_problem); the bounds keep
 * every size computed from them far below 2^63.
 */
#ifndef LLMC_MODEL_IO_H
#define LLMC_MODEL_IO_H

#include <ctype.h>
#include <math.h>
#include "utils.h"

#define MODEL_MAGIC 20240326
#define MODEL_VERSION_FP32 3
#define MODEL_VERSION_BF16 5
#define CRC_TAG 0x43524332     // "2CRC" in header[252]: payload CRC(s), and a CRC of the header (model_io.h, checkpoint.h)
#define CRC_TAG_V1 0x43524331  // "1CRC": payload CRC(s) only; files written before the header CRC, still read
#define HEADER_INTS 256
#define HEADER_BYTES (HEADER_INTS * (long)sizeof(int))
#define NUM_PARAMETER_TENSORS 16

typedef struct {
    int max_seq_len;        // maxT, e.g. 1024
    int vocab_size;         // V, e.g. 50257
    int padded_vocab_size;  // Vp, V rounded up to a multiple of 128, e.g. 50304
    int num_layers;         // L
    int num_heads;          // NH
    int channels;           // C
} GPT2Config;

static const char *const gpt2_param_names[NUM_PARAMETER_TENSORS] = {
    "wte", "wpe", "ln1w", "ln1b", "qkvw", "qkvb", "attprojw", "attprojb",
    "ln2w", "ln2b", "fcw", "fcb", "fcprojw", "fcprojb", "lnfw", "lnfb"};

// element counts of the 16 tensors; shapes in the comments
static inline void gpt2_param_sizes(size_t sizes[NUM_PARAMETER_TENSORS], const GPT2Config *c) {
    size_t Vp = c->padded_vocab_size, C = c->channels, maxT = c->max_seq_len, L = c->num_layers;
    sizes[0] = Vp * C;            // wte (Vp, C)
    sizes[1] = maxT * C;          // wpe (maxT, C)
    sizes[2] = L * C;             // ln1w (L, C)
    sizes[3] = L * C;             // ln1b (L, C)
    sizes[4] = L * (3 * C) * C;   // qkvw (L, 3C, C)
    sizes[5] = L * (3 * C);       // qkvb (L, 3C)
    sizes[6] = L * C * C;         // attprojw (L, C, C)
    sizes[7] = L * C;             // attprojb (L, C)
    sizes[8] = L * C;             // ln2w (L, C)
    sizes[9] = L * C;             // ln2b (L, C)
    sizes[10] = L * (4 * C) * C;  // fcw (L, 4C, C)
    sizes[11] = L * (4 * C);      // fcb (L, 4C)
    sizes[12] = L * C * (4 * C);  // fcprojw (L, C, 4C)
    sizes[13] = L * C;            // fcprojb (L, C)
    sizes[14] = C;                // lnfw (C)
    sizes[15] = C;                // lnfb (C)
}

static inline size_t gpt2_num_params(const GPT2Config *c) {
    size_t sizes[NUM_PARAMETER_TENSORS], n = 0;
    gpt2_param_sizes(sizes, c);
    for (int i = 0; i < NUM_PARAMETER_TENSORS; i++) { n += sizes[i]; }
    return n;
}

/*
 * The gradient norm's chunks (llmc/cuda/global_norm.cuh sums the squares of each chunk alone, then
 * the chunks' sums in chunk order): the flat parameter array cut at every multiple of GRAD_NORM_CHUNK
 * and at the start of every layer's slice of every tensor. ZeRO-1's shards begin only at cuts (the
 * even shards at multiples of GRAD_NORM_CHUNK, Muon's at matrix edges or cuts), so a rank's shard is
 * whole chunks, and the norm of the same gradients is the same bits with or without ZeRO-1 and on
 * any number of ranks. starts (if not NULL) gets the count + 1 boundaries, the last one P; returns
 * the count.
 */
#define GRAD_NORM_CHUNK ((size_t)1 << 16)

// the slices of tensor i: one per layer for the blocks' tensors (2..13), else the whole tensor
static inline int gpt2_param_slices(const GPT2Config *c, int i) { return i >= 2 && i <= 13 ? c->num_layers : 1; }

// the cuts before flat index `below`, in order, into starts (if not NULL); returns how many (the
// index of the chunk that starts at `below`, where that is a cut)
static inline size_t gpt2_norm_cuts_below(const GPT2Config *c, size_t below, size_t *starts) {
    size_t sizes[NUM_PARAMETER_TENSORS], at = 0, n = 0;
    gpt2_param_sizes(sizes, c);
    for (int i = 0; i < NUM_PARAMETER_TENSORS && at < below; i++) {
        const int slices = gpt2_param_slices(c, i);
        for (int l = 0; l < slices && at < below; l++) {
            const size_t end = at + sizes[i] / (size_t)slices;
            for (size_t cut = at; cut < end && cut < below; cut = (cut / GRAD_NORM_CHUNK + 1) * GRAD_NORM_CHUNK) {
                if (starts) { starts[n] = cut; }
                n++;
            }
            at = end;
        }
    }
    return n;
}

static inline size_t gpt2_norm_chunks(const GPT2Config *c, size_t *starts) {
    const size_t n = gpt2_norm_cuts_below(c, (size_t)-1, starts);
    if (starts) { starts[n] = gpt2_num_params(c); }
    return n;
}

// the last cut at or before flat index b (b itself at P, the end)
static inline size_t gpt2_norm_chunk_floor(const GPT2Config *c, size_t b) {
    size_t sizes[NUM_PARAMETER_TENSORS], at = 0;
    gpt2_param_sizes(sizes, c);
    for (int i = 0; i < NUM_PARAMETER_TENSORS; i++) {
        const size_t per = sizes[i] / (size_t)gpt2_param_slices(c, i);
        if (b < at + sizes[i]) {
            const size_t slice = at + (b - at) / per * per, grid = b / GRAD_NORM_CHUNK * GRAD_NORM_CHUNK;
            return grid > slice ? grid : slice;
        }
        at += sizes[i];
    }
    return b;
}

/*
 * Training FLOPs per token, for MFU, counted as llm.c counts them so that the two trainers' MFU
 * compare: 6 per parameter over all N parameters (2 forward, 4 backward: the input and the weight
 * gradient; N as gpt2_num_params, padded vocabulary rows included, as llm.c's), plus 6 L T C for
 * attention's two T-long matmuls per layer (Q K^T and P V: 4 T C forward and 8 T C backward per
 * token, halved by the causal mask). Recomputation (-r) is not counted: MFU measures useful work.
 * d12 at T = 1024: 6 * 124,475,904 + 6 * 12 * 1024 * 768 = 803,478,528.
 */
static inline double gpt2_flops_per_token(const GPT2Config *c, int T) {
    return 6.0 * (double)gpt2_num_params(c) + 6.0 * c->num_layers * (double)T * c->channels;
}

// tensors that get weight decay: the 2-D ones (embeddings and matmul weights), not biases or LayerNorm
static inline int gpt2_param_is_decayed(int i) {
    return i == 0 || i == 1 || i == 4 || i == 6 || i == 10 || i == 12;
}

static inline int round_up_128(int v) { return ((v + 127) / 128) * 128; }

// sanity checks shared by descriptors and file headers; returns NULL if fine, else what is wrong.
// The upper bounds are far above any GPT-2 (d48: L=48, C=1600) and keep 12*L*C*C + Vp*C + maxT*C
// below 2^50, so no size computed from a checked config can overflow.
#define GPT2_MAX_LAYERS 16384
#define GPT2_MAX_CHANNELS 65536
#define GPT2_MAX_SEQ_LEN (1 << 20)
#define GPT2_MAX_PADDED_VOCAB (1 << 17)
static inline const char *gpt2_config_problem(const GPT2Config *c) {
    if (c->num_layers <= 0 || c->num_layers > GPT2_MAX_LAYERS) { return "number of layers must be in 1..16384"; }
    if (c->channels <= 0 || c->channels > GPT2_MAX_CHANNELS) { return "channels must be in 1..65536"; }
    if (c->num_heads <= 0) { return "number of heads must be positive"; }
    if (c->channels % c->num_heads != 0) { return "channels must be divisible by the number of heads"; }
    if (c->vocab_size <= 0 || c->vocab_size > 65536) { return "vocab size must be in 1..65536 (tokens are uint16)"; }
    if (c->padded_vocab_size < c->vocab_size) { return "padded vocab size is smaller than the vocab size"; }
    if (c->padded_vocab_size > GPT2_MAX_PADDED_VOCAB) { return "padded vocab size must be at most 131072"; }
    if (c->max_seq_len <= 0 || c->max_seq_len > GPT2_MAX_SEQ_LEN) { return "max sequence length must be in 1..1048576"; }
    return NULL;
}

// CRC-32 of a header of n ints with h[slot] (where the CRC itself is stored) read as 0
static inline uint32_t header_crc(const int *h, int n, int slot) {
    int zero = 0;
    uint32_t crc = crc32_update(0, h, (size_t)slot * sizeof(int));
    crc = crc32_update(crc, &zero, sizeof(int));
    return crc32_update(crc, h + slot + 1, (size_t)(n - slot - 1) * sizeof(int));
}

/*
 * Model descriptors for -e (llm.c's, and an explicit form):
 *   d12, d24, d36, d48   GPT-2 124M, 350M, 774M, 1558M (C = 768, 1024, 1280, 1600; NH = 12, 16, 20, 25)
 *   d60, d72, d84        llm.c's unofficial 2.7B, 7.3B, 12.2B (C = 1920, 2880, 3456; NH = 30, 30, 36)
 *   dN (other N)         N layers, C = 64*N, NH = N (head size 64)
 *   gpt2:dN              the same as dN (llm.c's explicit form)
 *   gpt3:cN              llm.c's GPT-3 shapes by channel count, maxT 2048 (dense attention):
 *                        c384 c768 c1024 c1536 c2048 c2560 c4096 c12288 (not llm.c's c5140, which
 *                        its heads of 128 do not divide)
 *   L<n>:C<n>:H<n>[:T<n>][:V<n>]   explicit; T = max_seq_len (default 1024), V = vocab (default 50257)
 * All use maxT 1024 and V 50257 unless given; Vp = V rounded up to a multiple of 128.
 * Returns 1 and fills c if desc is a descriptor, 0 if it is not one (then it is a file path).
 * A string that looks like a descriptor but is malformed is an error.
 */

// whether s is one or more digits and nothing else (then a name like "d12" is a descriptor, not a file)
static inline int descriptor_digits(const char *s) {
    if (*s == '\0') { return 0; }
    for (const char *p = s; *p; p++) { if (!isdigit((unsigned char)*p)) { return 0; } }
    return 1;
}

// the digits of s as a number in 1..limit (0: out of range)
static inline long descriptor_number(const char *s, long limit) {
    long v = strlen(s) <= 7 ? strtol(s, NULL, 10) : 0;
    return v >= 1 && v <= limit ? v : 0;
}

static inline void gpt2_depth_shape(const char *desc, const char *digits, GPT2Config *c) {
    long depth = descriptor_number(digits, 1000);
    if (depth == 0) { llmc_die("-e %s: depth must be in 1..1000", desc); }
    static const int shapes[][3] = {{12, 768, 12}, {24, 1024, 16}, {36, 1280, 20}, {48, 1600, 25},
                                    {60, 1920, 30}, {72, 2880, 30}, {84, 3456, 36}};
    c->num_layers = (int)depth;
    c->channels = 64 * (int)depth;
    c->num_heads = (int)depth;
    for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++) {
        if (shapes[i][0] == depth) { c->channels = shapes[i][1]; c->num_heads = shapes[i][2]; }
    }
}

static inline void gpt3_channel_shape(const char *desc, const char *digits, GPT2Config *c) {
    static const int shapes[][3] = {{384, 6, 64}, {768, 12, 64}, {1024, 24, 64}, {1536, 24, 96}, {2048, 24, 128},
                                    {2560, 32, 80}, {4096, 32, 128}, {12288, 96, 128}};
    const long channels = descriptor_number(digits, 1000000);
    for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++) {
        if (shapes[i][0] == channels) {
            c->channels = shapes[i][0];
            c->num_layers = shapes[i][1];
            c->num_heads = shapes[i][0] / shapes[i][2];
            c->max_seq_len = 2048;
            return;
        }
    }
    llmc_die("-e %s: GPT-3 shapes are gpt3:c384, c768, c1024, c1536, c2048, c2560, c4096 and c12288 (the "
             "channels); for another shape use L<layers>:C<channels>:H<heads>:T2048", desc);
}

static inline int gpt2_parse_descriptor(const char *desc, GPT2Config *c) {
    c->max_seq_len = 1024;
    c->vocab_size = 50257;
    if (desc[0] == 'd' && descriptor_digits(desc + 1)) {
        gpt2_depth_shape(desc, desc + 1, c);
    } else if (!strncmp(desc, "gpt2:d", 6) && descriptor_digits(desc + 6)) {
        gpt2_depth_shape(desc, desc + 6, c);
    } else if (!strncmp(desc, "gpt3:c", 6) && descriptor_digits(desc + 6)) {
        gpt3_channel_shape(desc, desc + 6, c);
    } else if (desc[0] == 'L' && isdigit((unsigned char)desc[1])) {
        int have_c = 0, have_h = 0;
        c->num_layers = 0;
        const char *p = desc;
        while (*p) {
            const char key = *p++;
            const char *digits = p;
            while (isdigit((unsigned char)*p)) { p++; }
            // 1 to 7 digits, nothing else (no sign, no blank, no ':' at the end); gpt2_config_problem
            // checks each field's range below
            const long v = p - digits >= 1 && p - digits <= 7 ? strtol(digits, NULL, 10) : 0;
            if (v <= 0 || (*p == ':' && p[1] == '\0')) {
                llmc_die("-e %s: bad descriptor; expected e.g. L2:C64:H4 or L2:C64:H4:T256:V512", desc);
            }
            switch (key) {
                case 'L': c->num_layers = (int)v; break;
                case 'C': c->channels = (int)v; have_c = 1; break;
                case 'H': c->num_heads = (int)v; have_h = 1; break;
                case 'T': c->max_seq_len = (int)v; break;
                case 'V': c->vocab_size = (int)v; break;
                default: llmc_die("-e %s: unknown descriptor field '%c' (fields: L C H T V)", desc, key);
            }
            if (*p == ':') { p++; } else if (*p != '\0') {
                llmc_die("-e %s: bad descriptor; fields are separated by ':' as in L2:C64:H4", desc);
            }
        }
        if (!have_c || !have_h) { llmc_die("-e %s: a descriptor needs L, C and H, e.g. L2:C64:H4", desc); }
    } else {
        return 0;
    }
    c->padded_vocab_size = round_up_128(c->vocab_size);
    const char *problem = gpt2_config_problem(c);
    if (problem) { llmc_die("-e %s: %s", desc, problem); }
    return 1;
}

static inline void gpt2_config_print(const GPT2Config *c) {
    printf("| max_seq_len %d | vocab_size %d | padded_vocab_size %d | num_layers %d | num_heads %d | channels %d |\n",
           c->max_seq_len, c->vocab_size, c->padded_vocab_size, c->num_layers, c->num_heads, c->channels);
}

// ----------------------------------------------------------------------------
// bf16 <-> fp32 on the host

static inline float bf16_to_float(uint16_t b) {
    uint32_t u = ((uint32_t)b) << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

// round to nearest even (what PyTorch's .to(torch.bfloat16) does); NaN stays NaN
static inline uint16_t float_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) { return (uint16_t)((u >> 16) | 0x40); }
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

// ----------------------------------------------------------------------------
// model .bin reading and writing

typedef struct {
    GPT2Config config;
    int version;        // 3 (fp32) or 5 (bf16)
    int has_crc;        // header carries a CRC-32 of the payload
    uint32_t crc;       // that CRC
    size_t num_params;  // total parameter count
} ModelFileInfo;

#define MODEL_FILE_HINT "make one with: python3 train_gpt2.py --model d12 --write-model out.bin (or train_gpt2 -n)"

// read and validate the header and the file size; returns 0, or 1 with the problem in err. A
// checkpoint's model file (in_checkpoint) gets no hint on making one: -y 1 skips it and takes the
// checkpoint before, and a new model file in its place is not what a user should make.
static inline int model_file_probe_in(const char *path, ModelFileInfo *info, char *err, size_t errlen, int in_checkpoint) {
    const char *hint = in_checkpoint ? "" : "; " MODEL_FILE_HINT;
    FILE *fp;
    long long size;
    char why[512];
    int e = open_regular(path, &fp, &size, why, sizeof(why));
    if (e != 0) {
        snprintf(err, errlen, "model file '%s' %s", path, e == ENOENT ? "not found" : why);
        return 1;
    }
    int header[HEADER_INTS];
    int got = size >= HEADER_BYTES && fread(header, sizeof(int), HEADER_INTS, fp) == HEADER_INTS;
    fclose(fp);
    if (!got) {
        snprintf(err, errlen, "model file '%s' is %lld bytes, smaller than its 1024-byte header (truncated?)", path, size);
        return 1;
    }
    if (header[0] != MODEL_MAGIC) {
        snprintf(err, errlen, "'%s' is not a GPT-2 model file (magic %d, expected %d)%s", path, header[0], MODEL_MAGIC, hint);
        return 1;
    }
    if (header[1] != MODEL_VERSION_FP32 && header[1] != MODEL_VERSION_BF16) {
        snprintf(err, errlen, "model file '%s' has version %d; this trainer reads version 3 (fp32) and 5 (bf16)%s",
                 path, header[1], hint);
        return 1;
    }
    if (header[252] == CRC_TAG && (uint32_t)header[254] != header_crc(header, HEADER_INTS, 254)) {
        snprintf(err, errlen, "model file '%s' has a corrupt header (it fails its checksum)%s", path, hint);
        return 1;
    }
    info->version = header[1];
    info->config.max_seq_len = header[2];
    info->config.vocab_size = header[3];
    info->config.num_layers = header[4];
    info->config.num_heads = header[5];
    info->config.channels = header[6];
    info->config.padded_vocab_size = header[7];
    const char *problem = gpt2_config_problem(&info->config);
    if (problem) {
        snprintf(err, errlen, "model file '%s' has a bad header: %s", path, problem);
        return 1;
    }
    info->num_params = gpt2_num_params(&info->config);
    long long expected = HEADER_BYTES + (long long)info->num_params * (info->version == MODEL_VERSION_FP32 ? 4 : 2);
    if (size != expected) {
        snprintf(err, errlen, "model file '%s' is %lld bytes but its header (L=%d C=%d NH=%d Vp=%d maxT=%d, version %d) "
                 "implies %lld bytes (truncated or corrupt)%s",
                 path, size, info->config.num_layers, info->config.channels, info->config.num_heads,
                 info->config.padded_vocab_size, info->config.max_seq_len, info->version, expected, hint);
        return 1;
    }
    info->has_crc = header[252] == CRC_TAG || header[252] == CRC_TAG_V1;
    info->crc = (uint32_t)header[253];
    return 0;
}
static inline int model_file_probe(const char *path, ModelFileInfo *info, char *err, size_t errlen) {
    return model_file_probe_in(path, info, err, errlen, 0);
}

static inline void model_file_info(const char *path, ModelFileInfo *info) {
    char err[2048];
    if (model_file_probe(path, info, err, sizeof(err))) { llmc_die("%s", err); }
}

// recompute the payload CRC; 0 if it matches the header (or the file carries none), else 1
static inline int model_file_verify(const char *path, const ModelFileInfo *info) {
    if (!info->has_crc) { return 0; }
    FILE *fp = fopen_regular(path, "model file", NULL);
    fseekCheck(fp, HEADER_BYTES, SEEK_SET);
    size_t total = info->num_params * (info->version == MODEL_VERSION_FP32 ? 4 : 2);
    const size_t chunk = total < ((size_t)1 << 22) ? (total > 0 ? total : 1) : ((size_t)1 << 22);
    unsigned char *buf = (unsigned char *)mallocCheck(chunk);
    uint32_t crc = 0;
    for (size_t done = 0; done < total;) {
        size_t n = total - done < chunk ? total - done : chunk;
        freadCheck(buf, 1, n, fp);
        crc = crc32_update(crc, buf, n);
        done += n;
    }
    free(buf);
    fcloseCheck(fp);
    return crc != info->crc;
}

static inline int gpt2_config_equal(const GPT2Config *a, const GPT2Config *b) {
    return a->max_seq_len == b->max_seq_len && a->vocab_size == b->vocab_size &&
           a->padded_vocab_size == b->padded_vocab_size && a->num_layers == b->num_layers &&
           a->num_heads == b->num_heads && a->channels == b->channels;
}

// a model file must hold the model that was built (what -e names); hint: what to do otherwise
static inline void model_file_require_config(const char *path, const ModelFileInfo *info, const GPT2Config *want,
                                             const char *hint) {
    const GPT2Config *c = &info->config;
    if (!gpt2_config_equal(c, want)) {
        llmc_die("model file '%s' is L=%d C=%d NH=%d V=%d maxT=%d, but the model built (-e) is L=%d C=%d NH=%d V=%d "
                 "maxT=%d; %s", path, c->num_layers, c->channels, c->num_heads, c->vocab_size, c->max_seq_len,
                 want->num_layers, want->channels, want->num_heads, want->vocab_size, want->max_seq_len, hint);
    }
}

// load all parameters, converting to fp32 (dst_bf16 == NULL) and/or bf16 (dst_fp32 == NULL);
// either pointer may be NULL. Verifies the CRC when the file has one.
static inline void model_file_load(const char *path, const ModelFileInfo *info, float *dst_fp32, uint16_t *dst_bf16) {
    FILE *fp = fopen_regular(path, "model file", NULL);
    fseekCheck(fp, HEADER_BYTES, SEEK_SET);
    const size_t chunk = info->num_params < ((size_t)1 << 20) ? info->num_params : ((size_t)1 << 20);  // elements per read
    size_t elem = info->version == MODEL_VERSION_FP32 ? 4 : 2;
    unsigned char *buf = (unsigned char *)mallocCheck(chunk * elem);
    uint32_t crc = 0;
    for (size_t i = 0; i < info->num_params; i += chunk) {
        size_t n = info->num_params - i < chunk ? info->num_params - i : chunk;
        freadCheck(buf, elem, n, fp);
        crc = crc32_update(crc, buf, n * elem);
        if (info->version == MODEL_VERSION_FP32) {
            const float *src = (const float *)buf;
            if (dst_fp32) { memcpy(dst_fp32 + i, src, n * 4); }
            if (dst_bf16) { for (size_t j = 0; j < n; j++) { dst_bf16[i + j] = float_to_bf16(src[j]); } }
        } else {
            const uint16_t *src = (const uint16_t *)buf;
            if (dst_bf16) { memcpy(dst_bf16 + i, src, n * 2); }
            if (dst_fp32) { for (size_t j = 0; j < n; j++) { dst_fp32[i + j] = bf16_to_float(src[j]); } }
        }
    }
    free(buf);
    fcloseCheck(fp);
    if (info->has_crc && crc != info->crc) {
        llmc_die("model file '%s' is corrupt: checksum %08x, header says %08x; restore it from a copy, or use another model file", path,
                 crc, info->crc);
    }
}

static inline void model_header_fill(int header[HEADER_INTS], const GPT2Config *c, int version) {
    memset(header, 0, HEADER_INTS * sizeof(int));
    header[0] = MODEL_MAGIC;
    header[1] = version;
    header[2] = c->max_seq_len;
    header[3] = c->vocab_size;
    header[4] = c->num_layers;
    header[5] = c->num_heads;
    header[6] = c->channels;
    header[7] = c->padded_vocab_size;
    header[252] = CRC_TAG;
}

// the payload's CRC into the header, then the header's own CRC
static inline void model_header_set_crc(int header[HEADER_INTS], uint32_t payload_crc) {
    header[253] = (int)payload_crc;
    header[254] = (int)header_crc(header, HEADER_INTS, 254);
}

// once the payload is written through af: its CRC and the header's, then the header over the first bytes
static inline void model_header_seal(AtomicFile *af, int header[HEADER_INTS]) {
    model_header_set_crc(header, af->crc);
    atomic_patch(af, 0, header, HEADER_INTS * sizeof(int));
}

// Model files are written under -o: the trainers' checkpoints, export_hf --to-bin's output.
// write a model file atomically from fp32 params: version 3 as is, version 5 rounded to bf16 (RNE)
static inline void model_file_write_fp32(const char *path, const GPT2Config *c, const float *params, int version) {
    int header[HEADER_INTS];
    model_header_fill(header, c, version);
    AtomicFile af;
    atomic_open_for(&af, path, "-o");
    atomic_write(&af, header, sizeof(header), 0);
    size_t n = gpt2_num_params(c);
    if (version == MODEL_VERSION_FP32) {
        atomic_write(&af, params, n * sizeof(float), 1);
    } else {
        const size_t chunk = 1 << 20;
        uint16_t *buf = (uint16_t *)mallocCheck(chunk * 2);
        for (size_t i = 0; i < n; i += chunk) {
            size_t m = n - i < chunk ? n - i : chunk;
            for (size_t j = 0; j < m; j++) { buf[j] = float_to_bf16(params[i + j]); }
            atomic_write(&af, buf, m * 2, 1);
        }
        free(buf);
    }
    model_header_seal(&af, header);
    atomic_commit(&af);
}

// ----------------------------------------------------------------------------
// random initialization (GPT-2 / llm.c scheme), shared by both trainers so they init alike:
// weights N(0, 0.02); attprojw and fcprojw N(0, 0.02/sqrt(2L)); biases 0; LayerNorm weight 1,
// bias 0; the padded vocab rows of wte stay 0. Deterministic for a seed (not PyTorch's stream).


// uniform in (0, 1)
static inline double rand_uniform_open(uint64_t *state) {
    return ((double)(splitmix64(state) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

// pairs of normals per block of the parallel loop below (its values do not depend on the block size)
#define INIT_BLOCK_PAIRS 8192

/*
 * n normals N(0, stddev^2) from the splitmix64 stream at *state (advanced past the 2 * ceil(n/2)
 * uniforms drawn). Box-Muller turns uniforms 2j+1 and 2j+2 into x[2j] and x[2j+1]. The blocks run on
 * all OpenMP threads (d48's 1.5 billion values took 37 s on one thread): each block starts its part
 * of the stream where it lies (splitmix64 is a counter), and the blocks are fixed, so every value is
 * computed by the same code on any number of threads and comes out bitwise the same
 * (dev/test/test_init.c).
 */
static inline void fill_normal(float *x, size_t n, float stddev, uint64_t *state) {
    const size_t pairs = (n + 1) / 2, blocks = (pairs + INIT_BLOCK_PAIRS - 1) / INIT_BLOCK_PAIRS;
    const uint64_t start = *state;
#pragma omp parallel for schedule(static)
    for (long long b = 0; b < (long long)blocks; b++) {
        const size_t j0 = (size_t)b * INIT_BLOCK_PAIRS, j1 = j0 + INIT_BLOCK_PAIRS < pairs ? j0 + INIT_BLOCK_PAIRS : pairs;
        uint64_t st = start + 2 * (uint64_t)j0 * SPLITMIX64_GAMMA;
        for (size_t j = j0; j < j1; j++) {
            double u1 = rand_uniform_open(&st), u2 = rand_uniform_open(&st);
            double r = sqrt(-2.0 * log(u1));
            x[2 * j] = (float)(stddev * r * cos(2.0 * M_PI * u2));
            if (2 * j + 1 < n) { x[2 * j + 1] = (float)(stddev * r * sin(2.0 * M_PI * u2)); }
        }
    }
    *state = start + 2 * (uint64_t)pairs * SPLITMIX64_GAMMA;
}

static inline void gpt2_init_params(float *params, const GPT2Config *c, uint64_t seed) {
    size_t sizes[NUM_PARAMETER_TENSORS];
    gpt2_param_sizes(sizes, c);
    float residual_std = 0.02f / sqrtf(2.0f * c->num_layers);
    float *p = params;
    for (int i = 0; i < NUM_PARAMETER_TENSORS; i++) {
        // each tensor gets its own stream so that sizes of one do not shift the others
        uint64_t state = seed * 1000003ULL + (uint64_t)i;
        if (i == 2 || i == 8 || i == 14) {         // LayerNorm weights
            for (size_t j = 0; j < sizes[i]; j++) { p[j] = 1.0f; }
        } else if (gpt2_param_is_decayed(i)) {     // 2-D weights
            float std = (i == 6 || i == 12) ? residual_std : 0.02f;
            if (i == 0) {
                // wte: only the V real rows are random, padded rows are 0
                size_t real = (size_t)c->vocab_size * c->channels;
                fill_normal(p, real, std, &state);
                memset(p + real, 0, (sizes[i] - real) * sizeof(float));
            } else {
                fill_normal(p, sizes[i], std, &state);
            }
        } else {                                   // biases
            memset(p, 0, sizes[i] * sizeof(float));
        }
        p += sizes[i];
    }
}

#endif  // LLMC_MODEL_IO_H
