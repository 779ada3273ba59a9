/*
 * Causal multi-head self-attention through cuDNN's fused SDPA (scaled dot-product attention) graphs:
 * the alternative to llmc/cuda/attention.cuh that `-at cudnn` selects, with the same tensors and conventions
 * (shape legend and layouts: llmc/cuda/attention.cuh):
 *   qkv  (B, T, 3C) bf16   read in place: head h of q, k, v at columns h*HS, C + h*HS, 2C + h*HS
 *   out  (B, T, C)  bf16   overwritten
 *   lse  (B, NH, T) fp32   log(sum_s exp(scale * q_t . k_s)) over s <= t (natural log), scale = 1/sqrt(HS):
 *                          cuDNN's softmax "Stats" output is exactly this, so either forward's lse
 *                          feeds either backward
 *   dqkv (B, T, 3C) bf16   overwritten
 *
 * A plain C interface to llmc/cuda/cudnn_att.cpp, a translation unit of its own: the cuDNN frontend is a
 * header-only C++ library that takes about a minute and a half to compile, so nothing else includes
 * it. Built only when the Makefile finds cuDNN and the frontend (it then defines USE_CUDNN).
 *
 * Graphs are built once per shape (B, T, NH, HS) and cached for the life of the process. Building
 * needs the GPU (the current device) and may compile kernels at run time (NVRTC).
 *
 * Errors: every function that can fail returns NULL on success, else a one-line message (valid until
 * the next call). Nothing here exits: the caller stops with llmc_die, which prefixes the rank and
 * takes the other ranks down.
 */
#ifndef LLMC_CUDNN_ATT_H
#define LLMC_CUDNN_ATT_H

#include <stddef.h>
#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

// Builds the forward and backward graphs of the shape (cached), choosing among the engines that need
// at most ws_limit bytes of workspace (SIZE_MAX: any), and sets *ws_bytes to the larger workspace of
// the two: what cudnn_att_forward and cudnn_att_backward then need for this shape.
const char *cudnn_att_prepare(int B, int T, int NH, int HS, size_t ws_limit, size_t *ws_bytes);

// out (B, T, C), lse (B, NH, T) from qkv (B, T, 3C); C = NH * HS. Device pointers, 16-byte aligned.
// workspace: workspace_bytes of device memory; a shape not prepared yet is prepared with that limit.
const char *cudnn_att_forward(void *out, float *lse, const void *qkv, int B, int T, int NH, int HS,
                              void *workspace, size_t workspace_bytes, cudaStream_t stream);

// dqkv (B, T, 3C) from dout (B, T, C) and the forward's qkv, out and lse.
const char *cudnn_att_backward(void *dqkv, const void *dout, const void *qkv, const void *out, const float *lse, int B,
                               int T, int NH, int HS, void *workspace, size_t workspace_bytes, cudaStream_t stream);

// 1 if every backward graph built so far uses cuDNN's deterministic algorithm (bitwise-reproducible
// gradients), 0 if one does not (cuDNN's support check refused the deterministic one for its shape)
int cudnn_att_deterministic(void);

// deterministic 0: the backward graphs built from now on use cuDNN's default algorithm (dQ summed
// with atomics) without trying the deterministic one; 1 (the default): the deterministic one where
// cuDNN supports it. A change drops the backward graphs built so far.
void cudnn_att_set_deterministic(int deterministic);

// what was built, for the startup banner: e.g. "cuDNN 9.19.0, frontend 1.32.0, deterministic backward"
const char *cudnn_att_describe(void);

// drops every graph built so far (those -b auto built to size the workspace at the batch sizes it
// tried): the run's own are built again at its shape, and only they count for cudnn_att_deterministic
void cudnn_att_forget_plans(void);

// destroys the graphs and the cuDNN handle
void cudnn_att_free(void);

#ifdef __cplusplus
}
#endif

#endif  // LLMC_CUDNN_ATT_H
