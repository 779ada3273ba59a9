/*
 * The attention of a run (-at): our fused kernel (attention.cuh) or cuDNN's fused SDPA
 * (cudnn_att.cpp, in builds with USE_CUDNN); -at auto (the default) picks the one measured faster.
 * The one place that knows whether this build has cuDNN: the model names an implementation and
 * calls these functions.
 */
#ifndef LLMC_ATTENTION_CHOICE_CUH
#define LLMC_ATTENTION_CHOICE_CUH

#include "attention.cuh"
#include "../model_io.h"
#ifdef USE_CUDNN
#include "cudnn_att.h"
#define ATTENTION_HAVE_CUDNN 1
#else
#define ATTENTION_HAVE_CUDNN 0
#endif

typedef enum { ATTENTION_OWN = 0, ATTENTION_CUDNN = 1 } AttentionImpl;

// -at auto picks cuDNN from this T on, in builds with it. Measured on one H200 (2026-11-26, the
// attention workbench, HS 64, d12's and d48's heads): cuDNN's forward and backward took 0.79x and
// 0.82x our kernel's time at T = 256 and 0.69-0.81x at T = 1024 (d12 at B = 64, T = 1024: 1.09x
// the whole step's tokens/s), but 2.2x and 1.25x at T = 64.
#define ATTENTION_AUTO_CUDNN_MIN_T 256

// -at auto's choice: have_cudnn, whether this build has cuDNN's attention
static AttentionImpl attention_auto(int have_cudnn, int T) {
    return have_cudnn && T >= ATTENTION_AUTO_CUDNN_MIN_T ? ATTENTION_CUDNN : ATTENTION_OWN;
}

// name: "auto", "own" or "cudnn", from `source` (a flag or variable, for the message), for a run of
// sequence length T; stops with a one-line error for an unknown name or for cudnn in a build without it
static AttentionImpl attention_impl(const char *name, const char *source, int T) {
    if (!strcmp(name, "own")) { return ATTENTION_OWN; }
    if (!strcmp(name, "auto")) { return attention_auto(ATTENTION_HAVE_CUDNN, T); }
    if (strcmp(name, "cudnn")) { llmc_die("%s %s: unknown attention implementation (auto, own or cudnn)", source, name); }
#ifndef USE_CUDNN
    llmc_die("%s cudnn: this build has no cuDNN attention; build with it: make cudnn-frontend, then make again (needs "
             "cuDNN 9: the CUDA toolkit's, CUDNN_HOME=dir, or the nvidia-cudnn-cu13 wheel; make's 'cuDNN:' line says "
             "what it found), or use -at own", source);
#endif
    return ATTENTION_CUDNN;
}

// stops the run on cuDNN's refusal (err, from the calls below; always NULL in a build without cuDNN)
static void cudnn_att_check(const char *err) {
    if (err) { llmc_die("-at cudnn: %s; -at own runs our kernel instead", err); }
}

// cuDNN's attention workspace for B x T (the largest shape) into *bytes: builds its graphs, so it
// needs the GPU; 0 for our kernel. NULL, or why cuDNN cannot build them for this shape.
static const char *attention_workspace_probe(AttentionImpl impl, const GPT2Config *c, int B, int T, size_t *bytes) {
    *bytes = 0;
#ifdef USE_CUDNN
    if (impl == ATTENTION_CUDNN) { return cudnn_att_prepare(B, T, c->num_heads, c->channels / c->num_heads, SIZE_MAX, bytes); }
#endif
    (void)impl; (void)c; (void)B; (void)T;
    return NULL;
}

// the same for the run's own shape: a refusal stops the run
static size_t attention_workspace_bytes(AttentionImpl impl, const GPT2Config *c, int B, int T) {
    size_t bytes = 0;
    cudnn_att_check(attention_workspace_probe(impl, c, B, T, &bytes));
    return bytes;
}

// after -b auto's sizing: the graphs of the batch sizes it tried are dropped (the run builds its own)
static void attention_forget_probes(void) {
#ifdef USE_CUDNN
    cudnn_att_forget_plans();
#endif
}

// out (B, T, C), lse (B, NH, T) from qkv (B, T, 3C); workspace: cuDNN's (attention_workspace_bytes)
static void attention_forward_with(AttentionImpl impl, floatX *out, float *lse, const floatX *qkv, int B, int T, int C,
                                   int NH, void *workspace, size_t workspace_bytes, cudaStream_t stream) {
#ifdef USE_CUDNN
    if (impl == ATTENTION_CUDNN) {
        cudnn_att_check(cudnn_att_forward(out, lse, qkv, B, T, NH, C / NH, workspace, workspace_bytes, stream));
        return;
    }
#endif
    (void)impl; (void)workspace; (void)workspace_bytes;
    attention_forward(out, lse, qkv, B, T, C, NH, stream);
}

// dqkv (B, T, 3C) overwritten from dout (B, T, C) and the forward's qkv, out, lse; scratch: our kernel's
static void attention_backward_with(AttentionImpl impl, floatX *dqkv, const floatX *dout, const floatX *qkv,
                                    const floatX *out, const float *lse, float *scratch, int B, int T, int C, int NH,
                                    void *workspace, size_t workspace_bytes, cudaStream_t stream) {
#ifdef USE_CUDNN
    if (impl == ATTENTION_CUDNN) {
        cudnn_att_check(cudnn_att_backward(dqkv, dout, qkv, out, lse, B, T, NH, C / NH, workspace, workspace_bytes, stream));
        return;
    }
#endif
    (void)impl; (void)workspace; (void)workspace_bytes;
    attention_backward(dqkv, dout, qkv, out, lse, scratch, B, T, C, NH, stream);
}

// 1 if the backward is bitwise reproducible (ours always; cuDNN's where its support check accepted
// the deterministic algorithm)
static int attention_deterministic(AttentionImpl impl) {
#ifdef USE_CUDNN
    if (impl == ATTENTION_CUDNN) { return cudnn_att_deterministic(); }
#endif
    (void)impl;
    return 1;
}

// the banner's description of the implementation
static const char *attention_describe(AttentionImpl impl, size_t workspace_bytes) {
#ifdef USE_CUDNN
    if (impl == ATTENTION_CUDNN) {
        static char buf[320];
        snprintf(buf, sizeof(buf), "cudnn (%s; workspace %.2f GiB)", cudnn_att_describe(),
                 workspace_bytes / (1024.0 * 1024.0 * 1024.0));
        return buf;
    }
#endif
    (void)impl; (void)workspace_bytes;
    return "own (llmc/cuda/attention.cuh)";
}

// at the end of the process: cuDNN's graphs and handle (shared by every model of the process)
static void attention_free(void) {
#ifdef USE_CUDNN
    cudnn_att_free();
#endif
}

#endif  // LLMC_ATTENTION_CHOICE_CUH
