/*
 * Workbench: the AdamW update (llmc/cuda/adamw.cuh) and the bf16 <-> fp32 casts (llmc/cuda/cuda_common.cuh)
 * over the 124,475,904 parameters of GPT-2 124M (Vp = 50304), against a double-precision CPU
 * AdamW that derives the weight decay from the tensor sizes on its own.
 *
 * Checks and tolerances:
 *   m, v (fp32): a few fp32 roundings of values ~1e-3 / ~1e-5: rtol 1e-5 (atol 1e-10, 1e-13).
 *   master (fp32): p - lr * (...) rounds once to the fp32 ulp of |p| <= 0.1 (7.5e-9), the update
 *       (~lr) carries the fast division / sqrt's few-ulp error: atol 2e-8, rtol 1e-6.
 *   params (bf16) with master weights: exactly one of the two bf16 neighbours of the GPU's own
 *       fp32 master (or equal to it), and unbiased: the mean of (param - master) / ulp over all
 *       n parameters is 0 within 5/sqrt(n), ten standard errors (4.5e-4 at n = 124M).
 *   params without master weights: within one bf16 ulp of the double reference.
 *   ZeRO-1 shards: two shard updates ([0, s) and [s, total), shard-local m/v/master, s odd and
 *       inside a tensor) give the same bits as one full update.
 *   determinism: a second update from the same state is bitwise identical.
 *   casts: bf16 -> fp32 exact; fp32 -> bf16 equal to the host's round-to-nearest-even.
 *
 *   ./adamw
 */
#include "common.h"
#include "llmc/cuda/adamw.cuh"

typedef struct {
    floatX *params, *grads;
    float *m, *v, *master;
} OptState;

static void state_upload(OptState *s, const float *p, const float *g, const float *m, const float *v, const float *master,
                         size_t n) {
    upload_bf16(s->params, p, n);
    upload_bf16(s->grads, g, n);
    cudaCheck(cudaMemcpy(s->m, m, n * sizeof(float), cudaMemcpyHostToDevice));
    cudaCheck(cudaMemcpy(s->v, v, n * sizeof(float), cudaMemcpyHostToDevice));
    if (master) { cudaCheck(cudaMemcpy(s->master, master, n * sizeof(float), cudaMemcpyHostToDevice)); }
}

// all of a state's bytes, for bitwise comparisons
static void state_bytes(void **out, const OptState *s, size_t n) {
    out[0] = download_bytes(s->params, n * sizeof(floatX));
    out[1] = download_bytes(s->m, n * sizeof(float));
    out[2] = download_bytes(s->v, n * sizeof(float));
    out[3] = download_bytes(s->master, n * sizeof(float));
}

static void compare_states(const char *what, void **a, void **b, size_t n) {
    char name[128];
    const char *parts[4] = {"params", "m", "v", "master"};
    const size_t bytes[4] = {n * sizeof(floatX), n * sizeof(float), n * sizeof(float), n * sizeof(float)};
    for (int i = 0; i < 4; i++) {
        snprintf(name, sizeof(name), "%s: %s", what, parts[i]);
        check_bitwise(name, a[i], b[i], bytes[i]);
    }
}

static void free_bytes(void **x) { for (int i = 0; i < 4; i++) { free(x[i]); } }

// the settings in double for the reference, with the bias corrections 1 - beta^t
typedef struct {
    double lr, beta1, beta2, eps, wd, scale, bc1, bc2;
} RefSettings;

// what every case shares: the model's size, the decay table, the settings, the starting state and the device state
typedef struct {
    size_t n;
    AdamWDecayTable table;
    OptSettings o;
    RefSettings ref;
    float *p0, *g0, *m0, *v0, *master0;  // the starting state (p0 and g0 bf16 values)
    unsigned char *decay;                // 1 where the parameter is decayed, from the tensor sizes
    OptState s;
} Bench;

// the settings as the training loop fills them (llmc/optimizer.h), with a clip scale below 1
static void init_settings(OptSettings *o) {
    memset(o, 0, sizeof(*o));
    o->lr = 6e-4f; o->beta1 = OPT_BETA1; o->beta2 = OPT_BETA2; o->eps = OPT_EPS; o->weight_decay = 0.1f; o->grad_scale = 0.4f;
    o->t = 3;
    o->seed = 0x1234567890abcdefull;
}

// the starting state: bf16 params and grads, m and v as in training (|m| <~ sqrt(v)), master near p0
static void init_state(Bench *b) {
    const size_t n = b->n;
    b->p0 = host_uniform_bf16(n, -0.1f, 0.1f, 61);
    b->g0 = host_uniform_bf16(n, -1e-2f, 1e-2f, 62);
    b->m0 = (float *)mallocCheck(n * sizeof(float));
    b->v0 = (float *)mallocCheck(n * sizeof(float));
    b->master0 = (float *)mallocCheck(n * sizeof(float));
    Rng r = {63};
    for (size_t i = 0; i < n; i++) {
        b->m0[i] = rng_range(&r, -1e-3f, 1e-3f);
        b->v0[i] = b->m0[i] * b->m0[i] * rng_range(&r, 1.0f, 4.0f) + 1e-8f;  // as in training: |m| <~ sqrt(v)
        b->master0[i] = b->p0[i] + rng_range(&r, -1e-4f, 1e-4f) * fabsf(b->p0[i]);  // the fp32 value p0 was rounded from
    }
}

// decay per parameter from the tensor sizes, independently of the kernel's table
static unsigned char *decay_from_sizes(const GPT2Config *config, size_t n) {
    unsigned char *decay = (unsigned char *)mallocCheck(n);
    size_t sizes[NUM_PARAMETER_TENSORS], off = 0;
    gpt2_param_sizes(sizes, config);
    for (int k = 0; k < NUM_PARAMETER_TENSORS; k++) {
        memset(decay + off, k == 0 || k == 1 || k == 4 || k == 6 || k == 10 || k == 12, sizes[k]);
        off += sizes[k];
    }
    return decay;
}

// the model, the settings, the starting state and the device buffers; prints the model's line
static void bench_init(Bench *b) {
    // GPT-2 124M; under the simulator a one-layer C=64 model with a small vocabulary
    GPT2Config config = WB_SIM ? GPT2Config{32, 300, 384, 1, 4, 64} : GPT2Config{1024, 50257, 50304, 12, 12, 768};
    const size_t n = gpt2_num_params(&config);
    b->n = n;
    adamw_decay_table_gpt2(&b->table, &config, 0);
    printf("%s: %zu parameters, decay table of %d ranges\n", WB_SIM ? "simulator model" : "GPT-2 124M", n, b->table.count);
    init_settings(&b->o);
    const double beta1 = b->o.beta1, beta2 = b->o.beta2;
    const int t = b->o.t;
    b->ref = RefSettings{b->o.lr, beta1, beta2, b->o.eps, b->o.weight_decay, b->o.grad_scale, 1.0 - pow(beta1, t),
                         1.0 - pow(beta2, t)};
    init_state(b);
    b->decay = decay_from_sizes(&config, n);
    b->s.params = (floatX *)device_alloc(n * sizeof(floatX));
    b->s.grads = (floatX *)device_alloc(n * sizeof(floatX));
    b->s.m = (float *)device_alloc(n * sizeof(float));
    b->s.v = (float *)device_alloc(n * sizeof(float));
    b->s.master = (float *)device_alloc(n * sizeof(float));
}

// frees what bench_init made
static void bench_free(Bench *b) {
    cudaCheck(cudaFree(b->s.params)); cudaCheck(cudaFree(b->s.grads)); cudaCheck(cudaFree(b->s.m)); cudaCheck(cudaFree(b->s.v));
    cudaCheck(cudaFree(b->s.master));
    free(b->p0); free(b->g0); free(b->m0); free(b->v0); free(b->master0); free(b->decay);
}

// the double-precision AdamW step of parameter i from weight w: returns the new weight, sets the new m and v
static double ref_step(const Bench *b, size_t i, double w, double *m_out, double *v_out) {
    const double lr = b->ref.lr, beta1 = b->ref.beta1, beta2 = b->ref.beta2, eps = b->ref.eps, wd = b->ref.wd,
                 scale = b->ref.scale, bc1 = b->ref.bc1, bc2 = b->ref.bc2;
    const double g = (double)b->g0[i] * scale;
    const double m = beta1 * (double)b->m0[i] + (1.0 - beta1) * g, v = beta2 * (double)b->v0[i] + (1.0 - beta2) * g * g;
    *m_out = m;
    *v_out = v;
    return w - lr * ((m / bc1) / (sqrt(v / bc2) + eps) + (b->decay[i] ? wd : 0.0) * w);
}

// the reference step of all n parameters from weights w0: the new weights into rp, m and v into rm and rv where given
static void ref_update(const Bench *b, const float *w0, float *rp, float *rm, float *rv) {
    for (size_t i = 0; i < b->n; i++) {
        double m, v;
        rp[i] = (float)ref_step(b, i, w0[i], &m, &v);
        if (rm) { rm[i] = (float)m; }
        if (rv) { rv[i] = (float)v; }
    }
}

// the GPU's bf16 params are a bf16 neighbour of its own fp32 master weights, and unbiased over all n
static void check_params_round_master(const float *gp, const float *gmaster, size_t n) {
    size_t bad = 0;
    double bias = 0.0;
    for (size_t i = 0; i < n; i++) {
        float lo, hi;
        bf16_neighbours(gmaster[i], &lo, &hi);
        if (gp[i] != lo && gp[i] != hi) {
            if (bad < 5) { printf("    params[%zu] = %.9g is not a bf16 neighbour of master %.9g\n", i, gp[i], gmaster[i]); }
            bad++;
        }
        if (hi != lo) { bias += (gp[i] - gmaster[i]) / (hi - lo); }
    }
    char detail[128];
    snprintf(detail, sizeof(detail), "%zu not a neighbour", bad);
    check_true("params = a bf16 neighbour of the master weight", bad == 0, detail);
    bias /= n;
    // each term has mean 0 and standard deviation <= 0.5: 5/sqrt(n) is ten standard errors
    snprintf(detail, sizeof(detail), "mean (param - master) / ulp = %.2e, bound %.2e", bias, 5.0 / sqrt((double)n));
    check_true("stochastic rounding unbiased (|mean| < 5/sqrt(n))", fabs(bias) < 5.0 / sqrt((double)n), detail);
}

// 1. with master weights: m, v and master against the double reference (its m left in rm), params rounded from master
static void check_master_weights(Bench *b, float *rm) {
    const size_t n = b->n;
    printf("case with fp32 master weights\n");
    state_upload(&b->s, b->p0, b->g0, b->m0, b->v0, b->master0, n);
    adamw_update(b->s.params, b->s.master, b->s.grads, b->s.m, b->s.v, 0, n, &b->table, &b->o, 0);
    float *gm = (float *)mallocCheck(n * sizeof(float)), *gv = (float *)mallocCheck(n * sizeof(float)),
          *gmaster = (float *)mallocCheck(n * sizeof(float)), *gp = (float *)mallocCheck(n * sizeof(float));
    download_f32(gm, b->s.m, n);
    download_f32(gv, b->s.v, n);
    download_f32(gmaster, b->s.master, n);
    download_bf16(gp, b->s.params, n);
    float *rv = (float *)mallocCheck(n * sizeof(float)), *rp = (float *)mallocCheck(n * sizeof(float));
    ref_update(b, b->master0, rp, rm, rv);
    check_close("m", gm, rm, n, 1e-10, 1e-5);
    check_close("v", gv, rv, n, 1e-13, 1e-5);
    check_close("master weights", gmaster, rp, n, 2e-8, 1e-6);
    check_params_round_master(gp, gmaster, n);
    free(gm); free(gv); free(gmaster); free(gp); free(rv); free(rp);
}

// 2. determinism: a second update from the same state is bitwise identical to the first (whose bytes are left in a)
static void check_determinism(Bench *b, void **a) {
    const size_t n = b->n;
    void *second[4];
    state_bytes(a, &b->s, n);
    state_upload(&b->s, b->p0, b->g0, b->m0, b->v0, b->master0, n);
    adamw_update(b->s.params, b->s.master, b->s.grads, b->s.m, b->s.v, 0, n, &b->table, &b->o, 0);
    state_bytes(second, &b->s, n);
    compare_states("second run", a, second, n);
    free_bytes(second);
}

// 3. ZeRO-1 shards: [0, split) and [split, n) with shard-local m, v, master give the bytes a of one full update
static void check_shards(Bench *b, void **a) {
    const size_t n = b->n, split = n / 3 + 5;
    void *sharded[4];
    state_upload(&b->s, b->p0, b->g0, b->m0, b->v0, b->master0, n);
    adamw_update(b->s.params, b->s.master, b->s.grads, b->s.m, b->s.v, 0, split, &b->table, &b->o, 0);
    adamw_update(b->s.params, b->s.master + split, b->s.grads, b->s.m + split, b->s.v + split, split, n - split, &b->table,
                 &b->o, 0);
    state_bytes(sharded, &b->s, n);
    compare_states("two shards == one full update", a, sharded, n);
    free_bytes(sharded);
}

// 4. without master weights (params read and written in bf16): m equal to case 1's rm, params within one bf16 ulp
static void check_without_master(Bench *b, const float *rm) {
    const size_t n = b->n;
    printf("case without master weights\n");
    state_upload(&b->s, b->p0, b->g0, b->m0, b->v0, NULL, n);
    adamw_update(b->s.params, NULL, b->s.grads, b->s.m, b->s.v, 0, n, &b->table, &b->o, 0);
    float *gp = (float *)mallocCheck(n * sizeof(float)), *gm = (float *)mallocCheck(n * sizeof(float));
    download_bf16(gp, b->s.params, n);
    download_f32(gm, b->s.m, n);
    float *rp = (float *)mallocCheck(n * sizeof(float)), *tol = (float *)mallocCheck(n * sizeof(float));
    ref_update(b, b->p0, rp, NULL, NULL);
    for (size_t i = 0; i < n; i++) {
        float lo, hi;
        bf16_neighbours(rp[i], &lo, &hi);
        tol[i] = fabsf(hi - lo) * 1.001f + 1e-8f;  // one bf16 ulp (hi - lo < 0 for negative values)
    }
    check_close("m (no master)", gm, rm, n, 1e-10, 1e-5);
    check_close_tol("params within one bf16 ulp (no master)", gp, rp, tol, n);
    free(gp); free(gm); free(rp); free(tol);
}

// 5. casts: fp32 -> bf16 equal to the host's round-to-nearest-even, bf16 -> fp32 exact
static void check_casts(const Bench *b) {
    const size_t n = b->n;
    printf("case casts\n");
    floatX *d_bf = (floatX *)device_alloc(n * sizeof(floatX));
    float *d_f = (float *)device_alloc(n * sizeof(float));
    cudaCheck(cudaMemcpy(d_f, b->master0, n * sizeof(float), cudaMemcpyHostToDevice));
    cast_fp32_to_bf16(d_bf, d_f, n, 0);
    uint16_t *got = (uint16_t *)download_bytes(d_bf, n * sizeof(uint16_t)), *ref = (uint16_t *)mallocCheck(n * sizeof(uint16_t));
    for (size_t i = 0; i < n; i++) { ref[i] = float_to_bf16(b->master0[i]); }
    check_bitwise("cast_fp32_to_bf16 == host round-to-nearest-even", got, ref, n * sizeof(uint16_t));
    cast_bf16_to_fp32(d_f, d_bf, n, 0);
    float *back = (float *)mallocCheck(n * sizeof(float)), *expect = (float *)mallocCheck(n * sizeof(float));
    download_f32(back, d_f, n);
    for (size_t i = 0; i < n; i++) { expect[i] = bf16_to_float(ref[i]); }
    check_bitwise("cast_bf16_to_fp32 exact", back, expect, n * sizeof(float));
    cudaCheck(cudaFree(d_bf)); cudaCheck(cudaFree(d_f));
    free(got); free(ref); free(back); free(expect);
}

// 6. timing (not under the simulator): per parameter, with master weights: read grad 2, master 4, m 4, v 4; write
// master 4, m 4, v 4, param 2 bytes; without: read grad 2, param 2, m 4, v 4; write param 2, m 4, v 4
static void time_updates(Bench *b) {
    const size_t n = b->n;
    OptState *s = &b->s;
    state_upload(s, b->p0, b->g0, b->m0, b->v0, b->master0, n);
    float ms = time_ms([&] {
        adamw_update(s->params, s->master, s->grads, s->m, s->v, 0, n, &b->table, &b->o, 0);
    }, 20);
    report_bandwidth("adamw_update, master weights (28 B/param)", ms, 28.0 * n);
    ms = time_ms([&] {
        adamw_update(s->params, NULL, s->grads, s->m, s->v, 0, n, &b->table, &b->o, 0);
    }, 20);
    report_bandwidth("adamw_update, bf16 params only (22 B/param)", ms, 22.0 * n);
}

int main(void) {
    workbench_init("adamw");
    Bench b;
    bench_init(&b);
    float *rm = (float *)mallocCheck(b.n * sizeof(float));  // case 1's reference m, which case 4 checks again
    void *a[4];                                               // case 1's state bytes, for cases 2 and 3
    check_master_weights(&b, rm);
    check_determinism(&b, a);
    check_shards(&b, a);
    check_without_master(&b, rm);
    check_casts(&b);
    if (!WB_SIM) { time_updates(&b); }
    free_bytes(a);
    free(rm);
    bench_free(&b);
    return workbench_finish("adamw");
}
