/*
 * The flight record: each process's last FLIGHT_SLOTS collectives, so that after a hang or a crash
 * of a multi-process run the user sees which rank stopped where.
 *
 * Every collective of the host code (llmc/processes.h: MPI, and the NCCL calls of the CUDA trainer)
 * opens an entry with flight_begin and closes it with flight_end. An entry holds the operation,
 * its bytes, where the run was (step, micro-step and the phase the training loop announced with
 * flight_where), its start and end times (seconds since the process started) and whether it
 * completed. The ring is written out only when something goes wrong: a missed deadline, a fatal
 * error (llmc_die) or a fatal signal, to <out>/flight_rank<R>.txt (stderr without -o), and only in
 * runs of several processes (one process has nothing to wait for).
 *
 * Writing must work inside a signal handler, so the text is formatted by hand (no stdio, no
 * malloc) into a static buffer and written with write(2).
 */
#ifndef LLMC_FLIGHT_RECORD_H
#define LLMC_FLIGHT_RECORD_H

#include <signal.h>
#include "utils.h"

#define FLIGHT_SLOTS 64

typedef struct {
    const char *op;      // static text: "MPI_Allreduce", "ncclAllReduce", ...
    long long bytes;
    long long seq;       // number of the collective in this process, from 1
    int step, micro;     // the step line's number of the step under way; its micro-step from 1 (0: none)
    const char *phase;   // static text, what the loop was doing
    double start, end;   // seconds since the process started; end < 0 while not completed
} FlightEntry;

typedef struct {
    FlightEntry ring[FLIGHT_SLOTS];
    long long count;          // entries ever recorded
    int step, micro;          // where the run is now (flight_where)
    const char *phase;
    double t0;                // llmc_wall_seconds() at flight_start
    int rank, world_size;
    int on;                   // recording (several processes)
    char path[4096];          // the record's file; "" = stderr
    char tmp_path[4104];      // path.tmp, written first
    // the collective this process is waiting in now (processes.h), for a note when a signal comes
    volatile sig_atomic_t waiting;
    const char *wait_op;
    long long wait_bytes;
    double wait_start;
    // a stop signal that came while this process computed: noted at its next wait (0: none)
    volatile sig_atomic_t signal_unnoted;
    double signal_time;
} Flight;

static Flight llmc_flight;

static inline double flight_now(void) { return llmc_wall_seconds() - llmc_flight.t0; }

// ---- recording

// the training loop says where it is; phase is a static string
static inline void flight_where(int step, int micro, const char *phase) {
    llmc_flight.step = step;
    llmc_flight.micro = micro;
    llmc_flight.phase = phase;
}

// a collective starts; returns its handle for flight_end (0 when not recording)
static inline long long flight_begin(const char *op, long long bytes) {
    Flight *f = &llmc_flight;
    if (!f->on) { return 0; }
    FlightEntry *e = &f->ring[f->count % FLIGHT_SLOTS];
    e->op = op;
    e->bytes = bytes;
    e->seq = f->count + 1;
    e->step = f->step;
    e->micro = f->micro;
    e->phase = f->phase;
    e->start = flight_now();
    e->end = -1.0;
    f->count++;
    return e->seq;
}

static inline void flight_end(long long handle) {
    Flight *f = &llmc_flight;
    if (handle <= 0 || handle + FLIGHT_SLOTS <= f->count) { return; }  // not recorded, or overwritten
    f->ring[(handle - 1) % FLIGHT_SLOTS].end = flight_now();
}

static inline const FlightEntry *flight_entry(long long handle) {
    const Flight *f = &llmc_flight;
    if (handle <= 0 || handle + FLIGHT_SLOTS <= f->count) { return NULL; }
    return &f->ring[(handle - 1) % FLIGHT_SLOTS];
}

// ---- writing (async-signal-safe)

typedef struct {
    char buf[16384];
    size_t len;
} FlightText;

static inline void ft_str(FlightText *t, const char *s) {
    for (; s && *s && t->len < sizeof(t->buf) - 1; s++) { t->buf[t->len++] = *s; }
}

// an integer, right-aligned in `width` characters
static inline void ft_int(FlightText *t, long long v, int width) {
    char d[24];
    int n = 0, neg = v < 0;
    unsigned long long u = neg ? 0ULL - (unsigned long long)v : (unsigned long long)v;
    do { d[n++] = (char)('0' + u % 10); u /= 10; } while (u && n < 22);
    if (neg) { d[n++] = '-'; }
    for (int i = n; i < width; i++) { ft_str(t, " "); }
    while (n > 0 && t->len < sizeof(t->buf) - 1) { t->buf[t->len++] = d[--n]; }
}

// seconds with 3 decimals, right-aligned; "-" for a negative value
static inline void ft_seconds(FlightText *t, double s, int width) {
    if (s < 0) {
        for (int i = 1; i < width; i++) { ft_str(t, " "); }
        ft_str(t, "-");
        return;
    }
    long long ms = (long long)(s * 1000.0 + 0.5);
    ft_int(t, ms / 1000, width - 4);
    ft_str(t, ".");
    ft_int(t, (ms / 100) % 10, 1);
    ft_int(t, (ms / 10) % 10, 1);
    ft_int(t, ms % 10, 1);
}

static inline void ft_pad(FlightText *t, const char *s, int width) {
    size_t before = t->len;
    ft_str(t, s);
    for (size_t i = t->len - before; (int)i < width; i++) { ft_str(t, " "); }
}

static inline void ft_out(int fd, const FlightText *t) { llmc_write_all(fd, t->buf, t->len); }

/*
 * Write the record (again, if it was written before): a heading with the reason, then the
 * entries oldest first. reason: static text or a buffer that stays valid.
 */
static inline void flight_write(const char *reason) {
    Flight *f = &llmc_flight;
    if (!f->on) { return; }
    static FlightText t;
    t.len = 0;
    ft_str(&t, "flight record of rank ");
    ft_int(&t, f->rank, 0);
    ft_str(&t, " of ");
    ft_int(&t, f->world_size, 0);
    ft_str(&t, " (pid ");
    ft_int(&t, (long long)getpid(), 0);
    ft_str(&t, "), at ");
    ft_seconds(&t, flight_now(), 0);
    ft_str(&t, " s: ");
    ft_str(&t, reason);
    ft_str(&t, "\nnow at step ");
    ft_int(&t, f->step, 0);
    ft_str(&t, ", ");
    ft_str(&t, f->phase ? f->phase : "start-up");
    ft_str(&t, "\nlast ");
    long long first = f->count > FLIGHT_SLOTS ? f->count - FLIGHT_SLOTS : 0;
    ft_int(&t, f->count - first, 0);
    ft_str(&t, " of ");
    ft_int(&t, f->count, 0);
    ft_str(&t, " collectives (times in seconds since start; end '-' = not completed):\n");
    ft_str(&t, "     seq  op                         bytes   step  micro       start         end  phase\n");
    for (long long i = first; i < f->count; i++) {
        const FlightEntry *e = &f->ring[i % FLIGHT_SLOTS];
        ft_int(&t, e->seq, 8);
        ft_str(&t, "  ");
        ft_pad(&t, e->op, 20);
        ft_int(&t, e->bytes, 12);
        ft_int(&t, e->step, 7);
        if (e->micro > 0) { ft_int(&t, e->micro, 7); } else { ft_str(&t, "      -"); }
        ft_seconds(&t, e->start, 12);
        ft_seconds(&t, e->end, 12);
        ft_str(&t, "  ");
        ft_str(&t, e->phase ? e->phase : "start-up");
        ft_str(&t, e->end < 0 ? "  <- not completed\n" : "\n");
    }
    // to a temporary name, then renamed: a launcher's SIGKILL in the middle of a rewrite (after a
    // fatal error, its SIGTERM's note) leaves the whole earlier record, not a cut one
    int fd = f->path[0] ? open(f->tmp_path, O_WRONLY | O_CREAT | O_TRUNC, 0644) : STDERR_FILENO;
    if (fd < 0) { fd = STDERR_FILENO; }
    ft_out(fd, &t);
    if (fd != STDERR_FILENO) {
        close(fd);
        if (rename(f->tmp_path, f->path) != 0) { unlink(f->tmp_path); }
    }
}

// processes.h around each wait for a collective; bytes -1: a host wait for the GPU to finish NCCL's
// work (cuda/processes.cuh's gpu_wait_event), which the flight record's open entries detail
static inline void flight_wait_begin(const char *op, long long bytes) {
    Flight *f = &llmc_flight;
    f->wait_op = op;
    f->wait_bytes = bytes;
    f->wait_start = flight_now();
    f->waiting = 1;
}

// processes.h on each poll of a wait: a stop signal that came while this rank computed is noted
// once the wait has lasted FLIGHT_NOTE_AFTER s (on a job stopped on purpose every rank has the
// signal and the wait ends sooner; a rank whose peer died waits on until the launcher kills it)
#define FLIGHT_NOTE_AFTER 0.5
static void flight_note(int sig, double came);
static inline void flight_wait_poll(void) {
    Flight *f = &llmc_flight;
    const int sig = f->signal_unnoted;
    if (sig != 0 && flight_now() - f->wait_start >= FLIGHT_NOTE_AFTER) {
        f->signal_unnoted = 0;
        flight_note(sig, f->signal_time);
    }
}

static inline void flight_wait_end(void) { llmc_flight.waiting = 0; }

// "[rank R] KIND: step S (PHASE): " at the start of t (an async-signal-safe line's beginning)
static void ft_line_start(FlightText *t, const char *kind, int step, const char *phase) {
    t->len = 0;
    ft_str(t, "[rank ");
    ft_int(t, llmc_flight.rank, 0);
    ft_str(t, "] ");
    ft_str(t, kind);
    ft_str(t, ": step ");
    ft_int(t, step, 0);
    ft_str(t, " (");
    ft_str(t, phase ? phase : "start-up");
    ft_str(t, "): ");
}

// "...; flight record: PATH\n" to stderr
static void ft_line_end(FlightText *t) {
    ft_str(t, "flight record: ");
    ft_str(t, llmc_flight.path[0] ? llmc_flight.path : "stderr");
    ft_str(t, "\n");
    ft_out(STDERR_FILENO, t);
}

// the name of a stop signal (signals.h's), async-signal-safe
static const char *flight_signal_name(int sig) {
    switch (sig) {
        case SIGINT: return "SIGINT";
        case SIGHUP: return "SIGHUP";
        case SIGUSR1: return "SIGUSR1";
        case SIGUSR2: return "SIGUSR2";
        default: return "SIGTERM";
    }
}

/*
 * A signal that asks the process to stop (signals.h) came. When it finds this rank waiting in a
 * collective, one note says where, and the record is written: a launcher that ends a job after a
 * rank or a host died (mpirun: SIGTERM, SIGKILL a second later) leaves no other trace of the
 * step. A signal that comes while the rank computes is noted in the rank's next wait that lasts
 * (flight_wait_poll). The same signal also comes to stop a job on purpose, so the note claims no
 * failure. Async-signal-safe.
 */
static void flight_note(int sig, double came) {
    Flight *f = &llmc_flight;
    static FlightText t;
    ft_line_start(&t, "note", f->step, f->phase);
    ft_str(&t, flight_signal_name(sig));
    if (came < f->wait_start) {
        ft_str(&t, " came ");
        ft_seconds(&t, f->wait_start - came, 0);
        ft_str(&t, " s before this rank began to wait; it has waited ");
    } else {
        ft_str(&t, " came while this rank had waited ");
    }
    ft_seconds(&t, flight_now() - f->wait_start, 0);
    if (f->wait_bytes >= 0) {
        ft_str(&t, " s in ");
        ft_str(&t, f->wait_op);
        ft_str(&t, " of ");
        ft_int(&t, f->wait_bytes, 0);
        ft_str(&t, " bytes");
    } else {  // the GPU's NCCL work: the record lists the collectives not completed
        ft_str(&t, " s on the GPU for ");
        ft_str(&t, f->wait_op);
        ft_str(&t, " (NCCL collectives)");
    }
    ft_str(&t, " for the other ranks; if the job ends here, one of them stopped answering (the launcher "
               "names it); ");
    ft_line_end(&t);
    static FlightText why;
    why.len = 0;
    ft_str(&why, flight_signal_name(sig));
    ft_str(&why, " while waiting in a collective");
    why.buf[why.len] = '\0';
    flight_write(why.buf);
}

static inline void flight_note_signal(int sig) {
    Flight *f = &llmc_flight;
    if (!f->on) { return; }
    if (!f->waiting) {
        f->signal_time = flight_now();
        f->signal_unnoted = sig;
        return;
    }
    flight_note(sig, flight_now());
}

// what llmc_die says about the record, and writes it (utils.h's fatal hook)
static void flight_on_fatal(void) {
    flight_write("fatal error (see the error line on stderr)");
    llmc_flight.waiting = 0;  // it ends now: the launcher's SIGTERM that follows needs no note of a wait
}

static struct sigaction flight_prev_action[32];

static void flight_on_signal(int sig, siginfo_t *info, void *ctx) {
    flight_write(sig == SIGSEGV ? "fatal signal SIGSEGV" : sig == SIGBUS ? "fatal signal SIGBUS"
                 : sig == SIGFPE ? "fatal signal SIGFPE" : sig == SIGILL ? "fatal signal SIGILL" : "fatal signal SIGABRT");
    // hand the signal on: the previous handler (a sanitizer's report), else the default action
    struct sigaction *prev = &flight_prev_action[sig];
    if ((prev->sa_flags & SA_SIGINFO) && prev->sa_sigaction) {
        prev->sa_sigaction(sig, info, ctx);
    } else if (prev->sa_handler != SIG_DFL && prev->sa_handler != SIG_IGN) {
        prev->sa_handler(sig);
    }
    signal(sig, SIG_DFL);
    raise(sig);
}

/*
 * SIGPIPE: a write to a connection whose other end is gone. Inside an MPI collective that is MPI's
 * TCP connection to a rank whose process or host died (OpenMPI's TCP transport writes without
 * MSG_NOSIGNAL), and the default action would end this rank without a word, before the
 * launcher's SIGTERM could bring the note above. So one error line naming the step and the
 * collective, the record, then the default action. Elsewhere (stdout piped to a reader that left;
 * NCCL's sockets never raise it) only the default action here, in start-up; once training runs,
 * signals.h takes SIGPIPE over and calls this only inside an MPI collective.
 */
// the newest collective is an MPI one that has not completed (a SIGPIPE now is MPI's); async-signal-safe
static int flight_in_mpi_collective(void) {
    Flight *f = &llmc_flight;
    const FlightEntry *e = f->count > 0 ? &f->ring[(f->count - 1) % FLIGHT_SLOTS] : NULL;
    return e != NULL && e->end < 0 && e->op[0] == 'M' && e->op[1] == 'P' && e->op[2] == 'I';
}

static void flight_on_sigpipe(int sig) {
    Flight *f = &llmc_flight;
    if (flight_in_mpi_collective()) {
        const FlightEntry *e = &f->ring[(f->count - 1) % FLIGHT_SLOTS];
        static FlightText t;
        ft_line_start(&t, "error", e->step, e->phase);
        ft_str(&t, "a connection to another rank broke (SIGPIPE) ");
        ft_seconds(&t, flight_now() - e->start, 0);
        ft_str(&t, " s into ");
        ft_str(&t, e->op);
        ft_str(&t, " of ");
        ft_int(&t, e->bytes, 0);
        ft_str(&t, " bytes: a rank's process or host is gone (the launcher names it); ");
        ft_line_end(&t);
        flight_write("SIGPIPE in a collective: a connection to another rank broke");
    }
    signal(sig, SIG_DFL);
    raise(sig);  // delivered, with the default action, when this handler returns
}

// start recording (processes.h calls this once the ranks are known): only with several processes
static inline void flight_start(int rank, int world_size) {
    Flight *f = &llmc_flight;
    f->rank = rank;
    f->world_size = world_size;
    f->micro = 0;
    f->t0 = llmc_wall_seconds();
    f->on = world_size > 1;
}

/*
 * From here on (the training loop, once its output dir exists) a fatal error or signal writes the
 * record, to <dir>/flight_rank<R>.txt, or to stderr when dir is NULL or empty.
 */
static inline void flight_arm(const char *dir) {
    Flight *f = &llmc_flight;
    if (!f->on) { return; }
    f->path[0] = '\0';
    if (dir && dir[0]) {
        snprintf(f->path, sizeof(f->path), "%s/flight_rank%d.txt", dir, f->rank);
        snprintf(f->tmp_path, sizeof(f->tmp_path), "%s.tmp", f->path);
        unlink(f->tmp_path);  // an earlier run's, killed while writing it (a second Ctrl-C on mpirun)
    }
    llmc_add_fatal_hook(flight_on_fatal);
    const int sigs[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
    for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) {
        struct sigaction sa;
        memset(&sa, 0, sizeof(sa));
        sa.sa_sigaction = flight_on_signal;
        sa.sa_flags = SA_SIGINFO | SA_RESETHAND;
        sigemptyset(&sa.sa_mask);
        sigaction(sigs[i], &sa, &flight_prev_action[sigs[i]]);
    }
    struct sigaction pipe_now;
    if (sigaction(SIGPIPE, NULL, &pipe_now) == 0 && pipe_now.sa_handler == SIG_DFL) {  // an ignored SIGPIPE stays so
        struct sigaction sa;
        memset(&sa, 0, sizeof(sa));
        sa.sa_handler = flight_on_sigpipe;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGPIPE, &sa, NULL);
    }
}

// where the record goes, for messages
static inline const char *flight_destination(void) { return llmc_flight.path[0] ? llmc_flight.path : "stderr"; }

#endif  // LLMC_FLIGHT_RECORD_H
