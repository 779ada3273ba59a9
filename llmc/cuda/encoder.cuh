/*
 * The embedding layer: out (B, T, C) = wte[token] + wpe[position], and its deterministic backward.
 *
 * Backward without float atomics. The token ids of a micro-batch are on the host anyway (the
 * data loader reads them there), so the host sorts the B*T positions by token id (a stable
 * counting sort: positions stay in increasing order within a token) into a plan:
 *   - each token's positions are cut into segments of at most ENCODER_SEGMENT positions;
 *   - pass 1: one warp per (segment, 256 channels) sums its positions' dout rows in increasing
 *     position order; a token with a single segment adds the sum into dwte directly, the segments
 *     of a frequent token write fp32 partial rows instead;
 *   - pass 2: one warp per (frequent token, 256 channels) adds its partial rows in segment order
 *     into dwte.
 * Every dwte row is written by exactly one warp and every sum has a fixed order, so the result is
 * bitwise reproducible; the segment cap bounds the longest serial chain for very common tokens
 * (",", "the", end-of-text). dwpe is summed over b in order by one thread per (t, 8 channels).
 *
 * Conventions: token ids are int32, already validated (< V) by the data loader; dwte and dwpe
 * are accumulated (+=), rounded to nearest bf16 once per call.
 */
#ifndef LLMC_ENCODER_CUH
#define LLMC_ENCODER_CUH

#include "cuda_common.cuh"

#define ENCODER_SEGMENT 128       // most positions one warp sums in pass 1
#define ENCODER_TOKEN_RANGE 65536 // token ids are uint16 in the data files; the host sort counts this many
#define ENCODER_WARPS 4           // warps per block in the backward kernels

// ----------------------------------------------------------------------------
// host: the backward plan (plain C, testable without a GPU)

/*
 * Plan layout, all int32, for BT = B*T positions:
 *   [0, BT)                                 positions grouped by token, increasing within a token
 *   [BT, BT + 4*num_segments)               per segment: token, first index into positions, count,
 *                                           partial slot (-1: the token's only segment, adds into dwte)
 *   [5*BT, 5*BT + 3*num_split)              per split token: token, first slot, number of slots
 * A token with c > ENCODER_SEGMENT positions has ceil(c / SEGMENT) < 2c / SEGMENT segments, so
 * there are at most 2*BT/SEGMENT slots and BT/SEGMENT split tokens.
 */
typedef struct {
    int num_segments;  // pass-1 work items
    int num_split;     // pass-2 work items
    int num_slots;     // fp32 partial rows used
} EncoderPlanCounts;

static inline size_t encoder_plan_ints(int BT) { return (size_t)5 * BT + 3 * (size_t)(BT / ENCODER_SEGMENT + 1); }
static inline int encoder_max_slots(int BT) { return 2 * BT / ENCODER_SEGMENT + 1; }

// Builds the plan for inp (BT token ids) into plan (encoder_plan_ints(BT) ints); counts is
// ENCODER_TOKEN_RANGE ints of scratch. Returns NULL, or what is wrong with the input.
static inline const char *encoder_backward_plan(int *plan, int *counts, const int *inp, int BT, EncoderPlanCounts *out) {
    memset(counts, 0, ENCODER_TOKEN_RANGE * sizeof(int));
    for (int i = 0; i < BT; i++) {
        if (inp[i] < 0 || inp[i] >= ENCODER_TOKEN_RANGE) { return "a token id is outside 0..65535"; }
        counts[inp[i]]++;
    }
    // counts -> first index of each token, then scatter positions in increasing order (stable)
    int run = 0;
    for (int v = 0; v < ENCODER_TOKEN_RANGE; v++) {
        int c = counts[v];
        counts[v] = run;
        run += c;
    }
    for (int i = 0; i < BT; i++) { plan[counts[inp[i]]++] = i; }
    // walk the groups of equal tokens and cut them into segments
    int *segments = plan + BT, *split = plan + (size_t)5 * BT;
    EncoderPlanCounts n = {0, 0, 0};
    for (int j = 0; j < BT;) {
        const int token = inp[plan[j]];
        int end = j;
        while (end < BT && inp[plan[end]] == token) { end++; }
        const int count = end - j;
        const int pieces = CEIL_DIV(count, ENCODER_SEGMENT);
        if (pieces == 1) {
            int *s = segments + 4 * (size_t)n.num_segments++;
            s[0] = token; s[1] = j; s[2] = count; s[3] = -1;
        } else {
            int *sp = split + 3 * (size_t)n.num_split++;
            sp[0] = token; sp[1] = n.num_slots; sp[2] = pieces;
            for (int p = 0; p < pieces; p++) {
                int *s = segments + 4 * (size_t)n.num_segments++;
                s[0] = token;
                s[1] = j + p * ENCODER_SEGMENT;
                s[2] = (p == pieces - 1) ? count - p * ENCODER_SEGMENT : ENCODER_SEGMENT;
                s[3] = n.num_slots++;
            }
        }
        j = end;
    }
    *out = n;
    return NULL;
}

// ----------------------------------------------------------------------------
// kernels

// out[b,t,c..c+7] = wte[inp[b,t], c..] + wpe[t, c..]; one thread per 8 channels
static __global__ void encoder_forward_kernel(floatX *out, const int *inp, const floatX *wte, const floatX *wpe, int B,
                                              int T, int C) {
    const int C8 = C / 8;
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (size_t)B * T * C8) { return; }
    const size_t bt = idx / C8;
    const int c = (int)(idx % C8) * 8;
    const int t = (int)(bt % T);
    const int token = inp[bt];
    x128 w = load128(wte + (size_t)token * C + c);
    x128 p = load128(wpe + (size_t)t * C + c);
    x128 o;
    for (int k = 0; k < 8; k++) { o[k] = __float2bfloat16(__bfloat162float(w[k]) + __bfloat162float(p[k])); }
    store128(out + bt * C + c, o);
}

// pass 1: warp = segment, lane = 8 channels of the block's 256-channel slice
static __global__ void __launch_bounds__(WARP_SIZE * ENCODER_WARPS)
encoder_backward_segments_kernel(floatX *dwte, float *partials, const floatX *dout, const int *plan, int BT,
                                 int num_segments, int C) {
    const int seg = blockIdx.x * ENCODER_WARPS + threadIdx.x / WARP_SIZE;
    const int c = (blockIdx.y * WARP_SIZE + threadIdx.x % WARP_SIZE) * 8;
    if (seg >= num_segments || c >= C) { return; }
    const int *s = plan + BT + 4 * (size_t)seg;
    const int token = s[0], first = s[1], count = s[2], slot = s[3];
    float acc[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll 4
    for (int j = 0; j < count; j++) {
        const int pos = plan[first + j];
        x128 d = load128(dout + (size_t)pos * C + c);
        for (int k = 0; k < 8; k++) { acc[k] += __bfloat162float(d[k]); }
    }
    if (slot < 0) {
        floatX *row = dwte + (size_t)token * C + c;
        x128 w = load128(row);
        for (int k = 0; k < 8; k++) { w[k] = __float2bfloat16(__bfloat162float(w[k]) + acc[k]); }
        store128(row, w);
    } else {
        float *p = partials + (size_t)slot * C + c;
        f128 lo, hi;
        for (int k = 0; k < 4; k++) { lo[k] = acc[k]; hi[k] = acc[k + 4]; }
        store128(p, lo);
        store128(p + 4, hi);
    }
}

// pass 2: warp = split token; adds its partial rows in slot order into dwte
static __global__ void __launch_bounds__(WARP_SIZE * ENCODER_WARPS)
encoder_backward_split_kernel(floatX *dwte, const float *partials, const int *split, int num_split, int C) {
    const int item = blockIdx.x * ENCODER_WARPS + threadIdx.x / WARP_SIZE;
    const int c = (blockIdx.y * WARP_SIZE + threadIdx.x % WARP_SIZE) * 8;
    if (item >= num_split || c >= C) { return; }
    const int token = split[3 * item], first = split[3 * item + 1], pieces = split[3 * item + 2];
    float acc[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
    for (int p = 0; p < pieces; p++) {
        const float *row = partials + (size_t)(first + p) * C + c;
        f128 lo = load128(row), hi = load128(row + 4);
        for (int k = 0; k < 4; k++) { acc[k] += lo[k]; acc[k + 4] += hi[k]; }
    }
    floatX *row = dwte + (size_t)token * C + c;
    x128 w = load128(row);
    for (int k = 0; k < 8; k++) { w[k] = __float2bfloat16(__bfloat162float(w[k]) + acc[k]); }
    store128(row, w);
}

// dwpe[t, c..c+7] += sum over b (in order) of dout[b, t, c..]
static __global__ void encoder_backward_wpe_kernel(floatX *dwpe, const floatX *dout, int B, int T, int C) {
    const int C8 = C / 8;
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (size_t)T * C8) { return; }
    const int t = (int)(idx / C8), c = (int)(idx % C8) * 8;
    float acc[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
    for (int b = 0; b < B; b++) {
        x128 d = load128(dout + ((size_t)b * T + t) * C + c);
        for (int k = 0; k < 8; k++) { acc[k] += __bfloat162float(d[k]); }
    }
    floatX *row = dwpe + (size_t)t * C + c;
    x128 w = load128(row);
    for (int k = 0; k < 8; k++) { w[k] = __float2bfloat16(__bfloat162float(w[k]) + acc[k]); }
    store128(row, w);
}

// ----------------------------------------------------------------------------
// launchers

/*
 * out (B, T, C) = wte[inp[b, t]] + wpe[t], overwritten.
 * inp (B, T) int32 on the device, each id < the rows of wte (Vp); wte (Vp, C); wpe (maxT >= T, C).
 * Requires C a multiple of 8, 16-byte aligned pointers. No scratch.
 */
static inline void encoder_forward(floatX *out, const int *inp, const floatX *wte, const floatX *wpe, int B, int T, int C,
                                   cudaStream_t stream) {
    cudaRequire(B > 0 && T > 0 && C > 0 && C % 8 == 0, "B = %d, T = %d, C = %d: C must be a multiple of 8", B, T, C);
    cudaRequire(is_aligned16(out) && is_aligned16(wte) && is_aligned16(wpe), "pointers must be 16-byte aligned");
    encoder_forward_kernel<<<grid_for((size_t)B * T * (C / 8), 256), 256, 0, stream>>>(out, inp, wte, wpe, B, T, C);
    cudaCheckLaunch();
}

// Buffers of the backward: the host plan (pinned, so the copy is asynchronous), its device copy,
// the fp32 partial rows of frequent tokens, and an event that says when the host plan may be
// rewritten (its previous copy has finished).
typedef struct {
    int max_BT, C;
    int *plan_host;    // encoder_plan_ints(max_BT), pinned
    int *counts_host;  // ENCODER_TOKEN_RANGE
    int *plan_device;  // encoder_plan_ints(max_BT)
    float *partials;   // encoder_max_slots(max_BT) * C
    cudaEvent_t plan_copied;
} EncoderBackwardWork;

// the buffers' sizes: the plan (pinned on the host, and on the device), the partial rows (device)
static inline size_t encoder_plan_bytes(int BT) { return encoder_plan_ints(BT) * sizeof(int); }
static inline size_t encoder_partials_bytes(int BT, int C) { return (size_t)encoder_max_slots(BT) * C * sizeof(float); }

// device memory (about 1.3 + 3.1 MB at B*T = 65536, C = 768), as the memory plan counts it
static inline size_t encoder_backward_work_device_bytes(int B, int T, int C) {
    return cuda_alloc_bytes(encoder_plan_bytes(B * T)) + cuda_alloc_bytes(encoder_partials_bytes(B * T, C));
}
// host memory: the plan pinned, plus 256 KiB of counts
static inline size_t encoder_backward_work_host_bytes(int B, int T) {
    return cuda_alloc_bytes(encoder_plan_bytes(B * T)) + ENCODER_TOKEN_RANGE * sizeof(int);
}

static inline void encoder_backward_work_init(EncoderBackwardWork *w, int B, int T, int C) {
    w->max_BT = B * T;
    w->C = C;
    const size_t plan_bytes = encoder_plan_bytes(w->max_BT);
    cudaCheck(cudaMallocHost((void **)&w->plan_host, plan_bytes));
    w->counts_host = (int *)mallocCheck(ENCODER_TOKEN_RANGE * sizeof(int));
    cudaCheck(cudaMalloc((void **)&w->plan_device, plan_bytes));
    cudaCheck(cudaMalloc((void **)&w->partials, encoder_partials_bytes(w->max_BT, C)));
    cudaCheck(cudaEventCreateWithFlags(&w->plan_copied, cudaEventDisableTiming));
}

static inline void encoder_backward_work_free(EncoderBackwardWork *w) {
    cudaCheck(cudaEventSynchronize(w->plan_copied));
    cudaCheck(cudaEventDestroy(w->plan_copied));
    cudaCheck(cudaFreeHost(w->plan_host));
    cudaCheck(cudaFree(w->plan_device));
    cudaCheck(cudaFree(w->partials));
    free(w->counts_host);
}

/*
 * dwte (Vp, C) += sum of dout rows per token; dwpe (maxT, C) += sum over b of dout[b, t].
 * dout (B, T, C); inp_host (B, T) int32 token ids in HOST memory (the same ids the forward used).
 * work: from encoder_backward_work_init with B*T and C at least these.
 * Host cost: a counting sort of B*T ids (0.6 ms at B*T = 65536 on the 2-core build machine);
 * it waits, if needed, for the previous call's plan copy (a host-side wait, never a device-wide
 * sync). Successive calls must use one stream: the device plan buffer is reused in stream order.
 */
static inline void encoder_backward(floatX *dwte, floatX *dwpe, const floatX *dout, const int *inp_host, int B, int T,
                                    int C, EncoderBackwardWork *work, cudaStream_t stream) {
    const int BT = B * T;
    cudaRequire(B > 0 && T > 0 && C > 0 && C % 8 == 0, "B = %d, T = %d, C = %d: C must be a multiple of 8", B, T, C);
    cudaRequire(BT <= work->max_BT && C <= work->C, "B*T = %d, C = %d exceed the work buffers (%d, %d)", BT, C,
                work->max_BT, work->C);
    cudaRequire(is_aligned16(dwte) && is_aligned16(dwpe) && is_aligned16(dout), "pointers must be 16-byte aligned");

    // 1. the plan, in pinned memory the previous copy no longer reads
    cudaCheck(cudaEventSynchronize(work->plan_copied));
    EncoderPlanCounts n;
    const char *problem = encoder_backward_plan(work->plan_host, work->counts_host, inp_host, BT, &n);
    cudaRequire(problem == NULL, "%s", problem);
    // 2. copy the used parts: positions + segments, and the split-token records
    cudaCheck(cudaMemcpyAsync(work->plan_device, work->plan_host, ((size_t)BT + 4 * (size_t)n.num_segments) * sizeof(int),
                              cudaMemcpyHostToDevice, stream));
    const int *split_device = work->plan_device + (size_t)5 * BT;
    if (n.num_split > 0) {
        cudaCheck(cudaMemcpyAsync((void *)split_device, work->plan_host + (size_t)5 * BT, 3 * (size_t)n.num_split * sizeof(int),
                                  cudaMemcpyHostToDevice, stream));
    }
    cudaCheck(cudaEventRecord(work->plan_copied, stream));
    // 3. pass 1 and pass 2 for dwte, then dwpe
    const int slices = CEIL_DIV(C, WARP_SIZE * 8);
    dim3 grid1(CEIL_DIV(n.num_segments, ENCODER_WARPS), slices);
    encoder_backward_segments_kernel<<<grid1, WARP_SIZE * ENCODER_WARPS, 0, stream>>>(
        dwte, work->partials, dout, work->plan_device, BT, n.num_segments, C);
    cudaCheckLaunch();
    if (n.num_split > 0) {
        dim3 grid2(CEIL_DIV(n.num_split, ENCODER_WARPS), slices);
        encoder_backward_split_kernel<<<grid2, WARP_SIZE * ENCODER_WARPS, 0, stream>>>(dwte, work->partials, split_device,
                                                                                      n.num_split, C);
        cudaCheckLaunch();
    }
    encoder_backward_wpe_kernel<<<grid_for((size_t)T * (C / 8), 256), 256, 0, stream>>>(dwpe, dout, B, T, C);
    cudaCheckLaunch();
}

#endif  // LLMC_ENCODER_CUH
