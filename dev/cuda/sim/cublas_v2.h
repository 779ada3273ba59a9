/* Host simulator: <cublas_v2.h> stand-in; everything used is in cublasLt.h. */
#ifndef SIM_CUBLAS_V2_H
#define SIM_CUBLAS_V2_H
#include "cublasLt.h"
#endif  // SIM_CUBLAS_V2_H
