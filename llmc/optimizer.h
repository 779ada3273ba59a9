/*
 * The settings of one optimizer update, spelled once: the training loop fills an OptSettings for
 * every applied step (opt_settings below), Backend->update receives it, and each trainer hands it
 * on to its kernels (train_gpt2.c's adamw_update and muon_update, llmc/cuda/adamw.cuh, llmc/cuda/muon.cuh).
 * AdamW's constants and the clipping rule live here and nowhere else; Muon's rules in llmc/muon.h.
 */
#ifndef LLMC_OPTIMIZER_H
#define LLMC_OPTIMIZER_H

#include "args.h"
#include "schedule.h"

// AdamW's moment decay rates and epsilon (GPT-2's, as llm.c and nanoGPT use them) and the
// gradient clipping threshold (the global L2 norm, as torch.nn.utils.clip_grad_norm_'s max_norm)
#define OPT_BETA1 0.9f
#define OPT_BETA2 0.95f
#define OPT_EPS 1e-8f
#define OPT_CLIP_NORM 1.0f

typedef struct {
    float lr;                 // learning rate of this step: the schedule applied to -l
    float beta1, beta2, eps;  // AdamW: OPT_BETA1, OPT_BETA2, OPT_EPS
    float weight_decay;       // -c, decoupled (p -= lr * wd * p), on the 2-D tensors only
    float grad_scale;         // multiplies every gradient: the clip scale, min(1, max_norm / (norm + 1e-6))
    int t;                    // 1-based count of applied updates (AdamW's bias correction)
    unsigned long long seed;  // stochastic rounding of this update, where the backend rounds
    // Muon (-opt muon) on the blocks' 2-D matrices; AdamW with the settings above on the rest
    int muon;                 // 1: Muon on the matrices; 0: AdamW on everything
    float muon_lr;            // Muon's learning rate of this step: the same schedule applied to -ml
    float muon_momentum;      // -mm
    int muon_ns_steps;        // -mns
} OptSettings;

// 1 for -opt muon (the optimizer of the run, as the state file's header [28] records it)
static inline int opt_is_muon(const TrainArgs *a) { return !strcmp(a->optimizer, "muon"); }

// the settings of applied update t (1-based) at step s (0-based), whose gradients have global norm `norm`
static inline OptSettings opt_settings(const TrainArgs *a, const LRSchedule *sched, int s, float norm, int t) {
    OptSettings o;
    memset(&o, 0, sizeof(o));
    o.lr = lr_at(sched, s);
    o.beta1 = OPT_BETA1;
    o.beta2 = OPT_BETA2;
    o.eps = OPT_EPS;
    o.weight_decay = a->weight_decay;
    const float clip = OPT_CLIP_NORM / (norm + 1e-6f);  // torch.nn.utils.clip_grad_norm_
    o.grad_scale = clip < 1.0f ? clip : 1.0f;
    o.t = t;
    o.seed = a->seed * 6364136223846793005ULL + (unsigned long long)t;
    o.muon = opt_is_muon(a);
    if (o.muon) {
        LRSchedule muon = *sched;  // the same shape, -ml as its peak
        muon.lr = a->muon_lr;
        o.muon_lr = lr_at(&muon, s);
        o.muon_momentum = a->muon_momentum;
        o.muon_ns_steps = a->muon_ns_steps;
    }
    return o;
}

#endif  // LLMC_OPTIMIZER_H
