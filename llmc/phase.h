/*
 * Where the time of a training step goes (-pe), known on rank 0 every step: waiting for data (the
 * host reading the micro-batches), forward, backward, exposed communication (the wait for the
 * gradient reduction beyond what overlapped the backward), optimizer (the gradient norm and AdamW;
 * with ZeRO-1 also the parameter all-gather), and evaluation (validation, HellaSwag, samples and
 * checkpoints since the previous step). Data and evaluation are the loop's wall clock; the model's
 * four come from the backend (llmc/backend.h, step_phases): the CPU trainer's wall clock, the CUDA
 * trainer's events on its stream, read only after the waits a step has anyway.
 */
#ifndef LLMC_PHASE_H
#define LLMC_PHASE_H

#include "utils.h"

typedef enum { PHASE_DATA, PHASE_FORWARD, PHASE_BACKWARD, PHASE_COMM, PHASE_OPTIMIZER, PHASE_EVAL, NUM_PHASES } Phase;

static const char *const phase_name[NUM_PHASES] = {"data", "forward", "backward", "comm", "optimizer", "eval"};

// the sums over the steps since the last printed line
typedef struct {
    double ms[NUM_PHASES];
    double wall_ms;  // the steps' wall time, evaluations included
    int steps, first;
} PhaseWindow;

static inline void phase_window_add(PhaseWindow *w, const double ms[NUM_PHASES], double wall_ms, int step) {
    if (w->steps == 0) { w->first = step; }
    for (int i = 0; i < NUM_PHASES; i++) { w->ms[i] += ms[i]; }
    w->wall_ms += wall_ms;
    w->steps++;
}

// "phases, steps a-b, per step: data 0.2 ms 0.1% | forward ... | eval ... | wall ..."; resets the window.
// Shares are of the phases' sum (on a GPU the host's data time overlaps the device's work).
static inline void phase_window_print(PhaseWindow *w) {
    if (w->steps == 0) { return; }
    double sum = 0.0;
    for (int i = 0; i < NUM_PHASES; i++) { sum += w->ms[i]; }
    printf("phases, steps %d-%d, mean per step:", w->first, w->first + w->steps - 1);
    for (int i = 0; i < NUM_PHASES; i++) {
        printf(" %s %.1f ms %.1f%%%s", phase_name[i], w->ms[i] / w->steps, sum > 0 ? 100.0 * w->ms[i] / sum : 0.0,
               i + 1 < NUM_PHASES ? " |" : "");
    }
    printf(" | wall %.1f ms\n", w->wall_ms / w->steps);
    fflush(stdout);
    memset(w, 0, sizeof(*w));
}

#endif  // LLMC_PHASE_H
