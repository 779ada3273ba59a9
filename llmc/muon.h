/*
 * Muon (-opt muon): the host rules both trainers share. The CPU update is in train_gpt2.c, the
 * CUDA one in llmc/cuda/muon.cuh; train_gpt2.py is the PyTorch twin.
 *
 * What Muon is (Keller Jordan, "Muon: An optimizer for hidden layers in neural networks", 2024;
 * the optimizer of the modded-nanogpt speedrun records and of nanochat; scaled up in Moonshot AI's
 * "Muon is Scalable for LLM Training", 2025). For each 2-D weight matrix W (rows = outputs, cols =
 * inputs) with gradient G:
 *   1. SGD momentum with Nesterov:  buf = mu buf + G,  U = G + mu buf              (mu = -mm, 0.95)
 *   2. orthogonalize U: X = U / (||U||_F + 1e-7), then -mns (5) steps of the quintic Newton-Schulz
 *      iteration  A = X X^T,  X = a X + (b A + c A A) X  with (a, b, c) = (3.4445, -4.7750, 2.0315),
 *      on the wide orientation (X^T when rows > cols, so that A is the smaller Gram matrix). Each
 *      step maps every singular value s of X to p(s) = a s + b s^3 + c s^5 and keeps the singular
 *      vectors, so X tends to U V^T of U's SVD. These coefficients trade exactness for speed: five
 *      steps bring every singular value s >= 0.002 ||U||_F into the band [0.68, 1.21] rather than
 *      to 1, which the post found not to hurt training.
 *   3. W -= lr (scale O + wd W), O the result, wd the decoupled weight decay (-c) as for AdamW.
 * Scaling for non-square shapes: scale = sqrt(max(1, rows / cols)), the rule of Keller Jordan's
 * implementation that modded-nanogpt and nanochat use. O has singular values near 1, so its RMS is
 * 1/sqrt(max(rows, cols)); the factor makes that 1/sqrt(cols) = 1/sqrt(fan-in) for every shape
 * (tall matrices, qkvw and fcw here, would otherwise move less per entry than square ones). We
 * take it rather than Moonlight's 0.2 sqrt(max(rows, cols)), which sets the update's RMS to
 * AdamW's typical 0.2 so that the matrices can share AdamW's learning rate and decay: Muon's
 * matrices have their own learning rate here (-ml, default 0.02 as in Keller Jordan's Muon), so
 * the reason for that rule does not arise.
 *
 * Which parameters: the four matrices of every block (qkvw, attprojw, fcw, fcprojw; each layer's
 * matrix is orthogonalized on its own). The embeddings (wte, with the tied head; wpe), the biases
 * and the LayerNorm parameters stay on AdamW with -l, and -c where AdamW decays. Both groups follow
 * the same schedule (-k, -u, -q): at step s Muon's learning rate is the schedule's value with -ml
 * as its peak.
 *
 * State: Muon's momentum buffer of a matrix lives where AdamW's first moment m of those parameters
 * would; their second moment v stays 0. So the state file keeps its layout (llmc/checkpoint.h;
 * header field [28] says which optimizer wrote it) and re-slices across rank counts unchanged.
 *
 * ZeRO-1 with Muon (train_gpt2cu -z 1): a rank orthogonalizes whole matrices only, so its shard
 * boundaries are moved to matrix edges (muon_zero_shard below): each boundary r*P/W that falls
 * inside a block matrix moves to that matrix's nearer edge, which keeps the shards balanced by
 * size within half a matrix; one that falls elsewhere moves down to the gradient norm's last cut
 * before it (gpt2_norm_chunk_floor, llmc/model_io.h), at most GRAD_NORM_CHUNK - 1 elements.
 */
#ifndef LLMC_MUON_H
#define LLMC_MUON_H

#include <math.h>
#include "model_io.h"

// the quintic Newton-Schulz coefficients of Keller Jordan's Muon, and the normalization's epsilon
#define MUON_NS_A 3.4445f
#define MUON_NS_B (-4.7750f)
#define MUON_NS_C 2.0315f
#define MUON_NORM_EPS 1e-7f

// 1 if tensor i (model_io.h's order) holds block matrices that Muon updates: qkvw, attprojw, fcw, fcprojw
static inline int muon_is_matrix_tensor(int i) { return i == 4 || i == 6 || i == 10 || i == 12; }

// rows (outputs) and cols (inputs) of one layer's matrix of Muon tensor i
static inline void muon_matrix_shape(const GPT2Config *c, int i, int *rows, int *cols) {
    const int C = c->channels;
    *rows = i == 4 ? 3 * C : i == 10 ? 4 * C : C;
    *cols = i == 12 ? 4 * C : C;
}

// the factor of the orthogonalized update for a rows x cols matrix (see the top of the file)
static inline float muon_scale(int rows, int cols) { return sqrtf(rows > cols ? (float)rows / (float)cols : 1.0f); }

/*
 * The flat parameter range [*off, *off + *cnt) of rank r of W under ZeRO-1 with Muon: the even
 * split's boundaries r*P/W, each moved to the nearer edge of the block matrix it falls inside.
 * The ranges tile [0, P) in rank order; a rank may hold nothing when W is large.
 */
static inline size_t muon_zero_boundary(const GPT2Config *c, int r, int W) {
    const size_t P = gpt2_num_params(c);
    size_t b = (size_t)((unsigned long long)P * (unsigned long long)r / (unsigned long long)W);
    size_t sizes[NUM_PARAMETER_TENSORS], start = 0;
    gpt2_param_sizes(sizes, c);
    for (int i = 0; i < NUM_PARAMETER_TENSORS; i++) {
        if (muon_is_matrix_tensor(i) && b > start && b < start + sizes[i]) {
            const size_t per = sizes[i] / (size_t)c->num_layers, lo = start + (b - start) / per * per;
            return b - lo <= lo + per - b ? lo : lo + per;
        }
        start += sizes[i];
    }
    return gpt2_norm_chunk_floor(c, b);  // whole chunks of the gradient norm (model_io.h)
}

static inline void muon_zero_shard(const GPT2Config *c, int W, int r, size_t *off, size_t *cnt) {
    *off = muon_zero_boundary(c, r, W);
    *cnt = muon_zero_boundary(c, r + 1, W) - *off;
}

#endif  // LLMC_MUON_H
