/*
 * Host utilities shared by every binary: error reporting, checked libc calls, file helpers,
 * CRC-32 checksums and crash-safe (write to temporary, fsync, rename) file output.
 *
 * Conventions that span files:
 * - Every fatal error goes through llmc_die(): one line "error: ..." (prefixed with the rank when
 *   more than one process runs), the fatal hooks (the flight record, a checkpoint in flight), the
 *   abort hook (MPI_Abort / NCCL abort, set by processes.h), then exit(1). Messages name the file
 *   or flag and say what to do.
 * - Everything here is C that also compiles as C++ (nvcc builds train_gpt2.cu with it).
 * - Integers read from a file are range-checked before they are used in arithmetic, indexing or
 *   allocation; products and sums of such values go through ckd_mul_size / ckd_add_size.
 */
#ifndef LLMC_UTILS_H
#define LLMC_UTILS_H

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

// ----------------------------------------------------------------------------
// error reporting

static int llmc_rank = 0;        // this process's rank, for message prefixes
static int llmc_world_size = 1;  // prefix messages with the rank only when > 1
// Called by llmc_die after the message, before exit(1). processes.h sets it to take the other ranks
// down too; the fuzz harnesses (dev/fuzz) set it to longjmp back, so that a clean rejection of an
// input is a result and not the end of the process. A hook that returns lets llmc_die exit.
static void (*llmc_abort_hook)(void) = NULL;
// Called by llmc_die after the message, in the order added, before the abort hook: the flight
// record (flight_record.h) writes itself out, the checkpoint in flight is finished
// (checkpoint.h). A hook that dies itself ends the process without the hooks after it.
#define LLMC_FATAL_HOOKS 4
static void (*llmc_fatal_hooks[LLMC_FATAL_HOOKS])(void);

static inline void llmc_add_fatal_hook(void (*hook)(void)) {
    for (int i = 0; i < LLMC_FATAL_HOOKS; i++) {
        if (llmc_fatal_hooks[i] == hook) { return; }
        if (llmc_fatal_hooks[i] == NULL) { llmc_fatal_hooks[i] = hook; return; }
    }
}

static inline void llmc_remove_fatal_hook(void (*hook)(void)) {
    for (int i = 0; i < LLMC_FATAL_HOOKS; i++) {
        if (llmc_fatal_hooks[i] != hook) { continue; }
        for (int j = i; j + 1 < LLMC_FATAL_HOOKS; j++) { llmc_fatal_hooks[j] = llmc_fatal_hooks[j + 1]; }
        llmc_fatal_hooks[LLMC_FATAL_HOOKS - 1] = NULL;
        return;
    }
}

static inline void llmc_set_rank(int rank, int world_size) {
    llmc_rank = rank;
    llmc_world_size = world_size;
}

// all n bytes of p to fd, as far as fd takes them (write(2) only: async-signal-safe)
static inline void llmc_write_all(int fd, const char *p, size_t n) {
    for (size_t off = 0; off < n;) {
        ssize_t w = write(fd, p + off, n - off);
        if (w <= 0) {
            if (w < 0 && errno == EINTR) { continue; }
            return;
        }
        off += (size_t)w;
    }
}

/*
 * "[rank R] KIND: MESSAGE\n" in one write(2), so that the lines of ranks sharing a launcher's pipe
 * never interleave (a pipe keeps a write of up to 4096 bytes whole): glibc 2.37 and newer write an
 * unbuffered stream's fprintf in pieces of 128 bytes (seen on Ubuntu 24.04 under mpirun).
 */
static inline void llmc_vprint(FILE *f, const char *kind, const char *fmt, va_list ap) {
    char msg[4000], line[4096];
    vsnprintf(msg, sizeof(msg), fmt, ap);
    int n = llmc_world_size > 1 ? snprintf(line, sizeof(line), "[rank %d] %s: %s\n", llmc_rank, kind, msg)
                                : snprintf(line, sizeof(line), "%s: %s\n", kind, msg);
    if (n < 0) { return; }
    if (n >= (int)sizeof(line)) {  // cut: still one line
        n = (int)sizeof(line) - 1;
        line[n - 1] = '\n';
    }
    fflush(f);
    llmc_write_all(fileno(f), line, (size_t)n);
}

#if defined(__GNUC__)
#define LLMC_PRINTF(a, b) __attribute__((format(printf, a, b)))
#define LLMC_NORETURN __attribute__((noreturn))
#else
#define LLMC_PRINTF(a, b)
#define LLMC_NORETURN
#endif

// the error line of llmc_die without the exit (for a caller that must do more before it ends)
static void llmc_error(const char *fmt, ...) LLMC_PRINTF(1, 2);
static void llmc_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    llmc_vprint(stderr, "error", fmt, ap);
    va_end(ap);
    fflush(stdout);
}

// s as a JSON string, quoted, its quotes, backslashes and control bytes escaped (other bytes as they are)
static inline void llmc_json_string(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        const unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\') { fprintf(f, "\\%c", ch); }
        else if (ch < 0x20) { fprintf(f, "\\u%04x", ch); }
        else { fputc(ch, f); }
    }
    fputc('"', f);
}

/*
 * A fatal error's line: on stderr, and under torchrun also into the file its agent reads
 * (TORCHELASTIC_ERROR_FILE, in the JSON that torch's @record writes), so that torchrun's failure
 * summary shows it as the root cause instead of "<N/A>".
 */
static inline void llmc_fatal_line(const char *msg) {
    llmc_error("%s", msg);
    const char *path = getenv("TORCHELASTIC_ERROR_FILE");
    if (path == NULL || path[0] == '\0') { return; }
    FILE *f = fopen(path, "w");
    if (f == NULL) { return; }
    char line[4100];
    snprintf(line, sizeof(line), "error: %s", msg);
    fputs("{\"message\": {\"message\": ", f);
    llmc_json_string(f, line);
    fputs(", \"extraInfo\": {\"py_callstack\": ", f);
    llmc_json_string(f, line);
    fprintf(f, ", \"timestamp\": \"%lld\"}}}\n", (long long)time(NULL));
    fclose(f);
}

static void llmc_die(const char *fmt, ...) LLMC_PRINTF(1, 2) LLMC_NORETURN;
static void llmc_die(const char *fmt, ...) {
    char msg[4000];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    llmc_fatal_line(msg);
    static int in_hooks = 0;  // a fatal hook that dies goes straight on to the abort hook
    if (!in_hooks) {
        in_hooks = 1;
        for (int i = 0; i < LLMC_FATAL_HOOKS && llmc_fatal_hooks[i]; i++) { llmc_fatal_hooks[i](); }
        in_hooks = 0;
    }
    if (llmc_abort_hook) { llmc_abort_hook(); }
    exit(EXIT_FAILURE);
}

static void llmc_warn(const char *fmt, ...) LLMC_PRINTF(1, 2);
static void llmc_warn(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    llmc_vprint(stderr, "warning", fmt, ap);
    va_end(ap);
}

// the digit 0..max in environment variable `name`, else `unset` where it is unset or empty; any
// other value stops the run with "<name>=<value>: <expected>"
static inline int env_digit(const char *name, int max, const char *expected, int unset) {
    const char *v = getenv(name);
    if (v == NULL || *v == '\0') { return unset; }
    if (v[0] < '0' || v[0] > '0' + max || v[1] != '\0') { llmc_die("%s=%s: %s", name, v, expected); }
    return v[0] - '0';
}

// ----------------------------------------------------------------------------
// checked libc calls: the failing call's file and line, and the path where there is one

static inline FILE *fopen_check(const char *path, const char *mode, const char *file, int line) {
    FILE *fp = fopen(path, mode);
    if (fp == NULL) {
        llmc_die("cannot open '%s' (mode %s): %s [%s:%d]", path, mode, strerror(errno), file, line);
    }
    return fp;
}
#define fopenCheck(path, mode) fopen_check(path, mode, __FILE__, __LINE__)

static inline void fread_check(void *ptr, size_t size, size_t nmemb, FILE *fp, const char *file, int line) {
    size_t got = fread(ptr, size, nmemb, fp);
    if (got != nmemb) {
        llmc_die("read failed: wanted %zu items of %zu bytes, got %zu (%s; file truncated?) [%s:%d]",
                 nmemb, size, got, feof(fp) ? "end of file" : "read error", file, line);
    }
}
#define freadCheck(ptr, size, nmemb, fp) fread_check(ptr, size, nmemb, fp, __FILE__, __LINE__)

static inline void fwrite_check(const void *ptr, size_t size, size_t nmemb, FILE *fp, const char *file, int line) {
    size_t put = fwrite(ptr, size, nmemb, fp);
    if (put != nmemb) {
        llmc_die("write failed: wanted %zu items of %zu bytes, wrote %zu (%s; disk full?) [%s:%d]",
                 nmemb, size, put, strerror(errno), file, line);
    }
}
#define fwriteCheck(ptr, size, nmemb, fp) fwrite_check(ptr, size, nmemb, fp, __FILE__, __LINE__)

static inline void fseek_check(FILE *fp, long off, int whence, const char *file, int line) {
    if (fseek(fp, off, whence) != 0) {
        llmc_die("seek to %ld failed: %s [%s:%d]", off, strerror(errno), file, line);
    }
}
#define fseekCheck(fp, off, whence) fseek_check(fp, off, whence, __FILE__, __LINE__)

static inline void fclose_check(FILE *fp, const char *file, int line) {
    if (fclose(fp) != 0) {
        llmc_die("closing a file failed: %s [%s:%d]", strerror(errno), file, line);
    }
}
#define fcloseCheck(fp) fclose_check(fp, __FILE__, __LINE__)

static inline void *malloc_check(size_t size, const char *file, int line) {
    void *p = malloc(size > 0 ? size : 1);
    if (p == NULL) {
        llmc_die("out of host memory allocating %zu bytes (%.2f GiB) [%s:%d]; use a smaller -b or -t",
                 size, size / (1024.0 * 1024.0 * 1024.0), file, line);
    }
    return p;
}
#define mallocCheck(size) malloc_check(size, __FILE__, __LINE__)

static inline void *calloc_check(size_t n, size_t size, const char *file, int line) {
    void *p = calloc(n > 0 ? n : 1, size > 0 ? size : 1);
    if (p == NULL) {
        llmc_die("out of host memory allocating %zu x %zu bytes [%s:%d]; use a smaller -b or -t",
                 n, size, file, line);
    }
    return p;
}
#define callocCheck(n, size) calloc_check(n, size, __FILE__, __LINE__)

// ----------------------------------------------------------------------------
// checked size arithmetic (C23's ckd_mul / ckd_add): *out = a * b or a + b; true on overflow

static inline int ckd_mul_size(size_t *out, size_t a, size_t b) { return __builtin_mul_overflow(a, b, out); }
static inline int ckd_add_size(size_t *out, size_t a, size_t b) { return __builtin_add_overflow(a, b, out); }

// ----------------------------------------------------------------------------
// large host arrays on transparent huge pages

#define HUGE_PAGE_BYTES ((size_t)2 << 20)

// a huge-page buffer's whole mapping, kept just below the buffer for host_free_huge
typedef struct {
    void *base;
    size_t length;
} HugeMapping;

/*
 * A zeroed buffer of `size` bytes for the CPU trainer's large arrays (parameters, gradients, AdamW's
 * moments, activations), aligned to 2 MiB and marked for transparent huge pages. Linux's default
 * THP mode ("madvise") gives huge pages only to memory marked so; with 4 KiB pages the passes that
 * stream through these arrays (AdamW, the elementwise kernels, the packing of matmul operands)
 * take a TLB miss every 4 KiB, and the hardware prefetchers stop at every page boundary
 * (dev/bench/RESULTS.md: a d12 step 5-8% faster). Where the kernel has no THP the
 * advice is refused and the buffer stays an ordinary one. `what` names the buffer in the
 * out-of-memory error. Freed with host_free_huge.
 */
static inline void *host_alloc_huge(size_t size, const char *what) {
    // the body starts past the header at the first 2 MiB boundary, at most 2 MiB into the mapping
    size_t body, length;
    if (ckd_add_size(&body, size, HUGE_PAGE_BYTES - 1) || ckd_add_size(&length, body - body % HUGE_PAGE_BYTES, HUGE_PAGE_BYTES)) {
        llmc_die("out of host memory: %s would take %zu bytes; use a smaller -b or -t", what, size);
    }
    body -= body % HUGE_PAGE_BYTES;
    void *base = mmap(NULL, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED) {
        llmc_die("out of host memory allocating %zu bytes (%.2f GiB) for %s: %s; use a smaller -b or -t", size,
                 size / (1024.0 * 1024.0 * 1024.0), what, strerror(errno));
    }
    const uintptr_t start = ((uintptr_t)base + sizeof(HugeMapping) + HUGE_PAGE_BYTES - 1) & ~(uintptr_t)(HUGE_PAGE_BYTES - 1);
    HugeMapping *mapping = (HugeMapping *)start - 1;
    mapping->base = base;
    mapping->length = length;
    (void)madvise((void *)start, body, MADV_HUGEPAGE);  // refused without THP: 4 KiB pages then
    return (void *)start;
}

static inline void host_free_huge(void *p) {
    if (p == NULL) { return; }
    const HugeMapping *mapping = (const HugeMapping *)p - 1;
    munmap(mapping->base, mapping->length);
}

// ----------------------------------------------------------------------------
// files and directories

static inline int file_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static inline int dir_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

// ----------------------------------------------------------------------------
// input files: only a regular file is read. A FIFO blocks open() (and every read) until some
// writer comes, a folder opens and then fails on read with a message that names neither it nor
// the flag, a device never ends. So a path is opened without blocking and checked on the open
// descriptor (no window between a check and the open) before a byte is read.

// opens `path` for reading if it is a regular file: 0, *fp set (and *size when size != NULL); else
// errno (ENOENT: it does not exist; EINVAL: it is not a regular file) with why it failed in `why`,
// a phrase that follows the path ("does not exist", "is a folder, not a file", ...)
static inline int open_regular(const char *path, FILE **fp, long long *size, char *why, size_t why_n) {
    *fp = NULL;
    if (size) { *size = -1; }
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        snprintf(why, why_n, e == ENOENT ? "does not exist" : "cannot be opened: %s", strerror(e));
        return e;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        snprintf(why, why_n, "cannot be read: %s", strerror(e));
        close(fd);
        return e;
    }
    if (!S_ISREG(st.st_mode)) {
        snprintf(why, why_n, "%s", S_ISDIR(st.st_mode) ? "is a folder, not a file"
                 : S_ISFIFO(st.st_mode) ? "is a FIFO (named pipe), not a regular file"
                 : S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ? "is a device, not a regular file"
                 : "is not a regular file");
        close(fd);
        return EINVAL;
    }
    int flags = fcntl(fd, F_GETFL);  // reads of a regular file never block; clear the flag anyway
    if (flags != -1) { fcntl(fd, F_SETFL, flags & ~O_NONBLOCK); }
    *fp = fdopen(fd, "rb");
    if (*fp == NULL) {
        snprintf(why, why_n, "cannot be opened: %s", strerror(errno));
        close(fd);
        return EIO;
    }
    if (size) { *size = (long long)st.st_size; }
    return 0;
}

// the same, or die naming the file and what it is for: "<what> '<path>' <why>", e.g. what =
// "-tk decode table" or "encoder.json (--bpe-dir)"
static inline FILE *fopen_regular(const char *path, const char *what, long long *size) {
    FILE *fp;
    char why[512];
    if (open_regular(path, &fp, size, why, sizeof(why)) != 0) {
        llmc_die("%s '%s' %s; give the path of the file itself", what, path, why);
    }
    return fp;
}

// size of a file in bytes, or -1 if it cannot be stat'ed
static inline long long file_size_bytes(const char *path) {
    struct stat st;
    if (stat(path, &st) != 0) { return -1; }
    return (long long)st.st_size;
}

// mkdir -p; dies with the path on failure, naming the flag that gave it (NULL: none)
static inline void make_dirs_for(const char *path, const char *flag) {
    char buf[4096];
    size_t n = strlen(path);
    if (n == 0) { return; }
    if (n >= sizeof(buf)) { llmc_die("path too long: %s", path); }
    memcpy(buf, path, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (buf[i] == '/' || buf[i] == '\0') {
            char saved = buf[i];
            buf[i] = '\0';
            if (mkdir(buf, 0755) != 0 && errno != EEXIST) {
                if (flag) { llmc_die("%s %s: cannot create directory '%s': %s; choose another %s", flag, path, buf, strerror(errno), flag); }
                llmc_die("cannot create directory '%s': %s", buf, strerror(errno));
            }
            buf[i] = saved;
        }
    }
    if (!dir_exists(path)) { llmc_die("'%s' exists and is not a directory", path); }
}
static inline void make_dirs(const char *path) { make_dirs_for(path, NULL); }

// ----------------------------------------------------------------------------
// CRC-32 (the zlib / PNG polynomial, so Python's zlib.crc32 gives the same value), slicing-by-8

static uint32_t llmc_crc_table[8][256];
static int llmc_crc_ready = 0;
#if defined(__x86_64__) && defined(__GNUC__)
static int llmc_crc_fold = 0;  // whether this CPU has PCLMULQDQ (crc32_raw_fold below)
#endif

static inline void crc32_init_tables(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) { c = (c & 1) ? (0xEDB88320u ^ (c >> 1)) : (c >> 1); }
        llmc_crc_table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = llmc_crc_table[0][i];
        for (int t = 1; t < 8; t++) {
            c = llmc_crc_table[0][c & 0xff] ^ (c >> 8);
            llmc_crc_table[t][i] = c;
        }
    }
#if defined(__x86_64__) && defined(__GNUC__)
    llmc_crc_fold = __builtin_cpu_supports("pclmul") != 0;
#endif
    llmc_crc_ready = 1;
}

// the CRC register (pre- and post-inversion left to the caller) over len bytes, 8 at a time
static inline uint32_t crc32_raw_bytes(uint32_t reg, const unsigned char *p, size_t len) {
    while (len >= 8) {
        uint32_t lo, hi;
        memcpy(&lo, p, 4);
        memcpy(&hi, p + 4, 4);
        lo ^= reg;
        reg = llmc_crc_table[7][lo & 0xff] ^ llmc_crc_table[6][(lo >> 8) & 0xff] ^
              llmc_crc_table[5][(lo >> 16) & 0xff] ^ llmc_crc_table[4][lo >> 24] ^
              llmc_crc_table[3][hi & 0xff] ^ llmc_crc_table[2][(hi >> 8) & 0xff] ^
              llmc_crc_table[1][(hi >> 16) & 0xff] ^ llmc_crc_table[0][hi >> 24];
        p += 8;
        len -= 8;
    }
    while (len--) { reg = llmc_crc_table[0][(reg ^ *p++) & 0xff] ^ (reg >> 8); }
    return reg;
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define LLMC_CRC_FOLD 1
/*
 * The same register over len >= 64 bytes by carry-less multiplication (PCLMULQDQ): 6.6x the
 * tables' speed on the build machine (dev/bench/RESULTS.md), so a checkpoint's 1.5 GB are summed
 * in a fraction of the time its writer has between two steps. Four 128-bit lanes are folded
 * forward 512 bits at a time (multiplying by x^(512+-32) mod P, k1 and k2), then into one lane
 * (x^(128+-32) mod P, k3 and k4), then 16 bytes at a time; the last lane and the tail (< 16 bytes)
 * go through the tables: the CRC is linear, so the folded lane followed by the tail has the
 * register of the whole message.
 */
__attribute__((target("pclmul,sse4.1"))) static inline __m128i crc32_fold(__m128i x, __m128i k, __m128i next) {
    return _mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128(x, k, 0x00), _mm_clmulepi64_si128(x, k, 0x11)), next);
}

__attribute__((target("pclmul,sse4.1"))) static inline uint32_t crc32_raw_fold(uint32_t reg, const unsigned char *p, size_t len) {
    const __m128i k1k2 = _mm_set_epi64x(0x1c6e41596LL, 0x154442bd4LL);
    const __m128i k3k4 = _mm_set_epi64x(0x0ccaa009eLL, 0x1751997d0LL);
    __m128i x0 = _mm_loadu_si128((const __m128i *)p), x1 = _mm_loadu_si128((const __m128i *)(p + 16));
    __m128i x2 = _mm_loadu_si128((const __m128i *)(p + 32)), x3 = _mm_loadu_si128((const __m128i *)(p + 48));
    x0 = _mm_xor_si128(x0, _mm_cvtsi32_si128((int)reg));
    p += 64;
    len -= 64;
    for (; len >= 64; p += 64, len -= 64) {
        x0 = crc32_fold(x0, k1k2, _mm_loadu_si128((const __m128i *)p));
        x1 = crc32_fold(x1, k1k2, _mm_loadu_si128((const __m128i *)(p + 16)));
        x2 = crc32_fold(x2, k1k2, _mm_loadu_si128((const __m128i *)(p + 32)));
        x3 = crc32_fold(x3, k1k2, _mm_loadu_si128((const __m128i *)(p + 48)));
    }
    x0 = crc32_fold(crc32_fold(crc32_fold(x0, k3k4, x1), k3k4, x2), k3k4, x3);
    for (; len >= 16; p += 16, len -= 16) { x0 = crc32_fold(x0, k3k4, _mm_loadu_si128((const __m128i *)p)); }
    unsigned char lane[16];
    _mm_storeu_si128((__m128i *)lane, x0);
    return crc32_raw_bytes(crc32_raw_bytes(0, lane, 16), p, len);
}
#endif

#if defined(__aarch64__) && defined(__ARM_FEATURE_CRC32)
#include <arm_acle.h>
#define LLMC_CRC_ARM 1
/*
 * The same register by ARMv8's CRC32 instructions (the zlib polynomial, reflected, no inversion:
 * the register's update itself), 8 bytes each; every ARMv8.1 CPU has them, and a build for one
 * (-march=native there) defines __ARM_FEATURE_CRC32.
 */
static inline uint32_t crc32_raw_arm(uint32_t reg, const unsigned char *p, size_t len) {
    for (; len >= 8; p += 8, len -= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        reg = __crc32d(reg, v);
    }
    for (; len > 0; p++, len--) { reg = __crc32b(reg, *p); }
    return reg;
}
#endif

// running CRC: start with crc = 0, feed chunks in order
static inline uint32_t crc32_update(uint32_t crc, const void *data, size_t len) {
    const unsigned char *p = (const unsigned char *)data;
#ifdef LLMC_CRC_ARM
    return ~crc32_raw_arm(~crc, p, len);
#else
    if (!llmc_crc_ready) { crc32_init_tables(); }
#ifdef LLMC_CRC_FOLD
    if (llmc_crc_fold && len >= 64) { return ~crc32_raw_fold(~crc, p, len); }
#endif
    return ~crc32_raw_bytes(~crc, p, len);
#endif
}

// ----------------------------------------------------------------------------
// crash-safe output: write "<path>.tmp.<pid>", then fsync + rename over <path>.
// A reader never sees a half-written file under the final name. A write that fails (a full disk,
// a read-only directory, an I/O error) removes the temporary file (it takes the space another file
// needs) and dies naming the file and the flag that chose it; or, for a file opened with
// atomic_open_soft, the message goes to the caller's buffer, the later calls do nothing and
// atomic_commit returns -1 (a checkpoint written while training goes on must not end the run).
//
// atomic_open_direct adds a fast path for files written front to back (checkpoints): what
// atomic_write appends goes out with O_DIRECT, past the page cache, straight from the caller's
// bytes where they are 4096-aligned in memory and in the file, else gathered in an aligned stage.
// Through the page cache, the copies of a 1.5 GB checkpoint cost its writer seconds of kernel
// CPU, taken from the training threads of a CPU run (dev/bench/RESULTS.md, "Checkpoints in the
// background"). A file system that refuses O_DIRECT gets the buffered path; so does everything
// after the first atomic_write_at (a header patched last).
#define ATOMIC_STAGE_BYTES ((size_t)4 << 20)

typedef struct {
    FILE *fp;
    unsigned char *stage;  // the direct path (NULL: none): ATOMIC_STAGE_BYTES, 4096-aligned, holding [bytes - staged, bytes)
    int dfd;               // the temporary opened again with O_DIRECT (-1 once a write refused it)
    size_t staged;
    char final_path[4096];
    char tmp_path[4160];
    const char *flag;   // the flag that named the file or its folder ("-o"), for messages; NULL: none
    uint32_t crc;       // CRC-32 of everything passed to atomic_write()
    long long bytes;    // bytes written so far
    char *err;          // soft mode: the first failure's message goes here; NULL: a failure dies
    size_t errlen;
    int failed;
} AtomicFile;

static inline void atomic_direct_close(AtomicFile *af) {
    if (af->stage == NULL) { return; }
    if (af->dfd >= 0) { close(af->dfd); }
    free(af->stage);
    af->stage = NULL;
}

static void atomic_fail(AtomicFile *af, const char *what) {
    int e = errno;
    atomic_direct_close(af);
    errno = e;
    if (af->fp) { fclose(af->fp); af->fp = NULL; }
    unlink(af->tmp_path);
    char msg[4400];
    snprintf(msg, sizeof(msg), "%s%s%s '%s' failed: %s%s", af->flag ? af->flag : "", af->flag ? ": " : "", what,
             af->final_path, strerror(e), e == ENOSPC || e == EDQUOT ? " (the disk is full)" : "");
    if (af->err == NULL) {
        llmc_die("%s; %schoose another %s", msg, e == ENOSPC || e == EDQUOT ? "free space there or " : "",
                 af->flag ? af->flag : "output");
    }
    if (!af->failed) { snprintf(af->err, af->errlen, "%s", msg); }
    af->failed = 1;
}

// opens the temporary; 0, or -1 after a failure (soft mode; with err NULL a failure dies)
static inline int atomic_open_soft(AtomicFile *af, const char *path, const char *flag, char *err, size_t errlen) {
    memset(af, 0, sizeof(*af));
    af->flag = flag;
    af->err = err;
    af->errlen = errlen;
    if (strlen(path) >= sizeof(af->final_path)) {
        if (err == NULL) { llmc_die("%s%spath too long: %s", flag ? flag : "", flag ? ": " : "", path); }
        snprintf(err, errlen, "%s%spath too long: %s", flag ? flag : "", flag ? ": " : "", path);
        af->failed = 1;
        return -1;
    }
    strcpy(af->final_path, path);
    snprintf(af->tmp_path, sizeof(af->tmp_path), "%s.tmp.%d", path, (int)getpid());
    af->fp = fopen(af->tmp_path, "wb");
    if (af->fp == NULL) {
        if (err == NULL) {
            llmc_die("%s%scannot create '%s': %s (does the output directory exist and is it writable?)", flag ? flag : "",
                     flag ? ": " : "", af->tmp_path, strerror(errno));
        }
        atomic_fail(af, "creating");
        return -1;
    }
    return 0;
}
static inline void atomic_open_for(AtomicFile *af, const char *path, const char *flag) {
    atomic_open_soft(af, path, flag, NULL, 0);
}
static inline void atomic_open(AtomicFile *af, const char *path) { atomic_open_for(af, path, NULL); }

// atomic_open_soft with the direct path where the file system takes it (see above)
static inline int atomic_open_direct(AtomicFile *af, const char *path, const char *flag, char *err, size_t errlen) {
    if (atomic_open_soft(af, path, flag, err, errlen)) { return -1; }
#ifdef O_DIRECT
    if (posix_memalign((void **)&af->stage, 4096, ATOMIC_STAGE_BYTES) != 0) { af->stage = NULL; return 0; }
    af->dfd = open(af->tmp_path, O_WRONLY | O_DIRECT);
    if (af->dfd < 0) { free(af->stage); af->stage = NULL; }
#endif
    return 0;
}

// size bytes at offset through descriptor fd, retrying short writes; 0, or -1 with errno
static inline int pwrite_all(int fd, const unsigned char *data, size_t size, long long offset) {
    while (size > 0) {
        ssize_t k = pwrite(fd, data, size, (off_t)offset);
        if (k < 0 && errno == EINTR) { continue; }
        if (k <= 0) { if (k == 0) { errno = EIO; } return -1; }
        data += k; size -= (size_t)k; offset += k;
    }
    return 0;
}

// size aligned bytes at offset at through dfd: 0 done, -1 failed (af failed), 1 not done: the file
// system took the O_DIRECT open but refuses the writes (EINVAL), so dfd is closed and the caller
// writes them through fp's descriptor, as it will everything after
static inline int atomic_direct_pwrite(AtomicFile *af, const unsigned char *p, size_t size, long long at) {
    if (af->dfd < 0) { return 1; }
    if (pwrite_all(af->dfd, p, size, at) == 0) { return 0; }
    if (errno != EINVAL) { atomic_fail(af, "writing"); return -1; }
    close(af->dfd);
    af->dfd = -1;
    return 1;
}

// write the staged bytes: a full stage directly, a partial one (the end of the file) through fp's
// descriptor
static inline void atomic_unstage(AtomicFile *af) {
    const long long at = af->bytes - (long long)af->staged;
    int rc = af->staged == ATOMIC_STAGE_BYTES ? atomic_direct_pwrite(af, af->stage, af->staged, at) : 1;
    if (rc == 1 && pwrite_all(fileno(af->fp), af->stage, af->staged, at) != 0) { atomic_fail(af, "writing"); return; }
    if (rc >= 0) { af->staged = 0; }
}

// leave the direct path: what is staged goes out, and fp continues at the end of the file
static inline void atomic_direct_end(AtomicFile *af) {
    if (af->stage == NULL || af->failed) { return; }
    atomic_unstage(af);
    if (af->failed) { return; }
    atomic_direct_close(af);
    if (fseeko(af->fp, (off_t)af->bytes, SEEK_SET) != 0) { atomic_fail(af, "seeking in"); }
}

// bytes at an absolute offset of the file (the sections of a state file; a header patched in last)
static inline void atomic_write_at(AtomicFile *af, long long offset, const void *data, size_t size) {
    atomic_direct_end(af);
    if (af->failed) { return; }
    if (fseeko(af->fp, (off_t)offset, SEEK_SET) != 0) { atomic_fail(af, "seeking in"); return; }
    if (size > 0 && fwrite(data, 1, size, af->fp) != size) { atomic_fail(af, "writing"); }
}

// write bytes at the end; include them in the checksum if checksum != 0
static inline void atomic_write(AtomicFile *af, const void *data, size_t size, int checksum) {
    if (size == 0 || af->failed) { return; }
    if (checksum) { af->crc = crc32_update(af->crc, data, size); }
    if (af->stage == NULL) {
        if (fwrite(data, 1, size, af->fp) != size) { atomic_fail(af, "writing"); return; }
        af->bytes += (long long)size;
        return;
    }
    const unsigned char *p = (const unsigned char *)data;
    if (af->staged == 0 && ((uintptr_t)p | (uintptr_t)af->bytes) % 4096 == 0 && size >= 4096) {
        // aligned in memory and in the file (a snapshot laid out as its file): straight from the
        // caller's bytes, no copy; what is left of the last 4096 is staged
        const size_t whole = size / 4096 * 4096;
        const int rc = atomic_direct_pwrite(af, p, whole, af->bytes);
        if (rc < 0) { return; }
        if (rc == 0) { af->bytes += (long long)whole; p += whole; size -= whole; }
    }
    while (size > 0 && !af->failed) {
        size_t k = ATOMIC_STAGE_BYTES - af->staged < size ? ATOMIC_STAGE_BYTES - af->staged : size;
        memcpy(af->stage + af->staged, p, k);
        af->staged += k; af->bytes += (long long)k; p += k; size -= k;
        if (af->staged == ATOMIC_STAGE_BYTES) { atomic_unstage(af); }
    }
}

// overwrite bytes at an absolute offset (used to patch a header once the checksum is known)
static inline void atomic_patch(AtomicFile *af, long long offset, const void *data, size_t size) {
    atomic_write_at(af, offset, data, size);
    if (!af->failed && fseeko(af->fp, 0, SEEK_END) != 0) { atomic_fail(af, "seeking in"); }
}

static inline void fsync_dir_of(const char *path) {
    char dir[4096];
    snprintf(dir, sizeof(dir), "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash == NULL) { strcpy(dir, "."); } else if (slash == dir) { dir[1] = '\0'; } else { *slash = '\0'; }
    int fd = open(dir, O_RDONLY);
    if (fd >= 0) { fsync(fd); close(fd); }
}

// a buffered write fails at the latest in fflush or fsync (ENOSPC): both checked before the rename;
// 0, or -1 after a failure (soft mode)
static inline int atomic_commit(AtomicFile *af) {
    atomic_direct_end(af);
    if (af->failed) { return -1; }
    if (fflush(af->fp) != 0 || fsync(fileno(af->fp)) != 0) { atomic_fail(af, "writing"); return -1; }
    FILE *fp = af->fp;
    af->fp = NULL;
    if (fclose(fp) != 0) { atomic_fail(af, "closing"); return -1; }
    if (rename(af->tmp_path, af->final_path) != 0) { atomic_fail(af, "renaming the temporary to"); return -1; }
    fsync_dir_of(af->final_path);
    return 0;
}

// ----------------------------------------------------------------------------
// misc

// bytes of host memory available to a new allocation (MemAvailable of /proc/meminfo), or -1
static inline long long host_mem_available(void) {
    FILE *fp = fopen("/proc/meminfo", "r");
    if (fp == NULL) { return -1; }
    char line[256];
    long long kb = -1;
    while (fgets(line, sizeof(line), fp)) {
        if (sscanf(line, "MemAvailable: %lld kB", &kb) == 1) { break; }
    }
    fclose(fp);
    return kb < 0 ? -1 : kb * 1024;
}

// A shell or launcher may start a process with stdin, stdout or stderr closed (`cmd >&-`, some
// daemons): the next file opened would get that number, and printf would write into it (the
// trainers' main.log, a checkpoint, a shard). Each one closed is opened on /dev/null first.
static inline void llmc_std_fds_open(void) {
    for (int fd = 0; fd <= 2; fd++) {
        if (fcntl(fd, F_GETFD) != -1 || errno != EBADF) { continue; }
        const int got = open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY);  // the lowest free number: fd
        if (got >= 0 && got != fd) { dup2(got, fd); close(got); }
    }
}

// this machine's name into out (n bytes, NUL-terminated), or `fallback` where it cannot be had
static inline void llmc_hostname(char *out, size_t n, const char *fallback) {
    if (gethostname(out, n - 1) != 0) { snprintf(out, n, "%s", fallback); }
    out[n - 1] = '\0';  // a name cut at n - 1 bytes need not end in one
}

static inline double llmc_wall_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

// The pause between two polls of a host wait that must not block (llmc/cuda/processes.cuh's watchdog,
// llmc/processes.h's MPI collectives): a yield for the first 2000 polls, so that a wait that ends within
// about a millisecond sleeps never, then 50 us sleeps, so that a long wait leaves its core to
// others. What it adds to the latency of a wait is measured in dev/bench/RESULTS.md ("Watchdog
// polling"); spinning without the yield first made a 2-rank CPU job whose step is mostly its
// gradient all-reduce 1.08x the CPU time and 1.04x the wall time (5 pairs of runs, loaded).
/*
 * The clock of a bounded wait (-pt): it counts only the time this process spent polling. A gap of
 * more than a second between two polls means the process itself was not running (SIGSTOP, Ctrl-Z,
 * a debugger, a paused VM, an overloaded host); that gap does not count, so a rank that was paused
 * never blames the others for its own pause, and a whole job paused and continued goes on.
 */
typedef struct {
    double left;  // seconds of waiting still allowed
    double last;  // wall time of the previous poll
} WaitClock;

static inline WaitClock wait_clock_start(double seconds) {
    WaitClock w = {seconds, llmc_wall_seconds()};
    return w;
}

// call once per poll: 1 once the wait has used up its time
static inline int wait_clock_expired(WaitClock *w) {
    const double now = llmc_wall_seconds(), gap = now - w->last;
    w->last = now;
    if (gap < 1.0) { w->left -= gap; }
    return w->left < 0;
}

// a timed-out wait's message: the ranks in 1..world_size-1 whose flag in `arrived` is 0, as
// "2,5,7" (the first 16, then ",...")
static inline void missing_ranks_list(char *out, size_t n, const char *arrived, int world_size) {
    out[0] = '\0';
    for (int r = 1, k = 0; r < world_size; r++) {
        if (arrived[r]) { continue; }
        size_t l = strlen(out);
        if (k++ == 16) { snprintf(out + l, n - l, ",..."); break; }
        snprintf(out + l, n - l, "%s%d", k > 1 ? "," : "", r);
    }
}

static inline void llmc_poll_pause(long *polls) {
    if (++*polls < 2000) { sched_yield(); } else { usleep(50); }
}

// splitmix64: a small, fast, well-mixed 64-bit generator; deterministic streams for init and shuffling.
// It is a counter: draw k (from 1) of a stream that starts at state s is the mix of s + k * gamma, so
// any stretch of a stream can be drawn on its own (the parallel init of llmc/model_io.h)
#define SPLITMIX64_GAMMA 0x9E3779B97F4A7C15ULL
static inline uint64_t splitmix64(uint64_t *state) {
    uint64_t z = (*state += SPLITMIX64_GAMMA);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

// 64-bit FNV-1a, for hashing configurations across ranks (not for file integrity)
static inline uint64_t fnv1a64(uint64_t h, const void *data, size_t len) {
    const unsigned char *p = (const unsigned char *)data;
    if (h == 0) { h = 1469598103934665603ULL; }
    for (size_t i = 0; i < len; i++) { h ^= p[i]; h *= 1099511628211ULL; }
    return h;
}

#endif  // LLMC_UTILS_H
