/*
 * Host simulator: <cuda_runtime_api.h>, which llmc/cuda/cudnn_att.h includes for cudaStream_t, is the
 * simulator's runtime (cuda_runtime.h) here, so that the toolkit's own header is never mixed in.
 */
#ifndef LLMC_SIM_CUDA_RUNTIME_API_H
#define LLMC_SIM_CUDA_RUNTIME_API_H
#include "cuda_runtime.h"
#endif
