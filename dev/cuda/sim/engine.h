/*
 * Host simulator, the engine: runs a kernel launch on the CPU, every CUDA thread a fiber (its own stack).
 * cuda_runtime.h puts the CUDA API on top of it, ptx.h the checked PTX-level operations; see
 * dev/cuda/README.md, "Host simulator".
 *
 * Execution model: a launch runs its blocks one after another; within a block every thread runs
 * until it reaches a barrier or a warp collective or exits, then the scheduler completes what can
 * complete and resumes the runnable threads:
 *   barrier (__syncthreads)  completes when every thread of the block that has not exited arrived
 *   warp collective          completes when all 32 lanes arrived with the same operation; an exited
 *                            lane, a partial warp or lanes at different operations are errors
 *   deadlock (no thread can run) is an error, reported with what each warp waits at
 * Every completed barrier advances the block's epoch, and every completed barrier or __syncwarp
 * the warp's epoch: ptx.h orders shared-memory accesses by them.
 * Threads and blocks run in forward, reverse or random order (SIM_ORDER=forward|reverse|random, or
 * sim::order set by a test): results that depend on the interleaving (a missing barrier) differ
 * between the orders. Random order also runs warps at different speeds.
 * Errors are counted in sim::errors (the first 20 printed, naming kernel, block and thread); a
 * program that saw any exits non-zero, whatever it checks itself.
 */
#ifndef SIM_ENGINE_H
#define SIM_ENGINE_H

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>
#include <unistd.h>
#include <functional>
#include <string>
#include <vector>
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#define SIM_ASAN 1
#else
#define SIM_ASAN 0
#endif

struct dim3 {
    unsigned int x, y, z;
    dim3(unsigned int x_ = 1, unsigned int y_ = 1, unsigned int z_ = 1) : x(x_), y(y_), z(z_) {}
};
typedef dim3 uint3;

static dim3 threadIdx, blockIdx, blockDim, gridDim;  // set by the scheduler before a fiber runs

namespace sim {

// ----------------------------------------------------------------------------
// errors

enum State { RUNNABLE, AT_BARRIER, AT_WARP, DONE };
// where a fiber or the scheduler continues when switched to (context_switch below)
struct Context {
#if defined(__x86_64__)
    void *sp;  // its stack pointer, its registers pushed below it
#else
    ucontext_t uc;
#endif
};
struct Fiber {
    Context ctx;
    bool parked;   // its last body() returned: the next block's thread of this slot continues it
    int tid;
    State state;
    void *fake_stack;  // AddressSanitizer's state of this fiber while it is switched out
};

static long errors = 0;
static const char *kernel_name = NULL;  // of the launch running now
static Fiber *cur = NULL;               // the running thread; NULL in the scheduler and on the host

static inline void error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static inline void error(const char *fmt, ...) {
    if (errors < 20) {
        char msg[512];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        if (kernel_name == NULL) {
            printf("  SIM ERROR: %s\n", msg);
        } else if (cur == NULL) {
            printf("  SIM ERROR [%s, block (%u,%u,%u)]: %s\n", kernel_name, blockIdx.x, blockIdx.y, blockIdx.z, msg);
        } else {
            printf("  SIM ERROR [%s, block (%u,%u,%u), thread %d]: %s\n", kernel_name, blockIdx.x, blockIdx.y,
                   blockIdx.z, cur->tid, msg);
        }
    }
    errors++;
}

// a program that ran into simulator errors fails even where it checks no result itself (the trainer)
struct ExitCheck {
    ~ExitCheck() {
        if (errors > 0) {
            fprintf(stderr, "simulator: %ld error(s) (races, bounds, divergent collectives, deadlocks, bad launches)\n",
                    errors);
            fflush(NULL);
            _exit(1);
        }
    }
};
static ExitCheck exit_check;

// ----------------------------------------------------------------------------
// the order in which threads and blocks run

enum Order { FORWARD, REVERSE, RANDOM };
static inline Order order_from_env(void) {
    const char *o = getenv("SIM_ORDER");
    return (o == NULL || strcmp(o, "forward") == 0) ? FORWARD : strcmp(o, "reverse") == 0 ? REVERSE : RANDOM;
}
static Order order = order_from_env();
static uint64_t order_state = 0x9e3779b97f4a7c15ull;
static inline uint64_t order_next(void) {  // xorshift64
    order_state ^= order_state << 13;
    order_state ^= order_state >> 7;
    order_state ^= order_state << 17;
    return order_state;
}

// ----------------------------------------------------------------------------
// warp collectives. Each lane deposits up to 10 words of operands and waits; when all 32 lanes of
// the warp have arrived with the same operation and argument, the scheduler runs the operation's
// exec once for the warp, which leaves up to 4 words of results per lane.

struct LaneIO {
    uint32_t in[32][10], out[32][4];
};
typedef void (*WarpExec)(int warp, int arg, LaneIO &io);
struct WarpOp {
    const char *name;
    WarpExec exec;
};
struct Warp {
    const WarpOp *op[32];
    int arg[32];
    LaneIO io;
};

static std::vector<Fiber> fibers;
static std::vector<Warp> warps;
static int block_threads = 0;
static uint64_t block_serial = 0;  // counts blocks run, from 1
static int block_epoch = 0;        // completed barriers of this block
static std::vector<int> warp_epoch;  // per warp: completed barriers and __syncwarps of this block

static void exec_syncwarp(int w, int, LaneIO &) { warp_epoch[w]++; }
static void exec_shfl_xor(int, int arg, LaneIO &io) {
    for (int l = 0; l < 32; l++) { io.out[l][0] = io.in[l ^ (arg & 31)][0]; }
}
static const WarpOp OP_SYNCWARP = {"__syncwarp", exec_syncwarp};
static const WarpOp OP_SHFL_XOR = {"__shfl_xor_sync", exec_shfl_xor};

// ----------------------------------------------------------------------------
// fibers

static const size_t STACK_BYTES = 256 * 1024;
static std::vector<char *> stacks;
static Context sched_ctx;
static void *sched_fake_stack = NULL;
static const void *sched_stack_bottom = NULL;
static size_t sched_stack_size = 0;
static std::function<void()> body;
static unsigned char *dynamic_smem = NULL;
static size_t dynamic_smem_bytes = 0;
static void (*block_end_hook)(void) = NULL;  // ptx.h's end-of-block checks

// the fiber stacks live for the whole process; released at exit so LeakSanitizer stays quiet
struct StackRelease {
    ~StackRelease() {
        for (char *p : stacks) { free(p); }
        stacks.clear();
    }
};
static StackRelease stack_release;

static inline void set_thread_index(int tid) {
    threadIdx.x = tid % blockDim.x;
    threadIdx.y = (tid / blockDim.x) % blockDim.y;
    threadIdx.z = tid / (blockDim.x * blockDim.y);
}

// Switching. Every switch is context_switch(): on x86-64 a few instructions that save the
// callee-saved registers and the stack pointer and load the other context's; elsewhere ucontext's
// swapcontext. glibc's swapcontext saves and restores the signal mask, a system call that took half
// of the simulator's time; its _setjmp/_longjmp that replaced it then still took a fifth (pointer
// mangling, the cleanup-handler walk of _longjmp_unwind); and AddressSanitizer's wrappers of both
// clear stack shadow at every switch (most of a sanitized run's time, and the redzones of the
// locals of a thread that waited at a barrier were gone, its overflows unseen: sim_asan_check.cpp).
// A fiber whose body() returned parks on its stack instead of ending: the same slot's thread of
// the next block continues it, so a context is made once per slot, not once per thread of every
// block. Each switch is announced to AddressSanitizer (a no-op in other builds): the stack it goes
// to, and its fake stack.
#if SIM_ASAN
#define SIM_SWITCH_BEGIN(fake_save, bottom, size) __sanitizer_start_switch_fiber(fake_save, bottom, size)
#define SIM_SWITCH_END(fake, old_bottom, old_size) __sanitizer_finish_switch_fiber(fake, old_bottom, old_size)
#else
#define SIM_SWITCH_BEGIN(fake_save, bottom, size) ((void)0)
#define SIM_SWITCH_END(fake, old_bottom, old_size) ((void)0)
#endif

#if defined(__x86_64__)
// sim_context_switch(&from->sp, to->sp): pushes the System V ABI's callee-saved registers on the
// running stack, saves its pointer, loads to's and pops to's registers; the ret continues to.
// Weak: each simulator program is one translation unit, but two would not clash.
extern "C" void sim_context_switch(void **save_sp, void *load_sp);
asm(R"(
    .text
    .weak sim_context_switch
    .type sim_context_switch, @function
sim_context_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size sim_context_switch, .-sim_context_switch
)");
// a context that starts entry() on the stack [stack, stack + bytes): six zero registers for the
// pops, entry as the return address, and below the top a zero word as entry's own return address
// (entry never returns), so entry starts with the stack aligned as after a call
static inline void context_start(Context *c, char *stack, size_t bytes, void (*entry)(void)) {
#if SIM_ASAN
    ASAN_UNPOISON_MEMORY_REGION(stack, bytes);  // the redzones of the frames a restarted slot leaves
#endif
    uintptr_t top = ((uintptr_t)stack + bytes) & ~(uintptr_t)15;
    void **sp = (void **)top;
    *--sp = NULL;              // entry's return address: none
    *--sp = (void *)entry;     // where the ret of the first switch goes
    for (int i = 0; i < 6; i++) { *--sp = NULL; }  // rbp rbx r12-r15
    c->sp = sp;
}
static inline void context_switch(Context *from, Context *to) { sim_context_switch(&from->sp, to->sp); }
#else
static inline void context_start(Context *c, char *stack, size_t bytes, void (*entry)(void)) {
    getcontext(&c->uc);
    c->uc.uc_stack.ss_sp = stack;
    c->uc.uc_stack.ss_size = bytes;
    c->uc.uc_link = NULL;  // entry never returns
    makecontext(&c->uc, entry, 0);
}
static inline void context_switch(Context *from, Context *to) { swapcontext(&from->uc, &to->uc); }
#endif

// fiber side: give control back to the scheduler; continues when resume() comes back to it
static inline void yield(void) {
    SIM_SWITCH_BEGIN(&cur->fake_stack, sched_stack_bottom, sched_stack_size);
    context_switch(&cur->ctx, &sched_ctx);
    SIM_SWITCH_END(cur->fake_stack, NULL, NULL);
}

static void fiber_entry(void) {
    SIM_SWITCH_END(NULL, &sched_stack_bottom, &sched_stack_size);  // the scheduler's stack, to go back to
    for (;;) {
        body();
        cur->state = DONE;
        cur->parked = true;
        yield();
        cur->parked = false;  // resumed for a new block, as thread cur->tid
    }
}

// scheduler side: run one fiber until it yields or finishes
static inline void resume(Fiber *f) {
    cur = f;
    set_thread_index(f->tid);
    SIM_SWITCH_BEGIN(&sched_fake_stack, stacks[f->tid], STACK_BYTES);
    context_switch(&sched_ctx, &f->ctx);
    SIM_SWITCH_END(sched_fake_stack, NULL, NULL);
    cur = NULL;
}

// thread side of __syncthreads
static inline void block_barrier(void) {
    cur->state = AT_BARRIER;
    yield();
}

// thread side of a warp collective: deposits nin words, returns this lane's 4 result words (valid
// until its next collective)
static inline const uint32_t *warp_collective(const WarpOp *op, int arg, const uint32_t *in, int nin) {
    const int w = cur->tid / 32, l = cur->tid % 32;
    Warp &wp = warps[w];
    wp.op[l] = op;
    wp.arg[l] = arg;
    if (nin > 0) { memcpy(wp.io.in[l], in, nin * sizeof(uint32_t)); }
    cur->state = AT_WARP;
    yield();
    return wp.io.out[l];
}

// complete the warp collectives whose 32 lanes have all arrived; returns whether any completed
static inline bool complete_warps(void) {
    bool progress = false;
    for (int w = 0; w * 32 < block_threads; w++) {
        const int lanes = block_threads - w * 32 < 32 ? block_threads - w * 32 : 32;
        int arrived = 0, done = 0;
        for (int l = 0; l < lanes; l++) {
            arrived += fibers[w * 32 + l].state == AT_WARP;
            done += fibers[w * 32 + l].state == DONE;
        }
        if (arrived == 0) { continue; }
        Warp &wp = warps[w];
        if (arrived == 32) {
            bool same = true;
            for (int l = 1; l < 32 && same; l++) {
                if (wp.op[l] != wp.op[0] || wp.arg[l] != wp.arg[0]) {
                    error("warp %d: lanes reached different collectives (lane 0: %s %d, lane %d: %s %d)", w,
                          wp.op[0]->name, wp.arg[0], l, wp.op[l]->name, wp.arg[l]);
                    same = false;
                }
            }
            if (same) { wp.op[0]->exec(w, wp.arg[0], wp.io); }
            progress = true;
        } else if (arrived + done == lanes) {
            // nobody else will come: exited lanes or a partial warp in a full-mask collective
            error("warp %d: full-mask warp collective reached by %d lanes (%d exited, warp of %d lanes)", w, arrived, done,
                  lanes);
            progress = true;
        } else {
            continue;
        }
        for (int l = 0; l < lanes; l++) {
            if (fibers[w * 32 + l].state == AT_WARP) { fibers[w * 32 + l].state = RUNNABLE; }
        }
    }
    return progress;
}

static inline void deadlock(int live, int at_barrier) {
    error("deadlock: %d threads live, %d at __syncthreads, the rest at warp collectives", live, at_barrier);
    for (int w = 0; w * 32 < block_threads; w++) {
        for (int t = w * 32; t < block_threads && t < w * 32 + 32; t++) {
            if (fibers[t].state == DONE) { continue; }
            printf("    warp %d: thread %d waits at %s\n", w, t,
                   fibers[t].state == AT_BARRIER ? "__syncthreads" : warps[w].op[t % 32]->name);
            break;
        }
    }
    for (int t = 0; t < block_threads; t++) {  // let them run on, the error is counted
        if (fibers[t].state != DONE) { fibers[t].state = RUNNABLE; }
    }
}

static inline void run_block(void) {
    const int nthreads = block_threads, nwarps = (nthreads + 31) / 32;
    if ((int)fibers.size() < nthreads) {
        for (Fiber &f : fibers) { f.parked = false; }  // moved by the resize: each starts anew on its stack
        fibers.resize(nthreads);
        while ((int)stacks.size() < nthreads) { stacks.push_back((char *)malloc(STACK_BYTES)); }
        warps.resize(nwarps);
    }
    for (int t = 0; t < nthreads; t++) {
        Fiber &f = fibers[t];
        f.tid = t;
        f.state = RUNNABLE;
        if (f.parked) { continue; }  // started: resume() continues it at its park
        f.fake_stack = NULL;
        context_start(&f.ctx, stacks[t], STACK_BYTES, fiber_entry);
    }
    if (dynamic_smem_bytes > 0) { memset(dynamic_smem, 0xff, dynamic_smem_bytes); }  // NaN in bf16 and fp32
    block_serial++;
    block_epoch = 0;
    warp_epoch.assign(nwarps, 0);
    std::vector<int> perm(nthreads);
    std::vector<char> warp_runs(nwarps, 1);
    // random order: each warp of the block gets a speed (runs in a pass with probability 1, 1/2
    // or 1/16), so warps drift many barrier-free steps apart; a missing __syncthreads then lets a
    // fast warp overwrite shared memory a slow one has not read yet
    std::vector<unsigned> speed(nwarps, 0);
    if (order == RANDOM) {
        for (int w = 0; w < nwarps; w++) { speed[w] = (unsigned)(order_next() % 3); }
    }
    for (;;) {
        for (int i = 0; i < nthreads; i++) { perm[i] = order == REVERSE ? nthreads - 1 - i : i; }
        if (order == RANDOM) {
            for (int i = nthreads - 1; i > 0; i--) { std::swap(perm[i], perm[(int)(order_next() % (uint64_t)(i + 1))]); }
            for (int w = 0; w < nwarps; w++) {
                const uint64_t r = order_next();
                warp_runs[w] = speed[w] == 0 ? 1 : speed[w] == 1 ? (r & 1) : (r & 15) == 0;
            }
        }
        bool ran = false;
        for (int pass = 0; pass < 2 && !ran; pass++) {  // a second pass without skipping if nothing ran
            for (int i = 0; i < nthreads; i++) {
                Fiber &f = fibers[perm[i]];
                if (f.state == RUNNABLE && (pass == 1 || warp_runs[f.tid / 32])) {
                    resume(&f);
                    ran = true;
                }
            }
        }
        int live = 0, at_barrier = 0;
        for (int t = 0; t < nthreads; t++) {
            live += fibers[t].state != DONE;
            at_barrier += fibers[t].state == AT_BARRIER;
        }
        if (live == 0) { break; }
        bool progress = complete_warps();
        if (at_barrier == live) {
            for (int t = 0; t < nthreads; t++) {
                if (fibers[t].state == AT_BARRIER) { fibers[t].state = RUNNABLE; }
            }
            block_epoch++;
            for (int &e : warp_epoch) { e++; }  // a barrier orders the lanes of each warp too
            progress = true;
        }
        if (!ran && !progress) { deadlock(live, at_barrier); }
    }
    if (block_end_hook) { block_end_hook(); }
}

// ----------------------------------------------------------------------------
// launches

// "attention_forward_kernel<64, 2>": the kernel's name, from the compiler's signature of this function
template <auto K>
static const char *name_of(void) {
    static const std::string name = [](std::string s) {
        const size_t at = s.find("K = "), from = at == std::string::npos ? 0 : at + 4;
        return s.substr(from, s.find_first_of(";]", from) - from);
    }(__PRETTY_FUNCTION__);
    return name.c_str();
}

// run body() as a grid of blocks of `block` threads with `smem_bytes` of dynamic shared memory; the
// caller checked the launch configuration
static inline void run_grid(const char *name, dim3 grid, dim3 block, size_t smem_bytes) {
    kernel_name = name;
    unsigned char *smem = (unsigned char *)aligned_alloc(128, (smem_bytes + 127) / 128 * 128 + 128);
    dynamic_smem = smem;
    dynamic_smem_bytes = smem_bytes;
    gridDim = grid;
    blockDim = block;
    block_threads = (int)(block.x * block.y * block.z);
    const long blocks = (long)grid.x * grid.y * grid.z;
    for (long i = 0; i < blocks; i++) {
        const long b = order == REVERSE ? blocks - 1 - i : i;
        blockIdx.x = (unsigned int)(b % grid.x);
        blockIdx.y = (unsigned int)((b / grid.x) % grid.y);
        blockIdx.z = (unsigned int)(b / ((long)grid.x * grid.y));
        run_block();
    }
    body = nullptr;
    free(smem);
    dynamic_smem = NULL;
    dynamic_smem_bytes = 0;
    kernel_name = NULL;
}

}  // namespace sim

#endif  // SIM_ENGINE_H
