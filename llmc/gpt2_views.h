/*
 * Named views of the model's flat parameter array, written once for both trainers: the CPU
 * trainer declares them for float (fp32), the CUDA trainer for floatX (bf16), with
 *     GPT2_DECLARE_VIEWS(float)
 * which defines ParameterTensors (the 16 tensors in the model file's order, llmc/model_io.h),
 * LayerParams (one layer's slices of the 12 stacked per-layer tensors), point_parameters() and
 * layer_params(). Gradients use the same types over the gradient array.
 *
 * Each view is a union of the named pointers and an array of them, so the tables below are one
 * loop over the file's order; the shapes are those of the model file (legend in model_io.h).
 */
#ifndef LLMC_GPT2_VIEWS_H
#define LLMC_GPT2_VIEWS_H

#include "model_io.h"

#define GPT2_LAYER_TENSORS 12  // ln1w .. fcprojb: file tensors 2..13, each stacked (L, ...)
#define GPT2_FIRST_LAYER_TENSOR 2

// the per-layer size of each stacked tensor, in file order from ln1w
static inline void gpt2_layer_param_sizes(size_t sizes[GPT2_LAYER_TENSORS], const GPT2Config *c) {
    size_t all[NUM_PARAMETER_TENSORS];
    gpt2_param_sizes(all, c);
    for (int i = 0; i < GPT2_LAYER_TENSORS; i++) { sizes[i] = all[GPT2_FIRST_LAYER_TENSOR + i] / c->num_layers; }
}

#define GPT2_DECLARE_VIEWS(T)                                                                                          \
    typedef union {                                                                                                    \
        struct {                                                                                                       \
            T *wte;      /* (Vp, C)     */                                                                             \
            T *wpe;      /* (maxT, C)   */                                                                             \
            T *ln1w;     /* (L, C)      */                                                                             \
            T *ln1b;     /* (L, C)      */                                                                             \
            T *qkvw;     /* (L, 3C, C)  */                                                                             \
            T *qkvb;     /* (L, 3C)     */                                                                             \
            T *attprojw; /* (L, C, C)   */                                                                             \
            T *attprojb; /* (L, C)      */                                                                             \
            T *ln2w;     /* (L, C)      */                                                                             \
            T *ln2b;     /* (L, C)      */                                                                             \
            T *fcw;      /* (L, 4C, C)  */                                                                             \
            T *fcb;      /* (L, 4C)     */                                                                             \
            T *fcprojw;  /* (L, C, 4C)  */                                                                             \
            T *fcprojb;  /* (L, C)      */                                                                             \
            T *lnfw;     /* (C)         */                                                                             \
            T *lnfb;     /* (C)         */                                                                             \
        };                                                                                                             \
        T *t[NUM_PARAMETER_TENSORS];                                                                                   \
    } ParameterTensors;                                                                                                \
                                                                                                                       \
    /* layer l's slices: the same names without the leading L */                                                       \
    typedef union {                                                                                                    \
        struct {                                                                                                       \
            T *ln1w, *ln1b;         /* (C), (C)        */                                                              \
            T *qkvw, *qkvb;         /* (3C, C), (3C)   */                                                              \
            T *attprojw, *attprojb; /* (C, C), (C)     */                                                              \
            T *ln2w, *ln2b;         /* (C), (C)        */                                                              \
            T *fcw, *fcb;           /* (4C, C), (4C)   */                                                              \
            T *fcprojw, *fcprojb;   /* (C, 4C), (C)    */                                                              \
        };                                                                                                             \
        T *t[GPT2_LAYER_TENSORS];                                                                                      \
    } LayerParams;                                                                                                     \
                                                                                                                       \
    /* the tensors of a flat array of all parameters, in file order */                                                 \
    static inline void point_parameters(ParameterTensors *p, T *base, const size_t sizes[NUM_PARAMETER_TENSORS]) {     \
        for (int i = 0; i < NUM_PARAMETER_TENSORS; i++) {                                                              \
            p->t[i] = base;                                                                                            \
            base += sizes[i];                                                                                          \
        }                                                                                                              \
    }                                                                                                                  \
                                                                                                                       \
    static inline LayerParams layer_params(const ParameterTensors *p, const GPT2Config *c, int l) {                    \
        size_t sizes[GPT2_LAYER_TENSORS];                                                                              \
        gpt2_layer_param_sizes(sizes, c);                                                                              \
        LayerParams lp;                                                                                                \
        for (int i = 0; i < GPT2_LAYER_TENSORS; i++) {                                                                 \
            lp.t[i] = p->t[GPT2_FIRST_LAYER_TENSOR + i] + (size_t)l * sizes[i];                                        \
        }                                                                                                              \
        return lp;                                                                                                     \
    }

#endif  // LLMC_GPT2_VIEWS_H
