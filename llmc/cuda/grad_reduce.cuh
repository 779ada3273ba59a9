/*
 * Data-parallel gradient reduction and ZeRO stage 1 for the CUDA trainer: after the backward pass
 * every rank's gradients become the sum over all ranks (each rank's dloss already carries the
 * 1/(B*T*accumulation*ranks) of the mean), or, with ZeRO-1, this rank's shard of that sum.
 *
 * Layout: parameters and gradients are one flat bf16 array each in the model file's order
 * (llmc/model_io.h). Layer l's gradients are 12 slices of it (tensors 2..13, slice l of each);
 * wte, wpe, lnfw and lnfb are the rest.
 *
 * ZeRO-1 shards: with W ranks, S = ceil(P / W) rounded up to a multiple of GRAD_NORM_CHUNK (a
 * shard is whole chunks of the gradient norm, llmc/model_io.h); rank r owns the flat range
 * [r*S, min((r+1)*S, P)) of the fp32 master weights and the AdamW moments (its optimizer range,
 * the Backend's opt_offset/opt_count, which llmc/checkpoint.h saves per rank and re-shards on
 * load). The params
 * and grads buffers are allocated with W*S elements (the tail past P is zero padding), so that
 * the bf16 all-gather of the updated parameters is NCCL's in-place form (rank r sends
 * params + r*S). Without ZeRO every rank holds everything (S = P).
 * With Muon (-opt muon) a rank must hold whole block matrices: the boundaries move to matrix
 * edges (muon_zero_shard, llmc/muon.h), the shards are of unequal length, and the collectives
 * take per-rank counts (NCCL: the same bucketed reduce-scatter, whose sends follow the shard
 * boundaries, and the gather as one broadcast per rank; MPI: MPI_Reduce_scatter and
 * MPI_Allgatherv), on unpadded buffers.
 *
 * Backends (-pb):
 *   nccl  The reduction of layer l is launched as soon as its gradients are final, on the last
 *         micro-step, on the NCCL stream (it waits for an event behind the layer's backward), so
 *         it overlaps the backward of the layers below; wte/wpe/lnf go last, after the encoder
 *         backward (wte gets gradient from the LM head and the embedding). Without ZeRO a
 *         launch is one NCCL group with an all-reduce per slice. With ZeRO-1 it is a
 *         reduce-scatter per bucket (a layer's 12 slices, or a layer-sized chunk of the rest):
 *         the bucket's slices are copied end to end into a staging buffer of W equal blocks,
 *         rank p receives the sums of block p, and sends each to the rank whose shard holds it
 *         (one group of ncclSend/ncclRecv; a copy where that is p itself). The shards do not
 *         line up with the buckets (a layer's slices lie in a few ranks' shards), so the
 *         reduce-scatter, which NCCL accelerates (NVLS on NVSwitch nodes), does the summing,
 *         and about 1/W of the data moves again. Each sum is the one a reduce to its owner gave
 *         (bitwise, where NCCL sums in the same order), and the shards stay as above.
 *         The main stream waits for the last reduction before the gradient norm (a GPU-side wait).
 *         After the update, ZeRO-1 all-gathers the bf16 parameters (in place) on the NCCL stream.
 *         LLMC_DEBUG_STREAMS=1 (llmc/cuda/processes.cuh) checks these events.
 *   mpi   Host-staged, for where NCCL cannot run (several ranks on one GPU; how the multi-rank
 *         path is tested on a one-GPU machine): the bf16 gradients are copied to pinned host
 *         memory, widened to fp32 (MPI has no bf16 type), summed with MPI_Allreduce (or
 *         MPI_Reduce_scatter_block for ZeRO-1), rounded back to bf16 (nearest even) and copied
 *         back; the ZeRO-1 parameter all-gather is an MPI_Allgather of the bf16 bits.
 * The gradient norm for clipping is global: the sums of squares of fixed chunks of the reduced
 * gradients (llmc/cuda/global_norm.cuh), with ZeRO-1 each rank's of its shard's chunks, put
 * together across ranks and added in chunk order, so that ZeRO-1 changes none of its bits.
 */
#ifndef LLMC_GRAD_REDUCE_CUH
#define LLMC_GRAD_REDUCE_CUH

#include "cuda_common.cuh"
#include "global_norm.cuh"
#include "../model_io.h"
#include "../processes.h"
#include "../muon.h"
#include "processes.cuh"  // GradReduceKind, the process group

// ----------------------------------------------------------------------------
// host arithmetic (plain C, no GPU needed)

// ZeRO-1 shard of rank r of W over P parameters: shard size S, buffer length W*S, range [off, off+cnt)
static inline void zero_shard(size_t P, int W, int r, int zero, size_t *S, size_t *padded, size_t *off, size_t *cnt) {
    if (!zero) {
        *S = P; *padded = P; *off = 0; *cnt = P;
        return;
    }
    *S = (P + (size_t)W - 1) / (size_t)W;
    *S = (*S + GRAD_NORM_CHUNK - 1) / GRAD_NORM_CHUNK * GRAD_NORM_CHUNK;  // shards of whole norm chunks
    *padded = *S * (size_t)W;
    size_t lo = *S * (size_t)r;
    size_t hi = lo + *S < P ? lo + *S : P;
    *off = lo < P ? lo : P;
    *cnt = hi > *off ? hi - *off : 0;
}

// the flat slices of layer l (12, tensors 2..13), or with l = L the rest (wte, wpe, lnfw, lnfb);
// returns the number of slices written to off/len
static inline int zero_layer_slices(const GPT2Config *c, int l, size_t off[12], size_t len[12]) {
    size_t sizes[NUM_PARAMETER_TENSORS], start[NUM_PARAMETER_TENSORS], acc = 0;
    gpt2_param_sizes(sizes, c);
    for (int i = 0; i < NUM_PARAMETER_TENSORS; i++) { start[i] = acc; acc += sizes[i]; }
    int n = 0;
    if (l < c->num_layers) {
        for (int i = 2; i <= 13; i++) {
            size_t per = sizes[i] / (size_t)c->num_layers;
            off[n] = start[i] + (size_t)l * per;
            len[n] = per;
            n++;
        }
    } else {
        const int rest[4] = {0, 1, 14, 15};
        for (int j = 0; j < 4; j++) { off[n] = start[rest[j]]; len[n] = sizes[rest[j]]; n++; }
    }
    return n;
}

/*
 * The shard boundaries of W ranks (W + 1 entries): rank s holds [bounds[s], bounds[s + 1]) of the
 * P parameters; the even shards of zero_shard, or with Muon (muon != 0) whole block matrices
 * (muon_zero_shard, llmc/muon.h).
 */
static inline void zero_bounds(const GPT2Config *c, int W, int muon, size_t *bounds) {
    const size_t P = gpt2_num_params(c);
    for (int r = 0; r < W; r++) {
        size_t S, padded, cnt;
        if (muon && W > 1) { muon_zero_shard(c, W, r, &bounds[r], &cnt); }
        else { zero_shard(P, W, r, 1, &S, &padded, &bounds[r], &cnt); }
    }
    bounds[W] = P;
}

// the rank whose shard holds parameter `flat` (the last s with bounds[s] <= flat: empty shards never)
static inline int zero_owner(const size_t *bounds, int W, size_t flat) {
    int lo = 0, hi = W - 1;
    while (lo < hi) {
        const int mid = (lo + hi + 1) / 2;
        if (bounds[mid] <= flat) { lo = mid; } else { hi = mid - 1; }
    }
    return lo;
}

// ---- ZeRO-1's reduce-scatter layout (the top comment): buckets, and where each sum goes

// grads[flat, flat + len) sits at staging[pos, pos + len) while its bucket is reduced
typedef struct { size_t flat, pos, len; } ZeroPiece;
// after the reduce-scatter, on this rank: send staging[pos, +len) to `peer`'s grads[flat, +len),
// receive grads[flat, +len) from `peer`, or copy staging to grads (peer is this rank)
typedef enum { ZERO_SEND = 0, ZERO_RECV = 1, ZERO_COPY = 2 } ZeroRunKind;
typedef struct {
    ZeroRunKind kind;
    int peer;
    size_t pos, flat, len;
} ZeroRun;
typedef struct {
    ZeroPiece pieces[12];  // a layer's slices, or the parts of the rest in this chunk
    int npieces;
    size_t n, q;           // elements, and elements per rank block: q = ceil(n / W)
    ZeroRun *runs;         // this rank's transfers (grad_reduce_init)
    int nruns;
} ZeroBucket;

// elements of a layer's gradients (its 12 slices): the bucket size, and the cap of a rest chunk
static inline size_t zero_layer_elems(const GPT2Config *c) {
    size_t off[12], len[12], n = 0;
    const int k = zero_layer_slices(c, 0, off, len);
    for (int i = 0; i < k; i++) { n += len[i]; }
    return n;
}

// the buckets of layer l (l = L: the rest, in chunks of at most a layer's size), written to out
// when it is not NULL; returns how many
static inline int zero_buckets(const GPT2Config *c, int l, int W, ZeroBucket *out) {
    size_t off[12], len[12];
    const int ns = zero_layer_slices(c, l, off, len);
    const size_t cap = zero_layer_elems(c);
    int nb = 0;
    ZeroBucket b;
    memset(&b, 0, sizeof(b));
    for (int i = 0; i < ns; i++) {
        for (size_t done = 0; done < len[i];) {
            size_t take = len[i] - done;
            if (take > cap - b.n) { take = cap - b.n; }
            b.pieces[b.npieces++] = (ZeroPiece){off[i] + done, b.n, take};
            b.n += take;
            done += take;
            if (b.n == cap || b.npieces == 12) {
                b.q = (b.n + (size_t)W - 1) / (size_t)W;
                if (out) { out[nb] = b; }
                nb++;
                memset(&b, 0, sizeof(b));
            }
        }
    }
    if (b.n > 0) {
        b.q = (b.n + (size_t)W - 1) / (size_t)W;
        if (out) { out[nb] = b; }
        nb++;
    }
    return nb;
}

/*
 * Rank `rank`'s transfers after bucket b's reduce-scatter, with W ranks and the shards of
 * zero_bounds: for every holder p (block p = bucket positions [p*q, (p+1)*q)) and every piece of
 * the bucket, the part of block p that lies in owner s's shard [bounds[s], bounds[s+1]) is one run: sent by p, received by s (a
 * copy when p == s). Runs are enumerated in one global order, so the sends of p to s and the
 * receives of s from p pair up in order. Writes to out when not NULL; returns the count.
 */
static inline int zero_bucket_runs(const ZeroBucket *b, int W, int rank, const size_t *bounds, ZeroRun *out) {
    int n = 0;
    for (int p = 0; p < W; p++) {
        const size_t blo = (size_t)p * b->q, bhi = blo + b->q < b->n ? blo + b->q : b->n;
        for (int i = 0; i < b->npieces; i++) {
            const ZeroPiece *pc = &b->pieces[i];
            size_t lo = pc->pos > blo ? pc->pos : blo, hi = pc->pos + pc->len < bhi ? pc->pos + pc->len : bhi;
            while (lo < hi) {
                const size_t flat = pc->flat + (lo - pc->pos);
                const int s = zero_owner(bounds, W, flat);
                size_t end = bounds[s + 1] - pc->flat + pc->pos;  // the bucket position where shard s ends
                if (end > hi) { end = hi; }
                if (p == rank || s == rank) {
                    if (out) {
                        ZeroRunKind k = p == s ? ZERO_COPY : p == rank ? ZERO_SEND : ZERO_RECV;
                        out[n] = (ZeroRun){k, p == rank ? s : p, lo, flat, end - lo};
                    }
                    n++;
                }
                lo = end;
            }
        }
    }
    return n;
}

// ----------------------------------------------------------------------------

typedef struct {
    GradReduceKind kind;
    int rank, world_size, zero;
    int uneven;             // ZeRO-1 with Muon: shards of whole matrices (muon_zero_shard), unequal lengths
    GPT2Config config;
    size_t num_params;      // P
    size_t shard;           // S (= P without ZeRO-1)
    size_t padded;          // elements of the params and grads buffers: W*S, or P
    size_t offset, count;   // this rank's optimizer range
    Comm *comm;
    int launched;           // NCCL: reductions of this step launched (all layers and the rest)
    size_t staging;         // NCCL with ZeRO-1: elements of the reduce-scatter staging buffer (else 0)
    size_t norm_chunks;     // the gradient norm's chunks (gpt2_norm_chunks)
    size_t norm_first, norm_count;  // those this rank sums: all, or with ZeRO-1 on several ranks its shard's
    size_t *norm_starts;    // device, norm_chunks + 1 boundaries
    float *norm_sums;       // pinned, norm_chunks: this rank's chunk sums
    double *norm_all;       // norm_chunks: every rank's chunk sums, put together
    cudaEvent_t norm_ready;  // timed: the phase timers measure the norm up to it
#ifdef MULTI_GPU
    NcclContext *nccl;
    cudaEvent_t *layer_ready;  // L + 1 events recorded on the main stream
    cudaEvent_t reduced;       // on the NCCL stream, behind the last reduction of the step
    cudaEvent_t update_done;   // on the main stream, before the ZeRO-1 all-gather
    cudaEvent_t gathered;      // on the NCCL stream, behind the all-gather
    long long *flight;         // L + 1 flight-record handles of the step's reductions (flight_record.h)
    long long gather_flight;   // and of the last parameter all-gather
    ZeroBucket *buckets;       // ZeRO-1: the buckets of layer l are [first[l], first[l + 1])
    int *first;                // L + 2 entries
    floatX *staging_buf;       // `staging` elements
#endif
    uint16_t *host_bf16;    // MPI: padded bf16, pinned
    float *host_f32;        // MPI: padded fp32
    int *counts, *displs;   // MPI with uneven shards: every rank's shard length and offset
} GradReducer;

// the flat range [*lo, *lo + *cnt) of rank r's shard where the shards are uneven (red->uneven: whole
// matrices, -opt muon with ZeRO-1); even shards are rank * red->shard on
static inline void grad_reduce_rank_range(const GradReducer *red, int r, size_t *lo, size_t *cnt) {
    muon_zero_shard(&red->config, red->world_size, r, lo, cnt);
}

// ZeRO-1 on several ranks: each rank holds a shard of the optimizer state and sums its shard's chunks
// of the gradient norm
static inline int grad_reduce_sharded(const GradReducer *red) { return red->zero && red->world_size > 1; }

// the norm's chunks, and which of them this rank sums (its shard's, with ZeRO-1 on several ranks)
static inline void grad_reduce_norm_plan(GradReducer *red) {
    const GPT2Config *c = &red->config;
    const size_t lo = red->offset, hi = red->offset + red->count;
    red->norm_chunks = gpt2_norm_chunks(c, NULL);
    red->norm_first = 0;
    red->norm_count = red->norm_chunks;
    if (grad_reduce_sharded(red)) {
        if (gpt2_norm_chunk_floor(c, lo) != lo || gpt2_norm_chunk_floor(c, hi) != hi) {
            llmc_die("internal: the ZeRO-1 shard [%zu, %zu) does not start and end at gradient-norm chunk edges", lo, hi);
        }
        red->norm_first = gpt2_norm_cuts_below(c, lo, NULL);
        red->norm_count = gpt2_norm_cuts_below(c, hi, NULL) - red->norm_first;
    }
}

// sizes only: fills the shard arithmetic so that the model can size its buffers; no allocation.
// muon: -opt muon (shards of whole block matrices under ZeRO-1)
static inline void grad_reduce_plan(GradReducer *red, GradReduceKind kind, Comm *c, int zero, int muon,
                                    const GPT2Config *config) {
    memset(red, 0, sizeof(*red));
    red->kind = kind;  // GRAD_REDUCE_NONE for one process, except NCCL forced onto a 1-rank communicator
    red->rank = c->rank;
    red->world_size = c->world_size;
    red->zero = zero;
    red->config = *config;
    red->comm = c;
    red->num_params = gpt2_num_params(config);
    zero_shard(red->num_params, c->world_size, c->rank, zero, &red->shard, &red->padded, &red->offset, &red->count);
    if (kind == GRAD_REDUCE_NCCL && zero) {
        const size_t W = (size_t)c->world_size;
        red->staging = W * ((zero_layer_elems(config) + W - 1) / W);  // W blocks of the largest bucket's q
    }
    if (zero && muon && c->world_size > 1) {
        red->uneven = 1;
        red->padded = red->num_params;
        red->shard = 0;  // the longest shard (the MPI count check)
        for (int r = 0; r < c->world_size; r++) {
            size_t lo, cnt;
            grad_reduce_rank_range(red, r, &lo, &cnt);
            if (cnt > red->shard) { red->shard = cnt; }
        }
        grad_reduce_rank_range(red, c->rank, &red->offset, &red->count);
    }
    grad_reduce_norm_plan(red);
}

// what grad_reduce_init allocates (the memory plan): the norm's chunk boundaries on the device, and
// on the host its chunk sums (pinned fp32, and double) and, for MPI, the pinned bf16 and the fp32
// staging of all padded gradients
static inline size_t grad_reduce_device_bytes(size_t norm_chunks) {
    return cuda_alloc_bytes((norm_chunks + 1) * sizeof(size_t));
}
static inline size_t grad_reduce_host_bytes(GradReduceKind kind, size_t padded, size_t norm_chunks) {
    size_t bytes = cuda_alloc_bytes(norm_chunks * sizeof(float)) + norm_chunks * sizeof(double);
    if (kind == GRAD_REDUCE_MPI) { bytes += cuda_alloc_bytes(padded * sizeof(uint16_t)) + padded * sizeof(float); }
    return bytes;
}

// allocations; nccl: the communicator for GRAD_REDUCE_NCCL (NULL otherwise)
static inline void grad_reduce_init(GradReducer *red, void *nccl) {
    const size_t chunks = red->norm_chunks;
    size_t *starts = (size_t *)mallocCheck((chunks + 1) * sizeof(size_t));
    gpt2_norm_chunks(&red->config, starts);
    cudaCheck(cudaMalloc((void **)&red->norm_starts, (chunks + 1) * sizeof(size_t)));
    cudaCheck(cudaMemcpy(red->norm_starts, starts, (chunks + 1) * sizeof(size_t), cudaMemcpyHostToDevice));
    free(starts);
    cudaCheck(cudaMallocHost((void **)&red->norm_sums, chunks * sizeof(float)));
    red->norm_all = (double *)mallocCheck(chunks * sizeof(double));
    cudaCheck(cudaEventCreate(&red->norm_ready));
#ifdef MULTI_GPU
    red->nccl = (NcclContext *)nccl;
    if (red->kind == GRAD_REDUCE_NCCL) {
        cudaRequire(red->nccl != NULL, "the NCCL backend needs a communicator");
        const int L = red->config.num_layers;
        red->layer_ready = (cudaEvent_t *)mallocCheck((size_t)(L + 1) * sizeof(cudaEvent_t));
        red->flight = (long long *)callocCheck((size_t)(L + 1), sizeof(long long));
        for (int l = 0; l <= L; l++) { cudaCheck(cudaEventCreateWithFlags(&red->layer_ready[l], cudaEventDisableTiming)); }
        cudaCheck(cudaEventCreateWithFlags(&red->reduced, cudaEventDisableTiming));
        cudaCheck(cudaEventCreateWithFlags(&red->update_done, cudaEventDisableTiming));
        cudaCheck(cudaEventCreateWithFlags(&red->gathered, cudaEventDisableTiming));
        if (red->zero) {
            const int W = red->world_size;
            red->first = (int *)mallocCheck((size_t)(L + 2) * sizeof(int));
            red->first[0] = 0;
            for (int l = 0; l <= L; l++) { red->first[l + 1] = red->first[l] + zero_buckets(&red->config, l, W, NULL); }
            red->buckets = (ZeroBucket *)mallocCheck((size_t)red->first[L + 1] * sizeof(ZeroBucket));
            for (int l = 0; l <= L; l++) { zero_buckets(&red->config, l, W, red->buckets + red->first[l]); }
            size_t *bounds = (size_t *)mallocCheck((size_t)(W + 1) * sizeof(size_t));
            zero_bounds(&red->config, W, red->uneven, bounds);
            for (int i = 0; i < red->first[L + 1]; i++) {
                ZeroBucket *b = &red->buckets[i];
                b->nruns = zero_bucket_runs(b, W, red->rank, bounds, NULL);
                b->runs = (ZeroRun *)mallocCheck((size_t)(b->nruns > 0 ? b->nruns : 1) * sizeof(ZeroRun));
                zero_bucket_runs(b, W, red->rank, bounds, b->runs);
            }
            free(bounds);
            cudaCheck(cudaMalloc((void **)&red->staging_buf, red->staging * sizeof(floatX)));
        }
    }
#else
    cudaRequire(red->kind != GRAD_REDUCE_NCCL, "this build has no NCCL (MULTI_GPU)");
    (void)nccl;
#endif
    if (red->kind == GRAD_REDUCE_MPI) {
#ifdef USE_MPI
        if (red->zero && red->shard > (size_t)INT_MAX) {
            llmc_die("-pb mpi -z 1: a shard of %zu parameters exceeds MPI's int count; use more ranks or -pb nccl", red->shard);
        }
        cudaCheck(cudaMallocHost((void **)&red->host_bf16, red->padded * sizeof(uint16_t)));
        red->host_f32 = (float *)mallocCheck(red->padded * sizeof(float));
        if (red->uneven) {
            red->counts = (int *)mallocCheck((size_t)red->world_size * sizeof(int));
            red->displs = (int *)mallocCheck((size_t)red->world_size * sizeof(int));
            for (int r = 0; r < red->world_size; r++) {
                size_t lo, cnt;
                grad_reduce_rank_range(red, r, &lo, &cnt);
                if (lo > (size_t)INT_MAX) {
                    llmc_die("-pb mpi -z 1 -opt muon: %zu parameters exceed MPI's int offsets; use -pb nccl", red->num_params);
                }
                red->counts[r] = (int)cnt;
                red->displs[r] = (int)lo;
            }
        }
#else
        llmc_die("-pb mpi needs a build with MPI (mpicc found at build time) and a launch by mpirun");
#endif
    }
}

static inline void grad_reduce_free(GradReducer *red) {
    cudaCheck(cudaFree(red->norm_starts));
    cudaCheck(cudaFreeHost(red->norm_sums));
    free(red->norm_all);
    cudaCheck(cudaEventDestroy(red->norm_ready));
#ifdef MULTI_GPU
    if (red->kind == GRAD_REDUCE_NCCL) {
        for (int l = 0; l <= red->config.num_layers; l++) { cudaCheck(cudaEventDestroy(red->layer_ready[l])); }
        free(red->layer_ready);
        free(red->flight);
        cudaCheck(cudaEventDestroy(red->reduced));
        cudaCheck(cudaEventDestroy(red->update_done));
        cudaCheck(cudaEventDestroy(red->gathered));
        if (red->zero) {
            for (int i = 0; i < red->first[red->config.num_layers + 1]; i++) { free(red->buckets[i].runs); }
            free(red->buckets);
            free(red->first);
            cudaCheck(cudaFree(red->staging_buf));
        }
    }
#endif
    if (red->host_bf16) { cudaCheck(cudaFreeHost(red->host_bf16)); }
    free(red->host_f32);
    free(red->counts);
    free(red->displs);
}

/*
 * The four event waits between the compute and the NCCL stream. A test build (-DLLMC_TEST_DROP_WAIT:
 * the simulator's train_gpt2cu_dropwait, build/drop_wait/train_gpt2cu on a GPU) leaves out the one
 * that LLMC_TEST_DROP_WAIT=<n> names, to show that LLMC_DEBUG_STREAMS=1 catches it: 1 the NCCL
 * stream does not wait for a layer's backward, 2 the compute stream does not wait for the
 * reductions, 3 the NCCL stream does not wait for the update, 4 the compute stream does not wait
 * for ZeRO-1's all-gather. Every other build always waits.
 */
static inline void stream_wait_event(cudaStream_t stream, cudaEvent_t event, int which) {
#ifdef LLMC_TEST_DROP_WAIT
    const char *drop = getenv("LLMC_TEST_DROP_WAIT");
    if (drop && atoi(drop) == which) { return; }
#else
    (void)which;
#endif
    cudaCheck(cudaStreamWaitEvent(stream, event, 0));
}

#ifdef MULTI_GPU
// ZeRO-1: reduce bucket b on the NCCL stream; this rank's shard part of it ends up summed in grads
static inline void zero_bucket_reduce(GradReducer *red, floatX *grads, const ZeroBucket *b, const char *what) {
    NcclContext *ctx = red->nccl;
    floatX *stage = red->staging_buf;
    for (int i = 0; i < b->npieces; i++) {
        const ZeroPiece *pc = &b->pieces[i];
        cudaCheck(cudaMemcpyAsync(stage + pc->pos, grads + pc->flat, pc->len * sizeof(floatX), cudaMemcpyDeviceToDevice,
                                  ctx->stream));
    }
    // in place: rank r's block is staging + r*q (the tail past n is never read back)
    ncclCheck(ncclReduceScatter(stage, stage + (size_t)red->rank * b->q, b->q, ncclBfloat16, ncclSum, ctx->comm,
                                ctx->stream));
    nccl_wait_issued(ctx, what);
    if (red->world_size > 1) {
        ncclCheck(ncclGroupStart());
        for (int i = 0; i < b->nruns; i++) {
            const ZeroRun *r = &b->runs[i];
            if (r->kind == ZERO_SEND) {
                ncclCheck(ncclSend(stage + r->pos, r->len, ncclBfloat16, r->peer, ctx->comm, ctx->stream));
            } else if (r->kind == ZERO_RECV) {
                ncclCheck(ncclRecv(grads + r->flat, r->len, ncclBfloat16, r->peer, ctx->comm, ctx->stream));
            }
        }
        nccl_group_end(ctx, what);
    }
    for (int i = 0; i < b->nruns; i++) {
        const ZeroRun *r = &b->runs[i];
        if (r->kind == ZERO_COPY) {
            cudaCheck(cudaMemcpyAsync(grads + r->flat, stage + r->pos, r->len * sizeof(floatX), cudaMemcpyDeviceToDevice,
                                      ctx->stream));
        }
    }
}

// the reduction of layer l's slices (l = L: the rest) on the NCCL stream, behind `main`'s work so far
static inline void grad_reduce_nccl_slices(GradReducer *red, floatX *grads, int l, cudaStream_t main) {
    NcclContext *ctx = red->nccl;
    cudaCheck(cudaEventRecord(red->layer_ready[l], main));
    stream_wait_event(ctx->stream, red->layer_ready[l], 1);
    size_t off[12], len[12];
    const int n = zero_layer_slices(&red->config, l, off, len);
    size_t bytes = 0;
    for (int i = 0; i < n; i++) { bytes += len[i] * sizeof(floatX); }
    // recorded as open until the gradient norm has waited for it (grad_reduce_norm)
    red->flight[l] = flight_begin(red->zero ? "ncclReduceScatter(grads)" : "ncclAllReduce(grads)", (long long)bytes);
    char what[64];
    if (l < red->config.num_layers) {
        snprintf(what, sizeof(what), "the gradient reduction of layer %d", l);
    } else {
        snprintf(what, sizeof(what), "the gradient reduction of the embeddings");
    }
    nccl_debug_scramble(ctx, grads, off, len, n);
    if (red->zero) {
        for (int i = red->first[l]; i < red->first[l + 1]; i++) { zero_bucket_reduce(red, grads, &red->buckets[i], what); }
        return;
    }
    ncclCheck(ncclGroupStart());
    for (int i = 0; i < n; i++) {
        ncclCheck(ncclAllReduce(grads + off[i], grads + off[i], len[i], ncclBfloat16, ncclSum, ctx->comm, ctx->stream));
    }
    nccl_group_end(ctx, what);
}
#endif

/*
 * The gradients of layer l are final (on the last micro-step, right after the layer's backward):
 * start reducing them. l = L (num_layers): the embeddings and the final LayerNorm, after the
 * encoder backward; that call completes the set. NCCL only; a no-op otherwise.
 */
static inline void grad_reduce_layer(GradReducer *red, floatX *grads, int l, cudaStream_t main) {
#ifdef MULTI_GPU
    if (red->kind != GRAD_REDUCE_NCCL) { return; }
    grad_reduce_nccl_slices(red, grads, l, main);
    if (l == red->config.num_layers) {
        cudaCheck(cudaEventRecord(red->reduced, red->nccl->stream));
        red->launched = 1;
    }
#else
    (void)red; (void)grads; (void)l; (void)main;
#endif
}

#ifdef USE_MPI
static inline void grad_mpi_bf16_to_f32(float *out, const uint16_t *in, size_t n) {
    for (size_t i = 0; i < n; i++) { out[i] = bf16_to_float(in[i]); }
}
static inline void grad_mpi_f32_to_bf16(uint16_t *out, const float *in, size_t n) {
    for (size_t i = 0; i < n; i++) { out[i] = float_to_bf16(in[i]); }
}
#endif

/*
 * After the last micro-step: the gradients (all, or this rank's shard with ZeRO-1) become the sum
 * over ranks, in stream order on `main`. NCCL: a GPU-side wait for the reductions launched during
 * the backward (or, if none were, all of them now). MPI: the host-staged reduction.
 */
static inline void grad_reduce_finish(GradReducer *red, floatX *grads, cudaStream_t main) {
    if (red->kind == GRAD_REDUCE_NCCL) {
#ifdef MULTI_GPU
        if (!red->launched) {
            for (int l = 0; l <= red->config.num_layers; l++) { grad_reduce_layer(red, grads, l, main); }
        }
        stream_wait_event(main, red->reduced, 2);
        red->launched = 0;
#endif
    } else if (red->kind == GRAD_REDUCE_MPI) {
#ifdef USE_MPI
        const size_t P = red->num_params;
        cudaCheck(cudaMemcpyAsync(red->host_bf16, grads, P * sizeof(uint16_t), cudaMemcpyDeviceToHost, main));
        cudaCheck(cudaStreamSynchronize(main));
        grad_mpi_bf16_to_f32(red->host_f32, red->host_bf16, P);
        if (!red->zero) {
            comm_mpi_allreduce_sum_f32(red->comm, red->host_f32, P);
            grad_mpi_f32_to_bf16(red->host_bf16, red->host_f32, P);
            cudaCheck(cudaMemcpyAsync(grads, red->host_bf16, P * sizeof(uint16_t), cudaMemcpyHostToDevice, main));
        } else {
            for (size_t i = P; i < red->padded; i++) { red->host_f32[i] = 0.0f; }
            // in place: the whole array in, this rank's sums at the start
            if (red->uneven) {
                COMM_MPI_RUN(red->comm, "MPI_Reduce_scatter", red->padded * sizeof(float),
                             MPI_Ireduce_scatter(MPI_IN_PLACE, red->host_f32, red->counts, MPI_FLOAT, MPI_SUM,
                                                 MPI_COMM_WORLD, &req_));
            } else {
                COMM_MPI_RUN(red->comm, "MPI_Reduce_scatter", red->padded * sizeof(float),
                             MPI_Ireduce_scatter_block(MPI_IN_PLACE, red->host_f32, (int)red->shard, MPI_FLOAT, MPI_SUM,
                                                       MPI_COMM_WORLD, &req_));
            }
            grad_mpi_f32_to_bf16(red->host_bf16, red->host_f32, red->count);
            if (red->count > 0) {
                cudaCheck(cudaMemcpyAsync(grads + red->offset, red->host_bf16, red->count * sizeof(uint16_t),
                                          cudaMemcpyHostToDevice, main));
            }
        }
        // the host buffer is reused at the next call only after a synchronize, so no wait here
#endif
    }
}

/*
 * The global L2 norm of the reduced gradients (host value, the same on every rank): this rank's
 * chunk sums (llmc/cuda/global_norm.cuh), with ZeRO-1 those of its shard, every other rank's
 * entry 0 and the ranks' arrays added (x + 0 is exact, so every chunk's sum arrives as its owner
 * computed it), then the chunks in order: the same bits as one process's norm of these gradients.
 * scratch: global_norm_scratch_bytes(red->norm_chunks).
 */
static inline float grad_reduce_norm(GradReducer *red, const floatX *grads, float *scratch, cudaStream_t main) {
    const size_t first = red->norm_first, count = red->norm_count;
    global_norm_chunk_sums(scratch, grads, red->norm_starts, first, count, main);
    if (count > 0) {
        cudaCheck(cudaMemcpyAsync(red->norm_sums + first, scratch + first, count * sizeof(float), cudaMemcpyDeviceToHost,
                                  main));
    }
    cudaCheck(cudaEventRecord(red->norm_ready, main));
    gpu_wait_event(red->norm_ready, "the gradient norm");
#ifdef MULTI_GPU
    if (red->kind == GRAD_REDUCE_NCCL) {  // the step's reductions are complete
        for (int l = 0; l <= red->config.num_layers; l++) { flight_end(red->flight[l]); }
        flight_end(red->gather_flight);  // the previous step's all-gather: this step's forward waited for it
    }
#endif
    for (size_t c = 0; c < red->norm_chunks; c++) {
        red->norm_all[c] = c >= first && c < first + count ? (double)red->norm_sums[c] : 0.0;
    }
    if (grad_reduce_sharded(red)) {  // every rank calls it (a rank may hold no chunk, or all of them)
        red->comm->allreduce_sum_f64(red->comm, red->norm_all, (int)red->norm_chunks);
    }
    return (float)sqrt(global_norm_total(red->norm_all, red->norm_chunks));
}

/*
 * ZeRO-1, after the AdamW update of this rank's shard: every rank receives every shard's updated
 * bf16 parameters. Later work on `main` sees them (NCCL: a GPU-side wait; MPI: synchronous).
 */
static inline void grad_reduce_gather_params(GradReducer *red, floatX *params, cudaStream_t main) {
    if (!red->zero || red->kind == GRAD_REDUCE_NONE) { return; }
    if (red->kind == GRAD_REDUCE_NCCL) {
#ifdef MULTI_GPU
        NcclContext *ctx = red->nccl;
        cudaCheck(cudaEventRecord(red->update_done, main));
        stream_wait_event(ctx->stream, red->update_done, 3);
        red->gather_flight = flight_begin("ncclAllGather(params)", (long long)(red->padded * sizeof(floatX)));
        if (red->uneven) {  // shards of unequal length: each rank's shard broadcast from it, in place
            ncclCheck(ncclGroupStart());
            for (int r = 0; r < red->world_size; r++) {
                size_t lo, cnt;
                grad_reduce_rank_range(red, r, &lo, &cnt);
                if (cnt > 0) { ncclCheck(ncclBroadcast(params + lo, params + lo, cnt, ncclBfloat16, r, ctx->comm, ctx->stream)); }
            }
            ncclCheck(ncclGroupEnd());
        } else {
            const size_t mine = red->shard * (size_t)red->rank;
            nccl_debug_scramble(ctx, params, &mine, &red->shard, 1);
            ncclCheck(ncclAllGather(params + mine, params, red->shard, ncclBfloat16, ctx->comm, ctx->stream));
        }
        nccl_wait_issued(ctx, "the parameter all-gather");
        cudaCheck(cudaEventRecord(red->gathered, ctx->stream));
        stream_wait_event(main, red->gathered, 4);
#endif
    } else {
#ifdef USE_MPI
        const size_t S = red->shard, lo = red->uneven ? red->offset : S * (size_t)red->rank;
        const size_t mine_n = red->uneven ? red->count : S;
        cudaCheck(cudaMemcpyAsync(red->host_bf16 + lo, params + lo, mine_n * sizeof(uint16_t), cudaMemcpyDeviceToHost, main));
        cudaCheck(cudaStreamSynchronize(main));
        if (red->uneven) {
            COMM_MPI_RUN(red->comm, "MPI_Allgatherv(bf16)", red->padded * sizeof(uint16_t),
                         MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, red->host_bf16, red->counts, red->displs,
                                         MPI_UINT16_T, MPI_COMM_WORLD, &req_));
        } else {
            COMM_MPI_RUN(red->comm, "MPI_Allgather(bf16)", red->padded * sizeof(uint16_t),
                         MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, red->host_bf16, (int)S, MPI_UINT16_T,
                                        MPI_COMM_WORLD, &req_));
        }
        cudaCheck(cudaMemcpyAsync(params, red->host_bf16, red->padded * sizeof(uint16_t), cudaMemcpyHostToDevice, main));
        cudaCheck(cudaStreamSynchronize(main));  // the host buffer is rewritten by the next reduction
#endif
    }
}

#endif  // LLMC_GRAD_REDUCE_CUH
