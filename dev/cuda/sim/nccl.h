/*
 * Host simulator, NCCL: a stand-in for <nccl.h> with the calls llmc/cuda/processes.cuh and llmc/cuda/grad_reduce.cuh
 * make, written from NCCL's documented semantics, so that the trainer's NCCL path (the per-layer
 * reductions, ZeRO-1's layouts, the host collectives, the streams and events around them) runs in
 * the simulator.
 *
 * - Every call is work on its stream (sim/streams.h): it runs when the stream gets there, so the
 *   events around it matter as on a GPU. A group (ncclGroupStart/End) runs as one piece of work.
 * - One rank: the collectives copy (or leave in place) what a sum over one rank gives.
 * - Several ranks need mpirun (a build with MPI): each collective gathers every rank's input with
 *   MPI_Allgather and every rank computes its result from them in rank order, the same arithmetic
 *   on every rank: sums in fp32 for bf16 and fp32 (rounded once to bf16), in fp64 for fp64.
 *   ncclSend/ncclRecv are MPI_Isend/MPI_Irecv, completed at the end of their group.
 * - Checked: every buffer lies inside one device allocation; in-place ReduceScatter and AllGather
 *   use NCCL's in-place offsets (rank * count); Send and Recv only inside a group (as NCCL needs
 *   them to avoid a deadlock); the ranks' counts agree.
 * The communicator forms at once (no ncclInProgress); ncclCommGetAsyncError reports ncclSuccess.
 */
#ifndef SIM_NCCL_H
#define SIM_NCCL_H

#include <stdint.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <vector>

#include "cuda_bf16.h"
#include "cuda_runtime.h"
#ifdef USE_MPI
#include <mpi.h>
#endif

typedef enum {
    ncclSuccess = 0,
    ncclUnhandledCudaError = 1,
    ncclSystemError = 2,
    ncclInternalError = 3,
    ncclInvalidArgument = 4,
    ncclInvalidUsage = 5,
    ncclRemoteError = 6,
    ncclInProgress = 7,
} ncclResult_t;
typedef enum { ncclInt8 = 0, ncclUint8 = 1, ncclInt32 = 2, ncclUint32 = 3, ncclInt64 = 4, ncclUint64 = 5,
               ncclFloat16 = 6, ncclFloat32 = 7, ncclFloat64 = 8, ncclBfloat16 = 9 } ncclDataType_t;
typedef enum { ncclSum = 0, ncclProd = 1, ncclMax = 2, ncclMin = 3, ncclAvg = 4 } ncclRedOp_t;
typedef struct { char internal[128]; } ncclUniqueId;
typedef struct {
    size_t size;
    unsigned int magic, version;
    int blocking;
} ncclConfig_t;
#define NCCL_CONFIG_INITIALIZER {sizeof(ncclConfig_t), 0xcafebeef, 22800, 1}

struct SimNcclComm {
    int rank, nranks, device;
    bool aborted;
#ifdef USE_MPI
    MPI_Comm mpi;
#endif
};
typedef SimNcclComm *ncclComm_t;

namespace sim_nccl {

enum Kind { ALL_REDUCE, REDUCE, BROADCAST, REDUCE_SCATTER, ALL_GATHER, SEND, RECV };
struct Call {
    Kind kind;
    const void *send;
    void *recv;
    size_t count;
    ncclDataType_t type;
    ncclRedOp_t op;
    int root;  // REDUCE, BROADCAST: the root; SEND, RECV: the peer
    ncclComm_t comm;
    cudaStream_t stream;
};
static int group_depth = 0;
static std::vector<Call> grouped;
static char last_error[256] = "";

static inline size_t type_bytes(ncclDataType_t t) {
    switch (t) {
    case ncclInt8: case ncclUint8: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    default: return 8;
    }
}

static inline ncclResult_t fail(const char *what) {
    snprintf(last_error, sizeof(last_error), "%s", what);
    sim::error("NCCL: %s", what);
    return ncclInvalidUsage;
}

// the n inputs' element (each `stride` bytes apart from `all`), reduced in rank order in type A
template <class A, class Load, class Store>
static inline void reduce_as(const char *all, size_t stride, int n, bool max, Load load, Store store) {
    A acc = 0;
    for (int r = 0; r < n; r++) {
        const A v = load(all + (size_t)r * stride);
        acc = r == 0 ? v : max ? (v > acc ? v : acc) : (A)(acc + v);
    }
    store(acc);
}

// element i of n inputs (each `stride` bytes apart in `all`), reduced in rank order into out[i]:
// bf16 and fp32 summed in fp32 (bf16 rounded once at the end), the others in their own type
static inline void reduce_element(const char *all, size_t stride, int n, size_t i, ncclDataType_t t, ncclRedOp_t op,
                                  void *out) {
    const bool max = op == ncclMax;
    switch (t) {
    case ncclBfloat16:
        reduce_as<float>(all, stride, n, max, [i](const char *p) { return __bfloat162float(((const __nv_bfloat16 *)p)[i]); },
                         [out, i](float a) { ((__nv_bfloat16 *)out)[i] = __float2bfloat16(a); });
        break;
    case ncclFloat32:
        reduce_as<float>(all, stride, n, max, [i](const char *p) { return ((const float *)p)[i]; },
                         [out, i](float a) { ((float *)out)[i] = a; });
        break;
    case ncclFloat64:
        reduce_as<double>(all, stride, n, max, [i](const char *p) { return ((const double *)p)[i]; },
                          [out, i](double a) { ((double *)out)[i] = a; });
        break;
    case ncclInt32:
        reduce_as<int32_t>(all, stride, n, max, [i](const char *p) { return ((const int32_t *)p)[i]; },
                           [out, i](int32_t a) { ((int32_t *)out)[i] = a; });
        break;
    case ncclUint64:
        reduce_as<uint64_t>(all, stride, n, max, [i](const char *p) { return ((const uint64_t *)p)[i]; },
                            [out, i](uint64_t a) { ((uint64_t *)out)[i] = a; });
        break;
    default:  // bytes
        reduce_as<uint8_t>(all, stride, n, max, [i](const char *p) { return ((const uint8_t *)p)[i]; },
                           [out, i](uint8_t a) { ((uint8_t *)out)[i] = a; });
    }
}

// every rank's `bytes` of input, in rank order
static inline std::vector<char> gather_inputs(const Call &c, const void *in, size_t bytes) {
    const int W = c.comm->nranks;
    std::vector<char> all((size_t)W * bytes);
    if (W == 1) {
        memcpy(all.data(), in, bytes);
        return all;
    }
#ifdef USE_MPI
    // the ranks must agree on the size: a mismatch is the hang it would be on a GPU, reported
    unsigned long long mine = bytes, lo = 0, hi = 0;
    MPI_Allreduce(&mine, &lo, 1, MPI_UNSIGNED_LONG_LONG, MPI_MIN, c.comm->mpi);
    MPI_Allreduce(&mine, &hi, 1, MPI_UNSIGNED_LONG_LONG, MPI_MAX, c.comm->mpi);
    if (lo != hi) {
        sim::error("NCCL: the ranks called a collective with different sizes (%llu to %llu bytes)", lo, hi);
        fflush(NULL);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Allgather(in, (int)bytes, MPI_BYTE, all.data(), (int)bytes, MPI_BYTE, c.comm->mpi);
#endif
    return all;
}

// one collective, on every rank at the same point of its stream
static inline void run_collective(const Call &c) {
    const int W = c.comm->nranks, me = c.comm->rank;
    const size_t esz = type_bytes(c.type), n = c.count, bytes = n * esz;
    switch (c.kind) {
    case ALL_REDUCE: case REDUCE: {
        std::vector<char> all = gather_inputs(c, c.send, bytes);
        if (c.kind == REDUCE && me != c.root) { break; }
        for (size_t i = 0; i < n; i++) { reduce_element(all.data(), bytes, W, i, c.type, c.op, c.recv); }
        break;
    }
    case BROADCAST: {
        std::vector<char> all = gather_inputs(c, c.send, bytes);
        memcpy(c.recv, all.data() + (size_t)c.root * bytes, bytes);
        break;
    }
    case REDUCE_SCATTER: {  // send holds W blocks of n; rank r receives the sum of block r
        std::vector<char> all = gather_inputs(c, c.send, (size_t)W * bytes);
        std::vector<char> mine(bytes);
        const char *block = all.data() + (size_t)me * bytes;
        for (size_t i = 0; i < n; i++) { reduce_element(block, (size_t)W * bytes, W, i, c.type, c.op, mine.data()); }
        memcpy(c.recv, mine.data(), bytes);
        break;
    }
    case ALL_GATHER: {
        std::vector<char> all = gather_inputs(c, c.send, bytes);
        memcpy(c.recv, all.data(), (size_t)W * bytes);
        break;
    }
    default: break;
    }
}

// a group's calls (or one call): the collectives in order, then the point-to-point transfers
static inline void run_calls(const std::vector<Call> &calls) {
    std::vector<const Call *> p2p;
    for (const Call &c : calls) {
        if (c.comm->aborted) { return; }
        if (c.kind == SEND || c.kind == RECV) { p2p.push_back(&c); } else { run_collective(c); }
    }
    if (p2p.empty()) { return; }
    // one rank: each send to itself pairs with its receive from itself, in order
    if (p2p[0]->comm->nranks == 1) {
        std::vector<const Call *> sends, recvs;
        for (const Call *c : p2p) { (c->kind == SEND ? sends : recvs).push_back(c); }
        if (sends.size() != recvs.size()) { fail("a send to self without its receive, or the reverse"); return; }
        for (size_t i = 0; i < sends.size(); i++) {
            if (sends[i]->count != recvs[i]->count) { fail("a send and its receive differ in count"); return; }
            memmove(recvs[i]->recv, sends[i]->send, sends[i]->count * type_bytes(sends[i]->type));
        }
        return;
    }
#ifdef USE_MPI
    std::vector<MPI_Request> req(p2p.size());
    for (size_t i = 0; i < p2p.size(); i++) {
        const Call *c = p2p[i];
        const int bytes = (int)(c->count * type_bytes(c->type));
        if (c->kind == SEND) {
            MPI_Isend(c->send, bytes, MPI_BYTE, c->root, 0, c->comm->mpi, &req[i]);
        } else {
            MPI_Irecv(c->recv, bytes, MPI_BYTE, c->root, 0, c->comm->mpi, &req[i]);
        }
    }
    MPI_Waitall((int)req.size(), req.data(), MPI_STATUSES_IGNORE);
#endif
}

static inline bool in_device(const void *p, size_t bytes) {
    return p != NULL && sim::is_device(p) && (bytes == 0 || sim::is_device((const char *)p + bytes - 1));
}

static inline ncclResult_t issue(Call c) {
    if (c.comm == NULL || c.comm->aborted) { return fail("a call on a missing or aborted communicator"); }
    const int W = c.comm->nranks, me = c.comm->rank;
    const size_t bytes = c.count * type_bytes(c.type);
    const size_t send_bytes = c.kind == REDUCE_SCATTER ? (size_t)W * bytes : bytes;
    const size_t recv_bytes = c.kind == ALL_GATHER ? (size_t)W * bytes : bytes;
    if (c.kind != RECV && !in_device(c.send, send_bytes)) { return fail("a send buffer outside the device allocations"); }
    if (c.kind != SEND && !in_device(c.recv, recv_bytes)) { return fail("a receive buffer outside the device allocations"); }
    if (c.kind == REDUCE_SCATTER && (const char *)c.send <= (const char *)c.recv &&
        (const char *)c.recv < (const char *)c.send + send_bytes && (const char *)c.recv != (const char *)c.send + me * bytes) {
        return fail("ncclReduceScatter in place needs recvbuff = sendbuff + rank * recvcount");
    }
    if (c.kind == ALL_GATHER && (const char *)c.recv <= (const char *)c.send &&
        (const char *)c.send < (const char *)c.recv + recv_bytes && (const char *)c.send != (const char *)c.recv + me * bytes) {
        return fail("ncclAllGather in place needs sendbuff = recvbuff + rank * sendcount");
    }
    if ((c.kind == REDUCE || c.kind == BROADCAST || c.kind == SEND || c.kind == RECV) && (c.root < 0 || c.root >= W)) {
        return fail("a root or peer outside the communicator");
    }
    if ((c.kind == SEND || c.kind == RECV) && group_depth == 0) {
        return fail("ncclSend/ncclRecv outside a group (a deadlock between two ranks that both send first)");
    }
    if (c.op != ncclSum && c.op != ncclMax) { return fail("only ncclSum and ncclMax are simulated"); }
    if (group_depth > 0) {
        if (!grouped.empty() && grouped[0].stream != c.stream) { return fail("a group's calls on different streams"); }
        grouped.push_back(c);
    } else {
        std::vector<Call> one(1, c);
        sim::enqueue(c.stream, [one]() { run_calls(one); });
    }
    return ncclSuccess;
}

}  // namespace sim_nccl

static inline const char *ncclGetErrorString(ncclResult_t r) {
    switch (r) {
    case ncclSuccess: return "no error";
    case ncclInvalidArgument: return "invalid argument";
    case ncclInvalidUsage: return "invalid usage";
    case ncclInProgress: return "operation in progress";
    default: return "NCCL error (simulated)";
    }
}
static inline const char *ncclGetLastError(ncclComm_t) { return sim_nccl::last_error; }

// a different id on every call, as NCCL's (rank 0's address and a random magic): a rank that did
// not receive rank 0's id fails ncclCommInitRank below
static inline ncclResult_t ncclGetUniqueId(ncclUniqueId *id) {
    static unsigned long long calls = 0;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    memset(id, 0, sizeof(*id));
    snprintf(id->internal, sizeof(id->internal), "simulated nccl %d %llu %lld.%09ld", (int)getpid(), ++calls,
             (long long)ts.tv_sec, ts.tv_nsec);
    return ncclSuccess;
}

static inline ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank, ncclConfig_t *) {
    if (nranks < 1 || rank < 0 || rank >= nranks) { return sim_nccl::fail("ncclCommInitRank: bad rank or size"); }
    SimNcclComm *c = new SimNcclComm();
    c->rank = rank;
    c->nranks = nranks;
    c->device = sim::current_device;
    c->aborted = false;
    if (nranks > 1) {
#ifdef USE_MPI
        int up = 0, size = 0;
        MPI_Initialized(&up);
        if (up) { MPI_Comm_size(MPI_COMM_WORLD, &size); }
        if (!up || size != nranks) {
            delete c;
            snprintf(sim_nccl::last_error, sizeof(sim_nccl::last_error), "the simulator's NCCL runs %d ranks only under "
                     "mpirun -np %d", nranks, nranks);
            return ncclInvalidUsage;
        }
        MPI_Comm_dup(MPI_COMM_WORLD, &c->mpi);
        std::vector<ncclUniqueId> ids((size_t)nranks);  // NCCL's ranks meet only with the same id
        MPI_Allgather(&id, sizeof(id), MPI_BYTE, ids.data(), sizeof(id), MPI_BYTE, c->mpi);
        for (int r = 0; r < nranks; r++) {
            if (memcmp(&ids[(size_t)r], &ids[0], sizeof(id)) != 0) {
                MPI_Comm_free(&c->mpi);
                delete c;
                snprintf(sim_nccl::last_error, sizeof(sim_nccl::last_error), "rank %d's unique id differs from "
                         "rank 0's: the ranks would never meet (the real NCCL waits for them forever)", r);
                return ncclInvalidUsage;
            }
        }
#else
        (void)id;
        delete c;
        snprintf(sim_nccl::last_error, sizeof(sim_nccl::last_error), "the simulator's NCCL runs several ranks only in a "
                 "build with MPI, under mpirun");
        return ncclInvalidUsage;
#endif
    }
    *comm = c;
    return ncclSuccess;
}
static inline ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank) {
    return ncclCommInitRankConfig(comm, nranks, id, rank, NULL);
}
static inline ncclResult_t ncclCommGetAsyncError(ncclComm_t, ncclResult_t *state) { *state = ncclSuccess; return ncclSuccess; }
static inline ncclResult_t ncclCommCuDevice(ncclComm_t comm, int *device) { *device = comm->device; return ncclSuccess; }
static inline ncclResult_t ncclCommFinalize(ncclComm_t) { sim::drain(); return ncclSuccess; }
static inline ncclResult_t ncclCommAbort(ncclComm_t comm) {
    if (comm) { comm->aborted = true; }
    return ncclSuccess;
}
static inline ncclResult_t ncclCommDestroy(ncclComm_t comm) {
    sim::drain();
#ifdef USE_MPI
    if (comm->nranks > 1 && !comm->aborted) { MPI_Comm_free(&comm->mpi); }
#endif
    delete comm;
    return ncclSuccess;
}

static inline ncclResult_t ncclGroupStart(void) { sim_nccl::group_depth++; return ncclSuccess; }
static inline ncclResult_t ncclGroupEnd(void) {
    if (sim_nccl::group_depth == 0) { return sim_nccl::fail("ncclGroupEnd without ncclGroupStart"); }
    if (--sim_nccl::group_depth == 0 && !sim_nccl::grouped.empty()) {
        std::vector<sim_nccl::Call> calls;
        calls.swap(sim_nccl::grouped);
        sim::enqueue(calls[0].stream, [calls]() { sim_nccl::run_calls(calls); });
    }
    return ncclSuccess;
}

static inline ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count, ncclDataType_t type, ncclRedOp_t op,
                                         ncclComm_t comm, cudaStream_t stream) {
    return sim_nccl::issue({sim_nccl::ALL_REDUCE, send, recv, count, type, op, 0, comm, stream});
}
static inline ncclResult_t ncclReduce(const void *send, void *recv, size_t count, ncclDataType_t type, ncclRedOp_t op,
                                      int root, ncclComm_t comm, cudaStream_t stream) {
    return sim_nccl::issue({sim_nccl::REDUCE, send, recv, count, type, op, root, comm, stream});
}
static inline ncclResult_t ncclBroadcast(const void *send, void *recv, size_t count, ncclDataType_t type, int root,
                                         ncclComm_t comm, cudaStream_t stream) {
    return sim_nccl::issue({sim_nccl::BROADCAST, send, recv, count, type, ncclSum, root, comm, stream});
}
static inline ncclResult_t ncclReduceScatter(const void *send, void *recv, size_t recvcount, ncclDataType_t type,
                                             ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
    return sim_nccl::issue({sim_nccl::REDUCE_SCATTER, send, recv, recvcount, type, op, 0, comm, stream});
}
static inline ncclResult_t ncclAllGather(const void *send, void *recv, size_t sendcount, ncclDataType_t type, ncclComm_t comm,
                                         cudaStream_t stream) {
    return sim_nccl::issue({sim_nccl::ALL_GATHER, send, recv, sendcount, type, ncclSum, 0, comm, stream});
}
static inline ncclResult_t ncclSend(const void *send, size_t count, ncclDataType_t type, int peer, ncclComm_t comm,
                                    cudaStream_t stream) {
    return sim_nccl::issue({sim_nccl::SEND, send, NULL, count, type, ncclSum, peer, comm, stream});
}
static inline ncclResult_t ncclRecv(void *recv, size_t count, ncclDataType_t type, int peer, ncclComm_t comm,
                                    cudaStream_t stream) {
    return sim_nccl::issue({sim_nccl::RECV, NULL, recv, count, type, ncclSum, peer, comm, stream});
}

#endif  // SIM_NCCL_H
