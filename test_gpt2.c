/*
 * Model-level test of the CPU trainer against the PyTorch reference (train_gpt2.py).
 *
 *   ./test_gpt2 model.bin debug_state.bin trajectory.txt [nockpt]
 *
 * 1. forward: logits and loss of the debug batch against PyTorch's;
 * 2. backward: all 16 parameter gradients against PyTorch's;
 * 3. training: N AdamW steps (the hyperparameters in the trajectory file's first line) against
 *    PyTorch's loss and gradient norm at every step, each step ended by the training loop's own
 *    train_step_end;
 * 4. checkpoint: train, save (model + state files through llmc/checkpoint.h), keep training;
 *    then load the checkpoint into a fresh model and train the same steps: losses and final
 *    parameters must be bitwise equal.
 * 5. threads: the forward and backward give the same loss and gradients, bit for bit, on one
 *    OpenMP thread as on all the model was built for (every sum has an order fixed by the shapes;
 *    where the built-in matmul runs: OpenBLAS makes no such promise).
 * 6. attention: at T = 1000 with one sequence of 2 and of 32 heads, where the backward splits each head's
 *    query blocks into groups, the output and dq, dk, dv against a direct computation in double
 *    precision, and one thread against all, bitwise.
 * Exits 1 on any mismatch, printing the first few differences.
 *
 * Tolerances (fp32 on both sides; the two differ only in summation order and in library
 * implementations of exp/tanh/log):
 * - logits: |ours - ref| <= 1e-5 * max|ref| + 1e-5 * |ref|: products of length C summed in a
 *   different order give errors of a few ulps of the largest terms.
 * - loss: 1e-5 relative: the mean over B*T positions of the log-softmax of the logits above, so
 *   it carries their bound (fp32 on both sides, different summation orders).
 * - gradients: max|ours - ref| <= GRAD_TOL * max|ref| per tensor: a gradient is a sum over B*T
 *   positions of products through the whole network, so its error scales with the tensor's
 *   largest entries, not with each entry (entries near zero have large relative errors that mean
 *   nothing). GRAD_TOL = 2e-4 leaves a margin of about 10x over what we measure.
 * - trajectory: loss and gradient norm 1e-5 relative at every step. Adam divides by sqrt(v), so
 *   the tiny gradient differences grow a little over steps; we measure about 1e-7 after 10 steps
 *   (the reference sums the norm in float64 too, as we do).
 */
#define TESTING
#include "train_gpt2.c"
#include "dev/test/model_test.h"

#define GRAD_TOL 2e-4f

// a fresh model state: parameters from the file, AdamW state zero
static void reset_model(GPT2 *m, const char *path) {
    gpt2_load(m, path);
    memset(m->m_memory, 0, m->num_params * sizeof(float));
    memset(m->v_memory, 0, m->num_params * sizeof(float));
}

// 1. forward: the raw logits (before the softmax overwrites them) and the mean loss against the
// reference's
static int check_forward(GPT2 *model, const DebugState *ds, int B, int T) {
    const int V = model->config.vocab_size, Vp = model->config.padded_vocab_size;
    const size_t BT = (size_t)B * T;
    float *raw = (float *)mallocCheck(BT * Vp * sizeof(float));
    memset(model->grads_memory, 0, model->num_params * sizeof(float));
    gpt2_forward_logits(model, ds->x, B, T);
    memcpy(raw, model->acts.logits, BT * Vp * sizeof(float));
    float loss = gpt2_forward(model, ds->x, ds->y, B, T);
    float *logits = (float *)mallocCheck(BT * V * sizeof(float));
    for (size_t bt = 0; bt < BT; bt++) { memcpy(logits + bt * V, raw + bt * Vp, V * sizeof(float)); }
    printf("forward:\n");
    int failed = check_tensor("logits", logits, ds->logits, BT * V, 1e-5f, 1e-5f);
    failed |= check_loss(loss, ds->loss, 1e-5f);
    free(raw); free(logits);
    return failed;
}

// 2. backward of the forward above, with dloss = 1/(B*T): every gradient within GRAD_TOL
static int check_backward(GPT2 *model, const DebugState *ds, int B, int T) {
    gpt2_backward(model, 1.0f / (B * T), B, T);
    float tols[NUM_PARAMETER_TENSORS];
    for (int i = 0; i < NUM_PARAMETER_TENSORS; i++) { tols[i] = GRAD_TOL; }
    return check_param_grads(model->grads_memory, ds, model->param_sizes, tols);
}

// 5. one thread against all of them, bitwise
static int check_threads(GPT2 *model, const DebugState *ds, int B, int T) {
#ifdef _OPENMP
    const int threads = model->att_work.threads;
    if (threads < 2 || !gemm_builtin()) {
        printf("threads: not checked (%s)\n", threads < 2 ? "OpenMP runs 1 thread here" : "OpenBLAS runs the matmuls");
        return 0;
    }
    const size_t bytes = model->num_params * sizeof(float);
    float *one = (float *)mallocCheck(bytes);
    float loss[2];
    for (int run = 0; run < 2; run++) {
        omp_set_num_threads(run == 0 ? 1 : threads);
        memset(model->grads_memory, 0, bytes);
        loss[run] = gpt2_forward(model, ds->x, ds->y, B, T);
        gpt2_backward(model, 1.0f / (B * T), B, T);
        if (run == 0) { memcpy(one, model->grads_memory, bytes); }
    }
    const int same = memcmp(&loss[0], &loss[1], sizeof(float)) == 0 && memcmp(one, model->grads_memory, bytes) == 0;
    printf("threads: forward and backward on 1 and on %d threads: %s\n", threads, same ? "bitwise equal ok" : "they differ FAIL");
    free(one);
    return !same;
#else
    (void)model; (void)ds; (void)B; (void)T;
    printf("threads: not checked (a build without OpenMP)\n");
    return 0;
#endif
}

// 6. the attention alone at T = 1000, one sequence of NH heads: the backward's query blocks split
// into groups whose dk and dv partials are summed afterwards (attention_backward; a model's B x
// heads large enough leaves one group, so the fixtures above may not reach it). Against the same
// attention computed directly in double precision, and one thread against all, bit for bit.
static int check_attention_groups(int NH, int HS) {
    const int T = 1000, C = NH * HS, C3 = 3 * C;
    const size_t TC = (size_t)T * C;
    printf("attention at T=%d, %d heads of %d: %d groups of query blocks in the backward\n", T, NH, HS, attention_groups(1, NH, T));
    float *inp = (float *)mallocCheck(sizeof(float) * T * C3), *dout = (float *)mallocCheck(sizeof(float) * TC);
    float *out = (float *)mallocCheck(sizeof(float) * TC), *stats = (float *)mallocCheck(sizeof(float) * NH * T * 2);
    float *dinp = (float *)mallocCheck(sizeof(float) * T * C3), *dinp1 = (float *)mallocCheck(sizeof(float) * T * C3);
    // the reference's four parts (out, dq, dk, dv), each (T, C), and ours laid out alike
    double *ref = (double *)callocCheck(4 * TC, sizeof(double));
    float *ref_f = (float *)mallocCheck(sizeof(float) * 4 * TC), *ours = (float *)mallocCheck(sizeof(float) * 4 * TC);
    double *p = (double *)mallocCheck(sizeof(double) * T), *dp = (double *)mallocCheck(sizeof(double) * T);
    unsigned long long rng = 42;
    for (int i = 0; i < T * C3; i++) { inp[i] = 2.0f * sample_random_f32(&rng) - 1.0f; }
    for (size_t i = 0; i < TC; i++) { dout[i] = 2.0f * sample_random_f32(&rng) - 1.0f; }
    AttWorkspace ws = attention_workspace_alloc(omp_threads_max(), 1, NH, T, HS);
    attention_forward(out, stats, inp, &ws, 1, T, 0, C, NH);
    attention_backward(dinp, dout, inp, stats, &ws, 1, T, C, NH);
    AttWorkspace one = ws;
    one.threads = 1;
    attention_backward(dinp1, dout, inp, stats, &one, 1, T, C, NH);
    // the reference: softmax(q k^T / sqrt(HS)) over the keys up to each query, and its gradient
    const double scale = 1.0 / sqrt((double)HS);
    double *ref_out = ref, *ref_dq = ref + TC, *ref_dk = ref + 2 * TC, *ref_dv = ref + 3 * TC;
    for (int h = 0; h < NH; h++) {
        for (int t = 0; t < T; t++) {
            const float *q = inp + (size_t)t * C3 + h * HS, *dy = dout + (size_t)t * C + h * HS;
            double maxv = -INFINITY, sum = 0.0, dot = 0.0;
            for (int j = 0; j <= t; j++) {
                const float *k = inp + (size_t)j * C3 + C + h * HS, *v = k + C;
                double s = 0.0, d = 0.0;
                for (int i = 0; i < HS; i++) { s += (double)q[i] * k[i]; d += (double)dy[i] * v[i]; }
                p[j] = s * scale;
                dp[j] = d;
                maxv = fmax(maxv, p[j]);
            }
            for (int j = 0; j <= t; j++) { p[j] = exp(p[j] - maxv); sum += p[j]; }
            for (int j = 0; j <= t; j++) { p[j] /= sum; dot += p[j] * dp[j]; }
            for (int j = 0; j <= t; j++) {
                const float *k = inp + (size_t)j * C3 + C + h * HS, *v = k + C;
                const double ds = p[j] * (dp[j] - dot) * scale;
                const size_t at_t = (size_t)t * C + h * HS, at_j = (size_t)j * C + h * HS;
                for (int i = 0; i < HS; i++) {
                    ref_out[at_t + i] += p[j] * v[i];
                    ref_dq[at_t + i] += ds * k[i];
                    ref_dk[at_j + i] += ds * q[i];
                    ref_dv[at_j + i] += p[j] * dy[i];
                }
            }
        }
    }
    for (size_t i = 0; i < 4 * TC; i++) { ref_f[i] = (float)ref[i]; }
    memcpy(ours, out, sizeof(float) * TC);
    for (int part = 0; part < 3; part++) {  // dq, dk, dv out of dinp's (T, 3C)
        for (int t = 0; t < T; t++) { memcpy(ours + (part + 1) * TC + (size_t)t * C, dinp + (size_t)t * C3 + part * C, sizeof(float) * C); }
    }
    int failed = 0;
    const char *names[4] = {"att out", "att dq", "att dk", "att dv"};
    for (int part = 0; part < 4; part++) { failed |= check_tensor(names[part], ours + part * TC, ref_f + part * TC, TC, 1e-5f, 0.0f); }
    const int same = memcmp(dinp, dinp1, sizeof(float) * T * C3) == 0;
    printf("  the backward on 1 and on %d threads: %s\n", ws.threads, same ? "bitwise equal ok" : "they differ FAIL");
    failed |= !same;
    free(inp); free(dout); free(out); free(stats); free(dinp); free(dinp1); free(ref); free(ref_f); free(ours); free(p); free(dp);
    attention_workspace_free(&ws);
    return failed;
}

int main(int argc, char **argv) {
    Comm comm;
    ModelTestArgs args = model_test_start(argc, argv, &comm);
    const char *model_path = args.model, *state_path = args.state, *traj_path = args.traj;
    int failed = 0;

    int B, T;
    debug_state_shape(state_path, &B, &T);
    ModelFileInfo info;
    model_file_info(model_path, &info);
    GPT2 model;
    gpt2_build(&model, &info.config, B, T, NULL);
    model.comm = &comm;
    gpt2_load(&model, model_path);
    Backend bk;
    gpt2_make_backend(&bk, &model, T);
    DebugState ds;
    debug_state_read(&ds, state_path, model.config.vocab_size, model.num_params);
    char kernel[96];
    gemm_kernel_name(kernel, sizeof(kernel));
    printf("test_gpt2 (%s): %s, B=%d T=%d, L=%d C=%d NH=%d, %zu parameters\n", kernel, model_path, B, T, model.config.num_layers, model.config.channels, model.config.num_heads, model.num_params);

    failed |= check_forward(&model, &ds, B, T);
    failed |= check_backward(&model, &ds, B, T);

    // ---- 3. the AdamW trajectory, through the Backend as the training loop runs it
    Trajectory tr;
    trajectory_read(&tr, traj_path);
    reset_model(&model, model_path);
    TestTrainer tt;
    test_trainer_init(&tt, &comm, &ds, &tr);
    failed |= check_trajectory(&bk, &tt, &ds, &tr, 1e-5f, 1e-5f, NULL, NULL);

    // ---- 4. checkpoint save -> load -> continue, bitwise
    if (args.checkpoint) {
        GPT2 fresh;
        gpt2_build(&fresh, &info.config, B, T, NULL);
        fresh.comm = &comm;
        Backend bf;
        gpt2_make_backend(&bf, &fresh, T);
        reset_model(&model, model_path);
        failed |= check_checkpoint_roundtrip(&comm, &bk, &bf, &ds, &tr);
        gpt2_free(&fresh);
    }

    // ---- 5. the thread count changes no bit
    reset_model(&model, model_path);
    failed |= check_threads(&model, &ds, B, T);

    // ---- 6. the attention's backward split into groups of query blocks: 8 groups (one block each
    // past the first, one empty), then 4 (two blocks in one: its partial sums them before dk does)
    failed |= check_attention_groups(2, 16);
    failed |= check_attention_groups(32, 4);

    debug_state_free(&ds);
    trajectory_free(&tr);
    gpt2_free(&model);
    printf(failed ? "test_gpt2: FAILED\n" : "test_gpt2: all checks passed\n");
    return failed ? 1 : 0;
}
