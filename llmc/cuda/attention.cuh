/*
 * Causal multi-head self-attention: a fused flash-style forward and backward on tensor cores
 * (mma.sync m16n8k16 bf16 -> fp32, ldmatrix, cp.async; sm_80 and sm_90). Their device primitives
 * (the inline PTX) are in attention_ptx.cuh; the unfused test oracle in dev/cuda/attention_unfused.cuh.
 *
 * Shapes (B batch, T sequence, C channels, NH heads, HS = C / NH head size):
 *   qkv  (B, T, 3C) bf16   the QKV projection: token (b, t) has q = [0, C), k = [C, 2C), v = [2C, 3C),
 *                          head h uses columns h*HS .. h*HS+HS-1 of each
 *   out  (B, T, C)  bf16   head h's output at columns h*HS ..
 *   lse  (B, NH, T) fp32   log(sum_s exp(scale * q_t . k_s)) over s <= t, scale = 1/sqrt(HS); written by
 *                          the forward, read by the backward (both paths use the same convention)
 *   dqkv (B, T, 3C) bf16   the gradient, same layout as qkv, overwritten (it is an activation gradient)
 *
 * Algorithm (FlashAttention-2, causal). Nothing of size T x T exists in memory.
 * Forward, one CTA per (b, h, block of BM query rows), 4 warps, each warp owns 16*MT query rows:
 *   1. Q tile -> smem once; K/V tiles of BN = 64 keys stream through a double buffer (cp.async), key
 *      tiles 0 .. the diagonal (causal: tiles entirely after the last query row are never loaded).
 *   2. per key tile: S = Q K^T on tensor cores (fp32), mask key > query on tiles that cross the
 *      diagonal, online softmax in fp32 (running row max m and row sum l; O rescaled by
 *      exp(m_old - m_new)), P rounded to bf16 and fed straight from the S registers as the A operand
 *      of O += P V (the m16n8 accumulator layout of two n8 tiles is the m16k16 A layout).
 *   3. O / l -> bf16 via the warp's own rows of the Q tile in smem (16-byte global stores);
 *      lse = m * scale + log(l).
 * Backward, deterministic (no atomics; every output element is written by exactly one thread, and
 * every sum has a fixed order):
 *   0. D = rowsum(dO * O) per (b, h, t), fp32, into the scratch buffer.
 *   1. dK, dV: one CTA per (b, h, block of 64 keys), each warp owns 16 keys, looping over the query
 *      tiles at or after the diagonal (Q, dO, lse, D double-buffered): S^T = K Q^T,
 *      P^T = exp(scale S^T - lse), dP^T = V dO^T, dS^T = P^T (dP^T - D), dV += P^T dO, dK += dS^T Q.
 *   2. dQ: one CTA per (b, h, block of 64 queries), each warp owns 16 queries, looping over the key
 *      tiles up to the diagonal (K, V double-buffered), recomputing P: S = Q K^T, P = exp(scale S - lse),
 *      dP = dO V^T, dS = P (dP - D), dQ += dS K. dQ and dK are scaled by `scale` at the end.
 *   S and dP are computed in both kernels: 7 matmuls instead of FlashAttention-2's 5, the price of
 *   needing no fp32 dQ accumulator in global memory and no atomics, so the result is bitwise
 *   reproducible. At HS 128 the dK/dV kernel takes each query tile in four slices of 16 queries
 *   (register pressure, see there).
 * Ragged T: every tile row at or past T is zero-filled by cp.async (zero source size, nothing is read
 * from global memory), so products with it are 0 and never NaN; the causal mask removes keys >= T
 * from every valid query row (key >= T > query); stores skip rows >= T; the backward's dK/dV kernel
 * also masks query columns >= T explicitly (their lse is a zero fill, not a real value).
 *
 * Tiling, shared memory (per CTA; smem rows padded to HS + 8 elements so that the 8 row addresses of
 * every ldmatrix phase, every 16-byte cp.async phase and the 32-bit staging stores hit 8 distinct
 * 16-byte bank groups: row stride 144 B (HS 64) / 272 B (HS 128) = 9 / 17 units of 16 B, odd):
 *   forward  HS 64,  MT 2 (BM 128): Q 128 rows + K, V 2 x 64 rows each = 384 rows x 144 B =  55296 B
 *   forward  HS 64,  MT 1 (BM 64):  320 rows x 144 B = 46080 B
 *   forward  HS 128, MT 1 (BM 64):  320 rows x 272 B = 87040 B
 *   backward dK/dV: K, V 64 rows + Q, dO 2 x 64 rows each + lse, D 2 x 64 fp32 = 384 rows + 1 KiB
 *                   = 56320 B (HS 64), 105472 B (HS 128)
 *   backward dQ:    Q, dO 64 rows + K, V 2 x 64 rows each = 384 rows = 55296 B (HS 64), 104448 B (HS 128)
 *   All but the HS 64 MT 1 forward need the opt-in above 48 KiB (cudaFuncSetAttribute, done once).
 * Registers (ptxas, nvcc 13.0, -O3 --use_fast_math; no kernel spills, on sm_90a or sm_80) and the
 * resulting CTAs per SM on H100/H200 (65536 registers, allocated per warp in steps of 8 per
 * thread; 228 KiB shared memory, of which 1 KiB is reserved per CTA; 128 threads per CTA):
 *   kernel              regs sm_90a (sm_80)  smem B   CTAs/SM by regs, by smem -> warps/SM
 *   forward<64, MT 1>   128 (128)            46080    4, 4 -> 16
 *   forward<64, MT 2>   244 (237)            55296    2, 4 ->  8 (same 256 query rows per SM as MT 1)
 *   forward<128, MT 1>  184 (203)            87040    2, 2 ->  8
 *   backward_dq<64>     168 (168)            55296    3, 4 -> 12
 *   backward_dkv<64>    239 (238)            56320    2, 4 ->  8
 *   backward_dq<128>    246 (244)           104448    2, 2 ->  8
 *   backward_dkv<128>   254 (254)           105472    2, 2 ->  8
 *   backward_preprocess  32 (35)                 0    (256 threads, memory-bound)
 * ptxas spends the registers on loading fragments early. Capping them (__launch_bounds__ minimum
 * blocks) for one more CTA per SM made each HS 64 kernel spill (forward MT 2 at 168 registers: 140 B,
 * dQ at 128: 32 B, dK/dV at 168: 48 B), so they are left uncapped; at HS 128 shared memory allows no
 * more than 2 CTAs anyway. The work per CTA grows linearly along the causal diagonal, so the
 * heaviest CTAs are launched first (blockIdx.y 0 is the last query block in the forward and dQ, the
 * first key block in dK/dV). Which forward tiling is faster (MT 2 halves the ldmatrix traffic per
 * mma, MT 1 has twice the warps) is measured by dev/cuda/attention.cu; until then MT 2 is the
 * default at HS 64, FlashAttention-2's choice for head size 64 (32 query rows per warp).
 *
 * Head sizes: the fused kernels are instantiated for HS = 64 (every GPT-2 size) and HS = 128; any
 * other head size stops with a message naming the supported ones.
 *
 * Generation (attention_forward_rows): a text that grows by a token keeps the earlier tokens' q, k, v
 * in qkv, so only the new rows' attention is computed: plain fp32 kernels that split each row's keys
 * over up to 16 CTAs per head and then combine the parts; the fused forward serves the first call.
 *
 * Verified without a GPU (written without access to one): both architectures compile without
 * warnings and without spills; every kernel and launcher in this file runs unchanged on the CPU
 * simulator of dev/cuda/sim, which replaces attention_ptx.cuh with versions that emulate mma.sync,
 * ldmatrix and cp.async per the PTX ISA and check shared-memory races, bounds and exactly-once output
 * coverage; dev/cuda/attention_sim.cpp compares the results with an fp64 reference (ragged T from 1
 * to 200, HS 64 and 128, both forward tilings), and the whole trainer runs on it
 * (make test-cuda-trainer-sim); a campaign of injected index and synchronization bugs showed that
 * it catches each one. Not verified: that the hardware does what the PTX ISA says (the simulator's
 * premise), and speed. On a GPU, dev/cuda/attention.cu checks all of it and times it.
 */
#ifndef LLMC_ATTENTION_CUH
#define LLMC_ATTENTION_CUH

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "cuda_common.cuh"
#include "attention_ptx.cuh"  // the device primitives (ldmatrix, mma, cp.async, ...)

// ----------------------------------------------------------------------------
// tile geometry of the fused kernels

#define ATTN_WARPS 4
#define ATTN_THREADS (32 * ATTN_WARPS)
#define ATTN_BN 64  // keys per K/V tile; also queries per Q tile of the backward (16 per warp)
#define ATTN_LOG2E 1.4426950408889634f

// forward query rows per warp, in m16 tiles, for each supported head size: two m16 tiles reuse
// every K/V fragment loaded from smem twice (half the ldmatrix traffic per mma); at HS 128 the
// accumulators of two tiles (2 x 64 + 2 x 32 fp32) would not fit in registers.
#define ATTN_FWD_MTILES(HS) ((HS) == 64 ? 2 : 1)

static inline size_t attention_forward_smem_bytes(int HS, int mtiles) {
    return (size_t)(16 * mtiles * ATTN_WARPS + 4 * ATTN_BN) * (HS + 8) * 2;
}
static inline size_t attention_backward_dq_smem_bytes(int HS) { return (size_t)(6 * ATTN_BN) * (HS + 8) * 2; }
static inline size_t attention_backward_dkv_smem_bytes(int HS) {
    return (size_t)(6 * ATTN_BN) * (HS + 8) * 2 + 4 * ATTN_BN * sizeof(float);
}

// ----------------------------------------------------------------------------
// bf16 pairs. Everything else the kernels do to memory or across lanes is a device primitive of
// attention_ptx.cuh.

// bf16 pair (a 32-bit word of two bf16) -> fp32, exact
ATTN_DEV float attn_bf16_lo(uint32_t u) { return attn_bits_to_float(u << 16); }
ATTN_DEV float attn_bf16_hi(uint32_t u) { return attn_bits_to_float(u & 0xffff0000u); }

// ----------------------------------------------------------------------------
// tile helpers. A smem tile holds rows of HS bf16 at a row stride of S = HS + 8 elements.

// Rows row0 .. row0 + ROWS - 1 of one head (HS contiguous bf16 at src + row * stride) -> smem tile,
// asynchronously (the caller commits and waits). Rows at or past `limit` are zero-filled.
// Thread tid copies 16-byte chunks tid, tid + 128, ...; consecutive threads take consecutive chunks
// of a row, so each 8-thread phase writes one 128-byte run of a smem row and reads a contiguous run
// of global memory.
template <int ROWS, int HS>
ATTN_DEV void attn_load_rows(floatX *dst, const floatX *src, size_t stride, int row0, int limit, int tid) {
    constexpr int CH = HS / 8, S = HS + 8;
    static_assert((ROWS * CH) % ATTN_THREADS == 0, "a tile must split evenly over the CTA");
#pragma unroll
    for (int i = 0; i < ROWS * CH / ATTN_THREADS; i++) {
        const int c = tid + i * ATTN_THREADS, r = c / CH, ch = c % CH;
        const bool valid = row0 + r < limit;
        attn_cp_async16(dst + r * S + ch * 8, src + (size_t)(valid ? row0 + r : 0) * stride + ch * 8, valid);
    }
}

// A operand of one k16 step: rows r0 .. r0+15, columns c0 .. c0+15 of a smem tile. The A layout
// wants a[0] = (rows 0-7, cols 0-7), a[1] = (rows 8-15, cols 0-7), a[2] = (rows 0-7, cols 8-15),
// a[3] = (rows 8-15, cols 8-15), which is ldmatrix's matrix i -> r[i] with lane L addressing row
// L % 8 of matrix m = L / 8: bit 0 of m adds 8 rows, bit 1 adds 8 columns.
template <int S>
ATTN_DEV void attn_frag_a(uint32_t (&a)[4], const floatX *tile, int r0, int c0, int lane) {
    const int m = lane >> 3, r = lane & 7;
    attn_ldsm_x4(a, tile + (r0 + r + (m & 1) * 8) * S + c0 + (m >> 1) * 8);
}

// B operands of the two n8 tiles n0 .. n0+7 and n0+8 .. n0+15 of one k16 step k0 .. k0+15, from a
// smem tile stored [n][k] (B = tile^T, e.g. K in S = Q K^T). Per n8 tile, b0 covers k 0-7 and b1
// k 8-15, lane L holding B[k = 2 (L % 4) + {0, 1}][n = L / 4] = tile[n][k]: exactly row L / 4,
// columns 2 (L % 4) + {0, 1} of a plain 8x8 load of tile rows n.., columns k... Matrices:
// 0 = (n0, k0) -> b[0], 1 = (n0, k0 + 8) -> b[1], 2 = (n0 + 8, k0) -> b[2], 3 = (n0 + 8, k0 + 8) -> b[3]:
// bit 0 of m adds 8 columns (k), bit 1 adds 8 rows (n).
template <int S>
ATTN_DEV void attn_frag_b_nk(uint32_t (&b)[4], const floatX *tile, int n0, int k0, int lane) {
    const int m = lane >> 3, r = lane & 7;
    attn_ldsm_x4(b, tile + (n0 + r + (m >> 1) * 8) * S + k0 + (m & 1) * 8);
}

// The same for a smem tile stored [k][n] (B = tile, e.g. V in O = P V): the transposing load of
// tile rows k.., columns n.. gives lane L rows 2 (L % 4) + {0, 1} of column L / 4, i.e. B[k][n] as
// the B layout wants. Matrices: 0 = (k0, n0) -> b[0], 1 = (k0 + 8, n0) -> b[1], 2 = (k0, n0 + 8) -> b[2],
// 3 = (k0 + 8, n0 + 8) -> b[3]: bit 0 of m adds 8 rows (k), bit 1 adds 8 columns (n).
template <int S>
ATTN_DEV void attn_frag_b_kn(uint32_t (&b)[4], const floatX *tile, int k0, int n0, int lane) {
    const int m = lane >> 3, r = lane & 7;
    attn_ldsm_x4_trans(b, tile + (k0 + r + (m & 1) * 8) * S + n0 + (m >> 1) * 8);
}

// A operand of k16 step kk taken from a 16 x 8NT fp32 accumulator (NT n8 tiles), rounded to bf16:
// accumulator n8 tiles 2kk and 2kk+1 hold, per lane, rows g and g+8 at columns 2t, 2t+1 of each,
// which is the A layout of columns 16kk .. 16kk+15 (FlashAttention-2's register reuse).
template <int NT>
ATTN_DEV void attn_acc_to_a(uint32_t (&a)[4], const float (&acc)[NT][4], int kk) {
    a[0] = attn_pack_bf16(acc[2 * kk][0], acc[2 * kk][1]);
    a[1] = attn_pack_bf16(acc[2 * kk][2], acc[2 * kk][3]);
    a[2] = attn_pack_bf16(acc[2 * kk + 1][0], acc[2 * kk + 1][1]);
    a[3] = attn_pack_bf16(acc[2 * kk + 1][2], acc[2 * kk + 1][3]);
}

// acc (16 x 8NT) += A rows r0 .. r0+15 (all HS columns) times (8NT rows of Bt)^T: a warp's slice of
// S = Q K^T and its relatives (dP = dO V^T, S^T = K Q^T, dP^T = V dO^T).
template <int HS, int NT>
ATTN_DEV void attn_mma_abt(float (&acc)[NT][4], const floatX *a_tile, int r0, const floatX *bt_tile, int lane) {
    constexpr int S = HS + 8;
#pragma unroll
    for (int ks = 0; ks < HS / 16; ks++) {
        uint32_t a[4];
        attn_frag_a<S>(a, a_tile, r0, ks * 16, lane);
#pragma unroll
        for (int np = 0; np < NT / 2; np++) {
            uint32_t b[4];
            attn_frag_b_nk<S>(b, bt_tile, np * 16, ks * 16, lane);
            attn_mma(acc[2 * np], a, b[0], b[1]);
            attn_mma(acc[2 * np + 1], a, b[2], b[3]);
        }
    }
}

// out (16 x HS) += bf16(p) (16 x 8NT, a warp's accumulator) times 8NT rows of B (HS columns): O += P V
// and its relatives (dQ += dS K, dV += P^T dO, dK += dS^T Q).
template <int HS, int NT>
ATTN_DEV void attn_mma_pb(float (&out)[HS / 8][4], const float (&p)[NT][4], const floatX *b_tile, int lane) {
    constexpr int S = HS + 8;
#pragma unroll
    for (int kk = 0; kk < NT / 2; kk++) {
        uint32_t a[4];
        attn_acc_to_a<NT>(a, p, kk);
#pragma unroll
        for (int dp = 0; dp < HS / 16; dp++) {
            uint32_t b[4];
            attn_frag_b_kn<S>(b, b_tile, kk * 16, dp * 16, lane);
            attn_mma(out[2 * dp], a, b[0], b[1]);
            attn_mma(out[2 * dp + 1], a, b[2], b[3]);
        }
    }
}

// A warp's 16 x HS fp32 accumulator, rows scaled by mul_lo (rows g) and mul_hi (rows g + 8), as bf16
// to global rows row0 .. row0+15 (skipping rows >= limit) at dst + row * stride. It is staged through
// `stage`, 16 smem rows that only this warp reads or writes from here on, so that every global store
// is 16 bytes and each 8-lane phase stores a contiguous row segment.
template <int HS>
ATTN_DEV void attn_store_rows(floatX *dst, size_t stride, int row0, int limit, floatX *stage,
                              const float (&acc)[HS / 8][4], float mul_lo, float mul_hi, int lane) {
    constexpr int S = HS + 8, CH = HS / 8;
    const int g = lane >> 2, t4 = lane & 3;
    attn_warp_sync();  // the warp's last ldmatrix reads of `stage` are done before it is overwritten
#pragma unroll
    for (int d = 0; d < HS / 8; d++) {
        attn_st_shared_u32(stage + g * S + d * 8 + 2 * t4, attn_pack_bf16(acc[d][0] * mul_lo, acc[d][1] * mul_lo));
        attn_st_shared_u32(stage + (g + 8) * S + d * 8 + 2 * t4,
                           attn_pack_bf16(acc[d][2] * mul_hi, acc[d][3] * mul_hi));
    }
    attn_warp_sync();  // every lane's stores are visible to the other lanes
#pragma unroll
    for (int c = lane; c < 16 * CH; c += 32) {
        const int r = c / CH, ch = c % CH;
        if (row0 + r < limit) {
            attn_st_global_128(dst + (size_t)(row0 + r) * stride + ch * 8, attn_ld_shared_128(stage + r * S + ch * 8));
        }
    }
}

// ----------------------------------------------------------------------------
// fused forward

// grid (B * NH, ceil(T / BM)), ATTN_THREADS threads, attention_forward_smem_bytes(HS, MT) dynamic smem.
// Warp w owns query rows q0 + 16 MT w .. q0 + 16 MT (w + 1) - 1 as MT m16 tiles.
template <int HS, int MT>
static __global__ void __launch_bounds__(ATTN_THREADS)
    attention_forward_kernel(floatX *__restrict__ out, float *__restrict__ lse, const floatX *__restrict__ qkv,
                             float scale, int T, int NH) {
    constexpr int S = HS + 8, BM = 16 * MT * ATTN_WARPS, BN = ATTN_BN, DT = HS / 8;
    const int C = NH * HS;
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t4 = lane & 3;
    const int bh = blockIdx.x, b = bh / NH, h = bh % NH;
    const int q_block = CEIL_DIV(T, BM) - 1 - (int)blockIdx.y;  // heaviest (last) query block first
    const int q0 = q_block * BM;
    const int num_kv = CEIL_DIV(min(T, q0 + BM), BN);  // causal: keys 0 .. last query row of the block
    const int warp_row0 = q0 + warp * 16 * MT;
    const float scale_log2 = scale * ATTN_LOG2E;  // exp(scale x) = 2^(scale_log2 x)

    floatX *sQ = (floatX *)attn_dynamic_smem();  // BM rows
    floatX *sK = sQ + BM * S;                    // 2 buffers of BN rows
    floatX *sV = sK + 2 * BN * S;                // 2 buffers of BN rows
    const size_t stride = 3 * (size_t)C;
    const floatX *q_g = qkv + (size_t)b * T * stride + h * HS;
    const floatX *k_g = q_g + C;
    const floatX *v_g = q_g + 2 * C;

    attn_load_rows<BM, HS>(sQ, q_g, stride, q0, T, tid);
    attn_load_rows<BN, HS>(sK, k_g, stride, 0, T, tid);
    attn_load_rows<BN, HS>(sV, v_g, stride, 0, T, tid);
    attn_cp_async_commit();

    // per lane: rows g (r = 0) and g + 8 (r = 1) of each m16 tile; m in raw (unscaled) score units;
    // l is this lane's partial row sum (its 16 columns of each tile), summed over the 4 lanes at the end
    float o[MT][DT][4], m_run[MT][2], l_run[MT][2];
#pragma unroll
    for (int mt = 0; mt < MT; mt++) {
#pragma unroll
        for (int d = 0; d < DT; d++) { o[mt][d][0] = o[mt][d][1] = o[mt][d][2] = o[mt][d][3] = 0.0f; }
        m_run[mt][0] = m_run[mt][1] = -INFINITY;
        l_run[mt][0] = l_run[mt][1] = 0.0f;
    }

    for (int j = 0; j < num_kv; j++) {
        // tile j has landed for every thread, and every warp is done with tile j - 1, whose buffer
        // the prefetch below overwrites
        attn_cp_async_wait_all();
        attn_block_sync();
        if (j + 1 < num_kv) {
            attn_load_rows<BN, HS>(sK + ((j + 1) & 1) * BN * S, k_g, stride, (j + 1) * BN, T, tid);
            attn_load_rows<BN, HS>(sV + ((j + 1) & 1) * BN * S, v_g, stride, (j + 1) * BN, T, tid);
            attn_cp_async_commit();
        }
        const int kv0 = j * BN;
        if (kv0 > warp_row0 + 16 * MT - 1) { continue; }  // every key after every row of this warp (MT > 1)
        const floatX *sKj = sK + (j & 1) * BN * S;
        const floatX *sVj = sV + (j & 1) * BN * S;

        // 1. S = Q K^T: s[mt][n8 tile][c] for keys kv0 + 8 n + 2 t + (c & 1), rows g + 8 (c >> 1)
        float s[MT][8][4];
#pragma unroll
        for (int mt = 0; mt < MT; mt++) {
#pragma unroll
            for (int n = 0; n < 8; n++) { s[mt][n][0] = s[mt][n][1] = s[mt][n][2] = s[mt][n][3] = 0.0f; }
        }
#pragma unroll
        for (int ks = 0; ks < HS / 16; ks++) {
            uint32_t a[MT][4];
#pragma unroll
            for (int mt = 0; mt < MT; mt++) { attn_frag_a<S>(a[mt], sQ, warp * 16 * MT + mt * 16, ks * 16, lane); }
#pragma unroll
            for (int np = 0; np < 4; np++) {
                uint32_t bf[4];
                attn_frag_b_nk<S>(bf, sKj, np * 16, ks * 16, lane);
#pragma unroll
                for (int mt = 0; mt < MT; mt++) {
                    attn_mma(s[mt][2 * np], a[mt], bf[0], bf[1]);
                    attn_mma(s[mt][2 * np + 1], a[mt], bf[2], bf[3]);
                }
            }
        }

        // 2. causal mask and online softmax. The running max of every row is finite from tile 0 on
        // (key 0 is never masked), so the rescale factor is never (-inf) - (-inf).
        const bool diag = kv0 + BN - 1 > warp_row0;  // some key of the tile is after some row of the warp
#pragma unroll
        for (int mt = 0; mt < MT; mt++) {
#pragma unroll
            for (int r = 0; r < 2; r++) {
                const int row = warp_row0 + mt * 16 + g + 8 * r;
                float mx = -INFINITY;
#pragma unroll
                for (int n = 0; n < 8; n++) {
#pragma unroll
                    for (int e = 0; e < 2; e++) {
                        if (diag && kv0 + 8 * n + 2 * t4 + e > row) { s[mt][n][2 * r + e] = -INFINITY; }
                        mx = fmaxf(mx, s[mt][n][2 * r + e]);
                    }
                }
                // the row's 64 columns live in the 4 lanes of a quad (same g)
                mx = fmaxf(mx, attn_shfl_xor(mx, 1));
                mx = fmaxf(mx, attn_shfl_xor(mx, 2));
                const float m_new = fmaxf(m_run[mt][r], mx);
                const float base = m_new == -INFINITY ? 0.0f : m_new * scale_log2;
                const float alpha = attn_exp2(m_run[mt][r] * scale_log2 - base);  // 0 on the first tile
                m_run[mt][r] = m_new;
                l_run[mt][r] *= alpha;
#pragma unroll
                for (int d = 0; d < DT; d++) {
                    o[mt][d][2 * r] *= alpha;
                    o[mt][d][2 * r + 1] *= alpha;
                }
#pragma unroll
                for (int n = 0; n < 8; n++) {
#pragma unroll
                    for (int e = 0; e < 2; e++) {
                        const float p = attn_exp2(fmaf(s[mt][n][2 * r + e], scale_log2, -base));  // masked: 2^-inf = 0
                        s[mt][n][2 * r + e] = p;
                        l_run[mt][r] += p;
                    }
                }
            }
        }

        // 3. O += P V, P (bf16) straight from the S registers
#pragma unroll
        for (int kk = 0; kk < 4; kk++) {
            uint32_t pa[MT][4];
#pragma unroll
            for (int mt = 0; mt < MT; mt++) { attn_acc_to_a<8>(pa[mt], s[mt], kk); }
#pragma unroll
            for (int dp = 0; dp < HS / 16; dp++) {
                uint32_t bf[4];
                attn_frag_b_kn<S>(bf, sVj, kk * 16, dp * 16, lane);
#pragma unroll
                for (int mt = 0; mt < MT; mt++) {
                    attn_mma(o[mt][2 * dp], pa[mt], bf[0], bf[1]);
                    attn_mma(o[mt][2 * dp + 1], pa[mt], bf[2], bf[3]);
                }
            }
        }
    }

    // 4. O / l and lse. No cp.async is in flight (the last iteration prefetches nothing), and the
    // warp's rows of sQ are read by this warp only, so they can stage its output.
#pragma unroll
    for (int mt = 0; mt < MT; mt++) {
        float inv[2];
#pragma unroll
        for (int r = 0; r < 2; r++) {
            float l = l_run[mt][r];
            l += attn_shfl_xor(l, 1);  // a + b and b + a are the same float: all 4 lanes agree
            l += attn_shfl_xor(l, 2);
            inv[r] = 1.0f / l;  // l >= 1: the row max contributes 2^0
            const int row = warp_row0 + mt * 16 + g + 8 * r;
            if (t4 == 0 && row < T) {
                attn_st_global_f32(lse + (size_t)bh * T + row, m_run[mt][r] * scale + attn_log(l));
            }
        }
        attn_store_rows<HS>(out + (size_t)b * T * C + h * HS, (size_t)C, warp_row0 + mt * 16, T,
                            sQ + (warp * 16 * MT + mt * 16) * S, o[mt], inv[0], inv[1], lane);
    }
}

// ----------------------------------------------------------------------------
// fused backward

// D[b, h, t] = sum_d dO[b, t, h, d] * O[b, t, h, d] in fp32, fixed order. One thread per (b, t, h):
// consecutive threads read consecutive heads of one token row.
template <int HS>
static __global__ void attention_backward_preprocess_kernel(float *__restrict__ D, const floatX *__restrict__ dout,
                                                            const floatX *__restrict__ out, int B, int T, int NH) {
    const int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= B * T * NH) { return; }
    const int h = idx % NH, bt = idx / NH, b = bt / T, t = bt % T;
    const size_t off = (size_t)bt * NH * HS + h * HS;
    float acc = 0.0f;
#pragma unroll
    for (int i = 0; i < HS / 8; i++) {
        const int4 o4 = attn_ld_global_128(out + off + i * 8), d4 = attn_ld_global_128(dout + off + i * 8);
        const uint32_t ow[4] = {(uint32_t)o4.x, (uint32_t)o4.y, (uint32_t)o4.z, (uint32_t)o4.w};
        const uint32_t dw[4] = {(uint32_t)d4.x, (uint32_t)d4.y, (uint32_t)d4.z, (uint32_t)d4.w};
#pragma unroll
        for (int w = 0; w < 4; w++) {
            acc = fmaf(attn_bf16_lo(ow[w]), attn_bf16_lo(dw[w]), acc);
            acc = fmaf(attn_bf16_hi(ow[w]), attn_bf16_hi(dw[w]), acc);
        }
    }
    attn_st_global_f32(D + ((size_t)b * NH + h) * T + t, acc);
}

// dK and dV. grid (B * NH, ceil(T / 64)), ATTN_THREADS threads, attention_backward_dkv_smem_bytes(HS).
// Key block kv_block = blockIdx.y (the first key blocks see the most query tiles: launched first);
// warp w owns keys kv0 + 16 w .. kv0 + 16 w + 15. Accumulators are transposed-score tiles
// (rows = the warp's 16 keys, columns = 64 queries).
template <int HS>
static __global__ void __launch_bounds__(ATTN_THREADS)
    attention_backward_dkv_kernel(floatX *__restrict__ dqkv, const floatX *__restrict__ dout,
                                  const floatX *__restrict__ qkv, const float *__restrict__ lse,
                                  const float *__restrict__ D, float scale, int T, int NH) {
    constexpr int S = HS + 8, BM = ATTN_BN, BN = 16 * ATTN_WARPS, DT = HS / 8;
    // At HS 128, dK and dV take 128 fp32 registers per thread: the S^T and dP^T accumulators then
    // cover 16 queries at a time (2 x 8 registers instead of 2 x 32), in a loop kept rolled so that
    // the slices' loads are not interleaved: without both, ptxas spills (measured with -Xptxas -v)
    constexpr int QSPLIT = HS >= 128 ? 4 : 1, QW = BM / QSPLIT, NT = QW / 8;
    static_assert(2 * BM == ATTN_THREADS, "one thread per lse and per D entry of a query tile");
    static_assert(BM == BN, "the first query tile of key block j is tile j");
    const int C = NH * HS;
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t4 = lane & 3;
    const int bh = blockIdx.x, b = bh / NH, h = bh % NH;
    const int kv_block = blockIdx.y, kv0 = kv_block * BN;
    const int num_q = CEIL_DIV(T, BM), i0 = kv_block;  // query tiles before i0 see none of these keys
    const int warp_key0 = kv0 + warp * 16;
    const float scale_log2 = scale * ATTN_LOG2E;

    floatX *sK = (floatX *)attn_dynamic_smem();  // BN rows
    floatX *sV = sK + BN * S;                    // BN rows
    floatX *sQ = sV + BN * S;                    // 2 buffers of BM rows
    floatX *sdO = sQ + 2 * BM * S;               // 2 buffers of BM rows
    float *sL = (float *)(sdO + 2 * BM * S);     // 2 buffers of BM lse values
    float *sD = sL + 2 * BM;                     // 2 buffers of BM D values
    const size_t stride = 3 * (size_t)C;
    const floatX *q_g = qkv + (size_t)b * T * stride + h * HS;
    const floatX *k_g = q_g + C;
    const floatX *v_g = q_g + 2 * C;
    const floatX *do_g = dout + (size_t)b * T * C + h * HS;
    const float *lse_g = lse + (size_t)bh * T;
    const float *D_g = D + (size_t)bh * T;

    // one query tile (Q, dO, lse, D) into buffer buf; lse/D past T are zero-filled and masked below
    auto load_query_tile = [&](int i, int buf) {
        attn_load_rows<BM, HS>(sQ + buf * BM * S, q_g, stride, i * BM, T, tid);
        attn_load_rows<BM, HS>(sdO + buf * BM * S, do_g, (size_t)C, i * BM, T, tid);
        const int r = tid % BM, row = i * BM + r;
        const bool valid = row < T;
        if (tid < BM) {
            attn_cp_async4(sL + buf * BM + r, lse_g + (valid ? row : 0), valid);
        } else {
            attn_cp_async4(sD + buf * BM + r, D_g + (valid ? row : 0), valid);
        }
    };
    attn_load_rows<BN, HS>(sK, k_g, stride, kv0, T, tid);
    attn_load_rows<BN, HS>(sV, v_g, stride, kv0, T, tid);
    load_query_tile(i0, 0);
    attn_cp_async_commit();

    float dk[DT][4], dv[DT][4];
#pragma unroll
    for (int d = 0; d < DT; d++) {
        dk[d][0] = dk[d][1] = dk[d][2] = dk[d][3] = 0.0f;
        dv[d][0] = dv[d][1] = dv[d][2] = dv[d][3] = 0.0f;
    }

    for (int i = i0; i < num_q; i++) {
        attn_cp_async_wait_all();
        attn_block_sync();  // tile i visible to all; every warp done with tile i - 1's buffer
        if (i + 1 < num_q) {
            load_query_tile(i + 1, (i + 1 - i0) & 1);
            attn_cp_async_commit();
        }
        const int buf = (i - i0) & 1, q0 = i * BM;
        const floatX *sQi = sQ + buf * BM * S;
        const floatX *sdOi = sdO + buf * BM * S;
        const float *sLi = sL + buf * BM;
        const float *sDi = sD + buf * BM;

        // the tile's queries in QSPLIT slices of QW
#pragma unroll 1
        for (int qs = 0; qs < QSPLIT; qs++) {
            const int qs0 = q0 + qs * QW;
            const floatX *sQs = sQi + qs * QW * S, *sdOs = sdOi + qs * QW * S;

            // 1. S^T = K Q^T; st[n][c]: key warp_key0 + g + 8 (c >> 1), query qs0 + 8 n + 2 t4 + (c & 1)
            float st[NT][4];
#pragma unroll
            for (int n = 0; n < NT; n++) { st[n][0] = st[n][1] = st[n][2] = st[n][3] = 0.0f; }
            attn_mma_abt<HS, NT>(st, sK, warp * 16, sQs, lane);

            // 2. P^T = exp(scale S^T - lse[query]); zero where query < key or query >= T
            const bool mask = qs0 < warp_key0 + 15 || qs0 + QW > T;
#pragma unroll
            for (int n = 0; n < NT; n++) {
                const float2 lv = attn_ld_shared_f32x2(sLi + qs * QW + 8 * n + 2 * t4);
#pragma unroll
                for (int c = 0; c < 4; c++) {
                    const int key = warp_key0 + g + 8 * (c >> 1), query = qs0 + 8 * n + 2 * t4 + (c & 1);
                    const float l2 = ((c & 1) ? lv.y : lv.x) * ATTN_LOG2E;
                    const float p = attn_exp2(fmaf(st[n][c], scale_log2, -l2));
                    st[n][c] = mask && (query < key || query >= T) ? 0.0f : p;
                }
            }

            // 3. dP^T = V dO^T, then dS^T = P^T (dP^T - D[query]) in place
            float ds[NT][4];
#pragma unroll
            for (int n = 0; n < NT; n++) { ds[n][0] = ds[n][1] = ds[n][2] = ds[n][3] = 0.0f; }
            attn_mma_abt<HS, NT>(ds, sV, warp * 16, sdOs, lane);
#pragma unroll
            for (int n = 0; n < NT; n++) {
                const float2 dd = attn_ld_shared_f32x2(sDi + qs * QW + 8 * n + 2 * t4);
#pragma unroll
                for (int c = 0; c < 4; c++) { ds[n][c] = st[n][c] * (ds[n][c] - ((c & 1) ? dd.y : dd.x)); }
            }

            // 4. dV += P^T dO and dK += dS^T Q (A operands rounded to bf16, B from the query slice)
            attn_mma_pb<HS, NT>(dv, st, sdOs, lane);
            attn_mma_pb<HS, NT>(dk, ds, sQs, lane);
        }
    }

    // 5. dK * scale and dV, staged through the warp's own rows of sK and sV (read by no other warp;
    // no cp.async is in flight after the last iteration)
    floatX *dqkv_b = dqkv + (size_t)b * T * stride + h * HS;
    attn_store_rows<HS>(dqkv_b + C, stride, warp_key0, T, sK + warp * 16 * S, dk, scale, scale, lane);
    attn_store_rows<HS>(dqkv_b + 2 * C, stride, warp_key0, T, sV + warp * 16 * S, dv, 1.0f, 1.0f, lane);
}

// dQ. grid (B * NH, ceil(T / 64)), ATTN_THREADS threads, attention_backward_dq_smem_bytes(HS).
// Query block = last first (it sees the most key tiles); warp w owns queries q0 + 16 w .. + 15.
template <int HS>
static __global__ void __launch_bounds__(ATTN_THREADS)
    attention_backward_dq_kernel(floatX *__restrict__ dqkv, const floatX *__restrict__ dout,
                                 const floatX *__restrict__ qkv, const float *__restrict__ lse,
                                 const float *__restrict__ D, float scale, int T, int NH) {
    constexpr int S = HS + 8, BM = 16 * ATTN_WARPS, BN = ATTN_BN, DT = HS / 8;
    const int C = NH * HS;
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t4 = lane & 3;
    const int bh = blockIdx.x, b = bh / NH, h = bh % NH;
    const int q_block = CEIL_DIV(T, BM) - 1 - (int)blockIdx.y;
    const int q0 = q_block * BM;
    const int num_kv = CEIL_DIV(min(T, q0 + BM), BN);
    const int warp_row0 = q0 + warp * 16;
    const float scale_log2 = scale * ATTN_LOG2E;

    floatX *sQ = (floatX *)attn_dynamic_smem();  // BM rows
    floatX *sdO = sQ + BM * S;                   // BM rows
    floatX *sK = sdO + BM * S;                   // 2 buffers of BN rows
    floatX *sV = sK + 2 * BN * S;                // 2 buffers of BN rows
    const size_t stride = 3 * (size_t)C;
    const floatX *q_g = qkv + (size_t)b * T * stride + h * HS;
    const floatX *k_g = q_g + C;
    const floatX *v_g = q_g + 2 * C;

    attn_load_rows<BM, HS>(sQ, q_g, stride, q0, T, tid);
    attn_load_rows<BM, HS>(sdO, dout + (size_t)b * T * C + h * HS, (size_t)C, q0, T, tid);
    attn_load_rows<BN, HS>(sK, k_g, stride, 0, T, tid);
    attn_load_rows<BN, HS>(sV, v_g, stride, 0, T, tid);
    attn_cp_async_commit();

    // rows g (r = 0) and g + 8 (r = 1): lse in log2 units (+inf past T: P = 0 there) and D
    float lse2[2], Dr[2];
#pragma unroll
    for (int r = 0; r < 2; r++) {
        const int row = warp_row0 + g + 8 * r;
        const bool valid = row < T;
        lse2[r] = valid ? attn_ld_global_f32(lse + (size_t)bh * T + row) * ATTN_LOG2E : INFINITY;
        Dr[r] = valid ? attn_ld_global_f32(D + (size_t)bh * T + row) : 0.0f;
    }
    float dq[DT][4];
#pragma unroll
    for (int d = 0; d < DT; d++) { dq[d][0] = dq[d][1] = dq[d][2] = dq[d][3] = 0.0f; }

    for (int j = 0; j < num_kv; j++) {
        attn_cp_async_wait_all();
        attn_block_sync();  // tile j visible to all; every warp done with tile j - 1's buffer
        if (j + 1 < num_kv) {
            attn_load_rows<BN, HS>(sK + ((j + 1) & 1) * BN * S, k_g, stride, (j + 1) * BN, T, tid);
            attn_load_rows<BN, HS>(sV + ((j + 1) & 1) * BN * S, v_g, stride, (j + 1) * BN, T, tid);
            attn_cp_async_commit();
        }
        const int kv0 = j * BN;
        const floatX *sKj = sK + (j & 1) * BN * S;
        const floatX *sVj = sV + (j & 1) * BN * S;

        // 1. S = Q K^T, P = exp(scale S - lse), zero where key > query; s[n][c]: row
        // warp_row0 + g + 8 (c >> 1), key kv0 + 8 n + 2 t4 + (c & 1)
        float s[8][4];
#pragma unroll
        for (int n = 0; n < 8; n++) { s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f; }
        attn_mma_abt<HS, 8>(s, sQ, warp * 16, sKj, lane);
        const bool diag = kv0 + BN - 1 > warp_row0;
#pragma unroll
        for (int n = 0; n < 8; n++) {
#pragma unroll
            for (int c = 0; c < 4; c++) {
                const int row = warp_row0 + g + 8 * (c >> 1), key = kv0 + 8 * n + 2 * t4 + (c & 1);
                const float p = attn_exp2(fmaf(s[n][c], scale_log2, -lse2[c >> 1]));
                s[n][c] = diag && key > row ? 0.0f : p;
            }
        }

        // 2. dP = dO V^T, dS = P (dP - D) in place
        float ds[8][4];
#pragma unroll
        for (int n = 0; n < 8; n++) { ds[n][0] = ds[n][1] = ds[n][2] = ds[n][3] = 0.0f; }
        attn_mma_abt<HS, 8>(ds, sdO, warp * 16, sVj, lane);
#pragma unroll
        for (int n = 0; n < 8; n++) {
#pragma unroll
            for (int c = 0; c < 4; c++) { ds[n][c] = s[n][c] * (ds[n][c] - Dr[c >> 1]); }
        }

        // 3. dQ += dS K
        attn_mma_pb<HS, 8>(dq, ds, sKj, lane);
    }

    // 4. dQ * scale, staged through the warp's own rows of sQ
    attn_store_rows<HS>(dqkv + (size_t)b * T * (3 * (size_t)C) + h * HS, stride, warp_row0, T, sQ + warp * 16 * S, dq,
                        scale, scale, lane);
}

// ----------------------------------------------------------------------------
// rows of one sequence: the generation's new tokens (train_gpt2cu's --prompt and samples)

#define ATTN_ROWS_THREADS 128
#define ATTN_ROWS_CHUNK 128   // keys scored at once, one per thread (ATTN_ROWS_THREADS of them)
#define ATTN_ROWS_SPLITS 16   // at most this many CTAs share one row's keys
static_assert(ATTN_ROWS_CHUNK == ATTN_ROWS_THREADS, "attention_rows_split_kernel scores one key per thread");

/*
 * Generation's few rows, split over the keys (as flash-decoding does): row t's t + 1 keys are
 * chunks of ATTN_ROWS_CHUNK, dealt in equal runs of `per` chunks to at most ATTN_ROWS_SPLITS CTAs
 * per (row, head), so a single row still occupies up to NH * 16 CTAs. Each CTA writes its
 * partial result (the unnormalized P V over its keys, its running max and sum) to scratch; a
 * second kernel combines a row's splits in split order. Returns how many splits row t uses.
 */
__host__ __device__ static inline int attn_rows_splits(int t, int *per) {
    const int chunks = t / ATTN_ROWS_CHUNK + 1;  // ceil((t + 1) / ATTN_ROWS_CHUNK)
    *per = (chunks + ATTN_ROWS_SPLITS - 1) / ATTN_ROWS_SPLITS;
    return (chunks + *per - 1) / *per;
}

// floats of one split's partial result: the HS sums of P V, then the max and the sum of P
#define ATTN_ROWS_PART(HS) ((HS) + 2)

/*
 * One CTA per (row r of the launch, head h, split z): keys [k0, k1) of the split, a chunk at a
 * time: each thread scores one key (fp32 dot product of the row's query and the key), the chunk's
 * softmax is folded into the running max and sum (online softmax, as the fused forward does
 * across tiles), and P V accumulates with HS / 8 threads per key row (one 16-byte load of v each)
 * and ATTN_ROWS_THREADS / (HS / 8) key groups; the groups' sums are added in group order.
 * Everything in fp32; a fixed order throughout, so the result is the same bits every run.
 * out != NULL where every row of the launch has a single split (at most ATTN_ROWS_CHUNK keys): the
 * CTA writes out and lse itself, as the combine kernel does with one split, and parts is unused.
 */
template <int HS>
__global__ void __launch_bounds__(ATTN_ROWS_THREADS)
    attention_rows_split_kernel(float *parts, floatX *out, float *lse, const floatX *qkv, int from, int C, int NH,
                                int lse_T, float scale) {
    constexpr int LANES = HS / 8, GROUPS = ATTN_ROWS_THREADS / LANES;
    __shared__ float q[HS];
    __shared__ float p[ATTN_ROWS_CHUNK];
    __shared__ float part[GROUPS * HS];
    __shared__ float red[32];
    const int t = from + blockIdx.x, h = blockIdx.y, z = blockIdx.z, tid = threadIdx.x;
    int per;
    if (z >= attn_rows_splits(t, &per)) { return; }  // the whole CTA: a shorter row uses fewer splits
    const int k0 = z * per * ATTN_ROWS_CHUNK, k1 = min((z + 1) * per * ATTN_ROWS_CHUNK, t + 1);
    const size_t stride = 3 * (size_t)C;
    const floatX *head = qkv + h * HS;  // row j's q, k, v of this head at j * stride + 0, C, 2C
    for (int d = tid; d < HS; d += ATTN_ROWS_THREADS) { q[d] = __bfloat162float(head[t * stride + d]); }
    __syncthreads();
    const int lane = tid % LANES, group = tid / LANES;
    float acc[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
    float run_max = -INFINITY, run_sum = 0.0f;
    for (int c0 = k0; c0 < k1; c0 += ATTN_ROWS_CHUNK) {
        const int n = min(ATTN_ROWS_CHUNK, k1 - c0);
        float score = -INFINITY;
        if (tid < n) {
            const floatX *k = head + (size_t)(c0 + tid) * stride + C;
            float dot = 0.0f;
            for (int i = 0; i < HS; i += x128::size) {
                const x128 k8 = load128(k + i);
                for (int e = 0; e < x128::size; e++) { dot += q[i + e] * __bfloat162float(k8[e]); }
            }
            score = dot * scale;
        }
        const float new_max = fmaxf(run_max, block_reduce_max(score, red));
        const float e = tid < n ? expf(score - new_max) : 0.0f;
        p[tid] = e;
        const float chunk_sum = block_reduce_sum(e, red);  // its barriers also publish p
        const float rescale = expf(run_max - new_max);    // 0 for the first chunk (run_max -inf)
        run_sum = run_sum * rescale + chunk_sum;
        for (int i = 0; i < 8; i++) { acc[i] *= rescale; }
        const floatX *v = head + (size_t)c0 * stride + 2 * C + lane * 8;
        for (int j = group; j < n; j += GROUPS) {
            const x128 v8 = load128(v + (size_t)j * stride);
            const float pj = p[j];
            for (int i = 0; i < 8; i++) { acc[i] += pj * __bfloat162float(v8[i]); }
        }
        run_max = new_max;
        __syncthreads();  // p is rewritten by the next chunk
    }
    for (int i = 0; i < 8; i++) { part[group * HS + lane * 8 + i] = acc[i]; }
    __syncthreads();
    float *dst = out ? NULL : parts + (((size_t)blockIdx.x * NH + h) * ATTN_ROWS_SPLITS + z) * ATTN_ROWS_PART(HS);
    for (int d = tid; d < HS; d += ATTN_ROWS_THREADS) {
        float o = 0.0f;
        for (int g = 0; g < GROUPS; g++) { o += part[g * HS + d]; }
        if (out) { out[(size_t)t * C + h * HS + d] = __float2bfloat16(o / run_sum); } else { dst[d] = o; }
    }
    if (out) {
        if (lse != NULL && tid == 0) { lse[(size_t)h * lse_T + t] = run_max + logf(run_sum); }
    } else if (tid == 0) {
        dst[HS] = run_max;
        dst[HS + 1] = run_sum;
    }
}

// one CTA of HS threads per (row, head): the row's splits rescaled to their common max and added in
// split order; out rounded once, lse (if not NULL) = max + log(sum)
template <int HS>
__global__ void __launch_bounds__(HS)
    attention_rows_combine_kernel(floatX *out, float *lse, const float *parts, int from, int C, int NH, int lse_T) {
    const int t = from + blockIdx.x, h = blockIdx.y, d = threadIdx.x;
    int per;
    const int used = attn_rows_splits(t, &per);
    const float *src = parts + ((size_t)blockIdx.x * NH + h) * ATTN_ROWS_SPLITS * ATTN_ROWS_PART(HS);
    float top = -INFINITY;
    for (int z = 0; z < used; z++) { top = fmaxf(top, src[z * ATTN_ROWS_PART(HS) + HS]); }
    float sum = 0.0f, o = 0.0f;
    for (int z = 0; z < used; z++) {
        const float *sp = src + z * ATTN_ROWS_PART(HS);
        const float w = expf(sp[HS] - top);
        sum += sp[HS + 1] * w;
        o += sp[d] * w;
    }
    out[(size_t)t * C + h * HS + d] = __float2bfloat16(o / sum);
    if (lse != NULL && d == 0) { lse[(size_t)h * lse_T + t] = top + logf(sum); }
}

// ----------------------------------------------------------------------------
// launchers

static inline void attention_check_shapes(const char *who, int B, int T, int C, int NH) {
    if (B < 1 || T < 1 || NH < 1 || C < 1 || C % NH != 0) {
        llmc_die("%s: bad shape B = %d, T = %d, C = %d, NH = %d: all must be positive and C a multiple of NH", who, B,
                 T, C, NH);
    }
}

// the fused kernels' head sizes; anything else stops here with the list
static inline int attention_fused_head_size(const char *who, int C, int NH) {
    const int HS = C / NH;
    if (HS != 64 && HS != 128) {
        llmc_die("%s: head size %d (C = %d / NH = %d) is not supported by the fused attention kernels; supported head "
                 "sizes: 64, 128",
                 who, HS, C, NH);
    }
    return HS;
}

// opt in to more than 48 KiB of dynamic shared memory for `kernel`, once per process
static inline void attention_smem_optin(const void *kernel, size_t smem, const char *who, int HS) {
    const int max_optin = max_dynamic_smem_optin();
    if (smem > (size_t)max_optin) {
        llmc_die("%s: the fused attention kernel for head size %d needs %zu bytes of shared memory per block, this GPU "
                 "allows %d; use a GPU with more shared memory (sm_80 and sm_90 have enough)",
                 who, HS, smem, max_optin);
    }
    cudaCheck(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
}

template <int HS, int MT>
static inline void attention_forward_launch(floatX *out, float *lse, const floatX *qkv, int B, int T, int NH,
                                            cudaStream_t stream) {
    static bool opted_in = false;  // one per instantiation
    const size_t smem = attention_forward_smem_bytes(HS, MT);
    if (!opted_in) {
        attention_smem_optin((const void *)attention_forward_kernel<HS, MT>, smem, "attention_forward", HS);
        opted_in = true;
    }
    dim3 grid(B * NH, CEIL_DIV(T, 16 * MT * ATTN_WARPS));
    attention_forward_kernel<HS, MT>
        <<<grid, ATTN_THREADS, smem, stream>>>(out, lse, qkv, 1.0f / sqrtf((float)HS), T, NH);
    cudaCheckLaunch();
}

// The fused forward with a chosen number of m16 query tiles per warp (1 or 2; 2 only at HS 64),
// for the workbench to compare; the trainer calls attention_forward.
static inline void attention_forward_tiles(floatX *out, float *lse, const floatX *qkv, int B, int T, int C, int NH,
                                           int mtiles, cudaStream_t stream) {
    attention_check_shapes("attention_forward", B, T, C, NH);
    const int HS = attention_fused_head_size("attention_forward", C, NH);
    cudaRequire(is_aligned16(out) && is_aligned16(qkv), "out and qkv must be 16-byte aligned");
    cudaRequire(mtiles == 1 || (mtiles == 2 && HS == 64), "mtiles = %d at head size %d", mtiles, HS);
    if (HS == 64 && mtiles == 2) {
        attention_forward_launch<64, 2>(out, lse, qkv, B, T, NH, stream);
    } else if (HS == 64) {
        attention_forward_launch<64, 1>(out, lse, qkv, B, T, NH, stream);
    } else {
        attention_forward_launch<128, 1>(out, lse, qkv, B, T, NH, stream);
    }
}

// out (B, T, C) and lse (B, NH, T) overwritten, from qkv (B, T, 3C). Fused, causal, scale 1/sqrt(HS).
static inline void attention_forward(floatX *out, float *lse, const floatX *qkv, int B, int T, int C, int NH,
                                     cudaStream_t stream) {
    attention_forward_tiles(out, lse, qkv, B, T, C, NH, ATTN_FWD_MTILES(C / NH), stream);
}

// the fused backward's scratch: D (B, NH, T) fp32
static inline size_t attention_backward_scratch_bytes(int B, int T, int C, int NH) {
    (void)C;
    return (size_t)B * NH * T * sizeof(float);
}

template <int HS>
static inline void attention_backward_launch(floatX *dqkv, const floatX *dout, const floatX *qkv, const floatX *out,
                                             const float *lse, float *D, int B, int T, int NH, cudaStream_t stream) {
    static bool opted_in = false;
    const size_t smem_dkv = attention_backward_dkv_smem_bytes(HS), smem_dq = attention_backward_dq_smem_bytes(HS);
    if (!opted_in) {
        attention_smem_optin((const void *)attention_backward_dkv_kernel<HS>, smem_dkv, "attention_backward", HS);
        attention_smem_optin((const void *)attention_backward_dq_kernel<HS>, smem_dq, "attention_backward", HS);
        opted_in = true;
    }
    const float scale = 1.0f / sqrtf((float)HS);
    attention_backward_preprocess_kernel<HS>
        <<<grid_for((size_t)B * T * NH, 256), 256, 0, stream>>>(D, dout, out, B, T, NH);
    cudaCheckLaunch();
    dim3 grid(B * NH, CEIL_DIV(T, ATTN_BN));
    attention_backward_dkv_kernel<HS><<<grid, ATTN_THREADS, smem_dkv, stream>>>(dqkv, dout, qkv, lse, D, scale, T, NH);
    cudaCheckLaunch();
    attention_backward_dq_kernel<HS><<<grid, ATTN_THREADS, smem_dq, stream>>>(dqkv, dout, qkv, lse, D, scale, T, NH);
    cudaCheckLaunch();
}

// dqkv (B, T, 3C) overwritten, from dout (B, T, C), the forward's qkv, out and lse. scratch: at least
// attention_backward_scratch_bytes(B, T, C, NH) bytes. Deterministic: no atomics.
static inline void attention_backward(floatX *dqkv, const floatX *dout, const floatX *qkv, const floatX *out,
                                      const float *lse, float *scratch, int B, int T, int C, int NH,
                                      cudaStream_t stream) {
    attention_check_shapes("attention_backward", B, T, C, NH);
    const int HS = attention_fused_head_size("attention_backward", C, NH);
    cudaRequire(scratch != NULL, "the fused backward needs attention_backward_scratch_bytes() = %zu bytes of scratch",
                attention_backward_scratch_bytes(B, T, C, NH));
    cudaRequire(is_aligned16(dqkv) && is_aligned16(dout) && is_aligned16(qkv) && is_aligned16(out),
                "dqkv, dout, qkv and out must be 16-byte aligned");
    cudaRequire((uintptr_t)lse % 4 == 0 && (uintptr_t)scratch % 4 == 0, "lse and scratch must be 4-byte aligned");
    if (HS == 64) {
        attention_backward_launch<64>(dqkv, dout, qkv, out, lse, scratch, B, T, NH, stream);
    } else {
        attention_backward_launch<128>(dqkv, dout, qkv, out, lse, scratch, B, T, NH, stream);
    }
}

// scratch bytes of one row for attention_forward_rows (its launches take as many rows as fit)
static inline size_t attention_rows_scratch_bytes(int C, int NH) {
    return (size_t)NH * ATTN_ROWS_SPLITS * ATTN_ROWS_PART(C / NH) * sizeof(float);
}

// one launch of rows [r0, r0 + rows): the split kernel, and the combine unless every row has at most
// ATTN_ROWS_CHUNK keys (one split each: the split kernel writes out itself)
template <int HS>
static inline void attention_rows_launch(floatX *out, float *lse, const floatX *qkv, int r0, int rows, int C, int NH,
                                         int lse_T, float *scratch, cudaStream_t stream) {
    const int single = r0 + rows <= ATTN_ROWS_CHUNK;
    attention_rows_split_kernel<HS><<<dim3(rows, NH, single ? 1 : ATTN_ROWS_SPLITS), ATTN_ROWS_THREADS, 0, stream>>>(
        scratch, single ? out : NULL, lse, qkv, r0, C, NH, lse_T, 1.0f / sqrtf((float)HS));
    cudaCheckLaunch();
    if (!single) {
        attention_rows_combine_kernel<HS><<<dim3(rows, NH), HS, 0, stream>>>(out, lse, scratch, r0, C, NH, lse_T);
        cudaCheckLaunch();
    }
}

/*
 * Rows [from, to) of one sequence (B = 1): out (1, >= to, C) at those rows, from the queries of those
 * rows and the keys and values of rows 0 .. to-1 in qkv (1, >= to, 3C); lse (NH, lse_T) at those
 * rows, or NULL. What generation computes for the tokens after the ones whose activations it kept:
 * usually one row, whatever the text's length. scratch: fp32, scratch_bytes of it, at least
 * attention_rows_scratch_bytes(C, NH) (a launch takes as many rows as it holds). Its own sums
 * (fp32 throughout): not the fused forward's bits.
 */
static inline void attention_forward_rows(floatX *out, float *lse, const floatX *qkv, int from, int to, int C, int NH,
                                          int lse_T, float *scratch, size_t scratch_bytes, cudaStream_t stream) {
    attention_check_shapes("attention_forward_rows", 1, to, C, NH);
    const int HS = attention_fused_head_size("attention_forward_rows", C, NH);
    cudaRequire(from >= 0 && from < to && (lse == NULL || lse_T >= to), "rows %d..%d, lse_T %d", from, to, lse_T);
    cudaRequire(is_aligned16(qkv) && HS % x128::size == 0, "qkv must be 16-byte aligned; head size %d", HS);
    const size_t row_bytes = attention_rows_scratch_bytes(C, NH);
    cudaRequire(scratch != NULL && scratch_bytes >= row_bytes, "scratch of %zu bytes, one row needs %zu", scratch_bytes,
                row_bytes);
    const int most = scratch_bytes / row_bytes < (size_t)(to - from) ? (int)(scratch_bytes / row_bytes) : to - from;
    for (int r0 = from; r0 < to; r0 += most) {
        const int rows = to - r0 < most ? to - r0 : most;
        if (HS == 64) {
            attention_rows_launch<64>(out, lse, qkv, r0, rows, C, NH, lse_T, scratch, stream);
        } else {
            attention_rows_launch<128>(out, lse, qkv, r0, rows, C, NH, lse_T, scratch, stream);
        }
    }
}

#endif  // LLMC_ATTENTION_CUH
