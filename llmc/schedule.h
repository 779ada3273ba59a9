/*
 * Learning-rate schedules, shared by both trainers. Step s is 0-based (the s-th optimizer step).
 *   warmup:   lr * (s+1) / warmup for s < warmup
 *   cosine:   then from lr down to final_frac*lr at step max_steps along half a cosine
 *   linear:   then a straight line from lr to final_frac*lr at step max_steps
 *   constant: then lr
 * With final_frac 1.0 every schedule is constant after warmup.
 */
#ifndef LLMC_SCHEDULE_H
#define LLMC_SCHEDULE_H

#include <math.h>
#include <string.h>

typedef struct {
    int kind;           // 0 cosine, 1 linear, 2 constant
    float lr;           // peak
    float final_frac;   // final lr = final_frac * lr
    int warmup;
    int max_steps;
} LRSchedule;

static inline void lr_schedule_init(LRSchedule *s, const char *kind, float lr, int warmup, int max_steps, float final_frac) {
    s->kind = !strcmp(kind, "linear") ? 1 : !strcmp(kind, "constant") ? 2 : 0;
    s->lr = lr;
    s->warmup = warmup;
    s->max_steps = max_steps;
    s->final_frac = final_frac;
}

static inline float lr_at(const LRSchedule *s, int step) {
    if (step < s->warmup) { return s->lr * (float)(step + 1) / (float)s->warmup; }
    if (s->kind == 2 || s->max_steps <= s->warmup) { return s->lr; }
    double progress = (double)(step - s->warmup) / (double)(s->max_steps - s->warmup);
    if (progress > 1.0) { progress = 1.0; }
    double min_lr = (double)s->lr * s->final_frac;
    double coeff = s->kind == 0 ? 0.5 * (1.0 + cos(M_PI * progress)) : 1.0 - progress;
    return (float)(min_lr + coeff * ((double)s->lr - min_lr));
}

#endif  // LLMC_SCHEDULE_H
