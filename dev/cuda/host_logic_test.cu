/*
 * The host-side logic of the CUDA layers, tested on the CPU (no GPU needed, so it runs in CI):
 *   - the embedding-backward plan (llmc/cuda/encoder.cuh): a permutation grouped by token with
 *     increasing positions, segments of at most ENCODER_SEGMENT, consistent split records, within
 *     the documented buffer bounds, bad token ids rejected; and the CPU emulation of the kernels'
 *     summation order (emulate.h) agrees with double sums;
 *   - the AdamW weight-decay table (llmc/cuda/adamw.cuh): GPT-2 tables merge to the expected ranges,
 *     the per-index lookup matches gpt2_param_is_decayed at every tensor's first and last
 *     element (with -opt muon: ADAMW_SKIP on the blocks' matrices), malformed range lists are
 *     rejected;
 *   - ZeRO-1 shards with Muon (llmc/muon.h): they tile the parameters, no block matrix is split,
 *     and each boundary is within half a matrix of the even split's;
 *   - the CPU emulation of the gradient-norm order (emulate.h) agrees with double sums; the norm's
 *     chunks (llmc/model_io.h) tile the parameters, cut at every slice start and multiple of
 *     GRAD_NORM_CHUNK, and every ZeRO-1 shard edge (even and Muon's) on 1-8 ranks is a cut;
 *   - the warps-per-block rule of the LayerNorm backward; where the fused classifier keeps a row in
 *     shared memory (two blocks per SM: H100/H200 at GPT-2's vocabulary, not A100);
 *   - the checks' running maximum (nan_max.h) keeps a NaN, and check_close's max|diff| shows an
 *     unmatched NaN or inf, so a printed max |diff| cannot hide one;
 *   - -at auto (llmc/cuda/attention_choice.cuh): cuDNN from T = 256 on where the build has it, our
 *     kernel below and in builds without it;
 *   - the MFU peak (llmc/gpu_peak.h) of H100 SXM/PCIe/NVL, H200, A100 SXM/PCIe names against the
 *     spec sheets' dense bf16 figures, scaled for a MIG slice and a capped clock; unknown: none;
 *   - ZeRO-1's reduce-scatter layout (llmc/cuda/grad_reduce.cuh): for several models and rank counts, the runs
 *     of every rank agree with a per-element brute force (which rank holds each bucket position
 *     after the reduce-scatter, which rank's shard holds its parameter), every parameter of a
 *     rank's shard arrives exactly once, sends and receives pair up in order, and the buckets
 *     cover every parameter once.
 * Exits non-zero on any failure.
 *
 *   ./host_logic_test      (built by dev/cuda/Makefile; `make test-cuda-host` at the root)
 */
#include "common.h"
#include "emulate.h"
#include "llmc/cuda/adamw.cuh"
#include "llmc/cuda/layernorm.cuh"
#include "llmc/cuda/fused_classifier.cuh"
#include "llmc/gpu_peak.h"
#include "llmc/cuda/grad_reduce.cuh"
#include "llmc/cuda/attention_choice.cuh"
#include <vector>

#include <unistd.h>  // dup, dup2: check_close_line reads what check_close prints

static int check_plan(const char *name, const int *inp, int BT) {
    int *plan = (int *)mallocCheck(encoder_plan_ints(BT) * sizeof(int));
    int *counts = (int *)mallocCheck(ENCODER_TOKEN_RANGE * sizeof(int));
    EncoderPlanCounts n;
    const char *problem = encoder_backward_plan(plan, counts, inp, BT, &n);
    int ok = problem == NULL;
    char why[256] = "";
    // positions: a permutation, grouped by token, increasing within a token
    char *seen = (char *)callocCheck(BT > 0 ? BT : 1, 1);
    for (int j = 0; ok && j < BT; j++) {
        if (plan[j] < 0 || plan[j] >= BT || seen[plan[j]]) { ok = 0; snprintf(why, sizeof(why), "positions not a permutation at %d", j); }
        else { seen[plan[j]] = 1; }
        if (ok && j > 0 && inp[plan[j]] == inp[plan[j - 1]] && plan[j] < plan[j - 1]) {
            ok = 0; snprintf(why, sizeof(why), "positions of a token not increasing at %d", j);
        }
        if (ok && j > 0 && inp[plan[j]] < inp[plan[j - 1]]) { ok = 0; snprintf(why, sizeof(why), "tokens not grouped at %d", j); }
    }
    // segments tile [0, BT) in order, one token each, at most ENCODER_SEGMENT long
    int next = 0, slots_seen = 0;
    for (int s = 0; ok && s < n.num_segments; s++) {
        const int *seg = plan + BT + 4 * (size_t)s;
        if (seg[1] != next || seg[2] < 1 || seg[2] > ENCODER_SEGMENT) { ok = 0; snprintf(why, sizeof(why), "segment %d malformed", s); break; }
        for (int j = seg[1]; j < seg[1] + seg[2]; j++) {
            if (inp[plan[j]] != seg[0]) { ok = 0; snprintf(why, sizeof(why), "segment %d holds another token", s); break; }
        }
        if (seg[3] >= 0) {
            if (seg[3] != slots_seen) { ok = 0; snprintf(why, sizeof(why), "segment %d slot %d out of order", s, seg[3]); }
            slots_seen++;
        } else {
            // a single-segment token: no neighbour segment of the same token
            const int prev_same = s > 0 && plan[BT + 4 * (size_t)(s - 1)] == seg[0];
            const int next_same = s + 1 < n.num_segments && plan[BT + 4 * (size_t)(s + 1)] == seg[0];
            if (prev_same || next_same) { ok = 0; snprintf(why, sizeof(why), "segment %d direct but its token is split", s); }
        }
        next += seg[2];
    }
    if (ok && next != BT) { ok = 0; snprintf(why, sizeof(why), "segments cover %d of %d positions", next, BT); }
    if (ok && slots_seen != n.num_slots) { ok = 0; snprintf(why, sizeof(why), "slot count mismatch"); }
    // split records: contiguous slots, pieces = ceil(count / SEGMENT) > 1
    int slot = 0;
    for (int i = 0; ok && i < n.num_split; i++) {
        const int *sp = plan + (size_t)5 * BT + 3 * (size_t)i;
        int count = 0;
        for (int j = 0; j < BT; j++) { count += inp[j] == sp[0]; }
        if (sp[1] != slot || sp[2] != CEIL_DIV(count, ENCODER_SEGMENT) || sp[2] < 2) {
            ok = 0; snprintf(why, sizeof(why), "split record %d (token %d) inconsistent", i, sp[0]);
        }
        slot += sp[2];
    }
    if (ok && (n.num_slots > encoder_max_slots(BT) || n.num_split > BT / ENCODER_SEGMENT + 1)) {
        ok = 0; snprintf(why, sizeof(why), "%d slots / %d splits exceed the buffer bounds", n.num_slots, n.num_split);
    }
    char detail[320];
    snprintf(detail, sizeof(detail), "%d segments, %d split tokens, %d slots%s%s", n.num_segments, n.num_split, n.num_slots,
             why[0] ? "; " : "", why);
    check_true(name, ok, detail);
    free(seen); free(plan); free(counts);
    return ok;
}

static void test_encoder_plan(void) {
    printf("encoder backward plan\n");
    const int BT = 65536;
    int *inp = (int *)mallocCheck(BT * sizeof(int));
    Rng r = {81};
    for (int i = 0; i < BT; i++) {
        const float u = rng_uniform(&r);
        inp[i] = u < 0.05f ? 0 : u < 0.1f ? 1 + rng_int(&r, 30) : rng_int(&r, 50257);
    }
    check_plan("heavy-head tokens, B*T = 65536", inp, BT);
    for (int i = 0; i < 1000; i++) { inp[i] = 7; }
    check_plan("one token everywhere (B*T = 1000)", inp, 1000);
    for (int i = 0; i < 4096; i++) { inp[i] = i * 13 % 4096; }
    check_plan("all tokens distinct (B*T = 4096)", inp, 4096);
    for (int i = 0; i < 65536; i++) { inp[i] = i % 2 == 0 ? 65535 : 0; }
    check_plan("largest id 65535, two tokens of 32768", inp, 65536);
    inp[0] = 3;
    check_plan("a single position", inp, 1);

    int plan[64];
    int *counts = (int *)mallocCheck(ENCODER_TOKEN_RANGE * sizeof(int));
    EncoderPlanCounts n;
    int bad[2] = {5, -1};
    check_true("token id -1 rejected", encoder_backward_plan(plan, counts, bad, 2, &n) != NULL, "");
    bad[1] = 65536;
    check_true("token id 65536 rejected", encoder_backward_plan(plan, counts, bad, 2, &n) != NULL, "");
    free(counts);

    // the emulated kernels' sums against double sums (C = 16, heavy head so the split path runs)
    const int B = 8, T = 512, C = 16, V = 300;
    for (int i = 0; i < B * T; i++) { inp[i] = rng_uniform(&r) < 0.3f ? 2 : rng_int(&r, V); }
    float *dout = host_uniform_bf16((size_t)B * T * C, -1.0f, 1.0f, 82);
    float *dwte = host_uniform_bf16((size_t)V * C, -0.5f, 0.5f, 83), *dwpe = host_uniform_bf16((size_t)T * C, -0.5f, 0.5f, 84);
    float *ref_wte = (float *)mallocCheck((size_t)V * C * sizeof(float)), *ref_wpe = (float *)mallocCheck((size_t)T * C * sizeof(float));
    double *acc = (double *)callocCheck((size_t)V * C, sizeof(double));
    for (int i = 0; i < B * T; i++) {
        for (int c = 0; c < C; c++) { acc[(size_t)inp[i] * C + c] += dout[(size_t)i * C + c]; }
    }
    for (size_t i = 0; i < (size_t)V * C; i++) { ref_wte[i] = (float)(dwte[i] + acc[i]); }
    for (int t = 0; t < T; t++) {
        for (int c = 0; c < C; c++) {
            double a = dwpe[(size_t)t * C + c];
            for (int b = 0; b < B; b++) { a += dout[((size_t)b * T + t) * C + c]; }
            ref_wpe[(size_t)t * C + c] = (float)a;
        }
    }
    emulate_encoder_backward(dwte, dwpe, dout, inp, B, T, C);
    // bf16 results of fp32 sums: 2^-8 relative rounding, fp32 summation error far smaller
    check_close("emulated dwte vs double sums", dwte, ref_wte, (size_t)V * C, 1e-2, 1e-2);
    check_close("emulated dwpe vs double sums", dwpe, ref_wpe, (size_t)T * C, 1e-2, 1e-2);
    free(inp); free(dout); free(dwte); free(dwpe); free(ref_wte); free(ref_wpe); free(acc);
}

static void test_decay_table_for(const char *name, GPT2Config config, int expected_ranges, int muon) {
    AdamWDecayTable table;
    adamw_decay_table_gpt2(&table, &config, muon);
    size_t sizes[NUM_PARAMETER_TENSORS], off = 0;
    gpt2_param_sizes(sizes, &config);
    int ok = table.count == expected_ranges && adamw_decay_table_total(&table) == gpt2_num_params(&config);
    for (int k = 0; ok && k < NUM_PARAMETER_TENSORS; k++) {
        const int block_matrix = k == 4 || k == 6 || k == 10 || k == 12;  // qkvw attprojw fcw fcprojw
        const int want = muon && block_matrix ? ADAMW_SKIP : gpt2_param_is_decayed(k);
        if (adamw_decay_of(table, off) != want || adamw_decay_of(table, off + sizes[k] - 1) != want) { ok = 0; }
        off += sizes[k];
    }
    char detail[128];
    snprintf(detail, sizeof(detail), "%d ranges (expected %d), %zu parameters", table.count, expected_ranges,
             (size_t)adamw_decay_table_total(&table));
    check_true(name, ok, detail);
}

static void test_decay_table(void) {
    printf("AdamW weight-decay table\n");
    // runs of equal decay in file order: [wte wpe] [ln1w ln1b] [qkvw] [qkvb] [attprojw]
    // [attprojb ln2w ln2b] [fcw] [fcb] [fcprojw] [fcprojb lnfw lnfb]
    test_decay_table_for("GPT-2 124M (d12)", GPT2Config{1024, 50257, 50304, 12, 12, 768}, 10, 0);
    test_decay_table_for("tiny (L2:C64:H4:T128)", GPT2Config{128, 50257, 50304, 2, 4, 64}, 10, 0);
    test_decay_table_for("GPT-2 1.5B (d48)", GPT2Config{1024, 50257, 50304, 48, 25, 1600}, 10, 0);
    // -opt muon: the same runs, the four matrix tensors ADAMW_SKIP instead of decayed
    test_decay_table_for("GPT-2 124M (d12), -opt muon", GPT2Config{1024, 50257, 50304, 12, 12, 768}, 10, 1);
    test_decay_table_for("tiny, -opt muon", GPT2Config{128, 50257, 50304, 2, 4, 64}, 10, 1);

    AdamWDecayTable t;
    AdamWRange ok_ranges[3] = {{0, 10, 1}, {10, 5, 0}, {15, 7, 1}};
    check_true("three ranges accepted", adamw_decay_table_init(&t, ok_ranges, 3) == NULL && t.count == 3, "");
    check_true("lookup at range edges",
               adamw_decay_of(t, 0) == 1 && adamw_decay_of(t, 9) == 1 && adamw_decay_of(t, 10) == 0 &&
                   adamw_decay_of(t, 14) == 0 && adamw_decay_of(t, 15) == 1 && adamw_decay_of(t, 21) == 1,
               "");
    AdamWRange gap[2] = {{0, 10, 1}, {11, 5, 0}};
    check_true("a gap rejected", adamw_decay_table_init(&t, gap, 2) != NULL, "");
    AdamWRange overlap[2] = {{0, 10, 1}, {9, 5, 0}};
    check_true("an overlap rejected", adamw_decay_table_init(&t, overlap, 2) != NULL, "");
    AdamWRange late[1] = {{4, 10, 1}};
    check_true("a table not starting at 0 rejected", adamw_decay_table_init(&t, late, 1) != NULL, "");
    AdamWRange empty[2] = {{0, 10, 1}, {10, 0, 0}};
    check_true("an empty range rejected", adamw_decay_table_init(&t, empty, 2) != NULL, "");
    AdamWRange flag[1] = {{0, 10, 3}};
    check_true("decay other than 0/1/ADAMW_SKIP rejected", adamw_decay_table_init(&t, flag, 1) != NULL, "");
    AdamWRange many[40];
    for (int i = 0; i < 40; i++) { many[i].offset = (size_t)i; many[i].size = 1; many[i].decay = i % 2; }
    check_true("more than 32 alternating ranges rejected", adamw_decay_table_init(&t, many, 40) != NULL, "");
    for (int i = 0; i < 40; i++) { many[i].decay = 1; }
    check_true("40 ranges of equal decay merge into 1",
               adamw_decay_table_init(&t, many, 40) == NULL && t.count == 1 && adamw_decay_table_total(&t) == 40, "");
    check_true("64-bit seeds differing only in the high half give different 32-bit seeds",
               adamw_seed32(1ull) != adamw_seed32(1ull | (1ull << 32)), "");
}

// ZeRO-1 shards with Muon, checked against the matrices' edges listed from the tensor sizes
static void test_muon_shards_for(const char *name, GPT2Config c) {
    size_t sizes[NUM_PARAMETER_TENSORS], start[NUM_PARAMETER_TENSORS], acc = 0;
    gpt2_param_sizes(sizes, &c);
    for (int k = 0; k < NUM_PARAMETER_TENSORS; k++) { start[k] = acc; acc += sizes[k]; }
    const size_t P = acc;
    const int Ws[4] = {2, 3, 4, 8};
    int ok = 1;
    char why[256] = "";
    for (int wi = 0; wi < 4 && ok; wi++) {
        const int W = Ws[wi];
        size_t next = 0;
        for (int r = 0; r < W && ok; r++) {
            size_t off, cnt;
            muon_zero_shard(&c, W, r, &off, &cnt);
            if (off != next) { ok = 0; snprintf(why, sizeof(why), "W=%d rank %d starts at %zu, not %zu", W, r, off, next); }
            next = off + cnt;
            const size_t even = (size_t)((unsigned long long)P * r / W);
            for (int k = 0; k < NUM_PARAMETER_TENSORS && ok; k++) {
                if (!(k == 4 || k == 6 || k == 10 || k == 12)) { continue; }
                const size_t per = sizes[k] / c.num_layers;
                for (int l = 0; l < c.num_layers; l++) {
                    const size_t a = start[k] + l * per;
                    if (off > a && off < a + per) { ok = 0; snprintf(why, sizeof(why), "W=%d rank %d splits tensor %d layer %d", W, r, k, l); }
                    // balanced: a boundary moved off the even split stays within half of that matrix
                    if (even > a && even < a + per && (off > even ? off - even : even - off) > per / 2) {
                        ok = 0; snprintf(why, sizeof(why), "W=%d rank %d: %zu is far from the even split %zu", W, r, off, even);
                    }
                }
            }
        }
        if (ok && next != P) { ok = 0; snprintf(why, sizeof(why), "W=%d: the shards end at %zu of %zu", W, next, P); }
    }
    check_true(name, ok, why);
}

static void test_norm_emulation(void) {
    printf("gradient-norm chunk order emulation\n");
    const size_t n = 8 + GRAD_NORM_CHUNK + 3;  // one chunk's worth, from an offset
    float *g = host_uniform_bf16(n, -1.0f, 1.0f, 85);
    double exact = 0.0;
    for (size_t i = 8; i < n - 3; i++) { exact += (double)g[i] * g[i]; }
    float e = emulate_global_norm_chunk(g, 8, n - 3, 1), ref = (float)exact;
    check_close("vectorized order vs double", &e, &ref, 1, 0.0, 1e-5);
    exact += (double)g[n - 3] * g[n - 3] + (double)g[n - 2] * g[n - 2] + (double)g[n - 1] * g[n - 1];
    e = emulate_global_norm_chunk(g, 8, n, 0);
    ref = (float)exact;
    check_close("scalar order vs double", &e, &ref, 1, 0.0, 1e-5);
    float vals[512];
    for (int i = 0; i < 512; i++) { vals[i] = (float)(i + 1); }
    e = emulate_block_sum(vals, 512);
    check_true("block sum of 1..512 = 131328", e == 131328.0f, "");
    free(g);
}

/*
 * The gradient norm's chunks (llmc/model_io.h) against the tensor sizes: they tile [0, P) in order,
 * none longer than GRAD_NORM_CHUNK, every multiple of it and every layer slice's start is a cut,
 * gpt2_norm_chunk_floor is the last cut at or before each index, and ZeRO-1's shard edges (even
 * and Muon's) are cuts on 1 to 8 ranks
 */
static void test_norm_chunks_for(const char *name, GPT2Config c) {
    const size_t P = gpt2_num_params(&c), n = gpt2_norm_chunks(&c, NULL);
    std::vector<size_t> starts(n + 1);
    gpt2_norm_chunks(&c, starts.data());
    std::vector<uint8_t> is_cut(P + 1, 0);
    int ok = starts[0] == 0 && starts[n] == P;
    char why[256] = "";
    for (size_t k = 0; k < n && ok; k++) {
        if (starts[k + 1] <= starts[k] || starts[k + 1] - starts[k] > GRAD_NORM_CHUNK) {
            ok = 0; snprintf(why, sizeof(why), "chunk %zu is [%zu, %zu)", k, starts[k], starts[k + 1]);
        }
        is_cut[starts[k]] = 1;
    }
    is_cut[P] = 1;
    size_t sizes[NUM_PARAMETER_TENSORS], at = 0;
    gpt2_param_sizes(sizes, &c);
    for (int i = 0; i < NUM_PARAMETER_TENSORS && ok; i++) {
        const int slices = i >= 2 && i <= 13 ? c.num_layers : 1;  // the blocks' tensors per layer
        for (int l = 0; l < slices && ok; l++) {
            if (!is_cut[at + l * (sizes[i] / slices)]) { ok = 0; snprintf(why, sizeof(why), "tensor %d layer %d: no cut", i, l); }
        }
        at += sizes[i];
    }
    for (size_t m = 0; m < P && ok; m += GRAD_NORM_CHUNK) {
        if (!is_cut[m]) { ok = 0; snprintf(why, sizeof(why), "%zu: no cut", m); }
    }
    for (size_t k = 0; k <= n && ok; k += k < 64 ? 1 : 61) {  // a chunk's index from its start (ZeRO-1's shards)
        if (gpt2_norm_cuts_below(&c, starts[k], NULL) != k) {
            ok = 0; snprintf(why, sizeof(why), "%zu cuts before chunk %zu", gpt2_norm_cuts_below(&c, starts[k], NULL), k);
        }
    }
    for (size_t k = 0; k <= n && ok; k++) {  // around every cut and between cuts
        const size_t probes[4] = {starts[k] > 0 ? starts[k] - 1 : 0, starts[k], starts[k] + 1,
                                  k < n ? (starts[k] + starts[k + 1]) / 2 : P};
        for (int j = 0; j < 4 && ok; j++) {
            const size_t b = probes[j] < P ? probes[j] : P;
            size_t last = b;
            while (!is_cut[last]) { last--; }
            if (gpt2_norm_chunk_floor(&c, b) != last) {
                ok = 0; snprintf(why, sizeof(why), "floor(%zu) = %zu, not %zu", b, gpt2_norm_chunk_floor(&c, b), last);
            }
        }
    }
    for (int W = 1; W <= 8 && ok; W++) {
        for (int r = 0; r < W && ok; r++) {
            size_t S, padded, off, cnt;
            zero_shard(P, W, r, 1, &S, &padded, &off, &cnt);
            if (!is_cut[off] || !is_cut[off + cnt]) { ok = 0; snprintf(why, sizeof(why), "W=%d rank %d: even shard [%zu, +%zu)", W, r, off, cnt); }
            muon_zero_shard(&c, W, r, &off, &cnt);
            if (!is_cut[off] || !is_cut[off + cnt]) { ok = 0; snprintf(why, sizeof(why), "W=%d rank %d: Muon shard [%zu, +%zu)", W, r, off, cnt); }
        }
    }
    char title[160];
    snprintf(title, sizeof(title), "%s: %zu chunks of %zu parameters", name, n, P);
    check_true(title, ok, why);
}

// the summary line check_close prints for one element, with its own verdict taken back (a FAIL is the
// point here); stdout goes to a temporary file for the call
static void check_close_line(float got, float ref, char *line, size_t size) {
    fflush(stdout);
    FILE *tmp = tmpfile();
    const int saved = dup(1);
    if (tmp == NULL || saved < 0 || dup2(fileno(tmp), 1) < 0) { fprintf(stderr, "host_logic_test: cannot capture stdout\n"); exit(1); }
    const int failures = wb_failures;
    check_close("one element", &got, &ref, 1, 0.0, 0.0);
    fflush(stdout);
    dup2(saved, 1);
    close(saved);
    wb_failures = failures;
    rewind(tmp);
    line[0] = '\0';
    char buf[512];
    while (fgets(buf, sizeof(buf), tmp)) {
        if (strstr(buf, "max|diff|")) { snprintf(line, size, "%s", buf); }
    }
    fclose(tmp);
}

static void test_printed_maxima(void) {
    printf("the checks' printed maxima\n");
    check_true("max_keep_nan: NaN once either side is NaN, else the larger",
               isnan(max_keep_nan(0.0, NAN)) && isnan(max_keep_nan(NAN, 1.0)) && max_keep_nan(1.0, 2.0) == 2.0 &&
                   max_keep_nan(2.0, 1.0) == 2.0,
               "");
    char nan_vs_one[512], inf_vs_one[512], nan_vs_nan[512];
    check_close_line(NAN, 1.0f, nan_vs_one, sizeof(nan_vs_one));
    check_close_line(INFINITY, 1.0f, inf_vs_one, sizeof(inf_vs_one));
    check_close_line(NAN, NAN, nan_vs_nan, sizeof(nan_vs_nan));
    check_true("check_close: an unmatched NaN or inf shows in max|diff|, a matched NaN does not",
               strstr(nan_vs_one, "FAIL  max|diff| nan") && strstr(inf_vs_one, "FAIL  max|diff| inf") &&
                   strstr(nan_vs_nan, "ok    max|diff| 0 "),
               "");
}

// expected: TFLOP/s from the spec sheets (dense bf16), worked out by hand where scaled; 0 = unknown
static void test_gpu_peak(void) {
    printf("MFU peak by device name, SMs and clock (llmc/gpu_peak.h)\n");
    struct { const char *name; int sms, khz; double tflops; } cases[] = {
        {"NVIDIA H100 80GB HBM3", 132, 1980000, 989.0},       // H100 SXM5
        {"NVIDIA H100 PCIe", 114, 1755000, 756.0},
        {"NVIDIA H100 NVL", 132, 1785000, 835.0},
        {"NVIDIA H200", 132, 1980000, 989.0},
        {"NVIDIA A100-SXM4-80GB", 108, 1410000, 312.0},
        {"NVIDIA A100-SXM4-40GB", 108, 1410000, 312.0},
        {"NVIDIA A100-PCIE-40GB", 108, 1410000, 312.0},
        {"NVIDIA A100 80GB PCIe", 108, 1410000, 312.0},
        {"NVIDIA H100 80GB HBM3 MIG 3g.40gb", 60, 1980000, 989.0 * 60 / 132},  // 449.5: a MIG slice's SMs
        {"NVIDIA H100 PCIe", 114, 1620000, 756.0 * 1620 / 1755},               // 697.8: a capped clock
        {"NVIDIA GeForce RTX 4090", 128, 2520000, 0.0},
        {"NVIDIA L40S", 142, 2520000, 0.0},
        {"host simulator", 1, 1000000, 0.0},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char why[256], name[160];
        const double got = gpu_peak_lookup(cases[i].name, cases[i].sms, cases[i].khz, why, sizeof(why)) / 1e12;
        snprintf(name, sizeof(name), "%s, %d SMs, %d MHz: %.1f TFLOP/s", cases[i].name, cases[i].sms, cases[i].khz / 1000,
                 cases[i].tflops);
        const int ok = fabs(got - cases[i].tflops) < 0.05 && (cases[i].tflops > 0 || strstr(why, "n/a") == why);
        check_true(name, ok, why);
    }
}

// ZeRO-1's reduce-scatter layout against a brute force over every element of every bucket
// (muon: the shards of whole matrices that -opt muon uses, of unequal lengths)
static void test_zero_layout_for(const char *name, GPT2Config c, int W, int muon) {
    const size_t P = gpt2_num_params(&c);
    std::vector<size_t> bounds(W + 1);
    zero_bounds(&c, W, muon, bounds.data());
    // brute force: the owner of parameter f walks the shards (each from its own shard function)
    auto owner_of = [&](size_t f) {
        for (int r = 0; r < W; r++) {
            size_t lo, cnt, S, padded;
            if (muon && W > 1) { muon_zero_shard(&c, W, r, &lo, &cnt); } else { zero_shard(P, W, r, 1, &S, &padded, &lo, &cnt); }
            if (f >= lo && f < lo + cnt) { return r; }
        }
        return -1;
    };
    std::vector<uint8_t> covered(P, 0), arrived(P, 0);  // buckets holding each parameter; its arrivals at its owner
    int ok = 1;
    char why[256] = "";
    for (int l = 0; l <= c.num_layers && ok; l++) {
        const int nb = zero_buckets(&c, l, W, NULL);
        std::vector<ZeroBucket> b(nb);
        zero_buckets(&c, l, W, b.data());
        for (int k = 0; k < nb && ok; k++) {
            // brute force: position j of the bucket -> its parameter, its holder j / q, its owner
            std::vector<size_t> flat_of(b[k].n);
            size_t pos = 0;
            for (int i = 0; i < b[k].npieces; i++) {
                if (b[k].pieces[i].pos != pos) { ok = 0; snprintf(why, sizeof(why), "layer %d: pieces not end to end", l); }
                for (size_t e = 0; e < b[k].pieces[i].len; e++) { flat_of[pos + e] = b[k].pieces[i].flat + e; covered[b[k].pieces[i].flat + e]++; }
                pos += b[k].pieces[i].len;
            }
            if (pos != b[k].n || b[k].q * (size_t)W < b[k].n || W * b[k].q > W * ((zero_layer_elems(&c) + W - 1) / W)) {
                ok = 0; snprintf(why, sizeof(why), "layer %d: bucket size %zu, q %zu", l, b[k].n, b[k].q);
            }
            std::vector<std::vector<ZeroRun>> runs(W);
            for (int r = 0; r < W; r++) {
                runs[r].resize(zero_bucket_runs(&b[k], W, r, bounds.data(), NULL));
                zero_bucket_runs(&b[k], W, r, bounds.data(), runs[r].data());
            }
            for (int r = 0; r < W && ok; r++) {
                for (const ZeroRun &run : runs[r]) {
                    for (size_t e = 0; e < run.len && ok; e++) {
                        const size_t j = run.pos + e, f = run.flat + e;
                        const int holder = (int)(j / b[k].q), owner = owner_of(f);
                        const int want_holder = run.kind == ZERO_RECV ? run.peer : r, want_owner = run.kind == ZERO_SEND ? run.peer : r;
                        if (j >= b[k].n || flat_of[j] != f || holder != want_holder || owner != want_owner) {
                            ok = 0;
                            snprintf(why, sizeof(why), "layer %d rank %d: run kind %d pos %zu flat %zu: holder %d owner %d", l, r,
                                     run.kind, j, f, holder, owner);
                        }
                        if (run.kind != ZERO_SEND) { arrived[f]++; }  // at r, its owner (checked above)
                    }
                }
                // the sends of r to s and the receives of s from r: the same runs in the same order
                for (int s2 = 0; s2 < W && ok; s2++) {
                    if (s2 == r) { continue; }
                    std::vector<ZeroRun> snd, rcv;
                    for (const ZeroRun &run : runs[r]) { if (run.kind == ZERO_SEND && run.peer == s2) { snd.push_back(run); } }
                    for (const ZeroRun &run : runs[s2]) { if (run.kind == ZERO_RECV && run.peer == r) { rcv.push_back(run); } }
                    if (snd.size() != rcv.size()) { ok = 0; snprintf(why, sizeof(why), "layer %d: %d -> %d unpaired", l, r, s2); }
                    for (size_t i = 0; ok && i < snd.size(); i++) {
                        if (snd[i].len != rcv[i].len || snd[i].flat != rcv[i].flat || snd[i].pos != rcv[i].pos) {
                            ok = 0; snprintf(why, sizeof(why), "layer %d: %d -> %d pair %zu differs", l, r, s2, i);
                        }
                    }
                }
            }
        }
    }
    for (size_t f = 0; f < P && ok; f++) {
        if (covered[f] != 1) { ok = 0; snprintf(why, sizeof(why), "parameter %zu in %d buckets", f, covered[f]); }
        if (arrived[f] != 1) { ok = 0; snprintf(why, sizeof(why), "parameter %zu arrives %d times at its owner", f, arrived[f]); }
    }
    char title[128];
    snprintf(title, sizeof(title), "%s on %d rank(s)%s: %zu parameters, shards from %zu", name, W,
             muon ? " with Muon's whole-matrix shards" : "", P, bounds[1] - bounds[0]);
    check_true(title, ok, why);
}

static void test_zero_layout(void) {
    printf("ZeRO-1 reduce-scatter layout (llmc/cuda/grad_reduce.cuh)\n");
    const int ranks[] = {1, 2, 3, 5, 8};
    for (int W : ranks) {
        for (int muon = 0; muon <= 1; muon++) {
            test_zero_layout_for("L2:C64:H1:T32:V128", GPT2Config{32, 128, 128, 2, 1, 64}, W, muon);
            test_zero_layout_for("L3:C128:H2:T64:V1000", GPT2Config{64, 1000, 1024, 3, 2, 128}, W, muon);
        }
    }
    test_zero_layout_for("L4:C256:H4:T128:V5000", GPT2Config{128, 5000, 5120, 4, 4, 256}, 8, 0);
    test_zero_layout_for("L4:C256:H4:T128:V5000", GPT2Config{128, 5000, 5120, 4, 4, 256}, 8, 1);
}

int main(void) {
    printf("host_logic_test (CPU only)\n");
    test_encoder_plan();
    test_decay_table();
    printf("ZeRO-1 shards with Muon (whole matrices)\n");
    test_muon_shards_for("GPT-2 124M (d12), 2/3/4/8 ranks", GPT2Config{1024, 50257, 50304, 12, 12, 768});
    test_muon_shards_for("tiny (L2:C64:H4:T128), 2/3/4/8 ranks", GPT2Config{128, 50257, 50304, 2, 4, 64});
    test_norm_emulation();
    printf("gradient-norm chunks (llmc/model_io.h)\n");
    test_norm_chunks_for("GPT-2 124M (d12)", GPT2Config{1024, 50257, 50304, 12, 12, 768});
    test_norm_chunks_for("L2:C64:H1:T32:V128", GPT2Config{32, 128, 128, 2, 1, 64});
    test_norm_chunks_for("L3:C128:H2:T64:V1000", GPT2Config{64, 1000, 1024, 3, 2, 128});
    printf("LayerNorm backward warps per block\n");
    check_true("C = 768 -> 8, 1600 -> 7, 12288 -> 1, 12296 -> 0 (rejected)",
               layernorm_backward_warps(768) == 8 && layernorm_backward_warps(1600) == 7 &&
                   layernorm_backward_warps(12288) == 1 && layernorm_backward_warps(12296) == 0,
               "");
    test_printed_maxima();
    printf("-at auto (the implementation measured faster at the run's T)\n");
    check_true("with cuDNN: T 1024 and 256 -> cudnn, 255 and 64 -> own",
               attention_auto(1, 1024) == ATTENTION_CUDNN && attention_auto(1, 256) == ATTENTION_CUDNN &&
                   attention_auto(1, 255) == ATTENTION_OWN && attention_auto(1, 64) == ATTENTION_OWN, "");
    check_true("without cuDNN: own at every T; this build (no cuDNN): -at auto is own at T 1024",
               attention_auto(0, 1024) == ATTENTION_OWN && attention_auto(0, 64) == ATTENTION_OWN &&
                   attention_impl("auto", "-at", 1024) == (ATTENTION_HAVE_CUDNN ? ATTENTION_CUDNN : ATTENTION_OWN),
               "");
    test_gpu_peak();
    test_zero_layout();
    if (wb_failures) {
        printf("host_logic_test: %d check(s) FAILED\n", wb_failures);
        return 1;
    }
    printf("host_logic_test: all checks passed\n");
    return 0;
}
