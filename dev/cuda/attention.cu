/*
 * Workbench for llmc/cuda/attention.cuh (the fused flash-style attention, forward and backward, and the
 * unfused oracle) and, in builds with cuDNN, llmc/cuda/cudnn_att.h (cuDNN's fused SDPA, the trainer's
 * -at cudnn), each against the fp64 CPU reference of attention_ref.h, then timed.
 *
 * Checks, per implementation (exit 1 on any failure):
 * - forward: out and lse vs the reference (each fused forward tiling: 1 and 2 m16 tiles per warp at
 *   HS 64; the unfused oracle; cuDNN), and run twice: bitwise identical.
 * - backward: dq, dk, dv fed the reference forward's out (as bf16) and lse, vs the reference; run
 *   twice: bitwise identical (for cuDNN only where it built its deterministic algorithm; otherwise
 *   the difference is printed, not failed); then the trainer's chain (this forward -> this backward
 *   of its out and lse) vs the reference backward of that out and lse.
 * - generation's kernel (attention_forward_rows): the forward's out and lse, each sequence in two calls.
 * - shapes: ragged T (1, 17, 64, 100, 130, 1024), B * NH > 1, HS 64 and 128 for our kernels; cuDNN
 *   next to our fused kernel on the same inputs at T = 64, 256, 1024 with the heads of d12 (NH 12)
 *   and d48 (NH 25), HS 64, and the largest difference between the two printed.
 * Tolerances and their reasons: attention_ref.h. They follow from where a FlashAttention-2-style
 * kernel rounds to bf16 (P before P V, dS before dQ and dK), which is also what cuDNN's flash kernels
 * do by their documentation: cuDNN is held to the same limits.
 * Timing: T = 1024 with d12's heads at B = 16, 32, 64 (also the unfused oracle) and d48's at B = 16;
 * T = 256 and 64 with d12's heads at 64K tokens; fused forward (both tilings), fused backward, cuDNN
 * forward and backward, generation's kernel on each sequence's last row, each the median of repeated
 * runs (CUDA events).
 * FLOP: causal forward = 2 matmuls (S = Q K^T, O = P V) of B NH T^2 HS / 2 multiply-adds each =
 * 2 B NH T^2 HS FLOP; backward = 2.5x the forward (5 matmuls: S again, dP, dV, dQ, dK), the usual
 * convention; it does not count the fused backward's second S and dP (its two kernels each compute
 * both: 7 matmuls, 3.5x the forward's matmul work).
 *
 * Build: make cuda-kernels from the repository root (into build/cuda/attention; with cuDNN when the
 * Makefile finds it and the frontend), or without cuDNN from dev/cuda:
 *   nvcc -O3 -std=c++17 --use_fast_math -gencode arch=compute_90a,code=sm_90a -I../.. attention.cu -o attention
 * Run: ./attention               all checks, then timing
 *      ./attention --no-timing   checks only
 *      ./attention --no-cudnn    without the cuDNN cases (racecheck: cuDNN's kernels are not ours,
 *                                and instrumenting its runtime-compiled ones takes minutes)
 *      ./attention --small       only the cases of T <= 130 (ragged edges, several key tiles, the
 *                                causal diagonal, HS 64 and 128): racecheck instruments every
 *                                shared-memory access, and the T = 1024 cases ran past its 90 s
 * Host time: the CPU reference and the inputs take 3 s (our kernels' cases) and 75 to 87 s (the cuDNN
 * cases: their reference backward three times at T = 1024 with 12 and 25 heads) on the 2 busy cores of
 * the (GPU-less) machine this was written on; the reference runs its (b, h) pairs on all cores, so a
 * 16-core GPU machine should take a fraction of that. The GPU part was not measured there.
 */
#include <algorithm>
#include <memory>
#include <functional>
#include <vector>

#include "llmc/cuda/attention.cuh"
#include "attention_ref.h"
#include "attention_unfused.cuh"
#ifdef USE_CUDNN
#include "llmc/cuda/cudnn_att.h"
#endif

struct DevBuf {  // a device buffer freed at scope exit
    void *p = NULL;
    explicit DevBuf(size_t bytes) { cudaCheck(cudaMalloc(&p, bytes > 0 ? bytes : 1)); }
    ~DevBuf() { cudaFree(p); }
    DevBuf(const DevBuf &) = delete;
    DevBuf &operator=(const DevBuf &) = delete;
    template <class T>
    T *as() const {
        return (T *)p;
    }
};

static void to_device(void *dst, const void *src, size_t bytes) {
    cudaCheck(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
}
static void to_host(void *dst, const void *src, size_t bytes) {
    cudaCheck(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
}

static std::vector<float> bf16_device_to_float(const floatX *d, size_t n) {
    std::vector<uint16_t> h(n);
    to_host(h.data(), d, n * 2);
    std::vector<float> f(n);
    bf16_to_float_array(f.data(), h.data(), n);
    return f;
}

// fills with 0xff bytes: NaN in bf16 and fp32, so an element a kernel fails to write fails the check
static void poison(void *d, size_t bytes) { cudaCheck(cudaMemset(d, 0xff, bytes)); }

// one attention implementation under test: a forward, and a backward (absent for the forward-only
// tilings); `repeatable`: the backward must give bitwise-identical results when run twice
struct Impl {
    const char *name;
    std::function<void(floatX *out, float *lse, const floatX *qkv)> fwd;
    std::function<void(floatX *dqkv, const floatX *dout, const floatX *qkv, const floatX *out, const float *lse)> bwd;
    bool repeatable;
    bool chain;  // also check the trainer's chain: this forward, then this backward of its out and lse
};

// one test shape: inputs, fp64 references and device buffers
struct Case : RefForward {
    int B, T, NH, HS, C;
    size_t n_qkv, n_out, n_lse;
    std::vector<float> dqkv_ref, noise;
    DevBuf d_qkv, d_dout, d_out, d_out2, d_lse, d_lse2, d_dqkv, d_dqkv2, d_ref_out, d_ref_lse;
    Case(int B_, int T_, int NH_, int HS_, uint64_t seed)
        : RefForward(B_, T_, NH_ * HS_, NH_, seed), B(B_), T(T_), NH(NH_), HS(HS_), C(NH_ * HS_),
          n_qkv((size_t)B_ * T_ * 3 * C), n_out((size_t)B_ * T_ * C), n_lse((size_t)B_ * NH_ * T_), d_qkv(n_qkv * 2),
          d_dout(n_out * 2), d_out(n_out * 2), d_out2(n_out * 2), d_lse(n_lse * 4), d_lse2(n_lse * 4),
          d_dqkv(n_qkv * 2), d_dqkv2(n_qkv * 2), d_ref_out(n_out * 2), d_ref_lse(n_lse * 4) {
        // the backward reference takes the reference forward's out rounded to bf16, as the GPU stores it
        dqkv_ref.resize(n_qkv);
        noise.resize(n_qkv);
        attention_backward_ref(dqkv_ref.data(), noise.data(), dout.data(), qkv.data(), out_ref_bf16.data(),
                               lse_ref.data(), B, T, C, NH);
        to_device(d_qkv.p, qkv.data(), n_qkv * 2);
        to_device(d_dout.p, dout.data(), n_out * 2);
        to_device(d_ref_out.p, out_ref_bf16.data(), n_out * 2);
        to_device(d_ref_lse.p, lse_ref.data(), n_lse * 4);
    }
    const floatX *qkv_d() const { return d_qkv.as<floatX>(); }
    const floatX *dout_d() const { return d_dout.as<floatX>(); }
};

static bool same_bytes(const void *a, const void *b, size_t bytes) {
    std::vector<uint8_t> x(bytes), y(bytes);
    to_host(x.data(), a, bytes);
    to_host(y.data(), b, bytes);
    return x == y;
}

// run twice into two buffers: bitwise identical? A failure only where the implementation promises it.
static long check_repeat(const char *what, bool identical, bool required) {
    printf("    %-22s %s\n", what,
           identical ? "bitwise identical" : required ? "DIFFERENT  FAIL" : "different (not promised: not a failure)");
    return !identical && required;
}

static long check_impl(Case &c, const Impl &im) {
    long bad = 0;
    char what[48];
    // forward vs the reference, and twice: bitwise (every implementation's forward has a fixed order)
    poison(c.d_out.p, c.n_out * 2);
    poison(c.d_lse.p, c.n_lse * 4);
    im.fwd(c.d_out.as<floatX>(), c.d_lse.as<float>(), c.qkv_d());
    cudaCheck(cudaDeviceSynchronize());
    std::vector<float> out = bf16_device_to_float(c.d_out.as<floatX>(), c.n_out), lse(c.n_lse);
    to_host(lse.data(), c.d_lse.p, c.n_lse * 4);
    snprintf(what, sizeof(what), "%s fwd out", im.name);
    bad += ref_compare(what, c.out_ref.data(), out.data(), NULL, (size_t)c.B * c.T, c.C, 0, c.C, TOL_OUT);
    snprintf(what, sizeof(what), "%s fwd lse", im.name);
    bad += ref_compare(what, c.lse_ref.data(), lse.data(), NULL, (size_t)c.B * c.NH, c.T, 0, c.T, TOL_LSE);
    im.fwd(c.d_out2.as<floatX>(), c.d_lse2.as<float>(), c.qkv_d());
    cudaCheck(cudaDeviceSynchronize());
    snprintf(what, sizeof(what), "%s fwd twice:", im.name);
    bad += check_repeat(what, same_bytes(c.d_out.p, c.d_out2.p, c.n_out * 2) &&
                                  same_bytes(c.d_lse.p, c.d_lse2.p, c.n_lse * 4), true);
    if (!im.bwd) { return bad; }

    // backward fed the reference out and lse, twice
    poison(c.d_dqkv.p, c.n_qkv * 2);
    poison(c.d_dqkv2.p, c.n_qkv * 2);
    im.bwd(c.d_dqkv.as<floatX>(), c.dout_d(), c.qkv_d(), c.d_ref_out.as<floatX>(), c.d_ref_lse.as<float>());
    im.bwd(c.d_dqkv2.as<floatX>(), c.dout_d(), c.qkv_d(), c.d_ref_out.as<floatX>(), c.d_ref_lse.as<float>());
    cudaCheck(cudaDeviceSynchronize());
    snprintf(what, sizeof(what), "%s bwd twice:", im.name);
    bad += check_repeat(what, same_bytes(c.d_dqkv.p, c.d_dqkv2.p, c.n_qkv * 2), im.repeatable);
    std::vector<float> got = bf16_device_to_float(c.d_dqkv.as<floatX>(), c.n_qkv);
    snprintf(what, sizeof(what), "%s bwd ", im.name);
    bad += ref_compare_dqkv(what, c.dqkv_ref.data(), got.data(), c.noise.data(), c.B, c.T, c.C);
    if (!im.chain) { return bad; }

    // the trainer's chain: this forward, then this backward of its own out and lse, against the
    // reference backward of that out and lse
    im.fwd(c.d_out.as<floatX>(), c.d_lse.as<float>(), c.qkv_d());
    poison(c.d_dqkv.p, c.n_qkv * 2);
    im.bwd(c.d_dqkv.as<floatX>(), c.dout_d(), c.qkv_d(), c.d_out.as<floatX>(), c.d_lse.as<float>());
    cudaCheck(cudaDeviceSynchronize());
    std::vector<uint16_t> out_gpu(c.n_out);
    std::vector<float> lse_gpu(c.n_lse);
    to_host(out_gpu.data(), c.d_out.p, c.n_out * 2);
    to_host(lse_gpu.data(), c.d_lse.p, c.n_lse * 4);
    std::vector<float> chain_ref(c.n_qkv), chain_noise(c.n_qkv);
    attention_backward_ref(chain_ref.data(), chain_noise.data(), c.dout.data(), c.qkv.data(), out_gpu.data(),
                           lse_gpu.data(), c.B, c.T, c.C, c.NH);
    got = bf16_device_to_float(c.d_dqkv.as<floatX>(), c.n_qkv);
    snprintf(what, sizeof(what), "%s fwd+bwd ", im.name);
    bad += ref_compare_dqkv(what, chain_ref.data(), got.data(), chain_noise.data(), c.B, c.T, c.C);
    return bad;
}

// our fused kernels: the forward at a given tiling (0: the default), and the backward
static Impl fused_impl(const char *name, const Case &c, DevBuf &scratch, int mtiles) {
    const int B = c.B, T = c.T, C = c.C, NH = c.NH;
    float *scratch_d = scratch.as<float>();
    Impl im = {name, nullptr, nullptr, true, true};
    im.fwd = [=](floatX *out, float *lse, const floatX *qkv) {
        if (mtiles) { attention_forward_tiles(out, lse, qkv, B, T, C, NH, mtiles, 0); }
        else { attention_forward(out, lse, qkv, B, T, C, NH, 0); }
    };
    if (!mtiles) {
        im.bwd = [=](floatX *dqkv, const floatX *dout, const floatX *qkv, const floatX *out, const float *lse) {
            attention_backward(dqkv, dout, qkv, out, lse, scratch_d, B, T, C, NH, 0);
        };
    }
    return im;
}

// generation's kernels (attention_forward_rows), one sequence at a time, each in two calls (rows 0..T/2,
// then the rest, which reads the keys of the first call's rows), with scratch for 64 rows (longer
// calls in several launches); forward only
static Impl rows_impl(const Case &c) {
    const int B = c.B, T = c.T, C = c.C, NH = c.NH;
    const size_t rows_bytes = 64 * attention_rows_scratch_bytes(C, NH);
    const std::shared_ptr<DevBuf> scratch = std::make_shared<DevBuf>(rows_bytes);
    Impl im = {"rows", nullptr, nullptr, true, false};
    im.fwd = [=](floatX *out, float *lse, const floatX *qkv) {
        float *rows_scratch = scratch->as<float>();
        for (int b = 0; b < B; b++) {
            floatX *ob = out + (size_t)b * T * C;
            float *lb = lse + (size_t)b * NH * T;
            const floatX *qb = qkv + (size_t)b * T * 3 * C;
            if (T / 2 > 0) { attention_forward_rows(ob, lb, qb, 0, T / 2, C, NH, T, rows_scratch, rows_bytes, 0); }
            attention_forward_rows(ob, lb, qb, T / 2, T, C, NH, T, rows_scratch, rows_bytes, 0);
        }
    };
    return im;
}

static long check_case(int B, int T, int NH, int HS, uint64_t seed) {
    printf("B %d T %d NH %d HS %d\n", B, T, NH, HS);
    Case c(B, T, NH, HS, seed);
    const int C = c.C;
    DevBuf scratch(attention_backward_scratch_bytes(B, T, C, NH));
    DevBuf scratch_unfused(std::max(attention_forward_unfused_scratch_bytes(B, T, C, NH),
                                    attention_backward_unfused_scratch_bytes(B, T, C, NH)));
    long bad = 0;
    // every forward tiling, then the default fused forward and backward, then the oracle
    bad += check_impl(c, fused_impl("fused (1)", c, scratch, 1));
    if (HS == 64) { bad += check_impl(c, fused_impl("fused (2)", c, scratch, 2)); }
    bad += check_impl(c, fused_impl("fused", c, scratch, 0));
    float *su = scratch_unfused.as<float>();
    Impl unfused = {"unfused", nullptr, nullptr, true, false};  // no atomics either: repeatable
    unfused.fwd = [=](floatX *out, float *lse, const floatX *qkv) {
        attention_forward_unfused(out, lse, qkv, su, B, T, C, NH, 0);
    };
    unfused.bwd = [=](floatX *dqkv, const floatX *dout, const floatX *qkv, const floatX *out, const float *lse) {
        attention_backward_unfused(dqkv, dout, qkv, out, lse, su, B, T, C, NH, 0);
    };
    bad += check_impl(c, unfused);
    bad += check_impl(c, rows_impl(c));
    return bad;
}

#ifdef USE_CUDNN
static void cudnn_check(const char *err) {
    if (err) {
        fprintf(stderr, "error: %s\n", err);
        exit(1);
    }
}

// cuDNN's default backward (dQ summed with atomics) from here on, its graphs built for the shape:
// their workspace bytes (cudnn_att_set_deterministic(1) goes back to the deterministic one)
static size_t cudnn_default_backward(int B, int T, int NH, int HS) {
    cudnn_att_set_deterministic(0);
    size_t bytes = 0;
    cudnn_check(cudnn_att_prepare(B, T, NH, HS, SIZE_MAX, &bytes));
    return bytes;
}

// cuDNN's SDPA through llmc/cuda/cudnn_att.h (the trainer's -at cudnn), with its own workspace
static Impl cudnn_impl(const Case &c, DevBuf &workspace, size_t ws_bytes) {
    const int B = c.B, T = c.T, NH = c.NH, HS = c.HS;
    void *ws = workspace.p;
    Impl im = {"cudnn", nullptr, nullptr, cudnn_att_deterministic() != 0, true};
    im.fwd = [=](floatX *out, float *lse, const floatX *qkv) {
        cudnn_check(cudnn_att_forward(out, lse, qkv, B, T, NH, HS, ws, ws_bytes, 0));
    };
    im.bwd = [=](floatX *dqkv, const floatX *dout, const floatX *qkv, const floatX *out, const float *lse) {
        cudnn_check(cudnn_att_backward(dqkv, dout, qkv, out, lse, B, T, NH, HS, ws, ws_bytes, 0));
    };
    return im;
}

// max |a - b| over n bf16 values on the device (NaN if any difference is)
static float max_diff_bf16(const floatX *a, const floatX *b, size_t n) {
    std::vector<float> x = bf16_device_to_float(a, n), y = bf16_device_to_float(b, n);
    double m = 0.0;
    for (size_t i = 0; i < n; i++) { m = max_keep_nan(m, fabsf(x[i] - y[i])); }
    return (float)m;
}

// cuDNN and our fused kernel on the same inputs, each against the reference, then against each other
static long check_cudnn_case(int B, int T, int NH, int HS, uint64_t seed) {
    printf("cuDNN vs ours: B %d T %d NH %d HS %d\n", B, T, NH, HS);
    Case c(B, T, NH, HS, seed);
    size_t ws_bytes = 0;
    cudnn_check(cudnn_att_prepare(B, T, NH, HS, SIZE_MAX, &ws_bytes));
    DevBuf workspace(ws_bytes), scratch(attention_backward_scratch_bytes(B, T, c.C, NH));
    DevBuf ours_out(c.n_out * 2), ours_lse(c.n_lse * 4), ours_dqkv(c.n_qkv * 2);
    const Impl ours = fused_impl("fused", c, scratch, 0), cudnn = cudnn_impl(c, workspace, ws_bytes);
    long bad = check_impl(c, ours) + check_impl(c, cudnn);
    // side by side on the trainer's chain (the two differ by their roundings: information, not a check)
    ours.fwd(ours_out.as<floatX>(), ours_lse.as<float>(), c.qkv_d());
    ours.bwd(ours_dqkv.as<floatX>(), c.dout_d(), c.qkv_d(), ours_out.as<floatX>(), ours_lse.as<float>());
    cudnn.fwd(c.d_out.as<floatX>(), c.d_lse.as<float>(), c.qkv_d());
    cudnn.bwd(c.d_dqkv.as<floatX>(), c.dout_d(), c.qkv_d(), c.d_out.as<floatX>(), c.d_lse.as<float>());
    cudaCheck(cudaDeviceSynchronize());
    printf("    cudnn - ours: out max |diff| %.3e, dqkv max |diff| %.3e (workspace %zu bytes)\n",
           max_diff_bf16(c.d_out.as<floatX>(), ours_out.as<floatX>(), c.n_out),
           max_diff_bf16(c.d_dqkv.as<floatX>(), ours_dqkv.as<floatX>(), c.n_qkv), ws_bytes);
    // cuDNN's default (non-deterministic) backward, which the timings compare: within the same bounds
    const size_t nd_bytes = cudnn_default_backward(B, T, NH, HS);
    DevBuf nd_workspace(nd_bytes);
    Impl nd = cudnn_impl(c, nd_workspace, nd_bytes);
    nd.name = "cudnn (default bwd)";
    bad += check_impl(c, nd);
    cudnn_att_set_deterministic(1);
    return bad;
}
#endif

// median time in ms of `iters` runs of fn, after one warm-up run
template <class F>
static float time_ms(F fn, int iters) {
    cudaEvent_t start, stop;
    cudaCheck(cudaEventCreate(&start));
    cudaCheck(cudaEventCreate(&stop));
    fn();
    std::vector<float> ms(iters);
    for (int i = 0; i < iters; i++) {
        cudaCheck(cudaEventRecord(start));
        fn();
        cudaCheck(cudaEventRecord(stop));
        cudaCheck(cudaEventSynchronize(stop));
        cudaCheck(cudaEventElapsedTime(&ms[i], start, stop));
    }
    cudaCheck(cudaEventDestroy(start));
    cudaCheck(cudaEventDestroy(stop));
    std::sort(ms.begin(), ms.end());
    return ms[iters / 2];
}

// B sequences of T tokens, NH heads of 64 (GPT-2's head size); `unfused`: also time the oracle
static void timing(int B, int T, int NH, bool unfused) {
    const int HS = 64, C = NH * HS;
    std::vector<uint16_t> qkv, dout;
    attention_make_inputs(qkv, dout, B, T, C, 1000 + B);
    const size_t n_qkv = qkv.size(), n_out = (size_t)B * T * C, n_lse = (size_t)B * NH * T;
    DevBuf d_qkv(n_qkv * 2), d_dout(n_out * 2), d_out(n_out * 2), d_lse(n_lse * 4), d_dqkv(n_qkv * 2);
    DevBuf d_scratch(attention_backward_scratch_bytes(B, T, C, NH));
    DevBuf d_scratch_unfused(unfused ? attention_backward_unfused_scratch_bytes(B, T, C, NH) : 0);
    to_device(d_qkv.p, qkv.data(), n_qkv * 2);
    to_device(d_dout.p, dout.data(), n_out * 2);
    floatX *qkv_d = d_qkv.as<floatX>(), *dout_d = d_dout.as<floatX>(), *out_d = d_out.as<floatX>(),
           *dqkv_d = d_dqkv.as<floatX>();
    float *lse_d = d_lse.as<float>(), *scratch_d = d_scratch.as<float>(), *scratch_u = d_scratch_unfused.as<float>();

    const double fwd_flop = 2.0 * B * NH * (double)T * T * HS, bwd_flop = 2.5 * fwd_flop;
    auto report = [&](const char *what, float ms, double flop) {
        printf("  B %3d T %4d NH %2d  %-24s %8.3f ms  %7.1f TFLOP/s\n", B, T, NH, what, ms, flop / (ms * 1e-3) / 1e12);
    };
    report("fused fwd (1 m16/warp)",
           time_ms([&] { attention_forward_tiles(out_d, lse_d, qkv_d, B, T, C, NH, 1, 0); }, 20), fwd_flop);
    report("fused fwd (2 m16/warp)",
           time_ms([&] { attention_forward_tiles(out_d, lse_d, qkv_d, B, T, C, NH, 2, 0); }, 20), fwd_flop);
    attention_forward(out_d, lse_d, qkv_d, B, T, C, NH, 0);  // out and lse for the backward
    report("fused bwd",
           time_ms([&] { attention_backward(dqkv_d, dout_d, qkv_d, out_d, lse_d, scratch_d, B, T, C, NH, 0); }, 20),
           bwd_flop);
#ifdef USE_CUDNN
    size_t ws_bytes = 0;
    cudnn_check(cudnn_att_prepare(B, T, NH, HS, SIZE_MAX, &ws_bytes));
    DevBuf ws(ws_bytes);
    report("cudnn fwd", time_ms([&] {
        cudnn_check(cudnn_att_forward(out_d, lse_d, qkv_d, B, T, NH, HS, ws.p, ws_bytes, 0));
    }, 20), fwd_flop);
    report(cudnn_att_deterministic() ? "cudnn bwd (deterministic)" : "cudnn bwd (NON-deterministic)", time_ms([&] {
        cudnn_check(cudnn_att_backward(dqkv_d, dout_d, qkv_d, out_d, lse_d, B, T, NH, HS, ws.p, ws_bytes, 0));
    }, 20), bwd_flop);
    // what determinism costs: cuDNN's default backward (dQ by atomics) on the same inputs
    const size_t nd_bytes = cudnn_default_backward(B, T, NH, HS);
    DevBuf nd_ws(nd_bytes);
    report("cudnn bwd (default, atomics)", time_ms([&] {
        cudnn_check(cudnn_att_backward(dqkv_d, dout_d, qkv_d, out_d, lse_d, B, T, NH, HS, nd_ws.p, nd_bytes, 0));
    }, 20), bwd_flop);
    cudnn_att_set_deterministic(1);
#endif
    DevBuf rows_scratch(attention_rows_scratch_bytes(C, NH));
    auto last_rows = [&] {  // a generation step of each sequence: its last row against all its keys
        for (int b = 0; b < B; b++) {
            attention_forward_rows(out_d + (size_t)b * T * C, NULL, qkv_d + (size_t)b * T * 3 * C, T - 1, T, C, NH, T,
                                   rows_scratch.as<float>(), attention_rows_scratch_bytes(C, NH), 0);
        }
    };
    report("rows fwd (last row)", time_ms(last_rows, 20), 4.0 * B * NH * (double)T * HS);
    if (!unfused) { return; }
    report("unfused fwd",
           time_ms([&] { attention_forward_unfused(out_d, lse_d, qkv_d, scratch_u, B, T, C, NH, 0); }, 3), fwd_flop);
    report(
        "unfused bwd",
        time_ms([&] { attention_backward_unfused(dqkv_d, dout_d, qkv_d, out_d, lse_d, scratch_u, B, T, C, NH, 0); }, 3),
        bwd_flop);
}

int main(int argc, char **argv) {
    bool do_timing = true, do_cudnn = true, small = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--no-timing")) {
            do_timing = false;
        } else if (!strcmp(argv[i], "--no-cudnn")) {
            do_cudnn = false;
        } else if (!strcmp(argv[i], "--small")) {
            small = true;
        } else {
            fprintf(stderr, "usage: %s [--no-timing] [--no-cudnn] [--small]\n", argv[0]);
            return 1;
        }
    }
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
        fprintf(stderr,
                "error: no CUDA GPU visible; this workbench needs one (dev/cuda/attention_sim.cpp runs the "
                "fused kernels on the CPU)\n");
        return 1;
    }
    cudaDeviceProp prop;
    cudaCheck(cudaGetDeviceProperties(&prop, 0));
    printf("device: %s, sm_%d%d, %d SMs\n", prop.name, prop.major, prop.minor, prop.multiProcessorCount);

    long bad = 0;
    const int cases[][4] = {{2, 1, 3, 64},    {2, 17, 3, 64},   {1, 64, 2, 64},   {2, 100, 3, 64},
                            {1, 1024, 2, 64}, {2, 130, 2, 128}, {1, 1024, 1, 128}};
    uint64_t seed = 1;
    for (const auto &c : cases) {
        if (small && c[1] > 130) { continue; }
        bad += check_case(c[0], c[1], c[2], c[3], seed++);
    }
#ifdef USE_CUDNN
    // the head shapes of d12 (NH 12) and d48 (NH 25), HS 64, at T = 64, 256, 1024
    const int cudnn_cases[][4] = {{4, 64, 12, 64}, {2, 256, 12, 64}, {1, 1024, 12, 64},
                                  {4, 64, 25, 64}, {2, 256, 25, 64}, {1, 1024, 25, 64}};
    if (do_cudnn) {
        for (const auto &c : cudnn_cases) {
            if (small && c[1] > 130) { continue; }
            bad += check_cudnn_case(c[0], c[1], c[2], c[3], seed++);
        }
        printf("cuDNN: %s\n", cudnn_att_describe());
    } else {
        printf("cuDNN: left out (--no-cudnn)\n");
    }
#else
    (void)do_cudnn;
    printf("cuDNN: not in this build (make cudnn-frontend, then make cuda-kernels)\n");
#endif
    printf("correctness: %s\n", bad ? "FAILED" : "all checks passed");

    if (do_timing) {
        printf("timing (FLOP: forward 2 B NH T^2 HS, backward 2.5x that)\n");
        for (int B : {16, 32, 64}) { timing(B, 1024, 12, true); }  // d12's heads
        timing(16, 1024, 25, false);                             // d48's heads
        timing(256, 256, 12, false);
        timing(1024, 64, 12, false);
    }
#ifdef USE_CUDNN
    cudnn_att_free();
#endif
    return bad ? 1 : 0;
}
