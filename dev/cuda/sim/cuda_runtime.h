/*
 * Host simulator, the CUDA runtime: a stand-in for <cuda_runtime.h> so that the CUDA layers of
 * llmc/ (their unchanged kernel source, rewritten only at the <<<>>> launches by sim_rewrite.py),
 * the workbenches of dev/cuda and the trainer run on the CPU, on the fibers of engine.h. See
 * dev/cuda/README.md, "Host simulator".
 *
 * - Streams and events (sim/streams.h): stream 0 runs its work at once; a created stream queues its
 *   work until the host waits for it, and the queued work of several streams then interleaves, so a
 *   missing event wait between two streams shows in the results. Copies follow CUDA's rules: from
 *   pageable host memory the source is read when the copy is issued, into pageable host memory the
 *   call returns once the copy is done; to and from pinned memory (cudaMallocHost) they are queued.
 *   SIM_DEVICES=<n> (default 1) simulates n devices, each with its own PCI bus id (several ranks
 *   with NCCL need one each). SIM_DRIVER_VERSION=<n> a driver older than the runtime (13000).
 * - Launch checks: block size 1..1024 threads, grid limits, dynamic shared memory above 48 KiB only
 *   after cudaFuncSetAttribute(MaxDynamicSharedMemorySize), at most 227 KiB (an H100's opt-in).
 * - Device memory is host memory (aligned to 256 bytes, filled with 0xff: NaN in fp32 and bf16), so
 *   AddressSanitizer catches out-of-bounds accesses; every allocation is recorded (ptx.h checks
 *   that the global accesses of the PTX primitives land inside one). The device has
 *   SIM_DEVICE_MEMORY bytes (default 16 GiB): cudaMemGetInfo reports them less what is allocated,
 *   and cudaMalloc past them fails as a GPU's does. Device (cudaMalloc) and pinned (cudaMallocHost)
 *   bytes are counted in 256-byte blocks; with SIM_MEMORY_REPORT=1 their peaks are printed to
 *   stderr at exit ("sim: peak device bytes N, pinned host bytes M"), to hold a memory plan to.
 * - Events keep the host time at which they were recorded (launches run synchronously, so that is
 *   when the stream reaches them); cudaEventElapsedTime fails, as on a GPU, for an event created
 *   with cudaEventDisableTiming or never recorded.
 * - Shared memory, static and dynamic, is filled with 0xff at the start of every block, so reading
 *   an unwritten word shows up in the results.
 * - __syncthreads, __syncwarp and __shfl_xor_sync are the engine's barrier and collectives (full
 *   masks only).
 */
#ifndef SIM_CUDA_RUNTIME_H
#define SIM_CUDA_RUNTIME_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <map>

#include "engine.h"
#include "streams.h"

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static
#define __restrict__

struct alignas(16) int4 {
    int x, y, z, w;
};
struct alignas(8) float2 {
    float x, y;
};

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
    cudaErrorMemoryAllocation = 2,
    cudaErrorInvalidConfiguration = 9,
    cudaErrorInsufficientDriver = 35,
    cudaErrorInvalidDeviceFunction = 98,
    cudaErrorNoKernelImageForDevice = 209,
    cudaErrorInvalidResourceHandle = 400,
    cudaErrorNotReady = 600,
} cudaError_t;
typedef SimStream *cudaStream_t;
typedef SimEvent *cudaEvent_t;
typedef void (*cudaHostFn_t)(void *userData);
enum cudaMemcpyKind { cudaMemcpyHostToHost, cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost, cudaMemcpyDeviceToDevice, cudaMemcpyDefault };
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize = 8 };
enum cudaDeviceAttr {
    cudaDevAttrClockRate = 13,
    cudaDevAttrMaxSharedMemoryPerBlockOptin = 97
};
typedef enum { CUDA_R_32F = 0, CUDA_R_16BF = 14 } cudaDataType_t;
typedef cudaDataType_t cudaDataType;
#define cudaEventDisableTiming 2
#define cudaStreamNonBlocking 1

struct cudaDeviceProp {
    char name[256];
    int major, minor, multiProcessorCount;
    size_t totalGlobalMem;
};
struct cudaFuncAttributes {
    int maxThreadsPerBlock;
};

namespace sim {
static const int MAX_DYNAMIC_SMEM = 227 * 1024;
static cudaError_t last_error = cudaSuccess;
static std::map<const void *, int> max_dynamic_smem;  // kernel -> cudaFuncAttributeMaxDynamicSharedMemorySize
static std::map<uintptr_t, size_t> device_allocs;     // base -> bytes of every live cudaMalloc / cudaMallocHost
static std::map<uintptr_t, size_t> pinned_allocs;     // the cudaMallocHost ones
static int devices_from_env(void) {
    const char *e = getenv("SIM_DEVICES");
    const int n = e ? atoi(e) : 1;
    return n >= 1 && n <= 64 ? n : 1;
}
static const int num_devices = devices_from_env();
static int current_device = 0;
// is p inside a cudaMallocHost allocation?
static inline bool is_pinned(const void *p) {
    auto it = pinned_allocs.upper_bound((uintptr_t)p);
    if (it == pinned_allocs.begin()) { return false; }
    --it;
    return (uintptr_t)p < it->first + (it->second > 0 ? it->second : 1);
}
static inline bool is_device(const void *p) {
    auto it = device_allocs.upper_bound((uintptr_t)p);
    if (it == device_allocs.begin()) { return false; }
    --it;
    return (uintptr_t)p < it->first + (it->second > 0 ? it->second : 1) && !is_pinned(p);
}

// the bytes of each kind in use (256-byte blocks) and their peaks; the device's size
struct MemoryCount {
    size_t device = 0, host = 0, device_peak = 0, host_peak = 0;
    ~MemoryCount() {
        const char *r = getenv("SIM_MEMORY_REPORT");
        if (r && !strcmp(r, "1")) { fprintf(stderr, "sim: peak device bytes %zu, pinned host bytes %zu\n", device_peak, host_peak); }
    }
};
static MemoryCount memory;
static inline size_t device_size(void) {
    const char *e = getenv("SIM_DEVICE_MEMORY");
    if (e == NULL || e[0] == '\0') { return (size_t)16 << 30; }
    char *end;
    unsigned long long v = strtoull(e, &end, 10);
    if (*end != '\0' || v == 0) { fprintf(stderr, "sim: SIM_DEVICE_MEMORY='%s' is not a number of bytes\n", e); exit(1); }
    return (size_t)v;
}
}  // namespace sim

static inline const char *cudaGetErrorName(cudaError_t e) {
    switch (e) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorInsufficientDriver: return "cudaErrorInsufficientDriver";
    case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
    case cudaErrorNotReady: return "cudaErrorNotReady";
    default: return "cudaError (other)";
    }
}
static inline const char *cudaGetErrorString(cudaError_t e) { return cudaGetErrorName(e); }
static inline cudaError_t cudaGetLastError(void) {
    cudaError_t e = sim::last_error;
    sim::last_error = cudaSuccess;
    return e;
}
// the simulated runtime is CUDA 13.0's; SIM_DRIVER_VERSION=<cudaDriverGetVersion's number> a driver
// that supports only that (0: none installed), which fails the first call as a real one does
#define CUDART_VERSION 13000
static inline int sim_driver_version() {
    const char *e = getenv("SIM_DRIVER_VERSION");
    return e && e[0] ? atoi(e) : CUDART_VERSION;
}
static inline cudaError_t cudaDriverGetVersion(int *v) { *v = sim_driver_version(); return cudaSuccess; }
static inline cudaError_t cudaRuntimeGetVersion(int *v) { *v = CUDART_VERSION; return cudaSuccess; }
static inline cudaError_t cudaGetDeviceCount(int *n) {
    if (sim_driver_version() < CUDART_VERSION) { *n = 0; return cudaErrorInsufficientDriver; }
    *n = sim::num_devices;
    return cudaSuccess;
}
static inline cudaError_t cudaSetDevice(int d) {
    if (d < 0 || d >= sim::num_devices) { return cudaErrorInvalidValue; }
    sim::current_device = d;
    return cudaSuccess;
}
static inline cudaError_t cudaGetDevice(int *d) { *d = sim::current_device; return cudaSuccess; }
static inline cudaError_t cudaGetDeviceProperties(cudaDeviceProp *p, int) {
    memset(p, 0, sizeof(*p));
    snprintf(p->name, sizeof(p->name), "host simulator");
    p->major = 9;
    p->minor = 0;
    p->multiProcessorCount = 1;
    p->totalGlobalMem = (size_t)16 << 30;
    return cudaSuccess;
}
static inline cudaError_t cudaDeviceGetAttribute(int *value, cudaDeviceAttr attr, int) {
    // clock in kHz; shared memory as an H100's: 227 KiB per block (opt-in)
    *value = attr == cudaDevAttrClockRate ? 1000000 : sim::MAX_DYNAMIC_SMEM;
    return cudaSuccess;
}
static inline cudaError_t cudaDeviceGetPCIBusId(char *bus, int len, int device) {
    snprintf(bus, (size_t)len, "0000:%02x:00.0", device);
    return cudaSuccess;
}
static inline cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes) {
    *total_bytes = sim::device_size();
    *free_bytes = *total_bytes > sim::memory.device ? *total_bytes - sim::memory.device : 0;
    return cudaSuccess;
}
static inline cudaError_t cudaDeviceSynchronize(void) { sim::drain(); return cudaSuccess; }
namespace sim {
static inline cudaError_t allocate(void **p, size_t bytes, bool host) {
    const size_t rounded = bytes > 0 ? (bytes + 255) / 256 * 256 : 256;
    if (!host && memory.device + rounded > device_size()) { *p = NULL; return cudaErrorMemoryAllocation; }
    *p = aligned_alloc(256, rounded);
    if (*p == NULL) { return cudaErrorMemoryAllocation; }
    memset(*p, 0xff, rounded);  // device memory is not zeroed: make that visible
    device_allocs[(uintptr_t)*p] = bytes;
    if (host) { pinned_allocs[(uintptr_t)*p] = bytes; }
    size_t &now = host ? memory.host : memory.device, &peak = host ? memory.host_peak : memory.device_peak;
    now += rounded;
    if (now > peak) { peak = now; }
    return cudaSuccess;
}
}  // namespace sim
static inline cudaError_t cudaMalloc(void **p, size_t bytes) { return sim::allocate(p, bytes, false); }
static inline cudaError_t cudaMallocHost(void **p, size_t bytes) { return sim::allocate(p, bytes, true); }
// frees wait for the device, as cudaFree does
static inline cudaError_t cudaFree(void *p) {
    sim::drain();
    auto it = sim::device_allocs.find((uintptr_t)p);
    if (it != sim::device_allocs.end()) {
        const size_t rounded = it->second > 0 ? (it->second + 255) / 256 * 256 : 256;
        (sim::pinned_allocs.count((uintptr_t)p) ? sim::memory.host : sim::memory.device) -= rounded;
        sim::device_allocs.erase(it);
        sim::pinned_allocs.erase((uintptr_t)p);
    }
    free(p);
    return cudaSuccess;
}
static inline cudaError_t cudaFreeHost(void *p) { return cudaFree(p); }
static inline cudaError_t cudaMemcpy(void *d, const void *s, size_t n, cudaMemcpyKind) {
    sim::drain();
    memmove(d, s, n);
    return cudaSuccess;
}
static inline cudaError_t cudaMemcpyAsync(void *d, const void *s, size_t n, cudaMemcpyKind, cudaStream_t stream = 0) {
    if (stream != NULL && !sim::is_device(d) && !sim::is_pinned(d)) {
        // into pageable host memory: returns once the copy is done
        sim::stream_sync(stream);
        memmove(d, s, n);
    } else if (stream != NULL && !sim::is_device(s) && !sim::is_pinned(s)) {
        // from pageable host memory: the source is read now (CUDA stages it before returning)
        std::vector<char> copy((const char *)s, (const char *)s + n);
        sim::enqueue(stream, [d, copy]() { memcpy(d, copy.data(), copy.size()); });
    } else {
        sim::enqueue(stream, [d, s, n]() { memmove(d, s, n); });
    }
    return cudaSuccess;
}
static inline cudaError_t cudaMemset(void *d, int v, size_t n) {
    sim::drain();
    memset(d, v, n);
    return cudaSuccess;
}
static inline cudaError_t cudaMemsetAsync(void *d, int v, size_t n, cudaStream_t stream = 0) {
    sim::enqueue(stream, [d, v, n]() { memset(d, v, n); });
    return cudaSuccess;
}
static inline cudaError_t cudaStreamCreateWithPriority(cudaStream_t *s, unsigned int flags, int priority) {
    *s = new SimStream();
    (*s)->flags = flags;
    (*s)->priority = priority;
    sim::streams.push_back(*s);
    return cudaSuccess;
}
static inline cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned int flags) {
    return cudaStreamCreateWithPriority(s, flags, 0);
}
static inline cudaError_t cudaStreamCreate(cudaStream_t *s) { return cudaStreamCreateWithPriority(s, 0, 0); }
// an H100's range: 0 (least, the default) to -5 (greatest)
static inline cudaError_t cudaDeviceGetStreamPriorityRange(int *least, int *greatest) {
    if (least) { *least = 0; }
    if (greatest) { *greatest = -5; }
    return cudaSuccess;
}
static inline cudaError_t cudaStreamGetPriority(cudaStream_t s, int *priority) {
    *priority = s ? s->priority : 0;
    return cudaSuccess;
}
static inline cudaError_t cudaStreamDestroy(cudaStream_t s) {
    sim::stream_sync(s);
    for (size_t i = 0; i < sim::streams.size(); i++) {
        if (sim::streams[i] == s) { sim::streams.erase(sim::streams.begin() + (long)i); break; }
    }
    sim::stream_turn = 0;
    delete s;
    return cudaSuccess;
}
static inline cudaError_t cudaStreamSynchronize(cudaStream_t s) { sim::stream_sync(s); return cudaSuccess; }
static inline cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned int) { sim::wait_event(s, e); return cudaSuccess; }
static inline cudaError_t cudaLaunchHostFunc(cudaStream_t s, cudaHostFn_t fn, void *data) {
    sim::enqueue(s, [fn, data]() { fn(data); }, SimStream::HOST);
    return cudaSuccess;
}
static inline cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned int flags) {
    *e = new SimEvent();
    (*e)->timing = (flags & cudaEventDisableTiming) == 0;
    return cudaSuccess;
}
static inline cudaError_t cudaEventCreate(cudaEvent_t *e) { return cudaEventCreateWithFlags(e, 0); }
// queued records and waits may still name the event: destroying it waits for the device
static inline cudaError_t cudaEventDestroy(cudaEvent_t e) { sim::drain(); delete e; return cudaSuccess; }
static inline cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s = 0) { sim::record(e, s); return cudaSuccess; }
// the host's poll of an event runs the queued work up to it: never cudaErrorNotReady
static inline cudaError_t cudaEventQuery(cudaEvent_t e) { sim::event_sync(e); return cudaSuccess; }
static inline cudaError_t cudaEventSynchronize(cudaEvent_t e) { sim::event_sync(e); return cudaSuccess; }
// as a GPU's: an event made without timing or never reached is an error, one still queued not ready
static inline cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end) {
    if (!start->timing || !end->timing || start->reached == 0 || end->reached == 0) { return cudaErrorInvalidResourceHandle; }
    if (start->reached < start->recorded || end->reached < end->recorded) { return cudaErrorNotReady; }
    *ms = (float)(end->ms - start->ms);
    return cudaSuccess;
}
template <class K>
static inline cudaError_t cudaFuncSetAttribute(K *kernel, cudaFuncAttribute attr, int value) {
    if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize || value < 0 || value > sim::MAX_DYNAMIC_SMEM) {
        return cudaErrorInvalidValue;
    }
    sim::max_dynamic_smem[(const void *)kernel] = value;
    return cudaSuccess;
}
static inline cudaError_t cudaFuncGetAttributes(cudaFuncAttributes *a, const void *) {
    a->maxThreadsPerBlock = 1024;
    return cudaSuccess;
}

// ----------------------------------------------------------------------------
// launches: sim_rewrite.py turns kernel<<<grid, block, smem, stream>>>(args) into
// sim_launch<kernel>(grid, block, smem, stream, args)

namespace sim {
template <auto K, class... Args>
static void launch(dim3 grid, dim3 block, size_t smem, cudaStream_t stream, Args... args) {
    const long nthreads = (long)block.x * block.y * block.z;
    if (nthreads < 1 || nthreads > 1024 || grid.x < 1 || grid.y < 1 || grid.z < 1 || grid.y > 65535 || grid.z > 65535 ||
        grid.x > 2147483647u) {
        last_error = cudaErrorInvalidConfiguration;
        return;
    }
    if (smem > 48 * 1024) {
        auto it = max_dynamic_smem.find((const void *)K);
        if (it == max_dynamic_smem.end() || (size_t)it->second < smem) {
            last_error = cudaErrorInvalidValue;  // what a GPU answers without the opt-in
            return;
        }
    }
    enqueue(stream, [=]() {
        body = [=]() { K(args...); };
        run_grid(name_of<K>(), grid, block, smem);
    });
}
}  // namespace sim

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

// ----------------------------------------------------------------------------
// barriers and warp collectives

static inline void __syncthreads(void) { sim::block_barrier(); }

static inline void __syncwarp(unsigned int mask = 0xffffffffu) {
    if (mask != 0xffffffffu) { sim::error("__syncwarp with a partial mask %#x is not simulated", mask); }
    sim::warp_collective(&sim::OP_SYNCWARP, 0, NULL, 0);
}

static inline float __shfl_xor_sync(unsigned int mask, float v, int lane_mask) {
    if (mask != 0xffffffffu) { sim::error("__shfl_xor_sync with a partial mask %#x is not simulated", mask); }
    const uint32_t in = __float_as_uint(v);
    return __uint_as_float(sim::warp_collective(&sim::OP_SHFL_XOR, lane_mask, &in, 1)[0]);
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
