/*
 * The CUDA trainer's processes: the GPU of a rank, the NCCL communicator, the host collectives
 * over NCCL (launches without MPI), and the watchdog that turns a hang into an error.
 *
 * - GPU: rank r uses device (local rank mod visible GPUs). Several ranks on one GPU are refused
 *   for NCCL (it does not support it: "may lead to hangs") with a message that names `-pb mpi`,
 *   the host-staged backend of llmc/cuda/grad_reduce.cuh that allows it. Under MPI the check allgathers a
 *   hash of every rank's PCI bus id before NCCL starts; without MPI a rank whose local rank is
 *   not below the GPU count stops, and a communicator that does not form within -pt seconds
 *   (the other symptom) stops with the same hint.
 * - Bootstrap: rank 0 makes the NCCL unique id; it travels by MPI_Bcast under mpirun, else by
 *   the bootstrap of llmc/processes.h (-pi: TCP to MASTER_ADDR or -ps, or files in -pf) for
 *   torchrun, SLURM without MPI and processes started by hand.
 * - Non-blocking communicator (ncclConfig_t.blocking = 0): no NCCL call ever blocks the host.
 *   A call may return ncclInProgress before its work is on the stream, so after every call
 *   nccl_wait_issued() polls ncclCommGetAsyncError until the work is enqueued; only then are
 *   events recorded behind it.
 * - Watchdog: while several ranks run, every host wait for GPU work goes through
 *   gpu_wait_event(), which polls the event and the communicator's asynchronous error; after
 *   -pt seconds, or on an NCCL error, it aborts the communicator and stops with an error that
 *   says another rank probably died. llmc_abort_hook aborts the communicator on any error
 *   (then calls MPI_Abort when MPI runs), so one rank's error never leaves the others waiting.
 * - Host collectives (loss sums, flags, hashes, broadcasts) over NCCL are installed into Comm
 *   when no MPI is there to provide them; they run on the communicator's stream, the stream of
 *   every NCCL operation of this process, so all NCCL work is issued in one order on every rank.
 *   That stream has the device's highest priority, so that a layer's reduction starts as soon
 *   as its event allows instead of queueing behind the backward's blocks.
 * - Stream-order debug mode, LLMC_DEBUG_STREAMS=1: before each reduction or gather of gradients
 *   or parameters, the NCCL stream flips the sign bits of that data, waits 2 ms (a host function)
 *   and flips them back. With correct events nothing else reads or writes the data meanwhile, so
 *   a run stays bitwise equal to one without the mode (also on a 1-rank communicator, where the
 *   collectives change nothing); a missing wait, on either stream, shows as a different run.
 * Everything NCCL is compiled only with MULTI_GPU (the Makefile sets it when it finds NCCL).
 */
#ifndef LLMC_CUDA_PROCESSES_CUH
#define LLMC_CUDA_PROCESSES_CUH

#include "cuda_common.cuh"
#include "../processes.h"
#ifdef MULTI_GPU
#include <nccl.h>
#endif

// how the gradients of several processes are reduced (-pb; llmc/cuda/grad_reduce.cuh)
typedef enum { GRAD_REDUCE_NONE = 0, GRAD_REDUCE_NCCL = 1, GRAD_REDUCE_MPI = 2 } GradReduceKind;

// ----------------------------------------------------------------------------
// the GPU of this rank

// What keeps the CUDA runtime from the GPU when cudaGetDeviceCount says cudaErrorInsufficientDriver:
// no driver at all, or one older than the runtime this binary was built with; into buf (one line).
// Returns the driver's CUDA version (cudaDriverGetVersion's number; 0: no driver).
static inline int gpu_driver_problem(char *buf, size_t size) {
    int driver = 0, runtime = 0;
    (void)cudaDriverGetVersion(&driver);
    (void)cudaRuntimeGetVersion(&runtime);
    if (driver == 0) {
        snprintf(buf, size, "no NVIDIA driver is installed (libcuda.so.1 not found)");
    } else {
        snprintf(buf, size, "the NVIDIA driver here supports CUDA %d.%d, older than the CUDA %d.%d this train_gpt2cu was "
                 "built with", driver / 1000, driver % 1000 / 10, runtime / 1000, runtime % 1000 / 10);
    }
    return driver;
}

// the same as an error line that says what to do
static inline void gpu_driver_die(void) {
    char problem[160];
    const int driver = gpu_driver_problem(problem, sizeof(problem));
    if (driver == 0) { llmc_die("%s; install it, or train on the CPU with ./train_gpt2 (same flags)", problem); }
    llmc_die("%s; update the driver, or build with a CUDA toolkit of %d.%d at most (make train_gpt2cu NVCC=<its nvcc>)",
             problem, driver / 1000, driver % 1000 / 10);
}

/*
 * Selects the GPU of this rank and checks that it can run the trainer: a GPU is visible, compute
 * capability 8.0 or newer (bf16 tensor cores), and this binary has machine code for it.
 * `probe_kernel` is any __global__ function of the binary: cudaFuncGetAttributes on it fails with
 * cudaErrorNoKernelImageForDevice (or InvalidDeviceFunction) when no image matches the GPU.
 * Returns the device index.
 */
static inline int gpu_select_device(const Comm *c, const void *probe_kernel, const char *built_archs) {
    int count = 0;
    cudaError_t err = cudaGetDeviceCount(&count);
    if (err == cudaErrorInsufficientDriver) { gpu_driver_die(); }
    if (err != cudaSuccess || count == 0) {
        llmc_die("no CUDA GPU is visible (%s); train on the CPU with ./train_gpt2 (same flags), or check the driver and "
                 "CUDA_VISIBLE_DEVICES",
                 err != cudaSuccess ? cudaGetErrorString(err) : "0 devices");
    }
    const int device = c->local_rank % count;
    cudaCheck(cudaSetDevice(device));
    cudaDeviceProp prop;
    cudaCheck(cudaGetDeviceProperties(&prop, device));
    if (prop.major < 8) {
        llmc_die("GPU %d (%s) has compute capability %d.%d; train_gpt2cu needs 8.0 or newer (bf16 tensor cores: A100, "
                 "H100, H200, ...); on this machine use ./train_gpt2 (CPU)", device, prop.name, prop.major, prop.minor);
    }
    cudaFuncAttributes attr;
    err = cudaFuncGetAttributes(&attr, probe_kernel);
    if (err == cudaErrorNoKernelImageForDevice || err == cudaErrorInvalidDeviceFunction) {
        (void)cudaGetLastError();
        llmc_die("this train_gpt2cu has no machine code for GPU %d (%s, sm_%d%d); it was built for CUDA_ARCHS=\"%s\"; "
                 "rebuild with: make train_gpt2cu CUDA_ARCHS=\"%d%d%s\"", device, prop.name, prop.major, prop.minor,
                 built_archs, prop.major, prop.minor, prop.major == 9 && prop.minor == 0 ? "a" : "");
    }
    cudaCheck(err);
    return device;
}

// ----------------------------------------------------------------------------
// NCCL

// the staging buffer of the host collectives over NCCL, on the device and pinned on the host (1 MiB,
// or a u64 per rank); the memory plan counts it
static inline size_t nccl_staging_bytes(int world_size) {
    const size_t least = (size_t)world_size * sizeof(uint64_t);
    return least > ((size_t)1 << 20) ? least : (size_t)1 << 20;
}

#ifdef MULTI_GPU

typedef struct {
    ncclComm_t comm;
    cudaStream_t stream;   // every NCCL operation of this process runs here
    int rank, world_size;
    int timeout_s;         // -pt
    void *dev_buf;         // staging for the host collectives
    void *host_buf;        // pinned
    size_t buf_bytes;
    cudaEvent_t done;      // recorded behind each host collective
    int debug_streams;     // LLMC_DEBUG_STREAMS=1 (the top comment)
    Comm *host_comm;       // the Comm whose collectives run over this context (nccl_take_host_collectives)
    Comm host_saved;       // ... and what it had before, given back when the context goes
} NcclContext;

static NcclContext *nccl_active = NULL;  // for the abort hook and the watchdog
static void (*nccl_prev_abort_hook)(void) = NULL;

static inline void nccl_check(ncclResult_t r, const char *call, const char *file, int line) {
    if (r != ncclSuccess && r != ncclInProgress) {
        const char *last = nccl_active ? ncclGetLastError(nccl_active->comm) : "";
        llmc_die("NCCL error %s in %s%s%s [%s:%d]; with several ranks, the first error printed is usually the cause",
                 ncclGetErrorString(r), call, last && last[0] ? ": " : "", last ? last : "", file, line);
    }
}
#define ncclCheck(call) nccl_check((call), #call, __FILE__, __LINE__)

// the abort hook: take the communicator down (ranks blocked in a collective with us then fail
// instead of waiting), then whatever was installed before (MPI_Abort)
static void nccl_abort_hook(void) {
    NcclContext *ctx = nccl_active;
    nccl_active = NULL;  // an error inside the abort must not recurse
    if (ctx && ctx->comm) { ncclCommAbort(ctx->comm); ctx->comm = NULL; }
    if (nccl_prev_abort_hook) { nccl_prev_abort_hook(); }
}

// after an NCCL call: wait (bounded by -pt) until its work is on the stream, or fail
static inline void nccl_wait_issued(NcclContext *ctx, const char *what) {
    WaitClock clock = wait_clock_start(ctx->timeout_s);
    long spins = 0;
    for (;;) {
        ncclResult_t state;
        ncclCheck(ncclCommGetAsyncError(ctx->comm, &state));
        if (state == ncclSuccess) { return; }
        if (state != ncclInProgress) {
            llmc_die("NCCL failed during %s: %s (%s); another rank probably died or failed first", what,
                     ncclGetErrorString(state), ncclGetLastError(ctx->comm));
        }
        if (wait_clock_expired(&clock)) {
            llmc_die("NCCL could not start %s within %d s (-pt); another rank probably died or hangs", what, ctx->timeout_s);
        }
        llmc_poll_pause(&spins);
    }
}

// ncclGroupEnd, then wait until the group's work is enqueued
static inline void nccl_group_end(NcclContext *ctx, const char *what) {
    ncclCheck(ncclGroupEnd());
    nccl_wait_issued(ctx, what);
}

// the NCCL stream: non-blocking, at the device's highest priority (a numerically lower value)
static inline void nccl_stream_create(cudaStream_t *stream) {
    int least = 0, greatest = 0;
    cudaCheck(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    cudaCheck(cudaStreamCreateWithPriority(stream, cudaStreamNonBlocking, greatest));
}

// ---- the stream-order debug mode

// x (n bf16 values) with every sign bit flipped; flipping twice restores it bit for bit
static __global__ void sign_flip_kernel(floatX *x, size_t n) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { x[i] = __ushort_as_bfloat16((unsigned short)(__bfloat16_as_ushort(x[i]) ^ 0x8000u)); }
}

static inline void sign_flip(floatX *x, size_t n, cudaStream_t stream) {
    if (n == 0) { return; }
    sign_flip_kernel<<<grid_for(n, 256), 256, 0, stream>>>(x, n);
    cudaCheckLaunch();
}

static void nccl_debug_pause(void *) { usleep(2000); }

/*
 * LLMC_DEBUG_STREAMS=1: on the NCCL stream, before the collective that reduces or gathers the n
 * ranges base[off[i]] .. + len[i]: flip their signs, wait 2 ms, flip them back. Anything that
 * reads or writes them meanwhile without waiting for the NCCL stream sees or leaves wrong values.
 */
static inline void nccl_debug_scramble(NcclContext *ctx, floatX *base, const size_t *off, const size_t *len, int n) {
    if (!ctx->debug_streams) { return; }
    for (int i = 0; i < n; i++) { sign_flip(base + off[i], len[i], ctx->stream); }
    cudaCheck(cudaLaunchHostFunc(ctx->stream, nccl_debug_pause, NULL));
    for (int i = 0; i < n; i++) { sign_flip(base + off[i], len[i], ctx->stream); }
}

#endif  // MULTI_GPU

/*
 * Host wait for an event, the one way the trainer waits for the GPU. With an NCCL communicator
 * up it is the watchdog: it polls the event and NCCL's asynchronous error, and after -pt seconds
 * (or on an error) aborts the communicator and stops. Without, a plain cudaEventSynchronize.
 */
static inline void gpu_wait_event(cudaEvent_t ev, const char *what) {
#ifdef MULTI_GPU
    NcclContext *ctx = nccl_active;
    if (ctx != NULL) {
        WaitClock clock = wait_clock_start(ctx->timeout_s);
        long spins = 0;
        flight_wait_begin(what, -1);  // a stop signal meanwhile gets its note (flight_record.h)
        for (;;) {
            cudaError_t e = cudaEventQuery(ev);
            if (e == cudaSuccess) { flight_wait_end(); return; }
            if (e != cudaErrorNotReady) { cudaCheck(e); }
            flight_wait_poll();
            ncclResult_t state;
            ncclCheck(ncclCommGetAsyncError(ctx->comm, &state));
            if (state != ncclSuccess && state != ncclInProgress) {
                llmc_die("NCCL failed while waiting for %s: %s (%s); another rank probably died or failed first", what,
                         ncclGetErrorString(state), ncclGetLastError(ctx->comm));
            }
            if (wait_clock_expired(&clock)) {
                llmc_die("waited %d s (-pt) for %s on the GPU; a collective did not finish: another rank probably died "
                         "or hangs (raise -pt if a step legitimately takes that long)", ctx->timeout_s, what);
            }
            llmc_poll_pause(&spins);
        }
    }
#endif
    (void)what;
    cudaCheck(cudaEventSynchronize(ev));
}

#ifdef MULTI_GPU

// ---- host collectives over NCCL (Comm's function pointers), staged through small buffers

static inline void nccl_host_stage_wait(NcclContext *ctx, const char *what) {
    cudaCheck(cudaEventRecord(ctx->done, ctx->stream));
    gpu_wait_event(ctx->done, what);
}

// a host array all-reduced through the device staging buffer, in chunks of its size
static void nccl_host_allreduce(Comm *c, void *buf, int n, size_t elem, ncclDataType_t type, ncclRedOp_t op) {
    NcclContext *ctx = (NcclContext *)c->impl;
    const size_t chunk = ctx->buf_bytes / elem;
    char *p = (char *)buf;
    for (size_t i = 0; i < (size_t)n; i += chunk) {
        const size_t m = (size_t)n - i < chunk ? (size_t)n - i : chunk;
        long long handle = flight_begin("ncclAllReduce(host)", (long long)(m * elem));
        memcpy(ctx->host_buf, p + i * elem, m * elem);
        cudaCheck(cudaMemcpyAsync(ctx->dev_buf, ctx->host_buf, m * elem, cudaMemcpyHostToDevice, ctx->stream));
        ncclCheck(ncclAllReduce(ctx->dev_buf, ctx->dev_buf, m, type, op, ctx->comm, ctx->stream));
        nccl_wait_issued(ctx, "a host all-reduce");
        cudaCheck(cudaMemcpyAsync(ctx->host_buf, ctx->dev_buf, m * elem, cudaMemcpyDeviceToHost, ctx->stream));
        nccl_host_stage_wait(ctx, "a host all-reduce");
        flight_end(handle);
        memcpy(p + i * elem, ctx->host_buf, m * elem);
    }
}

static void nccl_comm_allreduce_f64(Comm *c, double *buf, int n) {
    nccl_host_allreduce(c, buf, n, sizeof(double), ncclFloat64, ncclSum);
}

static void nccl_comm_allreduce_max_i32(Comm *c, int *buf, int n) {
    nccl_host_allreduce(c, buf, n, sizeof(int), ncclInt32, ncclMax);
}

static void nccl_comm_allgather_u64(Comm *c, uint64_t value, uint64_t *all) {
    NcclContext *ctx = (NcclContext *)c->impl;
    const size_t W = (size_t)ctx->world_size;
    uint64_t *dev = (uint64_t *)ctx->dev_buf;
    long long handle = flight_begin("ncclAllGather(host)", (long long)(W * sizeof(uint64_t)));
    memcpy(ctx->host_buf, &value, sizeof(value));
    cudaCheck(cudaMemcpyAsync(dev + ctx->rank, ctx->host_buf, sizeof(value), cudaMemcpyHostToDevice, ctx->stream));
    ncclCheck(ncclAllGather(dev + ctx->rank, dev, 1, ncclUint64, ctx->comm, ctx->stream));
    nccl_wait_issued(ctx, "a host all-gather");
    cudaCheck(cudaMemcpyAsync(ctx->host_buf, dev, W * sizeof(uint64_t), cudaMemcpyDeviceToHost, ctx->stream));
    nccl_host_stage_wait(ctx, "a host all-gather");
    flight_end(handle);
    memcpy(all, ctx->host_buf, W * sizeof(uint64_t));
}

static void nccl_comm_barrier(Comm *c) {
    int token = 0;
    nccl_comm_allreduce_max_i32(c, &token, 1);
}

static void nccl_comm_bcast(Comm *c, void *buf, size_t bytes) {
    NcclContext *ctx = (NcclContext *)c->impl;
    char *p = (char *)buf;
    for (size_t i = 0; i < bytes; i += ctx->buf_bytes) {
        size_t m = bytes - i < ctx->buf_bytes ? bytes - i : ctx->buf_bytes;
        long long handle = flight_begin("ncclBroadcast(host)", (long long)m);
        if (ctx->rank == 0) {
            memcpy(ctx->host_buf, p + i, m);
            cudaCheck(cudaMemcpyAsync(ctx->dev_buf, ctx->host_buf, m, cudaMemcpyHostToDevice, ctx->stream));
        }
        ncclCheck(ncclBroadcast(ctx->dev_buf, ctx->dev_buf, m, ncclUint8, 0, ctx->comm, ctx->stream));
        nccl_wait_issued(ctx, "a host broadcast");
        cudaCheck(cudaMemcpyAsync(ctx->host_buf, ctx->dev_buf, m, cudaMemcpyDeviceToHost, ctx->stream));
        nccl_host_stage_wait(ctx, "a host broadcast");
        flight_end(handle);
        memcpy(p + i, ctx->host_buf, m);
    }
}

#endif  // MULTI_GPU

// ----------------------------------------------------------------------------
// several ranks on one GPU

// 64-bit hash of the PCI bus id of a device (the same GPU seen from any process)
static inline uint64_t gpu_bus_hash(int device) {
    char bus[64];
    memset(bus, 0, sizeof(bus));
    cudaCheck(cudaDeviceGetPCIBusId(bus, (int)sizeof(bus) - 1, device));
    return fnv1a64(0, bus, strlen(bus));
}

/*
 * NCCL needs one GPU per rank. Under MPI, allgather the bus-id hashes and stop if two ranks share
 * one; without MPI (no collective exists before NCCL), a local rank at or above the number of
 * visible GPUs is the sure sign. Every rank calls this before the NCCL communicator is made.
 */
static inline void gpu_check_not_shared(Comm *c, int device) {
    if (c->world_size == 1) { return; }
    int count = 0;
    cudaCheck(cudaGetDeviceCount(&count));
    if (!comm_has_collectives(c)) {
        if (c->local_rank >= count) {
            llmc_die("local rank %d but only %d GPU(s) are visible on this node: NCCL needs one GPU per process; start "
                     "at most %d process(es) per node, or run several ranks on one GPU under mpirun with -pb mpi",
                     c->local_rank, count, count);
        }
        return;
    }
    uint64_t *all = (uint64_t *)mallocCheck((size_t)c->world_size * sizeof(uint64_t));
    c->allgather_u64(c, gpu_bus_hash(device), all);
    int a = -1, b = -1;
    for (int i = 0; i < c->world_size && a < 0; i++) {
        for (int j = i + 1; j < c->world_size; j++) {
            if (all[i] == all[j]) { a = i; b = j; break; }
        }
    }
    free(all);
    if (a >= 0) {
        if (c->rank == 0) {
            llmc_die("ranks %d and %d use the same GPU (%d GPU(s) visible per node): NCCL needs one GPU per process; "
                     "start at most one process per GPU, or use the host-staged MPI backend, which allows sharing: "
                     "mpirun ... ./train_gpt2cu -pb mpi ...", a, b, count);
        }
        c->barrier(c);  // rank 0's abort takes everyone down
        exit(EXIT_FAILURE);
    }
}

// LLMC_FORCE_NCCL (a test hook): 1 for the NCCL path on one process; 2 that, and the host's collectives
// over NCCL as when no MPI launched the ranks (torchrun, srun), also under mpirun; any other value is
// a mistake, in every build
static inline int process_group_forced_nccl(void) {
    return env_digit("LLMC_FORCE_NCCL", 2, "expected 0, 1 or 2 (a test hook; unset it)", 0);
}

#ifdef MULTI_GPU

/*
 * Creates the communicator of all ranks (NCCL id by MPI or TCP), installs the abort hook, and the
 * host collectives when Comm has none (no MPI; or LLMC_FORCE_NCCL=2). Call after gpu_check_not_shared,
 * on every rank.
 */
// NCCL's unique id, made by rank 0 and given to every rank: through the launcher's MPI, or without
// it through the bootstrap -pi chooses (llmc/processes.h)
static inline ncclUniqueId nccl_share_unique_id(Comm *c) {
    ncclUniqueId id;
    memset(&id, 0, sizeof(id));
    if (c->rank == 0) { ncclCheck(ncclGetUniqueId(&id)); }
    comm_bootstrap_bcast(c, &id, sizeof(id), "NCCL id");
    return id;
}

// LLMC_DEBUG_STREAMS: 1 checks the order of the NCCL and compute streams
static inline int nccl_debug_streams_flag(void) {
    return env_digit("LLMC_DEBUG_STREAMS", 1, "expected 0 or 1 (1 checks the order of the NCCL and compute streams)", 0);
}

static inline void nccl_die_no_comm(int world_size, ncclResult_t r, ncclComm_t comm) {
    llmc_die("NCCL could not create the communicator of %d ranks: %s (%s); if two ranks share a GPU, use -pb mpi",
             world_size, ncclGetErrorString(r), ncclGetLastError(comm));
}

// the communicator, created non-blocking and waited for within -pt (a rank that died or two ranks
// on one GPU would otherwise hang every rank here)
static inline void nccl_comm_form(NcclContext *ctx, const Comm *c, ncclUniqueId id, int timeout_s) {
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclResult_t r = ncclCommInitRankConfig(&ctx->comm, c->world_size, id, c->rank, &config);
    if (r != ncclSuccess && r != ncclInProgress) { nccl_die_no_comm(c->world_size, r, NULL); }
    WaitClock clock = wait_clock_start(timeout_s);  // counts only time this process ran (utils.h)
    long spins = 0;
    for (;;) {
        ncclResult_t state;
        ncclCheck(ncclCommGetAsyncError(ctx->comm, &state));
        if (state == ncclSuccess) { return; }
        if (state != ncclInProgress) { nccl_die_no_comm(c->world_size, state, ctx->comm); }
        if (wait_clock_expired(&clock)) {
            ncclCommAbort(ctx->comm);
            llmc_die("the NCCL communicator of %d ranks did not form within %d s (-pt): a rank died, or two ranks share "
                     "a GPU (NCCL hangs then; use -pb mpi under mpirun to share one)", c->world_size, timeout_s);
        }
        llmc_poll_pause(&spins);
    }
}

// without MPI the host's collectives run over NCCL too, and the check that no two ranks share a
// GPU, which could not run before the communicator, runs now
static inline void nccl_take_host_collectives(NcclContext *ctx, Comm *c) {
    ctx->host_comm = c;
    ctx->host_saved = *c;
    c->impl = ctx;
    c->allreduce_sum_f64 = nccl_comm_allreduce_f64;
    c->allreduce_max_i32 = nccl_comm_allreduce_max_i32;
    c->allgather_u64 = nccl_comm_allgather_u64;
    c->barrier = nccl_comm_barrier;
    c->bcast = nccl_comm_bcast;
    int device = 0;
    ncclCheck(ncclCommCuDevice(ctx->comm, &device));
    gpu_check_not_shared(c, device);
}

static inline void nccl_init(NcclContext *ctx, Comm *c, int timeout_s) {
    memset(ctx, 0, sizeof(*ctx));
    ctx->rank = c->rank;
    ctx->world_size = c->world_size;
    ctx->timeout_s = timeout_s;
    const ncclUniqueId id = nccl_share_unique_id(c);
    ctx->debug_streams = nccl_debug_streams_flag();
    nccl_stream_create(&ctx->stream);
    nccl_comm_form(ctx, c, id, timeout_s);
    ctx->buf_bytes = nccl_staging_bytes(c->world_size);
    cudaCheck(cudaMalloc(&ctx->dev_buf, ctx->buf_bytes));
    cudaCheck(cudaMallocHost(&ctx->host_buf, ctx->buf_bytes));
    cudaCheck(cudaEventCreateWithFlags(&ctx->done, cudaEventDisableTiming));
    nccl_active = ctx;
    nccl_prev_abort_hook = llmc_abort_hook;
    llmc_abort_hook = nccl_abort_hook;
    if (!comm_has_collectives(c) || process_group_forced_nccl() == 2) { nccl_take_host_collectives(ctx, c); }
}

static inline void nccl_free(NcclContext *ctx) {
    if (ctx->comm == NULL) { return; }
    if (ctx->host_comm) {  // its collectives are no longer this context's (a barrier after would use freed buffers)
        Comm *c = ctx->host_comm;
        c->impl = ctx->host_saved.impl;
        c->allreduce_sum_f64 = ctx->host_saved.allreduce_sum_f64;
        c->allreduce_max_i32 = ctx->host_saved.allreduce_max_i32;
        c->allgather_u64 = ctx->host_saved.allgather_u64;
        c->barrier = ctx->host_saved.barrier;
        c->bcast = ctx->host_saved.bcast;
        ctx->host_comm = NULL;
    }
    cudaCheck(cudaStreamSynchronize(ctx->stream));
    nccl_active = NULL;
    llmc_abort_hook = nccl_prev_abort_hook;
    ncclCommFinalize(ctx->comm);
    ncclResult_t state = ncclInProgress;
    WaitClock clock = wait_clock_start(ctx->timeout_s);
    while (state == ncclInProgress && !wait_clock_expired(&clock)) {
        if (ncclCommGetAsyncError(ctx->comm, &state) != ncclSuccess) { break; }
        if (state == ncclInProgress) { usleep(100); }
    }
    ncclCommDestroy(ctx->comm);
    ctx->comm = NULL;
    cudaCheck(cudaFree(ctx->dev_buf));
    cudaCheck(cudaFreeHost(ctx->host_buf));
    cudaCheck(cudaEventDestroy(ctx->done));
    cudaCheck(cudaStreamDestroy(ctx->stream));
}

#endif  // MULTI_GPU

/*
 * The process group of a launch (as torch.distributed's): how the gradients are reduced (-pb)
 * and, for NCCL, the communicator. One process: none (LLMC_FORCE_NCCL=1 makes a 1-rank NCCL
 * communicator, the NCCL path on a one-GPU machine); several: -pb nccl or -pb mpi (host-staged,
 * needs mpirun). The one place that knows which of NCCL and MPI this build has: a launch it cannot
 * serve stops with a one-line error that says what to use or rebuild.
 */
typedef struct {
    GradReduceKind kind;
#ifdef MULTI_GPU
    NcclContext nccl;
#endif
} ProcessGroup;

// -pb mpi: the host-staged reduction over the MPI that launched these processes
static inline GradReduceKind process_group_mpi(const Comm *c) {
#ifdef USE_MPI
    if (!c->mpi) {
        llmc_die("-pb mpi reduces gradients with MPI, but %s started these %d processes without it; use mpirun -np %d "
                 "./train_gpt2cu ... -pb mpi, or -pb nccl", c->launcher, c->world_size, c->world_size);
    }
    return GRAD_REDUCE_MPI;
#else
    (void)c;
    llmc_die("-pb mpi: this train_gpt2cu was built without MPI (NO_MULTI_GPU=1, or no mpicc at build time); install "
             "OpenMPI and rebuild, or use -pb nccl");
#endif
}

// -pb nccl: this rank's GPU must be its own, then the communicator
static inline GradReduceKind process_group_nccl_open(ProcessGroup *pg, Comm *c, int timeout_s, int device) {
#ifdef MULTI_GPU
    gpu_check_not_shared(c, device);
    nccl_init(&pg->nccl, c, timeout_s);
    return GRAD_REDUCE_NCCL;
#else
    (void)pg; (void)timeout_s; (void)device;
    if (c->mpi) {
        llmc_die("this train_gpt2cu was built without NCCL; under mpirun use the host-staged backend -pb mpi, or "
                 "rebuild with NCCL (make train_gpt2cu NCCL_HOME=<dir with include/nccl.h and lib/libnccl.so>)");
    }
#ifdef USE_MPI
    llmc_die("%s started %d processes, but this train_gpt2cu was built without NCCL: several processes need mpirun "
             "and -pb mpi, or a rebuild with NCCL (make train_gpt2cu NCCL_HOME=...)", c->launcher, c->world_size);
#else
    llmc_die("%s started %d processes, but this train_gpt2cu was built without NCCL and MPI (NO_MULTI_GPU=1, or "
             "neither found at build time), so it runs one process only; rebuild with NCCL for several GPUs",
             c->launcher, c->world_size);
#endif
#endif
}

// backend: -pb (nccl or mpi); timeout_s: -pt; device: this rank's GPU (gpu_select_device)
static inline void process_group_init(ProcessGroup *pg, Comm *c, const char *backend, int timeout_s, int device) {
    memset(pg, 0, sizeof(*pg));
    const int forced = process_group_forced_nccl();
    if (c->world_size == 1) {
#ifdef MULTI_GPU
        if (forced && strcmp(backend, "mpi")) {
            nccl_init(&pg->nccl, c, timeout_s);
            pg->kind = GRAD_REDUCE_NCCL;
        }
#endif
        (void)forced;
        return;
    }
    pg->kind = !strcmp(backend, "mpi") ? process_group_mpi(c) : process_group_nccl_open(pg, c, timeout_s, device);
}

// the NCCL communicator of a group of kind NCCL (what grad_reduce_init takes), else NULL
static inline void *process_group_nccl(ProcessGroup *pg) {
#ifdef MULTI_GPU
    if (pg->kind == GRAD_REDUCE_NCCL) { return &pg->nccl; }
#endif
    (void)pg;
    return NULL;
}

// the banner's words for the reduction: "none (one process)", "mpi (host-staged)", "nccl (stream priority -5)"
static inline void process_group_describe(const ProcessGroup *pg, char *out, size_t n) {
    snprintf(out, n, "%s", pg->kind == GRAD_REDUCE_MPI ? "mpi (host-staged)" : "none (one process)");
#ifdef MULTI_GPU
    if (pg->kind == GRAD_REDUCE_NCCL) {  // its stream's priority: the device's highest (nccl_init)
        int priority = 0;
        cudaCheck(cudaStreamGetPriority(pg->nccl.stream, &priority));
        snprintf(out, n, "nccl (stream priority %d%s)", priority, pg->nccl.debug_streams ? ", LLMC_DEBUG_STREAMS=1" : "");
    }
#endif
}

static inline void process_group_free(ProcessGroup *pg) {
#ifdef MULTI_GPU
    if (pg->kind == GRAD_REDUCE_NCCL) { nccl_free(&pg->nccl); }
#endif
    pg->kind = GRAD_REDUCE_NONE;
}

#endif  // LLMC_CUDA_PROCESSES_CUH
