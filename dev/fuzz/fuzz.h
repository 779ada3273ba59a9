/*
 * Shared by the libFuzzer harnesses of dev/fuzz (README.md there): each harness includes this
 * file first, then the reader it tests, and calls the reader through fuzz_call().
 *
 * A reader rejects a bad file with llmc_die: one error line, then exit(1). That is the expected
 * result for most fuzz inputs, not a finding, so fuzz_call() sets llmc_abort_hook (utils.h) to
 * longjmp back instead of exiting. The reader then leaves behind what it held at that moment
 * (allocations, open files, mappings); a real run exits there, a fuzzer runs millions of inputs.
 * So the reader's calls to malloc & co., fopen/fdopen/fclose, open/close, mmap/munmap and
 * opendir/closedir are routed (by macros, in this translation unit only) through a ledger that
 * releases whatever a rejected input left. After an input that was accepted, the harness frees
 * the reader's result with the reader's own free function and fuzz_end() reports anything still
 * held as a leak: that is a finding.
 *
 * Findings are sanitizer reports (ASan, UBSan: every check aborts), fuzz_fail() (a broken
 * property, e.g. decode(encode(x)) != x) and leaks of accepted inputs.
 */
#ifndef LLMC_FUZZ_H
#define LLMC_FUZZ_H

// every system header the readers include, before the macros below rename calls
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <glob.h>
#include <limits.h>
#include <math.h>
#include <setjmp.h>
#include <signal.h>
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
#include <sanitizer/asan_interface.h>
#ifdef FUZZ_WITH_PCRE2
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#endif

// ----------------------------------------------------------------------------
// the ledger: live allocations (a 64-byte poisoned prefix records each one's slot), open files,
// descriptors, mappings and directories of the code under test

#define FUZZ_PREFIX 64
#define FUZZ_MAX_HANDLES 256

typedef struct {
    size_t slot;   // index in fuzz_blocks
    size_t size;   // bytes asked for
    void *raw;     // what the C library allocated (the block sits just below the user pointer)
    int input;     // made while an input ran (released after a rejection); 0: harness setup
} FuzzBlock;

static void **fuzz_blocks;            // user pointers of the live allocations
static size_t fuzz_nblocks, fuzz_capblocks;
static int fuzz_in_input;             // 1 while fuzz_call runs the reader
static FILE *fuzz_files[FUZZ_MAX_HANDLES];
static int fuzz_fds[FUZZ_MAX_HANDLES];
static DIR *fuzz_dirs[FUZZ_MAX_HANDLES];
static struct { void *addr; size_t len; } fuzz_maps[FUZZ_MAX_HANDLES];

static void fuzz_fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "FUZZ FINDING: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    abort();
}

static FuzzBlock *fuzz_block_of(void *p) {
    FuzzBlock *b = (FuzzBlock *)((char *)p - FUZZ_PREFIX);
    ASAN_UNPOISON_MEMORY_REGION(b, FUZZ_PREFIX);
    return b;
}
static void fuzz_block_seal(FuzzBlock *b) { ASAN_POISON_MEMORY_REGION(b, FUZZ_PREFIX); }

// align: a power of two, at least FUZZ_PREFIX (the user pointer is raw + align)
static void *fuzz_malloc_aligned(size_t n, size_t align) {
    void *raw = NULL;
    if (n > SIZE_MAX - align || posix_memalign(&raw, align, n + align) != 0) { return NULL; }
    if (fuzz_nblocks == fuzz_capblocks) {
        fuzz_capblocks = fuzz_capblocks ? 2 * fuzz_capblocks : 1024;
        fuzz_blocks = (void **)realloc(fuzz_blocks, fuzz_capblocks * sizeof(void *));
        if (fuzz_blocks == NULL) { fuzz_fail("ledger out of memory"); }
    }
    void *p = (char *)raw + align;
    FuzzBlock *b = (FuzzBlock *)((char *)p - FUZZ_PREFIX);
    b->slot = fuzz_nblocks;
    b->size = n;
    b->raw = raw;
    b->input = fuzz_in_input;
    fuzz_blocks[fuzz_nblocks++] = p;
    fuzz_block_seal(b);
    return p;
}

static void *fuzz_malloc(size_t n) { return fuzz_malloc_aligned(n, FUZZ_PREFIX); }

static void fuzz_free(void *p) {
    if (p == NULL) { return; }
    FuzzBlock *b = fuzz_block_of(p);
    if (b->slot >= fuzz_nblocks || fuzz_blocks[b->slot] != p) { fuzz_fail("free of a pointer the ledger does not hold"); }
    void *last = fuzz_blocks[--fuzz_nblocks];  // the last entry takes the freed slot
    if (last != p) {
        FuzzBlock *lb = fuzz_block_of(last);
        lb->slot = b->slot;
        fuzz_block_seal(lb);
        fuzz_blocks[b->slot] = last;
    }
    free(b->raw);
}

static void *fuzz_calloc(size_t n, size_t size) {
    size_t bytes;
    if (__builtin_mul_overflow(n, size, &bytes)) { return NULL; }
    void *p = fuzz_malloc(bytes);
    if (p) { memset(p, 0, bytes); }
    return p;
}

static void *fuzz_realloc(void *p, size_t n) {
    if (p == NULL) { return fuzz_malloc(n); }
    FuzzBlock *b = fuzz_block_of(p);
    size_t old = b->size;
    int input = b->input;
    fuzz_block_seal(b);
    void *q = fuzz_malloc(n);
    if (q == NULL) { return NULL; }
    fuzz_block_of(q)->input = input;  // a setup buffer grown by an input stays the harness's
    fuzz_block_seal(fuzz_block_of(q));
    memcpy(q, p, old < n ? old : n);
    fuzz_free(p);
    return q;
}

static char *fuzz_strdup(const char *s) {
    size_t n = strlen(s) + 1;
    char *p = (char *)fuzz_malloc(n);
    if (p) { memcpy(p, s, n); }
    return p;
}

static int fuzz_posix_memalign(void **out, size_t align, size_t n) {
    *out = fuzz_malloc_aligned(n, align > FUZZ_PREFIX ? align : FUZZ_PREFIX);
    return *out ? 0 : ENOMEM;
}

static int fuzz_slot_put(void **slots, void *v) {
    for (int i = 0; i < FUZZ_MAX_HANDLES; i++) {
        if (slots[i] == NULL) { slots[i] = v; return i; }
    }
    fuzz_fail("more than %d open handles", FUZZ_MAX_HANDLES);
    return -1;
}
static void fuzz_slot_drop(void **slots, void *v) {
    for (int i = 0; i < FUZZ_MAX_HANDLES; i++) {
        if (slots[i] == v) { slots[i] = NULL; return; }
    }
}

static FILE *fuzz_fopen(const char *path, const char *mode) {
    FILE *f = fopen(path, mode);
    if (f) { fuzz_slot_put((void **)fuzz_files, f); }
    return f;
}
static int fuzz_fclose(FILE *f) {
    fuzz_slot_drop((void **)fuzz_files, f);
    return fclose(f);
}
// a descriptor that becomes a FILE (open_regular in utils.h) moves from the descriptor ledger to
// the file ledger: its fclose closes it
static FILE *fuzz_fdopen(int fd, const char *mode) {
    FILE *f = fdopen(fd, mode);
    if (f) {
        for (int i = 0; i < FUZZ_MAX_HANDLES; i++) {
            if (fuzz_fds[i] == fd + 1) { fuzz_fds[i] = 0; }
        }
        fuzz_slot_put((void **)fuzz_files, f);
    }
    return f;
}
static DIR *fuzz_opendir(const char *path) {
    DIR *d = opendir(path);
    if (d) { fuzz_slot_put((void **)fuzz_dirs, d); }
    return d;
}
static int fuzz_closedir(DIR *d) {
    fuzz_slot_drop((void **)fuzz_dirs, d);
    return closedir(d);
}
// a descriptor the code under test opened (open, or a harness's socket and accept), into the ledger
static int fuzz_fd_put(int fd) {
    if (fd < 0) { return fd; }
    for (int i = 0; i < FUZZ_MAX_HANDLES; i++) {
        if (fuzz_fds[i] <= 0) { fuzz_fds[i] = fd + 1; return fd; }  // stored +1: 0 is empty
    }
    fuzz_fail("more than %d open descriptors", FUZZ_MAX_HANDLES);
    return fd;
}
static int fuzz_open(const char *path, int flags, ...) { return fuzz_fd_put(open(path, flags, 0644)); }
static int fuzz_close(int fd) {
    for (int i = 0; i < FUZZ_MAX_HANDLES; i++) {
        if (fuzz_fds[i] == fd + 1) { fuzz_fds[i] = 0; }
    }
    return close(fd);
}
static void *fuzz_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off) {
    void *m = mmap(addr, len, prot, flags, fd, off);
    for (int k = 0; m != MAP_FAILED && k < FUZZ_MAX_HANDLES; k++) {
        if (fuzz_maps[k].addr == NULL) { fuzz_maps[k].addr = m; fuzz_maps[k].len = len; return m; }
    }
    if (m != MAP_FAILED) { fuzz_fail("more than %d mappings", FUZZ_MAX_HANDLES); }
    return m;
}
static int fuzz_munmap(void *addr, size_t len) {
    for (int k = 0; k < FUZZ_MAX_HANDLES; k++) {
        if (fuzz_maps[k].addr == addr) { fuzz_maps[k].addr = NULL; }
    }
    return munmap(addr, len);
}

// release everything an input left (after a rejection), or report it (after an acceptance)
static void fuzz_release(int report) {
    for (size_t i = fuzz_nblocks; i-- > 0;) {
        FuzzBlock *b = fuzz_block_of(fuzz_blocks[i]);
        int input = b->input;
        size_t size = b->size;
        fuzz_block_seal(b);
        if (!input) { continue; }
        if (report) { fuzz_fail("leak: %zu bytes allocated by an accepted input were not freed", size); }
        fuzz_free(fuzz_blocks[i]);
    }
    for (int i = 0; i < FUZZ_MAX_HANDLES; i++) {
        if (report && (fuzz_files[i] || fuzz_fds[i] > 0 || fuzz_dirs[i] || fuzz_maps[i].addr)) {
            fuzz_fail("leak: an accepted input left a file, descriptor, directory or mapping open");
        }
        if (fuzz_files[i]) { fclose(fuzz_files[i]); fuzz_files[i] = NULL; }
        if (fuzz_fds[i] > 0) { close(fuzz_fds[i] - 1); fuzz_fds[i] = 0; }
        if (fuzz_dirs[i]) { closedir(fuzz_dirs[i]); fuzz_dirs[i] = NULL; }
        if (fuzz_maps[i].addr) { munmap(fuzz_maps[i].addr, fuzz_maps[i].len); fuzz_maps[i].addr = NULL; }
    }
}

#define malloc(n) fuzz_malloc(n)
#define calloc(n, s) fuzz_calloc(n, s)
#define realloc(p, n) fuzz_realloc(p, n)
#define free(p) fuzz_free(p)
#define strdup(s) fuzz_strdup(s)
#define posix_memalign(p, a, n) fuzz_posix_memalign(p, a, n)
#define fopen(p, m) fuzz_fopen(p, m)
#define fclose(f) fuzz_fclose(f)
#define fdopen(fd, m) fuzz_fdopen(fd, m)
#define opendir(p) fuzz_opendir(p)
#define closedir(d) fuzz_closedir(d)
#define open(...) fuzz_open(__VA_ARGS__)
#define close(fd) fuzz_close(fd)
#define mmap(a, l, p, f, d, o) fuzz_mmap(a, l, p, f, d, o)
#define munmap(a, l) fuzz_munmap(a, l)

#include "../../llmc/utils.h"

// ----------------------------------------------------------------------------
// running a reader on one input

static jmp_buf fuzz_jmp;

static void fuzz_on_die(void) { longjmp(fuzz_jmp, 1); }

// Runs fn(arg) as one input. Returns 1 if fn returned (the input was accepted), 0 if it was
// rejected through llmc_die; then everything fn held is released. After an accepted input the
// harness frees fn's results and calls fuzz_end().
static int fuzz_call(void (*fn)(void *), void *arg) {
    fuzz_in_input = 1;
    llmc_abort_hook = fuzz_on_die;
    if (setjmp(fuzz_jmp) != 0) {
        llmc_abort_hook = NULL;
        fuzz_release(0);
        fuzz_in_input = 0;
        return 0;
    }
    fn(arg);
    llmc_abort_hook = NULL;
    return 1;
}

// after an accepted input's results are freed: anything the input still holds is a leak
static void fuzz_end(void) {
    fuzz_release(1);
    fuzz_in_input = 0;
}

// ----------------------------------------------------------------------------
// files: each harness process works in its own folder (under $FUZZ_TMPDIR: run.sh gives every
// run a fresh one and removes it afterwards)

static char fuzz_dir[256];

// the path of `name` in this process's work folder (made on first use); valid for the next 3
// calls too, so that one call may take several paths
static const char *fuzz_path(const char *name) {
    static char ring[4][512];
    static int next = 0;
    char *path = ring[next++ % 4];
    if (fuzz_dir[0] == '\0') {
        // tmpfs where there is one: each input is written to a file, and a disk makes that the bottleneck
        const char *base = getenv("FUZZ_TMPDIR") ? getenv("FUZZ_TMPDIR") : dir_exists("/dev/shm") ? "/dev/shm" : "/tmp";
        snprintf(fuzz_dir, sizeof(fuzz_dir), "%s/llmc_fuzz.%d", base, (int)getpid());
        if (mkdir(fuzz_dir, 0755) != 0 && errno != EEXIST) { fuzz_fail("cannot create %s", fuzz_dir); }
    }
    snprintf(path, sizeof(ring[0]), "%s/%s", fuzz_dir, name);
    return path;
}

// write bytes to `name` in the work folder; returns its path (as fuzz_path)
static const char *fuzz_write(const char *name, const void *data, size_t size) {
    const char *path = fuzz_path(name);
    FILE *f = fopen(path, "wb");
    if (f == NULL || (size > 0 && fwrite(data, 1, size, f) != size) || fclose(f) != 0) {
        fuzz_fail("cannot write %s", path);
    }
    return path;
}

// an input's bytes, as one argument for fuzz_call
typedef struct {
    const uint8_t *data;
    size_t size;
} FuzzBytes;

// the harnesses' inputs that pack two files: the part before the first FUZZ_SEPARATOR and the rest
#define FUZZ_SEPARATOR "\n--8<--\n"
static void fuzz_split(const uint8_t *data, size_t size, size_t *first_len, const uint8_t **rest, size_t *rest_len) {
    const uint8_t *sep = (const uint8_t *)memmem(data, size, FUZZ_SEPARATOR, strlen(FUZZ_SEPARATOR));
    *first_len = sep ? (size_t)(sep - data) : size;
    *rest = sep ? sep + strlen(FUZZ_SEPARATOR) : data + size;
    *rest_len = (size_t)(data + size - *rest);
}

#endif  // LLMC_FUZZ_H
