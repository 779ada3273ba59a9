/*
 * The training loop shared by both trainers: data, batch arithmetic, schedule, numeric guards,
 * validation, HellaSwag, sampling, logging, checkpoints, resume and preemption. The model side
 * comes in through a Backend (backend.h).
 *
 * Step numbering: s counts completed optimizer steps. Iteration s evaluates (validation and
 * HellaSwag when s % -v == 0, and at the end), samples (when s > 0 and s % -s == 0, and at the
 * end), then trains step s and prints "step s+1/M". A checkpoint written after it is named s+1.
 */
#ifndef LLMC_TRAIN_LOOP_H
#define LLMC_TRAIN_LOOP_H

#include "args.h"
#include "backend.h"
#include "checkpoint.h"
#include "comm.h"
#include "dataloader.h"
#include "generate.h"
#include "guard.h"
#include "hellaswag.h"
#include "logger.h"
#include "schedule.h"
#include "signals.h"
#include "tokenizer.h"

/*
 * The start of both trainers' main: ranks (comm.h), flags (args.h) and the model configuration
 * that -e names (train_resolve_model below). Returns whether -e is a file.
 */
static inline int train_resolve_model(TrainArgs *a, GPT2Config *config);
static inline int train_start(Comm *c, TrainArgs *a, GPT2Config *config, int *argc, char ***argv) {
    comm_init(c, argc, argv);
    args_parse(a, *argc, *argv);
    return train_resolve_model(a, config);
}

/*
 * The model configuration that -e names (a descriptor or a model file), and whether it is a
 * file. Checks that -t fits the model; in the generate mode (--prompt) the batch is one sequence
 * and the context min(-t, maxT). Dies with a message otherwise.
 */
static inline int train_resolve_model(TrainArgs *a, GPT2Config *config) {
    int from_file = 0;
    if (!gpt2_parse_descriptor(a->model, config)) {
        ModelFileInfo info;
        model_file_info(a->model, &info);
        *config = info.config;
        from_file = 1;
    }
    if (a->prompt[0]) {
        a->B = 1;
        if (a->T > config->max_seq_len) { a->T = config->max_seq_len; }
    }
    if (a->T > config->max_seq_len) {
        llmc_die("-t %d is larger than the model's max_seq_len %d (-e %s); use -t %d or less", a->T,
                 config->max_seq_len, a->model, config->max_seq_len);
    }
    return from_file;
}

static inline void format_duration(char *out, size_t n, double seconds) {
    long s = (long)(seconds + 0.5);
    if (s >= 3600) { snprintf(out, n, "%ldh%02ldm", s / 3600, (s % 3600) / 60); }
    else if (s >= 60) { snprintf(out, n, "%ldm%02lds", s / 60, s % 60); }
    else { snprintf(out, n, "%lds", s); }
}

// HellaSwag's forward: ctx is the Backend
static void train_eval_forward(void *ctx, const int *inputs, const int *targets, int B, int T, float *losses) {
    Backend *b = (Backend *)ctx;
    b->forward_losses(b, inputs, targets, B, T, losses);
}

// mean validation loss over the first -m*B windows of the val data (all with -m -1), any rank count
static inline float train_val_loss(const TrainArgs *a, Comm *c, Backend *b, DataLoader *val, int *inputs,
                                   int *targets, float *losses) {
    int B = a->B, T = a->T;
    long long M = a->val_batches < 0 ? val->total_windows : (long long)a->val_batches * B;
    if (M > val->total_windows) { M = val->total_windows; }
    long long nmb = (M + B - 1) / B;
    double acc[2] = {0.0, 0.0};  // loss sum, token count
    for (long long j = c->rank; j < nmb; j += c->world_size) {
        int count = (int)(M - j * B < B ? M - j * B : B);
        dataloader_read(val, j * B, count, inputs, targets);
        b->forward_losses(b, inputs, targets, count, T, losses);
        for (long long i = 0; i < (long long)count * T; i++) { acc[0] += losses[i]; }
        acc[1] += (double)count * T;
    }
    c->allreduce_sum_f64(c, acc, 2);
    return (float)(acc[0] / acc[1]);
}

/*
 * Run training (or, with --prompt, generate). Returns the process exit code (0: finished or stopped by a signal with a
 * checkpoint written). Errors exit through llmc_die.
 */
static inline int train_run(TrainArgs *a, Comm *c, Backend *b) {
    if (a->prompt[0]) {  // the generate mode: no data, no training
        if (c->world_size > 1) { llmc_die("--prompt generates in one process; run it without mpirun/torchrun"); }
        return generate_run(a, b);
    }
    const int W = c->world_size, rank = c->rank;
    const int A = args_grad_accum(a, W);
    const int B = a->B, T = a->T, V = b->config.vocab_size;
    const long long N = a->total_batch / T;  // windows per optimizer step
    const int have_out = a->output_dir[0] != '\0';
    signals_install();

    // ---- data
    DataLoader train, val;
    dataloader_init(&train, a->train_glob, "-i", T, V, a->shuffle, a->seed);
    dataloader_require(&train, N, "-i", "one optimizer step (d/T windows)");
    int have_val = a->val_every > 0;
    if (have_val) {
        dataloader_init(&val, a->val_glob, "-j", T, V, 0, 0);
        dataloader_require(&val, 1, "-j", "validation");
    }
    long long epoch_steps = train.total_windows / N;
    int M = a->max_steps >= 0 ? a->max_steps : (int)(epoch_steps < INT_MAX ? epoch_steps : INT_MAX);
    EvalSet hs;
    memset(&hs, 0, sizeof(hs));
    if (a->hellaswag_eval) {
        if (a->val_every <= 0) { llmc_die("-h 1 evaluates HellaSwag at every validation; set -v > 0"); }
        evalset_load(&hs, a->hellaswag, V);
    }

    // ---- every rank must run the same thing
    uint64_t h = args_hash(a);
    h = dataloader_hash(&train, h);
    if (have_val) { h = dataloader_hash(&val, h); }
    comm_check_same(c, h, "flags or data files", "start every rank with the same command line and the same data");

    // ---- output dir, resume
    if (have_out && rank == 0) {
        make_dirs(a->output_dir);
        if (a->resume) { checkpoint_clean_tmp(a->output_dir); }
    }
    c->barrier(c);
    TrainState st;
    memset(&st, 0, sizeof(st));
    st.B = B; st.T = T; st.total_batch = a->total_batch; st.shuffle = a->shuffle; st.seed = a->seed;
    st.sample_rng = a->seed ^ 0x5DEECE66DULL;
    if (st.sample_rng == 0) { st.sample_rng = 1; }
    guard_init(&st.guard, a->guard_z_loss, a->guard_z_norm, a->guard_max_skips);
    int resumed = 0;
    if (a->resume) {
        resumed = checkpoint_resume(a->output_dir, b, c, &st);
        if (rank == 0) {
            if (resumed) { printf("resumed from checkpoint %d in %s\n", st.step, a->output_dir); }
            else { printf("no complete checkpoint in %s: starting from scratch\n", a->output_dir); }
        }
        st.guard.z_loss = a->guard_z_loss;
        st.guard.z_norm = a->guard_z_norm;
        st.guard.max_consecutive = a->guard_max_skips;
    }
    uint32_t crc = b->params_crc(b);
    comm_check_same(c, crc, "model parameters", "every rank must start from the same model");
    if (rank == 0 && W > 1) { printf("model parameters identical on all %d ranks (crc %08x)\n", W, crc); }
    if (st.step > M) {
        llmc_die("checkpoint %d in %s is past the end of this run (-x %d); raise -x to continue", st.step, a->output_dir, M);
    }

    Logger lg;
    logger_init(&lg, have_out ? a->output_dir : NULL, rank, resumed);
    Tokenizer tok;
    memset(&tok, 0, sizeof(tok));
    if (rank == 0 && a->sample_every > 0) { tokenizer_init(&tok, a->tokenizer); }
    LRSchedule sched;
    lr_schedule_init(&sched, a->schedule, a->lr, a->warmup, M, a->final_lr_frac);

    if (rank == 0) {
        printf("trainer %s | %d process(es) (%s) | model %s\n", b->name, W, c->launcher, a->model);
        printf("model: L %d | C %d | NH %d | maxT %d | V %d | Vp %d | %zu parameters\n", b->config.num_layers,
               b->config.channels, b->config.num_heads, b->config.max_seq_len, V, b->config.padded_vocab_size, b->num_params);
        printf("batch: B %d | T %d | ranks %d | grad accum %d | total %lld tokens per step\n", B, T, W, A, a->total_batch);
        printf("train data: %lld tokens in %d shard(s), %lld steps per epoch%s\n", train.total_tokens, train.num_shards,
               epoch_steps, a->shuffle ? ", shuffled" : "");
        if (have_val) { printf("val data: %lld tokens in %d shard(s)\n", val.total_tokens, val.num_shards); }
        printf("steps: %d (starting at %d)\n", M, st.step);
        fflush(stdout);
    }

    int *inputs = (int *)mallocCheck((size_t)B * T * sizeof(int));
    int *targets = (int *)mallocCheck((size_t)B * T * sizeof(int));
    float *losses = (float *)mallocCheck((size_t)B * T * sizeof(float));
    float *probs = (float *)mallocCheck((size_t)V * sizeof(float));
    float *sample_scratch = (float *)mallocCheck(2 * (size_t)V * sizeof(float));
    double timed = 0.0;
    int timed_steps = 0;
    const int first_step = st.step;

    for (int s = st.step;; s++) {
        int last = s == M;
        if (have_val && (s % a->val_every == 0 || last)) {
            double t0 = llmc_wall_seconds();
            float vl = train_val_loss(a, c, b, &val, inputs, targets, losses);
            if (rank == 0) { printf("val loss %.6f (%.2f s)\n", vl, llmc_wall_seconds() - t0); }
            logger_printf(&lg, "s:%d tel:%.9g\n", s, vl);
            if (a->hellaswag_eval) {
                t0 = llmc_wall_seconds();
                int evaluated;
                int correct = evalset_run(&hs, a->hellaswag_max, rank, W, B, T, train_eval_forward, b, &evaluated);
                double acc[2] = {(double)correct, (double)evaluated};
                c->allreduce_sum_f64(c, acc, 2);
                float hsw = (float)(acc[0] / acc[1]);
                if (rank == 0) {
                    printf("HellaSwag: %d/%d = %.4f (%.2f s)\n", (int)acc[0], (int)acc[1], hsw, llmc_wall_seconds() - t0);
                }
                logger_printf(&lg, "s:%d hsw:%.6f\n", s, hsw);
            }
        }
        if (rank == 0 && a->sample_every > 0 && ((s > 0 && s % a->sample_every == 0) || last)) {
            train_sample(a, b, &tok, &st.sample_rng, inputs, probs, sample_scratch);
        }
        if (last) { break; }

        // ---- one optimizer step: A micro-steps on this rank, W ranks
        double t0 = llmc_wall_seconds();
        float dloss = 1.0f / ((float)B * T * A * W);
        for (int k = 0; k < A; k++) {
            long long w = dataloader_train_window(a->overfit_batch ? 0 : s, k, rank, W, B, N);
            dataloader_read(&train, w, B, inputs, targets);
            b->train_micro_step(b, inputs, targets, B, T, dloss, k, A);
        }
        double loss_sum = b->step_loss_sum(b);
        float norm = b->reduce_grads(b);
        c->allreduce_sum_f64(c, &loss_sum, 1);
        float loss = (float)(loss_sum / ((double)A * W));
        float lr = lr_at(&sched, s);
        char reason[256];
        int skip = guard_check(&st.guard, loss, norm, reason, sizeof(reason));
        if (!skip) {
            st.opt_steps++;
            float clip = 1.0f / (norm + 1e-6f);  // torch.nn.utils.clip_grad_norm_ with max_norm 1.0
            b->update(b, lr, 0.9f, 0.95f, 1e-8f, a->weight_decay, clip < 1.0f ? clip : 1.0f, st.opt_steps,
                      a->seed * 6364136223846793005ULL + (unsigned long long)st.opt_steps);
        }
        double dt = llmc_wall_seconds() - t0;
        if (s > first_step || M - first_step == 1) { timed += dt; timed_steps++; }  // the first step warms up
        st.step = s + 1;
        if (rank == 0) {
            double tps = (double)a->total_batch / dt;
            char eta[32] = "";
            if (timed_steps > 0) { format_duration(eta, sizeof(eta), timed / timed_steps * (M - st.step)); }
            printf("step %d/%d | loss %.6f | norm %.4f | lr %.2e | %.1f ms | %.0f tok/s", st.step, M, loss, norm, lr,
                   dt * 1000.0, tps);
            if (b->peak_flops > 0) {
                printf(" | MFU %.1f%%", 100.0 * b->flops_per_token * tps / W / b->peak_flops);
            }
            printf(" | eta %s%s\n", timed_steps > 0 ? eta : "-", skip ? " | SKIPPED" : "");
            fflush(stdout);
        }
        logger_printf(&lg, "s:%d trl:%.9g lr:%.6g norm:%.6g tok:%lld\n", s, loss, lr, norm, (long long)st.step * a->total_batch);
        if (skip) {
            if (rank == 0) { llmc_warn("step %d skipped: %s", st.step, reason); }
            logger_printf(&lg, "s:%d skip:%s\n", s, reason);
            if (st.guard.consecutive >= st.guard.max_consecutive) {
                llmc_die("%d consecutive steps skipped by the numeric guards (last: %s); the run is diverging: lower "
                         "-l, raise -u, or resume from an earlier checkpoint", st.guard.consecutive, reason);
            }
        }

        // ---- preemption: every rank learns whether any rank got a signal
        int stop = llmc_stop_signal != 0;
        c->allreduce_max_i32(c, &stop, 1);
        int want_ckpt = a->checkpoint_every > 0 && (st.step % a->checkpoint_every == 0 || st.step == M);
        if (have_out && (want_ckpt || stop)) {
            double tc = llmc_wall_seconds();
            checkpoint_save(a->output_dir, b, c, &st, a->checkpoint_keep);
            if (rank == 0) { printf("checkpoint %d written to %s (%.2f s)\n", st.step, a->output_dir, llmc_wall_seconds() - tc); }
        }
        if (stop) {
            if (rank == 0) {
                if (have_out) {
                    printf("stopped by a signal after step %d; checkpoint %d is in %s; to resume, run the same command with -y 1\n",
                           st.step, st.step, a->output_dir);
                } else {
                    printf("stopped by a signal after step %d; nothing was saved (no -o); next time pass -o <dir> to be able to resume\n",
                           st.step);
                }
                fflush(stdout);
            }
            break;
        }
    }
    if (rank == 0 && timed_steps > 0) {
        printf("total average iteration time: %.3f ms\n", timed / timed_steps * 1000.0);
    }
    free(inputs); free(targets); free(losses); free(probs); free(sample_scratch);
    logger_free(&lg);
    if (tok.init_ok) { tokenizer_free(&tok); }
    if (a->hellaswag_eval) { evalset_free(&hs); }
    dataloader_free(&train);
    if (have_val) { dataloader_free(&val); }
    return 0;
}

#endif  // LLMC_TRAIN_LOOP_H
