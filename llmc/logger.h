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
 * With -lg N, every N-th step also carries the GPU's readings (llmc/device_readings.h):
 * "gpu_sm_mhz", "gpu_sm_max_mhz", "gpu_power_w", "gpu_power_limit_w", "gpu_temp_c",
 * "gpu_busy_pct", "gpu_mem_used_gib" (null where the GPU does not give one) and "gpu_held_back".
 *
 * main.log may start with "# " lines (its header: -b auto's choice and reason); readers skip them.
 *
 * With -tb 1, the same values go to a TensorBoard events file (llmc/tensorboard.h), keyed by
 * main.log's s: train/loss, train/lr, train/grad_norm, train/tokens_per_s, train/mfu_pct (where
 * known), train/skipped (1 for a skipped step, else 0), phase/<phase>_ms, val/loss, val/hellaswag,
 * and with -lg gpu/sm_mhz, gpu/power_w, gpu/temp_c, gpu/busy_pct, gpu/mem_used_gib.
 *
 * A log that cannot be written (a full disk) does not stop the run: the first failed write of
 * each file (main.log, metrics.jsonl, the events file) is a warning naming it, that file is
 * written no more (what is there stays a clean prefix), and the end of the run says again which
 * file misses the events from which step on.
 */
#ifndef LLMC_LOGGER_H
#define LLMC_LOGGER_H

#include <limits.h>
#include <math.h>
#include "phase.h"
#include "device_readings.h"
#include "tensorboard.h"
#include "utils.h"

enum { LOG_MAIN, LOG_METRICS, LOG_TB, NUM_LOGS };

typedef struct {
    FILE *fp;       // main.log; NULL: logging off (no -o, or not rank 0), or its writes failed
    FILE *metrics;  // metrics.jsonl; NULL as fp
    TbWriter tb;    // events.out.tfevents.*, with -tb 1; its fp NULL as fp
    char path[NUM_LOGS][4096];
    int lost_from[NUM_LOGS];  // the step from which a file misses events (its first failed write); -1: none
    char lost_why[NUM_LOGS][128];
} Logger;

// A log appended to whose last line was cut (the run before ended in the middle of a write: killed,
// a full disk) loses that part line first: the next record glued to it read as the cut one's step
// (and a cut number as a value). Only a tail of one record's size: a longer one without a newline is
// no cut record, and gets a newline instead.
static inline void logger_drop_cut_line(int fd, const char *path) {
    struct stat st;
    if (fstat(fd, &st) != 0 || st.st_size == 0) { return; }
    char tail[65536];
    const off_t n = st.st_size < (off_t)sizeof(tail) ? st.st_size : (off_t)sizeof(tail);
    if (pread(fd, tail, (size_t)n, st.st_size - n) != (ssize_t)n || tail[n - 1] == '\n') { return; }
    off_t keep = -1;
    for (off_t i = n - 1; i >= 0 && keep < 0; i--) {
        if (tail[i] == '\n') { keep = st.st_size - n + i + 1; }
    }
    if (keep < 0 && n == st.st_size) { keep = 0; }  // the whole file is the one cut line
    if (keep >= 0 && ftruncate(fd, keep) == 0) {
        llmc_warn("-o: the last line of '%s' was cut (%lld bytes; the run before ended while writing it): dropped",
                  path, (long long)(st.st_size - keep));
    } else if (write(fd, "\n", 1) != 1) {
        llmc_warn("-o: cannot end the last line of '%s': %s", path, strerror(errno));
    }
}

// open a log for writing; a name in -o that is not a regular file (a FIFO, whose open would wait
// for a reader; a folder) is an error
static inline FILE *logger_open(const char *path, int append) {
    int fd = open(path, (append ? O_RDWR | O_APPEND : O_WRONLY | O_TRUNC) | O_CREAT | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, 0644);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        const char *why = fd < 0 ? strerror(errno) : "it is not a regular file";
        if (fd >= 0) { close(fd); }
        llmc_die("-o: cannot write the log '%s': %s; remove what is there or choose another -o", path, why);
    }
    if (append) { logger_drop_cut_line(fd, path); }
    FILE *f = fdopen(fd, append ? "a" : "w");
    if (f == NULL) { llmc_die("-o: cannot write the log '%s': %s", path, strerror(errno)); }
    return f;
}

// one optimizer step, as the step line prints it
typedef struct {
    int step;            // steps completed before it (main.log's s)
    long long tokens;    // tokens seen after it
    float loss, lr, norm;
    double ms, tok_per_s;
    double mfu_pct;      // < 0: unknown
    const char *skip;    // why the guards skipped it, or NULL
    const double *phase_ms;  // (NUM_PHASES) where its time went
    const DeviceReadings *device;  // -lg's readings after this step, or NULL
} StepRecord;

// resume_step >= 0: a resumed run (appends; the TensorBoard file says where it resumed)
static inline void logger_init(Logger *lg, const char *dir, int rank, int append, int tensorboard, long long resume_step) {
    memset(lg, 0, sizeof(*lg));
    for (int i = 0; i < NUM_LOGS; i++) { lg->lost_from[i] = -1; }
    if (rank != 0 || dir == NULL || dir[0] == '\0') { return; }
    snprintf(lg->path[LOG_MAIN], sizeof(lg->path[LOG_MAIN]), "%s/main.log", dir);
    snprintf(lg->path[LOG_METRICS], sizeof(lg->path[LOG_METRICS]), "%s/metrics.jsonl", dir);
    lg->fp = logger_open(lg->path[LOG_MAIN], append);
    lg->metrics = logger_open(lg->path[LOG_METRICS], append);
    if (tensorboard) {
        tb_open(&lg->tb, dir, resume_step);
        snprintf(lg->path[LOG_TB], sizeof(lg->path[LOG_TB]), "%s", lg->tb.path);
    }
}

static inline FILE **logger_file(Logger *lg, int which) {
    return which == LOG_MAIN ? &lg->fp : which == LOG_METRICS ? &lg->metrics : &lg->tb.fp;
}

// after the writes of one event to log `which`: a failed write warns once and ends that log
static inline void logger_check(Logger *lg, int which, int step) {
    FILE **f = logger_file(lg, which);
    if (*f == NULL || (fflush(*f) == 0 && !ferror(*f))) { return; }
    snprintf(lg->lost_why[which], sizeof(lg->lost_why[which]), "%s", strerror(errno ? errno : EIO));
    lg->lost_from[which] = step;
    llmc_warn("writing '%s' failed at step %d (%s): it gets no more events; training goes on (free space on the "
              "disk of -o to keep logs)", lg->path[which], step, lg->lost_why[which]);
    fclose(*f);
    *f = NULL;
}

// a header line of main.log: "# <text>"
static inline void logger_note(Logger *lg, const char *text) {
    if (lg->fp == NULL || text[0] == '\0') { return; }
    fprintf(lg->fp, "# %s\n", text);
    logger_check(lg, LOG_MAIN, 0);
}

// a JSON number with printf format fmt, or null when v is NaN/Inf (JSON has neither)
static inline void jsonl_number(FILE *f, const char *key, const char *fmt, double v) {
    fprintf(f, ",\"%s\":", key);
    if (isfinite(v)) { fprintf(f, fmt, v); } else { fputs("null", f); }
}

static inline void jsonl_string(FILE *f, const char *key, const char *s) {
    fprintf(f, ",\"%s\":", key);
    llmc_json_string(f, s);
}

static inline void logger_step(Logger *lg, const StepRecord *r) {
    if (lg->fp) {
        fprintf(lg->fp, "s:%d trl:%.9g lr:%.6g norm:%.6g tok:%lld\n", r->step, r->loss, r->lr, r->norm, r->tokens);
        if (r->skip) { fprintf(lg->fp, "s:%d skip:%s\n", r->step, r->skip); }
        logger_check(lg, LOG_MAIN, r->step);
    }
    FILE *f = lg->metrics;
    if (f) {
        fprintf(f, "{\"event\":\"step\",\"step\":%d,\"tokens\":%lld", r->step, r->tokens);
        jsonl_number(f, "loss", "%.9g", r->loss);
        jsonl_number(f, "lr", "%.6g", r->lr);
        jsonl_number(f, "norm", "%.6g", r->norm);
        jsonl_number(f, "ms", "%.3f", r->ms);
        jsonl_number(f, "tok_per_s", "%.1f", r->tok_per_s);
        if (r->mfu_pct >= 0) { jsonl_number(f, "mfu_pct", "%.2f", r->mfu_pct); }
        if (r->skip) { jsonl_string(f, "skipped", r->skip); }
        const DeviceReadings *d = r->device;
        if (d) {
            jsonl_number(f, "gpu_sm_mhz", "%.0f", d->sm_mhz);
            jsonl_number(f, "gpu_sm_max_mhz", "%.0f", d->sm_max_mhz);
            jsonl_number(f, "gpu_power_w", "%.1f", d->power_w);
            jsonl_number(f, "gpu_power_limit_w", "%.1f", d->power_limit_w);
            jsonl_number(f, "gpu_temp_c", "%.0f", d->temp_c);
            jsonl_number(f, "gpu_busy_pct", "%.0f", d->busy_pct);
            jsonl_number(f, "gpu_mem_used_gib", "%.2f", d->mem_used_gib);
            if (d->held_back[0]) { jsonl_string(f, "gpu_held_back", d->held_back); }
        }
        char key[32];
        for (int i = 0; i < NUM_PHASES; i++) {
            snprintf(key, sizeof(key), "%s_ms", phase_name[i]);
            jsonl_number(f, key, "%.3f", r->phase_ms[i]);
        }
        fputs("}\n", f);
        logger_check(lg, LOG_METRICS, r->step);
    }
    if (lg->tb.fp) {
        static const char *const phase_tag[NUM_PHASES] = {"phase/data_ms", "phase/forward_ms", "phase/backward_ms",
                                                          "phase/comm_ms", "phase/optimizer_ms", "phase/eval_ms"};
        const char *tags[16 + NUM_PHASES] = {"train/loss", "train/lr", "train/grad_norm", "train/tokens_per_s", "train/skipped"};
        float v[16 + NUM_PHASES] = {r->loss, r->lr, r->norm, (float)r->tok_per_s, r->skip ? 1.0f : 0.0f};
        int n = 5;
        if (r->mfu_pct >= 0) { tags[n] = "train/mfu_pct"; v[n++] = (float)r->mfu_pct; }
        for (int i = 0; i < NUM_PHASES; i++) { tags[n] = phase_tag[i]; v[n++] = (float)r->phase_ms[i]; }
        if (r->device) {  // -lg's readings that the device gave
            const DeviceReadings *d = r->device;
            const char *const gtag[5] = {"gpu/sm_mhz", "gpu/power_w", "gpu/temp_c", "gpu/busy_pct", "gpu/mem_used_gib"};
            const double gval[5] = {d->sm_mhz, d->power_w, d->temp_c, d->busy_pct, d->mem_used_gib};
            for (int i = 0; i < 5; i++) {
                if (isfinite(gval[i])) { tags[n] = gtag[i]; v[n++] = (float)gval[i]; }
            }
        }
        tb_scalars(&lg->tb, r->step, tags, v, n);
        logger_check(lg, LOG_TB, r->step);
    }
}

// one evaluation after `step` steps: val loss, and HellaSwag acc_norm when hellaswag >= 0
static inline void logger_eval(Logger *lg, int step, long long tokens, float val_loss, float hellaswag, double ms) {
    if (lg->fp) {
        fprintf(lg->fp, "s:%d tel:%.9g\n", step, val_loss);
        if (hellaswag >= 0) { fprintf(lg->fp, "s:%d hsw:%.6f\n", step, hellaswag); }
        logger_check(lg, LOG_MAIN, step);
    }
    FILE *f = lg->metrics;
    if (f) {
        fprintf(f, "{\"event\":\"eval\",\"step\":%d,\"tokens\":%lld", step, tokens);
        jsonl_number(f, "val_loss", "%.9g", val_loss);
        if (hellaswag >= 0) { jsonl_number(f, "hellaswag", "%.6f", hellaswag); }
        jsonl_number(f, "ms", "%.3f", ms);
        fputs("}\n", f);
        logger_check(lg, LOG_METRICS, step);
    }
    if (lg->tb.fp) {
        const char *tags[2] = {"val/loss", "val/hellaswag"};
        const float v[2] = {val_loss, hellaswag};
        tb_scalars(&lg->tb, step, tags, v, hellaswag >= 0 ? 2 : 1);
        logger_check(lg, LOG_TB, step);
    }
}

// a rollback at `step` (steps completed) to checkpoint `to`; the data of `skipped` steps is passed over
static inline void logger_rollback(Logger *lg, int step, int to, int skipped) {
    if (lg->fp) {
        fprintf(lg->fp, "s:%d rollback:%d data_skipped:%d\n", step, to, skipped);
        logger_check(lg, LOG_MAIN, step);
    }
    if (lg->metrics) {
        fprintf(lg->metrics, "{\"event\":\"rollback\",\"step\":%d,\"to\":%d,\"data_skipped\":%d}\n", step, to, skipped);
        logger_check(lg, LOG_METRICS, step);
    }
    if (lg->tb.fp) {
        tb_session_start(&lg->tb, to);  // the steps from the checkpoint on are logged again
        logger_check(lg, LOG_TB, step);
    }
}

// close the logs; a log that lost events is named again, last, where the user looks
static inline void logger_free(Logger *lg) {
    for (int which = 0; which < NUM_LOGS; which++) {
        FILE **f = logger_file(lg, which);
        if (*f && fclose(*f) != 0 && lg->lost_from[which] < 0) {
            snprintf(lg->lost_why[which], sizeof(lg->lost_why[which]), "%s", strerror(errno));
            lg->lost_from[which] = INT_MAX;  // only the last events, at the final flush
        }
        *f = NULL;
        if (lg->lost_from[which] == INT_MAX) {
            llmc_warn("'%s' is incomplete: its last events were not written (%s)", lg->path[which], lg->lost_why[which]);
        } else if (lg->lost_from[which] >= 0) {
            llmc_warn("'%s' is incomplete: the events from step %d on were not written (%s)", lg->path[which],
                      lg->lost_from[which], lg->lost_why[which]);
        }
    }
}

#endif  // LLMC_LOGGER_H
