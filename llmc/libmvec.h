/*
 * glibc's vector tanhf and expf (libmvec) for `omp simd` loops. glibc 2.35 and later has AVX2 and
 * AVX-512 versions of them, but math.h declares them `omp declare simd` only under the full
 * -ffast-math, and the Makefile keeps -fno-finite-math-only for the NaN guards; declared here,
 * GCC can vectorize the CPU trainer's GELU and softmax.
 */
#ifndef LLMC_LIBMVEC_H
#define LLMC_LIBMVEC_H

#include <math.h>

#if defined(__x86_64__) && defined(__GLIBC__) && defined(_OPENMP) && (__GLIBC__ > 2 || __GLIBC_MINOR__ >= 35)
#pragma omp declare simd notinbranch
float tanhf(float);
#pragma omp declare simd notinbranch
float expf(float);
#endif

#endif  // LLMC_LIBMVEC_H
