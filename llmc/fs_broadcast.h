/*
 * File-system bootstrap (-pi fs -pf DIR, llm.c's "fs" init method): rank 0 gives a small blob (the
 * NCCL unique id) to every other rank through files in a directory that every node mounts. Host
 * code, no CUDA, so it is tested on CPUs (dev/test/test_bootstrap.c).
 *
 * The directory is usually the run's -o, used again by every relaunch of a run, so it may hold
 * the files of an earlier job that died midway; a rank must never take an old job's id (its NCCL
 * communicator would wait for ranks that are gone). Each rank draws a random 64-bit nonce, so the
 * files of this job cannot be mistaken for older ones:
 *   rank r > 0   writes llmc_sync_join_<r> (its nonce n_r), then waits for llmc_sync_reply to
 *                hold n_r in its slot r: that reply was written by a rank 0 that read this join,
 *                so its blob is this job's. It answers with llmc_sync_ok_<r> (rank 0's nonce n_0
 *                and n_r), and is done.
 *   rank 0       reads the join files and (re)writes the reply (n_0, the blob, the nonces it read)
 *                whenever a join changes, until every rank's ok holds n_0 and the nonce of its
 *                current join. An old job's join is replaced by the new rank's; an old reply or ok
 *                cannot hold the fresh nonces. Then it removes the files.
 * Every file is written to a temporary name and renamed, so a reader sees a whole file or none.
 * Every wait polls (0.1 s) within -pt seconds of this process's running time (WaitClock), then
 * stops with an error naming the ranks it did not hear from. Two jobs must not share a directory
 * at the same time.
 */
#ifndef LLMC_FS_BROADCAST_H
#define LLMC_FS_BROADCAST_H

#include <sys/random.h>
#include "utils.h"

#define FS_SYNC_MAGIC 0x6c6c6d73u  // "smll"
#define FS_SYNC_MAX_BLOB 4096

// the header of every sync file; a reply follows it with the blob, then world_size nonces
typedef struct {
    uint32_t magic, world_size;
    uint64_t nonce;     // join: the writer's; reply and ok: rank 0's
    uint64_t nonce_r;   // ok: the writer's; join: the same as nonce; reply: the blob's length
} FsSyncHeader;

static inline uint64_t fs_sync_nonce(int rank) {
    uint64_t n = 0;
    if (getrandom(&n, sizeof(n), 0) != (ssize_t)sizeof(n)) {  // no entropy source: time, pid and rank
        uint64_t s = (uint64_t)(llmc_wall_seconds() * 1e9) ^ ((uint64_t)getpid() << 32) ^ (uint64_t)rank;
        n = splitmix64(&s);
    }
    return n != 0 ? n : 1;  // 0 means "no nonce" in a reply
}

static inline void fs_sync_path(char *out, size_t n, const char *dir, const char *what, int rank) {
    if (rank >= 0) { snprintf(out, n, "%s/llmc_sync_%s_%d", dir, what, rank); }
    else { snprintf(out, n, "%s/llmc_sync_%s", dir, what); }
}

// writes the parts to path through a temporary and a rename; dies naming -pf on a failure
static inline void fs_sync_write(const char *path, const void *a, size_t na, const void *b, size_t nb, const void *c,
                                 size_t nc) {
    AtomicFile af;
    char err[4600];
    if (atomic_open_soft(&af, path, "-pf", err, sizeof(err)) == 0) {
        atomic_write(&af, a, na, 0);
        if (nb) { atomic_write(&af, b, nb, 0); }
        if (nc) { atomic_write(&af, c, nc, 0); }
        atomic_commit(&af);
    }
    if (af.failed) { llmc_die("bootstrap (-pi fs): %s; -pf must name a directory every rank can write", err); }
}

// reads exactly n bytes of path into buf; 0 on success (a missing, short or longer file, or one
// that is not a regular file, such as a FIFO that would block the open: -1)
static inline int fs_sync_read(const char *path, void *buf, size_t n) {
    FILE *f;
    char why[256];
    if (open_regular(path, &f, NULL, why, sizeof(why)) != 0) { return -1; }
    size_t got = fread(buf, 1, n, f);
    int extra = fgetc(f) != EOF;
    fclose(f);
    return got == n && !extra ? 0 : -1;
}

// rank r's current join nonce (0: none, or not of a job of this world size)
static inline uint64_t fs_sync_join_nonce(const char *dir, int r, int world_size) {
    char path[4200];
    FsSyncHeader h;
    fs_sync_path(path, sizeof(path), dir, "join", r);
    if (fs_sync_read(path, &h, sizeof(h)) != 0 || h.magic != FS_SYNC_MAGIC || h.world_size != (uint32_t)world_size) {
        return 0;
    }
    return h.nonce;
}

// rank 0's side: serve the reply until every rank has answered, then remove the files
static inline void fs_bcast_serve(const void *blob, size_t len, int world_size, const char *dir, WaitClock *clock,
                                  int timeout_s) {
    const uint64_t n0 = fs_sync_nonce(0);
    uint64_t *sent = (uint64_t *)callocCheck((size_t)world_size, sizeof(uint64_t));  // the nonces of the last reply
    uint64_t *now = (uint64_t *)callocCheck((size_t)world_size, sizeof(uint64_t));
    char *done = (char *)callocCheck((size_t)world_size, 1);
    char path[4200];
    sent[0] = now[0] = n0;
    FsSyncHeader h = {FS_SYNC_MAGIC, (uint32_t)world_size, n0, (uint64_t)len};
    for (int first = 1;; first = 0) {
        for (int r = 1; r < world_size; r++) { now[r] = fs_sync_join_nonce(dir, r, world_size); }
        if (first || memcmp(now, sent, (size_t)world_size * sizeof(uint64_t)) != 0) {
            memcpy(sent, now, (size_t)world_size * sizeof(uint64_t));
            fs_sync_path(path, sizeof(path), dir, "reply", -1);
            fs_sync_write(path, &h, sizeof(h), blob, len, sent, (size_t)world_size * sizeof(uint64_t));
        }
        int all = 1;
        for (int r = 1; r < world_size; r++) {
            FsSyncHeader ok;
            fs_sync_path(path, sizeof(path), dir, "ok", r);
            done[r] = sent[r] != 0 && fs_sync_read(path, &ok, sizeof(ok)) == 0 && ok.magic == FS_SYNC_MAGIC &&
                      ok.nonce == n0 && ok.nonce_r == sent[r];
            all &= done[r];
        }
        if (all) { break; }
        if (wait_clock_expired(clock)) {
            char missing[256];
            missing_ranks_list(missing, sizeof(missing), done, world_size);
            llmc_die("bootstrap (-pi fs): rank%s %s did not answer through %s within %d s; did every rank start, with "
                     "the same -pn %d and -pf, on a directory all nodes share? (-pt sets the timeout)",
                     strchr(missing, ',') ? "s" : "", missing, dir, timeout_s, world_size);
        }
        usleep(100 * 1000);
    }
    const char *kinds[3] = {"join", "ok", "reply"};
    for (int k = 0; k < 3; k++) {
        for (int r = k == 2 ? -1 : 1; r < (k == 2 ? 0 : world_size); r++) {
            fs_sync_path(path, sizeof(path), dir, kinds[k], r);
            remove(path);
        }
    }
    free(sent);
    free(now);
    free(done);
}

// rank r's side: join, wait for a reply that holds this join's nonce, answer
static inline void fs_bcast_join(void *blob, size_t len, int rank, int world_size, const char *dir, WaitClock *clock,
                                 int timeout_s) {
    const uint64_t nr = fs_sync_nonce(rank);
    char path[4200];
    FsSyncHeader join = {FS_SYNC_MAGIC, (uint32_t)world_size, nr, nr};
    fs_sync_path(path, sizeof(path), dir, "join", rank);
    fs_sync_write(path, &join, sizeof(join), NULL, 0, NULL, 0);
    const size_t reply_bytes = sizeof(FsSyncHeader) + len + (size_t)world_size * sizeof(uint64_t);
    unsigned char *reply = (unsigned char *)mallocCheck(reply_bytes);
    fs_sync_path(path, sizeof(path), dir, "reply", -1);
    FsSyncHeader h;
    for (;;) {
        uint64_t mine = 0;
        if (fs_sync_read(path, reply, reply_bytes) == 0) {
            memcpy(&h, reply, sizeof(h));
            memcpy(&mine, reply + sizeof(h) + len + (size_t)rank * sizeof(uint64_t), sizeof(mine));
            if (h.magic == FS_SYNC_MAGIC && h.world_size == (uint32_t)world_size && h.nonce_r == len && mine == nr) {
                break;
            }
        }
        if (wait_clock_expired(clock)) {
            llmc_die("bootstrap (-pi fs): no answer from rank 0 through %s within %d s; is rank 0 running with the same "
                     "-pn %d and -pf, and does this node see the directory rank 0 writes (a shared filesystem)? (-pt sets "
                     "the timeout)", dir, timeout_s, world_size);
        }
        usleep(100 * 1000);
    }
    memcpy(blob, reply + sizeof(FsSyncHeader), len);
    free(reply);
    FsSyncHeader ok = {FS_SYNC_MAGIC, (uint32_t)world_size, h.nonce, nr};
    fs_sync_path(path, sizeof(path), dir, "ok", rank);
    fs_sync_write(path, &ok, sizeof(ok), NULL, 0, NULL, 0);
}

/*
 * Broadcast `len` bytes (at most FS_SYNC_MAX_BLOB) from rank 0 to all ranks through files in dir,
 * which is created if missing. Dies with a message naming the problem if it does not complete
 * within timeout_s seconds.
 */
static inline void bootstrap_fs_bcast(void *blob, size_t len, int rank, int world_size, const char *dir, int timeout_s) {
    if (len > FS_SYNC_MAX_BLOB) { llmc_die("bootstrap (-pi fs): a %zu-byte blob is too large", len); }
    if (dir == NULL || dir[0] == '\0') {
        llmc_die("-pi fs hands rank 0's NCCL id to the other ranks through files: add -pf <dir>, a directory every node "
                 "mounts, or -o (the default)");
    }
    if (strlen(dir) > 4000) { llmc_die("-pf: the directory's path is %zu characters; use one of at most 4000", strlen(dir)); }
    make_dirs(dir);
    WaitClock clock = wait_clock_start(timeout_s);
    if (rank == 0) {
        fs_bcast_serve(blob, len, world_size, dir, &clock, timeout_s);
    } else {
        fs_bcast_join(blob, len, rank, world_size, dir, &clock, timeout_s);
    }
}

#endif  // LLMC_FS_BROADCAST_H
