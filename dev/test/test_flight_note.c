/*
 * The note a rank leaves when a stop signal comes (llmc/flight_record.h, through signals.h's
 * handler): a launcher that ends a job after a host died sends SIGTERM and, about a second later,
 * SIGKILL, and the note is then the only trace of where each rank was.
 *   - SIGTERM while the rank waits in a collective: the note at once, naming step, phase, the
 *     collective and how long it has waited, and the flight record is written.
 *   - SIGTERM while the host waits for the GPU's NCCL work (no byte count): the note names the wait;
 *   - SIGTERM while the rank computes: nothing yet; nothing either when its next wait is short (a
 *     job stopped on purpose: every rank has the signal); the note once a wait lasts
 *     FLIGHT_NOTE_AFTER s, saying how long before that wait the signal came; and only once.
 * A fatal error in a wait (-pt's), then the launcher's SIGTERM: the error's record stays (renamed
 * into place, no temporary left) and no note claims a wait.
 * And SIGPIPE (a write to a connection whose other end is gone), each in a child process:
 *   - inside a collective (OpenMPI's TCP connection to a dead rank): one error line naming the
 *     collective's step and phase, the record written, and the process still ends by SIGPIPE
 *     (in start-up and once training runs);
 *   - outside a collective (a closed stdout), or while an NCCL one is open: in start-up ends by
 *     SIGPIPE without a line; once training runs (signals_install) a stop request without a line,
 *     the process goes on and its writes fail with EPIPE;
 *   - ignored before the record was armed: stays ignored (the write fails with EPIPE).
 * And the error and warning lines of utils.h: 4 processes writing 300 lines of 700 bytes each to
 * one pipe, as ranks under a launcher do, leave every line whole (one write each).
 * stderr goes to a file that the checks read.
 */
#include <sys/wait.h>
#include "../../llmc/signals.h"

static int failures = 0;
#define CHECK(cond, ...) do { if (!(cond)) { failures++; printf("FAIL: " __VA_ARGS__); printf("\n"); } } while (0)

static char err_path[4200];

// what the process wrote to stderr so far
static void read_stderr(char *buf, size_t n) {
    FILE *f = fopen(err_path, "rb");
    size_t got = f ? fread(buf, 1, n - 1, f) : 0;
    buf[got] = '\0';
    if (f) { fclose(f); }
}

static int count(const char *text, const char *needle) {
    int n = 0;
    for (const char *p = strstr(text, needle); p; p = strstr(p + 1, needle)) { n++; }
    return n;
}

// wait in a collective for `seconds`, polling as processes.h does
static void wait_in_collective(double seconds) {
    flight_wait_begin("MPI_Allreduce(f32)", 4096);
    const double until = llmc_wall_seconds() + seconds;
    while (llmc_wall_seconds() < until) {
        flight_wait_poll();
        usleep(1000);
    }
    flight_wait_end();
}

// in a child with stderr in DIR/NAME: arm the record (and, when `training`, install signals.h's
// handlers, as the training loop does once it runs), then, inside the collective OP (still open
// when `open`), write to a pipe whose reader is gone; returns the child's wait status: 0 when the
// write failed with EPIPE (and, when training, a second one too, with the run asked to stop)
static int broken_pipe_child(const char *dir, const char *name, const char *op, int open, int ignored, int training) {
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) { llmc_die("fork failed"); }
    if (pid == 0) {
        char path[4200];
        snprintf(path, sizeof(path), "%s/%s", dir, name);
        if (!freopen(path, "w", stderr)) { _exit(100); }
        setvbuf(stderr, NULL, _IONBF, 0);
        signal(SIGPIPE, ignored ? SIG_IGN : SIG_DFL);  // as a new process has it (main installed signals.h's)
        llmc_stop_signal = 0; llmc_stop_senders = 0;
        llmc_flight.count = 0;
        flight_start(1, 2);
        flight_arm(dir);
        if (training) { signals_install(); }
        flight_where(11, 0, "the gradient reduction");
        long long h = flight_begin(op, 4096);
        if (!open) { flight_end(h); }
        int fds[2];
        if (pipe(fds) != 0) { _exit(101); }
        close(fds[0]);
        usleep(20 * 1000);
        ssize_t n = write(fds[1], "x", 1);
        int ok = n < 0 && errno == EPIPE;
        if (training) {
            n = write(fds[1], "x", 1);
            ok = ok && n < 0 && errno == EPIPE && llmc_stop_signal == SIGPIPE;
        }
        _exit(ok ? 0 : 102);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return status;
}

static void check_sigpipe(const char *dir) {
    char text[65536], path[4200], record[4200];
    snprintf(record, sizeof(record), "%s/flight_rank1.txt", dir);
    const char *when[2] = {"in start-up", "in training"};
    for (int training = 0; training < 2; training++) {
        int st = broken_pipe_child(dir, "pipe_in.txt", "MPI_Allreduce(f32)", 1, 0, training);
        snprintf(path, sizeof(path), "%s/pipe_in.txt", dir);
        snprintf(err_path, sizeof(err_path), "%s", path);
        read_stderr(text, sizeof(text));
        CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGPIPE, "SIGPIPE in a collective %s: the process did not end by SIGPIPE (status %d)",
              when[training], st);
        CHECK(count(text, "\n") == 1 &&
              strstr(text, "[rank 1] error: step 11 (the gradient reduction): a connection to another rank broke (SIGPIPE) 0.0") != NULL &&
              strstr(text, " s into MPI_Allreduce(f32) of 4096 bytes: a rank's process or host is gone") != NULL,
              "the line of a SIGPIPE in a collective %s: %s", when[training], text);
        snprintf(err_path, sizeof(err_path), "%s", record);
        read_stderr(text, sizeof(text));
        CHECK(strstr(text, "SIGPIPE in a collective") != NULL && strstr(text, "<- not completed") != NULL,
              "the flight record after a SIGPIPE in a collective %s: %s", when[training], text);
        unlink(record);
    }

    // outside an MPI collective (stdout's reader gone): in start-up the default action alone; in
    // training a stop request (llmc_stop_signal), no line, and the next writes fail quietly
    const char *outside[2][2] = {{"MPI_Allreduce(f32)", "after an MPI collective"}, {"ncclAllReduce(grads)", "in an NCCL collective"}};
    for (int training = 0; training < 2; training++) {
        for (int i = 0; i < 2; i++) {
            int st = broken_pipe_child(dir, "pipe_out.txt", outside[i][0], i, 0, training);
            snprintf(err_path, sizeof(err_path), "%s/pipe_out.txt", dir);
            read_stderr(text, sizeof(text));
            const int as_wanted = training ? WIFEXITED(st) && WEXITSTATUS(st) == 0 : WIFSIGNALED(st) && WTERMSIG(st) == SIGPIPE;
            CHECK(as_wanted && text[0] == '\0' && access(record, F_OK) != 0, "SIGPIPE %s %s: want %s (status %d, stderr: %s)",
                  outside[i][1], when[training], training ? "a stop request, EPIPE after" : "the default action alone", st, text);
        }
    }

    int st = broken_pipe_child(dir, "pipe_ign.txt", "MPI_Allreduce(f32)", 1, 1, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "an ignored SIGPIPE did not stay ignored (status %d)", st);
}

// 4 "ranks" each warn LINES times with a long message into one pipe: every line read back is whole
static void check_lines_whole(void) {
    enum { RANKS = 4, LINES = 300, LEN = 700 };
    int fds[2];
    if (pipe(fds) != 0) { llmc_die("pipe failed"); }
    fflush(NULL);
    for (int r = 0; r < RANKS; r++) {
        if (fork() == 0) {
            close(fds[0]);
            dup2(fds[1], STDERR_FILENO);
            char msg[LEN + 1];
            memset(msg, 'a' + r, LEN);
            msg[LEN] = '\0';
            llmc_set_rank(r, RANKS);
            for (int i = 0; i < LINES; i++) { llmc_warn("%s", msg); }
            _exit(0);
        }
    }
    close(fds[1]);
    FILE *in = fdopen(fds[0], "r");
    static char line[4 * LEN];
    int whole[RANKS] = {0}, broken = 0;
    while (fgets(line, sizeof(line), in)) {
        int r = -1, n = 0;
        const size_t len = strlen(line);
        if (sscanf(line, "[rank %d] warning: %n", &r, &n) == 1 && r >= 0 && r < RANKS && n > 0 &&
            len == (size_t)n + LEN + 1 && strspn(line + n, (char[]){(char)('a' + r), '\0'}) == LEN) {
            whole[r]++;
        } else {
            broken++;
        }
    }
    fclose(in);
    while (wait(NULL) > 0) {}
    for (int r = 0; r < RANKS; r++) {
        CHECK(whole[r] == LINES, "rank %d: %d of %d warning lines whole (%d broken lines in all)", r, whole[r], LINES, broken);
    }
}

int main(void) {
    char dir[] = "/tmp/test_flight_note_XXXXXX";
    if (!mkdtemp(dir)) { llmc_die("mkdtemp failed"); }
    snprintf(err_path, sizeof(err_path), "%s/stderr.txt", dir);
    if (!freopen(err_path, "w", stderr)) { llmc_die("cannot redirect stderr to %s", err_path); }
    setvbuf(stderr, NULL, _IONBF, 0);
    flight_start(0, 2);
    flight_arm(dir);
    signals_install();
    char text[65536], record[4200];
    snprintf(record, sizeof(record), "%s/flight_rank0.txt", dir);

    // 1. SIGTERM while computing, then a short wait: nothing; then a long one: one note
    flight_where(7, 2, "the gradient reduction");
    raise(SIGTERM);
    usleep(100 * 1000);
    read_stderr(text, sizeof(text));
    CHECK(text[0] == '\0', "a note while the rank computes: %s", text);
    wait_in_collective(0.2);
    read_stderr(text, sizeof(text));
    CHECK(text[0] == '\0', "a note in a wait shorter than %.1f s: %s", FLIGHT_NOTE_AFTER, text);
    wait_in_collective(FLIGHT_NOTE_AFTER + 0.2);
    wait_in_collective(FLIGHT_NOTE_AFTER + 0.2);
    read_stderr(text, sizeof(text));
    CHECK(count(text, "note: ") == 1, "%d notes after the long waits, want 1: %s", count(text, "note: "), text);
    CHECK(strstr(text, "[rank 0] note: step 7 (the gradient reduction): SIGTERM came 0.") != NULL &&
          strstr(text, " s before this rank began to wait; it has waited 0.5") != NULL &&
          strstr(text, " s in MPI_Allreduce(f32) of 4096 bytes for the other ranks") != NULL,
          "the note of a signal that came while computing: %s", text);
    CHECK(access(record, F_OK) == 0, "no flight record %s after the note", record);

    // 2. SIGTERM while waiting: the note at once (a second signal would exit: reset the first)
    llmc_stop_signal = 0; llmc_stop_senders = 0;
    flight_where(9, 1, "the loss sum");
    flight_wait_begin("MPI_Allreduce(f64)", 8);
    usleep(50 * 1000);
    raise(SIGTERM);
    read_stderr(text, sizeof(text));
    flight_wait_end();
    CHECK(count(text, "note: ") == 2 && strstr(text, "[rank 0] note: step 9 (the loss sum): SIGTERM came while this rank had waited 0.0") != NULL,
          "the note of a signal that came while waiting: %s", text);

    // 3. SIGTERM while the host waits for the GPU's NCCL work (cuda/processes.cuh's gpu_wait_event)
    llmc_stop_signal = 0; llmc_stop_senders = 0;
    flight_where(12, 0, "the gradient norm");
    flight_wait_begin("the gradient norm", -1);
    usleep(50 * 1000);
    raise(SIGTERM);
    read_stderr(text, sizeof(text));
    flight_wait_end();
    CHECK(count(text, "note: ") == 3 &&
          strstr(text, "[rank 0] note: step 12 (the gradient norm): SIGTERM came while this rank had waited 0.0") != NULL &&
          strstr(text, " s on the GPU for the gradient norm (NCCL collectives) for the other ranks") != NULL,
          "the note of a signal that came while waiting for the GPU's NCCL work: %s", text);

    // 4. a fatal error in a wait (-pt's), then the launcher's SIGTERM: the error's record stays, whole,
    // and no note claims a wait (the rank is ending); the record is renamed into place, no .tmp left
    llmc_stop_signal = 0; llmc_stop_senders = 0;
    flight_where(30, 2, "the gradient reduction");
    long long h = flight_begin("MPI_Allreduce(f32)", 547840);
    flight_wait_begin("MPI_Allreduce(f32)", 547840);
    flight_on_fatal();
    raise(SIGTERM);
    read_stderr(text, sizeof(text));
    CHECK(count(text, "note: ") == 3, "a note of the SIGTERM after a fatal error: %s", text);
    snprintf(err_path, sizeof(err_path), "%s", record);
    read_stderr(text, sizeof(text));
    CHECK(strstr(text, "fatal error (see the error line on stderr)") != NULL && strstr(text, "SIGTERM") == NULL,
          "the record after a fatal error and the launcher's SIGTERM: %.200s", text);
    char tmp[4300];
    snprintf(tmp, sizeof(tmp), "%s.tmp", record);
    CHECK(access(tmp, F_OK) != 0, "the record's temporary file %s stayed", tmp);
    flight_wait_end();
    flight_end(h);
    snprintf(err_path, sizeof(err_path), "%s/stderr.txt", dir);

    check_sigpipe(dir);
    check_lines_whole();

    char cmd[4300];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    if (system(cmd) != 0) { printf("note: could not remove %s\n", dir); }
    if (failures > 0) {
        printf("test_flight_note: %d check(s) FAILED\n", failures);
        return 1;
    }
    printf("test_flight_note: the stop-signal notes, the SIGPIPE line and whole error lines are right\n");
    return 0;
}
