/*
 * TCP bootstrap tests (llmc/tcp_broadcast.h), with real processes on localhost:
 * 1. 5 ranks, rank 0 started last: every rank receives rank 0's blob;
 * 2. a rank with no rank 0 to talk to stops with an error within the timeout;
 * 3. a rank 0 whose peers never come stops with an error naming the missing ranks;
 * 4. a rank stopped (SIGSTOP) for longer than its timeout, then continued, still gets the blob:
 *    the timeout counts the time a rank ran, not the time it was stopped for.
 */
#include <signal.h>
#include <sys/wait.h>
#include "../../llmc/tcp_broadcast.h"

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

static int wait_rc(pid_t pid) {
    int st;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
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

int main(void) {
    int port = 20000 + (int)(getpid() % 20000);
    // 1. five ranks, rank 0 starts 300 ms after the others
    pid_t pids[5];
    for (int r = 4; r >= 0; r--) { pids[r] = spawn(r, 5, port, 10, r == 0 ? 300 : 0, NULL); }
    int ok = 1;
    for (int r = 0; r < 5; r++) { int rc = wait_rc(pids[r]); if (rc != 0) { printf("FAIL: rank %d exited %d\n", r, rc); ok = 0; } }
    printf("%s 5 ranks received rank 0's id (rank 0 started last)\n", ok ? "ok  " : "FAIL");
    failures += !ok;

    // 2. no rank 0: rank 1 must give up within its 2 s timeout
    double t0 = llmc_wall_seconds();
    pid_t p = spawn(1, 2, port + 1, 2, 0, "/tmp/test_bootstrap_err1.txt");
    int rc = wait_rc(p);
    double dt = llmc_wall_seconds() - t0;
    ok = rc == 1 && dt < 6.0 && file_contains("/tmp/test_bootstrap_err1.txt", "could not get the NCCL id from rank 0");
    printf("%s a rank without rank 0 stops with an error after %.1f s (exit %d)\n", ok ? "ok  " : "FAIL", dt, rc);
    failures += !ok;

    // 3. rank 0 of 3 with only rank 2 coming: names rank 1 as missing
    t0 = llmc_wall_seconds();
    pid_t p0 = spawn(0, 3, port + 2, 2, 0, "/tmp/test_bootstrap_err0.txt");
    pid_t p2 = spawn(2, 3, port + 2, 2, 100, NULL);
    rc = wait_rc(p0);
    wait_rc(p2);
    dt = llmc_wall_seconds() - t0;
    ok = rc == 1 && dt < 6.0 && file_contains("/tmp/test_bootstrap_err0.txt", "only 2 of 3 ranks") &&
         file_contains("/tmp/test_bootstrap_err0.txt", "missing: 1");
    printf("%s rank 0 names the missing rank after %.1f s (exit %d)\n", ok ? "ok  " : "FAIL", dt, rc);
    failures += !ok;
    // 4. rank 1 (2 s timeout) stopped for 3 s as it begins to wait; rank 0 comes after it is continued
    p = spawn(1, 2, port + 3, 2, 0, "/tmp/test_bootstrap_err1.txt");
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
    remove("/tmp/test_bootstrap_err0.txt");
    remove("/tmp/test_bootstrap_err1.txt");
    if (failures) { printf("test_bootstrap: FAILED\n"); return 1; }
    printf("test_bootstrap: all checks passed\n");
    return 0;
}
