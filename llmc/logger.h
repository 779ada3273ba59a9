/*
 * The run's logs in the output dir, written by rank 0 only. A resumed run appends to both, so a
 * step can appear twice; readers keep the last value (dev/plot_log.py does).
 *
 * main.log (llm.c's format): one line per event, "s:<step>" then key:value pairs. Keys: trl
 * (train loss), lr, norm (gradient norm before clipping), tok (tokens seen after this step), tel
 * (val loss), hsw (HellaSwag acc_norm), skip (a guard skipped the step), rollback (-rb: the run
 * went back to checkpoint <rollback> after step s, passing over the data of data_skipped steps;
 * the steps after it are logged again, and the later line wins). s is the number of
 * optimizer steps completed before the event, as in llm.c's logs: the train loss at s:N is that of
 * the step printed as "step N+1", measured, like the val loss at s:N, on the model after N updates.
 * Losses are written with 9 significant digits: a float round-trips exactly, so logs of two runs
 * can be compared bit for bit.
 *
 * metrics.jsonl: the same events as JSON objects, one per line, for dashboards. "step" is
 * main.log's s; "tokens" the tokens seen (after the step; for an evaluation, before it). A step:
 *   {"event":"step","step":30,"tokens":63488,"loss":6.319035,"lr":0.000868,"norm":1.208,
 *    "ms":2719.9,"tok_per_s":753,"mfu_pct":41.2,"skipped":"loss nan is not finite"}
 * (mfu_pct only where the trainer knows the device's peak, skipped only for a skipped step), an
 * evaluation: {"event":"eval","step":50,"tokens":102400,"val_loss":5.83,"hellaswag":0.2871,"ms":1204.3}
 * (hellaswag only with -h 1), a rollback: {"event":"rollback","step":28,"to":25,"data_skipped":3}.
 * loss, lr, norm, val_loss and hellaswag are written with the digits main.log has, so they parse
 * to the same values; a non-finite loss or norm is null. A step also carries where its time went
 * (llmc/phase.h): "data_ms", "forward_ms", "backward_ms", "comm_ms", "optimizer_ms", "eval_ms".
 *
 * main.log may start with "# " lines (its header: -b auto's choice and reason); readers skip them.
 *
 * With -tb 1, the same values go to a TensorBoard events file (llmc/tensorboard.h), keyed by
 * main.log's s: train/loss, train/lr, train/grad_norm, train/tokens_per_s, train/mfu_pct (where
 * known), train/skipped (1 for a skipped step, else 0), phase/<phase>_ms, val/loss, val/hellaswag.
 */
#ifndef LLMC_LOGGER_H
#define LLMC_LOGGER_H

#include <math.h>
#include "phase.h"
#include "tensorboard.h"
#include "utils.h"

typedef struct {
    FILE *fp;       // main.log; NULL: logging off (no -o, or not rank 0)
    FILE *metrics;  // metrics.jsonl, open when fp is
    TbWriter tb;    // events.out.tfevents.*, with -tb 1
} Logger;

// one optimizer step, as the step line prints it
typedef struct {
    int step;            // steps completed before it (main.log's s)
    long long tokens;    // tokens seen after it
    float loss, lr, norm;
    double ms, tok_per_s;
    double mfu_pct;      // < 0: unknown
    const char *skip;    // why the guards skipped it, or NULL
    const double *phase_ms;  // (NUM_PHASES) where its time went
} StepRecord;

// resume_step >= 0: a resumed run (appends; the TensorBoard file says where it resumed)
static inline void logger_init(Logger *lg, const char *dir, int rank, int append, int tensorboard, long long resume_step) {
    memset(lg, 0, sizeof(*lg));
    if (rank != 0 || dir == NULL || dir[0] == '\0') { return; }
    char path[4096];
    snprintf(path, sizeof(path), "%s/main.log", dir);
    lg->fp = fopenCheck(path, append ? "a" : "w");
    snprintf(path, sizeof(path), "%s/metrics.jsonl", dir);
    lg->metrics = fopenCheck(path, append ? "a" : "w");
    if (tensorboard) { tb_open(&lg->tb, dir, resume_step); }
}

// a header line of main.log: "# <text>"
static inline void logger_note(Logger *lg, const char *text) {
    if (lg->fp == NULL || text[0] == '\0') { return; }
    fprintf(lg->fp, "# %s\n", text);
    fflush(lg->fp);
}

// a JSON number with printf format fmt, or null when v is NaN/Inf (JSON has neither)
static inline void jsonl_number(FILE *f, const char *key, const char *fmt, double v) {
    fprintf(f, ",\"%s\":", key);
    if (isfinite(v)) { fprintf(f, fmt, v); } else { fputs("null", f); }
}

static inline void jsonl_string(FILE *f, const char *key, const char *s) {
    fprintf(f, ",\"%s\":\"", key);
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\') { fprintf(f, "\\%c", ch); }
        else if (ch < 0x20) { fprintf(f, "\\u%04x", ch); }
        else { fputc(ch, f); }
    }
    fputc('"', f);
}

static inline void logger_step(Logger *lg, const StepRecord *r) {
    if (lg->fp == NULL) { return; }
    fprintf(lg->fp, "s:%d trl:%.9g lr:%.6g norm:%.6g tok:%lld\n", r->step, r->loss, r->lr, r->norm, r->tokens);
    if (r->skip) { fprintf(lg->fp, "s:%d skip:%s\n", r->step, r->skip); }
    fflush(lg->fp);
    FILE *f = lg->metrics;
    fprintf(f, "{\"event\":\"step\",\"step\":%d,\"tokens\":%lld", r->step, r->tokens);
    jsonl_number(f, "loss", "%.9g", r->loss);
    jsonl_number(f, "lr", "%.6g", r->lr);
    jsonl_number(f, "norm", "%.6g", r->norm);
    jsonl_number(f, "ms", "%.3f", r->ms);
    jsonl_number(f, "tok_per_s", "%.1f", r->tok_per_s);
    if (r->mfu_pct >= 0) { jsonl_number(f, "mfu_pct", "%.2f", r->mfu_pct); }
    if (r->skip) { jsonl_string(f, "skipped", r->skip); }
    char key[32];
    for (int i = 0; i < NUM_PHASES; i++) {
        snprintf(key, sizeof(key), "%s_ms", phase_name[i]);
        jsonl_number(f, key, "%.3f", r->phase_ms[i]);
    }
    fputs("}\n", f);
    fflush(f);
    if (lg->tb.fp) {
        static const char *const phase_tag[NUM_PHASES] = {"phase/data_ms", "phase/forward_ms", "phase/backward_ms",
                                                          "phase/comm_ms", "phase/optimizer_ms", "phase/eval_ms"};
        const char *tags[8 + NUM_PHASES] = {"train/loss", "train/lr", "train/grad_norm", "train/tokens_per_s", "train/skipped"};
        float v[8 + NUM_PHASES] = {r->loss, r->lr, r->norm, (float)r->tok_per_s, r->skip ? 1.0f : 0.0f};
        int n = 5;
        if (r->mfu_pct >= 0) { tags[n] = "train/mfu_pct"; v[n++] = (float)r->mfu_pct; }
        for (int i = 0; i < NUM_PHASES; i++) { tags[n] = phase_tag[i]; v[n++] = (float)r->phase_ms[i]; }
        tb_scalars(&lg->tb, r->step, tags, v, n);
    }
}

// one evaluation after `step` steps: val loss, and HellaSwag acc_norm when hellaswag >= 0
static inline void logger_eval(Logger *lg, int step, long long tokens, float val_loss, float hellaswag, double ms) {
    if (lg->fp == NULL) { return; }
    fprintf(lg->fp, "s:%d tel:%.9g\n", step, val_loss);
    if (hellaswag >= 0) { fprintf(lg->fp, "s:%d hsw:%.6f\n", step, hellaswag); }
    fflush(lg->fp);
    FILE *f = lg->metrics;
    fprintf(f, "{\"event\":\"eval\",\"step\":%d,\"tokens\":%lld", step, tokens);
    jsonl_number(f, "val_loss", "%.9g", val_loss);
    if (hellaswag >= 0) { jsonl_number(f, "hellaswag", "%.6f", hellaswag); }
    jsonl_number(f, "ms", "%.3f", ms);
    fputs("}\n", f);
    fflush(f);
    const char *tags[2] = {"val/loss", "val/hellaswag"};
    const float v[2] = {val_loss, hellaswag};
    tb_scalars(&lg->tb, step, tags, v, hellaswag >= 0 ? 2 : 1);
}

// a rollback at `step` (steps completed) to checkpoint `to`; the data of `skipped` steps is passed over
static inline void logger_rollback(Logger *lg, int step, int to, int skipped) {
    if (lg->fp == NULL) { return; }
    fprintf(lg->fp, "s:%d rollback:%d data_skipped:%d\n", step, to, skipped);
    fflush(lg->fp);
    fprintf(lg->metrics, "{\"event\":\"rollback\",\"step\":%d,\"to\":%d,\"data_skipped\":%d}\n", step, to, skipped);
    fflush(lg->metrics);
    tb_session_start(&lg->tb, to);  // the steps from the checkpoint on are logged again
}

static inline void logger_free(Logger *lg) {
    if (lg->fp) { fclose(lg->fp); }
    if (lg->metrics) { fclose(lg->metrics); }
    tb_close(&lg->tb);
    lg->fp = NULL;
    lg->metrics = NULL;
}

#endif  // LLMC_LOGGER_H
