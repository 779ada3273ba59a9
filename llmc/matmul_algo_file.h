/*
 * -mt 1's choices on disk. Timing chooses the matmul algorithm of each GEMM shape, so two runs may
 * choose differently and differ in the last bits. The CUDA trainer writes what it chose to
 * <out>/matmul_algos_<rank>.bin whenever it has timed new shapes, and reads that file at its start:
 * a resumed run (or any later run into the same -o) takes the same algorithms and computes the same
 * bits as the run that chose them. The algorithms are cuBLASLt's for one GPU model, so a file made
 * under another cuBLASLt version, GPU name or SM count is not used (timing runs again, with a
 * warning), and each algorithm read is checked by cuBLASLt for its shape before it runs.
 *
 * cuBLASLt's header says its algorithm struct may be stored as bytes and restored for use with the
 * same library version, which is what this file does.
 *
 * This file only moves bytes: the GEMM key and cuBLASLt's algorithm are opaque records here, whose
 * sizes the caller gives (llmc/cuda/cublas_common.cuh) and the file records (a build whose structs
 * differ does not read it). Plain C, so that the fuzz harness reads it without CUDA.
 *
 * Layout, little-endian: a header of ALGO_FILE_HEADER_BYTES,
 *   char magic[8] "LLMCALGO" | int32 version (1) | int32 sm_count | uint64 cublaslt_version |
 *   int32 key_bytes | int32 algo_bytes | int32 count | uint32 crc (CRC-32 of the records) |
 *   32 bytes reserved (zero) | char device[256] (the GPU's name, NUL-terminated)
 * then `count` records of key_bytes + algo_bytes + ALGO_FILE_TIMES_BYTES: the key, the algorithm,
 * then float ms with the heuristic's first | float ms with the chosen | int32 the chosen's index.
 */
#ifndef LLMC_MATMUL_ALGO_FILE_H
#define LLMC_MATMUL_ALGO_FILE_H

#include "utils.h"

#define ALGO_FILE_MAGIC "LLMCALGO"
#define ALGO_FILE_VERSION 1
#define ALGO_FILE_DEVICE_BYTES 256
#define ALGO_FILE_FIXED_BYTES 72
#define ALGO_FILE_HEADER_BYTES (ALGO_FILE_FIXED_BYTES + ALGO_FILE_DEVICE_BYTES)
#define ALGO_FILE_TIMES_BYTES 12

// where the algorithms were chosen: a file from elsewhere is not used
typedef struct {
    char device[ALGO_FILE_DEVICE_BYTES];
    int sm_count;
    uint64_t cublaslt_version;
} AlgoOrigin;

static inline size_t algo_file_record_bytes(size_t key_bytes, size_t algo_bytes) {
    return key_bytes + algo_bytes + ALGO_FILE_TIMES_BYTES;
}

static inline void algo_file_header(unsigned char h[ALGO_FILE_HEADER_BYTES], const AlgoOrigin *o, size_t key_bytes,
                                    size_t algo_bytes, int count, uint32_t crc) {
    const int32_t version = ALGO_FILE_VERSION, sms = o->sm_count, kb = (int32_t)key_bytes, ab = (int32_t)algo_bytes,
                  n = count;
    const uint64_t lt = o->cublaslt_version;
    memset(h, 0, ALGO_FILE_HEADER_BYTES);
    memcpy(h, ALGO_FILE_MAGIC, 8);
    memcpy(h + 8, &version, 4);
    memcpy(h + 12, &sms, 4);
    memcpy(h + 16, &lt, 8);
    memcpy(h + 24, &kb, 4);
    memcpy(h + 28, &ab, 4);
    memcpy(h + 32, &n, 4);
    memcpy(h + 36, &crc, 4);
    snprintf((char *)h + ALGO_FILE_FIXED_BYTES, ALGO_FILE_DEVICE_BYTES, "%s", o->device);
}

/*
 * Writes `count` records (each algo_file_record_bytes long, back to back) to path, crash-safe (a
 * temporary, then rename). 0, or -1 with the reason in err: a failed write must not end the run,
 * which only loses the reuse of its choices.
 */
static inline int algo_file_write(const char *path, const AlgoOrigin *o, size_t key_bytes, size_t algo_bytes,
                                  const void *records, int count, char *err, size_t errlen) {
    const size_t bytes = (size_t)count * algo_file_record_bytes(key_bytes, algo_bytes);
    unsigned char h[ALGO_FILE_HEADER_BYTES];
    algo_file_header(h, o, key_bytes, algo_bytes, count, crc32_update(0, records, bytes));
    AtomicFile af;
    if (atomic_open_soft(&af, path, "-o", err, errlen) != 0) { return -1; }
    atomic_write(&af, h, sizeof(h), 0);
    atomic_write(&af, records, bytes, 0);
    return atomic_commit(&af);
}

// algo_file_read's checks of an open file
static inline int algo_file_read_open(FILE *f, const AlgoOrigin *here, size_t key_bytes, size_t algo_bytes, void *records,
                                      int max, char *why, size_t whylen) {
    unsigned char h[ALGO_FILE_HEADER_BYTES];
    const size_t got = fread(h, 1, sizeof(h), f);
    if (got != sizeof(h) || memcmp(h, ALGO_FILE_MAGIC, 8) != 0) {
        snprintf(why, whylen, "is not a matmul algorithm file (%s)", got != sizeof(h) ? "shorter than its header" : "no LLMCALGO magic");
        return -2;
    }
    int32_t version, sms, kb, ab, count;
    uint32_t crc;
    uint64_t lt;
    memcpy(&version, h + 8, 4);
    memcpy(&sms, h + 12, 4);
    memcpy(&lt, h + 16, 8);
    memcpy(&kb, h + 24, 4);
    memcpy(&ab, h + 28, 4);
    memcpy(&count, h + 32, 4);
    memcpy(&crc, h + 36, 4);
    const char *device = (const char *)h + ALGO_FILE_FIXED_BYTES;
    if (version != ALGO_FILE_VERSION) {
        snprintf(why, whylen, "has version %d (this build reads %d)", (int)version, ALGO_FILE_VERSION);
        return -2;
    }
    if (memchr(device, '\0', ALGO_FILE_DEVICE_BYTES) == NULL) {
        snprintf(why, whylen, "is damaged (its device name is not terminated)");
        return -2;
    }
    if (kb != (int32_t)key_bytes || ab != (int32_t)algo_bytes) {
        snprintf(why, whylen, "was written by another build (records of %d + %d bytes, this build's %zu + %zu)", (int)kb,
                 (int)ab, key_bytes, algo_bytes);
        return -2;
    }
    if (strcmp(device, here->device) != 0 || sms != here->sm_count || lt != here->cublaslt_version) {
        char shown[81];  // the file's name for its GPU, printable: the reason is one line
        size_t i = 0;
        for (; device[i] != '\0' && i + 1 < sizeof(shown); i++) { shown[i] = device[i] >= 32 && device[i] < 127 ? device[i] : '?'; }
        shown[i] = '\0';
        snprintf(why, whylen, "holds the choices of %s (%d SMs, cuBLASLt %llu), not of this %.80s (%d SMs, cuBLASLt %llu)",
                 shown, (int)sms, (unsigned long long)lt, here->device, here->sm_count,
                 (unsigned long long)here->cublaslt_version);
        return -2;
    }
    if (count < 0 || count > max) {
        snprintf(why, whylen, "is damaged (it counts %d records; at most %d)", (int)count, max);
        return -2;
    }
    const size_t bytes = (size_t)count * algo_file_record_bytes(key_bytes, algo_bytes);
    if (fread(records, 1, bytes, f) != bytes || fgetc(f) != EOF) {
        snprintf(why, whylen, "is damaged (its size is not that of its %d records)", (int)count);
        return -2;
    }
    if (crc32_update(0, records, bytes) != crc) {
        snprintf(why, whylen, "is damaged (its records do not match their checksum)");
        return -2;
    }
    return count;
}

/*
 * Reads path into `records` (room for `max` records of the sizes given). Returns the number read;
 * -1 where there is no such file; -2 where the file cannot be used, with why (one phrase) in why:
 * not a regular file, not this format, made by another build, on another GPU or cuBLASLt, or
 * damaged. Never more than `max` records, never reads past what the file holds.
 */
static inline int algo_file_read(const char *path, const AlgoOrigin *here, size_t key_bytes, size_t algo_bytes,
                                 void *records, int max, char *why, size_t whylen) {
    FILE *f;  // only a regular file: a FIFO in its place would block the open
    const int e = open_regular(path, &f, NULL, why, whylen);
    if (e == ENOENT) { return -1; }
    if (e != 0) { return -2; }
    const int rc = algo_file_read_open(f, here, key_bytes, algo_bytes, records, max, why, whylen);
    fclose(f);
    return rc;
}

#endif  // LLMC_MATMUL_ALGO_FILE_H
