/*
 * Processes: rank discovery and the host-side collectives both trainers use.
 *
 * Rank, world size and local rank come, in this order, from
 *   1. MPI, when a launcher that MPI understands started us (mpirun/mpiexec: OMPI_COMM_WORLD_*,
 *      PMI_RANK/PMI_SIZE, PMIX_RANK) and the binary was built with MPI (USE_MPI);
 *   2. torchrun's RANK, WORLD_SIZE, LOCAL_RANK (MASTER_ADDR/MASTER_PORT for the NCCL bootstrap);
 *   3. SLURM's SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID;
 *   4. llm.c's flags -pn (processes), -pr (this one's rank), -pg (per node), for processes started
 *      by hand (comm_apply_args; where a launcher set the ranks, the flags must agree);
 *   5. else a single process.
 * The GPU of a rank is its local rank.
 *
 * Without MPI the ranks of the CUDA trainer meet through a bootstrap that hands them rank 0's NCCL
 * id (comm_bootstrap_bcast, -pi): TCP to rank 0's host (tcp_broadcast.h) or files in a shared
 * directory (fs_broadcast.h).
 *
 * Host collectives (small buffers: losses, flags, hashes) go through function pointers so that
 * the CPU trainer uses MPI and the CUDA trainer can use MPI or NCCL. Large gradient reductions
 * are the trainers' own business (comm_mpi_allreduce_sum_f32 on the CPU, NCCL on the GPU).
 *
 * Deadlines: no collective waits forever. Every MPI collective here is the non-blocking form,
 * polled until it completes; after -pt seconds (Comm.timeout_s) it is an error. The rank that
 * misses its deadline tells every other rank (a notice on a communicator of its own), every live
 * rank that is waiting in a collective answers, and after a short grace each of them prints one
 * line naming the step, the collective and the ranks it did not hear from, writes its flight
 * record (flight_record.h) and the job ends through MPI_Abort. The NCCL paths have their own watchdog
 * with the same -pt (cuda/processes.cuh).
 */
#ifndef LLMC_PROCESSES_H
#define LLMC_PROCESSES_H

#include "utils.h"
#include "args.h"
#include "flight_record.h"
#include "tcp_broadcast.h"
#include "fs_broadcast.h"
#ifdef USE_MPI
#include <mpi.h>
#endif

typedef struct Comm {
    int rank;                 // 0 .. world_size-1
    int world_size;
    int local_rank;           // rank on this node, = GPU index
    int local_size;           // ranks on this node (MPI, torchrun's LOCAL_WORLD_SIZE; else 1): they share its RAM
    const char *launcher;     // "single", "mpirun", "torchrun", "slurm", "-pn/-pr"
    int mpi;                  // 1 if we initialised MPI
    int timeout_s;            // -pt: seconds before a collective that has not completed is an error
    // the bootstrap (comm_apply_args): -pi auto|mpi|tcp|fs, -ps rank 0's host, -pf the shared directory
    const char *init_method, *init_server, *init_dir;
    void *impl;               // backend data of the collectives below (e.g. an NCCL communicator)
    void (*allreduce_sum_f64)(struct Comm *c, double *buf, int n);
    void (*allreduce_max_i32)(struct Comm *c, int *buf, int n);
    void (*allgather_u64)(struct Comm *c, uint64_t value, uint64_t *all);  // all: world_size entries
    void (*barrier)(struct Comm *c);
    void (*bcast)(struct Comm *c, void *buf, size_t bytes);  // from rank 0
} Comm;

// parse a non-negative integer environment variable; -1 if unset; dies if malformed
static inline int comm_env_int(const char *name) {
    const char *s = getenv(name);
    if (s == NULL || s[0] == '\0') { return -1; }
    char *end;
    long v = strtol(s, &end, 10);
    if (*end != '\0' || v < 0 || v > 1000000) {
        llmc_die("environment variable %s=%s is not a whole number in 0..1000000; the launcher sets it (unset it to run "
                 "one process)", name, s);
    }
    return (int)v;
}

// the rank and world size an MPI launcher gave this process, before MPI_Init (-1 where not given):
// Open MPI's, MPICH's (PMI), else srun --mpi=pmix's PMIX_RANK with srun's own SLURM_NTASKS (PMIx
// names no size in the environment). Returns whether they are srun's
static inline int comm_launcher_ranks(int *rank, int *world) {
    *rank = comm_env_int("OMPI_COMM_WORLD_RANK");
    *world = comm_env_int("OMPI_COMM_WORLD_SIZE");
    if (*rank < 0 && *world < 0) { *rank = comm_env_int("PMI_RANK"); *world = comm_env_int("PMI_SIZE"); }
    if (*rank < 0 && *world < 0) {
        *rank = comm_env_int("PMIX_RANK");
        *world = comm_env_int("SLURM_NTASKS");
        return *rank >= 0;
    }
    return 0;
}

// ---- single process: every collective is the identity
static void comm_single_allreduce_f64(Comm *c, double *buf, int n) { (void)c; (void)buf; (void)n; }
static void comm_single_allreduce_i32(Comm *c, int *buf, int n) { (void)c; (void)buf; (void)n; }
static void comm_single_allgather_u64(Comm *c, uint64_t v, uint64_t *all) { (void)c; all[0] = v; }
static void comm_single_barrier(Comm *c) { (void)c; }
static void comm_single_bcast(Comm *c, void *buf, size_t bytes) { (void)c; (void)buf; (void)bytes; }

#ifdef USE_MPI
static inline void mpi_check(int err, const char *call, const char *file, int line) {
    if (err != MPI_SUCCESS) {
        char msg[MPI_MAX_ERROR_STRING];
        int len = 0;
        MPI_Error_string(err, msg, &len);
        llmc_die("MPI error in %s: %s [%s:%d]", call, msg, file, line);
    }
}
#define mpiCheck(call) mpi_check((call), #call, __FILE__, __LINE__)

static void comm_mpi_abort(void) { MPI_Abort(MPI_COMM_WORLD, 1); }

/*
 * MPI_Init waits for every process of the job (Open MPI's start-up exchange): one that never calls
 * it (stuck on its node before the trainer ran, a wrapper script that waits, not started at all)
 * would hold every other rank there for good, before anything that -pt bounds. So a thread gives
 * MPI_Init -pt seconds (read from the command line ahead of the parse; counted as the other waits
 * count them, the time this process ran), then ends this process with a line that says so, and the
 * launcher ends the job.
 */
static int comm_mpi_init_done;  // set (atomically) once MPI_Init returned
static void *comm_mpi_init_watch(void *arg) {
    const int timeout_s = (int)(intptr_t)arg;
    WaitClock clock = wait_clock_start(timeout_s);
    while (!__atomic_load_n(&comm_mpi_init_done, __ATOMIC_ACQUIRE)) {
        if (wait_clock_expired(&clock)) {
            llmc_error("MPI_Init did not complete within -pt %d s: a process of this job never reached it (not "
                       "started, or stuck before the trainer ran, on its node); check that every node can start "
                       "this trainer, or raise -pt for a slow start", timeout_s);
            _exit(EXIT_FAILURE);
        }
        usleep(20 * 1000);
    }
    return NULL;
}

static inline void comm_mpi_init(int *argc, char ***argv, int timeout_s) {
    // the rank of the watch's line, as the launcher gave it (MPI_Init has not yet)
    int r, w;
    comm_launcher_ranks(&r, &w);
    llmc_set_rank(r, w);
    pthread_t watch;
    const int watching = pthread_create(&watch, NULL, comm_mpi_init_watch, (void *)(intptr_t)timeout_s) == 0;
    mpiCheck(MPI_Init(argc, argv));
    __atomic_store_n(&comm_mpi_init_done, 1, __ATOMIC_RELEASE);
    if (watching) { pthread_join(watch, NULL); }
}

#define COMM_NOTICE_TAG 0x11c
#define COMM_NOTICE_GRACE_S 2.0  // how long a failing rank listens for the others before it reports

// the deadline notices (see the top of the file)
static struct {
    MPI_Comm comm;         // a duplicate of MPI_COMM_WORLD, for notices only
    MPI_Request recv;      // the posted receive of the next notice
    int in[2], out[2];     // a notice: the sender's rank and step
} comm_notice;

static inline void comm_notice_post(void) {
    mpiCheck(MPI_Irecv(comm_notice.in, 2, MPI_INT, MPI_ANY_SOURCE, COMM_NOTICE_TAG, comm_notice.comm, &comm_notice.recv));
}

// the rank of the sender of a notice that has arrived (and the receive posted again), or -1
static inline int comm_notice_poll(void) {
    int arrived = 0;
    MPI_Status st;
    mpiCheck(MPI_Test(&comm_notice.recv, &arrived, &st));
    if (!arrived) { return -1; }
    comm_notice_post();
    return st.MPI_SOURCE;
}

// "1, 3, 4" (at most 16, then "and N more") of the ranks with heard[r] == 0
static inline int comm_unheard_list(const unsigned char *heard, int W, char *out, size_t n) {
    int count = 0;
    out[0] = '\0';
    for (int r = 0; r < W; r++) {
        if (heard[r]) { continue; }
        size_t len = strlen(out);
        if (count < 16) { snprintf(out + len, n - len, "%s%d", count ? ", " : "", r); }
        count++;
    }
    if (count > 16) {
        size_t len = strlen(out);
        snprintf(out + len, n - len, " and %d more", count - 16);
    }
    return count;
}

/*
 * A collective of this rank missed its deadline (noticed_from < 0), or another rank says its own
 * did (noticed_from = that rank). Tell every rank, listen for the others for a grace period, then
 * report, write the flight record and take the job down. Never returns.
 */
static void comm_mpi_fail(Comm *c, const char *op, long long bytes, int noticed_from) {
    const int W = c->world_size;
    unsigned char *heard = (unsigned char *)callocCheck((size_t)W, 1);
    heard[c->rank] = 1;
    if (noticed_from >= 0) { heard[noticed_from] = 1; }
    comm_notice.out[0] = c->rank;
    comm_notice.out[1] = llmc_flight.step;
    for (int r = 0; r < W; r++) {
        if (r == c->rank) { continue; }
        MPI_Request req;  // eager and tiny: completes without the receiver; never waited for
        if (MPI_Isend(comm_notice.out, 2, MPI_INT, r, COMM_NOTICE_TAG, comm_notice.comm, &req) == MPI_SUCCESS) {
            MPI_Request_free(&req);
        }
    }
    const double until = llmc_wall_seconds() + COMM_NOTICE_GRACE_S;
    long spins = 0;
    while (llmc_wall_seconds() < until) {
        int from = comm_notice_poll();
        if (from >= 0 && from < W) { heard[from] = 1; continue; }
        llmc_poll_pause(&spins);
    }
    char missing[256], why[160], micro[32] = "", reason[640];
    int n = comm_unheard_list(heard, W, missing, sizeof(missing));
    free(heard);
    if (llmc_flight.micro > 0) { snprintf(micro, sizeof(micro), ", micro-step %d", llmc_flight.micro); }
    if (noticed_from >= 0) {
        snprintf(why, sizeof(why), "was abandoned: rank %d reported a collective stuck for -pt %d s", noticed_from,
                 c->timeout_s);
    } else {
        snprintf(why, sizeof(why), "did not complete within -pt %d s", c->timeout_s);
    }
    snprintf(reason, sizeof(reason), "step %d (%s%s): %s of %lld bytes %s; %s%s", llmc_flight.step,
             llmc_flight.phase ? llmc_flight.phase : "start-up", micro, op, bytes, why,
             n ? "no answer from rank(s) " : "every rank answered", n ? missing : "");
    flight_write(reason);
    llmc_error("%s (stopped, hung or dead); flight record: %s", reason, flight_destination());
    usleep(1500 * 1000);  // the others print their line before this rank's abort ends the job
    if (llmc_abort_hook) { llmc_abort_hook(); }
    exit(EXIT_FAILURE);
}

// wait for a non-blocking collective, bounded by -pt; handle: flight_begin's
static inline void comm_mpi_wait(Comm *c, MPI_Request *req, const char *op, long long bytes, long long handle) {
    WaitClock clock = wait_clock_start(c->timeout_s);
    long spins = 0;
    flight_wait_begin(op, bytes);
    for (;;) {
        int done = 0;
        mpiCheck(MPI_Test(req, &done, MPI_STATUS_IGNORE));
        if (done) { flight_wait_end(); flight_end(handle); return; }
        flight_wait_poll();
        int from = comm_notice_poll();
        if (from >= 0) { comm_mpi_fail(c, op, bytes, from); }
        if (wait_clock_expired(&clock)) { comm_mpi_fail(c, op, bytes, -1); }
        llmc_poll_pause(&spins);
    }
}

// start a collective (the non-blocking call `start`, which fills `req`), then wait for it
#define COMM_MPI_RUN(c, op, bytes, start)                           \
    do {                                                            \
        long long handle_ = flight_begin(op, (long long)(bytes));   \
        MPI_Request req_;                                           \
        mpiCheck(start);                                            \
        comm_mpi_wait((c), &req_, op, (long long)(bytes), handle_); \
    } while (0)

static void comm_mpi_allreduce_f64(Comm *c, double *buf, int n) {
    COMM_MPI_RUN(c, "MPI_Allreduce(f64)", n * sizeof(double),
                 MPI_Iallreduce(MPI_IN_PLACE, buf, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &req_));
}
static void comm_mpi_allreduce_i32(Comm *c, int *buf, int n) {
    COMM_MPI_RUN(c, "MPI_Allreduce(max)", n * sizeof(int),
                 MPI_Iallreduce(MPI_IN_PLACE, buf, n, MPI_INT, MPI_MAX, MPI_COMM_WORLD, &req_));
}
static void comm_mpi_allgather_u64(Comm *c, uint64_t v, uint64_t *all) {
    unsigned long long mine = v;
    COMM_MPI_RUN(c, "MPI_Allgather", sizeof(mine),
                 MPI_Iallgather(&mine, 1, MPI_UNSIGNED_LONG_LONG, all, 1, MPI_UNSIGNED_LONG_LONG, MPI_COMM_WORLD, &req_));
}
static void comm_mpi_barrier(Comm *c) { COMM_MPI_RUN(c, "MPI_Barrier", 0, MPI_Ibarrier(MPI_COMM_WORLD, &req_)); }
static void comm_mpi_bcast(Comm *c, void *buf, size_t bytes) {
    char *p = (char *)buf;
    while (bytes > 0) {  // MPI counts are int
        int n = bytes > (1u << 30) ? (1 << 30) : (int)bytes;
        COMM_MPI_RUN(c, "MPI_Bcast", n, MPI_Ibcast(p, n, MPI_BYTE, 0, MPI_COMM_WORLD, &req_));
        p += n;
        bytes -= (size_t)n;
    }
}

/*
 * In-place sum of a large float buffer over all ranks (the gradients). In pieces of 4 MB, a few in
 * flight: MPI's non-blocking all-reduce works on a temporary copy of its buffer, which for the
 * whole gradient would cost as much memory again and page faults at every step.
 */
static inline void comm_mpi_allreduce_sum_f32(Comm *c, float *buf, size_t n) {
    const size_t piece = (size_t)1 << 20;
    enum { IN_FLIGHT = 4 };
    const char *op = "MPI_Allreduce(f32)";
    long long handle = flight_begin(op, (long long)(n * sizeof(float)));
    MPI_Request req[IN_FLIGHT];
    size_t issued = 0, done = 0, count = (n + piece - 1) / piece;
    while (done < count) {
        while (issued < count && issued - done < IN_FLIGHT) {
            size_t i = issued * piece, m = n - i < piece ? n - i : piece;
            mpiCheck(MPI_Iallreduce(MPI_IN_PLACE, buf + i, (int)m, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &req[issued % IN_FLIGHT]));
            issued++;
        }
        comm_mpi_wait(c, &req[done % IN_FLIGHT], op, (long long)(n * sizeof(float)), 0);
        done++;
    }
    flight_end(handle);
}
#endif

static inline int comm_env_set(const char *name) {
    const char *s = getenv(name);
    return s != NULL && s[0] != '\0';
}

// torchrun's agent marks the processes it starts: their ranks are its, even where an MPI launcher's
// variables reach them too (torchrun started by srun --mpi=..., one per node, passes srun's on)
static inline int comm_launched_by_torchrun(void) {
    return comm_env_set("TORCHELASTIC_RUN_ID") && comm_env_set("RANK") && comm_env_set("WORLD_SIZE");
}

// a whole number of seconds in 0..10^6 (torchrun's own checks refuse anything else); -1 if not one
static inline double comm_seconds_value(const char *s) {
    if (s[0] < '0' || s[0] > '9') { return -1.0; }  // no sign, no blank (strtol takes both)
    char *end;
    const long v = strtol(s, &end, 10);
    return (end != s && *end == '\0' && v >= 0 && v <= 1000000) ? (double)v : -1.0;
}

// torchrun's --shutdown-timeout (or --shutdown_timeout) in the command line `cmd`: n bytes of
// NUL-separated arguments, as /proc/<pid>/cmdline has them, with cmd[n] == '\0'; -1 if not there
static inline double comm_cmdline_shutdown_timeout(const char *cmd, size_t n) {
    static const char *const names[] = {"--shutdown-timeout", "--shutdown_timeout"};
    for (size_t i = 0; i < n; i += strlen(cmd + i) + 1) {
        for (int k = 0; k < 2; k++) {
            const size_t len = strlen(names[k]);
            if (strncmp(cmd + i, names[k], len) != 0) { continue; }
            const char *value = cmd[i + len] == '=' ? cmd + i + len + 1 : NULL;
            if (cmd[i + len] == '\0' && i + len + 1 < n) { value = cmd + i + len + 1; }  // the next argument
            const double seconds = value ? comm_seconds_value(value) : -1.0;
            if (seconds >= 0) { return seconds; }
        }
    }
    return -1.0;
}

/*
 * Under torchrun: the seconds it gives its workers between passing a stop signal on and SIGKILL.
 * Its --shutdown-timeout (newer torch), read from the command line of torchrun, the parent of this
 * process; else TORCH_ELASTIC_SHUTDOWN_TIMEOUT (the same torch); else torch's fixed 30. A value
 * torchrun refuses (it stops before starting the ranks) is passed over here.
 */
static inline double comm_torchrun_grace_s(void) {
    char path[64], cmd[16384];
    snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)getppid());
    size_t n = 0;
    FILE *f = fopen(path, "rb");
    if (f) {
        n = fread(cmd, 1, sizeof(cmd) - 1, f);  // a longer line is cut, which is harmless
        fclose(f);
    }
    cmd[n] = '\0';
    double seconds = comm_cmdline_shutdown_timeout(cmd, n);
    const char *env = getenv("TORCH_ELASTIC_SHUTDOWN_TIMEOUT");
    if (seconds < 0 && env) { seconds = comm_seconds_value(env); }
    return seconds >= 0 ? seconds : 30.0;
}

// the ranks torchrun (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE) or SLURM (SLURM_PROCID,
// SLURM_NTASKS, SLURM_LOCALID) set, if either did
static inline void comm_init_from_env(Comm *c) {
    int r, w, l;
    // half of torchrun's pair, where no SLURM launch explains it (scripts export WORLD_SIZE for other
    // tools): never a single process by mistake
    const int slurm = comm_env_set("SLURM_PROCID") && comm_env_set("SLURM_NTASKS");
    if (comm_env_set("RANK") != comm_env_set("WORLD_SIZE") && !slurm) {
        const char *set = comm_env_set("RANK") ? "RANK" : "WORLD_SIZE", *unset = comm_env_set("RANK") ? "WORLD_SIZE" : "RANK";
        llmc_die("%s=%s is set but %s is not: torchrun sets both; set %s too, or unset %s to run one process", set,
                 getenv(set), unset, unset, set);
    }
    if ((r = comm_env_int("RANK")) >= 0 && (w = comm_env_int("WORLD_SIZE")) >= 0) {
        c->launcher = "torchrun";
        c->rank = r;
        c->world_size = w;
        l = comm_env_int("LOCAL_WORLD_SIZE");
        c->local_size = l > 0 ? l : 1;
        l = comm_env_int("LOCAL_RANK");
        c->local_rank = l >= 0 ? l : comm_env_set("LOCAL_WORLD_SIZE") ? r % c->local_size : r;  // torchrun sets both
        if (comm_env_set("LOCAL_WORLD_SIZE") && c->local_rank >= c->local_size) {
            llmc_die("LOCAL_RANK=%d and LOCAL_WORLD_SIZE=%d: the local rank must be below the processes on the node; "
                     "torchrun sets them (unset them to run one process)", c->local_rank, c->local_size);
        }
    } else if ((r = comm_env_int("SLURM_PROCID")) >= 0 && (w = comm_env_int("SLURM_NTASKS")) >= 0) {
        c->launcher = "slurm";
        c->rank = r;
        c->world_size = w;
        l = comm_env_int("SLURM_LOCALID");
        c->local_rank = l >= 0 ? l : 0;
    }
}

// was this process started by an MPI launcher?
static inline int comm_launched_by_mpi(void) {
    return getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMI_SIZE") || getenv("PMIX_RANK") || getenv("PMI_RANK");
}

// the PID of Open MPI's mpirun where it is this process's parent (on mpirun's node), else 0. mpirun
// ends the job 2 s after a SIGINT or SIGTERM of its own (SIGTERM to the ranks 1 s later, SIGKILL 1 s
// after that: too soon for a step and a checkpoint), but passes SIGUSR1 on to every rank
static inline int comm_mpirun_pid(void) {
    if (!getenv("OMPI_COMM_WORLD_SIZE")) { return 0; }
    const int parent = (int)getppid();
    char path[64], name[32] = "";
    snprintf(path, sizeof(path), "/proc/%d/comm", parent);
    FILE *f = fopen(path, "r");
    if (f == NULL) { return 0; }
    if (fgets(name, sizeof(name), f) == NULL) { name[0] = '\0'; }
    fclose(f);
    name[strcspn(name, "\n")] = '\0';
    return !strcmp(name, "mpirun") || !strcmp(name, "mpiexec") || !strcmp(name, "orterun") ? parent : 0;
}

// started by an MPI launcher: MPI's ranks and node-local ranks, where MPI was compiled in; else a
// job of several processes stops here (one process runs on), but for srun --mpi=pmix's, whose ranks
// srun's variables give
static inline void comm_init_mpi(Comm *c, int *argc, char ***argv) {
    c->launcher = "mpirun";
#ifdef USE_MPI
    comm_mpi_init(argc, argv, args_peek_int(*argc, *argv, "pt", c->timeout_s));
    c->mpi = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &c->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &c->world_size);
    MPI_Comm local;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, c->rank, MPI_INFO_NULL, &local);
    MPI_Comm_rank(local, &c->local_rank);
    MPI_Comm_size(local, &c->local_size);
    MPI_Comm_free(&local);
    mpiCheck(MPI_Comm_dup(MPI_COMM_WORLD, &comm_notice.comm));
    comm_notice_post();
    llmc_abort_hook = comm_mpi_abort;
#else
    (void)argc; (void)argv;
    int r, w;
    if (comm_launcher_ranks(&r, &w)) {
        // srun --mpi=pmix (slurm.sbatch's default): srun's own variables give the ranks, as under srun
        // without MPI (the CUDA trainer's ranks meet through the bootstrap; the CPU trainer stops)
        comm_init_from_env(c);
        if (c->world_size > 1) { return; }
    }
    if (w > 1 || r > 0) {
        char world[16] = "several";
        if (w > 0) { snprintf(world, sizeof(world), "%d", w); }
        llmc_die("started by an MPI launcher as rank %d of %s processes, but this binary was built without MPI "
                 "(NO_MPI=1 / NO_MULTI_GPU=1 or no mpicc); rebuild with MPI or run a single process", r, world);
    }
#endif
}

/*
 * Discover the ranks and set up the host collectives. MPI is initialised when an MPI launcher
 * started us and MPI was compiled in. With several ranks and no MPI, the host collectives are
 * left NULL: the caller must provide them (the CUDA trainer bootstraps NCCL) or stop.
 */
static inline void comm_init(Comm *c, int *argc, char ***argv) {
    memset(c, 0, sizeof(*c));
    c->rank = 0;
    c->world_size = 1;
    c->local_rank = 0;
    c->local_size = 1;
    c->launcher = "single";
    c->timeout_s = 300;  // -pt's default, until the flags are parsed
    if (comm_launched_by_mpi() && !comm_launched_by_torchrun()) {
        comm_init_mpi(c, argc, argv);
    } else {
        comm_init_from_env(c);
    }
    if (c->world_size < 1 || c->rank >= c->world_size) {
        const int torchrun = !strcmp(c->launcher, "torchrun");
        llmc_die("%s=%d and %s=%d: the world size must be at least 1 and the rank below it; %s sets them (unset them "
                 "to run one process)", torchrun ? "RANK" : "SLURM_PROCID", c->rank, torchrun ? "WORLD_SIZE" : "SLURM_NTASKS",
                 c->world_size, torchrun ? "torchrun" : "srun");
    }
    llmc_set_rank(c->rank, c->world_size);
    flight_start(c->rank, c->world_size);
    if (c->world_size == 1) {
        c->allreduce_sum_f64 = comm_single_allreduce_f64;
        c->allreduce_max_i32 = comm_single_allreduce_i32;
        c->allgather_u64 = comm_single_allgather_u64;
        c->barrier = comm_single_barrier;
        c->bcast = comm_single_bcast;
    }
#ifdef USE_MPI
    if (c->mpi) {
        c->allreduce_sum_f64 = comm_mpi_allreduce_f64;
        c->allreduce_max_i32 = comm_mpi_allreduce_i32;
        c->allgather_u64 = comm_mpi_allgather_u64;
        c->barrier = comm_mpi_barrier;
        c->bcast = comm_mpi_bcast;
    }
#endif
}

static inline int comm_has_collectives(const Comm *c) { return c->allreduce_sum_f64 != NULL; }

/*
 * The flags of the processes, after comm_init and args_parse: -pt; llm.c's launch flags -pn
 * processes, -pr this process's rank (0 / -1: the launcher's), -pg processes per node (0: the
 * launcher's); -pi, -ps, -pf for the bootstrap. Where a launcher set the ranks, -pn and -pr must
 * say the same (a script written for llm.c passes $SLURM_NTASKS and $SLURM_PROCID) and -pg gives
 * the ranks per node where the launcher does not. Started by hand, the flags are the ranks: rank
 * -pr of -pn, local rank -pr mod -pg.
 */
static inline void comm_apply_args(Comm *c, const TrainArgs *a) {
    const int pn = a->num_processes, pr = a->process_rank, pg = a->gpus_per_node;
    c->timeout_s = a->comm_timeout;
    c->init_method = a->init_method;
    c->init_server = a->init_server;
    c->init_dir = a->init_dir[0] ? a->init_dir : a->output_dir;  // -o is shared by every node anyway
    if (strcmp(c->launcher, "single") != 0) {
        if (pn > 0 && pn != c->world_size) {
            llmc_die("-pn %d, but %s started %d processes: drop -pn, or launch %d", pn, c->launcher, c->world_size, pn);
        }
        if (pr >= 0 && pr != c->rank) {
            llmc_die("-pr %d, but %s made this process rank %d: drop -pr, or pass each process its own rank", pr,
                     c->launcher, c->rank);
        }
        if (pg > 0 && c->local_size > 1 && pg != c->local_size) {
            llmc_die("-pg %d, but %s started %d processes on this node: drop -pg, or make them agree", pg, c->launcher,
                     c->local_size);
        }
        if (pg > 0) { c->local_size = pg; }
        return;
    }
    if (pn <= 1 && pr <= 0) { return; }  // one process
    if (pn <= 0 || pr < 0 || pr >= pn) {
        llmc_die("-pn %d -pr %d: processes started by hand need both, the rank in 0..%d (-pn %d -pr 0 on the first, -pr 1 "
                 "on the next, ...)%s; under mpirun, torchrun or srun leave them out", pn, pr, pn > 0 ? pn - 1 : 0,
                 pn > 0 ? pn : 2, pn > 0 && pr >= pn ? ": -pr is past the last rank" : "");
    }
    c->launcher = "-pn/-pr";
    c->rank = pr;
    c->world_size = pn;
    c->local_rank = pg > 0 ? pr % pg : pr;  // the GPU: local rank mod the GPUs visible
    c->local_size = pg > 0 ? pg : 1;
    c->allreduce_sum_f64 = NULL;  // the single process's identities: the caller provides collectives or stops
    c->allreduce_max_i32 = NULL;
    c->allgather_u64 = NULL;
    c->barrier = NULL;
    c->bcast = NULL;
    llmc_set_rank(c->rank, c->world_size);
    flight_start(c->rank, c->world_size);
}

/*
 * Rank 0's blob (the NCCL id) to every rank, by -pi: mpi (the launcher's MPI), tcp (rank 0's host
 * -ps, else MASTER_ADDR; port LLMC_BOOTSTRAP_PORT, else MASTER_PORT + 1, else llm.c's 12345), fs
 * (files in -pf); auto: mpi where MPI runs, else tcp.
 */
#define BOOTSTRAP_LLMC_PORT 12345
static inline void comm_bootstrap_bcast(Comm *c, void *blob, size_t len, const char *what) {
    const char *m = c->init_method && c->init_method[0] ? c->init_method : "auto";
    if (c->world_size == 1) { return; }  // rank 0 has it
    if (!strcmp(m, "mpi") || (!strcmp(m, "auto") && comm_has_collectives(c))) {
        if (!c->mpi) {
            llmc_die("-pi mpi sends the %s through MPI, which this process does not run (started by %s): launch with "
                     "mpirun, or pass -pi tcp -ps <rank 0's host> or -pi fs -pf <shared dir>", what, c->launcher);
        }
        c->bcast(c, blob, len);
    } else if (!strcmp(m, "fs")) {
        bootstrap_fs_bcast(blob, len, c->rank, c->world_size, c->init_dir, c->timeout_s);
    } else {
        const char *addr = c->init_server && c->init_server[0] ? c->init_server : getenv("MASTER_ADDR");
        if (addr == NULL || addr[0] == '\0') {
            llmc_die("%d processes without MPI need rank 0's host for the %s: -ps <host> (llm.c's -pi tcp), or "
                     "MASTER_ADDR and MASTER_PORT (torchrun sets them), or -pi fs -pf <shared dir>", c->world_size, what);
        }
        const int port = c->init_server && c->init_server[0] ? bootstrap_port_or(BOOTSTRAP_LLMC_PORT) : bootstrap_port_or(0);
        bootstrap_tcp_bcast(blob, len, c->rank, c->world_size, addr, port, c->timeout_s);
    }
}

/*
 * Every rank must have the same value of `h` (a hash of `what`); if not, rank 0 names the ranks
 * that differ and all ranks stop.
 */
static inline void comm_check_same(Comm *c, uint64_t h, const char *what, const char *hint) {
    if (c->world_size == 1) { return; }
    uint64_t *all = (uint64_t *)mallocCheck(c->world_size * sizeof(uint64_t));
    c->allgather_u64(c, h, all);
    char bad[1024] = "";
    int nbad = 0;
    for (int i = 1; i < c->world_size; i++) {
        if (all[i] != all[0]) {
            if (nbad < 16) {
                size_t len = strlen(bad);
                snprintf(bad + len, sizeof(bad) - len, "%s%d", nbad ? ", " : "", i);
            }
            nbad++;
        }
    }
    free(all);
    if (nbad > 0) {
        if (c->rank == 0) {
            llmc_die("rank(s) %s have different %s than rank 0; %s", bad, what, hint);
        }
        c->barrier(c);  // rank 0's abort takes everyone down
        exit(EXIT_FAILURE);
    }
}

/*
 * The CPUs this process may run on (its affinity mask) in *cpus, and how many ranks of the job
 * may run on the very same ones (itself included): those on the same machine (the same kernel
 * boot id; containers on one machine share it) with the same mask. mpirun --bind-to none, a
 * socket binding, or srun without a CPU binding give several ranks one mask; a core binding
 * gives each its own.
 */
#define COMM_MAX_CPUS 8192
static inline int comm_cpu_sharers(Comm *c, int *cpus) {
    cpu_set_t *set = CPU_ALLOC(COMM_MAX_CPUS);
    const size_t size = CPU_ALLOC_SIZE(COMM_MAX_CPUS);
    if (set) { CPU_ZERO_S(size, set); }
    char machine[64] = "";
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (f == NULL || fgets(machine, sizeof(machine), f) == NULL) { llmc_hostname(machine, sizeof(machine), ""); }
    if (f) { fclose(f); }
    uint64_t h = fnv1a64(0, machine, strlen(machine));
    if (set && sched_getaffinity(0, size, set) == 0) {
        *cpus = CPU_COUNT_S(size, set);
        h = fnv1a64(h, set, size);
    } else {  // no mask to read: the machine's CPUs, shared by its ranks
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        *cpus = n > 0 ? (int)n : 1;
    }
    if (set) { CPU_FREE(set); }
    if (c->world_size == 1) { return 1; }
    uint64_t *all = (uint64_t *)mallocCheck(c->world_size * sizeof(uint64_t));
    c->allgather_u64(c, h, all);
    int sharers = 0;
    for (int i = 0; i < c->world_size; i++) { sharers += all[i] == h; }
    free(all);
    return sharers;
}

static inline void comm_finalize(Comm *c) {
#ifdef USE_MPI
    if (c->mpi) {
        // MPI_Finalize would wait forever for a rank that hangs: meet once more under the deadline
        flight_where(llmc_flight.step, 0, "the end of the run");
        c->barrier(c);
        MPI_Cancel(&comm_notice.recv);
        MPI_Wait(&comm_notice.recv, MPI_STATUS_IGNORE);
        MPI_Comm_free(&comm_notice.comm);
        MPI_Finalize();
    }
#endif
    (void)c;
}

#endif  // LLMC_PROCESSES_H
