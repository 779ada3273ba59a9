/*
 * Bootstrap tests, with real processes on localhost. TCP (llmc/tcp_broadcast.h):
 * 1. 5 ranks, rank 0 started last: every rank receives rank 0's blob;
 * 2. a rank with no rank 0 to talk to stops with an error within the timeout;
 * 3. a rank 0 whose peers never come stops with an error naming the missing ranks;
 * 4. a rank stopped (SIGSTOP) for longer than its timeout, then continued, still gets the blob:
 *    the timeout counts the time a rank ran, not the time it was stopped for.
 * Files in a shared directory (llmc/fs_broadcast.h, -pi fs):
 * 5. 5 ranks, rank 0 started last: every rank receives rank 0's blob, and the directory is left empty;
 * 6. the files of a job that died midway (its rank 0 killed while it waited for a rank that never
 *    came, after 3 ranks had taken its blob) are in the directory when the next job starts, its
 *    other ranks first: every rank of the new job gets the new rank 0's blob, none the old one;
 * 7. a rank 0 whose peers never come names them, also where a FIFO stands in a peer's file's place
 *    (an open() of it would wait for a writer); a rank without rank 0 stops; a -pf that cannot be
 *    created is an error naming it.
 * 8. the list of missing ranks both messages use (llmc/utils.h): none, some, and past 16.
 */
#include <dirent.h>
#include <signal.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include "../../llmc/tcp_broadcast.h"
#include "../../llmc/fs_broadcast.h"

static int failures = 0;

// run bootstrap in a child; returns the child's pid. The child exits 0 if it got the expected blob.
static pid_t spawn(int rank, int world, int port, int timeout, int delay_ms, const char *errfile) {
    fflush(stdout);  // the child must not print the parent's buffered lines again
    pid_t pid = fork();
    if (pid == 0) {
        if (errfile) { if (!freopen(errfile, "w", stderr)) { _exit(3); } }
        usleep(delay_ms * 1000);
        unsigned char blob[128];
        if (rank == 0) { for (int i = 0; i < 128; i++) { blob[i] = (unsigned char)(i * 7 + 3); } }
        else { memset(blob, 0, sizeof(blob)); }
        llmc_set_rank(rank, world);
        bootstrap_tcp_bcast(blob, sizeof(blob), rank, world, "localhost", port, timeout);
        for (int i = 0; i < 128; i++) { if (blob[i] != (unsigned char)(i * 7 + 3)) { _exit(2); } }
        _exit(0);
    }
    return pid;
}

// the fs bootstrap in a child: rank 0 sends the blob of `seed`; the child exits 0 if it has that blob
static pid_t spawn_fs(int rank, int world, const char *dir, int timeout, int delay_ms, const char *errfile, int seed) {
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        if (errfile) { if (!freopen(errfile, "w", stderr)) { _exit(3); } }
        usleep(delay_ms * 1000);
        unsigned char blob[128];
        memset(blob, 0, sizeof(blob));
        if (rank == 0) { for (int i = 0; i < 128; i++) { blob[i] = (unsigned char)(i * seed + 3); } }
        llmc_set_rank(rank, world);
        bootstrap_fs_bcast(blob, sizeof(blob), rank, world, dir, timeout);
        for (int i = 0; i < 128; i++) { if (blob[i] != (unsigned char)(i * seed + 3)) { _exit(2); } }
        _exit(0);
    }
    return pid;
}

static int dir_entries(const char *dir) {
    DIR *d = opendir(dir);
    int n = 0;
    if (d == NULL) { return -1; }
    for (struct dirent *e; (e = readdir(d)) != NULL;) { n += e->d_name[0] != '.'; }
    closedir(d);
    return n;
}

static int wait_rc(pid_t pid) {
    int st;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

// wait_rc, but a child still running after `seconds` is killed: -1
static int wait_rc_within(pid_t pid, int seconds) {
    for (int i = 0; i < seconds * 10; i++) {
        int st;
        if (waitpid(pid, &st, WNOHANG) == pid) { return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st); }
        usleep(100 * 1000);
    }
    kill(pid, SIGKILL);
    wait_rc(pid);
    return -1;
}

static int file_contains(const char *path, const char *needle) {
    FILE *f = fopen(path, "r");
    if (!f) { return 0; }
    char buf[4096];
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    buf[n] = '\0';
    fclose(f);
    return strstr(buf, needle) != NULL;
}

// a job (blob of seed 5, 5 ranks) that dies midway: ranks 1-3 take the blob, rank 4 never comes, rank 0
// is killed while it waits for it. Returns the number of files it leaves in dir.
static int fs_dead_job(const char *dir) {
    pid_t pids[4];
    for (int r = 3; r >= 0; r--) { pids[r] = spawn_fs(r, 5, dir, 30, 0, NULL, 5); }
    int taken = 1;
    for (int r = 1; r <= 3; r++) { taken &= wait_rc(pids[r]) == 0; }
    kill(pids[0], SIGKILL);
    wait_rc(pids[0]);
    return taken ? dir_entries(dir) : -1;
}

static void test_fs(void) {
    char dir[] = "/tmp/test_bootstrap_fs.XXXXXX", sync[64], err0[80], err1[80];
    if (mkdtemp(dir) == NULL) { printf("FAIL: mkdtemp\n"); failures++; return; }
    snprintf(sync, sizeof(sync), "%s/sync", dir);
    snprintf(err0, sizeof(err0), "%s/err0.txt", dir);
    snprintf(err1, sizeof(err1), "%s/err1.txt", dir);
    // 5. five ranks, rank 0 last
    pid_t pids[5];
    for (int r = 4; r >= 0; r--) { pids[r] = spawn_fs(r, 5, sync, 10, r == 0 ? 300 : 0, NULL, 7); }
    int ok = 1;
    for (int r = 0; r < 5; r++) { int rc = wait_rc(pids[r]); if (rc != 0) { printf("FAIL: fs rank %d exited %d\n", r, rc); ok = 0; } }
    ok = ok && dir_entries(sync) == 0;
    printf("%s fs: 5 ranks received rank 0's id (rank 0 started last); %d files left in -pf\n", ok ? "ok  " : "FAIL",
           dir_entries(sync));
    failures += !ok;

    // 6. over a dead job's files, the next job with its other ranks first, then with ranks 1-3 last
    for (int late = 0; late < 2; late++) {
        const int stale = fs_dead_job(sync);
        for (int r = 4; r >= 0; r--) {
            const int delay = late ? (r >= 1 && r <= 3 ? 1500 : 0) : (r == 0 ? 1000 : 0);
            pids[r] = spawn_fs(r, 5, sync, 10, delay, NULL, 11);
        }
        ok = stale >= 7;  // the dead job's reply, joins 1-3 and oks 1-3
        for (int r = 0; r < 5; r++) { int rc = wait_rc(pids[r]); if (rc != 0) { printf("FAIL: fs rank %d of the new job exited %d\n", r, rc); ok = 0; } }
        printf("%s fs: over the %d files of a job that died midway, every rank of the next one got its rank 0's id "
               "(%s)\n", ok ? "ok  " : "FAIL", stale, late ? "ranks 1-3 last" : "rank 0 last");
        failures += !ok;
    }

    // 7. rank 0 of 4 with only rank 2 coming; rank 1 of 2 without a rank 0; a -pf that cannot be made
    pid_t p0 = spawn_fs(0, 4, sync, 2, 0, err0, 7), p2 = spawn_fs(2, 4, sync, 2, 0, NULL, 7);
    int rc = wait_rc(p0);
    wait_rc(p2);
    ok = rc == 1 && file_contains(err0, "ranks 1,3 did not answer through");
    printf("%s fs: rank 0 names the ranks that did not answer (exit %d)\n", ok ? "ok  " : "FAIL", rc);
    failures += !ok;
    char fifo[4200];  // rank 1's join file a FIFO: rank 0 does not wait on it past its 2 s
    fs_sync_path(fifo, sizeof(fifo), sync, "join", 1);
    ok = mkfifo(fifo, 0644) == 0;
    rc = wait_rc_within(spawn_fs(0, 2, sync, 2, 0, err0, 7), 10);
    ok = ok && rc == 1 && file_contains(err0, "rank 1 did not answer through");
    unlink(fifo);
    printf("%s fs: a FIFO in a rank's file's place: rank 0 names that rank within its timeout (exit %d)\n",
           ok ? "ok  " : "FAIL", rc);
    failures += !ok;
    rc = wait_rc(spawn_fs(1, 2, sync, 2, 0, err1, 7));
    ok = rc == 1 && file_contains(err1, "no answer from rank 0 through");
    printf("%s fs: a rank without rank 0 stops with an error (exit %d)\n", ok ? "ok  " : "FAIL", rc);
    failures += !ok;
    rc = wait_rc(spawn_fs(1, 2, "/proc/llmc_sync", 2, 0, err1, 7));
    ok = rc == 1 && file_contains(err1, "cannot create directory '/proc/llmc_sync'");
    printf("%s fs: a -pf that cannot be created is an error naming it (exit %d)\n", ok ? "ok  " : "FAIL", rc);
    failures += !ok;
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    if (system(cmd) != 0) { printf("warning: could not remove %s\n", dir); }
}

// 8. missing_ranks_list, against lists written out by hand
static void test_missing_list(void) {
    char arrived[40] = {0}, out[256];
    int ok = 1;
    memset(arrived, 1, sizeof(arrived));
    missing_ranks_list(out, sizeof(out), arrived, 8);
    ok &= strcmp(out, "") == 0;
    arrived[2] = arrived[5] = arrived[7] = 0;
    missing_ranks_list(out, sizeof(out), arrived, 8);
    ok &= strcmp(out, "2,5,7") == 0;
    memset(arrived, 0, sizeof(arrived));  // rank 0 never counts: it is the one waiting
    arrived[3] = 1;
    missing_ranks_list(out, sizeof(out), arrived, 40);
    ok &= strcmp(out, "1,2,4,5,6,7,8,9,10,11,12,13,14,15,16,17,...") == 0;
    printf("%s the missing ranks' list: none, 2,5,7, the first 16 then ... (last: %s)\n", ok ? "ok  " : "FAIL", out);
    failures += !ok;
}

// can a server bind this TCP port now (nothing listens there, no connection holds it)?
static int port_is_free(int port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) { return 0; }
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    int ok = bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
    close(fd);
    return ok;
}

// the first of n consecutive free ports, below Linux's ephemeral range (32768-60999), where any
// process's outgoing connection may take a port at any moment: make test runs tests side by side
static int free_port_block(int n) {
    srand((unsigned)getpid());
    for (int attempt = 0; attempt < 200; attempt++) {
        int base = 10000 + rand() % (22000 - n), free = 1;
        for (int i = 0; i < n && free; i++) { free = port_is_free(base + i); }
        if (free) { return base; }
    }
    printf("FAIL: no %d consecutive free TCP ports found in 10000-32000\n", n);
    exit(1);
}

int main(void) {
    test_missing_list();
    int port = free_port_block(4);
    // the error files of the children, in a directory of this run's own (tests run side by side)
    char tmp[] = "/tmp/test_bootstrap.XXXXXX", err0[64], err1[64];
    if (mkdtemp(tmp) == NULL) { printf("FAIL: mkdtemp\n"); return 1; }
    snprintf(err0, sizeof(err0), "%s/err0.txt", tmp);
    snprintf(err1, sizeof(err1), "%s/err1.txt", tmp);
    // 1. five ranks, rank 0 starts 300 ms after the others
    pid_t pids[5];
    for (int r = 4; r >= 0; r--) { pids[r] = spawn(r, 5, port, 10, r == 0 ? 300 : 0, NULL); }
    int ok = 1;
    for (int r = 0; r < 5; r++) { int rc = wait_rc(pids[r]); if (rc != 0) { printf("FAIL: rank %d exited %d\n", r, rc); ok = 0; } }
    printf("%s 5 ranks received rank 0's id (rank 0 started last)\n", ok ? "ok  " : "FAIL");
    failures += !ok;

    // 2. no rank 0: rank 1 must give up within its 2 s timeout
    double t0 = llmc_wall_seconds();
    pid_t p = spawn(1, 2, port + 1, 2, 0, err1);
    int rc = wait_rc(p);
    double dt = llmc_wall_seconds() - t0;
    ok = rc == 1 && dt < 6.0 && file_contains(err1, "could not get the NCCL id from rank 0");
    printf("%s a rank without rank 0 stops with an error after %.1f s (exit %d)\n", ok ? "ok  " : "FAIL", dt, rc);
    failures += !ok;

    // 3. rank 0 of 3 with only rank 2 coming: names rank 1 as missing
    t0 = llmc_wall_seconds();
    pid_t p0 = spawn(0, 3, port + 2, 2, 0, err0);
    pid_t p2 = spawn(2, 3, port + 2, 2, 100, NULL);
    rc = wait_rc(p0);
    wait_rc(p2);
    dt = llmc_wall_seconds() - t0;
    ok = rc == 1 && dt < 6.0 && file_contains(err0, "only 2 of 3 ranks") &&
         file_contains(err0, "missing: 1");
    printf("%s rank 0 names the missing rank after %.1f s (exit %d)\n", ok ? "ok  " : "FAIL", dt, rc);
    failures += !ok;
    // 4. rank 1 (2 s timeout) stopped for 3 s as it begins to wait; rank 0 comes after it is continued
    p = spawn(1, 2, port + 3, 2, 0, err1);
    usleep(100 * 1000);
    kill(p, SIGSTOP);
    sleep(3);
    kill(p, SIGCONT);
    p0 = spawn(0, 2, port + 3, 2, 100, NULL);
    rc = wait_rc(p);
    int rc0 = wait_rc(p0);
    ok = rc == 0 && rc0 == 0;
    printf("%s a rank stopped 3 s (timeout 2 s), then continued, gets rank 0's id (exit %d, rank 0 %d)\n", ok ? "ok  " : "FAIL", rc, rc0);
    failures += !ok;
    remove(err0);
    remove(err1);
    rmdir(tmp);
    test_fs();
    if (failures) { printf("test_bootstrap: FAILED\n"); return 1; }
    printf("test_bootstrap: all checks passed\n");
    return 0;
}
