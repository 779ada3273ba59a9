/*
 * CPU simulator for the fused attention kernels of llmc/attention.cuh: runs their unchanged source
 * on the CPU, one fiber per CUDA thread, with checked CPU versions of every primitive they use
 * (ATTENTION_HOST_SIM), and compares the results with the fp64 reference of attention_ref.h.
 * It is how the index arithmetic, fragment layouts and synchronization of those kernels were
 * verified without a GPU; it does not replace running dev/cuda/attention.cu on one.
 *
 * What is emulated, from the PTX ISA:
 * - mma.sync.m16n8k16.row.col.f32.bf16.bf16.f32: the A/B/C fragment layouts of "Matrix Fragments for
 *   mma.m16n8k16 with floating point type" (groupID = lane >> 2, threadID_in_group = lane % 4),
 *   written here independently of the kernels' helpers; products exact, sums in fp64.
 * - ldmatrix.sync.aligned.m8n8.x4{.trans}.shared.b16: lane L gives row L % 8 of matrix L / 8; lane L
 *   receives row L / 4, elements 2 (L % 4), 2 (L % 4) + 1 of each matrix (of its transpose with .trans).
 * - cp.async (16 and 4 bytes, zero fill when the source size is 0), completing at wait_group 0;
 *   __syncthreads, __syncwarp, __shfl_xor_sync.
 * What is checked, on every access:
 * - shared memory: bounds and alignment; reads of never-written words; races: a read or write of a
 *   word last written, or a write of a word last read, by another thread with no __syncthreads
 *   between (or, within one warp, no __syncwarp); any access to a word whose cp.async is in flight;
 * - global memory: every access lies inside a buffer the test registered, inputs are never written,
 *   and every byte of every output is written exactly once per launch sequence;
 * - warp collectives are reached by all 32 lanes with the same operation (no divergence), no NaN or
 *   infinity enters an mma, no deadlock (a barrier some thread never reaches);
 * - results: against the reference with the tolerances of attention_ref.h, and bitwise equal
 *   under three different thread interleavings (forward, reverse, random order of the fibers).
 * It also counts ldmatrix bank conflicts (wavefronts per 8-row phase).
 *
 * Build and run (no CUDA needed; 10 s of CPU time, 15 s wall, on the 2-core build machine; `make -C
 * dev/cuda run-attention-sim` does the same; add -fsanitize=address,undefined to check the simulator
 * itself, 40 s):
 *   g++ -O2 -std=c++17 -fno-strict-aliasing -I../.. attention_sim.cpp -o attention_sim && ./attention_sim
 */
#define ATTENTION_HOST_SIM 1

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <ucontext.h>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "attention_ref.h"

// AddressSanitizer must be told about every switch between fiber stacks
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#define SIM_ASAN 1
#else
#define SIM_ASAN 0
#endif

// ----------------------------------------------------------------------------
// the CUDA surface the kernels use

struct floatX {
    uint16_t bits;
};
struct int4 {
    int x, y, z, w;
};
struct float2 {
    float x, y;
};
struct SimDim3 {
    unsigned int x, y, z;
};
static SimDim3 threadIdx, blockIdx, blockDim, gridDim;  // set by the scheduler before a fiber runs
#define __global__
#define __launch_bounds__(...)
#define ATTN_DEV static inline
#define CEIL_DIV(a, b) (((a) + (b) - 1) / (b))
static inline int min(int a, int b) { return a < b ? a : b; }

// ----------------------------------------------------------------------------
// simulator state

namespace sim {

constexpr int MAX_THREADS = 256, MAX_WARPS = MAX_THREADS / 32;
constexpr size_t STACK_BYTES = 128 * 1024;

struct Pending {  // a cp.async in flight: lands at the issuing thread's first wait after its commit
    uint32_t off;
    int bytes;
    bool committed;
    uint8_t data[16];
};
struct Thread {
    ucontext_t ctx;
    int tid;
    bool done;
    const char *waiting;  // what the fiber waits for, for the deadlock report
    std::vector<Pending> pending;
    void *fake_stack;  // AddressSanitizer's state of this fiber while it is switched out
};
enum Op { OP_LDSM = 1, OP_LDSM_T, OP_MMA, OP_SHFL, OP_SYNCWARP };
static const char *op_name(int op) {
    switch (op) {
    case OP_LDSM: return "ldmatrix";
    case OP_LDSM_T: return "ldmatrix.trans";
    case OP_MMA: return "mma";
    case OP_SHFL: return "shfl";
    case OP_SYNCWARP: return "syncwarp";
    }
    return "?";
}
struct Warp {  // rendezvous of one warp collective: inputs per lane, then outputs per lane
    int arrived;
    uint64_t gen;
    int op[32], arg[32];
    uint32_t addr[32];
    uint32_t a[32][4], b[32][2];
    float c[32][4], fin[32];
    uint32_t rout[32][4];
    float cout[32][4], fout[32];
};
// per 4-byte word of shared memory: the last write and, per warp, the last reads
struct Word {
    int32_t w_be, w_we;  // block epoch and writer-warp epoch of the last write
    int16_t w_tid, pending;
    bool written;
    int32_t r_be[MAX_WARPS], r_we[MAX_WARPS];
    int8_t r_lane[MAX_WARPS];  // lane of the last reads, -1 a whole-warp read (ldmatrix), -2 several lanes
};
struct GBuf {
    std::string name;
    uint8_t *base;
    size_t bytes;
    bool writable;
    std::vector<uint8_t> writes;
};
struct LdsmStats {
    long phases = 0, conflicted = 0;
    int max_wavefronts = 0;
};

static uint8_t *smem;
static size_t smem_bytes;
static std::vector<Word> shadow;
static int block_epoch, warp_epoch[MAX_WARPS];
static Warp warps[MAX_WARPS];
static int bar_arrived;
static uint64_t bar_gen;
static std::vector<Thread> threads;
static std::vector<char *> stacks;
static Thread *cur;
static ucontext_t sched_ctx;
static uint64_t events;
static int nthreads;
static std::function<void()> body;
static std::string kernel_name;
static long errors;
static std::vector<GBuf> bufs;
static std::map<std::string, LdsmStats> ldsm_stats;
enum Order { ORDER_FORWARD, ORDER_REVERSE, ORDER_RANDOM };
static int order = ORDER_FORWARD;
static RefRng order_rng(12345);
#if SIM_ASAN
static void *sched_fake_stack;
static const void *sched_stack_bottom;
static size_t sched_stack_size;
#endif

static void error(const char *fmt, ...) {
    if (errors < 20) {
        char msg[512];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        printf("  SIM ERROR [%s, block (%u, %u), thread %d]: %s\n", kernel_name.c_str(), blockIdx.x, blockIdx.y,
               cur ? cur->tid : -1, msg);
    }
    errors++;
}

static void yield() {
#if SIM_ASAN
    __sanitizer_start_switch_fiber(&cur->fake_stack, sched_stack_bottom, sched_stack_size);
#endif
    swapcontext(&cur->ctx, &sched_ctx);
#if SIM_ASAN
    __sanitizer_finish_switch_fiber(cur->fake_stack, NULL, NULL);
#endif
}

// ---- global memory

static void register_buffer(const char *name, void *p, size_t bytes, bool writable) {
    GBuf b;
    b.name = name;
    b.base = (uint8_t *)p;
    b.bytes = bytes;
    b.writable = writable;
    b.writes.assign(writable ? bytes : 0, 0);
    bufs.push_back(b);
}
static GBuf *find_buffer(const void *p, size_t n) {
    for (GBuf &b : bufs) {
        if ((const uint8_t *)p >= b.base && (const uint8_t *)p + n <= b.base + b.bytes) { return &b; }
    }
    return NULL;
}
static bool gmem_read_ok(const void *p, size_t n, const char *what) {
    if ((uintptr_t)p % n != 0) {
        error("%s: global address %p not %zu-byte aligned", what, p, n);
        return false;
    }
    if (!find_buffer(p, n)) {
        error("%s: global read of %zu bytes at %p is outside every buffer", what, n, p);
        return false;
    }
    return true;
}
static bool gmem_write_ok(void *p, size_t n, const char *what) {
    if ((uintptr_t)p % n != 0) {
        error("%s: global address %p not %zu-byte aligned", what, p, n);
        return false;
    }
    GBuf *b = find_buffer(p, n);
    if (!b) {
        error("%s: global write of %zu bytes at %p is outside every buffer", what, n, p);
        return false;
    }
    if (!b->writable) {
        error("%s: writes the input buffer %s", what, b->name.c_str());
        return false;
    }
    const size_t off = (uint8_t *)p - b->base;
    for (size_t i = 0; i < n; i++) {
        if (b->writes[off + i] < 255) { b->writes[off + i]++; }
    }
    return true;
}
// every byte of the writable buffers written exactly once since they were registered
static long check_coverage() {
    long bad = 0;
    for (GBuf &b : bufs) {
        if (!b.writable) { continue; }
        size_t never = 0, twice = 0, first = (size_t)-1;
        for (size_t i = 0; i < b.bytes; i++) {
            if (b.writes[i] != 1) {
                (b.writes[i] == 0 ? never : twice)++;
                if (first == (size_t)-1) { first = i; }
            }
        }
        if (never || twice) {
            printf("  SIM ERROR: output %s: %zu bytes never written, %zu written more than once (first at byte %zu)\n",
                   b.name.c_str(), never, twice, first);
            bad++;
        }
    }
    return bad;
}

// ---- shared memory shadow

static bool smem_range_ok(const void *p, size_t n, const char *what) {
    const uint8_t *q = (const uint8_t *)p;
    if (q < smem || q + n > smem + smem_bytes) {
        error("%s: shared address %p (%ld bytes from the base) outside the %zu-byte dynamic allocation", what, p,
              (long)(q - smem), smem_bytes);
        return false;
    }
    if ((size_t)(q - smem) % n != 0) {
        error("%s: shared offset %ld not %zu-byte aligned", what, (long)(q - smem), n);
        return false;
    }
    return true;
}
// is an access by `tid` (collective: the whole warp) ordered after the last write of s?
static bool after_write(const Word &s, int tid, bool collective) {
    if (s.w_be != block_epoch) { return true; }  // a __syncthreads since the write
    const int w = tid >> 5;
    if ((s.w_tid >> 5) != w) { return false; }
    if (s.w_we != warp_epoch[w]) { return true; }  // a __syncwarp since the write
    return !collective && s.w_tid == tid;
}
static void shadow_read(uint32_t off, int bytes, int tid, bool collective, const char *what) {
    const int w = tid >> 5, lane = collective ? -1 : (tid & 31);
    for (uint32_t i = off / 4; i < (off + bytes + 3) / 4; i++) {
        Word &s = shadow[i];
        if (s.pending >= 0) {
            error("%s reads shared byte %u while thread %d's cp.async to it is in flight", what, i * 4, s.pending);
        } else if (!s.written) {
            error("%s reads shared byte %u, never written", what, i * 4);
        } else if (!after_write(s, tid, collective)) {
            error("%s reads shared byte %u written by thread %d with no barrier between", what, i * 4, s.w_tid);
        }
        if (s.r_be[w] == block_epoch && s.r_we[w] == warp_epoch[w]) {
            if (s.r_lane[w] != lane) { s.r_lane[w] = -2; }
        } else {
            s.r_be[w] = block_epoch;
            s.r_we[w] = warp_epoch[w];
            s.r_lane[w] = (int8_t)lane;
        }
    }
}
static void shadow_check_write(uint32_t off, int bytes, int tid, const char *what) {
    const int w = tid >> 5, lane = tid & 31;
    for (uint32_t i = off / 4; i < (off + bytes + 3) / 4; i++) {
        Word &s = shadow[i];
        if (s.pending >= 0) {
            error("%s writes shared byte %u while thread %d's cp.async to it is in flight", what, i * 4, s.pending);
        }
        if (s.written && !after_write(s, tid, false)) {
            error("%s writes shared byte %u last written by thread %d with no barrier between", what, i * 4, s.w_tid);
        }
        for (int rw = 0; rw < MAX_WARPS; rw++) {
            if (s.r_be[rw] != block_epoch) { continue; }
            if (rw != w) {
                error("%s writes shared byte %u read by warp %d with no barrier between", what, i * 4, rw);
            } else if (s.r_we[rw] == warp_epoch[w] && s.r_lane[rw] != lane) {
                error("%s writes shared byte %u read by other lanes of its warp with no __syncwarp between", what,
                      i * 4);
            }
        }
    }
}
static void shadow_record_write(uint32_t off, int bytes, int tid) {
    for (uint32_t i = off / 4; i < (off + bytes + 3) / 4; i++) {
        Word &s = shadow[i];
        s.written = true;
        s.w_be = block_epoch;
        s.w_we = warp_epoch[tid >> 5];
        s.w_tid = (int16_t)tid;
    }
}

// ---- warp collectives

static void execute_warp(int w) {
    Warp &W = warps[w];
    const int op = W.op[0], arg = W.arg[0];
    for (int l = 1; l < 32; l++) {
        if (W.op[l] != op || W.arg[l] != arg) {
            error("divergent warp %d: lane 0 at %s (%d), lane %d at %s (%d)", w, op_name(op), arg, l, op_name(W.op[l]),
                  W.arg[l]);
            return;
        }
    }
    if (op == OP_LDSM || op == OP_LDSM_T) {
        uint16_t M[4][8][8];
        LdsmStats &st = ldsm_stats[kernel_name];
        for (int m = 0; m < 4; m++) {
            int bank_words[32][8], bank_count[32] = {0};
            for (int r = 0; r < 8; r++) {
                const uint32_t off = W.addr[m * 8 + r];
                if (off % 16 != 0 || off + 16 > smem_bytes) {
                    error("ldmatrix row address %u (lane %d) misaligned or out of bounds", off, m * 8 + r);
                    memset(M[m][r], 0, 16);
                    continue;
                }
                shadow_read(off, 16, w * 32, true, op_name(op));
                memcpy(M[m][r], smem + off, 16);
                for (int k = 0; k < 4; k++) {  // a row is 4 consecutive words = 4 banks
                    const int word = (int)(off / 4) + k, bank = word % 32;
                    bool seen = false;
                    for (int i = 0; i < bank_count[bank]; i++) { seen = seen || bank_words[bank][i] == word; }
                    if (!seen) { bank_words[bank][bank_count[bank]++] = word; }
                }
            }
            int wavefronts = 1;
            for (int bk = 0; bk < 32; bk++) { wavefronts = bank_count[bk] > wavefronts ? bank_count[bk] : wavefronts; }
            st.phases++;
            st.conflicted += wavefronts > 1;
            st.max_wavefronts = wavefronts > st.max_wavefronts ? wavefronts : st.max_wavefronts;
        }
        for (int L = 0; L < 32; L++) {
            const int g = L >> 2, t = L & 3;
            for (int m = 0; m < 4; m++) {
                const uint16_t lo = op == OP_LDSM ? M[m][g][2 * t] : M[m][2 * t][g];
                const uint16_t hi = op == OP_LDSM ? M[m][g][2 * t + 1] : M[m][2 * t + 1][g];
                W.rout[L][m] = (uint32_t)lo | ((uint32_t)hi << 16);
            }
        }
    } else if (op == OP_MMA) {
        double A[16][16], Bm[16][8], Cm[16][8];
        for (int L = 0; L < 32; L++) {
            const int g = L >> 2, t = L & 3;
            // A: a0,a1 (reg 0) row g; a2,a3 (reg 1) row g+8; a4,a5 (reg 2) row g, cols +8; a6,a7 (reg 3) row g+8, cols +8
            for (int reg = 0; reg < 4; reg++) {
                const int row = g + ((reg & 1) ? 8 : 0), col = 2 * t + ((reg & 2) ? 8 : 0);
                A[row][col] = bf16_to_float((uint16_t)(W.a[L][reg] & 0xffff));
                A[row][col + 1] = bf16_to_float((uint16_t)(W.a[L][reg] >> 16));
            }
            // B: b0,b1 (reg 0) rows 2t, 2t+1; b2,b3 (reg 1) rows 2t+8, 2t+9; column g
            for (int reg = 0; reg < 2; reg++) {
                const int k = 2 * t + (reg ? 8 : 0);
                Bm[k][g] = bf16_to_float((uint16_t)(W.b[L][reg] & 0xffff));
                Bm[k + 1][g] = bf16_to_float((uint16_t)(W.b[L][reg] >> 16));
            }
            // C: c0,c1 row g, c2,c3 row g+8; columns 2t, 2t+1
            Cm[g][2 * t] = W.c[L][0];
            Cm[g][2 * t + 1] = W.c[L][1];
            Cm[g + 8][2 * t] = W.c[L][2];
            Cm[g + 8][2 * t + 1] = W.c[L][3];
        }
        bool finite = true;
        for (int i = 0; i < 16; i++) {
            for (int k = 0; k < 16; k++) { finite = finite && isfinite(A[i][k]); }
            for (int j = 0; j < 8; j++) { finite = finite && isfinite(Cm[i][j]) && isfinite(Bm[i][j]); }
        }
        if (!finite) { error("mma operand is NaN or infinite"); }
        float Dm[16][8];
        for (int i = 0; i < 16; i++) {
            for (int j = 0; j < 8; j++) {
                double acc = Cm[i][j];
                for (int k = 0; k < 16; k++) { acc += A[i][k] * Bm[k][j]; }
                Dm[i][j] = (float)acc;
            }
        }
        for (int L = 0; L < 32; L++) {
            const int g = L >> 2, t = L & 3;
            W.cout[L][0] = Dm[g][2 * t];
            W.cout[L][1] = Dm[g][2 * t + 1];
            W.cout[L][2] = Dm[g + 8][2 * t];
            W.cout[L][3] = Dm[g + 8][2 * t + 1];
        }
    } else if (op == OP_SHFL) {
        for (int L = 0; L < 32; L++) { W.fout[L] = W.fin[L ^ arg]; }
    } else if (op == OP_SYNCWARP) {
        warp_epoch[w]++;
    }
}

// every lane deposits its inputs; the last to arrive executes and releases the others
static void warp_collective(int op, int arg) {
    Thread *me = cur;
    const int lane = me->tid & 31, w = me->tid >> 5;
    if (nthreads - w * 32 < 32) {
        error("warp collective %s in a partial warp", op_name(op));
        return;
    }
    Warp &W = warps[w];
    W.op[lane] = op;
    W.arg[lane] = arg;
    const uint64_t gen = W.gen;
    events++;
    if (++W.arrived == 32) {
        W.arrived = 0;
        execute_warp(w);
        W.gen++;
    } else {
        me->waiting = op_name(op);
        while (W.gen == gen) { yield(); }
        me->waiting = NULL;
    }
}

static void block_barrier() {
    const uint64_t gen = bar_gen;
    events++;
    if (++bar_arrived == nthreads) {
        bar_arrived = 0;
        block_epoch++;
        for (int w = 0; w < MAX_WARPS; w++) { warp_epoch[w]++; }  // __syncthreads orders warps too
        bar_gen++;
    } else {
        cur->waiting = "__syncthreads";
        while (bar_gen == gen) { yield(); }
        cur->waiting = NULL;
    }
}

// ---- launch

static void fiber_main() {
#if SIM_ASAN
    __sanitizer_finish_switch_fiber(NULL, &sched_stack_bottom, &sched_stack_size);
#endif
    body();
    cur->done = true;
    events++;
#if SIM_ASAN
    __sanitizer_start_switch_fiber(NULL, sched_stack_bottom, sched_stack_size);  // this stack is done
#endif
}  // returns to sched_ctx through uc_link

static void run_block() {
    memset(smem, 0xff, smem_bytes);  // NaN in bf16 and fp32: garbage that a bug would propagate
    Word fresh;
    memset(&fresh, 0, sizeof(fresh));
    fresh.w_be = -1;
    fresh.pending = -1;
    for (int w = 0; w < MAX_WARPS; w++) { fresh.r_be[w] = -1; }
    shadow.assign(smem_bytes / 4 + 1, fresh);
    block_epoch = 0;
    for (int w = 0; w < MAX_WARPS; w++) {
        warp_epoch[w] = 0;
        memset(&warps[w], 0, sizeof(Warp));
    }
    bar_arrived = 0;
    threads.assign(nthreads, Thread());
    for (int i = 0; i < nthreads; i++) {
        Thread &t = threads[i];
        t.tid = i;
        t.done = false;
        t.waiting = NULL;
        t.fake_stack = NULL;
        getcontext(&t.ctx);
        t.ctx.uc_stack.ss_sp = stacks[i];
        t.ctx.uc_stack.ss_size = STACK_BYTES;
        t.ctx.uc_link = &sched_ctx;
        makecontext(&t.ctx, fiber_main, 0);
    }
    std::vector<int> perm(nthreads);
    for (int i = 0; i < nthreads; i++) { perm[i] = order == ORDER_REVERSE ? nthreads - 1 - i : i; }
    for (;;) {
        if (order == ORDER_RANDOM) {
            for (int i = nthreads - 1; i > 0; i--) { std::swap(perm[i], perm[order_rng.next() % (uint64_t)(i + 1)]); }
        }
        const uint64_t before = events;
        bool any = false;
        for (int i : perm) {
            Thread &t = threads[i];
            if (t.done) { continue; }
            any = true;
            cur = &t;
            threadIdx = {(unsigned)t.tid, 0, 0};
#if SIM_ASAN
            __sanitizer_start_switch_fiber(&sched_fake_stack, stacks[t.tid], STACK_BYTES);
#endif
            swapcontext(&sched_ctx, &t.ctx);
#if SIM_ASAN
            __sanitizer_finish_switch_fiber(sched_fake_stack, NULL, NULL);
#endif
        }
        cur = NULL;
        if (!any) { break; }
        if (events == before) {
            error("deadlock: no thread can make progress");
            for (int i = 0; i < nthreads; i++) {
                if (!threads[i].done && i % 32 == 0) {
                    printf("    thread %d waits at %s\n", i, threads[i].waiting ? threads[i].waiting : "?");
                }
            }
            exit(1);  // the fibers cannot be unwound
        }
    }
    for (Thread &t : threads) {
        if (!t.pending.empty()) {
            cur = &t;
            error("kernel exit with %zu cp.async still in flight", t.pending.size());
            cur = NULL;
        }
    }
}

static void launch(const char *name, unsigned grid_x, unsigned grid_y, int block_threads, size_t dyn_smem,
                   std::function<void()> kernel) {
    if (block_threads > MAX_THREADS) {
        printf("simulator: %d threads per block, at most %d supported\n", block_threads, MAX_THREADS);
        exit(1);
    }
    kernel_name = name;
    body = kernel;
    nthreads = block_threads;
    blockDim = {(unsigned)block_threads, 1, 1};
    gridDim = {grid_x, grid_y, 1};
    smem_bytes = dyn_smem;
    std::vector<uint8_t> smem_store(dyn_smem + 16 + 4);
    smem = (uint8_t *)(((uintptr_t)smem_store.data() + 15) & ~(uintptr_t)15);
    while (stacks.size() < (size_t)MAX_THREADS) { stacks.push_back((char *)malloc(STACK_BYTES)); }
    for (unsigned by = 0; by < grid_y; by++) {
        for (unsigned bx = 0; bx < grid_x; bx++) {
            blockIdx = {bx, by, 0};
            run_block();
        }
    }
    smem = NULL;
}

}  // namespace sim

// ----------------------------------------------------------------------------
// the primitives of llmc/attention.cuh, checked

ATTN_DEV unsigned char *attn_dynamic_smem() { return sim::smem; }

static void sim_ldsm(uint32_t (&r)[4], const floatX *p, bool trans) {
    const int lane = sim::cur->tid & 31;
    sim::warps[sim::cur->tid >> 5].addr[lane] = (uint32_t)((const uint8_t *)p - sim::smem);
    if ((const uint8_t *)p < sim::smem) { sim::warps[sim::cur->tid >> 5].addr[lane] = 0xfffffff0u; }
    sim::warp_collective(trans ? sim::OP_LDSM_T : sim::OP_LDSM, 0);
    for (int i = 0; i < 4; i++) { r[i] = sim::warps[sim::cur->tid >> 5].rout[lane][i]; }
}
ATTN_DEV void attn_ldsm_x4(uint32_t (&r)[4], const floatX *p) { sim_ldsm(r, p, false); }
ATTN_DEV void attn_ldsm_x4_trans(uint32_t (&r)[4], const floatX *p) { sim_ldsm(r, p, true); }

ATTN_DEV void attn_mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    const int lane = sim::cur->tid & 31;
    sim::Warp &W = sim::warps[sim::cur->tid >> 5];
    for (int i = 0; i < 4; i++) {
        W.a[lane][i] = a[i];
        W.c[lane][i] = c[i];
    }
    W.b[lane][0] = b0;
    W.b[lane][1] = b1;
    sim::warp_collective(sim::OP_MMA, 0);
    for (int i = 0; i < 4; i++) { c[i] = sim::warps[sim::cur->tid >> 5].cout[lane][i]; }
}

static void sim_cp_async(void *dst, const void *src, int bytes, bool valid) {
    if (!sim::smem_range_ok(dst, bytes, "cp.async destination")) { return; }
    sim::Pending p;
    p.off = (uint32_t)((uint8_t *)dst - sim::smem);
    p.bytes = bytes;
    p.committed = false;
    if (valid && sim::gmem_read_ok(src, bytes, "cp.async source")) {
        memcpy(p.data, src, bytes);
    } else {
        memset(p.data, 0, sizeof(p.data));
    }
    sim::shadow_check_write(p.off, bytes, sim::cur->tid, "cp.async");
    for (uint32_t i = p.off / 4; i < (p.off + bytes + 3) / 4; i++) { sim::shadow[i].pending = (int16_t)sim::cur->tid; }
    sim::cur->pending.push_back(p);
}
ATTN_DEV void attn_cp_async16(floatX *dst, const floatX *src, bool valid) { sim_cp_async(dst, src, 16, valid); }
ATTN_DEV void attn_cp_async4(float *dst, const float *src, bool valid) { sim_cp_async(dst, src, 4, valid); }
ATTN_DEV void attn_cp_async_commit() {
    for (sim::Pending &p : sim::cur->pending) { p.committed = true; }
}
// cp.async.wait_group 0: every committed group has landed; uncommitted copies stay in flight
ATTN_DEV void attn_cp_async_wait_all() {
    std::vector<sim::Pending> still;
    for (const sim::Pending &p : sim::cur->pending) {
        if (!p.committed) {
            still.push_back(p);
            continue;
        }
        for (uint32_t i = p.off / 4; i < (p.off + p.bytes + 3) / 4; i++) { sim::shadow[i].pending = -1; }
        memcpy(sim::smem + p.off, p.data, p.bytes);
        sim::shadow_record_write(p.off, p.bytes, sim::cur->tid);
    }
    sim::cur->pending = still;
}
ATTN_DEV void attn_block_sync() { sim::block_barrier(); }
ATTN_DEV void attn_warp_sync() { sim::warp_collective(sim::OP_SYNCWARP, 0); }
ATTN_DEV float attn_shfl_xor(float v, int mask) {
    const int lane = sim::cur->tid & 31;
    sim::warps[sim::cur->tid >> 5].fin[lane] = v;
    sim::warp_collective(sim::OP_SHFL, mask);
    return sim::warps[sim::cur->tid >> 5].fout[lane];
}
ATTN_DEV uint32_t attn_pack_bf16(float lo, float hi) {
    return (uint32_t)float_to_bf16(lo) | ((uint32_t)float_to_bf16(hi) << 16);
}
ATTN_DEV float attn_bits_to_float(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof(f));
    return f;
}
ATTN_DEV float attn_exp2(float x) { return exp2f(x); }
ATTN_DEV float attn_log(float x) { return logf(x); }
ATTN_DEV void attn_st_shared_u32(void *p, uint32_t v) {
    if (!sim::smem_range_ok(p, 4, "st.shared.u32")) { return; }
    const uint32_t off = (uint32_t)((uint8_t *)p - sim::smem);
    sim::shadow_check_write(off, 4, sim::cur->tid, "st.shared.u32");
    memcpy(sim::smem + off, &v, 4);
    sim::shadow_record_write(off, 4, sim::cur->tid);
}
ATTN_DEV int4 attn_ld_shared_128(const void *p) {
    int4 v = {0, 0, 0, 0};
    if (!sim::smem_range_ok(p, 16, "ld.shared.v4")) { return v; }
    const uint32_t off = (uint32_t)((const uint8_t *)p - sim::smem);
    sim::shadow_read(off, 16, sim::cur->tid, false, "ld.shared.v4");
    memcpy(&v, sim::smem + off, 16);
    return v;
}
ATTN_DEV float2 attn_ld_shared_f32x2(const float *p) {
    float2 v = {0.0f, 0.0f};
    if (!sim::smem_range_ok(p, 8, "ld.shared.v2.f32")) { return v; }
    const uint32_t off = (uint32_t)((const uint8_t *)p - sim::smem);
    sim::shadow_read(off, 8, sim::cur->tid, false, "ld.shared.v2.f32");
    memcpy(&v, sim::smem + off, 8);
    return v;
}
ATTN_DEV void attn_st_global_128(floatX *p, int4 v) {
    if (sim::gmem_write_ok(p, 16, "st.global.v4")) { memcpy(p, &v, 16); }
}
ATTN_DEV int4 attn_ld_global_128(const floatX *p) {
    int4 v = {0, 0, 0, 0};
    if (sim::gmem_read_ok(p, 16, "ld.global.v4")) { memcpy(&v, p, 16); }
    return v;
}
ATTN_DEV float attn_ld_global_f32(const float *p) { return sim::gmem_read_ok(p, 4, "ld.global.f32") ? *p : 0.0f; }
ATTN_DEV void attn_st_global_f32(float *p, float v) {
    if (sim::gmem_write_ok(p, 4, "st.global.f32")) { *p = v; }
}

// what the unfused oracle kernels use from cuda_bf16.h and llmc/cuda_common.cuh (their global
// memory accesses are plain C++, so only their results are checked, not their bounds)
#define WARP_SIZE 32
static inline float __bfloat162float(floatX x) { return bf16_to_float(x.bits); }
static inline floatX __float2bfloat16(float f) { return floatX{float_to_bf16(f)}; }
static inline float warp_reduce_sum(float val) {
    for (int offset = 16; offset > 0; offset /= 2) { val += attn_shfl_xor(val, offset); }
    return val;
}
static inline float warp_reduce_max(float val) {
    for (int offset = 16; offset > 0; offset /= 2) { val = fmaxf(val, attn_shfl_xor(val, offset)); }
    return val;
}

#include "llmc/attention.cuh"

// ----------------------------------------------------------------------------
// tests

// The sim's own fragment tables must be bijections onto the 16x16 A, 16x8 B and 16x8 C tiles
// (a check of this file, not of the kernels).
static int check_layout_tables() {
    int a_hits[16][16] = {{0}}, b_hits[16][8] = {{0}}, c_hits[16][8] = {{0}};
    for (int L = 0; L < 32; L++) {
        const int g = L >> 2, t = L & 3;
        for (int reg = 0; reg < 4; reg++) {
            const int row = g + ((reg & 1) ? 8 : 0), col = 2 * t + ((reg & 2) ? 8 : 0);
            a_hits[row][col]++;
            a_hits[row][col + 1]++;
        }
        for (int reg = 0; reg < 2; reg++) {
            b_hits[2 * t + (reg ? 8 : 0)][g]++;
            b_hits[2 * t + (reg ? 8 : 0) + 1][g]++;
        }
        c_hits[g][2 * t]++;
        c_hits[g][2 * t + 1]++;
        c_hits[g + 8][2 * t]++;
        c_hits[g + 8][2 * t + 1]++;
    }
    int bad = 0;
    for (int i = 0; i < 16; i++) {
        for (int j = 0; j < 16; j++) { bad += a_hits[i][j] != 1; }
        for (int j = 0; j < 8; j++) { bad += b_hits[i][j] != 1 || c_hits[i][j] != 1; }
    }
    if (bad) { printf("SIM ERROR: the simulator's fragment tables are not bijections\n"); }
    return bad;
}

static void nan_fill(std::vector<uint16_t> &v) { std::fill(v.begin(), v.end(), (uint16_t)0xffff); }
static void nan_fill(std::vector<float> &v) { std::fill(v.begin(), v.end(), NAN); }

struct FwdResult {
    std::vector<uint16_t> out;
    std::vector<float> lse;
};

template <int HS, int MT>
static long sim_forward(int B, int T, int NH, uint64_t seed, int order, FwdResult *res, bool compare) {
    const int C = NH * HS;
    std::vector<uint16_t> qkv, dout;
    attention_make_inputs(qkv, dout, B, T, C, seed);
    std::vector<uint16_t> out((size_t)B * T * C);
    std::vector<float> lse((size_t)B * NH * T);
    nan_fill(out);
    nan_fill(lse);
    sim::bufs.clear();
    sim::register_buffer("qkv", qkv.data(), qkv.size() * 2, false);
    sim::register_buffer("out", out.data(), out.size() * 2, true);
    sim::register_buffer("lse", lse.data(), lse.size() * 4, true);
    sim::order = order;
    const long errors_before = sim::errors;
    char name[64];
    snprintf(name, sizeof(name), "forward<%d,%d>", HS, MT);
    const float scale = 1.0f / sqrtf((float)HS);
    sim::launch(name, B * NH, CEIL_DIV(T, 16 * MT * ATTN_WARPS), ATTN_THREADS, attention_forward_smem_bytes(HS, MT),
                [&]() {
                    attention_forward_kernel<HS, MT>((floatX *)out.data(), lse.data(), (const floatX *)qkv.data(),
                                                     scale, T, NH);
                });
    long bad = (sim::errors - errors_before) + sim::check_coverage();
    if (compare) {
        printf("  %s B %d T %d NH %d%s\n", name, B, T, NH, order == sim::ORDER_FORWARD ? "" : " (other fiber order)");
        std::vector<float> out_ref(out.size()), lse_ref(lse.size()), out_f(out.size());
        attention_forward_ref(out_ref.data(), lse_ref.data(), qkv.data(), B, T, C, NH);
        bf16_to_float_array(out_f.data(), out.data(), out.size());
        bad += ref_compare("out", out_ref.data(), out_f.data(), NULL, (size_t)B * T, C, 0, C, TOL_OUT);
        bad += ref_compare("lse", lse_ref.data(), lse.data(), NULL, (size_t)B * NH, T, 0, T, TOL_LSE);
    }
    if (res) {
        res->out = out;
        res->lse = lse;
    }
    return bad;
}

template <int HS>
static long sim_backward(int B, int T, int NH, uint64_t seed, int order, std::vector<uint16_t> *res, bool compare) {
    const int C = NH * HS;
    std::vector<uint16_t> qkv, dout;
    attention_make_inputs(qkv, dout, B, T, C, seed);
    // the backward's inputs out and lse come from the reference forward (out rounded to bf16, as stored)
    std::vector<float> out_ref((size_t)B * T * C), lse((size_t)B * NH * T);
    attention_forward_ref(out_ref.data(), lse.data(), qkv.data(), B, T, C, NH);
    std::vector<uint16_t> out(out_ref.size());
    for (size_t i = 0; i < out.size(); i++) { out[i] = float_to_bf16(out_ref[i]); }
    std::vector<float> D((size_t)B * NH * T);
    std::vector<uint16_t> dqkv((size_t)B * T * 3 * C);
    nan_fill(D);
    nan_fill(dqkv);
    sim::order = order;
    const long errors_before = sim::errors;
    const float scale = 1.0f / sqrtf((float)HS);
    char name[64];
    long bad = 0;

    sim::bufs.clear();
    sim::register_buffer("out", out.data(), out.size() * 2, false);
    sim::register_buffer("dout", dout.data(), dout.size() * 2, false);
    sim::register_buffer("D", D.data(), D.size() * 4, true);
    snprintf(name, sizeof(name), "backward_preprocess<%d>", HS);
    sim::launch(name, CEIL_DIV(B * T * NH, 256), 1, 256, 0, [&]() {
        attention_backward_preprocess_kernel<HS>(D.data(), (const floatX *)dout.data(), (const floatX *)out.data(), B,
                                                 T, NH);
    });
    bad += sim::check_coverage();

    sim::bufs.clear();
    sim::register_buffer("qkv", qkv.data(), qkv.size() * 2, false);
    sim::register_buffer("dout", dout.data(), dout.size() * 2, false);
    sim::register_buffer("lse", lse.data(), lse.size() * 4, false);
    sim::register_buffer("D", D.data(), D.size() * 4, false);
    sim::register_buffer("dqkv", dqkv.data(), dqkv.size() * 2, true);
    snprintf(name, sizeof(name), "backward_dkv<%d>", HS);
    sim::launch(name, B * NH, CEIL_DIV(T, ATTN_BN), ATTN_THREADS, attention_backward_dkv_smem_bytes(HS), [&]() {
        attention_backward_dkv_kernel<HS>((floatX *)dqkv.data(), (const floatX *)dout.data(),
                                          (const floatX *)qkv.data(), lse.data(), D.data(), scale, T, NH);
    });
    snprintf(name, sizeof(name), "backward_dq<%d>", HS);
    sim::launch(name, B * NH, CEIL_DIV(T, ATTN_BN), ATTN_THREADS, attention_backward_dq_smem_bytes(HS), [&]() {
        attention_backward_dq_kernel<HS>((floatX *)dqkv.data(), (const floatX *)dout.data(), (const floatX *)qkv.data(),
                                         lse.data(), D.data(), scale, T, NH);
    });
    bad += (sim::errors - errors_before) + sim::check_coverage();
    if (compare) {
        printf("  backward<%d> B %d T %d NH %d%s\n", HS, B, T, NH,
               order == sim::ORDER_FORWARD ? "" : " (other fiber order)");
        std::vector<float> ref(dqkv.size()), noise(dqkv.size()), got(dqkv.size());
        attention_backward_ref(ref.data(), noise.data(), dout.data(), qkv.data(), out.data(), lse.data(), B, T, C, NH);
        bf16_to_float_array(got.data(), dqkv.data(), dqkv.size());
        bad += ref_compare_dqkv("", ref.data(), got.data(), noise.data(), B, T, C);
    }
    if (res) { *res = dqkv; }
    return bad;
}

// The unfused oracle, kernel by kernel as its launchers call them, on a grid capped at 64 blocks so
// that the grid-stride loops wrap.
template <int HS>
static long sim_unfused(int B, int T, int NH, uint64_t seed) {
    const int C = NH * HS;
    const float scale = 1.0f / sqrtf((float)HS);
    std::vector<uint16_t> qkv, dout;
    attention_make_inputs(qkv, dout, B, T, C, seed);
    std::vector<float> out_ref((size_t)B * T * C), lse_ref((size_t)B * NH * T);
    attention_forward_ref(out_ref.data(), lse_ref.data(), qkv.data(), B, T, C, NH);
    std::vector<uint16_t> out_ref_bf16(out_ref.size());
    for (size_t i = 0; i < out_ref.size(); i++) { out_ref_bf16[i] = float_to_bf16(out_ref[i]); }
    const size_t TT = (size_t)B * NH * T * T;
    const unsigned grid_tt = std::min<size_t>(64, CEIL_DIV(TT, 256)),
                   grid_btc = std::min<size_t>(64, CEIL_DIV((size_t)B * T * C, 256));
    const long errors_before = sim::errors;
    long bad = 0;
    sim::order = sim::ORDER_FORWARD;
    sim::bufs.clear();

    std::vector<float> att(TT, NAN), lse(lse_ref.size(), NAN);
    std::vector<uint16_t> out(out_ref.size(), 0xffff);
    sim::launch("unfused scores", grid_tt, 1, 256, 0, [&]() {
        attention_scores_unfused_kernel(att.data(), (const floatX *)qkv.data(), B, T, NH, HS, scale);
    });
    sim::launch("unfused softmax", CEIL_DIV(B * NH * T, 8), 1, 256, 0,
                [&]() { attention_softmax_unfused_kernel(att.data(), lse.data(), B * NH * T, T); });
    sim::launch("unfused values", grid_btc, 1, 256, 0, [&]() {
        attention_values_unfused_kernel((floatX *)out.data(), att.data(), (const floatX *)qkv.data(), B, T, NH, HS);
    });
    printf("  unfused forward<%d> B %d T %d NH %d\n", HS, B, T, NH);
    std::vector<float> out_f(out.size());
    bf16_to_float_array(out_f.data(), out.data(), out.size());
    bad += ref_compare("out", out_ref.data(), out_f.data(), NULL, (size_t)B * T, C, 0, C, TOL_OUT);
    bad += ref_compare("lse", lse_ref.data(), lse.data(), NULL, (size_t)B * NH, T, 0, T, TOL_LSE);

    std::vector<float> P(TT, NAN), dS(TT, NAN);
    std::vector<uint16_t> dqkv(qkv.size(), 0xffff);
    sim::launch("unfused bwd scores", grid_tt, 1, 256, 0, [&]() {
        attention_backward_scores_unfused_kernel(P.data(), dS.data(), (const floatX *)qkv.data(),
                                                 (const floatX *)out_ref_bf16.data(), (const floatX *)dout.data(),
                                                 lse_ref.data(), B, T, NH, HS, scale);
    });
    sim::launch("unfused bwd dq", grid_btc, 1, 256, 0, [&]() {
        attention_backward_dq_unfused_kernel((floatX *)dqkv.data(), dS.data(), (const floatX *)qkv.data(), B, T, NH, HS,
                                             scale);
    });
    sim::launch("unfused bwd dkv", grid_btc, 1, 256, 0, [&]() {
        attention_backward_dkv_unfused_kernel((floatX *)dqkv.data(), P.data(), dS.data(), (const floatX *)qkv.data(),
                                              (const floatX *)dout.data(), B, T, NH, HS, scale);
    });
    printf("  unfused backward<%d> B %d T %d NH %d\n", HS, B, T, NH);
    std::vector<float> ref(dqkv.size()), noise(dqkv.size()), got(dqkv.size());
    attention_backward_ref(ref.data(), noise.data(), dout.data(), qkv.data(), out_ref_bf16.data(), lse_ref.data(), B, T,
                           C, NH);
    bf16_to_float_array(got.data(), dqkv.data(), dqkv.size());
    bad += ref_compare_dqkv("", ref.data(), got.data(), noise.data(), B, T, C);
    return bad + (sim::errors - errors_before);
}

int main(int argc, char **argv) {
    // optional: a single T to run (quick experiments); default: the full list
    const int only_T = argc > 1 ? atoi(argv[1]) : 0;
    const clock_t start = clock();
    long bad = check_layout_tables();
    const int Ts64[] = {1, 17, 64, 100, 130, 200};
    const int Ts128[] = {1, 70, 130};
    uint64_t seed = 1;

    printf("forward, fused kernels on the simulator vs the fp64 reference\n");
    for (int T : Ts64) {
        if (only_T && T != only_T) { continue; }
        bad += sim_forward<64, 1>(2, T, 2, seed, sim::ORDER_FORWARD, NULL, true);
        bad += sim_forward<64, 2>(2, T, 2, seed, sim::ORDER_FORWARD, NULL, true);
        seed++;
    }
    for (int T : Ts128) {
        if (only_T && T != only_T) { continue; }
        bad += sim_forward<128, 1>(2, T, 2, seed, sim::ORDER_FORWARD, NULL, true);
        seed++;
    }
    printf("backward, fused kernels on the simulator vs the fp64 reference\n");
    for (int T : Ts64) {
        if (only_T && T != only_T) { continue; }
        bad += sim_backward<64>(2, T, 2, seed, sim::ORDER_FORWARD, NULL, true);
        seed++;
    }
    for (int T : Ts128) {
        if (only_T && T != only_T) { continue; }
        bad += sim_backward<128>(2, T, 2, seed, sim::ORDER_FORWARD, NULL, true);
        seed++;
    }

    printf("unfused oracle kernels on the simulator vs the fp64 reference\n");
    if (!only_T || only_T == 100) { bad += sim_unfused<64>(2, 100, 3, 77); }
    if (!only_T || only_T == 70) { bad += sim_unfused<128>(1, 70, 2, 78); }
    if (!only_T || only_T == 1) { bad += sim_unfused<64>(1, 1, 2, 79); }

    printf("schedule independence: bitwise equal results under other fiber orders\n");
    {
        FwdResult a, b, c;
        bad += sim_forward<64, 2>(1, 130, 2, 99, sim::ORDER_FORWARD, &a, false);
        bad += sim_forward<64, 2>(1, 130, 2, 99, sim::ORDER_REVERSE, &b, false);
        bad += sim_forward<64, 2>(1, 130, 2, 99, sim::ORDER_RANDOM, &c, false);
        const bool same = a.out == b.out && a.out == c.out && !memcmp(a.lse.data(), b.lse.data(), a.lse.size() * 4) &&
            !memcmp(a.lse.data(), c.lse.data(), a.lse.size() * 4);
        printf("  forward<64,2> T 130: %s\n", same ? "identical" : "DIFFERENT");
        bad += !same;
        std::vector<uint16_t> x, y, z;
        bad += sim_backward<64>(1, 130, 2, 99, sim::ORDER_FORWARD, &x, false);
        bad += sim_backward<64>(1, 130, 2, 99, sim::ORDER_REVERSE, &y, false);
        bad += sim_backward<64>(1, 130, 2, 99, sim::ORDER_RANDOM, &z, false);
        printf("  backward<64> T 130: %s\n", x == y && x == z ? "identical" : "DIFFERENT");
        bad += !(x == y && x == z);
    }

    printf("ldmatrix bank conflicts (8-row phases needing more than one wavefront)\n");
    for (auto &kv : sim::ldsm_stats) {
        printf("  %-24s %ld phases, %ld conflicted, worst %d wavefronts\n", kv.first.c_str(), kv.second.phases,
               kv.second.conflicted, kv.second.max_wavefronts);
        bad += kv.second.conflicted != 0;
    }
    for (char *stack : sim::stacks) { free(stack); }
    printf("simulator: %ld errors in total, %.1f s\n", bad, (double)(clock() - start) / CLOCKS_PER_SEC);
    printf(bad ? "attention_sim: FAILED\n" : "attention_sim: all checks passed\n");
    return bad ? 1 : 0;
}
