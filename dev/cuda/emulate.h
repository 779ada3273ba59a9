/*
 * CPU emulations of the exact summation orders of the deterministic reductions, so that the
 * workbenches can demand BITWISE equality with the GPU where the kernels use only fp32 adds and
 * fused multiply-adds (IEEE-exact on both sides; the test data stays clear of denormals, which
 * the GPU flushes under --use_fast_math):
 *   - the embedding backward (llmc/cuda/encoder.cuh): plan order, segments, partial rows; its fp32
 *     sums end in bf16, so a different order is seen only where it changes the rounded result
 *     (which positions are summed into which row is checked exactly);
 *   - the gradient norm's chunk sums (llmc/cuda/global_norm.cuh): per-thread order, warp
 *     butterflies, block tree; each fp32 sum itself is compared, so any other order shows.
 * host_logic_test.cu runs them without a GPU against double-precision sums.
 */
#ifndef DEV_CUDA_EMULATE_H
#define DEV_CUDA_EMULATE_H

#include <math.h>
#include "common.h"
#include "llmc/cuda/encoder.cuh"
#include "llmc/cuda/global_norm.cuh"

// ----------------------------------------------------------------------------
// warp_reduce_sum / block_reduce_sum of llmc/cuda/cuda_common.cuh

// the xor butterfly: at each step lane i adds lane i^offset's value (a + b == b + a exactly, so
// every lane ends with the same bits); returns lane 0's result
static inline float emulate_warp_sum(const float in[32]) {
    float v[32], t[32];
    memcpy(v, in, sizeof(v));
    for (int offset = 16; offset > 0; offset /= 2) {
        for (int i = 0; i < 32; i++) { t[i] = v[i] + v[i ^ offset]; }
        memcpy(v, t, sizeof(v));
    }
    return v[0];
}

// vals: one value per thread of a block of nthreads (a multiple of 32)
static inline float emulate_block_sum(const float *vals, int nthreads) {
    const int warps = nthreads / 32;
    float lanes[32];
    for (int i = 0; i < 32; i++) { lanes[i] = 0.0f; }
    for (int w = 0; w < warps; w++) { lanes[w] = emulate_warp_sum(vals + 32 * w); }
    return emulate_warp_sum(lanes);
}

// ----------------------------------------------------------------------------
// global_norm_chunk_sums: g (the whole flat array, bf16-exact floats); chunk [lo, hi), vectorized
// where the kernel is (lo and hi multiples of 8, the device array 16-byte aligned)

static inline float emulate_global_norm_chunk(const float *g, size_t lo, size_t hi, int vectorized) {
    float acc[GLOBAL_NORM_THREADS];
    for (int j = 0; j < GLOBAL_NORM_THREADS; j++) {
        float a = 0.0f;
        if (vectorized) {
            for (size_t u = lo / 8 + j; u < hi / 8; u += GLOBAL_NORM_THREADS) {
                for (int k = 0; k < 8; k++) { a = fmaf(g[u * 8 + k], g[u * 8 + k], a); }
            }
        } else {
            for (size_t i = lo + j; i < hi; i += GLOBAL_NORM_THREADS) { a = fmaf(g[i], g[i], a); }
        }
        acc[j] = a;
    }
    return emulate_block_sum(acc, GLOBAL_NORM_THREADS);
}

// ----------------------------------------------------------------------------
// encoder_backward: dwte, dwpe (bf16-exact floats) updated in place as the kernels do.
// dout (B*T, C) bf16-exact floats; inp (B*T) token ids.

static inline void emulate_encoder_backward(float *dwte, float *dwpe, const float *dout, const int *inp, int B, int T,
                                            int C) {
    const int BT = B * T;
    int *plan = (int *)mallocCheck(encoder_plan_ints(BT) * sizeof(int));
    int *counts = (int *)mallocCheck(ENCODER_TOKEN_RANGE * sizeof(int));
    EncoderPlanCounts n;
    const char *problem = encoder_backward_plan(plan, counts, inp, BT, &n);
    if (problem) { llmc_die("emulate_encoder_backward: %s", problem); }
    float *partials = (float *)mallocCheck(((size_t)n.num_slots + 1) * C * sizeof(float));
    float *acc = (float *)mallocCheck(C * sizeof(float));
    // pass 1
    for (int s = 0; s < n.num_segments; s++) {
        const int *seg = plan + BT + 4 * (size_t)s;
        const int token = seg[0], first = seg[1], count = seg[2], slot = seg[3];
        for (int c = 0; c < C; c++) { acc[c] = 0.0f; }
        for (int j = 0; j < count; j++) {
            const float *row = dout + (size_t)plan[first + j] * C;
            for (int c = 0; c < C; c++) { acc[c] += row[c]; }
        }
        if (slot < 0) {
            for (int c = 0; c < C; c++) { dwte[(size_t)token * C + c] = round_bf16(dwte[(size_t)token * C + c] + acc[c]); }
        } else {
            memcpy(partials + (size_t)slot * C, acc, C * sizeof(float));
        }
    }
    // pass 2
    const int *split = plan + (size_t)5 * BT;
    for (int i = 0; i < n.num_split; i++) {
        const int token = split[3 * i], first = split[3 * i + 1], pieces = split[3 * i + 2];
        for (int c = 0; c < C; c++) { acc[c] = 0.0f; }
        for (int p = 0; p < pieces; p++) {
            for (int c = 0; c < C; c++) { acc[c] += partials[(size_t)(first + p) * C + c]; }
        }
        for (int c = 0; c < C; c++) { dwte[(size_t)token * C + c] = round_bf16(dwte[(size_t)token * C + c] + acc[c]); }
    }
    // dwpe: over b in order
    for (int t = 0; t < T; t++) {
        for (int c = 0; c < C; c++) {
            float a = 0.0f;
            for (int b = 0; b < B; b++) { a += dout[((size_t)b * T + t) * C + c]; }
            dwpe[(size_t)t * C + c] = round_bf16(dwpe[(size_t)t * C + c] + a);
        }
    }
    free(acc);
    free(partials);
    free(counts);
    free(plan);
}

#endif  // DEV_CUDA_EMULATE_H
