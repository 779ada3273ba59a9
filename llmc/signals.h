/*
 * Preemption: SIGTERM or SIGINT asks the run to stop cleanly. The training loop checks the flag
 * once per step (all ranks agree through a max-reduction), finishes the step, writes a
 * checkpoint and exits 0 with a line that says how to resume. A second signal exits at once,
 * except the one a launcher passes on of a stop that reached the process itself too: torchrun
 * forwards the SIGINT of a Ctrl-C (and the SIGHUP of a closed terminal) that the terminal also
 * sent to its whole process group, its workers included, and a SIGTERM that systemd sent to every
 * process of the unit; so the first signal from the parent process (the launcher) and the first
 * from elsewhere, in either order, are one stop, not two requests. Every launcher ends its processes
 * with SIGKILL when it no longer waits (torchrun after 30 s, mpirun after 2 s), so ignoring the
 * copy loses nothing.
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
// who has sent stop signals (SIGPIPE aside): a bit per sender, the launcher (the parent process) and
// anyone else; set on the thread that received the signal, as the sender is lost when that thread
// passes it on to the main thread
enum { STOP_FROM_PARENT = 1, STOP_FROM_ELSEWHERE = 2 };
static int llmc_stop_senders = 0;

/*
 * 1 when this stop signal is the same stop as an earlier one: the first from the launcher after one
 * from elsewhere, or the reverse (systemd signals the launcher and its ranks one after another, and
 * the launcher may pass its signal on before the rank's own arrives). A second request is a second
 * signal from the same side: the terminal's second Ctrl-C, a second kill of the launcher.
 */
static int stop_passed_on(int sig, const siginfo_t *info) {
    if (sig == SIGPIPE || info == NULL) { return 0; }
    // kill(), sigqueue() and tgkill() name their sender; the terminal's signals (SI_KERNEL) have none
    const int named = info->si_code == SI_USER || info->si_code == SI_QUEUE || info->si_code == SI_TKILL;
    if (named && info->si_pid == getpid()) { return 0; }  // this process's own: a thread passing one on, raise()
    const int sender = named && info->si_pid == getppid() ? STOP_FROM_PARENT : STOP_FROM_ELSEWHERE;
    const int before = __atomic_fetch_or(&llmc_stop_senders, sender, __ATOMIC_ACQ_REL);
    return before != 0 && !(before & sender);
}

static void llmc_on_signal(int sig, siginfo_t *info, void *context) {
    (void)context;
    if (stop_passed_on(sig, info)) { return; }
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
    sa.sa_sigaction = llmc_on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART | SA_SIGINFO;
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
