/*
 * The tokenizer decode table (llm.c's gpt2_tokenizer.bin): token id -> bytes, used by the trainers
 * to print samples and by gpt2_tokenize -d. No PCRE2 or encoder files are needed to read it.
 *
 * File layout (little-endian, byte-compatible with llm.c):
 *   header: 256 uint32
 *     [0] = 20240328 (magic)   [1] = version (2; version 1 files, without [3], still read)
 *     [2] = vocab_size (50257 for GPT-2)   [3] = EOT token id (50256)
 *   then for each token id in order: one uint8 length L (1..255), then L bytes (no terminator)
 *
 * Made by: ./gpt2_tokenize -e encoder.json -m vocab.bpe -w gpt2_tokenizer.bin
 * (every dev/data recipe also writes it at the repo root when it is missing).
 * Plain C that also compiles as C++ (train_gpt2.cu includes it).
 */
#ifndef LLMC_TOKENIZER_H
#define LLMC_TOKENIZER_H

#include <ctype.h>
#include <stdint.h>
#include "utils.h"

#define TOKENIZER_MAGIC 20240328
#define TOKENIZER_VERSION 2
#define TOKENIZER_HOWTO "./gpt2_tokenize -e encoder.json -m vocab.bpe -w gpt2_tokenizer.bin (or run any dev/data recipe)"

typedef struct {
    uint32_t vocab_size;
    char **token_table;     // [vocab_size] NUL-terminated bytes of each token
    int init_ok;            // 0 if the file was missing: callers print token ids instead
    int eot_token;          // <|endoftext|>
    uint8_t *token_length;  // [vocab_size] bytes of each token (a token may hold a 0x00 byte)
} Tokenizer;

// the 1024-byte header of a decode table of size bytes: its vocab size and EOT id, checked
// against the file before anything is allocated
static void tokenizer_read_header(FILE *f, const char *filename, long long size, uint32_t *V_out, uint32_t *eot_out) {
    uint32_t header[256];
    if (fread(header, sizeof(uint32_t), 256, f) != 256) {
        llmc_die("tokenizer file '%s' is truncated (no complete 1024-byte header); remake it with: %s",
                 filename, TOKENIZER_HOWTO);
    }
    if (header[0] != TOKENIZER_MAGIC) {
        llmc_die("'%s' is not a tokenizer file (magic %u, expected %d); remake it with: %s",
                 filename, header[0], TOKENIZER_MAGIC, TOKENIZER_HOWTO);
    }
    uint32_t version = header[1];
    uint32_t V = header[2];
    if (version != 1 && version != 2) {
        llmc_die("tokenizer file '%s' has version %u; this build reads versions 1 and 2; remake it with: %s",
                 filename, version, TOKENIZER_HOWTO);
    }
    // every token takes at least 2 bytes (a length and one byte): V is checked against the file
    // before the table is allocated
    if (V == 0 || V > (1u << 24) || (long long)V > (size - 1024) / 2) {
        llmc_die("tokenizer file '%s' claims %u tokens, which its %lld bytes cannot hold; remake it with: %s",
                 filename, V, size, TOKENIZER_HOWTO);
    }
    // version 1 predates the EOT field; llm.c's version 1 files are GPT-2's, where EOT is 50256
    uint32_t eot = version == 1 ? 50256u : header[3];
    if (eot >= V) {
        llmc_die("tokenizer file '%s': EOT id %u is not below its vocab size %u; remake it with: %s",
                 filename, eot, V, TOKENIZER_HOWTO);
    }
    *V_out = V;
    *eot_out = eot;
}

// the V (length, bytes) entries after the header into t's table; nothing may follow them
static void tokenizer_read_table(Tokenizer *t, FILE *f, const char *filename, uint32_t V) {
    t->token_table = (char **)mallocCheck((size_t)V * sizeof(char *));
    t->token_length = (uint8_t *)mallocCheck(V);
    for (uint32_t i = 0; i < V; i++) {
        unsigned char len = 0;
        if (fread(&len, 1, 1, f) != 1) {
            llmc_die("tokenizer file '%s' is truncated at token %u of %u; remake it with: %s", filename, i, V,
                     TOKENIZER_HOWTO);
        }
        if (len == 0) {
            llmc_die("tokenizer file '%s' is corrupt (token %u has length 0); remake it with: %s", filename, i,
                     TOKENIZER_HOWTO);
        }
        char *s = (char *)mallocCheck((size_t)len + 1);
        if (fread(s, 1, len, f) != len) {
            llmc_die("tokenizer file '%s' is truncated at token %u of %u; remake it with: %s", filename, i, V,
                     TOKENIZER_HOWTO);
        }
        s[len] = '\0';
        t->token_table[i] = s;
        t->token_length[i] = len;
    }
    if (fgetc(f) != EOF) {
        llmc_die("tokenizer file '%s' has data after its %u tokens (corrupt?); remake it with: %s", filename, V,
                 TOKENIZER_HOWTO);
    }
}

// flag: the flag that named the file (-tk, -t), for messages. A missing file is a warning (the
// caller prints ids); any other file that is not a readable table is an error.
static void tokenizer_init(Tokenizer *t, const char *filename, const char *flag) {
    memset(t, 0, sizeof(*t));
    FILE *f;
    long long size;
    char why[512];
    int err = open_regular(filename, &f, &size, why, sizeof(why));
    if (err == ENOENT) {
        llmc_warn("tokenizer file %s '%s' not found; samples print token ids. Make it with: %s", flag, filename,
                  TOKENIZER_HOWTO);
        return;
    }
    if (err != 0) { llmc_die("tokenizer file %s '%s' %s; give the path of a decode table, made by: %s", flag, filename, why, TOKENIZER_HOWTO); }
    uint32_t V, eot;
    tokenizer_read_header(f, filename, size, &V, &eot);
    t->vocab_size = V;
    t->eot_token = (int)eot;
    tokenizer_read_table(t, f, filename, V);
    fclose(f);
    t->init_ok = 1;
}

// the bytes of a token as a C string, or NULL (with a warning) for ids outside the table
static const char *tokenizer_decode(Tokenizer *t, uint32_t token_id) {
    if (!t->init_ok) { return NULL; }
    if (token_id >= t->vocab_size) {
        llmc_warn("token id %u is out of the tokenizer's range 0..%u", token_id, t->vocab_size - 1);
        return NULL;
    }
    return t->token_table[token_id];
}

static void tokenizer_free(Tokenizer *t) {
    if (t->token_table) {
        for (uint32_t i = 0; i < t->vocab_size; i++) { free(t->token_table[i]); }
    }
    free(t->token_table);
    free(t->token_length);
    memset(t, 0, sizeof(*t));
}

// print a decoded piece; a piece that is a single unprintable byte (a control character, or one
// byte of a multi-byte UTF-8 character split across tokens) is skipped so terminals stay sane
static void safe_printf(const char *piece) {
    if (piece == NULL || piece[0] == '\0') { return; }
    if (piece[1] == '\0') {
        unsigned char c = (unsigned char)piece[0];
        if (!(isprint(c) || isspace(c))) { return; }
    }
    fputs(piece, stdout);
}

// write a decode table (flag: the flag that named the file, for messages); tokens[i] holds
// lengths[i] bytes, which the format stores in 1..255 (checked before anything is written)
static void tokenizer_write(const char *filename, const char *flag, uint32_t vocab_size, uint32_t eot_token,
                            const unsigned char *const *tokens, const uint32_t *lengths) {
    if (eot_token >= vocab_size) {
        llmc_die("%s %s: EOT id %u is not below the vocab size %u; a decode table cannot be written", flag, filename,
                 eot_token, vocab_size);
    }
    for (uint32_t i = 0; i < vocab_size; i++) {
        if (lengths[i] == 0 || lengths[i] > 255) {
            llmc_die("%s %s: token %u has %u bytes, but the decode table stores 1..255 bytes per token (llm.c's "
                     "format); this tokenizer's tables cannot be written", flag, filename, i, lengths[i]);
        }
    }
    uint32_t header[256];
    memset(header, 0, sizeof(header));
    header[0] = TOKENIZER_MAGIC;
    header[1] = TOKENIZER_VERSION;
    header[2] = vocab_size;
    header[3] = eot_token;
    AtomicFile af;
    atomic_open_for(&af, filename, flag);
    atomic_write(&af, header, sizeof(header), 0);
    for (uint32_t i = 0; i < vocab_size; i++) {
        unsigned char len = (unsigned char)lengths[i];
        atomic_write(&af, &len, 1, 0);
        atomic_write(&af, tokens[i], lengths[i], 0);
    }
    atomic_commit(&af);
}

#endif  // LLMC_TOKENIZER_H
