/*
 * GPT-2 training on CPUs: fp32, OpenMP, OpenBLAS matmuls (or a built-in matmul with NO_BLAS),
 * data-parallel across processes with MPI. The numerical reference for the CUDA trainer, and a
 * real fallback where there is no GPU. Same flags, files and step line as train_gpt2cu.
 *
 * This file holds the layers (forward and backward), the model and its Backend; the matrix
 * products are in llmc/cpu_matmul.h, and the training loop, data, checkpoints and everything
 * else shared with the CUDA trainer live in llmc/.
 *
 * Shapes (legend in llmc/model_io.h): B batch, T time, C channels, NH heads, HS = C/NH,
 * L layers, V vocab, Vp padded vocab, OC output channels of a matmul. Tensors are row-major.
 * Backward convention: parameter gradients accumulate (+=) over micro-steps; activation
 * gradients are overwritten (=) unless a function says it accumulates.
 */
#include <math.h>
#include "llmc/utils.h"
#include "llmc/model_io.h"
#include "llmc/gpt2_views.h"
#include "llmc/args.h"
#include "llmc/processes.h"
#include "llmc/backend.h"
#include "llmc/muon.h"
#include "llmc/train_loop.h"
#ifdef _OPENMP
#include <omp.h>
#endif
#include "llmc/libmvec.h"
#include "llmc/cpu_matmul.h"

// ----------------------------------------------------------------------------
// layers

// out (B,T,C) = wte[inp] + wpe[t]
void encoder_forward(float *out, const int *inp, const float *wte, const float *wpe, int B, int T, int C) {
    #pragma omp parallel for collapse(2)
    for (int b = 0; b < B; b++) {
        for (int t = 0; t < T; t++) {
            float *o = out + ((size_t)b * T + t) * C;
            const float *we = wte + (size_t)inp[b * T + t] * C, *wp = wpe + (size_t)t * C;
            for (int i = 0; i < C; i++) { o[i] = we[i] + wp[i]; }
        }
    }
}

// dwte, dwpe += ; dout (B,T,C)
void encoder_backward(float *dwte, float *dwpe, const float *dout, const int *inp, int B, int T, int C) {
    // dwpe: each t owns its row, so t can run in parallel; b in a fixed order
    #pragma omp parallel for
    for (int t = 0; t < T; t++) {
        for (int b = 0; b < B; b++) {
            const float *d = dout + ((size_t)b * T + t) * C;
            float *wp = dwpe + (size_t)t * C;
            for (int i = 0; i < C; i++) { wp[i] += d[i]; }
        }
    }
    // dwte: a token can repeat, so positions go in order (deterministic), channels in parallel
    #pragma omp parallel for
    for (int c0 = 0; c0 < C; c0 += 64) {
        int c1 = c0 + 64 < C ? c0 + 64 : C;
        for (int bt = 0; bt < B * T; bt++) {
            const float *d = dout + (size_t)bt * C;
            float *we = dwte + (size_t)inp[bt] * C;
            for (int i = c0; i < c1; i++) { we[i] += d[i]; }
        }
    }
}

// out (B,T,C) = (inp - mean) * rstd * weight + bias; mean, rstd (B,T) saved for backward
void layernorm_forward(float *out, float *mean, float *rstd, const float *inp, const float *weight, const float *bias,
                       int B, int T, int C) {
    #pragma omp parallel for
    for (int bt = 0; bt < B * T; bt++) {
        const float *x = inp + (size_t)bt * C;
        float m = 0.0f;
        #pragma omp simd reduction(+ : m)
        for (int i = 0; i < C; i++) { m += x[i]; }
        m /= C;
        float v = 0.0f;
        #pragma omp simd reduction(+ : v)
        for (int i = 0; i < C; i++) { float d = x[i] - m; v += d * d; }
        v /= C;
        float s = 1.0f / sqrtf(v + 1e-5f);
        float *o = out + (size_t)bt * C;
        for (int i = 0; i < C; i++) { o[i] = (x[i] - m) * s * weight[i] + bias[i]; }
        mean[bt] = m;
        rstd[bt] = s;
    }
}

// dinp += ; dweight, dbias += . Forward: out = norm * w + b, norm = (x - mean) * rstd.
// d/dx: rstd * (dnorm - mean(dnorm) - norm * mean(dnorm * norm)), dnorm = dout * w
void layernorm_backward(float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                        const float *weight, const float *mean, const float *rstd, int B, int T, int C) {
    #pragma omp parallel for
    for (int bt = 0; bt < B * T; bt++) {
        const float *d = dout + (size_t)bt * C, *x = inp + (size_t)bt * C;
        float m = mean[bt], s = rstd[bt];
        float dnorm_mean = 0.0f, dnorm_norm_mean = 0.0f;
        #pragma omp simd reduction(+ : dnorm_mean, dnorm_norm_mean)
        for (int i = 0; i < C; i++) {
            float dn = d[i] * weight[i];
            dnorm_mean += dn;
            dnorm_norm_mean += dn * (x[i] - m) * s;
        }
        dnorm_mean /= C;
        dnorm_norm_mean /= C;
        float *di = dinp + (size_t)bt * C;
        for (int i = 0; i < C; i++) {
            float norm = (x[i] - m) * s;
            di[i] += s * (d[i] * weight[i] - dnorm_mean - norm * dnorm_norm_mean);
        }
    }
    // parameter gradients: each channel block sums over positions in a fixed order
    #pragma omp parallel for
    for (int c0 = 0; c0 < C; c0 += 64) {
        int c1 = c0 + 64 < C ? c0 + 64 : C;
        for (int bt = 0; bt < B * T; bt++) {
            const float *d = dout + (size_t)bt * C, *x = inp + (size_t)bt * C;
            float m = mean[bt], s = rstd[bt];
            for (int i = c0; i < c1; i++) {
                dbias[i] += d[i];
                dweight[i] += (x[i] - m) * s * d[i];
            }
        }
    }
}

// --- matmuls: the products gemm_nt, gemm_nn and gemm_tn_acc (OpenBLAS, or the built-in kernel of a
// NO_BLAS=1 build) are in llmc/cpu_matmul.h

// out (B,T,OC) = inp (B,T,C) @ weight (OC,C)^T + bias (OC); bias may be NULL
void matmul_forward(float *out, const float *inp, const float *weight, const float *bias, int B, int T, int C, int OC) {
    int M = B * T;
    gemm_nt(out, inp, weight, M, OC, C);
    if (bias != NULL) {
        #pragma omp parallel for
        for (int m = 0; m < M; m++) {
            float *o = out + (size_t)m * OC;
            for (int i = 0; i < OC; i++) { o[i] += bias[i]; }
        }
    }
}

// dinp (B,T,C) = dout @ weight; dweight (OC,C) += dout^T @ inp; dbias (OC) += sum of dout rows
void matmul_backward(float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                     const float *weight, int B, int T, int C, int OC) {
    int M = B * T;
    gemm_nn(dinp, dout, weight, M, OC, C);
    gemm_tn_acc(dweight, dout, inp, M, OC, C);
    if (dbias != NULL) {
        #pragma omp parallel for
        for (int o0 = 0; o0 < OC; o0 += 64) {
            int o1 = o0 + 64 < OC ? o0 + 64 : OC;
            for (int m = 0; m < M; m++) {
                const float *d = dout + (size_t)m * OC;
                for (int o = o0; o < o1; o++) { dbias[o] += d[o]; }
            }
        }
    }
}

// p[i] = exp(p[i] - shift); returns the sum of the results in double
__attribute__((noinline)) static double exp_shift_sum(float *restrict p, float shift, int n) {
    #pragma omp simd
    for (int i = 0; i < n; i++) { p[i] = expf(p[i] - shift); }
    double sum = 0.0;
    #pragma omp simd reduction(+ : sum)
    for (int i = 0; i < n; i++) { sum += p[i]; }
    return sum;
}

/*
 * Causal self-attention as small matrix products: for each head and each block of ATT_ROWS
 * queries t in [r0, r1), the scores against keys 0..r1-1 (the keys past r1 are masked for every
 * query of the block, so they are never computed), their softmax over t2 <= t, and the output from
 * the values 0..r1-1. Each product runs on one thread (gemm_serial, in that thread's workspace) while
 * the threads take heads and blocks in turn, so no result depends on the thread count.
 * inp = qkv (B,T,3C): q, k, v of head h at columns h*HS of each third; out (B,T,C).
 * A block's probabilities live only in the thread's workspace: stats (B,NH,T,2) keeps each query
 * row's largest scaled score and 1/sum of its exponentials, from which the backward recomputes
 * them bit for bit (the same product into the same workspace, the same exp) instead of keeping
 * (B,NH,T,T) of them per layer (2.25 GiB of a d12 step's 7.3 at B=4, T=1024).
 */
#define ATT_ROWS 128

static inline int omp_thread(void) {
#ifdef _OPENMP
    return omp_get_thread_num();
#else
    return 0;
#endif
}

static inline int omp_threads_max(void) {
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

static size_t round_up_16(size_t n) { return (n + 15) / 16 * 16; }  // 64 bytes: the packed operands are vectors

// one thread's attention workspace: A's and B's packed operands, for the largest of its products,
// and a block's (ATT_ROWS, T) probabilities and their gradients; each part a multiple of 64 bytes
typedef struct {
    size_t ap, bp, p, ds, total;  // floats
} AttWorkSize;

static AttWorkSize attention_work_size(int T, int HS) {
    const size_t R = T < ATT_ROWS ? T : ATT_ROWS;
    const size_t shapes[3][3] = {{R, T, HS}, {R, HS, T}, {T, HS, R}};  // rows, cols, inner: scores; out, dq; dk, dv
    AttWorkSize w = {0, 0, round_up_16(R * T), round_up_16(R * T), 0};
    for (int i = 0; i < 3; i++) {
        const size_t a = round_up_16(gemm_chunk_floats(0, shapes[i][0], shapes[i][1], shapes[i][2]));
        const size_t b = round_up_16(gemm_chunk_floats(1, shapes[i][0], shapes[i][1], shapes[i][2]));
        w.ap = a > w.ap ? a : w.ap;
        w.bp = b > w.bp ? b : w.bp;
    }
    w.total = w.ap + w.bp + w.p + w.ds;
    return w;
}

// the workspace of `threads` threads, in floats
static size_t attention_work_floats(int threads, int T, int HS) {
    return (size_t)threads * attention_work_size(T, HS).total;
}

// the attention's workspace: room for this many threads (its parallel loops run at most these),
// each with its part laid out as size says
typedef struct {
    float *mem;  // 64-byte aligned
    int threads;
    AttWorkSize size;
    float *partials;        // the backward's partials of dk and dv (attention_backward)
    size_t partial_floats;  // their room: attention_partial_room's
} AttWorkspace;

// this thread's part of the workspace
typedef struct {
    float *ap, *bp, *p, *ds;
} AttWork;

static AttWork attention_work(const AttWorkspace *ws) {
    const AttWorkSize *n = &ws->size;
    float *mine = ws->mem + (size_t)omp_thread() * n->total;
    AttWork w = {mine, mine + n->ap, mine + n->ap + n->bp, mine + n->ap + n->bp + n->p};
    return w;
}

// one row of scores (query t, its first `width` >= t+1 columns) in place: scaled, softmax over
// columns 0..t, zero past t; stats gets the row's shift (its largest scaled score) and 1/sum
static void attention_softmax_row(float *row, float stats[2], int t, int width, float scale) {
    float maxv = -INFINITY;
    for (int j = 0; j <= t; j++) {
        row[j] *= scale;
        if (row[j] > maxv) { maxv = row[j]; }
    }
    const float inv = (float)(1.0 / exp_shift_sum(row, maxv, t + 1));
    for (int j = 0; j <= t; j++) { row[j] *= inv; }
    for (int j = t + 1; j < width; j++) { row[j] = 0.0f; }
    stats[0] = maxv;
    stats[1] = inv;
}

// the same row again from the same scores and the forward's stats: the same operations, so the
// same bits (exp_shift_sum is one noinline function and the row sits where it sat in the forward)
static void attention_probs_row(float *row, const float stats[2], int t, int width, float scale) {
    for (int j = 0; j <= t; j++) { row[j] *= scale; }
    (void)exp_shift_sum(row, stats[0], t + 1);
    for (int j = 0; j <= t; j++) { row[j] *= stats[1]; }
    for (int j = t + 1; j < width; j++) { row[j] = 0.0f; }
}

// a block's probabilities (n, r1) into the thread's w.p, row stride T: the scores q[r0:r1] . k[0:r1]^T,
// then each row's softmax. The forward writes each row's stats into stats_out; the backward passes
// the forward's as stats_in (stats_out NULL) to recompute the same bits. Both point at row r0's.
static void attention_block_probs(const AttWork *w, const float *q, const float *k, float *stats_out, const float *stats_in,
                                  int r0, int r1, int T, int C3, int HS, float scale) {
    gemm_serial(w->p, T, (GemmOperand){q + (size_t)r0 * C3, C3, 1}, (GemmOperand){k, C3, 1}, r1 - r0, r1, HS, 0, w->ap,
                w->bp);
    for (int t = r0; t < r1; t++) {
        float *row = w->p + (size_t)(t - r0) * T;
        const size_t s = (size_t)(t - r0) * 2;
        if (stats_out) { attention_softmax_row(row, stats_out + s, t, r1, scale); }
        else { attention_probs_row(row, stats_in + s, t, r1, scale); }
    }
}

// queries [from, T) of each sequence (generation's forward, B = 1, has the rows before `from`; training
// computes all, from = 0): the blocks start at `from`
void attention_forward(float *out, float *stats, const float *inp, const AttWorkspace *ws, int B, int T, int from, int C,
                       int NH) {
    const int C3 = 3 * C, HS = C / NH, blocks = (T - from + ATT_ROWS - 1) / ATT_ROWS;
    const float scale = 1.0f / sqrtf((float)HS);
    #pragma omp parallel num_threads(ws->threads)
    {
        const AttWork w = attention_work(ws);
        #pragma omp for collapse(3) schedule(dynamic, 1)
        for (int b = 0; b < B; b++) {
            for (int h = 0; h < NH; h++) {
                for (int blk = 0; blk < blocks; blk++) {
                    const int r0 = from + blk * ATT_ROWS, r1 = r0 + ATT_ROWS < T ? r0 + ATT_ROWS : T, n = r1 - r0;
                    const float *q = inp + (size_t)b * T * C3 + h * HS, *k = q + C, *v = q + 2 * C;
                    float *st = stats + (((size_t)b * NH + h) * T + r0) * 2;  // rows r0..r1-1 of the head's (T, 2)
                    attention_block_probs(&w, q, k, st, NULL, r0, r1, T, C3, HS, scale);
                    // out[r0:r1] (n, HS) = p (n, r1) . v[0:r1]
                    gemm_serial(out + ((size_t)b * T + r0) * C + h * HS, C, (GemmOperand){w.p, T, 1},
                                (GemmOperand){v, 1, C3}, n, HS, r1, 0, w.ap, w.bp);
                }
            }
        }
    }
}

/*
 * The backward's tasks. One (b, h) per task left threads idle where B * NH is small against the
 * thread count (B = 1 at T = 1024 on a 32-core CPU: 12 tasks). So each (b, h) splits its query
 * blocks into attention_groups() contiguous groups of about equal work (block i reads i + 1 blocks
 * of keys), for about ATT_BACKWARD_TASKS tasks in all: a count fixed by the shapes alone, so that no
 * result depends on the thread count. A group's blocks add to dk and dv in order; group 0 into dinp,
 * group g > 0 into a partial of its own (rows 0 up to its last block's end), which a second pass
 * adds to dinp's in group order.
 */
#define ATT_BACKWARD_TASKS 128

static int attention_groups(int B, int NH, int T) {
    const long heads = (long)B * NH, blocks = (T + ATT_ROWS - 1) / ATT_ROWS;
    const long groups = (ATT_BACKWARD_TASKS + heads - 1) / heads;
    return (int)(groups < blocks ? groups : blocks);
}

// the first query block of group g of `groups` (g = groups: `blocks`): the least n whose blocks
// 0..n-1 hold g / groups of the work; a group may be empty (a block's work is not divided)
static int attention_group_start(int g, int groups, int blocks) {
    const long total = (long)blocks * (blocks + 1) / 2;
    int n = 0;
    while ((long)n * (n + 1) / 2 * groups < (long)g * total) { n++; }
    return n;
}

// the partials of the groups past the first: (B * NH, groups - 1, T, 2 * HS) floats, each row dk's HS then dv's
static size_t attention_partial_floats(int B, int NH, int T, int HS) {
    return (size_t)(attention_groups(B, NH, T) - 1) * B * NH * T * 2 * HS;
}

// room for the partials of any batch up to B sequences of T (fewer sequences may split into more
// groups); fewer than 2 * ATT_BACKWARD_TASKS * T * HS floats (64 MiB at T = 1024, HS = 64)
static size_t attention_partial_room(int B, int NH, int T, int HS) {
    size_t most = 0;
    for (int b = 1; b <= B && (long)(b - 1) * NH < ATT_BACKWARD_TASKS; b++) {
        const size_t n = attention_partial_floats(b, NH, T, HS);
        most = n > most ? n : most;
    }
    return most;
}

// the workspace of `threads` threads for sequences of up to T, and the backward's partials for up to
// B sequences of NH heads of HS
static AttWorkspace attention_workspace_alloc(int threads, int B, int NH, int T, int HS) {
    AttWorkspace ws = {NULL, threads, attention_work_size(T, HS), NULL, attention_partial_room(B, NH, T, HS)};
    const size_t work = attention_work_floats(threads, T, HS);
    if (posix_memalign((void **)&ws.mem, 64, work * sizeof(float)) != 0 ||
        posix_memalign((void **)&ws.partials, 64, (ws.partial_floats + 1) * sizeof(float)) != 0) {
        llmc_die("out of host memory allocating %zu bytes for the attention's workspace; use a smaller -t",
                 (work + ws.partial_floats) * sizeof(float));
    }
    return ws;
}

static void attention_workspace_free(AttWorkspace *ws) {
    free(ws->mem);
    free(ws->partials);
}

// group g of (b, h) = bh: its query blocks [first, end) (none where first == end), the rows 0..rows-1
// of dk and dv it adds to, and where a group past the first adds them (rows 2 * HS apart)
typedef struct {
    int first, end, rows;
    float *partial;
} AttGroup;

static AttGroup attention_group(float *partials, int bh, int g, int groups, int blocks, int T, int HS) {
    AttGroup a = {attention_group_start(g, groups, blocks), attention_group_start(g + 1, groups, blocks), 0, NULL};
    a.rows = a.end * ATT_ROWS < T ? a.end * ATT_ROWS : T;
    if (g > 0) { a.partial = partials + ((size_t)bh * (groups - 1) + g - 1) * T * 2 * HS; }
    return a;
}

/*
 * dinp (B,T,3C) = gradient of the forward above. A task is a group of query blocks of one (b, h)
 * (above): it writes its blocks' rows of that head's dq, and adds to its dk and dv (or its partial)
 * block by block. Per block, the probabilities p recomputed from the forward's stats, dp = dy . v^T,
 * the softmax backward ds = p * (dp - rowsum(p * dp)) * scale; then dq = ds . k, dk += ds^T . q,
 * dv += p^T . dy.
 */
void attention_backward(float *dinp, const float *dout, const float *inp, const float *stats, const AttWorkspace *ws, int B,
                        int T, int C, int NH) {
    const int C3 = 3 * C, HS = C / NH, blocks = (T + ATT_ROWS - 1) / ATT_ROWS, groups = attention_groups(B, NH, T);
    const float scale = 1.0f / sqrtf((float)HS);
    if (attention_partial_floats(B, NH, T, HS) > ws->partial_floats) {
        llmc_die("attention_backward: B=%d, T=%d past the workspace's room for partials", B, T);
    }
    #pragma omp parallel num_threads(ws->threads)
    {
        const AttWork w = attention_work(ws);
        #pragma omp for collapse(2) schedule(dynamic, 1)
        for (int bh = 0; bh < B * NH; bh++) {
            for (int g = 0; g < groups; g++) {
                const int b = bh / NH, h = bh % NH;
                const AttGroup grp = attention_group(ws->partials, bh, g, groups, blocks, T, HS);
                if (grp.first == grp.end) { continue; }
                const float *q = inp + (size_t)b * T * C3 + h * HS, *k = q + C, *v = q + 2 * C;
                const float *dy = dout + (size_t)b * T * C + h * HS;
                float *dq = dinp + (size_t)b * T * C3 + h * HS, *dk = dq + C, *dv = dq + 2 * C;
                size_t ld = C3;  // dk's and dv's row stride
                if (grp.partial) {
                    dk = grp.partial;
                    dv = dk + HS;
                    ld = 2 * HS;
                }
                const int zeroed = g == 0 ? T : grp.rows;  // group 0 clears all of dinp's rows: the partials add to them
                for (int t = 0; t < zeroed; t++) {
                    for (int i = 0; i < HS; i++) { dk[(size_t)t * ld + i] = 0.0f; dv[(size_t)t * ld + i] = 0.0f; }
                }
                for (int blk = grp.first; blk < grp.end; blk++) {
                    const int r0 = blk * ATT_ROWS, r1 = r0 + ATT_ROWS < T ? r0 + ATT_ROWS : T, n = r1 - r0;
                    const float *st = stats + (((size_t)b * NH + h) * T + r0) * 2;
                    attention_block_probs(&w, q, k, NULL, st, r0, r1, T, C3, HS, scale);
                    // dv[0:r1] (r1, HS) += p^T (r1, n) . dy[r0:r1]
                    gemm_serial(dv, ld, (GemmOperand){w.p, 1, T}, (GemmOperand){dy + (size_t)r0 * C, 1, C}, r1, HS, n, 1,
                                w.ap, w.bp);
                    // dp (n, r1) = dy[r0:r1] . v[0:r1]^T, then ds in its place
                    gemm_serial(w.ds, T, (GemmOperand){dy + (size_t)r0 * C, C, 1}, (GemmOperand){v, C3, 1}, n, r1, HS, 0,
                                w.ap, w.bp);
                    for (int t = r0; t < r1; t++) {
                        const float *p = w.p + (size_t)(t - r0) * T;
                        float *d = w.ds + (size_t)(t - r0) * T;
                        float dot = 0.0f;
                        #pragma omp simd reduction(+ : dot)
                        for (int j = 0; j <= t; j++) { dot += p[j] * d[j]; }
                        for (int j = 0; j <= t; j++) { d[j] = p[j] * (d[j] - dot) * scale; }
                        for (int j = t + 1; j < r1; j++) { d[j] = 0.0f; }
                    }
                    // dq[r0:r1] (n, HS) = ds (n, r1) . k[0:r1]
                    gemm_serial(dq + (size_t)r0 * C3, C3, (GemmOperand){w.ds, T, 1}, (GemmOperand){k, 1, C3}, n, HS, r1,
                                0, w.ap, w.bp);
                    // dk[0:r1] (r1, HS) += ds^T (r1, n) . q[r0:r1]
                    gemm_serial(dk, ld, (GemmOperand){w.ds, 1, T}, (GemmOperand){q + (size_t)r0 * C3, 1, C3}, r1, HS, n,
                                1, w.ap, w.bp);
                }
            }
        }
        if (groups > 1) {
            // the partials into dinp's dk and dv, a block of rows per task, the groups in order
            #pragma omp for collapse(2) schedule(static)
            for (int bh = 0; bh < B * NH; bh++) {
                for (int blk = 0; blk < blocks; blk++) {
                    const int b = bh / NH, h = bh % NH, r0 = blk * ATT_ROWS, r1 = r0 + ATT_ROWS < T ? r0 + ATT_ROWS : T;
                    float *dk = dinp + (size_t)b * T * C3 + C + h * HS, *dv = dk + C;
                    for (int g = 1; g < groups; g++) {
                        const AttGroup grp = attention_group(ws->partials, bh, g, groups, blocks, T, HS);
                        if (grp.first == grp.end || grp.rows <= r0) { continue; }
                        const float *pk = grp.partial, *pv = pk + HS;
                        for (int t = r0; t < (r1 < grp.rows ? r1 : grp.rows); t++) {
                            #pragma omp simd
                            for (int i = 0; i < HS; i++) {
                                dk[(size_t)t * C3 + i] += pk[(size_t)t * 2 * HS + i];
                                dv[(size_t)t * C3 + i] += pv[(size_t)t * 2 * HS + i];
                            }
                        }
                    }
                }
            }
        }
    }
}

/*
 * Elementwise kernels: the per-element work is in a `restrict` chunk function with `omp simd`
 * so that GCC vectorizes it, tanhf and expf included (glibc's vector math library, declared in
 * llmc/libmvec.h); the OpenMP loop only hands out chunks. Inside an outlined OpenMP loop body GCC
 * does not vectorize these calls, hence noinline.
 */
#define ELEMENTWISE_CHUNK 4096
#define GELU_SCALE 0.7978845608028654f  // sqrt(2/pi)

// out = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
__attribute__((noinline)) static void gelu_forward_chunk(float *restrict out, const float *restrict inp, int n) {
    #pragma omp simd
    for (int i = 0; i < n; i++) {
        float x = inp[i];
        out[i] = 0.5f * x * (1.0f + tanhf(GELU_SCALE * (x + 0.044715f * x * x * x)));
    }
}

// dinp = dout * gelu'(inp); dinp may be dout (in place), so no restrict on those two
__attribute__((noinline)) static void gelu_backward_chunk(float *dinp, const float *restrict inp, const float *dout, int n) {
    #pragma omp simd
    for (int i = 0; i < n; i++) {
        float x = inp[i];
        float th = tanhf(GELU_SCALE * (x + 0.044715f * x * x * x));
        float sech2 = 1.0f - th * th;
        float local = 0.5f * (1.0f + th) + 0.5f * x * sech2 * GELU_SCALE * (1.0f + 3.0f * 0.044715f * x * x);
        dinp[i] = local * dout[i];
    }
}

__attribute__((noinline)) static void add_chunk(float *restrict out, const float *restrict a, const float *restrict b, int n) {
    #pragma omp simd
    for (int i = 0; i < n; i++) { out[i] = a[i] + b[i]; }
}

void gelu_forward(float *out, const float *inp, size_t N) {
    #pragma omp parallel for
    for (size_t i = 0; i < N; i += ELEMENTWISE_CHUNK) {
        gelu_forward_chunk(out + i, inp + i, (int)(N - i < ELEMENTWISE_CHUNK ? N - i : ELEMENTWISE_CHUNK));
    }
}

void gelu_backward(float *dinp, const float *inp, const float *dout, size_t N) {
    #pragma omp parallel for
    for (size_t i = 0; i < N; i += ELEMENTWISE_CHUNK) {
        gelu_backward_chunk(dinp + i, inp + i, dout + i, (int)(N - i < ELEMENTWISE_CHUNK ? N - i : ELEMENTWISE_CHUNK));
    }
}

// out = a + b
void residual_forward(float *out, const float *a, const float *b, size_t N) {
    #pragma omp parallel for
    for (size_t i = 0; i < N; i += ELEMENTWISE_CHUNK) {
        add_chunk(out + i, a + i, b + i, (int)(N - i < ELEMENTWISE_CHUNK ? N - i : ELEMENTWISE_CHUNK));
    }
}

/*
 * Classifier: logits (B,T,Vp) are turned in place into probabilities over the V real tokens
 * (padded columns set to 0); losses (B,T) = -log p[target] when targets is not NULL.
 */
void softmax_crossentropy_forward(float *logits, float *losses, const int *targets, int B, int T, int V, int Vp) {
    #pragma omp parallel for
    for (int bt = 0; bt < B * T; bt++) {
        float *p = logits + (size_t)bt * Vp;
        float maxv = -INFINITY;
        for (int i = 0; i < V; i++) { if (p[i] > maxv) { maxv = p[i]; } }
        double sum = exp_shift_sum(p, maxv, V);  // V terms: summed in double so the loss keeps fp32 accuracy
        float inv = (float)(1.0 / sum);
        for (int i = 0; i < V; i++) { p[i] *= inv; }
        for (int i = V; i < Vp; i++) { p[i] = 0.0f; }
        if (targets != NULL) { losses[bt] = -logf(p[targets[bt]]); }
    }
}

// probs (B,T,Vp) become dlogits = (probs - onehot(target)) * dloss, in place
void softmax_crossentropy_backward(float *probs, const int *targets, float dloss, int B, int T, int V, int Vp) {
    #pragma omp parallel for
    for (int bt = 0; bt < B * T; bt++) {
        float *p = probs + (size_t)bt * Vp;
        for (int i = 0; i < V; i++) { p[i] *= dloss; }
        p[targets[bt]] -= dloss;
    }
}

// AdamW on n elements. Decoupled weight decay: p -= lr * (mhat / (sqrt(vhat) + eps) + wd * p),
// mhat = m / (1 - beta1^t), vhat = v / (1 - beta2^t). Memory-bound: one pass over four arrays.
__attribute__((noinline)) static void adamw_chunk(float *restrict params, const float *restrict grads, float *restrict m, float *restrict v, int n,
                        float lr, float beta1, float beta2, float eps, float wd, float grad_scale, float inv_bc1,
                        float inv_bc2) {
    #pragma omp simd
    for (int i = 0; i < n; i++) {
        float g = grads[i] * grad_scale;
        float mi = beta1 * m[i] + (1.0f - beta1) * g;
        float vi = beta2 * v[i] + (1.0f - beta2) * g * g;
        m[i] = mi;
        v[i] = vi;
        params[i] -= lr * ((mi * inv_bc1) / (sqrtf(vi * inv_bc2) + eps) + wd * params[i]);
    }
}

// AdamW with the settings o (llmc/optimizer.h) on n elements; decay: 1 if weight decay applies
void adamw_update(float *params, const float *grads, float *m, float *v, size_t n, const OptSettings *o, int decay) {
    const float beta1 = o->beta1, beta2 = o->beta2;
    float inv_bc1 = 1.0f / (1.0f - powf(beta1, (float)o->t)), inv_bc2 = 1.0f / (1.0f - powf(beta2, (float)o->t));
    #pragma omp parallel for
    for (size_t i = 0; i < n; i += ELEMENTWISE_CHUNK) {
        adamw_chunk(params + i, grads + i, m + i, v + i, (int)(n - i < ELEMENTWISE_CHUNK ? n - i : ELEMENTWISE_CHUNK), o->lr,
                    beta1, beta2, o->eps, decay ? o->weight_decay : 0.0f, o->grad_scale, inv_bc1, inv_bc2);
    }
}

/*
 * Muon on one rows x cols matrix (llmc/muon.h has the algorithm and its sources), all in fp32:
 * p (rows, cols) the parameters, g their gradient, buf the momentum (in the m slot), scratch
 * muon_scratch_floats(rows, cols) floats. Newton-Schulz runs on the wide orientation X (r, c),
 * r = min(rows, cols), c = max(rows, cols): X is the normalized update, transposed when rows > cols.
 */
static size_t muon_scratch_floats(int rows, int cols) {
    const size_t r = rows < cols ? rows : cols, c = rows < cols ? cols : rows;
    return 2 * r * c + 2 * r * r;
}

void muon_update(float *p, const float *g, float *buf, int rows, int cols, const OptSettings *o, float *scratch) {
    const int tall = rows > cols, r = tall ? cols : rows, c = tall ? rows : cols;
    const size_t n = (size_t)rows * cols;
    const float mu = o->muon_momentum, gs = o->grad_scale;
    float *X = scratch, *Y = X + n, *A = Y + n, *AA = A + (size_t)r * r;
    // 1. Nesterov momentum: buf = mu buf + g, U = g + mu buf (into Y, in p's layout)
    double sumsq = 0.0;
    #pragma omp parallel for reduction(+ : sumsq)
    for (size_t i = 0; i < n; i++) {
        const float gi = g[i] * gs, bi = mu * buf[i] + gi, u = gi + mu * bi;
        buf[i] = bi;
        Y[i] = u;
        sumsq += (double)u * u;
    }
    // 2. X = U / (||U||_F + eps), wide
    const float inv = 1.0f / ((float)sqrt(sumsq) + MUON_NORM_EPS);
    #pragma omp parallel for
    for (int i = 0; i < rows; i++) {
        for (int j = 0; j < cols; j++) {
            X[tall ? (size_t)j * c + i : (size_t)i * c + j] = Y[(size_t)i * cols + j] * inv;
        }
    }
    // 3. Newton-Schulz: A = X X^T, B = b A + c A A (into A), X = a X + B X
    for (int k = 0; k < o->muon_ns_steps; k++) {
        gemm_nt(A, X, X, r, r, c);
        gemm_nt(AA, A, A, r, r, r);  // A A^T = A A: A is symmetric
        #pragma omp parallel for
        for (size_t i = 0; i < (size_t)r * r; i++) { A[i] = MUON_NS_B * A[i] + MUON_NS_C * AA[i]; }
        gemm_nn(Y, A, X, r, r, c);
        #pragma omp parallel for
        for (size_t i = 0; i < n; i++) { X[i] = MUON_NS_A * X[i] + Y[i]; }
    }
    // 4. p -= lr (scale O + wd p), O = X in p's layout
    const float lr = o->muon_lr, scale = muon_scale(rows, cols), wd = o->weight_decay;
    #pragma omp parallel for
    for (int i = 0; i < rows; i++) {
        for (int j = 0; j < cols; j++) {
            const float oij = X[tall ? (size_t)j * c + i : (size_t)i * c + j];
            float *pij = p + (size_t)i * cols + j;
            *pij -= lr * (scale * oij + wd * *pij);
        }
    }
}

// ----------------------------------------------------------------------------
// the model

GPT2_DECLARE_VIEWS(float)  // ParameterTensors, LayerParams, point_parameters, layer_params

// activations of the forward pass, sized for the maximum B and T; per-layer tensors are stacked
typedef struct {
    float *encoded;    // (B, T, C)
    float *ln1;        // (L, B, T, C)
    float *ln1_mean;   // (L, B, T)
    float *ln1_rstd;   // (L, B, T)
    float *qkv;        // (L, B, T, 3C)
    float *atty;       // (L, B, T, C)
    float *att_stats;  // (L, B, NH, T, 2) each query row's softmax shift and 1/sum
    float *residual2;  // (L, B, T, C)
    float *ln2;        // (L, B, T, C)
    float *ln2_mean;   // (L, B, T)
    float *ln2_rstd;   // (L, B, T)
    float *fch;        // (L, B, T, 4C)
    float *fch_gelu;   // (L, B, T, 4C)
    float *residual3;  // (L, B, T, C)
    float *lnf;        // (B, T, C)
    float *lnf_mean;   // (B, T)
    float *lnf_rstd;   // (B, T)
    float *logits;     // (B, T, Vp): logits, then probabilities, then their gradient
    float *losses;     // (B, T)
    // backward scratch, one layer at a time
    float *dresidual;  // (B, T, C) gradient of the residual stream
    float *dbuf_c;     // (B, T, C)
    float *dbuf_4c;    // (B, T, 4C)
    float *dbuf_3c;    // (B, T, 3C)
    float *proj;       // (B, T, C) output of a residual projection before the add
} ActivationTensors;

typedef struct {
    GPT2Config config;
    size_t param_sizes[NUM_PARAMETER_TENSORS];
    size_t num_params;
    float *params_memory;
    float *grads_memory;
    float *m_memory;
    float *v_memory;
    float *muon_scratch;  // Newton-Schulz buffers (-opt muon), allocated at the first Muon update
    ParameterTensors params;
    ParameterTensors grads;
    ActivationTensors acts;
    float *acts_memory;
    AttWorkspace att_work;  // for the threads OpenMP would run when the model was built
    int batch_size;   // the maxima acts were sized for
    int seq_len;
    int *targets_copy;  // (B, T) the targets of the last forward, for backward
    int *inputs_copy;   // (B, T)
    double step_loss;   // sum of micro-batch mean losses in the current step
    double phase_ms[NUM_PHASES];  // the current step's forward, backward, comm, optimizer (wall clock)
    Comm *comm;
} GPT2;

// one activation tensor: where its pointer goes, how many floats, its row of the memory plan
typedef struct {
    float **ptr;
    size_t count;
    PlanRow row;
} ActSlot;
#define MAX_ACT_SLOTS 32  // the size of the callers' arrays

static int gpt2_activation_slots(ActSlot *slots, ActivationTensors *a, const GPT2Config *c, int B, int T) {
    const size_t L = c->num_layers, C = c->channels, NH = c->num_heads, Vp = c->padded_vocab_size, BT = (size_t)B * T;
    const PlanRow ACT = PLAN_ACTS, SCR = PLAN_SCRATCH;
    ActSlot table[] = {
        {&a->encoded, BT * C, ACT},      {&a->ln1, L * BT * C, ACT},        {&a->ln1_mean, L * BT, ACT},
        {&a->ln1_rstd, L * BT, ACT},     {&a->qkv, L * BT * 3 * C, ACT},    {&a->atty, L * BT * C, ACT},
        {&a->att_stats, L * B * NH * (size_t)T * 2, PLAN_ATTENTION},      {&a->residual2, L * BT * C, ACT},
        {&a->ln2, L * BT * C, ACT},      {&a->ln2_mean, L * BT, ACT},       {&a->ln2_rstd, L * BT, ACT},
        {&a->fch, L * BT * 4 * C, ACT},  {&a->fch_gelu, L * BT * 4 * C, ACT}, {&a->residual3, L * BT * C, ACT},
        {&a->lnf, BT * C, ACT},          {&a->lnf_mean, BT, ACT},           {&a->lnf_rstd, BT, ACT},
        {&a->logits, BT * Vp, PLAN_LOGITS}, {&a->losses, BT, ACT},          {&a->dresidual, BT * C, SCR},
        {&a->dbuf_c, BT * C, SCR},       {&a->dbuf_4c, BT * 4 * C, SCR},    {&a->dbuf_3c, BT * 3 * C, SCR},
        {&a->proj, BT * C, SCR},
    };
    const int n = (int)(sizeof(table) / sizeof(table[0]));
    _Static_assert(sizeof(table) / sizeof(table[0]) <= MAX_ACT_SLOTS, "raise MAX_ACT_SLOTS");
    for (int i = 0; i < n; i++) { slots[i] = table[i]; }
    return n;
}

/*
 * The floats of matmul scratch buffer `which` (0, 1, llmc/cpu_matmul.h) that a training step of
 * B x T takes: the most any of the model's matmuls takes. The model reserves them when it is
 * built, and the memory plan counts them.
 */
static size_t gpt2_matmul_scratch_floats(int which, const GPT2Config *c, int B, int T) {
    const size_t C = c->channels, M = (size_t)B * T;
    const size_t shapes[5][2] = {{C, c->padded_vocab_size}, {C, 3 * C}, {C, C}, {C, 4 * C}, {4 * C, C}};  // (K, N)
    size_t most = 0;
    for (int i = 0; i < 5; i++) {
        const size_t need = gemm_scratch_floats(which, M, shapes[i][1], shapes[i][0]);
        if (need > most) { most = need; }
    }
    return most;
}

static void gpt2_alloc_activations(GPT2 *m, int B, int T) {
    ActSlot slots[MAX_ACT_SLOTS] = {{0}};  // all set by gpt2_activation_slots (zeroed: gcc cannot tell)
    const int n = gpt2_activation_slots(slots, &m->acts, &m->config, B, T);
    size_t total = 0;
    for (int i = 0; i < n; i++) { total += slots[i].count; }
    m->acts_memory = (float *)host_alloc_huge(total * sizeof(float), "the activations");
    float *p = m->acts_memory;
    for (int i = 0; i < n; i++) { *slots[i].ptr = p; p += slots[i].count; }
    m->batch_size = B;
    m->seq_len = T;
    m->targets_copy = (int *)mallocCheck((size_t)B * T * sizeof(int));
    m->inputs_copy = (int *)mallocCheck((size_t)B * T * sizeof(int));
    for (int which = 0; which < 2; which++) { gemm_reserve(which, gpt2_matmul_scratch_floats(which, &m->config, B, T)); }
    m->att_work = attention_workspace_alloc(omp_threads_max(), B, m->config.num_heads, T,
                                            m->config.channels / m->config.num_heads);
}

// allocate parameters, gradients, optimizer state and activations; params are uninitialised.
// planner (NULL: no check): stops with the plan's figures when they exceed the RAM available
void gpt2_build(GPT2 *m, const GPT2Config *config, int B, int T, const Planner *planner) {
    // -b and -t can make the activations' counts overflow 64 bits, and the plan's sums with them:
    // bounded in double first (16C per layer and token, and the logits), so that an absurd -b or -t
    // is one line, not a crash
    const double act_bytes =
        4.0 * B * (double)T * (16.0 * config->num_layers * config->channels + config->padded_vocab_size);
    if (act_bytes > 1e18) {
        llmc_die("-b %d -t %d: the activations alone would take %.3g GiB; use a smaller -b or -t", B, T,
                 act_bytes / PLAN_GiB);
    }
    if (planner && planner->dev.known) {
        MemPlan p;
        memset(&p, 0, sizeof(p));
        planner->fn(planner->ctx, B, 0, &p);
        const size_t need = plan_total(&p, 1);
        if (need > planner->dev.free) {
            llmc_die("B=%d T=%d needs %.2f GiB of RAM per process (parameters, gradients and AdamW %.2f, activations and "
                     "attention %.2f, logits %.2f) but %s; use a smaller -b or -t, or -b auto (--plan 1 prints the plan)",
                     B, T, need / PLAN_GiB, (p.device[PLAN_PARAMS] + p.device[PLAN_GRADS] + p.device[PLAN_ADAMW]) / PLAN_GiB,
                     (p.device[PLAN_ACTS] + p.device[PLAN_ATTENTION]) / PLAN_GiB, p.device[PLAN_LOGITS] / PLAN_GiB, planner->dev.what);
        }
    }
    memset(m, 0, sizeof(*m));
    m->config = *config;
    gpt2_param_sizes(m->param_sizes, config);
    m->num_params = gpt2_num_params(config);
    m->params_memory = (float *)host_alloc_huge(m->num_params * sizeof(float), "the parameters");
    m->grads_memory = (float *)host_alloc_huge(m->num_params * sizeof(float), "the gradients");
    m->m_memory = (float *)host_alloc_huge(m->num_params * sizeof(float), "AdamW's first moments");
    m->v_memory = (float *)host_alloc_huge(m->num_params * sizeof(float), "AdamW's second moments");
    point_parameters(&m->params, m->params_memory, m->param_sizes);
    point_parameters(&m->grads, m->grads_memory, m->param_sizes);
    gpt2_alloc_activations(m, B, T);
}

void gpt2_free(GPT2 *m) {
    host_free_huge(m->params_memory); host_free_huge(m->grads_memory); host_free_huge(m->m_memory);
    host_free_huge(m->v_memory); host_free_huge(m->acts_memory);
    free(m->muon_scratch); attention_workspace_free(&m->att_work); free(m->targets_copy); free(m->inputs_copy);
}

// load parameters from a model file (v3 or v5); the file must match the built config
void gpt2_load(GPT2 *m, const char *path) {
    ModelFileInfo info;
    model_file_info(path, &info);
    model_file_require_config(path, &info, &m->config, "pass the matching -e descriptor, or the file alone as -e");
    model_file_load(path, &info, m->params_memory, NULL);
}

// layer l's slices of the stacked activations at runtime B and T (the forward writes them, the
// backward reads them: one definition of where each lives)
typedef struct {
    const float *residual;  // (B, T, C) the layer's input: the embedding or the previous layer's output
    float *ln1, *ln1_mean, *ln1_rstd, *qkv, *atty, *att_stats, *residual2;
    float *ln2, *ln2_mean, *ln2_rstd, *fch, *fch_gelu, *residual3;
} LayerActs;

static LayerActs layer_acts(GPT2 *m, int l, int B, int T) {
    ActivationTensors *a = &m->acts;
    size_t C = m->config.channels, NH = m->config.num_heads, BT = (size_t)B * T;
    LayerActs la;
    la.residual = l == 0 ? a->encoded : a->residual3 + (l - 1) * BT * C;
    la.ln1 = a->ln1 + l * BT * C;
    la.ln1_mean = a->ln1_mean + l * BT;
    la.ln1_rstd = a->ln1_rstd + l * BT;
    la.qkv = a->qkv + l * BT * 3 * C;
    la.atty = a->atty + l * BT * C;
    la.att_stats = a->att_stats + l * B * NH * T * 2;
    la.residual2 = a->residual2 + l * BT * C;
    la.ln2 = a->ln2 + l * BT * C;
    la.ln2_mean = a->ln2_mean + l * BT;
    la.ln2_rstd = a->ln2_rstd + l * BT;
    la.fch = a->fch + l * BT * 4 * C;
    la.fch_gelu = a->fch_gelu + l * BT * 4 * C;
    la.residual3 = a->residual3 + l * BT * C;
    return la;
}

/*
 * The forward up to the logits of B sequences laid out as (B, T), of each the rows [from, to) only.
 * Training computes all of them (from 0 to T). Generation's forward (B = 1, T the model's whole
 * window, so that the layout stays put as the text grows) computes its new tokens' rows on the
 * activations of the rows before `from`, which an earlier call left there for the same tokens:
 * every operation but the attention is per row, and a row's attention reads only the rows up to it.
 */
static void gpt2_forward_span(GPT2 *m, const int *inputs, int B, int T, int from, int to) {
    if (B > m->batch_size || T > m->seq_len || from < 0 || from >= to || to > T || (B > 1 && (from > 0 || to < T))) {
        llmc_die("internal: forward with B=%d T=%d rows %d..%d, built for B=%d T=%d", B, T, from, to, m->batch_size,
                 m->seq_len);
    }
    const int C = m->config.channels, NH = m->config.num_heads, L = m->config.num_layers, Vp = m->config.padded_vocab_size;
    const size_t o = from, N = (size_t)B * to - from;  // the first row computed, and how many (B = 1, or all rows)
    ParameterTensors *p = &m->params;
    ActivationTensors *a = &m->acts;
    memcpy(m->inputs_copy + o, inputs + o, N * sizeof(int));

    encoder_forward(a->encoded + o * C, inputs + o, p->wte, p->wpe + o * C, B, to - from, C);
    for (int l = 0; l < L; l++) {
        LayerParams lp = layer_params(p, &m->config, l);
        LayerActs la = layer_acts(m, l, B, T);
        // residual2 = residual + attproj(attention(qkv(ln1(residual))))
        layernorm_forward(la.ln1 + o * C, la.ln1_mean + o, la.ln1_rstd + o, la.residual + o * C, lp.ln1w, lp.ln1b, 1, N, C);
        matmul_forward(la.qkv + o * 3 * C, la.ln1 + o * C, lp.qkvw, lp.qkvb, 1, N, C, 3 * C);
        attention_forward(la.atty, la.att_stats, la.qkv, &m->att_work, B, to, from, C, NH);  // B = 1 or to = T
        matmul_forward(a->proj + o * C, la.atty + o * C, lp.attprojw, lp.attprojb, 1, N, C, C);
        residual_forward(la.residual2 + o * C, la.residual + o * C, a->proj + o * C, N * C);
        // residual3 = residual2 + fcproj(gelu(fc(ln2(residual2))))
        layernorm_forward(la.ln2 + o * C, la.ln2_mean + o, la.ln2_rstd + o, la.residual2 + o * C, lp.ln2w, lp.ln2b, 1, N,
                          C);
        matmul_forward(la.fch + o * 4 * C, la.ln2 + o * C, lp.fcw, lp.fcb, 1, N, C, 4 * C);
        gelu_forward(la.fch_gelu + o * 4 * C, la.fch + o * 4 * C, N * 4 * C);
        matmul_forward(a->proj + o * C, la.fch_gelu + o * 4 * C, lp.fcprojw, lp.fcprojb, 1, N, 4 * C, C);
        residual_forward(la.residual3 + o * C, la.residual2 + o * C, a->proj + o * C, N * C);
    }
    const float *last = a->residual3 + (L - 1) * (size_t)B * T * C;
    layernorm_forward(a->lnf + o * C, a->lnf_mean + o, a->lnf_rstd + o, last + o * C, p->lnfw, p->lnfb, 1, N, C);
    matmul_forward(a->logits + o * Vp, a->lnf + o * C, p->wte, NULL, 1, N, C, Vp);
}

// forward pass up to the logits for B sequences of T tokens (B, T at most the built sizes):
// acts.logits (B, T, Vp) holds the raw logits afterwards
void gpt2_forward_logits(GPT2 *m, const int *inputs, int B, int T) { gpt2_forward_span(m, inputs, B, T, 0, T); }

/*
 * Forward pass for B sequences of T tokens. With targets, fills acts.losses (B,T) and returns
 * their mean; without, returns 0. Leaves probabilities in acts.logits.
 */
float gpt2_forward(GPT2 *m, const int *inputs, const int *targets, int B, int T) {
    gpt2_forward_logits(m, inputs, B, T);
    const size_t BT = (size_t)B * T;
    ActivationTensors *a = &m->acts;
    if (targets) { memcpy(m->targets_copy, targets, BT * sizeof(int)); }
    softmax_crossentropy_forward(a->logits, a->losses, targets, B, T, m->config.vocab_size, m->config.padded_vocab_size);
    if (!targets) { return 0.0f; }
    double sum = 0.0;
    for (size_t i = 0; i < BT; i++) { sum += a->losses[i]; }
    return (float)(sum / BT);
}

// backward of the last forward (which had targets); gradients accumulate into m->grads
void gpt2_backward(GPT2 *m, float dloss, int B, int T) {
    const int C = m->config.channels, NH = m->config.num_heads, L = m->config.num_layers;
    const int V = m->config.vocab_size, Vp = m->config.padded_vocab_size;
    const size_t BT = (size_t)B * T;
    ParameterTensors *p = &m->params, *g = &m->grads;
    ActivationTensors *a = &m->acts;

    softmax_crossentropy_backward(a->logits, m->targets_copy, dloss, B, T, V, Vp);
    // logits = lnf @ wte^T
    matmul_backward(a->dbuf_c, g->wte, NULL, a->logits, a->lnf, p->wte, B, T, C, Vp);
    memset(a->dresidual, 0, BT * C * sizeof(float));
    const float *last = a->residual3 + (L - 1) * BT * C;
    layernorm_backward(a->dresidual, g->lnfw, g->lnfb, a->dbuf_c, last, p->lnfw, a->lnf_mean, a->lnf_rstd, B, T, C);

    for (int l = L - 1; l >= 0; l--) {
        LayerParams lp = layer_params(p, &m->config, l), lg = layer_params(g, &m->config, l);
        LayerActs la = layer_acts(m, l, B, T);
        // residual3 = residual2 + fcproj(gelu(fc(ln2(residual2)))): dresidual passes through unchanged
        matmul_backward(a->dbuf_4c, lg.fcprojw, lg.fcprojb, a->dresidual, la.fch_gelu, lp.fcprojw, B, T, 4 * C, C);
        gelu_backward(a->dbuf_4c, la.fch, a->dbuf_4c, BT * 4 * C);
        matmul_backward(a->dbuf_c, lg.fcw, lg.fcb, a->dbuf_4c, la.ln2, lp.fcw, B, T, C, 4 * C);
        layernorm_backward(a->dresidual, lg.ln2w, lg.ln2b, a->dbuf_c, la.residual2, lp.ln2w, la.ln2_mean, la.ln2_rstd, B,
                           T, C);
        // residual2 = residual + attproj(attention(qkv(ln1(residual))))
        matmul_backward(a->dbuf_c, lg.attprojw, lg.attprojb, a->dresidual, la.atty, lp.attprojw, B, T, C, C);
        attention_backward(a->dbuf_3c, a->dbuf_c, la.qkv, la.att_stats, &m->att_work, B, T, C, NH);
        matmul_backward(a->dbuf_c, lg.qkvw, lg.qkvb, a->dbuf_3c, la.ln1, lp.qkvw, B, T, C, 3 * C);
        layernorm_backward(a->dresidual, lg.ln1w, lg.ln1b, a->dbuf_c, la.residual, lp.ln1w, la.ln1_mean, la.ln1_rstd, B, T,
                           C);
    }
    encoder_backward(g->wte, g->wpe, a->dresidual, m->inputs_copy, B, T, C);
}

// AdamW over all tensors (weight decay only on the 2-D ones), or with o->muon, Muon on each
// layer's block matrices and AdamW on the rest
void gpt2_update(GPT2 *m, const OptSettings *o) {
    const int L = m->config.num_layers, C = m->config.channels;
    if (o->muon && m->muon_scratch == NULL) {  // the largest matrix: fcw (4C, C) and fcprojw (C, 4C)
        m->muon_scratch = (float *)mallocCheck(muon_scratch_floats(4 * C, C) * sizeof(float));
    }
    size_t off = 0;
    for (int i = 0; i < NUM_PARAMETER_TENSORS; i++) {
        if (o->muon && muon_is_matrix_tensor(i)) {
            int rows, cols;
            muon_matrix_shape(&m->config, i, &rows, &cols);
            for (int l = 0; l < L; l++) {
                const size_t k = off + (size_t)l * rows * cols;
                muon_update(m->params_memory + k, m->grads_memory + k, m->m_memory + k, rows, cols, o, m->muon_scratch);
            }
        } else {
            adamw_update(m->params_memory + off, m->grads_memory + off, m->m_memory + off, m->v_memory + off,
                         m->param_sizes[i], o, gpt2_param_is_decayed(i));
        }
        off += m->param_sizes[i];
    }
}

// global L2 norm of the gradients (same on every rank after the all-reduce)
float gpt2_grad_norm(GPT2 *m) {
    double sum = 0.0;
    #pragma omp parallel for reduction(+ : sum)
    for (size_t i = 0; i < m->num_params; i++) { sum += (double)m->grads_memory[i] * m->grads_memory[i]; }
    return (float)sqrt(sum);
}


// ----------------------------------------------------------------------------
// the Backend for the shared training loop

// adds the milliseconds since *t to phase p of the step and moves *t to now
static void cpu_phase(GPT2 *m, Phase p, double *t) {
    const double now = llmc_wall_seconds();
    m->phase_ms[p] += (now - *t) * 1000.0;
    *t = now;
}

static void cpu_train_micro_step(Backend *b, const int *inputs, const int *targets, int B, int T, float dloss, int k, int n) {
    GPT2 *m = (GPT2 *)b->self;
    double t = llmc_wall_seconds();
    if (k == 0) {
        memset(m->grads_memory, 0, m->num_params * sizeof(float));
        m->step_loss = 0.0;
        memset(m->phase_ms, 0, sizeof(m->phase_ms));
    }
    m->step_loss += gpt2_forward(m, inputs, targets, B, T);
    cpu_phase(m, PHASE_FORWARD, &t);
    gpt2_backward(m, dloss, B, T);
    cpu_phase(m, PHASE_BACKWARD, &t);
    (void)n;
}

static double cpu_step_loss_sum(Backend *b) { return ((GPT2 *)b->self)->step_loss; }

// the all-reduce has nothing to overlap with on the CPU: all of it is exposed
static float cpu_reduce_grads(Backend *b) {
    GPT2 *m = (GPT2 *)b->self;
    double t = llmc_wall_seconds();
#ifdef USE_MPI
    if (m->comm->world_size > 1) { comm_mpi_allreduce_sum_f32(m->comm, m->grads_memory, m->num_params); }
#endif
    cpu_phase(m, PHASE_COMM, &t);
    float norm = gpt2_grad_norm(m);
    cpu_phase(m, PHASE_OPTIMIZER, &t);
    return norm;
}

// fp32 parameters: no stochastic rounding, o->seed is not used
static void cpu_update(Backend *b, const OptSettings *o) {
    GPT2 *m = (GPT2 *)b->self;
    double t0 = llmc_wall_seconds();
    gpt2_update(m, o);
    cpu_phase(m, PHASE_OPTIMIZER, &t0);
}

static void cpu_step_phases(Backend *b, double ms[NUM_PHASES]) {
    GPT2 *m = (GPT2 *)b->self;
    for (int p = PHASE_FORWARD; p <= PHASE_OPTIMIZER; p++) { ms[p] = m->phase_ms[p]; }
}

static void cpu_forward_losses(Backend *b, const int *inputs, const int *targets, int B, int T, float *losses) {
    GPT2 *m = (GPT2 *)b->self;
    gpt2_forward(m, inputs, targets, B, T);
    memcpy(losses, m->acts.losses, (size_t)B * T * sizeof(float));
}

// generation: rows laid out as one sequence of the whole window (m->seq_len), so that a growing
// text keeps its rows where they are and each call computes only the tokens after `cached`
// (the rows of an earlier call's tokens are only read: the text's new rows cost what one token's
// forward costs, not what the whole text's does)
static void cpu_forward_probs(Backend *b, const int *tokens, int T, int pos, int cached, float *probs) {
    GPT2 *m = (GPT2 *)b->self;
    const int Vp = m->config.padded_vocab_size, from = cached < pos ? cached : pos;
    gpt2_forward_span(m, tokens, 1, m->seq_len, from, T);
    float *rows = m->acts.logits + (size_t)from * Vp;
    softmax_crossentropy_forward(rows, m->acts.losses + from, NULL, 1, T - from, m->config.vocab_size, Vp);
    memcpy(probs, m->acts.logits + (size_t)pos * Vp, m->config.vocab_size * sizeof(float));
}

static void cpu_copy_params(Backend *b, size_t offset, size_t count, void *dst) {
    memcpy(dst, ((GPT2 *)b->self)->params_memory + offset, count * sizeof(float));
}

static void cpu_load_model(Backend *b, const char *path) { gpt2_load((GPT2 *)b->self, path); }

static void cpu_get_opt_state(Backend *b, size_t offset, size_t count, float *mo, float *vo, float *master) {
    GPT2 *m = (GPT2 *)b->self;
    memcpy(mo, m->m_memory + offset, count * sizeof(float));
    memcpy(vo, m->v_memory + offset, count * sizeof(float));
    (void)master;
}

static void cpu_set_opt_state(Backend *b, size_t offset, size_t count, const float *mi, const float *vi, const float *master) {
    GPT2 *m = (GPT2 *)b->self;
    memcpy(m->m_memory + offset, mi, count * sizeof(float));
    memcpy(m->v_memory + offset, vi, count * sizeof(float));
    // fp32 training: the parameters are the master weights, and a train_gpt2cu checkpoint's are the
    // exact values behind its bf16 model file
    if (master) { memcpy(m->params_memory + offset, master, count * sizeof(float)); }
}

static uint32_t cpu_params_crc(Backend *b) {
    GPT2 *m = (GPT2 *)b->self;
    return crc32_update(0, m->params_memory, m->num_params * sizeof(float));
}

void gpt2_make_backend(Backend *b, GPT2 *m, int T) {
    memset(b, 0, sizeof(*b));
    b->self = m;
    static char name[128], kernel[96];
    gemm_kernel_name(kernel, sizeof(kernel));
    snprintf(name, sizeof(name), "cpu (fp32, %s)", kernel);
    b->name = name;
    b->config = m->config;
    b->num_params = m->num_params;
    b->B = m->batch_size;
    b->T = m->seq_len;
    b->has_master = 0;
    b->kernels = (KernelChoices){-1, -1, -1, -1};  // every activation kept; one kernel of each
    b->opt_offset = 0;
    b->opt_count = m->num_params;
    b->flops_per_token = gpt2_flops_per_token(&m->config, T);
    b->peak_flops = 0.0;
    b->train_micro_step = cpu_train_micro_step;
    b->step_loss_sum = cpu_step_loss_sum;
    b->reduce_grads = cpu_reduce_grads;
    b->update = cpu_update;
    b->forward_losses = cpu_forward_losses;
    b->forward_probs = cpu_forward_probs;
    b->model_version = MODEL_VERSION_FP32;
    b->copy_params = cpu_copy_params;
    b->load_model = cpu_load_model;
    b->get_opt_state = cpu_get_opt_state;
    b->set_opt_state = cpu_set_opt_state;
    b->params_crc = cpu_params_crc;
    b->step_phases = cpu_step_phases;
    b->range = NULL;
}

// ----------------------------------------------------------------------------
// the memory plan (llmc/plan.h): what gpt2_build and the training loop allocate, per rank

typedef struct {
    const TrainArgs *a;
    GPT2Config config;
    int ranks;
    size_t runtime;  // resident bytes before the model: code, libraries, MPI
} CpuPlan;

static void cpu_plan(void *ctx, int B, int recompute, MemPlan *p) {
    const CpuPlan *cp = (const CpuPlan *)ctx;
    const GPT2Config *c = &cp->config;
    const size_t P = gpt2_num_params(c), F = sizeof(float), BT = (size_t)B * cp->a->T;
    (void)recompute;  // this trainer keeps every activation
    plan_add(p, PLAN_PARAMS, 1, P * F);
    plan_note(p, PLAN_PARAMS, "fp32, %zu", P);
    plan_add(p, PLAN_GRADS, 1, P * F);
    plan_note(p, PLAN_GRADS, "fp32");
    plan_note(p, PLAN_MASTER, "none: fp32 parameters are the master weights");
    plan_add(p, PLAN_ADAMW, 1, 2 * P * F);
    plan_note(p, PLAN_ADAMW, "fp32 m and v, every rank all of them (-z is for train_gpt2cu)");
    ActSlot slots[MAX_ACT_SLOTS] = {{0}};  // all set by gpt2_activation_slots (zeroed: gcc cannot tell)
    ActivationTensors unused;
    const int n = gpt2_activation_slots(slots, &unused, c, B, cp->a->T);
    for (int i = 0; i < n; i++) { plan_add(p, slots[i].row, 1, slots[i].count * F); }
    plan_note(p, PLAN_ACTS, "every layer's, fp32 (no recomputation here)");
    plan_note(p, PLAN_LOGITS, "(B, T, Vp) fp32: logits, probabilities, their gradient");
    plan_note(p, PLAN_ATTENTION, "each query row's softmax shift and 1/sum, (L, B, NH, T, 2) fp32: the backward recomputes the probabilities");
    const size_t matmul_scratch = gpt2_matmul_scratch_floats(0, c, B, cp->a->T) + gpt2_matmul_scratch_floats(1, c, B, cp->a->T);
    const int HS = c->channels / c->num_heads;
    const size_t att_work = attention_work_floats(omp_threads_max(), cp->a->T, HS);
    const size_t att_partials = attention_partial_room(B, c->num_heads, cp->a->T, HS);
    plan_add(p, PLAN_SCRATCH, 1, 2 * BT * sizeof(int) + (matmul_scratch + att_work + att_partials) * F);
    plan_note(p, PLAN_SCRATCH, "the backward's layer buffers, token copies%s, the attention's per-thread product buffers (%d threads)%s",
              matmul_scratch > 0 ? ", the built-in matmul's packed operands" : "", omp_threads_max(),
              att_partials > 0 ? " and its backward's partial sums" : "");
    plan_note(p, PLAN_COMM, "%s", cp->ranks > 1 ? "none: MPI all-reduces the gradients in place (its own buffers not counted)"
                                               : "none (one process)");
    train_data_plan(p, 1, cp->a, B, c->vocab_size);
    plan_add(p, PLAN_RUNTIME, 1, cp->runtime);
    plan_note(p, PLAN_RUNTIME, "code, libraries, MPI: resident before the model (measured)");
}

// ----------------------------------------------------------------------------
#ifndef TESTING
/*
 * Each process's threads (OpenMP's, which OpenBLAS's OpenMP build follows): OMP_NUM_THREADS where
 * set; else the CPUs it may run on, shared out among the ranks that may run on the same ones (at
 * least 1 each). OpenMP alone starts a thread per CPU in every rank: 2 ranks under mpirun
 * --bind-to none on 2 cores took 2.7x as long with 2 threads each as with 1 (RESULTS.md). Rank 0 says
 * what it chose where ranks share CPUs, and warns where OMP_NUM_THREADS oversubscribes them.
 */
static void cpu_threads_choose(Comm *c) {
    if (c->world_size == 1) { return; }
    int cpus;
    const int sharers = comm_cpu_sharers(c, &cpus);
    const char *env = getenv("OMP_NUM_THREADS");
    if (sharers <= 1) { return; }
    if (env != NULL && env[0] != '\0') {
        const int t = omp_threads_max();
        if (c->rank == 0 && t > 1 && (long)t * sharers > cpus) {
            printf("warning: OMP_NUM_THREADS=%s: %d processes share %d CPUs here with %d threads each, %d threads in all, "
                   "which slows every step; give OMP_NUM_THREADS=%d (the CPUs / the processes), or unset it for that\n",
                   env, sharers, cpus, t, t * sharers, cpus / sharers > 1 ? cpus / sharers : 1);
        }
        return;
    }
    const int t = cpus / sharers > 1 ? cpus / sharers : 1;
#ifdef _OPENMP
    omp_set_num_threads(t);
#endif
    if (c->rank == 0) {
        printf("threads: %d per process (%d processes share %d CPUs here; OMP_NUM_THREADS sets another count)\n", t,
               sharers, cpus);
    }
}

int main(int argc, char **argv) {
    TrainSetup run;
    train_start(&run, &argc, &argv);
    if (run.comm.world_size > 1 && !comm_has_collectives(&run.comm)) {
#ifdef USE_MPI
        const char *build = "";
#else
        const char *build = " (this build has none: install OpenMPI, e.g. libopenmpi-dev, and run make again)";
#endif
        // SLURM_NTASKS reaches an sbatch script itself too, outside any srun: one process is meant there
        const char *batch = !strcmp(run.comm.launcher, "slurm") && !comm_launched_by_mpi()
                                ? "; in an sbatch script outside srun, SLURM_NTASKS is the job's: unset SLURM_NTASKS to run one process"
                                : "";
        llmc_die("%d processes (launcher: %s), but train_gpt2 runs several processes only with MPI%s; use: mpirun -np %d "
                 "./train_gpt2 ..., or under SLURM srun --mpi=pmix (the default of scripts/multi_node/slurm.sbatch)%s",
                 run.comm.world_size, run.comm.launcher, build, run.comm.world_size, batch);
    }
    cpu_threads_choose(&run.comm);
    const int plan_ranks = run.args.plan > 0 ? run.args.plan : run.comm.world_size;
    CpuPlan cp = {&run.args, run.config, plan_ranks, plan_process_rss()};
    Planner planner = {"train_gpt2", cpu_plan, &cp, 1, plan_ram(run.args.plan > 0 ? plan_ranks : run.comm.local_size), 0};
    planner.ckpt_snapshot = ckpt_snapshot_plan_bytes(&run.args, gpt2_num_params(&run.config), MODEL_VERSION_FP32, 0,
                                                     plan_ranks, NULL);
    checkpoint_plan_resume(&planner.resume, &run.args, run.comm.rank);  // what a -y 1 start keeps (--plan shows it too)
    if (run.args.plan > 0) {
        if (run.comm.rank == 0) { plan_print(&planner, &run.args, plan_ranks, &run.config); }
        comm_finalize(&run.comm);
        return 0;
    }
    plan_auto(&run.args, &run.comm, &planner);
    GPT2 model;
    gpt2_build(&model, &run.config, run.args.B, run.args.T, &planner);
    model.comm = &run.comm;
    if (run.model_file) {
        gpt2_load(&model, run.model_file);
    } else {
        gpt2_init_params(model.params_memory, &run.config, run.args.seed);  // the same seed on every rank: the same model
    }
    Backend backend;
    gpt2_make_backend(&backend, &model, run.args.T);
    // a slower matmul than this CPU could have: say so, since nothing else would
    if (run.comm.rank == 0 && gemm_hint() != NULL) { printf("matmul: %s\n", gemm_hint()); }
    int rc = train_run(&run.args, &run.comm, &backend);
    gpt2_free(&model);
    comm_finalize(&run.comm);
    return rc;
}
#endif
