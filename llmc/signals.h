/*
 * Preemption: SIGTERM or SIGINT asks the run to stop cleanly. The training loop checks the flag
 * once per step (all ranks agree through a max-reduction), finishes the step, writes a
 * checkpoint and exits 0 with a line that says how to resume. A second signal exits at once.
 * SIGHUP (the terminal closed), SIGUSR1 and SIGUSR2 (the signals SLURM's --signal sends in the
 * setups of Lightning and submitit) and SIGPIPE (the reader of stdout or stderr left: `| tee`
 * ended by the same Ctrl-C, or killed) stop the run the same way instead of ending it at once with
 * the steps since the last checkpoint; each is left alone where it is ignored (nohup's SIGHUP); after SIGPIPE
 * the writes to that pipe fail quietly (EPIPE), and a SIGPIPE inside an MPI collective is still
 * the broken connection to a rank that is gone (flight_record.h).
 * The handler is installed when training starts (train_loop.h): during start-up nothing checks
 * the flag, so there a signal keeps its default action and ends the process.
 * The kernel hands a signal sent to the process to any of its threads (MPI's, NCCL's, CUDA's, the
 * checkpoint writer), and the handler reads what the main thread writes (the flight record), so a
 * handler that runs on another thread passes the signal on to the main thread and does nothing
 * else: every handler's work happens on the main thread, between two of its instructions.
 */
#ifndef LLMC_SIGNALS_H
#define LLMC_SIGNALS_H

#include <pthread.h>
#include <signal.h>
#include <unistd.h>
#include "flight_record.h"

static volatile sig_atomic_t llmc_stop_signal = 0;  // the first signal received, 0 if none
static pthread_t llmc_main_thread;                    // set (atomically) before the handler is installed

static void llmc_on_signal(int sig) {
    pthread_t main_thread;
    __atomic_load(&llmc_main_thread, &main_thread, __ATOMIC_ACQUIRE);
    if (!pthread_equal(pthread_self(), main_thread)) {
        pthread_kill(main_thread, sig);  // async-signal-safe; the main thread never blocks these
        return;
    }
    if (sig == SIGPIPE) {
        if (flight_in_mpi_collective()) {
            flight_on_sigpipe(sig);  // a rank's connection broke: its line and record, then the default action
            return;
        }
        struct sigaction ignore;  // the pipe stays broken: every later write would raise it again
        memset(&ignore, 0, sizeof(ignore));
        ignore.sa_handler = SIG_IGN;
        sigaction(SIGPIPE, &ignore, NULL);
        if (llmc_stop_signal == 0) { llmc_stop_signal = sig; }
        return;
    }
    if (llmc_stop_signal != 0 && llmc_stop_signal != SIGPIPE) {
        // second signal: leave now; the newest complete checkpoint is still intact on disk
        static const char msg[] = "second signal: exiting immediately\n";
        ssize_t unused = write(STDERR_FILENO, msg, sizeof(msg) - 1);
        (void)unused;
        _exit(128 + sig);
    }
    llmc_stop_signal = sig;
    flight_note_signal(sig);  // where this rank waits, if it does: the launcher may be ending the job
}

static inline void signals_install(void) {
    pthread_t self = pthread_self();
    __atomic_store(&llmc_main_thread, &self, __ATOMIC_RELEASE);
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = llmc_on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    const int unless_ignored[] = {SIGHUP, SIGUSR1, SIGUSR2, SIGPIPE};  // nohup's SIGHUP stays ignored, and so on
    for (size_t i = 0; i < sizeof(unless_ignored) / sizeof(unless_ignored[0]); i++) {
        struct sigaction now;
        if (sigaction(unless_ignored[i], NULL, &now) == 0 && now.sa_handler != SIG_IGN) {
            sigaction(unless_ignored[i], &sa, NULL);
        }
    }
}

#endif  // LLMC_SIGNALS_H
