// libFuzzer harness: the -pi fs bootstrap (llmc/fs_broadcast.h), whose readers take the sync files
// that other ranks (or the leftovers of a job that died) put in -pf. The input is the job's shape
// and the files found in -pf; then one rank runs the bootstrap with a timeout of 0 s, so it reads
// each file once and either completes or stops with its error line.
//
// Input: byte 0: world size 2..9; byte 1: the rank that runs (mod the world size); then records
// [u8 file][u16 length, little-endian][bytes], file (mod 2 W - 1): 0 the reply, 1..W-1 join_r,
// W..2W-2 ok_r. The ranks' nonces are fixed (nonce of rank r: FUZZ_NONCE + r) so that an input can
// hold the files of a complete exchange (dev/fuzz/corpus/fs_bootstrap has one per side).
//
// Checks beyond no sanitizer report: a rank r > 0 that completes got the reply's blob and wrote
// its ok file naming rank 0's and its own nonce; rank 0 completes only when every join and ok file
// matches, and then leaves no sync file behind.
#include "fuzz.h"
#include <sys/random.h>

#define FUZZ_NONCE 0x1000u
static int fuzz_rank;  // the rank whose nonce getrandom draws
static ssize_t fuzz_getrandom(void *buf, size_t n, unsigned flags) {
    (void)flags;
    uint64_t v = FUZZ_NONCE + (uint64_t)fuzz_rank;
    memset(buf, 0, n);
    memcpy(buf, &v, n < sizeof(v) ? n : sizeof(v));
    return (ssize_t)n;
}
#define getrandom(b, n, f) fuzz_getrandom(b, n, f)
#include "../../llmc/fs_broadcast.h"

#define BLOB_LEN 128  // an NCCL id's size

typedef struct {
    int rank, world;
    const char *dir;
    unsigned char blob[BLOB_LEN];
} FsCase;

static void run_bootstrap(void *arg) {
    FsCase *c = (FsCase *)arg;
    bootstrap_fs_bcast(c->blob, BLOB_LEN, c->rank, c->world, c->dir, 0);
}

// the bytes of a file in -pf, or -1 if it is missing (into buf, at most cap)
static long read_back(const char *dir, const char *what, int r, void *buf, size_t cap) {
    char path[600];
    fs_sync_path(path, sizeof(path), dir, what, r);
    FILE *f = fopen(path, "rb");
    if (f == NULL) { return -1; }
    long n = (long)fread(buf, 1, cap, f);
    fclose(f);
    return n;
}

// after rank r > 0 completed: its blob is the reply's, and its ok file answers it
static void check_rank(const FsCase *c) {
    unsigned char reply[sizeof(FsSyncHeader) + BLOB_LEN];
    FsSyncHeader h, ok;
    if (read_back(c->dir, "reply", -1, reply, sizeof(reply)) != (long)sizeof(reply)) {
        fuzz_fail("rank %d completed without a whole reply", c->rank);
    }
    memcpy(&h, reply, sizeof(h));
    if (memcmp(c->blob, reply + sizeof(h), BLOB_LEN) != 0) { fuzz_fail("rank %d's blob is not the reply's", c->rank); }
    if (read_back(c->dir, "ok", c->rank, &ok, sizeof(ok)) != (long)sizeof(ok) || ok.magic != FS_SYNC_MAGIC ||
        ok.nonce != h.nonce || ok.nonce_r != FUZZ_NONCE + (uint64_t)c->rank) {
        fuzz_fail("rank %d completed, but its ok file does not answer the reply", c->rank);
    }
}

// after rank 0 completed: every rank's ok file had answered (they are gone now), nothing is left
static void check_rank0(const FsCase *c) {
    DIR *d = opendir(c->dir);
    if (d == NULL) { fuzz_fail("-pf %s is gone", c->dir); }
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (!strncmp(e->d_name, "llmc_sync_", 10)) { fuzz_fail("rank 0 completed and left %s", e->d_name); }
    }
    closedir(d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2) { return 0; }
    FsCase c;
    c.world = 2 + data[0] % 8;
    c.rank = data[1] % c.world;
    c.dir = fuzz_path("pf");
    // a fresh -pf: the files of the last input removed
    mkdir(c.dir, 0755);
    DIR *d = opendir(c.dir);
    for (struct dirent *e; d && (e = readdir(d)) != NULL;) {
        if (e->d_name[0] != '.') {
            char p[600];
            snprintf(p, sizeof(p), "%s/%s", c.dir, e->d_name);
            remove(p);
        }
    }
    if (d) { closedir(d); }
    const int kinds = 2 * c.world - 1;
    for (size_t at = 2; at + 3 <= size;) {
        const int file = data[at] % kinds;
        size_t n = (size_t)data[at + 1] | (size_t)data[at + 2] << 8;
        at += 3;
        if (n > size - at) { n = size - at; }
        char path[600];
        if (file == 0) { fs_sync_path(path, sizeof(path), c.dir, "reply", -1); }
        else if (file < c.world) { fs_sync_path(path, sizeof(path), c.dir, "join", file); }
        else { fs_sync_path(path, sizeof(path), c.dir, "ok", file - c.world + 1); }
        FILE *f = fopen(path, "wb");
        if (f == NULL || (n && fwrite(data + at, 1, n, f) != n) || fclose(f) != 0) { fuzz_fail("cannot write %s", path); }
        at += n;
    }
    for (int i = 0; i < BLOB_LEN; i++) { c.blob[i] = (unsigned char)(c.rank == 0 ? i : 0); }
    fuzz_rank = c.rank;
    if (fuzz_call(run_bootstrap, &c)) {
        if (c.rank == 0) { check_rank0(&c); } else { check_rank(&c); }
        fuzz_end();
    }
    return 0;
}
