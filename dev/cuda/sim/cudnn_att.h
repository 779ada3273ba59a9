/*
 * Host simulator: a stand-in for cuDNN's attention behind llmc/cuda/cudnn_att.h, so that the
 * trainer's -at cudnn (and -at auto's choice of it) runs on the simulator: the memory plan's
 * workspace row, -b auto's probes and their refusals, the graphs built per shape and forgotten,
 * the banner, the warning where the backward is not deterministic, the resume's -at check.
 * sim_rewrite.py puts this file in the place of cudnn_att.h in the simulator's copy of llmc/ (the
 * real declarations come in as cudnn_att_api.h: a definition here that drifts from them does not
 * compile), and the simulator's trainer and model test are built with USE_CUDNN.
 *
 * What it computes: our fused kernels (attention.cuh), so a run with it is bit for bit a run with
 * -at own; its workspace is our backward's fp32 scratch, which the backward uses as such (a
 * workspace smaller than asked is an error, as in cuDNN). Settings, read at each graph built:
 *   SIM_CUDNN_MAX_WORKSPACE=<bytes>  shapes that need more are refused, as cuDNN refuses a graph
 *                                    whose engines all need more workspace than allowed
 *   SIM_CUDNN_DETERMINISTIC=0        the backward graphs say they are not deterministic (as where
 *                                    cuDNN's support check refuses its deterministic algorithm)
 * and at cudnn_att_free, with SIM_CUDNN_REPORT=1, a line on stderr with the calls it ran (which
 * calls went to cuDNN, as the same bits cannot tell): "sim cudnn: F forward, B backward calls".
 */
#ifndef LLMC_SIM_CUDNN_ATT_H
#define LLMC_SIM_CUDNN_ATT_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <map>
#include <tuple>

#include "cudnn_att_api.h"
#include "attention.cuh"

namespace sim_cudnn {

struct Shape {
    int B, T, NH, HS;
    bool operator<(const Shape &o) const { return std::tie(B, T, NH, HS) < std::tie(o.B, o.T, o.NH, o.HS); }
};
struct Plan {
    size_t workspace;
    bool deterministic;
};
inline std::map<Shape, Plan> plans;  // one for the forward and backward graphs of a shape
inline bool want_deterministic = true;
inline char message[512];
inline long calls[2];  // forward, backward

// the shape's graphs, built within ws_limit bytes of workspace where not built yet; NULL or why not
inline const char *get_plan(const Shape &s, size_t ws_limit, const Plan **out) {
    auto it = plans.find(s);
    if (it == plans.end()) {
        if (s.HS != 64 && s.HS != 128) {
            snprintf(message, sizeof(message), "the simulator's cuDNN stand-in runs our kernels, which take head "
                     "sizes 64 and 128, not %d", s.HS);
            return message;
        }
        Plan p = {attention_backward_scratch_bytes(s.B, s.T, s.NH * s.HS, s.NH), want_deterministic};
        const char *max_env = getenv("SIM_CUDNN_MAX_WORKSPACE"), *det_env = getenv("SIM_CUDNN_DETERMINISTIC");
        char *end = NULL;
        const size_t max_ws = max_env ? strtoull(max_env, &end, 10) : SIZE_MAX;
        if (max_env && (end == max_env || *end != '\0' || max_env[0] == '-')) {
            snprintf(message, sizeof(message), "SIM_CUDNN_MAX_WORKSPACE=%s: expected a number of bytes", max_env);
            return message;
        }
        if (det_env && strcmp(det_env, "0") != 0 && strcmp(det_env, "1") != 0) {
            snprintf(message, sizeof(message), "SIM_CUDNN_DETERMINISTIC=%s: expected 0 or 1", det_env);
            return message;
        }
        if (det_env && strcmp(det_env, "0") == 0) { p.deterministic = false; }
        if (p.workspace > max_ws || p.workspace > ws_limit) {
            snprintf(message, sizeof(message), "cuDNN cannot build the attention for B=%d T=%d NH=%d HS=%d (%s): no "
                     "engine within %zu bytes of workspace (the stand-in needs %zu)", s.B, s.T, s.NH, s.HS,
                     ws_limit == SIZE_MAX ? "any workspace" : "within the allocated workspace",
                     max_ws < ws_limit ? max_ws : ws_limit, p.workspace);
            return message;
        }
        it = plans.emplace(s, p).first;
    }
    *out = &it->second;
    return NULL;
}

inline const char *check_workspace(const Plan *p, const void *workspace, size_t bytes, const char *what) {
    if (p->workspace > bytes || (p->workspace > 0 && workspace == NULL)) {
        snprintf(message, sizeof(message), "internal: the cuDNN attention %s needs %zu bytes of workspace, %zu given",
                 what, p->workspace, workspace ? bytes : 0);
        return message;
    }
    return NULL;
}

}  // namespace sim_cudnn

extern "C" const char *cudnn_att_prepare(int B, int T, int NH, int HS, size_t ws_limit, size_t *ws_bytes) {
    const sim_cudnn::Plan *p;
    if (const char *err = sim_cudnn::get_plan({B, T, NH, HS}, ws_limit, &p)) { return err; }
    *ws_bytes = p->workspace;
    return NULL;
}

extern "C" const char *cudnn_att_forward(void *out, float *lse, const void *qkv, int B, int T, int NH, int HS,
                                                void *workspace, size_t workspace_bytes, cudaStream_t stream) {
    const sim_cudnn::Plan *p;
    if (const char *err = sim_cudnn::get_plan({B, T, NH, HS}, workspace_bytes, &p)) { return err; }
    if (const char *err = sim_cudnn::check_workspace(p, workspace, workspace_bytes, "forward")) { return err; }
    attention_forward((floatX *)out, lse, (const floatX *)qkv, B, T, NH * HS, NH, stream);
    sim_cudnn::calls[0]++;
    return NULL;
}

extern "C" const char *cudnn_att_backward(void *dqkv, const void *dout, const void *qkv, const void *out,
                                                 const float *lse, int B, int T, int NH, int HS, void *workspace,
                                                 size_t workspace_bytes, cudaStream_t stream) {
    const sim_cudnn::Plan *p;
    if (const char *err = sim_cudnn::get_plan({B, T, NH, HS}, workspace_bytes, &p)) { return err; }
    if (const char *err = sim_cudnn::check_workspace(p, workspace, workspace_bytes, "backward")) { return err; }
    attention_backward((floatX *)dqkv, (const floatX *)dout, (const floatX *)qkv, (const floatX *)out, lse,
                       (float *)workspace, B, T, NH * HS, NH, stream);
    sim_cudnn::calls[1]++;
    return NULL;
}

extern "C" int cudnn_att_deterministic(void) {
    for (const auto &kv : sim_cudnn::plans) {
        if (!kv.second.deterministic) { return 0; }
    }
    return 1;
}

extern "C" void cudnn_att_set_deterministic(int deterministic) {
    if (sim_cudnn::want_deterministic != (deterministic != 0)) { sim_cudnn::plans.clear(); }
    sim_cudnn::want_deterministic = deterministic != 0;
}

extern "C" const char *cudnn_att_describe(void) {
    static char buf[128];
    snprintf(buf, sizeof(buf), "the simulator's cuDNN stand-in (our kernels), %s backward",
             cudnn_att_deterministic() ? "deterministic" : "NON-deterministic");
    return buf;
}

extern "C" void cudnn_att_forget_plans(void) { sim_cudnn::plans.clear(); }

extern "C" void cudnn_att_free(void) {
    const char *report = getenv("SIM_CUDNN_REPORT");
    if (report && strcmp(report, "0") != 0 && strcmp(report, "1") != 0) {
        fprintf(stderr, "sim cudnn: SIM_CUDNN_REPORT=%s: expected 0 or 1\n", report);
    } else if (report && strcmp(report, "1") == 0) {
        fprintf(stderr, "sim cudnn: %ld forward, %ld backward calls\n", sim_cudnn::calls[0], sim_cudnn::calls[1]);
    }
    sim_cudnn::plans.clear();
}

#endif  // LLMC_SIM_CUDNN_ATT_H
