/*
 * Learning-rate schedules, shared by both trainers. Step s is 0-based (the s-th optimizer step).
 *   warmup:   lr * (s+1) / warmup for s < warmup
 *   cosine:   then from lr down to final_frac*lr at step max_steps along half a cosine
 *   linear:   then a straight line from lr to final_frac*lr at step max_steps
 *   constant: then lr
 *   wsd:      warmup-stable-decay: lr until the last decay_frac of the max_steps steps, then from
 *             lr down to final_frac*lr at step max_steps as 1 - sqrt(progress) (Hagele et al.
 *             2024, arXiv:2405.18392; llm.c's `-k wsd` at decay_frac 0.2, its fixed value). The
 *             decay starts at step (int)((1 - decay_frac) * max_steps) in float arithmetic, as
 *             llm.c computes it, or at the end of warmup if that is later. Until then -x does
 *             not change the learning rate, so a run still in its stable phase can be resumed
 *             with a larger -x to train longer, its decay moving to the new end.
 * With final_frac 1.0 every schedule is constant after warmup.
 */
#ifndef LLMC_SCHEDULE_H
#define LLMC_SCHEDULE_H

#include <math.h>
#include <string.h>

typedef enum { LR_COSINE = 0, LR_LINEAR = 1, LR_CONSTANT = 2, LR_WSD = 3 } LRKind;

typedef struct {
    LRKind kind;
    float lr;           // peak
    float final_frac;   // final lr = final_frac * lr
    float decay_frac;   // wsd: the fraction of max_steps at the end that decays
    int warmup;
    int max_steps;
} LRSchedule;

static inline void lr_schedule_init(LRSchedule *s, const char *kind, float lr, int warmup, int max_steps, float final_frac,
                                    float decay_frac) {
    s->kind = !strcmp(kind, "linear") ? LR_LINEAR : !strcmp(kind, "constant") ? LR_CONSTANT
              : !strcmp(kind, "wsd") ? LR_WSD : LR_COSINE;
    s->lr = lr;
    s->warmup = warmup;
    s->max_steps = max_steps;
    s->final_frac = final_frac;
    s->decay_frac = decay_frac;
}

// the step at which the decay begins: warmup for cosine and linear, later for wsd
static inline int lr_decay_start(const LRSchedule *s) {
    if (s->kind != LR_WSD) { return s->warmup; }
    const int start = (int)((1.0f - s->decay_frac) * (float)s->max_steps);
    return start > s->warmup ? start : s->warmup;
}

static inline float lr_at(const LRSchedule *s, int step) {
    if (step < s->warmup) { return s->lr * (float)(step + 1) / (float)s->warmup; }
    const int start = lr_decay_start(s);
    if (s->kind == LR_CONSTANT || step < start || s->max_steps <= start) { return s->lr; }
    double progress = (double)(step - start) / (double)(s->max_steps - start);
    if (progress > 1.0) { progress = 1.0; }
    double min_lr = (double)s->lr * s->final_frac;
    double coeff = s->kind == LR_COSINE ? 0.5 * (1.0 + cos(M_PI * progress))
                   : s->kind == LR_LINEAR ? 1.0 - progress : 1.0 - sqrt(progress);
    return (float)(min_lr + coeff * ((double)s->lr - min_lr));
}

#endif  // LLMC_SCHEDULE_H
