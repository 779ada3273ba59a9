/*
 * Model-level test of the CUDA trainer against the PyTorch reference (train_gpt2.py), the GPU
 * counterpart of test_gpt2.c:
 *
 *   ./test_gpt2cu model.bin debug_state.bin trajectory.txt [nockpt]
 *
 * 1. forward: logits and loss of the debug batch against PyTorch's (fp32);
 * 2. backward: all 16 parameter gradients against PyTorch's;
 * 3. training: the trajectory's AdamW steps (through the Backend, as the training loop calls it):
 *    loss within 1% relative at every step, and the gradient norm;
 * 4. determinism: the same steps again from a fresh load give bitwise-identical losses, norms and
 *    parameters;
 * 5. checkpoint: train 3 steps, save (model + state files through llmc/checkpoint.h), train 3 more;
 *    load the checkpoint into a second model and train the same 3: losses and parameters bitwise
 *    equal ("nockpt" skips this, for large models).
 * Exits 1 on any mismatch, printing the first few differences. Needs head size 64 or 128 fixtures
 * (the fused attention), e.g. --model L2:C128:H2:T128 and d12.
 *
 * Tolerances. The reference is fp32; here parameters and activations are bf16 (8 significant
 * bits: one rounding moves a value by up to 2^-9 = 0.2% of itself), accumulation fp32. The model
 * file's fp32 weights are rounded to bf16 first, and every stored activation and gradient is
 * rounded again, about 10 times per layer. A tensor's error is measured against its largest
 * entries (as test_gpt2.c does; entries near zero carry relative errors that mean nothing):
 * max|ours - ref| <= tol * max|ref| per tensor. Two measurements set the scale:
 *   - this test on the CPU simulation of these kernels (dev/test/test_cuda_sim.sh: the same bf16
 *     rounding points; matmuls summed in double where the GPU uses fp32), on the L2:C128:H2 fixture
 *     (tiny64, B=4 T=64): logits 5.3e-3, gradients 3.3e-3 (lnfb) to 1.03e-2 (wte), loss 5e-6, the
 *     trajectory's loss 1.3e-4 and gradient norm 8.2e-3 (the runs drift apart over 10 steps);
 *   - the PyTorch model cast to bf16 against fp32 (dev/test/bf16_error_estimate.py), which rounds
 *     at every operation, also inside LayerNorm, GELU and softmax: on tiny64 it is 0.9-1.5x the
 *     simulation's value for the matmul parameters and the embeddings, 2x for the logits, 3-9x for
 *     the LayerNorm parameters; on d12 (the deeper fixture, B=4 T=64) it gives logits 1.3e-2, matmul weights and
 *     biases 1.2-1.7e-2, wte/wpe 1.4-1.6e-2, LayerNorm parameters 2.2-3.3e-2, norm 6e-4.
 * The tolerances below are about 3x the d12 estimate where that is realistic for our kernels
 * (matmul weights, embeddings), and 1.5-2x the pessimistic bf16-LayerNorm estimate for the LayerNorm
 * parameters (whose statistics our kernels keep in fp32). A real defect (a wrong stride or buffer,
 * a missing or doubled contribution) produces errors of tens of percent, far above them.
 */
#define TESTING
#include "train_gpt2.cu"

// ---- tolerances, relative to each tensor's largest reference entry (reasons above)

// logits: lnf (bf16) dotted with bf16 wte rows; measured 5.3e-3 (tiny64), estimated 1.3e-2 (d12)
#define TOL_LOGITS 3e-2f
// loss: a mean over B*T tokens of log-softmax; the per-token errors average out: measured 5e-6,
// estimated 2e-5 (d12)
#define TOL_LOSS 2e-3f
// gradients, per tensor in file order: a sum over B*T positions of products through the backward
// pass, stored as bf16
static const float grad_tol[NUM_PARAMETER_TENSORS] = {
    5e-2f,  // wte: the LM head's dlogits^T lnf plus the embedding gradient; 1.0e-2 / 1.4e-2 (d12)
    5e-2f,  // wpe: the residual-stream gradient after all layers; 6.8e-3 / 1.6e-2
    6e-2f,  // ln1w: sums of dout * xhat over B*T rows; 6.8e-3 / 3.3e-2 (bf16-LayerNorm estimate)
    6e-2f,  // ln1b: 5.1e-3 / 2.6e-2
    5e-2f,  // qkvw: through the attention backward (bf16 P and dS); 9.2e-3 / 1.7e-2
    5e-2f,  // qkvb: 7.2e-3 / 1.4e-2
    5e-2f,  // attprojw: 6.8e-3 / 1.2e-2
    5e-2f,  // attprojb: 6.9e-3 / 1.2e-2
    6e-2f,  // ln2w: 8.0e-3 / 2.2e-2
    6e-2f,  // ln2b: 5.2e-3 / 2.9e-2
    5e-2f,  // fcw: through the fused GELU derivative; 5.9e-3 / 1.5e-2
    5e-2f,  // fcb: 6.1e-3 / 1.6e-2
    5e-2f,  // fcprojw: 6.8e-3 / 1.5e-2
    5e-2f,  // fcprojb: 6.5e-3 / 1.3e-2
    6e-2f,  // lnfw: one LayerNorm away from dlogits; 6.7e-3 / 3.1e-2
    6e-2f,  // lnfb: 3.3e-3 / 3.0e-2
};
// trajectory: the issue's 1% on every step's loss (measured 1.3e-4); the gradient norm, whose
// runs drift apart with the parameters: measured up to 8.2e-3 by step 10 on tiny64
#define TOL_TRAJ_LOSS 1e-2f
#define TOL_TRAJ_NORM 3e-2f

static int check_tensor(const char *name, const float *ours, const float *ref, size_t n, float tol) {
    float maxref = 0.0f, maxdiff = 0.0f;
    for (size_t i = 0; i < n; i++) { if (fabsf(ref[i]) > maxref) { maxref = fabsf(ref[i]); } }
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        float d = fabsf(ours[i] - ref[i]);
        if (d > maxdiff || d != d) { maxdiff = d; }
        if (!(d <= tol * maxref)) {
            if (bad < 5) { printf("    %s[%zu]: ours %.9g ref %.9g\n", name, i, ours[i], ref[i]); }
            bad++;
        }
    }
    printf("  %-9s %s  max|diff|/max|ref| %.2e (tolerance %.1e)  max|ref| %.3e  (%zu values, %d outside)\n", name,
           bad ? "FAIL" : "ok", maxref > 0 ? maxdiff / maxref : maxdiff, tol, maxref, n, bad);
    return bad > 0;
}

// device bf16 -> host fp32
static void download_bf16(GPT2 *m, float *out, const floatX *src, size_t n) {
    uint16_t *bf = (uint16_t *)mallocCheck(n * sizeof(uint16_t));
    cudaCheck(cudaMemcpyAsync(bf, src, n * sizeof(uint16_t), cudaMemcpyDeviceToHost, m->stream));
    gpt2_sync(m, "a test download");
    for (size_t i = 0; i < n; i++) { out[i] = bf16_to_float(bf[i]); }
    free(bf);
}

#define TEST_SEED 1337ULL

// one optimizer step on a fixed batch, the way the training loop calls the Backend
static float train_step(Backend *b, const int *x, const int *y, int B, int T, float lr, float wd, int t, float *norm_out) {
    b->train_micro_step(b, x, y, B, T, 1.0f / ((float)B * T), 0, 1);
    float loss = (float)b->step_loss_sum(b);
    float norm = b->reduce_grads(b);
    float clip = 1.0f / (norm + 1e-6f);
    b->update(b, lr, 0.9f, 0.95f, 1e-8f, wd, clip < 1.0f ? clip : 1.0f, t, TEST_SEED * 6364136223846793005ULL + (unsigned long long)t);
    if (norm_out) { *norm_out = norm; }
    return loss;
}

// a fresh model state: parameters from the file, AdamW state zero
static void reset_model(GPT2 *m, const char *path) {
    gpt2_load(m, path);
    cudaCheck(cudaMemsetAsync(m->m_memory, 0, m->red.count * sizeof(float), m->stream));
    cudaCheck(cudaMemsetAsync(m->v_memory, 0, m->red.count * sizeof(float), m->stream));
    gpt2_sync(m, "a test reset");
}

static uint16_t *params_snapshot(GPT2 *m) { return gpt2_params_to_host(m); }

int main(int argc, char **argv) {
    if (argc != 4 && !(argc == 5 && !strcmp(argv[4], "nockpt"))) {
        fprintf(stderr, "usage: %s model.bin debug_state.bin trajectory.txt [nockpt] (files written by train_gpt2.py;\n"
                        "nockpt skips the checkpoint round trip)\n", argv[0]);
        return 1;
    }
    int do_checkpoint = argc == 4;
    const char *model_path = argv[1], *state_path = argv[2], *traj_path = argv[3];
    int failed = 0;

    Comm comm;
    int argc1 = 1;
    char **argv1 = argv;
    comm_init(&comm, &argc1, &argv1);
    const int device = gpu_select_device(&comm, (const void *)cast_fp32_to_bf16_kernel, LLMC_CUDA_ARCHS);
    cublas_init();

    // ---- the reference debug state
    FILE *fp = fopenCheck(state_path, "rb");
    int h[256];
    freadCheck(h, sizeof(int), 256, fp);
    if (h[0] != 20240327 || h[1] != 2) {
        llmc_die("'%s' is not a version 2 debug state (magic %d version %d); make it with train_gpt2.py --debug-state",
                 state_path, h[0], h[1]);
    }
    const int B = h[2], T = h[3];
    ModelFileInfo info;
    model_file_info(model_path, &info);
    GradReducer plan;
    grad_reduce_plan(&plan, GRAD_REDUCE_NONE, &comm, 0, &info.config);
    GPT2 model;
    gpt2_build(&model, &info.config, B, T, 1, 1, &plan, NULL);
    gpt2_load(&model, model_path);
    Backend bk;
    gpt2_make_backend(&bk, &model, T, gpu_peak_flops(device));
    const int V = model.config.vocab_size, Vp = model.config.padded_vocab_size;
    const size_t P = model.num_params, BT = (size_t)B * T;
    cudaDeviceProp prop;
    cudaCheck(cudaGetDeviceProperties(&prop, device));
    printf("test_gpt2cu on %s: %s, B=%d T=%d, L=%d C=%d NH=%d, %zu parameters\n", prop.name, model_path, B, T,
           model.config.num_layers, model.config.channels, model.config.num_heads, P);
    int *x = (int *)mallocCheck(BT * sizeof(int));
    int *y = (int *)mallocCheck(BT * sizeof(int));
    float *ref_logits = (float *)mallocCheck(BT * V * sizeof(float));
    float ref_loss;
    float *ref_grads = (float *)mallocCheck(P * sizeof(float));
    freadCheck(x, sizeof(int), BT, fp);
    freadCheck(y, sizeof(int), BT, fp);
    freadCheck(ref_logits, sizeof(float), BT * V, fp);
    freadCheck(&ref_loss, sizeof(float), 1, fp);
    freadCheck(ref_grads, sizeof(float), P, fp);
    fcloseCheck(fp);

    // ---- 1. forward (evaluation mode keeps the logits)
    gpt2_forward(&model, x, y, B, T, FWD_EVAL, 1.0f);
    float *raw = (float *)mallocCheck(BT * Vp * sizeof(float));
    download_bf16(&model, raw, model.acts.logits, BT * Vp);
    float *logits = (float *)mallocCheck(BT * V * sizeof(float));
    for (size_t bt = 0; bt < BT; bt++) { memcpy(logits + bt * V, raw + bt * Vp, V * sizeof(float)); }
    float *losses = (float *)mallocCheck(BT * sizeof(float));
    bk.forward_losses(&bk, x, y, B, T, losses);
    double loss_sum = 0.0;
    for (size_t i = 0; i < BT; i++) { loss_sum += losses[i]; }
    const float loss = (float)(loss_sum / BT);
    printf("forward:\n");
    failed |= check_tensor("logits", logits, ref_logits, BT * V, TOL_LOGITS);
    float loss_rel = fabsf(loss - ref_loss) / fabsf(ref_loss);
    int loss_bad = !(loss_rel <= TOL_LOSS);
    printf("  %-9s %s  ours %.9g ref %.9g (relative diff %.2e, tolerance %.1e)\n", "loss", loss_bad ? "FAIL" : "ok", loss,
           ref_loss, loss_rel, TOL_LOSS);
    failed |= loss_bad;

    // ---- 2. backward: one micro-step with dloss = 1/(B*T), the mean loss's gradient
    bk.train_micro_step(&bk, x, y, B, T, 1.0f / (float)BT, 0, 1);
    float *grads = (float *)mallocCheck(P * sizeof(float));
    download_bf16(&model, grads, model.grads_memory, P);
    printf("backward:\n");
    size_t off = 0;
    for (int i = 0; i < NUM_PARAMETER_TENSORS; i++) {
        failed |= check_tensor(gpt2_param_names[i], grads + off, ref_grads + off, model.param_sizes[i], grad_tol[i]);
        off += model.param_sizes[i];
    }

    // ---- 3. the AdamW trajectory
    FILE *tf = fopenCheck(traj_path, "r");
    float lr, wd;
    int steps;
    if (fscanf(tf, "# lr %f wd %f beta1 0.9 beta2 0.95 eps 1e-8 clip 1.0 steps %d", &lr, &wd, &steps) != 3 || steps <= 0) {
        llmc_die("'%s' is not a trajectory file of train_gpt2.py --trajectory", traj_path);
    }
    float *traj_loss = (float *)mallocCheck(steps * sizeof(float)), *traj_norm = (float *)mallocCheck(steps * sizeof(float));
    reset_model(&model, model_path);
    printf("training (%d AdamW steps, lr %g, weight decay %g, clip 1.0):\n", steps, lr, wd);
    for (int s = 0; s < steps; s++) {
        int idx;
        float ref_l, ref_n;
        if (fscanf(tf, "%d %f %f", &idx, &ref_l, &ref_n) != 3 || idx != s) { llmc_die("'%s': bad line for step %d", traj_path, s); }
        traj_loss[s] = train_step(&bk, x, y, B, T, lr, wd, s + 1, &traj_norm[s]);
        float dl = fabsf(traj_loss[s] - ref_l) / fabsf(ref_l), dn = fabsf(traj_norm[s] - ref_n) / fabsf(ref_n);
        int bad = !(dl <= TOL_TRAJ_LOSS) || !(dn <= TOL_TRAJ_NORM);
        printf("  step %d: loss %.6f ref %.6f (rel %.1e) | norm %.5f ref %.5f (rel %.1e) %s\n", s, traj_loss[s], ref_l, dl,
               traj_norm[s], ref_n, dn, bad ? "FAIL" : "ok");
        failed |= bad;
    }
    fclose(tf);
    uint16_t *params_run1 = params_snapshot(&model);

    // ---- 4. determinism: the same steps again
    reset_model(&model, model_path);
    int nondet = 0;
    for (int s = 0; s < steps; s++) {
        float norm;
        float l = train_step(&bk, x, y, B, T, lr, wd, s + 1, &norm);
        if (memcmp(&l, &traj_loss[s], sizeof(float)) != 0 || memcmp(&norm, &traj_norm[s], sizeof(float)) != 0) {
            if (nondet < 5) {
                printf("    rerun step %d: loss %.9g norm %.9g, first run %.9g %.9g\n", s, l, norm, traj_loss[s], traj_norm[s]);
            }
            nondet++;
        }
    }
    uint16_t *params_run2 = params_snapshot(&model);
    if (memcmp(params_run1, params_run2, P * sizeof(uint16_t)) != 0) {
        printf("    parameters after the rerun differ from the first run\n");
        nondet++;
    }
    printf("determinism: %d steps twice: %s\n", steps, nondet ? "FAIL (not bitwise identical)" : "ok (bitwise identical)");
    failed |= nondet > 0;
    free(params_run1);
    free(params_run2);

    // ---- 5. checkpoint save -> load -> continue, bitwise
    if (do_checkpoint) {
        char dir[] = "/tmp/test_gpt2cu_ckpt_XXXXXX";
        if (mkdtemp(dir) == NULL) { llmc_die("mkdtemp failed"); }
        TrainState st;
        memset(&st, 0, sizeof(st));
        st.B = B; st.T = T; st.total_batch = (long long)BT; st.shuffle = 0; st.seed = 7;
        guard_init(&st.guard, 0, 0, 10);
        reset_model(&model, model_path);
        int t = 0;
        for (int s = 0; s < 3; s++) { train_step(&bk, x, y, B, T, lr, wd, ++t, NULL); }
        st.step = 3;
        st.opt_steps = t;
        checkpoint_save(dir, &bk, &comm, &st, 0);
        float cont[3];
        for (int s = 0; s < 3; s++) { cont[s] = train_step(&bk, x, y, B, T, lr, wd, ++t, NULL); }
        uint16_t *params_a = params_snapshot(&model);

        GPT2 fresh;
        gpt2_build(&fresh, &info.config, B, T, 1, 1, &plan, NULL);
        Backend bf;
        gpt2_make_backend(&bf, &fresh, T, 0.0);
        TrainState st2 = st;
        st2.step = 0;
        int resumed = checkpoint_resume(dir, &bf, &comm, &st2);
        int bad = !resumed || st2.step != 3 || st2.opt_steps != 3;
        int t2 = st2.opt_steps;
        for (int s = 0; s < 3; s++) {
            float l = train_step(&bf, x, y, B, T, lr, wd, ++t2, NULL);
            if (memcmp(&l, &cont[s], sizeof(float)) != 0) {
                printf("    resumed step %d: loss %.9g, uninterrupted %.9g\n", 4 + s, l, cont[s]);
                bad = 1;
            }
        }
        uint16_t *params_b = params_snapshot(&fresh);
        if (memcmp(params_a, params_b, P * sizeof(uint16_t)) != 0) {
            printf("    parameters after the resumed steps differ from the uninterrupted run\n");
            bad = 1;
        }
        printf("checkpoint: save at step 3, resume, 3 more steps: %s\n", bad ? "FAIL (not bitwise equal)" : "ok (bitwise equal)");
        failed |= bad;
        char cmd[256];
        snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
        if (system(cmd) != 0) { llmc_warn("could not remove %s", dir); }
        free(params_a);
        free(params_b);
        gpt2_free(&fresh);
    }

    free(x); free(y); free(ref_logits); free(ref_grads); free(raw); free(logits); free(losses); free(grads);
    free(traj_loss); free(traj_norm);
    gpt2_free(&model);
    cublas_free();
    printf(failed ? "test_gpt2cu: FAILED\n" : "test_gpt2cu: all checks passed\n");
    return failed ? 1 : 0;
}
