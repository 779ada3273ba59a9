/*
 * Workbench for llmc/attention.cuh: the fused flash-style attention (forward and backward) and the
 * unfused oracle, against the fp64 CPU reference of attention_ref.h, then timed.
 *
 * Checks (exit 1 on any failure):
 * - forward: out and lse of the fused kernels (each forward tiling: 1 and 2 m16 tiles per warp at
 *   HS 64) and of the unfused oracle, vs the reference; ragged T (1, 17, 64, 100, 130, 1024),
 *   B * NH > 1, HS 64 and 128. Tolerances and their reasons: attention_ref.h.
 * - backward: dq, dk, dv of the fused and the unfused backward, both fed the reference forward's
 *   out (as bf16) and lse, vs the reference; then the trainer's chain (fused forward -> fused
 *   backward) vs the reference backward of that forward's out and lse.
 * - determinism: two fused forwards and two fused backwards give bitwise-identical outputs.
 * Timing: B = 16, 32, 64, T = 1024, NH = 12, HS = 64 (GPT-2 124M), fused forward (both tilings),
 * fused backward, unfused forward and backward, each the median of repeated runs (CUDA events).
 * FLOP: causal forward = 2 matmuls (S = Q K^T, O = P V) of B NH T^2 HS / 2 multiply-adds each =
 * 2 B NH T^2 HS FLOP; backward = 2.5x the forward (5 matmuls: S again, dP, dV, dQ, dK), the usual
 * convention; it does not count the fused backward's second S and dP (its two kernels each compute
 * both: 7 matmuls, 3.5x the forward's matmul work).
 *
 * Build: make -C dev/cuda (into build/cuda/attention), or from dev/cuda:
 *   nvcc -O3 -std=c++17 --use_fast_math -gencode arch=compute_90a,code=sm_90a -I../.. attention.cu -o attention
 * Run: ./attention               all checks, then timing
 *      ./attention --no-timing   checks only
 * Host time: the CPU reference and the inputs take 3 s on one core of the (GPU-less) machine this was
 * written on; the GPU part was not measured there.
 */
#include <algorithm>
#include <vector>

#include "llmc/attention.cuh"
#include "attention_ref.h"

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

static long check_case(int B, int T, int NH, int HS, uint64_t seed) {
    const int C = NH * HS;
    printf("B %d T %d NH %d HS %d\n", B, T, NH, HS);
    std::vector<uint16_t> qkv, dout;
    attention_make_inputs(qkv, dout, B, T, C, seed);
    const size_t n_qkv = qkv.size(), n_out = (size_t)B * T * C, n_lse = (size_t)B * NH * T;

    // reference forward; the backward reference takes its out rounded to bf16, as the GPU stores it
    std::vector<float> out_ref(n_out), lse_ref(n_lse);
    attention_forward_ref(out_ref.data(), lse_ref.data(), qkv.data(), B, T, C, NH);
    std::vector<uint16_t> out_ref_bf16(n_out);
    for (size_t i = 0; i < n_out; i++) { out_ref_bf16[i] = float_to_bf16(out_ref[i]); }
    std::vector<float> dqkv_ref(n_qkv), noise(n_qkv);
    attention_backward_ref(dqkv_ref.data(), noise.data(), dout.data(), qkv.data(), out_ref_bf16.data(), lse_ref.data(),
                           B, T, C, NH);

    DevBuf d_qkv(n_qkv * 2), d_dout(n_out * 2), d_out(n_out * 2), d_out2(n_out * 2), d_lse(n_lse * 4),
        d_lse2(n_lse * 4);
    DevBuf d_dqkv(n_qkv * 2), d_dqkv2(n_qkv * 2), d_ref_out(n_out * 2), d_ref_lse(n_lse * 4);
    DevBuf d_scratch(attention_backward_scratch_bytes(B, T, C, NH));
    DevBuf d_scratch_unfused(std::max(attention_forward_unfused_scratch_bytes(B, T, C, NH),
                                      attention_backward_unfused_scratch_bytes(B, T, C, NH)));
    to_device(d_qkv.p, qkv.data(), n_qkv * 2);
    to_device(d_dout.p, dout.data(), n_out * 2);
    to_device(d_ref_out.p, out_ref_bf16.data(), n_out * 2);
    to_device(d_ref_lse.p, lse_ref.data(), n_lse * 4);
    const floatX *qkv_d = d_qkv.as<floatX>(), *dout_d = d_dout.as<floatX>();
    long bad = 0;

    // forward: every fused tiling, then the oracle
    std::vector<int> tilings = {1};
    if (HS == 64) { tilings.push_back(2); }
    for (int mt : tilings) {
        poison(d_out.p, n_out * 2);
        poison(d_lse.p, n_lse * 4);
        attention_forward_tiles(d_out.as<floatX>(), d_lse.as<float>(), qkv_d, B, T, C, NH, mt, 0);
        cudaCheck(cudaDeviceSynchronize());
        char what[64];
        snprintf(what, sizeof(what), "fused fwd (%d) out", mt);
        std::vector<float> out = bf16_device_to_float(d_out.as<floatX>(), n_out), lse(n_lse);
        to_host(lse.data(), d_lse.p, n_lse * 4);
        bad += ref_compare(what, out_ref.data(), out.data(), NULL, (size_t)B * T, C, 0, C, TOL_OUT);
        snprintf(what, sizeof(what), "fused fwd (%d) lse", mt);
        bad += ref_compare(what, lse_ref.data(), lse.data(), NULL, (size_t)B * NH, T, 0, T, TOL_LSE);
    }
    poison(d_out2.p, n_out * 2);
    poison(d_lse2.p, n_lse * 4);
    attention_forward_unfused(d_out2.as<floatX>(), d_lse2.as<float>(), qkv_d, d_scratch_unfused.as<float>(), B, T, C,
                              NH, 0);
    cudaCheck(cudaDeviceSynchronize());
    {
        std::vector<float> out = bf16_device_to_float(d_out2.as<floatX>(), n_out), lse(n_lse);
        to_host(lse.data(), d_lse2.p, n_lse * 4);
        bad += ref_compare("unfused fwd out", out_ref.data(), out.data(), NULL, (size_t)B * T, C, 0, C, TOL_OUT);
        bad += ref_compare("unfused fwd lse", lse_ref.data(), lse.data(), NULL, (size_t)B * NH, T, 0, T, TOL_LSE);
    }

    // forward determinism: the default fused forward twice
    attention_forward(d_out.as<floatX>(), d_lse.as<float>(), qkv_d, B, T, C, NH, 0);
    attention_forward(d_out2.as<floatX>(), d_lse2.as<float>(), qkv_d, B, T, C, NH, 0);
    cudaCheck(cudaDeviceSynchronize());
    {
        std::vector<uint8_t> a(n_out * 2), b(n_out * 2), la(n_lse * 4), lb(n_lse * 4);
        to_host(a.data(), d_out.p, a.size());
        to_host(b.data(), d_out2.p, b.size());
        to_host(la.data(), d_lse.p, la.size());
        to_host(lb.data(), d_lse2.p, lb.size());
        const bool same = a == b && la == lb;
        printf("    fused fwd twice: %s\n", same ? "bitwise identical" : "DIFFERENT  FAIL");
        bad += !same;
    }

    // backward, fed the reference out and lse: fused (twice, bitwise) and unfused
    poison(d_dqkv.p, n_qkv * 2);
    poison(d_dqkv2.p, n_qkv * 2);
    attention_backward(d_dqkv.as<floatX>(), dout_d, qkv_d, d_ref_out.as<floatX>(), d_ref_lse.as<float>(),
                       d_scratch.as<float>(), B, T, C, NH, 0);
    attention_backward(d_dqkv2.as<floatX>(), dout_d, qkv_d, d_ref_out.as<floatX>(), d_ref_lse.as<float>(),
                       d_scratch.as<float>(), B, T, C, NH, 0);
    cudaCheck(cudaDeviceSynchronize());
    {
        std::vector<uint8_t> a(n_qkv * 2), b(n_qkv * 2);
        to_host(a.data(), d_dqkv.p, a.size());
        to_host(b.data(), d_dqkv2.p, b.size());
        const bool same = a == b;
        printf("    fused bwd twice: %s\n", same ? "bitwise identical" : "DIFFERENT  FAIL");
        bad += !same;
        std::vector<float> got = bf16_device_to_float(d_dqkv.as<floatX>(), n_qkv);
        bad += ref_compare_dqkv("fused bwd ", dqkv_ref.data(), got.data(), noise.data(), B, T, C);
    }
    poison(d_dqkv.p, n_qkv * 2);
    attention_backward_unfused(d_dqkv.as<floatX>(), dout_d, qkv_d, d_ref_out.as<floatX>(), d_ref_lse.as<float>(),
                               d_scratch_unfused.as<float>(), B, T, C, NH, 0);
    cudaCheck(cudaDeviceSynchronize());
    {
        std::vector<float> got = bf16_device_to_float(d_dqkv.as<floatX>(), n_qkv);
        bad += ref_compare_dqkv("unfused bwd ", dqkv_ref.data(), got.data(), noise.data(), B, T, C);
    }

    // the trainer's chain: fused forward, then fused backward of its own out and lse
    attention_forward(d_out.as<floatX>(), d_lse.as<float>(), qkv_d, B, T, C, NH, 0);
    poison(d_dqkv.p, n_qkv * 2);
    attention_backward(d_dqkv.as<floatX>(), dout_d, qkv_d, d_out.as<floatX>(), d_lse.as<float>(), d_scratch.as<float>(),
                       B, T, C, NH, 0);
    cudaCheck(cudaDeviceSynchronize());
    {
        std::vector<uint16_t> out_gpu(n_out);
        std::vector<float> lse_gpu(n_lse);
        to_host(out_gpu.data(), d_out.p, n_out * 2);
        to_host(lse_gpu.data(), d_lse.p, n_lse * 4);
        std::vector<float> chain_ref(n_qkv), chain_noise(n_qkv);
        attention_backward_ref(chain_ref.data(), chain_noise.data(), dout.data(), qkv.data(), out_gpu.data(),
                               lse_gpu.data(), B, T, C, NH);
        std::vector<float> got = bf16_device_to_float(d_dqkv.as<floatX>(), n_qkv);
        bad += ref_compare_dqkv("fused fwd+bwd ", chain_ref.data(), got.data(), chain_noise.data(), B, T, C);
    }
    return bad;
}

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

static void timing(int B) {
    const int T = 1024, NH = 12, HS = 64, C = NH * HS;
    std::vector<uint16_t> qkv, dout;
    attention_make_inputs(qkv, dout, B, T, C, 1000 + B);
    const size_t n_qkv = qkv.size(), n_out = (size_t)B * T * C, n_lse = (size_t)B * NH * T;
    DevBuf d_qkv(n_qkv * 2), d_dout(n_out * 2), d_out(n_out * 2), d_lse(n_lse * 4), d_dqkv(n_qkv * 2);
    DevBuf d_scratch(attention_backward_scratch_bytes(B, T, C, NH));
    DevBuf d_scratch_unfused(attention_backward_unfused_scratch_bytes(B, T, C, NH));
    to_device(d_qkv.p, qkv.data(), n_qkv * 2);
    to_device(d_dout.p, dout.data(), n_out * 2);
    floatX *qkv_d = d_qkv.as<floatX>(), *dout_d = d_dout.as<floatX>(), *out_d = d_out.as<floatX>(),
           *dqkv_d = d_dqkv.as<floatX>();
    float *lse_d = d_lse.as<float>(), *scratch_d = d_scratch.as<float>(), *scratch_u = d_scratch_unfused.as<float>();

    const double fwd_flop = 2.0 * B * NH * (double)T * T * HS, bwd_flop = 2.5 * fwd_flop;
    auto report = [&](const char *what, float ms, double flop) {
        printf("  B %2d  %-24s %8.3f ms  %7.1f TFLOP/s\n", B, what, ms, flop / (ms * 1e-3) / 1e12);
    };
    report("fused fwd (1 m16/warp)",
           time_ms([&] { attention_forward_tiles(out_d, lse_d, qkv_d, B, T, C, NH, 1, 0); }, 20), fwd_flop);
    report("fused fwd (2 m16/warp)",
           time_ms([&] { attention_forward_tiles(out_d, lse_d, qkv_d, B, T, C, NH, 2, 0); }, 20), fwd_flop);
    attention_forward(out_d, lse_d, qkv_d, B, T, C, NH, 0);  // out and lse for the backward
    report("fused bwd",
           time_ms([&] { attention_backward(dqkv_d, dout_d, qkv_d, out_d, lse_d, scratch_d, B, T, C, NH, 0); }, 20),
           bwd_flop);
    report("unfused fwd",
           time_ms([&] { attention_forward_unfused(out_d, lse_d, qkv_d, scratch_u, B, T, C, NH, 0); }, 3), fwd_flop);
    report(
        "unfused bwd",
        time_ms([&] { attention_backward_unfused(dqkv_d, dout_d, qkv_d, out_d, lse_d, scratch_u, B, T, C, NH, 0); }, 3),
        bwd_flop);
}

int main(int argc, char **argv) {
    bool do_timing = true;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--no-timing")) {
            do_timing = false;
        } else {
            fprintf(stderr, "usage: %s [--no-timing]\n", argv[0]);
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
    for (const auto &c : cases) { bad += check_case(c[0], c[1], c[2], c[3], seed++); }
    printf("correctness: %s\n", bad ? "FAILED" : "all checks passed");

    if (do_timing) {
        printf("timing, T 1024, NH 12, HS 64 (FLOP: forward 2 B NH T^2 HS, backward 2.5x that)\n");
        for (int B : {16, 32, 64}) { timing(B); }
    }
    return bad ? 1 : 0;
}
