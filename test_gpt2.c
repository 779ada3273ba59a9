/*
 * Model-level test of the CPU trainer against the PyTorch reference (train_gpt2.py).
 *
 *   ./test_gpt2 model.bin debug_state.bin trajectory.txt [nockpt]
 *
 * 1. forward: logits and loss of the debug batch against PyTorch's;
 * 2. backward: all 16 parameter gradients against PyTorch's;
 * 3. training: N AdamW steps (the hyperparameters in the trajectory file's first line) against
 *    PyTorch's loss and gradient norm at every step;
 * 4. checkpoint: train, save (model + state files through llmc/checkpoint.h), keep training;
 *    then load the checkpoint into a fresh model and train the same steps: losses and final
 *    parameters must be bitwise equal.
 * Exits 1 on any mismatch, printing the first few differences.
 *
 * Tolerances (fp32 on both sides; the two differ only in summation order and in library
 * implementations of exp/tanh/log):
 * - logits: |ours - ref| <= 1e-5 * max|ref| + 1e-5 * |ref|: products of length C summed in a
 *   different order give errors of a few ulps of the largest terms.
 * - loss: 1e-5 relative (the bound for fp32).
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

#define GRAD_TOL 2e-4f

static int check_tensor(const char *name, const float *ours, const float *ref, size_t n, float tol_rel_max,
                        float tol_rel_each) {
    float maxref = 0.0f, maxdiff = 0.0f;
    for (size_t i = 0; i < n; i++) { if (fabsf(ref[i]) > maxref) { maxref = fabsf(ref[i]); } }
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        float d = fabsf(ours[i] - ref[i]);
        if (d > maxdiff) { maxdiff = d; }
        if (!(d <= tol_rel_max * maxref + tol_rel_each * fabsf(ref[i]))) {
            if (bad < 5) { printf("    %s[%zu]: ours %.9g ref %.9g\n", name, i, ours[i], ref[i]); }
            bad++;
        }
    }
    printf("  %-9s %s  max|diff| %.3e  max|ref| %.3e  (%zu values, %d outside tolerance)\n", name, bad ? "FAIL" : "ok",
           maxdiff, maxref, n, bad);
    return bad > 0;
}

// one full optimizer step on a fixed batch, the way the training loop does it
static float train_step(GPT2 *m, const int *x, const int *y, int B, int T, float lr, float wd, int t, float *norm_out) {
    memset(m->grads_memory, 0, m->num_params * sizeof(float));
    float loss = gpt2_forward(m, x, y, B, T);
    gpt2_backward(m, 1.0f / (B * T), B, T);
    float norm = gpt2_grad_norm(m);
    float clip = 1.0f / (norm + 1e-6f);
    gpt2_update(m, lr, 0.9f, 0.95f, 1e-8f, wd, clip < 1.0f ? clip : 1.0f, t);
    if (norm_out) { *norm_out = norm; }
    return loss;
}

int main(int argc, char **argv) {
    if (argc != 4 && !(argc == 5 && !strcmp(argv[4], "nockpt"))) {
        fprintf(stderr, "usage: %s model.bin debug_state.bin trajectory.txt [nockpt] (files written by train_gpt2.py;\n"
                        "nockpt skips the checkpoint round trip, for large models)\n", argv[0]);
        return 1;
    }
    int do_checkpoint = argc == 4;
    const char *model_path = argv[1], *state_path = argv[2], *traj_path = argv[3];
    int failed = 0;

    // ---- the reference debug state
    FILE *fp = fopenCheck(state_path, "rb");
    int h[256];
    freadCheck(h, sizeof(int), 256, fp);
    if (h[0] != 20240327 || h[1] != 2) {
        llmc_die("'%s' is not a version 2 debug state (magic %d version %d); make it with train_gpt2.py --debug-state",
                 state_path, h[0], h[1]);
    }
    int B = h[2], T = h[3];
    ModelFileInfo info;
    model_file_info(model_path, &info);
    GPT2 model;
    gpt2_build(&model, &info.config, B, T);
    gpt2_load(&model, model_path);
    int V = model.config.vocab_size, Vp = model.config.padded_vocab_size;
    size_t P = model.num_params;
    printf("test_gpt2 (%s): %s, B=%d T=%d, L=%d C=%d NH=%d, %zu parameters\n",
#ifdef USE_BLAS
           "OpenBLAS",
#else
           "built-in matmul",
#endif
           model_path, B, T, model.config.num_layers, model.config.channels, model.config.num_heads, P);
    int *x = (int *)mallocCheck((size_t)B * T * sizeof(int));
    int *y = (int *)mallocCheck((size_t)B * T * sizeof(int));
    float *ref_logits = (float *)mallocCheck((size_t)B * T * V * sizeof(float));
    float ref_loss;
    float *ref_grads = (float *)mallocCheck(P * sizeof(float));
    freadCheck(x, sizeof(int), (size_t)B * T, fp);
    freadCheck(y, sizeof(int), (size_t)B * T, fp);
    freadCheck(ref_logits, sizeof(float), (size_t)B * T * V, fp);
    freadCheck(&ref_loss, sizeof(float), 1, fp);
    freadCheck(ref_grads, sizeof(float), P, fp);
    fcloseCheck(fp);

    // ---- 1. forward
    float *raw = (float *)mallocCheck((size_t)B * T * Vp * sizeof(float));
    model.logits_out = raw;
    memset(model.grads_memory, 0, P * sizeof(float));
    float loss = gpt2_forward(&model, x, y, B, T);
    model.logits_out = NULL;
    float *logits = (float *)mallocCheck((size_t)B * T * V * sizeof(float));
    for (int bt = 0; bt < B * T; bt++) { memcpy(logits + (size_t)bt * V, raw + (size_t)bt * Vp, V * sizeof(float)); }
    printf("forward:\n");
    failed |= check_tensor("logits", logits, ref_logits, (size_t)B * T * V, 1e-5f, 1e-5f);
    float loss_rel = fabsf(loss - ref_loss) / fabsf(ref_loss);
    int loss_bad = !(loss_rel <= 1e-5f);
    printf("  %-9s %s  ours %.9g ref %.9g (relative diff %.2e, tolerance 1e-5)\n", "loss", loss_bad ? "FAIL" : "ok", loss,
           ref_loss, loss_rel);
    failed |= loss_bad;

    // ---- 2. backward
    gpt2_backward(&model, 1.0f / (B * T), B, T);
    printf("backward:\n");
    size_t off = 0;
    for (int i = 0; i < NUM_PARAMETER_TENSORS; i++) {
        failed |= check_tensor(gpt2_param_names[i], model.grads_memory + off, ref_grads + off, model.param_sizes[i], GRAD_TOL, 0.0f);
        off += model.param_sizes[i];
    }

    // ---- 3. the AdamW trajectory
    FILE *tf = fopenCheck(traj_path, "r");
    float lr, wd;
    int steps;
    if (fscanf(tf, "# lr %f wd %f beta1 0.9 beta2 0.95 eps 1e-8 clip 1.0 steps %d", &lr, &wd, &steps) != 3 || steps <= 0) {
        llmc_die("'%s' is not a trajectory file of train_gpt2.py --trajectory", traj_path);
    }
    gpt2_load(&model, model_path);
    memset(model.m_memory, 0, P * sizeof(float));
    memset(model.v_memory, 0, P * sizeof(float));
    printf("training (%d AdamW steps, lr %g, weight decay %g, clip 1.0):\n", steps, lr, wd);
    for (int s = 0; s < steps; s++) {
        int idx;
        float ref_l, ref_n, norm;
        if (fscanf(tf, "%d %f %f", &idx, &ref_l, &ref_n) != 3 || idx != s) { llmc_die("'%s': bad line for step %d", traj_path, s); }
        float l = train_step(&model, x, y, B, T, lr, wd, s + 1, &norm);
        float dl = fabsf(l - ref_l) / fabsf(ref_l), dn = fabsf(norm - ref_n) / fabsf(ref_n);
        int bad = !(dl <= 1e-5f) || !(dn <= 1e-5f);
        printf("  step %d: loss %.7f ref %.7f (rel %.1e) | norm %.6f ref %.6f (rel %.1e) %s\n", s, l, ref_l, dl, norm, ref_n, dn,
               bad ? "FAIL" : "ok");
        failed |= bad;
    }
    fclose(tf);

    // ---- 4. checkpoint save -> load -> continue, bitwise
    if (do_checkpoint) {
        char dir[] = "/tmp/test_gpt2_ckpt_XXXXXX";
        if (mkdtemp(dir) == NULL) { llmc_die("mkdtemp failed"); }
        Comm comm;
        int argc1 = 1;
        char **argv1 = argv;
        comm_init(&comm, &argc1, &argv1);
        Backend bk;
        model.comm = &comm;
        gpt2_make_backend(&bk, &model, T);
        TrainState st;
        memset(&st, 0, sizeof(st));
        st.B = B; st.T = T; st.total_batch = (long long)B * T; st.shuffle = 0; st.seed = 7;
        guard_init(&st.guard, 0, 0, 10);
        gpt2_load(&model, model_path);
        memset(model.m_memory, 0, P * sizeof(float));
        memset(model.v_memory, 0, P * sizeof(float));
        int t = 0;
        for (int s = 0; s < 3; s++) { train_step(&model, x, y, B, T, lr, wd, ++t, NULL); }
        st.step = 3;
        st.opt_steps = t;
        checkpoint_save(dir, &bk, &comm, &st, 0);
        float cont[3];
        for (int s = 0; s < 3; s++) { cont[s] = train_step(&model, x, y, B, T, lr, wd, ++t, NULL); }
        float *params_a = (float *)mallocCheck(P * sizeof(float));
        memcpy(params_a, model.params_memory, P * sizeof(float));

        GPT2 fresh;
        gpt2_build(&fresh, &info.config, B, T);
        fresh.comm = &comm;
        Backend bf;
        gpt2_make_backend(&bf, &fresh, T);
        TrainState st2 = st;
        st2.step = 0;
        int resumed = checkpoint_resume(dir, &bf, &comm, &st2);
        int bad = !resumed || st2.step != 3 || st2.opt_steps != 3;
        int t2 = st2.opt_steps;
        for (int s = 0; s < 3; s++) {
            float l = train_step(&fresh, x, y, B, T, lr, wd, ++t2, NULL);
            if (memcmp(&l, &cont[s], sizeof(float)) != 0) {
                printf("    resumed step %d: loss %.9g, uninterrupted %.9g\n", 4 + s, l, cont[s]);
                bad = 1;
            }
        }
        if (memcmp(params_a, fresh.params_memory, P * sizeof(float)) != 0) {
            printf("    parameters after the resumed steps differ from the uninterrupted run\n");
            bad = 1;
        }
        printf("checkpoint: save at step 3, resume, 3 more steps: %s\n", bad ? "FAIL (not bitwise equal)" : "ok (bitwise equal)");
        failed |= bad;
        char cmd[256];
        snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
        if (system(cmd) != 0) { llmc_warn("could not remove %s", dir); }
        free(params_a);
        gpt2_free(&fresh);
    }

    free(x); free(y); free(ref_logits); free(ref_grads); free(raw); free(logits);
    gpt2_free(&model);
    printf(failed ? "test_gpt2: FAILED\n" : "test_gpt2: all checks passed\n");
    return failed ? 1 : 0;
}
