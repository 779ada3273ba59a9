/*
 * Processes: rank discovery and the host-side collectives both trainers use.
 *
 * Rank, world size and local rank come, in this order, from
 *   1. MPI, when a launcher that MPI understands started us (mpirun/mpiexec: OMPI_COMM_WORLD_*,
 *      PMI_RANK/PMI_SIZE, PMIX_RANK) and the binary was built with MPI (USE_MPI);
 *   2. torchrun's RANK, WORLD_SIZE, LOCAL_RANK (MASTER_ADDR/MASTER_PORT for the NCCL bootstrap);
 *   3. SLURM's SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID;
 *   4. else a single process.
 * The GPU of a rank is its local rank.
 *
 * Host collectives (small buffers: losses, flags, hashes) go through function pointers so that
 * the CPU trainer uses MPI and the CUDA trainer can use MPI or NCCL. Large gradient reductions
 * are the trainers' own business (MPI_Allreduce on the CPU, NCCL on the GPU).
 */
#ifndef LLMC_COMM_H
#define LLMC_COMM_H

#include "utils.h"
#ifdef USE_MPI
#include <mpi.h>
#endif

typedef struct Comm {
    int rank;                 // 0 .. world_size-1
    int world_size;
    int local_rank;           // rank on this node, = GPU index
    int local_size;           // ranks on this node (MPI, torchrun's LOCAL_WORLD_SIZE; else 1): they share its RAM
    const char *launcher;     // "single", "mpirun", "torchrun", "slurm"
    int mpi;                  // 1 if we initialised MPI
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
    if (*end != '\0' || v < 0 || v > 1000000) { llmc_die("environment variable %s=%s is not a valid number", name, s); }
    return (int)v;
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
static void comm_mpi_allreduce_f64(Comm *c, double *buf, int n) {
    (void)c;
    mpiCheck(MPI_Allreduce(MPI_IN_PLACE, buf, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
}
static void comm_mpi_allreduce_i32(Comm *c, int *buf, int n) {
    (void)c;
    mpiCheck(MPI_Allreduce(MPI_IN_PLACE, buf, n, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
}
static void comm_mpi_allgather_u64(Comm *c, uint64_t v, uint64_t *all) {
    (void)c;
    unsigned long long mine = v;
    mpiCheck(MPI_Allgather(&mine, 1, MPI_UNSIGNED_LONG_LONG, all, 1, MPI_UNSIGNED_LONG_LONG, MPI_COMM_WORLD));
}
static void comm_mpi_barrier(Comm *c) { (void)c; mpiCheck(MPI_Barrier(MPI_COMM_WORLD)); }
static void comm_mpi_bcast(Comm *c, void *buf, size_t bytes) {
    (void)c;
    char *p = (char *)buf;
    while (bytes > 0) {  // MPI counts are int
        int n = bytes > (1u << 30) ? (1 << 30) : (int)bytes;
        mpiCheck(MPI_Bcast(p, n, MPI_BYTE, 0, MPI_COMM_WORLD));
        p += n;
        bytes -= (size_t)n;
    }
}

// in-place sum of a large float buffer over all ranks, in chunks that fit MPI's int counts
static inline void comm_mpi_allreduce_sum_f32(float *buf, size_t n) {
    const size_t chunk = (size_t)1 << 28;
    for (size_t i = 0; i < n; i += chunk) {
        int m = (int)(n - i < chunk ? n - i : chunk);
        mpiCheck(MPI_Allreduce(MPI_IN_PLACE, buf + i, m, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD));
    }
}
#endif

// was this process started by an MPI launcher?
static inline int comm_launched_by_mpi(void) {
    return getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMI_SIZE") || getenv("PMIX_RANK") || getenv("PMI_RANK");
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
    int r, w, l;
    if (comm_launched_by_mpi()) {
        c->launcher = "mpirun";
#ifdef USE_MPI
        mpiCheck(MPI_Init(argc, argv));
        c->mpi = 1;
        MPI_Comm_rank(MPI_COMM_WORLD, &c->rank);
        MPI_Comm_size(MPI_COMM_WORLD, &c->world_size);
        MPI_Comm local;
        MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, c->rank, MPI_INFO_NULL, &local);
        MPI_Comm_rank(local, &c->local_rank);
        MPI_Comm_size(local, &c->local_size);
        MPI_Comm_free(&local);
        llmc_abort_hook = comm_mpi_abort;
#else
        (void)argc; (void)argv;
        w = comm_env_int("OMPI_COMM_WORLD_SIZE");
        if (w < 0) { w = comm_env_int("PMI_SIZE"); }
        if (w > 1) {
            llmc_die("started by an MPI launcher with %d processes, but this binary was built without MPI "
                     "(NO_MPI=1 / NO_MULTI_GPU=1 or no mpicc); rebuild with MPI or run a single process", w);
        }
#endif
    } else if ((r = comm_env_int("RANK")) >= 0 && (w = comm_env_int("WORLD_SIZE")) >= 0) {
        c->launcher = "torchrun";
        c->rank = r;
        c->world_size = w;
        l = comm_env_int("LOCAL_RANK");
        c->local_rank = l >= 0 ? l : r;
        l = comm_env_int("LOCAL_WORLD_SIZE");
        c->local_size = l > 0 ? l : 1;
    } else if ((r = comm_env_int("SLURM_PROCID")) >= 0 && (w = comm_env_int("SLURM_NTASKS")) >= 0) {
        c->launcher = "slurm";
        c->rank = r;
        c->world_size = w;
        l = comm_env_int("SLURM_LOCALID");
        c->local_rank = l >= 0 ? l : 0;
    }
    if (c->world_size < 1 || c->rank >= c->world_size) {
        llmc_die("%s gave rank %d of world size %d; the rank must be below the world size", c->launcher, c->rank,
                 c->world_size);
    }
    llmc_set_rank(c->rank, c->world_size);
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

static inline void comm_finalize(Comm *c) {
#ifdef USE_MPI
    if (c->mpi) { MPI_Finalize(); }
#endif
    (void)c;
}

#endif  // LLMC_COMM_H
