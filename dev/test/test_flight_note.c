/*
 * The note a rank leaves when a stop signal comes (llmc/flight_record.h, through signals.h's
 * handler): a launcher that ends a job after a host died sends SIGTERM and, about a second later,
 * SIGKILL, and the note is then the only trace of where each rank was.
 *   - SIGTERM while the rank waits in a collective: the note at once, naming step, phase, the
 *     collective and how long it has waited, and the flight record is written.
 *   - SIGTERM while the rank computes: nothing yet; nothing either when its next wait is short (a
 *     job stopped on purpose: every rank has the signal); the note once a wait lasts
 *     FLIGHT_NOTE_AFTER s, saying how long before that wait the signal came; and only once.
 * stderr goes to a file that the checks read.
 */
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
    llmc_stop_signal = 0;
    flight_where(9, 1, "the loss sum");
    flight_wait_begin("MPI_Allreduce(f64)", 8);
    usleep(50 * 1000);
    raise(SIGTERM);
    read_stderr(text, sizeof(text));
    flight_wait_end();
    CHECK(count(text, "note: ") == 2 && strstr(text, "[rank 0] note: step 9 (the loss sum): SIGTERM came while this rank had waited 0.0") != NULL,
          "the note of a signal that came while waiting: %s", text);

    char cmd[4300];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    if (system(cmd) != 0) { printf("note: could not remove %s\n", dir); }
    if (failures > 0) {
        printf("test_flight_note: %d check(s) FAILED\n", failures);
        return 1;
    }
    printf("test_flight_note: the stop-signal notes are right\n");
    return 0;
}
