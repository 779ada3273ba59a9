/*
 * The two numbers issue 5's scaling estimate needs, measured on one GPU:
 *   1. the backward time of one transformer layer (the window in which that layer's gradient
 *      reduction can overlap the backward of the layers below), per layer, at the trainer's B, T;
 *   2. one NCCL reduction of one layer's gradients (12 slices in one group, as llmc/zero.cuh
 *      launches it) on a 1-rank communicator: the launch and local copy cost, with no link
 *      involved, and the same for all gradients at once.
 * It builds the trainer's own model (train_gpt2.cu with TESTING) and times its backward in the
 * pieces gpt2_backward is made of, with CUDA events around each layer.
 *
 *   build/bench_layers -e d12 -b 16 -t 1024 [-r 1] [-at own|cudnn] [-x iterations]   (trainer flags; make build/bench_layers)
 */
#define TESTING
#include "train_gpt2.cu"

int main(int argc, char **argv) {
    Comm comm;
    comm_init(&comm, &argc, &argv);
    TrainArgs args;
    args_parse(&args, argc, argv);
    const int iters = args.max_steps > 0 ? args.max_steps : 20;
    GPT2Config config;
    if (train_resolve_model(&args, &config)) { llmc_die("bench_layers takes a descriptor (-e d12), not a file"); }
    const int device = gpu_select_device(&comm, (const void *)cast_fp32_to_bf16_kernel, LLMC_CUDA_ARCHS);
    cublas_init();
    GradReducer plan;
    grad_reduce_plan(&plan, GRAD_REDUCE_NONE, &comm, 0, &config);
    GPT2 m;
    gpt2_build(&m, &config, args.B, args.T, args.recompute, 1, attention_impl(args.attention, "-at"), &plan, NULL);
    float *init = (float *)mallocCheck(m.num_params * sizeof(float));
    gpt2_init_params(init, &config, args.seed);
    gpt2_set_params_fp32(&m, init);
    free(init);
    const int B = args.B, T = args.T, L = config.num_layers, C = config.channels;
    const size_t BT = (size_t)B * T;
    int *x = (int *)mallocCheck(BT * sizeof(int)), *y = (int *)mallocCheck(BT * sizeof(int));
    uint64_t rng = 42;
    for (size_t i = 0; i < BT; i++) {
        x[i] = (int)(splitmix64(&rng) % (uint64_t)config.vocab_size);
        y[i] = (int)(splitmix64(&rng) % (uint64_t)config.vocab_size);
    }
    cudaDeviceProp prop;
    cudaCheck(cudaGetDeviceProperties(&prop, device));
    printf("bench_layers on %s: -e %s (L %d, C %d), B %d, T %d, -r %d, attention %s, %d timed iterations after 3 "
           "warm-up\n", prop.name, args.model, L, C, B, T, args.recompute, gpt2_attention_describe(&m), iters);

    // events: forward start, head end, after each layer (L), after the embedding backward
    cudaEvent_t ev[L + 4];
    for (int i = 0; i < L + 4; i++) { cudaCheck(cudaEventCreate(&ev[i])); }
    double fwd = 0.0, head = 0.0, embed = 0.0;
    double *layer = (double *)callocCheck(L, sizeof(double));
    for (int it = -3; it < iters; it++) {
        cudaCheck(cudaMemsetAsync(m.grads_memory, 0, m.red.padded * sizeof(floatX), m.stream));
        cudaCheck(cudaEventRecord(ev[0], m.stream));
        gpt2_forward(&m, x, y, B, T, FWD_TRAIN, 1.0f / (float)BT);
        cudaCheck(cudaEventRecord(ev[1], m.stream));
        gpt2_backward_head(&m, B, T);
        cudaCheck(cudaEventRecord(ev[2], m.stream));
        for (int l = L - 1; l >= 0; l--) {
            gpt2_backward_layer(&m, l, B, T);
            cudaCheck(cudaEventRecord(ev[3 + (L - 1 - l)], m.stream));
        }
        gpt2_backward_embed(&m, x, B, T);
        cudaCheck(cudaEventRecord(ev[L + 3], m.stream));
        cudaCheck(cudaEventSynchronize(ev[L + 3]));
        if (it < 0) { continue; }
        float ms;
        cudaCheck(cudaEventElapsedTime(&ms, ev[0], ev[1])); fwd += ms;
        cudaCheck(cudaEventElapsedTime(&ms, ev[1], ev[2])); head += ms;
        for (int i = 0; i < L; i++) {
            cudaCheck(cudaEventElapsedTime(&ms, ev[2 + i], ev[3 + i]));
            layer[L - 1 - i] += ms;
        }
        cudaCheck(cudaEventElapsedTime(&ms, ev[L + 2], ev[L + 3])); embed += ms;
    }
    double lsum = 0.0, lmin = 1e30, lmax = 0.0;
    for (int l = 0; l < L; l++) {
        double v = layer[l] / iters;
        lsum += v;
        if (v < lmin) { lmin = v; }
        if (v > lmax) { lmax = v; }
    }
    printf("forward (with the classifier): %.3f ms\n", fwd / iters);
    printf("backward: LM head + final LayerNorm %.3f ms | per layer mean %.3f ms (min %.3f, max %.3f) | embeddings %.3f ms "
           "| total %.3f ms\n", head / iters, lsum / L, lmin, lmax, embed / iters, (head + embed) / iters + lsum);
    size_t off[12], len[12], layer_elems = 0;
    const int ns = zero_layer_slices(&config, 0, off, len);
    for (int i = 0; i < ns; i++) { layer_elems += len[i]; }
    printf("gradients of one layer: %zu bf16 values (%.2f MB) in %d slices; all gradients %.2f MB\n", layer_elems,
           layer_elems * 2 / 1e6, ns, m.num_params * 2 / 1e6);

#ifdef MULTI_GPU
    // a communicator of one rank: what a reduction costs without any link (launch, local copy)
    NcclContext ctx;
    memset(&ctx, 0, sizeof(ctx));
    ctx.rank = 0;
    ctx.world_size = 1;
    ctx.timeout_s = 60;
    ncclUniqueId id;
    ncclCheck(ncclGetUniqueId(&id));
    ncclCheck(ncclCommInitRank(&ctx.comm, 1, id, 0));
    cudaCheck(cudaStreamCreateWithFlags(&ctx.stream, cudaStreamNonBlocking));
    cudaEvent_t a, b;
    cudaCheck(cudaEventCreate(&a));
    cudaCheck(cudaEventCreate(&b));
    for (int mode = 0; mode < 2; mode++) {  // 0: one layer's 12 slices in a group; 1: all gradients in one call
        double total = 0.0;
        for (int it = -3; it < iters; it++) {
            cudaCheck(cudaEventRecord(a, ctx.stream));
            if (mode == 0) {
                ncclCheck(ncclGroupStart());
                for (int i = 0; i < ns; i++) {
                    ncclCheck(ncclAllReduce(m.grads_memory + off[i], m.grads_memory + off[i], len[i], ncclBfloat16, ncclSum,
                                            ctx.comm, ctx.stream));
                }
                ncclCheck(ncclGroupEnd());
            } else {
                ncclCheck(ncclAllReduce(m.grads_memory, m.grads_memory, m.num_params, ncclBfloat16, ncclSum, ctx.comm,
                                        ctx.stream));
            }
            cudaCheck(cudaEventRecord(b, ctx.stream));
            cudaCheck(cudaEventSynchronize(b));
            float ms;
            cudaCheck(cudaEventElapsedTime(&ms, a, b));
            if (it >= 0) { total += ms; }
        }
        printf("NCCL all-reduce on 1 rank, %s: %.4f ms\n", mode == 0 ? "one layer (12 slices, one group)" :
               "all gradients (one call)", total / iters);
    }
    ncclCommDestroy(ctx.comm);
#else
    printf("NCCL all-reduce: not measured (this build has no NCCL; give NCCL_HOME to make)\n");
#endif
    gpt2_free(&m);
    cublas_free();
    free(layer); free(x); free(y);
    return 0;
}
