/*
 * Numeric guards, shared by both trainers. After the gradients of a step are reduced, the global
 * loss and gradient norm decide whether the update is applied:
 *   - a NaN or Inf loss or norm always skips the step;
 *   - with -sl / -sg > 0, a loss / norm whose z-score against the last GUARD_WINDOW accepted steps
 *     exceeds the threshold skips it (only once GUARD_MIN_HISTORY steps have been accepted).
 * A skipped step changes no parameter and no optimizer state (not even AdamW's step count); its
 * data is consumed. After -sm consecutive skips the run stops with an error, or, with -rb K, after
 * K it rolls back to the newest complete checkpoint (train_loop.h).
 * The inputs are identical on every rank (all-reduced), so every rank decides the same.
 * The history is part of the checkpoint, so a resumed run decides as the uninterrupted one.
 */
#ifndef LLMC_GUARD_H
#define LLMC_GUARD_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GUARD_WINDOW 100
#define GUARD_MIN_HISTORY 20

typedef struct {
    float z_loss, z_norm;         // thresholds, 0 = off
    int max_consecutive;          // stop after this many skips in a row
    int count;                    // accepted values in the history (<= GUARD_WINDOW)
    int head;                     // next slot to overwrite
    int consecutive;              // current run of skipped steps
    long long total_skipped;
    float loss_hist[GUARD_WINDOW];
    float norm_hist[GUARD_WINDOW];
} Guard;

static inline void guard_init(Guard *g, float z_loss, float z_norm, int max_consecutive) {
    memset(g, 0, sizeof(*g));
    g->z_loss = z_loss;
    g->z_norm = z_norm;
    g->max_consecutive = max_consecutive;
}

/*
 * The test hook of the rollback tests: LLMC_TEST_LOSS_SPIKE=<n>,<n>,... multiplies by 1000 the loss
 * of the steps that train on the data of step <n> (numbered like the step line; after a rollback
 * the data of a step lies further on), as a bad batch would. Returns the factor.
 */
static inline float guard_test_spike(long long data_step) {
    const char *e = getenv("LLMC_TEST_LOSS_SPIKE");
    for (const char *p = e; p && *p; p = strchr(p, ','), p = p ? p + 1 : NULL) {
        if (atoll(p) == data_step) { return 1000.0f; }
    }
    return 1.0f;
}

static inline double guard_zscore(const float *hist, int n, float x) {
    double mean = 0.0, var = 0.0;
    for (int i = 0; i < n; i++) { mean += hist[i]; }
    mean /= n;
    for (int i = 0; i < n; i++) { var += (hist[i] - mean) * (hist[i] - mean); }
    double sd = sqrt(var / n);
    if (sd < 1e-12) { sd = 1e-12; }
    return (x - mean) / sd;
}

/*
 * Returns 1 if the step must be skipped and writes why into reason; else records the values
 * and returns 0. Only an increase is an outlier (a loss that drops fast is fine).
 */
static inline int guard_check(Guard *g, float loss, float norm, char *reason, size_t reason_len) {
    int skip = 0;
    if (!isfinite(loss) || !isfinite(norm)) {
        snprintf(reason, reason_len, "non-finite %s (loss %g, norm %g)", !isfinite(loss) ? "loss" : "gradient norm",
                 loss, norm);
        skip = 1;
    } else if (g->count >= GUARD_MIN_HISTORY) {
        double zl = guard_zscore(g->loss_hist, g->count, loss);
        double zn = guard_zscore(g->norm_hist, g->count, norm);
        if (g->z_loss > 0 && zl > g->z_loss) {
            snprintf(reason, reason_len, "loss %g has z-score %.2f > %g", loss, zl, g->z_loss);
            skip = 1;
        } else if (g->z_norm > 0 && zn > g->z_norm) {
            snprintf(reason, reason_len, "gradient norm %g has z-score %.2f > %g", norm, zn, g->z_norm);
            skip = 1;
        }
    }
    if (skip) {
        g->consecutive++;
        g->total_skipped++;
        return 1;
    }
    g->consecutive = 0;
    g->loss_hist[g->head] = loss;
    g->norm_hist[g->head] = norm;
    g->head = (g->head + 1) % GUARD_WINDOW;
    if (g->count < GUARD_WINDOW) { g->count++; }
    return 0;
}

#endif  // LLMC_GUARD_H
