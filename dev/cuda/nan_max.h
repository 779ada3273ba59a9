/*
 * The one running maximum of the checks' printouts (dev/cuda workbenches through common.h, the
 * attention checks through attention_ref.h): fmax, std::max and `if (d > m)` all skip a NaN, so a
 * NaN element would print a finite max |diff| beside its FAIL.
 */
#ifndef DEV_CUDA_NAN_MAX_H
#define DEV_CUDA_NAN_MAX_H

#include <math.h>

// the larger of m and d, NaN once either is NaN
static inline double max_keep_nan(double m, double d) { return (isnan(m) || isnan(d)) ? NAN : (d > m ? d : m); }

#endif
