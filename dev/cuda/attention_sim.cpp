/*
 * The attention kernels on the CPU simulator: every kernel of llmc/cuda/attention.cuh, through its own
 * launchers, and the unfused oracle (attention_unfused.cuh), run unchanged on the host simulator of
 * sim/ with the PTX primitives of llmc/cuda/attention_ptx.cuh emulated and checked (sim/ptx.h: mma.sync,
 * ldmatrix, cp.async per the PTX ISA), and compared with the fp64 reference of attention_ref.h.
 * It is how the index arithmetic, fragment layouts and synchronization of those kernels were
 * verified without a GPU; it does not replace running attention.cu on one.
 *
 * Checks (any failure: exit 1):
 * - every shared and global access of the fused kernels (sim/ptx.h: bounds, alignment, races, reads
 *   of unwritten or in-flight words, NaN into an mma); inputs never written, and every byte of every
 *   output (out, lse; D, dqkv) written exactly once per launcher call;
 * - warp collectives reached by all 32 lanes with the same operation, no deadlock (sim/engine.h);
 * - results against the reference with the tolerances of attention_ref.h: both forward tilings at
 *   HS 64, HS 128, the backward, at ragged T from 1 to 200; generation's rows kernels (rows of one
 *   sequence over two calls, the first in launches of 3 rows; a row's keys split over 9 CTAs at T
 *   1100, 2 chunks per CTA at T 2300; the rows before its first untouched);
 *   the unfused oracle kernel by kernel on
 *   grids capped at 64 blocks (so the grid-stride loops wrap), and through its launchers;
 * - bitwise equal results under three thread interleavings (forward, reverse, random order);
 * - no ldmatrix bank conflicts (wavefronts per 8-row phase, counted per kernel);
 * - the simulator's own mma fragment tables are bijections.
 *
 * Build and run (no CUDA needed; ~10 s on the 2-core build machine, 2 s of it the run):
 *   make -C dev/cuda run-attention-sim     (root: make test-attention-sim)
 *   build/cuda_sim/attention_sim [T]       a single sequence length (quick experiments)
 */
#include <time.h>
#include <algorithm>
#include <vector>

#include "attention_ref.h"
#include "llmc/cuda/attention.cuh"
// the simulator's copy (its launches rewritten), found through -I$(SIM_SRC), not the file next to this one
#include "dev/cuda/attention_unfused.cuh"

// a device buffer (cudaMalloc: host memory the simulator knows as a device allocation) holding a
// copy of host data, or 0xff bytes (NaN in bf16 and fp32: an element never written fails the check)
template <class T>
static T *device_copy(const std::vector<T> &h) {
    void *d;
    cudaCheck(cudaMalloc(&d, h.size() * sizeof(T)));
    cudaCheck(cudaMemcpy(d, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice));
    return (T *)d;
}
static void *device_poison(size_t bytes) {
    void *d;
    cudaCheck(cudaMalloc(&d, bytes));
    cudaCheck(cudaMemset(d, 0xff, bytes));
    return d;
}
template <class T>
static std::vector<T> host_copy(const void *d, size_t n) {
    std::vector<T> h(n);
    cudaCheck(cudaMemcpy(h.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost));
    return h;
}
static std::vector<float> bf16_host_floats(const void *d, size_t n) {
    std::vector<uint16_t> bits = host_copy<uint16_t>(d, n);
    std::vector<float> f(n);
    bf16_to_float_array(f.data(), bits.data(), n);
    return f;
}

struct FwdResult {
    std::vector<uint16_t> out;
    std::vector<float> lse;
};

// attention_forward_tiles with MT m16 tiles per warp
static long sim_forward(int HS, int MT, int B, int T, int NH, uint64_t seed, sim::Order order, FwdResult *res,
                        bool compare) {
    const int C = NH * HS;
    const RefForward ref(B, T, C, NH, seed);
    const size_t n_out = ref.out_ref.size(), n_lse = ref.lse_ref.size();
    floatX *qkv_d = (floatX *)device_copy(ref.qkv), *out_d = (floatX *)device_poison(n_out * 2);
    float *lse_d = (float *)device_poison(n_lse * 4);
    sim::watch(qkv_d, ref.qkv.size() * 2, "qkv", sim::INPUT);
    sim::watch(out_d, n_out * 2, "out", sim::OUTPUT);
    sim::watch(lse_d, n_lse * 4, "lse", sim::OUTPUT);
    sim::order = order;
    const long errors_before = sim::errors;
    attention_forward_tiles(out_d, lse_d, qkv_d, B, T, C, NH, MT, 0);
    long bad = (sim::errors - errors_before) + sim::check_outputs();
    std::vector<uint16_t> out = host_copy<uint16_t>(out_d, n_out);
    std::vector<float> lse = host_copy<float>(lse_d, n_lse);
    if (compare) {
        printf("  forward<%d,%d> B %d T %d NH %d\n", HS, MT, B, T, NH);
        std::vector<float> out_f(n_out);
        bf16_to_float_array(out_f.data(), out.data(), n_out);
        bad += ref_compare("out", ref.out_ref.data(), out_f.data(), NULL, (size_t)B * T, C, 0, C, TOL_OUT);
        bad += ref_compare("lse", ref.lse_ref.data(), lse.data(), NULL, (size_t)B * NH, T, 0, T, TOL_LSE);
    }
    if (res) { *res = {out, lse}; }
    cudaFree(qkv_d);
    cudaFree(out_d);
    cudaFree(lse_d);
    return bad;
}

// attention_backward fed the reference forward's out (rounded to bf16, as stored) and lse
static long sim_backward(int HS, int B, int T, int NH, uint64_t seed, sim::Order order, std::vector<uint16_t> *res,
                         bool compare) {
    const int C = NH * HS;
    const RefForward ref(B, T, C, NH, seed);
    const std::vector<uint16_t> &qkv = ref.qkv, &dout = ref.dout, &out = ref.out_ref_bf16;
    const std::vector<float> &lse = ref.lse_ref;
    const size_t scratch_bytes = attention_backward_scratch_bytes(B, T, C, NH);
    floatX *qkv_d = (floatX *)device_copy(qkv), *dout_d = (floatX *)device_copy(dout);
    floatX *out_d = (floatX *)device_copy(out), *dqkv_d = (floatX *)device_poison(qkv.size() * 2);
    float *lse_d = device_copy(lse), *scratch_d = (float *)device_poison(scratch_bytes);
    sim::watch(qkv_d, qkv.size() * 2, "qkv", sim::INPUT);
    sim::watch(dout_d, dout.size() * 2, "dout", sim::INPUT);
    sim::watch(out_d, out.size() * 2, "out", sim::INPUT);
    sim::watch(lse_d, lse.size() * 4, "lse", sim::INPUT);
    sim::watch(scratch_d, scratch_bytes, "D (scratch)", sim::OUTPUT);
    sim::watch(dqkv_d, qkv.size() * 2, "dqkv", sim::OUTPUT);
    sim::order = order;
    const long errors_before = sim::errors;
    attention_backward(dqkv_d, dout_d, qkv_d, out_d, lse_d, scratch_d, B, T, C, NH, 0);
    long bad = (sim::errors - errors_before) + sim::check_outputs();
    std::vector<uint16_t> dqkv = host_copy<uint16_t>(dqkv_d, qkv.size());
    if (compare) {
        printf("  backward<%d> B %d T %d NH %d\n", HS, B, T, NH);
        std::vector<float> dqkv_ref(dqkv.size()), noise(dqkv.size()), got(dqkv.size());
        attention_backward_ref(dqkv_ref.data(), noise.data(), dout.data(), qkv.data(), out.data(), lse.data(), B, T, C,
                               NH);
        bf16_to_float_array(got.data(), dqkv.data(), dqkv.size());
        bad += ref_compare_dqkv("", dqkv_ref.data(), got.data(), noise.data(), B, T, C);
    }
    if (res) { *res = dqkv; }
    for (void *p : {(void *)qkv_d, (void *)dout_d, (void *)out_d, (void *)dqkv_d, (void *)lse_d, (void *)scratch_d}) {
        cudaFree(p);
    }
    return bad;
}

// generation's kernels (attention_forward_rows): rows [r0, T) of one sequence in two calls, the second
// reading the keys of the first call's rows, against the reference; the rows before r0 left as they
// were. The first call's scratch holds 3 rows (its rows go in launches of 3), the second's all of
// them. Launches whose rows have at most ATTN_ROWS_CHUNK keys write out directly; past it a row's
// keys are split over several CTAs and combined (T 200 has launches of both kinds); past
// ATTN_ROWS_SPLITS chunks a CTA takes several chunks (its online softmax across them).
static long sim_rows(int HS, int T, int r0, int NH, uint64_t seed) {
    const int C = NH * HS, mid = r0 + (T - r0) / 2;
    const RefForward ref(1, T, C, NH, seed);
    floatX *qkv_d = (floatX *)device_copy(ref.qkv), *out_d = (floatX *)device_poison((size_t)T * C * 2);
    float *lse_d = (float *)device_poison((size_t)NH * T * 4);
    sim::order = sim::FORWARD;
    const long errors_before = sim::errors;
    const size_t row_bytes = attention_rows_scratch_bytes(C, NH);
    float *scratch_d = (float *)device_poison(row_bytes * (T - r0));
    if (mid > r0) { attention_forward_rows(out_d, lse_d, qkv_d, r0, mid, C, NH, T, scratch_d, 3 * row_bytes, 0); }
    attention_forward_rows(out_d, lse_d, qkv_d, mid, T, C, NH, T, scratch_d, row_bytes * (T - r0), 0);
    printf("  rows<%d> T %d rows %d..%d, %d..%d NH %d\n", HS, T, r0, mid, mid, T, NH);
    long bad = sim::errors - errors_before;
    std::vector<float> out = bf16_host_floats(out_d, (size_t)T * C), lse = host_copy<float>(lse_d, (size_t)NH * T);
    bad += ref_compare("out", ref.out_ref.data() + (size_t)r0 * C, out.data() + (size_t)r0 * C, NULL, T - r0, C, 0, C,
                       TOL_OUT);
    bad += ref_compare("lse", ref.lse_ref.data(), lse.data(), NULL, NH, T, r0, T - r0, TOL_LSE);
    std::vector<uint16_t> before = host_copy<uint16_t>(out_d, (size_t)r0 * C);
    const bool untouched = std::all_of(before.begin(), before.end(), [](uint16_t x) { return x == 0xffff; });
    if (!untouched) { printf("    rows before %d: WRITTEN  FAIL\n", r0); }
    bad += !untouched;
    cudaFree(qkv_d);
    cudaFree(out_d);
    cudaFree(lse_d);
    cudaFree(scratch_d);
    return bad;
}

// The unfused oracle: through its launchers, or kernel by kernel as they call them on a grid capped
// at 64 blocks, so that the grid-stride loops wrap.
static long sim_unfused(int HS, int B, int T, int NH, uint64_t seed, bool launchers) {
    const int C = NH * HS;
    const float scale = 1.0f / sqrtf((float)HS);
    const RefForward ref(B, T, C, NH, seed);
    const std::vector<uint16_t> &qkv = ref.qkv, &dout = ref.dout, &out_ref_bf16 = ref.out_ref_bf16;
    const std::vector<float> &out_ref = ref.out_ref, &lse_ref = ref.lse_ref;
    const size_t TT = (size_t)B * NH * T * T;
    const unsigned grid_tt = std::min<size_t>(64, CEIL_DIV(TT, 256)),
                   grid_btc = std::min<size_t>(64, CEIL_DIV((size_t)B * T * C, 256));
    const long errors_before = sim::errors;
    long bad = 0;
    sim::order = sim::FORWARD;
    floatX *qkv_d = (floatX *)device_copy(qkv), *dout_d = (floatX *)device_copy(dout);
    floatX *ref_out_d = (floatX *)device_copy(out_ref_bf16), *out_d = (floatX *)device_poison(out_ref.size() * 2);
    floatX *dqkv_d = (floatX *)device_poison(qkv.size() * 2);
    float *ref_lse_d = device_copy(lse_ref), *lse_d = (float *)device_poison(lse_ref.size() * 4);
    float *scratch = (float *)device_poison(2 * TT * 4), *P = scratch, *dS = scratch + TT;

    if (launchers) {
        attention_forward_unfused(out_d, lse_d, qkv_d, scratch, B, T, C, NH, 0);
    } else {
        sim::launch<attention_scores_unfused_kernel>(grid_tt, 256, 0, 0, scratch, qkv_d, B, T, NH, HS, scale);
        sim::launch<attention_softmax_unfused_kernel>(CEIL_DIV(B * NH * T, 8), 256, 0, 0, scratch, lse_d, B * NH * T, T);
        sim::launch<attention_values_unfused_kernel>(grid_btc, 256, 0, 0, out_d, scratch, qkv_d, B, T, NH, HS);
    }
    const char *how = launchers ? " (launchers)" : "";
    printf("  unfused forward<%d> B %d T %d NH %d%s\n", HS, B, T, NH, how);
    std::vector<float> out_f = bf16_host_floats(out_d, out_ref.size()), lse = host_copy<float>(lse_d, lse_ref.size());
    bad += ref_compare("out", out_ref.data(), out_f.data(), NULL, (size_t)B * T, C, 0, C, TOL_OUT);
    bad += ref_compare("lse", lse_ref.data(), lse.data(), NULL, (size_t)B * NH, T, 0, T, TOL_LSE);

    if (launchers) {
        attention_backward_unfused(dqkv_d, dout_d, qkv_d, ref_out_d, ref_lse_d, scratch, B, T, C, NH, 0);
    } else {
        sim::launch<attention_backward_scores_unfused_kernel>(grid_tt, 256, 0, 0, P, dS, qkv_d, ref_out_d, dout_d,
                                                              ref_lse_d, B, T, NH, HS, scale);
        sim::launch<attention_backward_dq_unfused_kernel>(grid_btc, 256, 0, 0, dqkv_d, dS, qkv_d, B, T, NH, HS, scale);
        sim::launch<attention_backward_dkv_unfused_kernel>(grid_btc, 256, 0, 0, dqkv_d, P, dS, qkv_d, dout_d, B, T, NH,
                                                           HS, scale);
    }
    printf("  unfused backward<%d> B %d T %d NH %d%s\n", HS, B, T, NH, how);
    std::vector<float> dqkv_ref(qkv.size()), noise(qkv.size()), got = bf16_host_floats(dqkv_d, qkv.size());
    attention_backward_ref(dqkv_ref.data(), noise.data(), dout.data(), qkv.data(), out_ref_bf16.data(), lse_ref.data(),
                           B, T, C, NH);
    bad += ref_compare_dqkv("", dqkv_ref.data(), got.data(), noise.data(), B, T, C);
    for (void *p : {(void *)qkv_d, (void *)dout_d, (void *)ref_out_d, (void *)out_d, (void *)dqkv_d, (void *)ref_lse_d,
                    (void *)lse_d, (void *)scratch}) {
        cudaFree(p);
    }
    return bad + (sim::errors - errors_before);
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    // optional: a single T to run (quick experiments); default: the full list
    int only_T = 0;
    if (argc > 1) {
        char *end;
        const long t = strtol(argv[1], &end, 10);
        if (argc > 2 || end == argv[1] || *end || t < 1 || t > 100000) {
            fprintf(stderr, "error: usage: attention_sim [T] (T: one sequence length of the full run, e.g. 130)\n");
            return 1;
        }
        only_T = (int)t;
    }
    bool matched = false;  // whether only_T is one of the lengths below
    auto runs = [&](int T) {
        matched |= T == only_T;
        return !only_T || T == only_T;
    };
    const clock_t start = clock();
    long bad = sim::check_fragment_tables();
    const int Ts64[] = {1, 17, 64, 100, 130, 200};
    const int Ts128[] = {1, 70, 130};
    uint64_t seed = 1;

    printf("forward, fused kernels on the simulator vs the fp64 reference\n");
    for (int T : Ts64) {
        if (!runs(T)) { continue; }
        bad += sim_forward(64, 1, 2, T, 2, seed, sim::FORWARD, NULL, true);
        bad += sim_forward(64, 2, 2, T, 2, seed, sim::FORWARD, NULL, true);
        seed++;
    }
    for (int T : Ts128) {
        if (!runs(T)) { continue; }
        bad += sim_forward(128, 1, 2, T, 2, seed, sim::FORWARD, NULL, true);
        seed++;
    }
    printf("backward, fused kernels on the simulator vs the fp64 reference\n");
    for (int T : Ts64) {
        if (!runs(T)) { continue; }
        bad += sim_backward(64, 2, T, 2, seed, sim::FORWARD, NULL, true);
        seed++;
    }
    for (int T : Ts128) {
        if (!runs(T)) { continue; }
        bad += sim_backward(128, 2, T, 2, seed, sim::FORWARD, NULL, true);
        seed++;
    }

    printf("generation's rows kernel on the simulator vs the fp64 reference\n");
    const int rows_cases[][4] = {{64, 1, 0, 2}, {64, 17, 0, 2}, {64, 100, 40, 3}, {128, 70, 10, 2}, {64, 200, 100, 2},
                                  {64, 1100, 1020, 1}, {64, 2300, 2296, 1}};
    for (const auto &rc : rows_cases) {
        if (runs(rc[1])) { bad += sim_rows(rc[0], rc[1], rc[2], rc[3], seed++); }
    }

    printf("unfused oracle kernels on the simulator vs the fp64 reference\n");
    if (runs(100)) { bad += sim_unfused(64, 2, 100, 3, 77, false); }
    if (runs(70)) { bad += sim_unfused(128, 1, 70, 2, 78, false); }
    if (runs(1)) { bad += sim_unfused(64, 1, 1, 2, 79, false); }
    if (runs(40)) { bad += sim_unfused(64, 2, 40, 2, 80, true); }

    printf("schedule independence: bitwise equal results under other fiber orders\n");
    if (runs(130)) {
        FwdResult a, b, c;
        bad += sim_forward(64, 2, 1, 130, 2, 99, sim::FORWARD, &a, false);
        bad += sim_forward(64, 2, 1, 130, 2, 99, sim::REVERSE, &b, false);
        bad += sim_forward(64, 2, 1, 130, 2, 99, sim::RANDOM, &c, false);
        const bool same = a.out == b.out && a.out == c.out && !memcmp(a.lse.data(), b.lse.data(), a.lse.size() * 4) &&
            !memcmp(a.lse.data(), c.lse.data(), a.lse.size() * 4);
        printf("  forward<64,2> T 130: %s\n", same ? "identical" : "DIFFERENT");
        bad += !same;
        std::vector<uint16_t> x, y, z;
        bad += sim_backward(64, 1, 130, 2, 99, sim::FORWARD, &x, false);
        bad += sim_backward(64, 1, 130, 2, 99, sim::REVERSE, &y, false);
        bad += sim_backward(64, 1, 130, 2, 99, sim::RANDOM, &z, false);
        printf("  backward<64> T 130: %s\n", x == y && x == z ? "identical" : "DIFFERENT");
        bad += !(x == y && x == z);
    }

    printf("ldmatrix bank conflicts (8-row phases needing more than one wavefront)\n");
    for (auto &kv : sim::ldsm_stats) {
        printf("  %-32s %ld phases, %ld conflicted, worst %d wavefronts\n", kv.first.c_str(), kv.second.phases,
               kv.second.conflicted, kv.second.max_wavefronts);
        bad += kv.second.conflicted != 0;
    }
    if (only_T && !matched) {
        fprintf(stderr, "error: attention_sim %d: no case has T = %d (run without T for the list)\n", only_T, only_T);
        return 1;
    }
    printf("simulator: %ld errors in total, %.1f s\n", bad, (double)(clock() - start) / CLOCKS_PER_SEC);
    printf(bad ? "attention_sim: FAILED\n" : "attention_sim: all checks passed\n");
    return bad ? 1 : 0;
}
