/*
 * Helpers shared by the kernel workbenches in dev/cuda: host bf16 rounding, seeded random data,
 * host <-> device copies, checks against a CPU reference with a stated tolerance (printing the first
 * mismatches), bitwise comparisons for determinism, and timing with CUDA events with bandwidth /
 * FLOP arithmetic.
 *
 * Every check adds to wb_failures; a workbench ends with `return workbench_finish(...)`, which
 * exits non-zero if anything failed.
 */
#ifndef DEV_CUDA_COMMON_H
#define DEV_CUDA_COMMON_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "llmc/cuda/cuda_common.cuh"
#include "llmc/model_io.h"
#include "nan_max.h"

static int wb_failures = 0;

// Under the host simulator (make -C dev/cuda run-sim, sim/cuda_runtime.h) the workbenches run the
// same checks at reduced sizes and skip the timings, which would mean nothing there.
#ifdef LLMC_HOST_SIM
#define WB_SIM 1
#else
#define WB_SIM 0
#endif

// ----------------------------------------------------------------------------
// bf16 on the host: llmc/model_io.h's bf16_to_float and float_to_bf16 (round to nearest even, NaN
// kept a quiet NaN: the same as the device's __float2bfloat16)

static inline float round_bf16(float f) { return bf16_to_float(float_to_bf16(f)); }

// the bf16 neighbours of f: toward zero (truncation) and the next one away from zero (the two values
// a stochastic rounding of f may give)
static inline void bf16_neighbours(float f, float *lo, float *hi) {
    uint32_t u;
    memcpy(&u, &f, sizeof(u));
    uint32_t t = u & 0xffff0000u;
    memcpy(lo, &t, sizeof(t));
    if ((u & 0xffffu) == 0) { *hi = *lo; return; }
    t += 0x10000u;
    memcpy(hi, &t, sizeof(t));
}

// ----------------------------------------------------------------------------
// seeded random numbers (llmc/utils.h's splitmix64): the same data on every run and machine

typedef struct {
    uint64_t state;
} Rng;

static inline uint64_t rng_next(Rng *r) { return splitmix64(&r->state); }
static inline float rng_uniform(Rng *r) { return (float)(rng_next(r) >> 40) * (1.0f / 16777216.0f); }  // [0, 1)
static inline float rng_range(Rng *r, float lo, float hi) { return lo + (hi - lo) * rng_uniform(r); }
static inline int rng_int(Rng *r, int n) { return (int)(rng_next(r) % (uint64_t)n); }
static inline float rng_normal(Rng *r) {
    float u1 = rng_uniform(r), u2 = rng_uniform(r);
    if (u1 < 1e-12f) { u1 = 1e-12f; }
    return sqrtf(-2.0f * logf(u1)) * cosf(6.2831853f * u2);
}

// n uniform values in [lo, hi), already rounded to bf16 (what the device will hold)
static inline float *host_uniform_bf16(size_t n, float lo, float hi, uint64_t seed) {
    Rng r = {seed};
    float *x = (float *)mallocCheck(n * sizeof(float));
    for (size_t i = 0; i < n; i++) { x[i] = round_bf16(rng_range(&r, lo, hi)); }
    return x;
}

// ----------------------------------------------------------------------------
// device buffers

static inline floatX *device_bf16_from(const float *h, size_t n) {
    uint16_t *bits = (uint16_t *)mallocCheck(n * sizeof(uint16_t));
    for (size_t i = 0; i < n; i++) { bits[i] = float_to_bf16(h[i]); }
    floatX *d;
    cudaCheck(cudaMalloc((void **)&d, n * sizeof(floatX) + 16));  // +16: room for deliberately misaligned views
    cudaCheck(cudaMemcpy(d, bits, n * sizeof(uint16_t), cudaMemcpyHostToDevice));
    free(bits);
    return d;
}

static inline void upload_bf16(floatX *d, const float *h, size_t n) {
    uint16_t *bits = (uint16_t *)mallocCheck(n * sizeof(uint16_t));
    for (size_t i = 0; i < n; i++) { bits[i] = float_to_bf16(h[i]); }
    cudaCheck(cudaMemcpy(d, bits, n * sizeof(uint16_t), cudaMemcpyHostToDevice));
    free(bits);
}

static inline void download_bf16(float *h, const floatX *d, size_t n) {
    uint16_t *bits = (uint16_t *)mallocCheck(n * sizeof(uint16_t));
    cudaCheck(cudaMemcpy(bits, d, n * sizeof(uint16_t), cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < n; i++) { h[i] = bf16_to_float(bits[i]); }
    free(bits);
}

static inline void download_f32(float *h, const float *d, size_t n) {
    cudaCheck(cudaMemcpy(h, d, n * sizeof(float), cudaMemcpyDeviceToHost));
}

static inline void *device_alloc(size_t bytes) {
    void *d;
    cudaCheck(cudaMalloc(&d, bytes > 0 ? bytes : 1));
    return d;
}

// a device buffer's bytes on the host (for bitwise comparisons); caller frees
static inline void *download_bytes(const void *d, size_t bytes) {
    void *h = mallocCheck(bytes);
    cudaCheck(cudaMemcpy(h, d, bytes, cudaMemcpyDeviceToHost));
    return h;
}

// ----------------------------------------------------------------------------
// checks

/*
 * |got - ref| <= atol + rtol * |ref| for every element (NaN only matches NaN). Prints one line,
 * plus the first 5 mismatches. Returns the number of mismatches and counts a failure.
 */
static inline size_t check_close(const char *what, const float *got, const float *ref, size_t n, double atol,
                                 double rtol) {
    size_t bad = 0;
    double max_diff = 0.0, max_ref = 0.0;
    for (size_t i = 0; i < n; i++) {
        const double g = got[i], r = ref[i];
        const double d = fabs(g - r);  // NaN or inf where either side is
        int ok;
        if (isnan(r) || isnan(g)) {
            ok = isnan(r) && isnan(g);
        } else if (isinf(r) || isinf(g)) {
            ok = g == r;
        } else {
            if (fabs(r) > max_ref) { max_ref = fabs(r); }
            ok = d <= atol + rtol * fabs(r);
        }
        if (!ok || isfinite(d)) { max_diff = max_keep_nan(max_diff, d); }  // a matched NaN or inf is no difference
        if (!ok) {
            if (bad < 5) {
                printf("    mismatch %s[%zu]: got %.8g, expected %.8g (diff %.3g, allowed %.3g)\n", what, i, g, r, d,
                       atol + rtol * fabs(r));
            }
            bad++;
        }
    }
    printf("  %-52s %s  max|diff| %.3g (max|ref| %.3g; tol %.1e + %.1e*|ref|)", what, bad ? "FAIL" : "ok  ", max_diff,
           max_ref, atol, rtol);
    if (bad) { printf("  %zu of %zu outside", bad, n); }
    printf("\n");
    if (bad) { wb_failures++; }
    return bad;
}

// |got - ref| <= tol[i] for every element, with a tolerance derived per element (e.g. from the
// sum of |terms| of a dot product); prints like check_close
static inline size_t check_close_tol(const char *what, const float *got, const float *ref, const float *tol, size_t n) {
    size_t bad = 0;
    double max_diff = 0.0, max_ratio = 0.0;
    for (size_t i = 0; i < n; i++) {
        const double d = fabs((double)got[i] - (double)ref[i]);
        const int ok = d <= tol[i];  // false for NaN
        max_diff = max_keep_nan(max_diff, d);
        if (tol[i] > 0) { max_ratio = max_keep_nan(max_ratio, d / tol[i]); }
        if (!ok) {
            if (bad < 5) {
                printf("    mismatch %s[%zu]: got %.8g, expected %.8g (diff %.3g, allowed %.3g)\n", what, i, got[i], ref[i],
                       d, tol[i]);
            }
            bad++;
        }
    }
    printf("  %-52s %s  max|diff| %.3g, worst diff/allowed %.2f", what, bad ? "FAIL" : "ok  ", max_diff, max_ratio);
    if (bad) { printf("  %zu of %zu outside", bad, n); }
    printf("\n");
    if (bad) { wb_failures++; }
    return bad;
}

// two byte buffers must be identical (determinism, exact-by-construction results)
static inline int check_bitwise(const char *what, const void *a, const void *b, size_t bytes) {
    const unsigned char *x = (const unsigned char *)a, *y = (const unsigned char *)b;
    size_t first = bytes, count = 0;
    for (size_t i = 0; i < bytes; i++) {
        if (x[i] != y[i]) {
            if (first == bytes) { first = i; }
            count++;
        }
    }
    if (count == 0) {
        printf("  %-52s ok    bitwise identical (%zu bytes)\n", what, bytes);
        return 0;
    }
    printf("  %-52s FAIL  %zu of %zu bytes differ, first at byte %zu\n", what, count, bytes, first);
    wb_failures++;
    return 1;
}

static inline void check_true(const char *what, int ok, const char *detail) {
    printf("  %-52s %s  %s\n", what, ok ? "ok  " : "FAIL", detail);
    if (!ok) { wb_failures++; }
}

// ----------------------------------------------------------------------------
// timing

// WB_NO_TIMING=1 (the sanitizer runs: every launch is instrumented): time_ms runs f() once and
// returns 0, and the reports say "not timed"
static inline int wb_no_timing(void) {
    const char *v = getenv("WB_NO_TIMING");
    if (v == NULL || v[0] == '\0' || strcmp(v, "0") == 0) { return 0; }
    if (strcmp(v, "1") != 0) {
        fprintf(stderr, "error: WB_NO_TIMING=%s: expected 0 or 1 (1: run each timed kernel once, untimed)\n", v);
        exit(2);
    }
    return 1;
}

// average milliseconds of f() over reps runs, after one warm-up run
template <class F>
static float time_ms(F f, int reps) {
    f();
    cudaCheck(cudaDeviceSynchronize());
    if (wb_no_timing()) { return 0.0f; }
    cudaEvent_t start, stop;
    cudaCheck(cudaEventCreate(&start));
    cudaCheck(cudaEventCreate(&stop));
    cudaCheck(cudaEventRecord(start));
    for (int i = 0; i < reps; i++) { f(); }
    cudaCheck(cudaEventRecord(stop));
    cudaCheck(cudaEventSynchronize(stop));
    float ms = 0.0f;
    cudaCheck(cudaEventElapsedTime(&ms, start, stop));
    cudaCheck(cudaEventDestroy(start));
    cudaCheck(cudaEventDestroy(stop));
    return ms / reps;
}

// bytes: the minimum traffic the kernel must move (each input read once, each output written once)
static inline void report_bandwidth(const char *what, float ms, double bytes) {
    if (ms <= 0.0f) { printf("  time %-47s not timed (WB_NO_TIMING=1)\n", what); return; }
    printf("  time %-47s %9.4f ms  %8.1f GB/s\n", what, ms, bytes / (ms * 1e-3) / 1e9);
}

static inline void report_flops(const char *what, float ms, double flops) {
    if (ms <= 0.0f) { printf("  time %-47s not timed (WB_NO_TIMING=1)\n", what); return; }
    printf("  time %-47s %9.4f ms  %8.1f TFLOP/s\n", what, ms, flops / (ms * 1e-3) / 1e12);
}

// ----------------------------------------------------------------------------
// start and end of a workbench

static inline void workbench_init(const char *name) {
    setvbuf(stdout, NULL, _IOLBF, 0);  // lines appear in order with stderr, also through a pipe
    (void)wb_no_timing();              // a bad WB_NO_TIMING stops here, before any work
    int count = 0;
    cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess || count == 0) {
        fprintf(stderr, "%s: no CUDA device visible (%s); run the workbenches on a GPU machine (dev/cuda/run_all.sh)\n",
                name, err != cudaSuccess ? cudaGetErrorString(err) : "0 devices");
        exit(2);
    }
    cudaCheck(cudaSetDevice(0));
    cudaDeviceProp prop;
    cudaCheck(cudaGetDeviceProperties(&prop, 0));
    printf("%s on %s (sm_%d%d, %d SMs, %.0f GiB)\n", name, prop.name, prop.major, prop.minor, prop.multiProcessorCount,
           prop.totalGlobalMem / (1024.0 * 1024.0 * 1024.0));
}

static inline int workbench_finish(const char *name) {
    cudaCheck(cudaDeviceSynchronize());
#ifdef LLMC_HOST_SIM
    if (sim::errors) {
        printf("%s: %ld simulator error(s) (races, divergent collectives, deadlocks, bad launches or API use)\n", name,
               sim::errors);
        wb_failures++;
    }
#endif
    if (wb_failures) {
        printf("%s: %d check(s) FAILED\n", name, wb_failures);
        return 1;
    }
    printf("%s: all checks passed\n", name);
    return 0;
}

// GPT-2 tanh GELU and its derivative in double, for the CPU references
static inline double ref_gelu(double x) {
    const double s = 0.7978845608028654, u = s * (x + 0.044715 * x * x * x);
    return 0.5 * x * (1.0 + tanh(u));
}
static inline double ref_gelu_grad(double x) {
    const double s = 0.7978845608028654, u = s * (x + 0.044715 * x * x * x), t = tanh(u);
    return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * s * (1.0 + 3.0 * 0.044715 * x * x);
}

#endif  // DEV_CUDA_COMMON_H
