/*
 * Host simulator, checked PTX: CPU versions of the PTX-level operations of hand-written kernels,
 * emulated per the PTX ISA and checked on every access, on the threads and collectives of engine.h.
 * sim/attention_ptx.cuh maps the device primitives of llmc/cuda/attention_ptx.cuh onto these.
 *
 * Emulated:
 * - mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32: the fragment layouts of the PTX ISA's
 *   "Matrix Fragments for mma.m16n8k16 with floating point type" (frag_a/frag_b/frag_c below,
 *   written from the ISA, independently of the kernels' helpers); products exact, sums in fp64.
 * - ldmatrix.sync.aligned.m8n8.x4{.trans}.shared.b16: lane L gives row L % 8 of matrix L / 8; lane L
 *   receives row L / 4, elements 2 (L % 4), 2 (L % 4) + 1 of each matrix (of its transpose with .trans).
 * - cp.async (16 and 4 bytes, zero fill when the source size is 0): lands at the issuing thread's
 *   first cp.async.wait_group 0 after its cp.async.commit_group.
 * Checked:
 * - dynamic shared memory: bounds and alignment; reads of never-written words; races: a read or
 *   write of a word last written, or a write of a word last read, by another thread with no
 *   __syncthreads between (within one warp: no __syncwarp); any access to a word whose cp.async is
 *   in flight; a block that ends with a cp.async in flight;
 * - global memory: aligned, and inside a device allocation or a buffer a test watches (watch());
 *   watched inputs are never written, and every byte of a watched output is written exactly once
 *   between watch() and check_outputs();
 * - no NaN or infinity enters an mma;
 * - ldmatrix bank conflicts are counted per kernel (wavefronts per 8-row phase: ldsm_stats).
 * The race records keep one entry per warp: blocks of at most 256 threads.
 */
#ifndef SIM_PTX_H
#define SIM_PTX_H

#include <math.h>
#include <stdint.h>
#include <string.h>
#include <map>
#include <string>
#include <vector>

#include "cuda_runtime.h"

namespace sim {

// ----------------------------------------------------------------------------
// global memory

enum Access { INPUT, OUTPUT };
struct Watched {
    std::string name;
    const uint8_t *base;
    size_t bytes;
    Access access;
    std::vector<uint8_t> writes;  // per byte, saturating at 255
};
static std::vector<Watched> watched;

// from now on, writes to [p, p + bytes) are errors (INPUT) or counted (OUTPUT)
static inline void watch(const void *p, size_t bytes, const char *name, Access access) {
    watched.push_back({name, (const uint8_t *)p, bytes, access, std::vector<uint8_t>(access == OUTPUT ? bytes : 0, 0)});
}

// every byte of every watched output written exactly once since watch(); forgets the watches.
// Returns the number of outputs that fail.
static inline long check_outputs(void) {
    long bad = 0;
    for (const Watched &b : watched) {
        size_t never = 0, twice = 0, first = b.bytes;
        for (size_t i = 0; i < b.writes.size(); i++) {
            if (b.writes[i] != 1) {
                (b.writes[i] == 0 ? never : twice)++;
                if (first == b.bytes) { first = i; }
            }
        }
        if (never || twice) {
            printf("  SIM ERROR: output %s: %zu bytes never written, %zu written more than once (first at byte %zu)\n",
                   b.name.c_str(), never, twice, first);
            bad++;
        }
    }
    watched.clear();
    return bad;
}

static inline bool in_device_alloc(const void *p, size_t n) {
    auto it = device_allocs.upper_bound((uintptr_t)p);
    if (it == device_allocs.begin()) { return false; }
    --it;
    return (uintptr_t)p + n <= it->first + it->second;
}

static inline bool global_ok(const void *p, size_t n, bool write, const char *what) {
    if ((uintptr_t)p % n != 0) {
        error("%s: global address %p not %zu-byte aligned", what, p, n);
        return false;
    }
    for (Watched &b : watched) {
        const uint8_t *q = (const uint8_t *)p;
        if (q < b.base || q + n > b.base + b.bytes) { continue; }
        if (write && b.access == INPUT) {
            error("%s: writes the input buffer %s", what, b.name.c_str());
            return false;
        }
        for (size_t i = 0; write && i < n; i++) {
            uint8_t &count = b.writes[q - b.base + i];
            if (count < 255) { count++; }
        }
        return true;
    }
    if (!in_device_alloc(p, n)) {
        error("%s: global %s of %zu bytes at %p is outside every device allocation", what, write ? "write" : "read", n,
              p);
        return false;
    }
    return true;
}

// ----------------------------------------------------------------------------
// dynamic shared memory: a record per 4-byte word, reset at the first checked access of a block

static const int PTX_MAX_WARPS = 8;
struct Word {
    int32_t w_be, w_we;  // block epoch and writer-warp epoch of the last write
    int16_t w_tid;       // the last writer
    int16_t pending;     // the thread whose cp.async to this word is in flight, or -1
    bool written;
    int32_t r_be[PTX_MAX_WARPS], r_we[PTX_MAX_WARPS];  // per warp: epochs of its last reads
    int8_t r_lane[PTX_MAX_WARPS];  // lane of those reads, -1 a whole-warp read (ldmatrix), -2 several lanes
};
struct Pending {  // a cp.async in flight
    uint32_t off;
    int bytes;
    bool committed;
    uint8_t data[16];
};
static std::vector<Word> shadow;
static std::vector<std::vector<Pending>> pending;  // per thread of the block
static uint64_t shadow_block = 0;                  // the block_serial the records belong to

static inline void shadow_begin_block(void) {
    if (shadow_block == block_serial) { return; }
    shadow_block = block_serial;
    if (block_threads > 32 * PTX_MAX_WARPS) {
        error("checked shared memory: %d threads per block, at most %d simulated", block_threads, 32 * PTX_MAX_WARPS);
        exit(1);
    }
    Word fresh;
    memset(&fresh, 0, sizeof(fresh));
    fresh.w_be = -1;
    fresh.pending = -1;
    for (int w = 0; w < PTX_MAX_WARPS; w++) { fresh.r_be[w] = -1; }
    shadow.assign(dynamic_smem_bytes / 4 + 1, fresh);
    pending.assign(block_threads, std::vector<Pending>());
}

// the offset of [p, p + n) in the dynamic shared memory, if inside it and n-byte aligned (lane: of
// a collective's row address, for the message)
static inline bool smem_offset(const void *p, size_t n, const char *what, uint32_t *off, int lane = -1) {
    shadow_begin_block();
    const uint8_t *q = (const uint8_t *)p;
    const bool inside = q >= dynamic_smem && q + n <= dynamic_smem + dynamic_smem_bytes;
    *off = (uint32_t)(q - dynamic_smem);
    if (inside && *off % n == 0) { return true; }
    char from[24] = "";
    if (lane >= 0) { snprintf(from, sizeof(from), " (lane %d)", lane); }
    if (!inside) {
        error("%s%s: shared address %p (%ld bytes from the base) outside the %zu-byte dynamic allocation", what, from,
              p, (long)(q - dynamic_smem), dynamic_smem_bytes);
    } else {
        error("%s%s: shared offset %u not %zu-byte aligned", what, from, *off, n);
    }
    return false;
}

// is an access by `tid` (collective: the whole warp) ordered after the last write of s?
static inline bool after_write(const Word &s, int tid, bool collective) {
    if (s.w_be != block_epoch) { return true; }  // a __syncthreads since the write
    const int w = tid >> 5;
    if ((s.w_tid >> 5) != w) { return false; }
    if (s.w_we != warp_epoch[w]) { return true; }  // a __syncwarp since the write
    return !collective && s.w_tid == tid;
}

static inline void shadow_read(uint32_t off, int bytes, int tid, bool collective, const char *what) {
    const int w = tid >> 5, lane = collective ? -1 : (tid & 31);
    for (uint32_t i = off / 4; i < (off + bytes + 3) / 4; i++) {
        Word &s = shadow[i];
        if (s.pending >= 0) {
            error("%s (warp %d) reads shared byte %u while thread %d's cp.async to it is in flight", what, w, i * 4,
                  s.pending);
        } else if (!s.written) {
            error("%s (warp %d) reads shared byte %u, never written", what, w, i * 4);
        } else if (!after_write(s, tid, collective)) {
            error("%s (warp %d) reads shared byte %u written by thread %d with no barrier between", what, w, i * 4,
                  s.w_tid);
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

static inline void shadow_check_write(uint32_t off, int bytes, int tid, const char *what) {
    const int w = tid >> 5, lane = tid & 31;
    for (uint32_t i = off / 4; i < (off + bytes + 3) / 4; i++) {
        Word &s = shadow[i];
        if (s.pending >= 0) {
            error("%s writes shared byte %u while thread %d's cp.async to it is in flight", what, i * 4, s.pending);
        }
        if (s.written && !after_write(s, tid, false)) {
            error("%s writes shared byte %u last written by thread %d with no barrier between", what, i * 4, s.w_tid);
        }
        for (int rw = 0; rw < PTX_MAX_WARPS; rw++) {
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

static inline void shadow_record_write(uint32_t off, int bytes, int tid) {
    for (uint32_t i = off / 4; i < (off + bytes + 3) / 4; i++) {
        Word &s = shadow[i];
        s.written = true;
        s.w_be = block_epoch;
        s.w_we = warp_epoch[tid >> 5];
        s.w_tid = (int16_t)tid;
    }
}

// the engine's end-of-block hook: no thread may leave a cp.async in flight
static inline void ptx_block_end(void) {
    if (shadow_block != block_serial) { return; }  // no checked access in this block
    for (int t = 0; t < (int)pending.size(); t++) {
        if (!pending[t].empty()) { error("thread %d exits with %zu cp.async still in flight", t, pending[t].size()); }
    }
}
static struct PtxHook {
    PtxHook() { block_end_hook = ptx_block_end; }
} ptx_hook;

// ----------------------------------------------------------------------------
// mma.m16n8k16 fragment layouts (g = lane >> 2, t = lane % 4)

// A (16x16, row): register reg (0..3) of lane L holds A[row][col] (low half) and A[row][col + 1]
static inline void frag_a(int L, int reg, int *row, int *col) {
    *row = (L >> 2) + ((reg & 1) ? 8 : 0);
    *col = 2 * (L & 3) + ((reg & 2) ? 8 : 0);
}
// B (16x8, col): register reg (0, 1) of lane L holds B[k][n] (low half) and B[k + 1][n]
static inline void frag_b(int L, int reg, int *k, int *n) {
    *k = 2 * (L & 3) + (reg ? 8 : 0);
    *n = L >> 2;
}
// C and D (16x8, fp32): element i (0..3) of lane L is C[row][col]
static inline void frag_c(int L, int i, int *row, int *col) {
    *row = (L >> 2) + ((i & 2) ? 8 : 0);
    *col = 2 * (L & 3) + (i & 1);
}

static inline float bf16_bits(uint32_t u) { return __uint_as_float(u << 16); }

// operands per lane: a[0..3], b0, b1, c[0..3] (fp32 bits); results: d[0..3]
static void exec_mma(int, int, LaneIO &io) {
    double A[16][16], Bm[16][8], Cm[16][8];
    for (int L = 0; L < 32; L++) {
        int r, c;
        for (int reg = 0; reg < 4; reg++) {
            frag_a(L, reg, &r, &c);
            A[r][c] = bf16_bits(io.in[L][reg] & 0xffff);
            A[r][c + 1] = bf16_bits(io.in[L][reg] >> 16);
        }
        for (int reg = 0; reg < 2; reg++) {
            frag_b(L, reg, &r, &c);
            Bm[r][c] = bf16_bits(io.in[L][4 + reg] & 0xffff);
            Bm[r + 1][c] = bf16_bits(io.in[L][4 + reg] >> 16);
        }
        for (int i = 0; i < 4; i++) {
            frag_c(L, i, &r, &c);
            Cm[r][c] = __uint_as_float(io.in[L][6 + i]);
        }
    }
    bool finite = true;
    for (int i = 0; i < 16; i++) {
        for (int k = 0; k < 16; k++) { finite = finite && isfinite(A[i][k]); }
        for (int j = 0; j < 8; j++) { finite = finite && isfinite(Cm[i][j]) && isfinite(Bm[i][j]); }
    }
    if (!finite) { error("mma operand is NaN or infinite"); }
    for (int L = 0; L < 32; L++) {
        for (int i = 0; i < 4; i++) {
            int r, c;
            frag_c(L, i, &r, &c);
            double acc = Cm[r][c];
            for (int k = 0; k < 16; k++) { acc += A[r][k] * Bm[k][c]; }
            io.out[L][i] = __float_as_uint((float)acc);
        }
    }
}
static const WarpOp OP_MMA = {"mma.m16n8k16", exec_mma};

// ----------------------------------------------------------------------------
// ldmatrix

struct LdsmStats {
    long phases = 0, conflicted = 0;
    int max_wavefronts = 0;
};
static std::map<std::string, LdsmStats> ldsm_stats;  // per kernel

// wavefronts of one 8-row phase: the most distinct 4-byte words any bank serves (a row is 4 words)
static inline int ldsm_wavefronts(const uint32_t (&row_off)[8]) {
    int bank_words[32][8], bank_count[32] = {0}, wavefronts = 1;
    for (int r = 0; r < 8; r++) {
        for (int k = 0; k < 4; k++) {
            const int word = (int)(row_off[r] / 4) + k, bank = word % 32;
            bool seen = false;
            for (int i = 0; i < bank_count[bank]; i++) { seen = seen || bank_words[bank][i] == word; }
            if (!seen) { bank_words[bank][bank_count[bank]++] = word; }
            wavefronts = bank_count[bank] > wavefronts ? bank_count[bank] : wavefronts;
        }
    }
    return wavefronts;
}

// operands per lane: a row address (two words); results: one register per matrix
static void exec_ldsm(int w, int trans, LaneIO &io) {
    const char *what = trans ? "ldmatrix.trans" : "ldmatrix";
    uint16_t M[4][8][8];
    LdsmStats &st = ldsm_stats[kernel_name];
    for (int m = 0; m < 4; m++) {
        uint32_t row_off[8];
        for (int r = 0; r < 8; r++) {
            const int L = m * 8 + r;
            const void *p = (const void *)(((uintptr_t)io.in[L][1] << 32) | io.in[L][0]);
            row_off[r] = 0;
            memset(M[m][r], 0, 16);
            if (!smem_offset(p, 16, what, &row_off[r], L)) { continue; }
            shadow_read(row_off[r], 16, w * 32, true, what);
            memcpy(M[m][r], dynamic_smem + row_off[r], 16);
        }
        const int wavefronts = ldsm_wavefronts(row_off);
        st.phases++;
        st.conflicted += wavefronts > 1;
        st.max_wavefronts = wavefronts > st.max_wavefronts ? wavefronts : st.max_wavefronts;
    }
    for (int L = 0; L < 32; L++) {
        const int g = L >> 2, t = L & 3;
        for (int m = 0; m < 4; m++) {
            const uint16_t lo = trans ? M[m][2 * t][g] : M[m][g][2 * t];
            const uint16_t hi = trans ? M[m][2 * t + 1][g] : M[m][g][2 * t + 1];
            io.out[L][m] = (uint32_t)lo | ((uint32_t)hi << 16);
        }
    }
}
static const WarpOp OP_LDSM = {"ldmatrix", exec_ldsm};

// ----------------------------------------------------------------------------
// what a thread calls

static inline void ldmatrix_x4(uint32_t (&r)[4], const void *p, bool trans) {
    const uint32_t in[2] = {(uint32_t)(uintptr_t)p, (uint32_t)((uintptr_t)p >> 32)};
    const uint32_t *out = warp_collective(&OP_LDSM, trans, in, 2);
    for (int i = 0; i < 4; i++) { r[i] = out[i]; }
}

static inline void mma_m16n8k16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    const uint32_t in[10] = {a[0], a[1], a[2], a[3], b0, b1, __float_as_uint(c[0]), __float_as_uint(c[1]),
                             __float_as_uint(c[2]), __float_as_uint(c[3])};
    const uint32_t *out = warp_collective(&OP_MMA, 0, in, 10);
    for (int i = 0; i < 4; i++) { c[i] = __uint_as_float(out[i]); }
}

// cp.async of `bytes` (4 or 16) from global src to shared dst; 16 zero bytes if !valid (nothing read)
static inline void cp_async(void *dst, const void *src, int bytes, bool valid) {
    Pending p;
    if (!smem_offset(dst, bytes, "cp.async destination", &p.off)) { return; }
    p.bytes = bytes;
    p.committed = false;
    memset(p.data, 0, sizeof(p.data));
    if (valid && global_ok(src, bytes, false, "cp.async source")) { memcpy(p.data, src, bytes); }
    shadow_check_write(p.off, bytes, cur->tid, "cp.async");
    for (uint32_t i = p.off / 4; i < (p.off + bytes + 3) / 4; i++) { shadow[i].pending = (int16_t)cur->tid; }
    pending[cur->tid].push_back(p);
}

static inline void cp_async_commit(void) {
    shadow_begin_block();
    for (Pending &p : pending[cur->tid]) { p.committed = true; }
}

// cp.async.wait_group 0: every committed copy of this thread lands; uncommitted ones stay in flight
static inline void cp_async_wait_all(void) {
    shadow_begin_block();
    std::vector<Pending> still;
    for (const Pending &p : pending[cur->tid]) {
        if (!p.committed) {
            still.push_back(p);
            continue;
        }
        for (uint32_t i = p.off / 4; i < (p.off + p.bytes + 3) / 4; i++) { shadow[i].pending = -1; }
        memcpy(dynamic_smem + p.off, p.data, p.bytes);
        shadow_record_write(p.off, p.bytes, cur->tid);
    }
    pending[cur->tid] = still;
}

template <class T>
static inline void st_shared(void *p, T v, const char *what) {
    uint32_t off;
    if (!smem_offset(p, sizeof(T), what, &off)) { return; }
    shadow_check_write(off, sizeof(T), cur->tid, what);
    memcpy(dynamic_smem + off, &v, sizeof(T));
    shadow_record_write(off, sizeof(T), cur->tid);
}

template <class T>
static inline T ld_shared(const void *p, const char *what) {
    T v;
    uint32_t off;
    memset(&v, 0, sizeof(T));
    if (smem_offset(p, sizeof(T), what, &off)) {
        shadow_read(off, sizeof(T), cur->tid, false, what);
        memcpy(&v, dynamic_smem + off, sizeof(T));
    }
    return v;
}

template <class T>
static inline void st_global(void *p, T v, const char *what) {
    if (global_ok(p, sizeof(T), true, what)) { memcpy(p, &v, sizeof(T)); }
}

template <class T>
static inline T ld_global(const void *p, const char *what) {
    T v;
    memset(&v, 0, sizeof(T));
    if (global_ok(p, sizeof(T), false, what)) { memcpy(&v, p, sizeof(T)); }
    return v;
}

// The fragment tables above must be bijections onto the 16x16 A, 16x8 B and 16x8 C tiles (a check
// of this file, not of a kernel); returns the number of cells not covered exactly once.
static inline int check_fragment_tables(void) {
    int a_hits[16][16] = {{0}}, b_hits[16][8] = {{0}}, c_hits[16][8] = {{0}};
    for (int L = 0; L < 32; L++) {
        int r, c;
        for (int reg = 0; reg < 4; reg++) {
            frag_a(L, reg, &r, &c);
            a_hits[r][c]++;
            a_hits[r][c + 1]++;
        }
        for (int reg = 0; reg < 2; reg++) {
            frag_b(L, reg, &r, &c);
            b_hits[r][c]++;
            b_hits[r + 1][c]++;
        }
        for (int i = 0; i < 4; i++) {
            frag_c(L, i, &r, &c);
            c_hits[r][c]++;
        }
    }
    int bad = 0;
    for (int i = 0; i < 16; i++) {
        for (int j = 0; j < 16; j++) { bad += a_hits[i][j] != 1; }
        for (int j = 0; j < 8; j++) { bad += b_hits[i][j] != 1 || c_hits[i][j] != 1; }
    }
    if (bad) { printf("SIM ERROR: the simulator's mma fragment tables are not bijections\n"); }
    return bad;
}

}  // namespace sim

#endif  // SIM_PTX_H
