/*
 * Shared by the model tests test_gpt2.c (CPU) and test_gpt2.cu (GPU): reading the PyTorch
 * fixtures of train_gpt2.py, comparing a tensor against its reference, and training steps and a
 * checkpoint round trip driven through the Backend interface: a micro-step on the fixture's batch,
 * then the training loop's own end of a step (train_step_end of llmc/train_loop.h). Include after
 * the trainer (it needs Backend, Comm and llmc/train_loop.h).
 */
#ifndef DEV_TEST_MODEL_TEST_H
#define DEV_TEST_MODEL_TEST_H

// the command line of both model tests: model.bin debug_state.bin trajectory.txt [nockpt]
typedef struct {
    const char *model, *state, *traj;  // files written by train_gpt2.py
    int checkpoint;                     // run the checkpoint round trip ("nockpt" skips it, for large models)
} ModelTestArgs;

static ModelTestArgs model_test_args(int argc, char **argv) {
    if (argc != 4 && !(argc == 5 && !strcmp(argv[4], "nockpt"))) {
        fprintf(stderr, "usage: %s model.bin debug_state.bin trajectory.txt [nockpt] (files written by train_gpt2.py;\n"
                        "nockpt skips the checkpoint round trip, for large models)\n", argv[0]);
        exit(EXIT_FAILURE);
    }
    ModelTestArgs a = {argv[1], argv[2], argv[3], argc == 4};
    return a;
}

// the test's arguments, and its Comm: one process (comm_init sees only the program's name, so no
// argument of the test is taken for a launcher's)
static ModelTestArgs model_test_start(int argc, char **argv, Comm *comm) {
    ModelTestArgs a = model_test_args(argc, argv);
    int argc1 = 1;
    comm_init(comm, &argc1, &argv);
    return a;
}

// the debug state of train_gpt2.py --debug-state: one batch, its logits, loss and all gradients
typedef struct {
    int B, T;
    int *x, *y;      // (B, T) inputs and targets
    float *logits;   // (B, T, V) fp32, V unpadded
    float loss;
    float *grads;    // (P) the 16 tensors in file order, fp32
} DebugState;

static void debug_state_read(DebugState *ds, const char *path, int V, size_t P) {
    FILE *fp = fopenCheck(path, "rb");
    int h[256];
    freadCheck(h, sizeof(int), 256, fp);
    if (h[0] != 20240327 || h[1] != 2) {
        llmc_die("'%s' is not a version 2 debug state (magic %d version %d); make it with train_gpt2.py --debug-state",
                 path, h[0], h[1]);
    }
    ds->B = h[2];
    ds->T = h[3];
    size_t BT = (size_t)ds->B * ds->T;
    ds->x = (int *)mallocCheck(BT * sizeof(int));
    ds->y = (int *)mallocCheck(BT * sizeof(int));
    ds->logits = (float *)mallocCheck(BT * V * sizeof(float));
    ds->grads = (float *)mallocCheck(P * sizeof(float));
    freadCheck(ds->x, sizeof(int), BT, fp);
    freadCheck(ds->y, sizeof(int), BT, fp);
    freadCheck(ds->logits, sizeof(float), BT * V, fp);
    freadCheck(&ds->loss, sizeof(float), 1, fp);
    freadCheck(ds->grads, sizeof(float), P, fp);
    fcloseCheck(fp);
}

// B and T of a debug state, before the model is built
static void debug_state_shape(const char *path, int *B, int *T) {
    FILE *fp = fopenCheck(path, "rb");
    int h[4];
    freadCheck(h, sizeof(int), 4, fp);
    fcloseCheck(fp);
    *B = h[2];
    *T = h[3];
}

static void debug_state_free(DebugState *ds) {
    free(ds->x); free(ds->y); free(ds->logits); free(ds->grads);
}

// the trajectory of train_gpt2.py --trajectory: hyperparameters and PyTorch's loss and norm per step
typedef struct {
    float lr, wd;
    int steps;
    float *loss, *norm;
} Trajectory;

static void trajectory_read(Trajectory *tr, const char *path) {
    FILE *tf = fopenCheck(path, "r");
    float beta1, beta2, eps, clip;
    if (fscanf(tf, "# lr %f wd %f beta1 %f beta2 %f eps %f clip %f steps %d", &tr->lr, &tr->wd, &beta1, &beta2, &eps,
               &clip, &tr->steps) != 7 || tr->steps <= 0) {
        llmc_die("'%s' is not a trajectory file of train_gpt2.py --trajectory", path);
    }
    if (beta1 != OPT_BETA1 || beta2 != OPT_BETA2 || eps != OPT_EPS || clip != OPT_CLIP_NORM) {
        llmc_die("'%s' was made with beta1 %g beta2 %g eps %g clip %g, the trainers use %g %g %g %g (llmc/optimizer.h); "
                 "remake it with train_gpt2.py --trajectory", path, beta1, beta2, eps, clip, OPT_BETA1, OPT_BETA2,
                 OPT_EPS, OPT_CLIP_NORM);
    }
    tr->loss = (float *)mallocCheck(tr->steps * sizeof(float));
    tr->norm = (float *)mallocCheck(tr->steps * sizeof(float));
    for (int s = 0; s < tr->steps; s++) {
        int idx;
        if (fscanf(tf, "%d %f %f", &idx, &tr->loss[s], &tr->norm[s]) != 3 || idx != s) {
            llmc_die("'%s': bad line for step %d", path, s);
        }
    }
    fclose(tf);
}

static void trajectory_free(Trajectory *tr) { free(tr->loss); free(tr->norm); }

/*
 * ours against ref: every entry within tol_max * max|ref| + tol_each * |ref|. Prints one summary
 * line and the first mismatches; returns 1 on failure.
 */
static int check_tensor(const char *name, const float *ours, const float *ref, size_t n, float tol_max, float tol_each) {
    float maxref = 0.0f, maxdiff = 0.0f;
    for (size_t i = 0; i < n; i++) { if (fabsf(ref[i]) > maxref) { maxref = fabsf(ref[i]); } }
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        float d = fabsf(ours[i] - ref[i]);
        if (d > maxdiff || d != d) { maxdiff = d; }
        if (!(d <= tol_max * maxref + tol_each * fabsf(ref[i]))) {
            if (bad < 5) { printf("    %s[%zu]: ours %.9g ref %.9g\n", name, i, ours[i], ref[i]); }
            bad++;
        }
    }
    printf("  %-9s %s  max|diff|/max|ref| %.2e (tolerance %.1e)  max|ref| %.3e  (%zu values, %d outside)\n", name,
           bad ? "FAIL" : "ok", maxref > 0 ? maxdiff / maxref : maxdiff, tol_max, maxref, n, bad);
    return bad > 0;
}

// the mean loss within tol relative of the reference's: one ok/FAIL line; returns 1 on failure
static int check_loss(float ours, float ref, float tol) {
    float rel = fabsf(ours - ref) / fabsf(ref);
    int bad = !(rel <= tol);
    printf("  %-9s %s  ours %.9g ref %.9g (relative diff %.2e, tolerance %.1e)\n", "loss", bad ? "FAIL" : "ok", ours, ref,
           rel, tol);
    return bad;
}

// every parameter tensor's gradient (grads: all of them, in file order) against the reference's,
// tensor i within tols[i] of its largest reference entry (check_tensor); returns 1 on any failure
static int check_param_grads(const float *grads, const DebugState *ds, const size_t *param_sizes, const float *tols) {
    printf("backward:\n");
    int failed = 0;
    size_t off = 0;
    for (int i = 0; i < NUM_PARAMETER_TENSORS; i++) {
        failed |= check_tensor(gpt2_param_names[i], grads + off, ds->grads + off, param_sizes[i], tols[i], 0.0f);
        off += param_sizes[i];
    }
    return failed;
}

/*
 * The training of a model test: the flags the trajectory was made with (-l, -c; the rest at their
 * defaults, a constant learning rate), one process, and the state a checkpoint carries. Steps go
 * through the training loop's own end of a step, so they run exactly as train_run's.
 */
typedef struct {
    Comm *comm;
    TrainArgs args;
    LRSchedule sched;
    TrainState st;
} TestTrainer;

static void test_trainer_init(TestTrainer *tt, Comm *comm, const DebugState *ds, const Trajectory *tr) {
    memset(tt, 0, sizeof(*tt));
    tt->comm = comm;
    args_defaults(&tt->args);
    tt->args.lr = tr->lr;
    tt->args.weight_decay = tr->wd;
    tt->args.B = ds->B;
    tt->args.T = ds->T;
    tt->args.total_batch = (long long)ds->B * ds->T;
    lr_schedule_init(&tt->sched, "constant", tr->lr, 0, tr->steps, 1.0f, 0.0f);
    tt->st.B = ds->B; tt->st.T = ds->T; tt->st.total_batch = tt->args.total_batch; tt->st.shuffle = 0;
    tt->st.seed = tt->args.seed;
    guard_init(&tt->st.guard, 0, 0, 10);
}

// one optimizer step on the fixture's batch (one micro-step, one rank); returns the loss
static float backend_step(Backend *b, TestTrainer *tt, const DebugState *ds, float *norm_out) {
    b->train_micro_step(b, ds->x, ds->y, ds->B, ds->T, 1.0f / ((float)ds->B * ds->T), 0, 1);
    StepEnd e;
    train_step_end(&e, b, tt->comm, &tt->args, &tt->sched, &tt->st, tt->st.step, 1);
    if (e.skipped) { printf("    step %d skipped by the guards: %s\n", tt->st.step + 1, e.reason); }
    tt->st.step++;
    if (norm_out) { *norm_out = e.norm; }
    return e.loss;
}

// PyTorch's trajectory, step by step, within relative tolerances on the loss and the norm
static int check_trajectory(Backend *b, TestTrainer *tt, const DebugState *ds, const Trajectory *tr, float tol_loss,
                            float tol_norm, float *losses_out, float *norms_out) {
    int failed = 0;
    printf("training (%d AdamW steps, lr %g, weight decay %g, clip %g):\n", tr->steps, tr->lr, tr->wd, OPT_CLIP_NORM);
    for (int s = 0; s < tr->steps; s++) {
        float norm;
        float l = backend_step(b, tt, ds, &norm);
        float dl = fabsf(l - tr->loss[s]) / fabsf(tr->loss[s]), dn = fabsf(norm - tr->norm[s]) / fabsf(tr->norm[s]);
        int bad = !(dl <= tol_loss) || !(dn <= tol_norm);
        printf("  step %d: loss %.7f ref %.7f (rel %.1e) | norm %.6f ref %.6f (rel %.1e) %s\n", s, l, tr->loss[s], dl, norm,
               tr->norm[s], dn, bad ? "FAIL" : "ok");
        failed |= bad;
        if (losses_out) { losses_out[s] = l; }
        if (norms_out) { norms_out[s] = norm; }
    }
    return failed;
}

/*
 * Train 3 steps from the state `b` is in (freshly loaded: step 0), save a checkpoint through
 * llmc/checkpoint.h, train 3 more; resume `fresh` (another model of the same shape) from the
 * checkpoint and train the same 3: losses and final parameters must be bitwise equal.
 */
static int check_checkpoint_roundtrip(Comm *comm, Backend *b, Backend *fresh, const DebugState *ds, const Trajectory *tr) {
    char dir[] = "/tmp/model_test_ckpt_XXXXXX";
    if (mkdtemp(dir) == NULL) { llmc_die("mkdtemp failed"); }
    TestTrainer tt;
    test_trainer_init(&tt, comm, ds, tr);
    for (int s = 0; s < 3; s++) { backend_step(b, &tt, ds, NULL); }
    checkpoint_save(dir, b, comm, &tt.st);
    float cont[3];
    for (int s = 0; s < 3; s++) { cont[s] = backend_step(b, &tt, ds, NULL); }
    uint32_t crc_a = b->params_crc(b);

    TestTrainer t2;
    test_trainer_init(&t2, comm, ds, tr);
    int resumed = checkpoint_resume(dir, fresh, comm, &t2.st);
    int bad = !resumed || t2.st.step != 3 || t2.st.opt_steps != 3;
    for (int s = 0; s < 3; s++) {
        float l = backend_step(fresh, &t2, ds, NULL);
        if (memcmp(&l, &cont[s], sizeof(float)) != 0) {
            printf("    resumed step %d: loss %.9g, uninterrupted %.9g\n", 4 + s, l, cont[s]);
            bad = 1;
        }
    }
    if (fresh->params_crc(fresh) != crc_a) {
        printf("    parameters after the resumed steps differ from the uninterrupted run\n");
        bad = 1;
    }
    printf("checkpoint: save at step 3, resume, 3 more steps: %s\n", bad ? "FAIL (not bitwise equal)" : "ok (bitwise equal)");
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    if (system(cmd) != 0) { llmc_warn("could not remove %s", dir); }
    return bad;
}

#endif  // DEV_TEST_MODEL_TEST_H
