/*
 * Host simulator, part 1: a stand-in for <cuda_runtime.h> so that the CUDA layers of llmc/ (their
 * unchanged kernel source, rewritten only at the <<<>>> launches by sim_rewrite.py) and the
 * workbenches of dev/cuda run on the CPU. Used by `make -C dev/cuda sim`; see dev/cuda/README.md.
 *
 * Execution model: a launch runs its blocks one after another; within a block every CUDA thread
 * is a fiber (ucontext) that runs until it reaches a barrier or a warp collective or exits.
 *   __syncthreads()        completes when every thread of the block that has not exited arrived
 *   __shfl_xor_sync, __syncwarp  complete when all 32 lanes arrived with the same operation;
 *                          an exited lane, a partial warp or a mask other than 0xffffffff is an error
 *   deadlock (no fiber can run) is an error
 *   __shared__ variables are static (one block at a time), filled with 0xff (NaN in fp32 and
 *   bf16) at the start of every block, as is the dynamic shared memory buffer, so reading
 *   unwritten words shows up in the results
 * Fibers and blocks run in forward, reverse or random order (SIM_ORDER=forward|reverse|random):
 * results that depend on the interleaving (a missing barrier) differ between the orders.
 * Launch checks: block size 1..1024 threads, grid limits, dynamic shared memory above 48 KiB only
 * after cudaFuncSetAttribute(MaxDynamicSharedMemorySize), at most 227 KiB.
 * Device memory is host memory (aligned to 256 bytes, filled with 0xff), so AddressSanitizer
 * catches out-of-bounds accesses; fiber switches are announced to it.
 */
#ifndef SIM_CUDA_RUNTIME_H
#define SIM_CUDA_RUNTIME_H

#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>
#include <functional>
#include <map>
#include <vector>
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#define SIM_ASAN 1
#else
#define SIM_ASAN 0
#endif

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static
#define __restrict__

struct dim3 {
    unsigned int x, y, z;
    dim3(unsigned int x_ = 1, unsigned int y_ = 1, unsigned int z_ = 1) : x(x_), y(y_), z(z_) {}
};
typedef dim3 uint3;
struct alignas(16) int4 {
    int x, y, z, w;
};

static dim3 threadIdx, blockIdx, blockDim, gridDim;  // set by the scheduler before a fiber runs

static inline int min(int a, int b) { return a < b ? a : b; }
static inline int max(int a, int b) { return a > b ? a : b; }
static inline unsigned int __float_as_uint(float f) { unsigned int u; memcpy(&u, &f, 4); return u; }
static inline float __uint_as_float(unsigned int u) { float f; memcpy(&f, &u, 4); return f; }
// glibc declares __expf / __logf without exporting them: map the device intrinsics by macro
#define __expf(x) expf(x)
#define __logf(x) logf(x)
static inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
static inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }

// ----------------------------------------------------------------------------
// runtime API subset

typedef enum {
    cudaSuccess = 0,
    cudaErrorInvalidValue = 1,
    cudaErrorInvalidConfiguration = 9,
} cudaError_t;
typedef struct SimStream *cudaStream_t;
typedef struct SimEvent *cudaEvent_t;
enum cudaMemcpyKind { cudaMemcpyHostToHost, cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost, cudaMemcpyDeviceToDevice, cudaMemcpyDefault };
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize = 8 };
typedef enum { CUDA_R_32F = 0, CUDA_R_16BF = 14 } cudaDataType_t;
typedef cudaDataType_t cudaDataType;
#define cudaEventDisableTiming 2

struct cudaDeviceProp {
    char name[256];
    int major, minor, multiProcessorCount;
    size_t totalGlobalMem;
};

namespace sim {
static cudaError_t last_error = cudaSuccess;
static std::map<const void *, int> max_dynamic_smem;  // kernel -> cudaFuncAttributeMaxDynamicSharedMemorySize
static long errors = 0;
static inline void error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static inline void error(const char *fmt, ...) {
    if (errors < 20) {
        char msg[512];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        printf("  SIM ERROR [block (%u,%u,%u) thread %u]: %s\n", blockIdx.x, blockIdx.y, blockIdx.z,
               threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z), msg);
    }
    errors++;
}
}  // namespace sim

static inline const char *cudaGetErrorName(cudaError_t e) {
    return e == cudaSuccess ? "cudaSuccess" : e == cudaErrorInvalidValue ? "cudaErrorInvalidValue" : "cudaErrorInvalidConfiguration";
}
static inline const char *cudaGetErrorString(cudaError_t e) { return cudaGetErrorName(e); }
static inline cudaError_t cudaGetLastError(void) {
    cudaError_t e = sim::last_error;
    sim::last_error = cudaSuccess;
    return e;
}
static inline cudaError_t cudaGetDeviceCount(int *n) { *n = 1; return cudaSuccess; }
static inline cudaError_t cudaSetDevice(int) { return cudaSuccess; }
static inline cudaError_t cudaGetDeviceProperties(cudaDeviceProp *p, int) {
    memset(p, 0, sizeof(*p));
    snprintf(p->name, sizeof(p->name), "host simulator");
    p->major = 9;
    p->minor = 0;
    p->multiProcessorCount = 1;
    p->totalGlobalMem = (size_t)16 << 30;
    return cudaSuccess;
}
static inline cudaError_t cudaDeviceSynchronize(void) { return cudaSuccess; }
static inline cudaError_t cudaMalloc(void **p, size_t bytes) {
    size_t rounded = (bytes + 255) / 256 * 256;
    *p = aligned_alloc(256, rounded > 0 ? rounded : 256);
    if (*p == NULL) { return cudaErrorInvalidValue; }
    memset(*p, 0xff, rounded > 0 ? rounded : 256);  // device memory is not zeroed: make that visible
    return cudaSuccess;
}
static inline cudaError_t cudaMallocHost(void **p, size_t bytes) { return cudaMalloc(p, bytes); }
static inline cudaError_t cudaFree(void *p) { free(p); return cudaSuccess; }
static inline cudaError_t cudaFreeHost(void *p) { free(p); return cudaSuccess; }
static inline cudaError_t cudaMemcpy(void *d, const void *s, size_t n, cudaMemcpyKind) { memmove(d, s, n); return cudaSuccess; }
static inline cudaError_t cudaMemcpyAsync(void *d, const void *s, size_t n, cudaMemcpyKind k, cudaStream_t = 0) {
    return cudaMemcpy(d, s, n, k);
}
static inline cudaError_t cudaMemset(void *d, int v, size_t n) { memset(d, v, n); return cudaSuccess; }
static inline cudaError_t cudaMemsetAsync(void *d, int v, size_t n, cudaStream_t = 0) { return cudaMemset(d, v, n); }
static inline cudaError_t cudaEventCreate(cudaEvent_t *e) { *e = (cudaEvent_t)malloc(1); return cudaSuccess; }
static inline cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned int) { return cudaEventCreate(e); }
static inline cudaError_t cudaEventDestroy(cudaEvent_t e) { free(e); return cudaSuccess; }
static inline cudaError_t cudaEventRecord(cudaEvent_t, cudaStream_t = 0) { return cudaSuccess; }
static inline cudaError_t cudaEventSynchronize(cudaEvent_t) { return cudaSuccess; }
static inline cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t, cudaEvent_t) { *ms = 1.0f; return cudaSuccess; }
template <class K>
static inline cudaError_t cudaFuncSetAttribute(K *kernel, cudaFuncAttribute attr, int value) {
    if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize || value < 0 || value > 227 * 1024) { return cudaErrorInvalidValue; }
    sim::max_dynamic_smem[(const void *)kernel] = value;
    return cudaSuccess;
}

// ----------------------------------------------------------------------------
// the fiber scheduler

namespace sim {

enum State { RUNNABLE, AT_BARRIER, AT_WARP, DONE };
enum WarpOp { OP_NONE, OP_SHFL_XOR, OP_SYNCWARP };
static const size_t STACK_BYTES = 256 * 1024;

struct Fiber {
    ucontext_t ctx;
    int tid;
    State state;
    void *fake_stack;
};
struct Warp {
    int op[32];
    int arg[32];
    float in[32], out[32];
};

static std::vector<Fiber> fibers;
static std::vector<char *> stacks;
static std::vector<Warp> warps;
static Fiber *cur = NULL;
static ucontext_t sched_ctx;
static void *sched_fake_stack = NULL;
static const void *sched_stack_bottom = NULL;
static size_t sched_stack_size = 0;
static std::function<void()> body;
static unsigned char *dynamic_smem = NULL;
static size_t dynamic_smem_bytes = 0;
static uint64_t order_state = 0x9e3779b97f4a7c15ull;
static uint64_t block_serial = 0;  // counts blocks run, from 1

static inline int order_mode(void) {
    static int mode = -1;
    if (mode < 0) {
        const char *o = getenv("SIM_ORDER");
        mode = (o == NULL || strcmp(o, "forward") == 0) ? 0 : strcmp(o, "reverse") == 0 ? 1 : 2;
    }
    return mode;
}
static inline uint64_t order_next(void) {
    order_state ^= order_state << 13;
    order_state ^= order_state >> 7;
    order_state ^= order_state << 17;
    return order_state;
}

static inline void set_thread_index(int tid) {
    threadIdx.x = tid % blockDim.x;
    threadIdx.y = (tid / blockDim.x) % blockDim.y;
    threadIdx.z = tid / (blockDim.x * blockDim.y);
}

// fiber side: give control back to the scheduler
static inline void yield(void) {
#if SIM_ASAN
    __sanitizer_start_switch_fiber(&cur->fake_stack, sched_stack_bottom, sched_stack_size);
#endif
    swapcontext(&cur->ctx, &sched_ctx);
#if SIM_ASAN
    __sanitizer_finish_switch_fiber(cur->fake_stack, NULL, NULL);
#endif
}

static void fiber_entry(void) {
#if SIM_ASAN
    __sanitizer_finish_switch_fiber(NULL, &sched_stack_bottom, &sched_stack_size);
#endif
    body();
    cur->state = DONE;
#if SIM_ASAN
    __sanitizer_start_switch_fiber(NULL, sched_stack_bottom, sched_stack_size);  // this stack is finished
#endif
    // returning switches to uc_link, the scheduler
}

// scheduler side: run one fiber until it yields or finishes
static inline void resume(Fiber *f) {
    cur = f;
    set_thread_index(f->tid);
#if SIM_ASAN
    __sanitizer_start_switch_fiber(&sched_fake_stack, stacks[f->tid], STACK_BYTES);
#endif
    swapcontext(&sched_ctx, &f->ctx);
#if SIM_ASAN
    __sanitizer_finish_switch_fiber(sched_fake_stack, NULL, NULL);
#endif
    cur = NULL;
}

// complete the warp collectives whose 32 lanes have all arrived; returns whether any completed
static inline bool complete_warps(int nthreads) {
    bool progress = false;
    for (int w = 0; w * 32 < nthreads; w++) {
        const int lanes = nthreads - w * 32 < 32 ? nthreads - w * 32 : 32;
        int arrived = 0, done = 0;
        for (int l = 0; l < lanes; l++) {
            arrived += fibers[w * 32 + l].state == AT_WARP;
            done += fibers[w * 32 + l].state == DONE;
        }
        if (arrived == 0) { continue; }
        Warp &wp = warps[w];
        if (arrived == 32) {
            for (int l = 1; l < 32; l++) {
                if (wp.op[l] != wp.op[0] || wp.arg[l] != wp.arg[0]) {
                    error("warp %d: lanes reached different collectives (lane %d: op %d arg %d, lane 0: op %d arg %d)", w, l,
                          wp.op[l], wp.arg[l], wp.op[0], wp.arg[0]);
                    break;
                }
            }
            for (int l = 0; l < 32; l++) {
                wp.out[l] = wp.op[l] == OP_SHFL_XOR ? wp.in[l ^ (wp.arg[l] & 31)] : wp.in[l];
                fibers[w * 32 + l].state = RUNNABLE;
            }
            progress = true;
        } else if (arrived + done == lanes) {
            // nobody else will come: exited lanes or a partial warp in a full-mask collective
            error("warp %d: full-mask warp collective reached by %d lanes (%d exited, warp of %d lanes)", w, arrived, done, lanes);
            for (int l = 0; l < lanes; l++) {
                Fiber &f = fibers[w * 32 + l];
                if (f.state == AT_WARP) { wp.out[l] = wp.in[l]; f.state = RUNNABLE; }
            }
            progress = true;
        }
    }
    return progress;
}

// the fiber stacks live for the whole process; released at exit so LeakSanitizer stays quiet
struct StackRelease {
    ~StackRelease() {
        for (char *p : stacks) { free(p); }
        stacks.clear();
    }
};
static StackRelease stack_release;

static inline void run_block(int nthreads) {
    if ((int)fibers.size() < nthreads) {
        fibers.resize(nthreads);
        while ((int)stacks.size() < nthreads) { stacks.push_back((char *)malloc(STACK_BYTES)); }
        warps.resize((nthreads + 31) / 32);
    }
    for (int t = 0; t < nthreads; t++) {
        Fiber &f = fibers[t];
        f.tid = t;
        f.state = RUNNABLE;
        f.fake_stack = NULL;
        getcontext(&f.ctx);
        f.ctx.uc_stack.ss_sp = stacks[t];
        f.ctx.uc_stack.ss_size = STACK_BYTES;
        f.ctx.uc_link = &sched_ctx;
        makecontext(&f.ctx, fiber_entry, 0);
    }
    if (dynamic_smem_bytes > 0) { memset(dynamic_smem, 0xff, dynamic_smem_bytes); }
    block_serial++;
    std::vector<int> order(nthreads);
    const int nwarps = (nthreads + 31) / 32;
    std::vector<char> warp_runs(nwarps, 1);
    // random order: each warp of the block gets a speed (runs in a pass with probability 1, 1/2
    // or 1/16), so warps drift many barrier-free steps apart; a missing __syncthreads then lets a
    // fast warp overwrite shared memory a slow one has not read yet
    std::vector<unsigned> speed(nwarps, 0);
    if (order_mode() == 2) {
        for (int w = 0; w < nwarps; w++) { speed[w] = (unsigned)(order_next() % 3); }
    }
    for (;;) {
        for (int i = 0; i < nthreads; i++) { order[i] = order_mode() == 1 ? nthreads - 1 - i : i; }
        if (order_mode() == 2) {
            for (int i = nthreads - 1; i > 0; i--) { std::swap(order[i], order[(int)(order_next() % (uint64_t)(i + 1))]); }
            for (int w = 0; w < nwarps; w++) {
                const uint64_t r = order_next();
                warp_runs[w] = speed[w] == 0 ? 1 : speed[w] == 1 ? (r & 1) : (r & 15) == 0;
            }
        }
        bool ran = false;
        for (int pass = 0; pass < 2 && !ran; pass++) {  // a second pass without skipping if nothing ran
            for (int i = 0; i < nthreads; i++) {
                Fiber &f = fibers[order[i]];
                if (f.state == RUNNABLE && (pass == 1 || warp_runs[f.tid / 32])) { resume(&f); ran = true; }
            }
        }
        int live = 0, at_barrier = 0;
        for (int t = 0; t < nthreads; t++) {
            live += fibers[t].state != DONE;
            at_barrier += fibers[t].state == AT_BARRIER;
        }
        if (live == 0) { break; }
        bool progress = complete_warps(nthreads);
        if (at_barrier == live) {
            for (int t = 0; t < nthreads; t++) {
                if (fibers[t].state == AT_BARRIER) { fibers[t].state = RUNNABLE; }
            }
            progress = true;
        }
        if (!ran && !progress) {
            error("deadlock: %d threads live, %d at __syncthreads, the rest at warp collectives", live, at_barrier);
            for (int t = 0; t < nthreads; t++) {
                if (fibers[t].state != DONE) { fibers[t].state = RUNNABLE; }
            }
        }
    }
}

template <class... KArgs, class... Args>
static void launch(dim3 grid, dim3 block, size_t smem, cudaStream_t, void (*kernel)(KArgs...), Args... args) {
    const long nthreads = (long)block.x * block.y * block.z;
    if (nthreads < 1 || nthreads > 1024 || grid.x < 1 || grid.y < 1 || grid.z < 1 || grid.y > 65535 || grid.z > 65535 ||
        grid.x > 2147483647u) {
        last_error = cudaErrorInvalidConfiguration;
        return;
    }
    if (smem > 48 * 1024) {
        auto it = max_dynamic_smem.find((const void *)kernel);
        if (it == max_dynamic_smem.end() || (size_t)it->second < smem) {
            last_error = cudaErrorInvalidValue;  // what a GPU answers without the opt-in
            return;
        }
    }
    std::vector<unsigned char> smem_buf(smem > 0 ? smem : 1);
    dynamic_smem = smem_buf.data();
    dynamic_smem_bytes = smem;
    gridDim = grid;
    blockDim = block;
    body = [=]() { kernel(args...); };
    const long blocks = (long)grid.x * grid.y * grid.z;
    for (long i = 0; i < blocks; i++) {
        long b = order_mode() == 1 ? blocks - 1 - i : i;
        blockIdx.x = (unsigned int)(b % grid.x);
        blockIdx.y = (unsigned int)((b / grid.x) % grid.y);
        blockIdx.z = (unsigned int)(b / ((long)grid.x * grid.y));
        run_block((int)nthreads);
    }
    body = nullptr;
    dynamic_smem = NULL;
    dynamic_smem_bytes = 0;
}

}  // namespace sim

// the rewritten launch sites: kernel<<<grid, block, smem, stream>>>(args) -> sim_launch(grid, block, smem, stream, kernel, args)
#define sim_launch sim::launch

static inline void *sim_dynamic_smem(void) { return sim::dynamic_smem; }

// a static __shared__ array is filled with 0xff once per block, by the first thread that declares it
static inline void sim_shared_poison(void *array, size_t bytes) {
    static std::map<void *, uint64_t> poisoned_in;
    uint64_t &block = poisoned_in[array];
    if (block != sim::block_serial) {
        memset(array, 0xff, bytes);
        block = sim::block_serial;
    }
}

static inline void __syncthreads(void) {
    sim::cur->state = sim::AT_BARRIER;
    sim::yield();
}

static inline void sim_warp_collective(int op, int arg, float in, float *out) {
    const int tid = sim::cur->tid, w = tid / 32, l = tid % 32;
    sim::warps[w].op[l] = op;
    sim::warps[w].arg[l] = arg;
    sim::warps[w].in[l] = in;
    sim::cur->state = sim::AT_WARP;
    sim::yield();
    if (out) { *out = sim::warps[w].out[l]; }
}

static inline void __syncwarp(unsigned int mask = 0xffffffffu) {
    if (mask != 0xffffffffu) { sim::error("__syncwarp with a partial mask %#x is not simulated", mask); }
    sim_warp_collective(sim::OP_SYNCWARP, 0, 0.0f, NULL);
}

static inline float __shfl_xor_sync(unsigned int mask, float v, int lane_mask) {
    if (mask != 0xffffffffu) { sim::error("__shfl_xor_sync with a partial mask %#x is not simulated", mask); }
    float out;
    sim_warp_collective(sim::OP_SHFL_XOR, lane_mask, v, &out);
    return out;
}

// streaming loads and stores: plain, with the 16-byte alignment a vector access needs
static inline int4 __ldcs(const int4 *p) {
    if ((uintptr_t)p % 16 != 0) { sim::error("__ldcs: address %p not 16-byte aligned", (const void *)p); }
    return *p;
}
static inline void __stcs(int4 *p, int4 v) {
    if ((uintptr_t)p % 16 != 0) { sim::error("__stcs: address %p not 16-byte aligned", (void *)p); }
    *p = v;
}

#endif  // SIM_CUDA_RUNTIME_H
