/*
 * CPU reference for causal attention and the checks shared by the attention workbench
 * (attention.cu, on a GPU) and the attention simulator (attention_sim.cpp, on the CPU).
 * Host C++ only; bf16 values are handled as their uint16_t bit patterns (llmc/model_io.h converts).
 *
 * Layout as in llmc/cuda/attention.cuh: qkv (B, T, 3C), out (B, T, C), lse (B, NH, T), dqkv (B, T, 3C).
 * The reference is exact math on the given bf16 inputs in fp64: the forward from qkv; the backward
 * from (qkv, out, lse, dout) as given, i.e. D = rowsum(dout * out) with the bf16 `out` the backward
 * receives and P = exp(scale q.k - lse) with the given lse, as llmc/cuda/attention.cuh defines it.
 */
#ifndef ATTENTION_REF_H
#define ATTENTION_REF_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <algorithm>
#include <vector>

#include "nan_max.h"
#include "llmc/model_io.h"  // bf16_to_float, float_to_bf16 (round to nearest even); splitmix64

// deterministic uniform floats in [lo, hi), so every run and every machine gets the same inputs
struct RefRng {
    uint64_t state;
    explicit RefRng(uint64_t seed) : state(seed) {}
    float uniform(float lo, float hi) {
        return lo + (hi - lo) * (float)((splitmix64(&state) >> 40) * (1.0 / 16777216.0));
    }
};

// The test inputs: q and k uniform in [-2, 2) so that scaled scores have a standard deviation of
// about 1.3 at HS 64 (softmax rows neither flat nor one-hot: masking errors show in both out and lse);
// v and dout uniform in [-1, 1).
static inline void attention_make_inputs(std::vector<uint16_t> &qkv, std::vector<uint16_t> &dout, int B, int T, int C,
                                         uint64_t seed) {
    RefRng rng(seed);
    qkv.resize((size_t)B * T * 3 * C);
    dout.resize((size_t)B * T * C);
    for (size_t i = 0; i < qkv.size(); i++) {
        const bool is_v = (i % (3 * (size_t)C)) >= 2 * (size_t)C;
        qkv[i] = float_to_bf16(is_v ? rng.uniform(-1.0f, 1.0f) : rng.uniform(-2.0f, 2.0f));
    }
    for (size_t i = 0; i < dout.size(); i++) { dout[i] = float_to_bf16(rng.uniform(-1.0f, 1.0f)); }
}

// out (B, T, C) and lse (B, NH, T) in fp32 from fp64 math
static inline void attention_forward_ref(float *out, float *lse, const uint16_t *qkv, int B, int T, int C, int NH) {
    const int HS = C / NH;
    const double scale = 1.0 / sqrt((double)HS);
#pragma omp parallel for collapse(2) schedule(dynamic)  // (b, h) pairs are independent (with -fopenmp)
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            std::vector<double> s(T);
            for (int t = 0; t < T; t++) {
                const uint16_t *q = qkv + ((size_t)b * T + t) * 3 * C + h * HS;
                double mx = -INFINITY;
                for (int j = 0; j <= t; j++) {
                    const uint16_t *k = qkv + ((size_t)b * T + j) * 3 * C + C + h * HS;
                    double acc = 0.0;
                    for (int d = 0; d < HS; d++) { acc += (double)bf16_to_float(q[d]) * bf16_to_float(k[d]); }
                    s[j] = acc * scale;
                    mx = s[j] > mx ? s[j] : mx;
                }
                double sum = 0.0;
                for (int j = 0; j <= t; j++) {
                    s[j] = exp(s[j] - mx);
                    sum += s[j];
                }
                lse[((size_t)b * NH + h) * T + t] = (float)(mx + log(sum));
                for (int d = 0; d < HS; d++) {
                    double acc = 0.0;
                    for (int j = 0; j <= t; j++) {
                        acc += s[j] * bf16_to_float(qkv[((size_t)b * T + j) * 3 * C + 2 * C + h * HS + d]);
                    }
                    out[((size_t)b * T + t) * C + h * HS + d] = (float)(acc / sum);
                }
            }
        }
    }
}

// A test case: the inputs, and the reference forward's out (fp32, and rounded to bf16 as a kernel
// stores it: what the backward is fed) and lse.
struct RefForward {
    std::vector<uint16_t> qkv, dout, out_ref_bf16;
    std::vector<float> out_ref, lse_ref;
    RefForward(int B, int T, int C, int NH, uint64_t seed) {
        attention_make_inputs(qkv, dout, B, T, C, seed);
        out_ref.resize((size_t)B * T * C);
        lse_ref.resize((size_t)B * NH * T);
        attention_forward_ref(out_ref.data(), lse_ref.data(), qkv.data(), B, T, C, NH);
        out_ref_bf16.resize(out_ref.size());
        for (size_t i = 0; i < out_ref.size(); i++) { out_ref_bf16[i] = float_to_bf16(out_ref[i]); }
    }
};

// dqkv (B, T, 3C) in fp32 from fp64 math, given out (bf16) and lse as the backward receives them.
// noise (same shape), if not NULL: per element, the root sum of squares of the terms of its sum
// whose first factor a fused kernel rounds to bf16 (dS for dq and dk, P for dv), times the same
// scale: the size of the rounding noise those roundings add (see TOL_GRAD below).
static inline void attention_backward_ref(float *dqkv, float *noise, const uint16_t *dout, const uint16_t *qkv,
                                          const uint16_t *out, const float *lse, int B, int T, int C, int NH) {
    const int HS = C / NH;
    const double scale = 1.0 / sqrt((double)HS);
#pragma omp parallel for collapse(2) schedule(dynamic)  // (b, h) pairs are independent (with -fopenmp)
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            std::vector<double> dq(HS), dk((size_t)T * HS), dv((size_t)T * HS);
            std::vector<double> nq(HS), nk((size_t)T * HS), nv((size_t)T * HS);
            for (int t = 0; t < T; t++) {
                const uint16_t *q = qkv + ((size_t)b * T + t) * 3 * C + h * HS;
                const uint16_t *o = out + ((size_t)b * T + t) * C + h * HS;
                const uint16_t *dO = dout + ((size_t)b * T + t) * C + h * HS;
                double D = 0.0;
                for (int d = 0; d < HS; d++) { D += (double)bf16_to_float(dO[d]) * bf16_to_float(o[d]); }
                std::fill(dq.begin(), dq.end(), 0.0);
                std::fill(nq.begin(), nq.end(), 0.0);
                for (int j = 0; j <= t; j++) {
                    const uint16_t *k = qkv + ((size_t)b * T + j) * 3 * C + C + h * HS;
                    const uint16_t *v = k + C;
                    double qk = 0.0, dp = 0.0;
                    for (int d = 0; d < HS; d++) {
                        qk += (double)bf16_to_float(q[d]) * bf16_to_float(k[d]);
                        dp += (double)bf16_to_float(dO[d]) * bf16_to_float(v[d]);
                    }
                    const double p = exp(scale * qk - lse[((size_t)b * NH + h) * T + t]);
                    const double ds = p * (dp - D);
                    for (int d = 0; d < HS; d++) {
                        const double tq = ds * bf16_to_float(k[d]), tk = ds * bf16_to_float(q[d]);
                        const double tv = p * bf16_to_float(dO[d]);
                        dq[d] += tq;
                        dk[(size_t)j * HS + d] += tk;
                        dv[(size_t)j * HS + d] += tv;
                        nq[d] += tq * tq;
                        nk[(size_t)j * HS + d] += tk * tk;
                        nv[(size_t)j * HS + d] += tv * tv;
                    }
                }
                for (int d = 0; d < HS; d++) {
                    const size_t i = ((size_t)b * T + t) * 3 * C + h * HS + d;
                    dqkv[i] = (float)(scale * dq[d]);
                    if (noise) { noise[i] = (float)(scale * sqrt(nq[d])); }
                }
            }
            for (int t = 0; t < T; t++) {
                for (int d = 0; d < HS; d++) {
                    const size_t i = ((size_t)b * T + t) * 3 * C + C + h * HS + d;
                    dqkv[i] = (float)(scale * dk[(size_t)t * HS + d]);
                    dqkv[i + C] = (float)dv[(size_t)t * HS + d];
                    if (noise) {
                        noise[i] = (float)(scale * sqrt(nk[(size_t)t * HS + d]));
                        noise[i + C] = (float)sqrt(nv[(size_t)t * HS + d]);
                    }
                }
            }
        }
    }
}

// ----------------------------------------------------------------------------
// comparison. Every check: |got - ref| <= rtol |ref| + atol + noise_mul * noise (elementwise noise,
// where given), with the tolerance of each tensor stated where it is chosen. Prints the worst error
// (as a fraction of its limit) and the first mismatches; returns the number of mismatches.

struct RefTol {
    double rtol, atol, noise_mul;
};

// Tolerances, from where the kernels round. Inputs are the same bf16 values for every version;
// accumulation is fp32 and the reference fp64, so fp32 summation error (~1e-6 relative) only needs
// the small absolute floors. bf16 rounding (to nearest even) has a relative error <= 2^-8.
// - out: the bf16 output, <= 2^-8 |out|, and P rounded to bf16 before P V: <= 2^-8 sum_s p_s |v_s| / l
//   <= 2^-8 max|v| = 2^-8 (|v| < 1). So rtol 2^-7 and atol 2^-8 + 1e-4: above the worst case, and far
//   below the error of a wrong mask (a leaked key of weight ~1/(t+1) moves out by ~|v|/(t+1)).
// - lse: fp32 only (ex2.approx relative error ~2^-22, a row sum of <= 1024 terms <= 6e-5 relative,
//   __logf absolute ~2^-21): atol 2e-4; a leaked or lost key moves lse by ~1/(t+1).
// - dq, dk, dv: the fused kernels round dS (for dq, dk) and P (for dv) to bf16 before the matmul
//   that sums them, so each element carries a random error of about 2^-8 / sqrt(3) times the root
//   sum of squares of its terms (`noise` from attention_backward_ref), plus the bf16 output rounding
//   (2^-8 |ref|). A bound in |ref| or in the tensor's rms alone fails on elements whose sum has many
//   large cancelling terms (a key that many queries attend to), so: rtol 2^-7, noise_mul 2^-6 (about
//   9 standard deviations of that noise: no false alarms over millions of elements), and atol 1e-4
//   for the fp32 cancellation in dP - D (exact zeros, e.g. dq and dk at T = 1). A wrong mask or a lost
//   term moves an element by one whole term, ~sqrt(t) times the noise scale.
static const RefTol TOL_OUT = {1.0 / 128, 1.0 / 256 + 1e-4, 0.0};
static const RefTol TOL_LSE = {0.0, 2e-4, 0.0};
static const RefTol TOL_GRAD = {1.0 / 128, 1e-4, 1.0 / 64};

// compares got against ref over a rows x ncols strided view (element r * stride + col0 + c), so the
// q, k, v parts of dqkv are reported separately
static inline long ref_compare(const char *what, const float *ref, const float *got, const float *noise, size_t rows,
                               size_t stride, size_t col0, size_t ncols, RefTol tol) {
    long bad = 0;
    double max_err = 0.0, max_ratio = 0.0;
    for (size_t r = 0; r < rows; r++) {
        for (size_t c = col0; c < col0 + ncols; c++) {
            const size_t i = r * stride + c;
            const double err = fabs((double)got[i] - (double)ref[i]);
            const double lim = tol.rtol * fabs((double)ref[i]) + tol.atol + (noise ? tol.noise_mul * noise[i] : 0.0);
            const double ratio = err == err ? err / lim : INFINITY;  // a NaN result counts as infinitely far
            max_err = max_keep_nan(max_err, err);
            if (ratio > max_ratio) { max_ratio = ratio; }
            if (!(err <= lim)) {
                if (bad < 5) {
                    printf("    MISMATCH %s row %zu col %zu: got %.6f expected %.6f (limit %.2e)\n", what, r, c - col0,
                           got[i], ref[i], lim);
                }
                bad++;
            }
        }
    }
    printf("    %-22s max |err| %.3e, %.2f of its limit%s\n", what, max_err, max_ratio, bad ? "  FAIL" : "");
    if (bad) { printf("    %s: %ld of %zu values out of tolerance\n", what, bad, rows * ncols); }
    return bad;
}

// dq, dk, dv parts of a dqkv gradient
static inline long ref_compare_dqkv(const char *who, const float *ref, const float *got, const float *noise, int B,
                                    int T, int C) {
    long bad = 0;
    const char *names[3] = {"dq", "dk", "dv"};
    for (int part = 0; part < 3; part++) {
        char what[64];
        snprintf(what, sizeof(what), "%s%s", who, names[part]);
        bad += ref_compare(what, ref, got, noise, (size_t)B * T, 3 * (size_t)C, (size_t)part * C, C, TOL_GRAD);
    }
    return bad;
}

static inline void bf16_to_float_array(float *dst, const uint16_t *src, size_t n) {
    for (size_t i = 0; i < n; i++) { dst[i] = bf16_to_float(src[i]); }
}

#endif  // ATTENTION_REF_H
