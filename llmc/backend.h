/*
 * The interface between the shared training loop (train_loop.h) and a trainer's model: the CPU
 * trainer (train_gpt2.c) and the CUDA trainer (train_gpt2.cu) each fill one Backend.
 *
 * The loop owns everything that is the same on both: data, batch arithmetic, schedule, guards,
 * evaluation, sampling, logging, checkpoint files and preemption. The backend owns the model
 * memory, forward, backward, the gradient reduction across ranks and the optimizer update.
 *
 * Contract:
 * - Runtime B and T of every call are at most the B and T the backend was built for.
 * - Token ids passed in are already checked (< vocab_size).
 * - Parameters are one flat array in the model file's order (model_io.h); "parameter index"
 *   means the position in that array. The optimizer state a rank holds covers the half-open
 *   range [opt_offset, opt_offset + opt_count): everything, or this rank's ZeRO-1 shard.
 */
#ifndef LLMC_BACKEND_H
#define LLMC_BACKEND_H

#include "model_io.h"
#include "phase.h"
#include "device_readings.h"
#include "optimizer.h"

// the kernel choices that change a run's bits (train_gpt2cu's -r -ge -bg -at), each -1 where the
// trainer has none (the CPU trainer): checkpoints record them, and a resume that changes one is told
typedef struct {
    int recompute;    // -r level of the activations (0..2)
    int gelu_fusion;  // -ge (0..2)
    int bias_grad;    // -bg (0, 1)
    int attention;    // -at: 0 our kernel, 1 cuDNN's
} KernelChoices;

typedef struct Backend {
    void *self;                 // the trainer's model object
    const char *name;           // "cpu" or "cuda", for messages
    GPT2Config config;
    size_t num_params;
    int B, T;                   // the maxima the activations were sized for
    int has_master;             // fp32 master weights are kept apart from the params (checkpointed)
    KernelChoices kernels;
    size_t opt_offset;          // optimizer-state range held by this rank (see above)
    size_t opt_count;
    double flops_per_token;     // training FLOPs per token (forward + backward), for MFU; 0 = unknown
    double peak_flops;          // peak FLOP/s of one device, for MFU; 0 = no MFU (CPU), -1 = unknown (MFU n/a)

    // Training micro-step k of n: forward and backward of one micro-batch (B x T inputs and
    // targets), accumulating parameter gradients; k == 0 starts from zero gradients. dloss is
    // the gradient of the step's loss with respect to each token's loss (1 / (B*T*n*ranks)).
    // On k == n-1 the backend may start reducing gradients across ranks as they become final.
    void (*train_micro_step)(struct Backend *b, const int *inputs, const int *targets, int B, int T,
                             float dloss, int k, int n);
    // After the last micro-step: the sum over this rank's micro-steps of the micro-batch mean loss.
    double (*step_loss_sum)(struct Backend *b);
    // After the last micro-step: finish the gradient reduction across ranks (gradients become
    // the mean over all ranks) and return the global L2 norm of the gradients.
    float (*reduce_grads)(struct Backend *b);
    // One optimizer update of the held range with the settings of this step (optimizer.h); with
    // ZeRO, then share the updated parameters.
    void (*update)(struct Backend *b, const OptSettings *o);
    // Forward only: per-token losses (B*T floats, host memory) of a batch.
    void (*forward_losses)(struct Backend *b, const int *inputs, const int *targets, int B, int T, float *losses);
    // Forward only, one sequence of length T: softmax probabilities over the V real tokens at
    // position pos (host memory, V floats). cached: how many leading tokens are those of the
    // previous call, with the same parameters since (generation's growing text; 0 for a new one):
    // the backend may keep their activations and compute only the positions after them.
    void (*forward_probs)(struct Backend *b, const int *tokens, int T, int pos, int cached, float *probs);
    // Model files: the parameters as the backend saves them (model_version 3: fp32, 5: bf16, the
    // element type copy_params writes), and loading. copy_params copies parameters [offset,
    // offset+count) into host memory.
    int model_version;
    void (*copy_params)(struct Backend *b, size_t offset, size_t count, void *dst);
    void (*load_model)(struct Backend *b, const char *path);
    // Host memory for the checkpoint snapshots (checkpoint.h): pinned on the GPU, so that the copy
    // out of the device is fast. NULL: malloc/free.
    void *(*host_alloc)(struct Backend *b, size_t bytes);
    void (*host_free)(struct Backend *b, void *p);
    // Copy optimizer state of [offset, offset+count) (inside the held range) out of / into the
    // backend. master may be NULL: on get when !has_master; on set, to keep the master weights
    // as load_model set them (the state file has none). A backend without master weights of its
    // own takes a file's as its parameters where they are fp32 (the CPU trainer), else ignores them.
    void (*get_opt_state)(struct Backend *b, size_t offset, size_t count, float *m, float *v, float *master);
    void (*set_opt_state)(struct Backend *b, size_t offset, size_t count, const float *m, const float *v,
                          const float *master);
    // CRC-32 of the parameters as they would be saved (to prove all ranks hold the same model).
    uint32_t (*params_crc)(struct Backend *b);
    // After update: the step's forward, backward, exposed-communication and optimizer milliseconds
    // into ms[PHASE_FORWARD .. PHASE_OPTIMIZER] (llmc/phase.h; data and eval are the loop's). Where
    // the update still runs on a device, the previous step's optimizer time (reading it would wait).
    void (*step_phases)(struct Backend *b, double ms[NUM_PHASES]);
    // Profiler ranges around the loop's own phases (data, eval): push 1 opens `name`, 0 closes the
    // innermost. NULL where there is no profiler to tell (the CPU trainer; NVTX in the CUDA trainer).
    void (*range)(const char *name, int push);
    // -lg: the device's state (clocks, power, temperature, throttling) into out; 1 if there is one
    // to give. NULL where there is no device (the CPU trainer).
    int (*device_readings)(struct Backend *b, DeviceReadings *out);
} Backend;

#endif  // LLMC_BACKEND_H
