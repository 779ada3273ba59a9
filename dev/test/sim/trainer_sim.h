/*
 * Forced include (g++ -include) for building train_gpt2.cu and test_gpt2.cu against the CPU host
 * simulator of dev/cuda/sim (see dev/cuda/README.md, "Host simulator"): every kernel of the llmc
 * layers runs from its own source with fibers for threads, cuBLASLt is the documented-semantics
 * stand-in, device memory is host memory under AddressSanitizer. What this file adds:
 *
 * 1. The CUDA runtime calls the trainer makes beyond what the kernel workbenches need (streams,
 *    event queries, memory info, function attributes, PCI bus ids). The simulator runs every
 *    launch and copy synchronously, so streams and events are ordering no-ops here.
 * 2. A stand-in for llmc/attention.cuh, whose fused kernels are inline PTX (mma.sync, ldmatrix,
 *    cp.async) that only their own simulator (dev/cuda/attention_sim.cpp) can run: the same
 *    launcher contract (out and lse from qkv; dqkv from dout, qkv, out, lse; scratch size) computed
 *    plainly on the host, with the fused kernels' bf16 rounding points (the probabilities P before
 *    P V, and P and dS before the backward's matmuls), so that the trainer's use of the contract
 *    (strides, which buffers persist from forward to backward) and the error budget match.
 * What this build tests is the orchestration in train_gpt2.cu (pointers, strides, accumulate vs
 * overwrite, recomputation, optimizer ranges, checkpoints, the MPI reduction and ZeRO-1), not the
 * GPU: dev/test/test_gpu.sh does that on one.
 */
#ifndef LLMC_TRAINER_SIM_H
#define LLMC_TRAINER_SIM_H

#include <cuda_runtime.h>
#include <math.h>
#include <stdlib.h>

// ---- 1. runtime calls

#define cudaStreamNonBlocking 1
#define cudaErrorMemoryAllocation ((cudaError_t)2)
#define cudaErrorInvalidDeviceFunction ((cudaError_t)98)
#define cudaErrorNoKernelImageForDevice ((cudaError_t)209)
#define cudaErrorNotReady ((cudaError_t)600)

static inline cudaError_t cudaStreamCreate(cudaStream_t *s) { *s = (cudaStream_t)malloc(1); return cudaSuccess; }
static inline cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned int) { return cudaStreamCreate(s); }
static inline cudaError_t cudaStreamDestroy(cudaStream_t s) { free(s); return cudaSuccess; }
static inline cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaSuccess; }
static inline cudaError_t cudaStreamWaitEvent(cudaStream_t, cudaEvent_t, unsigned int) { return cudaSuccess; }
static inline cudaError_t cudaEventQuery(cudaEvent_t) { return cudaSuccess; }
static inline cudaError_t cudaGetDevice(int *d) { *d = 0; return cudaSuccess; }
static inline cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes) {
    *total_bytes = (size_t)16 << 30;
    *free_bytes = (size_t)15 << 30;
    return cudaSuccess;
}
struct cudaFuncAttributes {
    int maxThreadsPerBlock;
};
static inline cudaError_t cudaFuncGetAttributes(cudaFuncAttributes *a, const void *) {
    a->maxThreadsPerBlock = 1024;
    return cudaSuccess;
}
static inline cudaError_t cudaDeviceGetPCIBusId(char *bus, int len, int device) {
    snprintf(bus, (size_t)len, "0000:%02x:00.0", device);
    return cudaSuccess;
}

// ---- 2. the attention stand-in

#include "llmc/cuda_common.cuh"
#define LLMC_ATTENTION_CUH  // train_gpt2.cu's #include of the real one becomes a no-op

static inline float sim_bf16_round(float x) { return __bfloat162float(__float2bfloat16(x)); }

static inline size_t attention_backward_scratch_bytes(int B, int T, int C, int NH) {
    (void)C;
    return (size_t)B * NH * T * sizeof(float);
}

static inline void sim_attention_shapes(const char *who, int C, int NH) {
    if (C % NH != 0 || (C / NH != 64 && C / NH != 128)) {
        llmc_die("%s: head size %d is not supported by the fused attention kernels; supported head sizes: 64, 128", who,
                 C / NH);
    }
}

// out (B,T,C) and lse (B,NH,T) from qkv (B,T,3C), causal, scale 1/sqrt(HS)
static inline void attention_forward(floatX *out, float *lse, const floatX *qkv, int B, int T, int C, int NH,
                                     cudaStream_t) {
    sim_attention_shapes("attention_forward", C, NH);
    const int HS = C / NH, C3 = 3 * C;
    const float scale = 1.0f / sqrtf((float)HS);
    float *s = (float *)mallocCheck((size_t)T * sizeof(float));
    float *o = (float *)mallocCheck((size_t)HS * sizeof(float));
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            for (int t = 0; t < T; t++) {
                const floatX *q = qkv + ((size_t)b * T + t) * C3 + h * HS;
                float m = -INFINITY;
                for (int j = 0; j <= t; j++) {
                    const floatX *k = qkv + ((size_t)b * T + j) * C3 + C + h * HS;
                    float d = 0.0f;
                    for (int i = 0; i < HS; i++) { d += __bfloat162float(q[i]) * __bfloat162float(k[i]); }
                    s[j] = d * scale;
                    if (s[j] > m) { m = s[j]; }
                }
                float l = 0.0f;
                for (int i = 0; i < HS; i++) { o[i] = 0.0f; }
                for (int j = 0; j <= t; j++) {
                    const float p = expf(s[j] - m);
                    l += p;
                    const float pr = sim_bf16_round(p);  // P enters the P V matmul as bf16
                    const floatX *v = qkv + ((size_t)b * T + j) * C3 + 2 * C + h * HS;
                    for (int i = 0; i < HS; i++) { o[i] += pr * __bfloat162float(v[i]); }
                }
                floatX *y = out + ((size_t)b * T + t) * C + h * HS;
                for (int i = 0; i < HS; i++) { y[i] = __float2bfloat16(o[i] / l); }
                lse[((size_t)b * NH + h) * T + t] = m + logf(l);
            }
        }
    }
    free(s);
    free(o);
}

// dqkv (B,T,3C) overwritten; D = rowsum(dO * O) goes to scratch as in the fused backward
static inline void attention_backward(floatX *dqkv, const floatX *dout, const floatX *qkv, const floatX *out,
                                      const float *lse, float *scratch, int B, int T, int C, int NH, cudaStream_t) {
    sim_attention_shapes("attention_backward", C, NH);
    const int HS = C / NH, C3 = 3 * C;
    const float scale = 1.0f / sqrtf((float)HS);
    float *dq = (float *)mallocCheck((size_t)T * HS * sizeof(float));
    float *dk = (float *)mallocCheck((size_t)T * HS * sizeof(float));
    float *dv = (float *)mallocCheck((size_t)T * HS * sizeof(float));
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            float *D = scratch + ((size_t)b * NH + h) * T;
            for (int t = 0; t < T; t++) {
                const floatX *go = dout + ((size_t)b * T + t) * C + h * HS, *o = out + ((size_t)b * T + t) * C + h * HS;
                float d = 0.0f;
                for (int i = 0; i < HS; i++) { d += __bfloat162float(go[i]) * __bfloat162float(o[i]); }
                D[t] = d;
            }
            memset(dq, 0, (size_t)T * HS * sizeof(float));
            memset(dk, 0, (size_t)T * HS * sizeof(float));
            memset(dv, 0, (size_t)T * HS * sizeof(float));
            for (int t = 0; t < T; t++) {
                const floatX *q = qkv + ((size_t)b * T + t) * C3 + h * HS;
                const floatX *go = dout + ((size_t)b * T + t) * C + h * HS;
                const float L = lse[((size_t)b * NH + h) * T + t];
                for (int j = 0; j <= t; j++) {
                    const floatX *k = qkv + ((size_t)b * T + j) * C3 + C + h * HS;
                    const floatX *v = qkv + ((size_t)b * T + j) * C3 + 2 * C + h * HS;
                    float sc = 0.0f, dp = 0.0f;
                    for (int i = 0; i < HS; i++) {
                        sc += __bfloat162float(q[i]) * __bfloat162float(k[i]);
                        dp += __bfloat162float(go[i]) * __bfloat162float(v[i]);
                    }
                    const float p = expf(sc * scale - L);
                    const float ds = sim_bf16_round(p * (dp - D[t]));  // dS and P enter matmuls as bf16
                    const float pr = sim_bf16_round(p);
                    for (int i = 0; i < HS; i++) {
                        dv[(size_t)j * HS + i] += pr * __bfloat162float(go[i]);
                        dk[(size_t)j * HS + i] += ds * __bfloat162float(q[i]);
                        dq[(size_t)t * HS + i] += ds * __bfloat162float(k[i]);
                    }
                }
            }
            for (int t = 0; t < T; t++) {
                floatX *g = dqkv + ((size_t)b * T + t) * C3 + h * HS;
                for (int i = 0; i < HS; i++) {
                    g[i] = __float2bfloat16(scale * dq[(size_t)t * HS + i]);
                    g[C + i] = __float2bfloat16(scale * dk[(size_t)t * HS + i]);
                    g[2 * C + i] = __float2bfloat16(dv[(size_t)t * HS + i]);
                }
            }
        }
    }
    free(dq);
    free(dk);
    free(dv);
}

#endif  // LLMC_TRAINER_SIM_H
