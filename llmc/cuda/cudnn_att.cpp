/*
 * cuDNN's fused attention (SDPA) behind the C interface of llmc/cuda/cudnn_att.h (read that first), written
 * against the cuDNN C++ frontend's graph API (tested with frontend 1.32 and cuDNN 9.19).
 *
 * The graphs, per shape (B, T, NH, HS), C = NH * HS; cuDNN works on (B, NH, T, HS) views, given here
 * by strides into the trainer's tensors (no copies, no transposes):
 *   Q  (b, h, t, d) at qkv + b*T*3C + t*3C + h*HS + d: dims {B, NH, T, HS}, strides {3C*T, HS, 3C, 1};
 *   K, V the same from the pointers qkv + C and qkv + 2C (and dQ, dK, dV into dqkv alike);
 *   O, dO (B, T, C): strides {C*T, HS, C, 1};  Stats = lse (B, NH, T, 1) fp32: strides {NH*T, T, 1, 1}.
 * bf16 in and out, fp32 softmax and accumulation, causal with the diagonal at the top left (query t
 * sees keys 0..t, as in attention.cuh), scale 1/sqrt(HS). The forward always writes Stats (the
 * backward's input), also in evaluation, so that one graph serves every mode.
 * Backward: cuDNN's deterministic algorithm if its support check accepts it for the shape, else the
 * default one, which sums dQ with atomics (not bitwise reproducible); cudnn_att_deterministic() says
 * which was built. cudnn_att_set_deterministic(0) asks for the default one outright (the attention
 * workbench times both: what determinism costs).
 */
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>

#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <unordered_map>

#include <cudnn_frontend.h>

#include "cudnn_att.h"

namespace fe = cudnn_frontend;
typedef std::shared_ptr<fe::graph::Tensor_attributes> TensorPtr;

namespace {

// tensor uids of the variant packs
enum : int64_t { UID_Q = 1, UID_K, UID_V, UID_O, UID_STATS, UID_DO, UID_DQ, UID_DK, UID_DV };

struct Shape {
    int64_t B, T, NH, HS;
    bool operator<(const Shape &o) const { return std::tie(B, T, NH, HS) < std::tie(o.B, o.T, o.NH, o.HS); }
};

struct Plan {
    std::shared_ptr<fe::graph::Graph> graph;
    int64_t workspace = 0;  // bytes
    bool deterministic = true;
};

cudnnHandle_t handle = nullptr;
std::map<Shape, Plan> forward_plans, backward_plans;
bool want_deterministic = true;  // cudnn_att_set_deterministic
char message[2048];
char description[256];

// one line in `message` (the frontend's own messages may span lines)
const char *fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof(message), fmt, ap);
    va_end(ap);
    for (char *c = message; *c; c++) {
        if (*c == '\n' || *c == '\r') { *c = ' '; }
    }
    return message;
}

const char *ensure_handle() {
    if (handle) { return nullptr; }
    cudnnStatus_t st = cudnnCreate(&handle);
    if (st != CUDNN_STATUS_SUCCESS) {
        handle = nullptr;
        return fail("cudnnCreate failed: %s (is a GPU visible, and does libcudnn.so.9 find its sub-libraries?)",
                    cudnnGetErrorString(st));
    }
    return nullptr;
}

// t becomes the (B, NH, T, HS) view of a (B, T, row) bf16 tensor whose head h occupies columns h*HS ..
fe::graph::Tensor_attributes &as_heads(fe::graph::Tensor_attributes &t, const char *name, int64_t uid, const Shape &s,
                                       int64_t row) {
    return t.set_name(name).set_uid(uid).set_dim({s.B, s.NH, s.T, s.HS}).set_stride({s.T * row, s.HS, row, 1});
}

// t becomes lse (B, NH, T, 1) fp32
fe::graph::Tensor_attributes &as_lse(fe::graph::Tensor_attributes &t, const Shape &s) {
    return t.set_name("lse").set_uid(UID_STATS).set_data_type(fe::DataType_t::FLOAT).set_dim({s.B, s.NH, s.T, 1})
        .set_stride({s.NH * s.T, s.T, 1, 1});
}

// a graph input with the given layout
template <class F, class... Args>
TensorPtr input(fe::graph::Graph &g, F layout, Args... args) {
    fe::graph::Tensor_attributes t;
    return g.tensor(layout(t, args...));
}

std::shared_ptr<fe::graph::Graph> new_graph() {
    auto g = std::make_shared<fe::graph::Graph>();
    g->set_io_data_type(fe::DataType_t::BFLOAT16)
        .set_intermediate_data_type(fe::DataType_t::FLOAT)
        .set_compute_data_type(fe::DataType_t::FLOAT);
    return g;
}

float attn_scale(const Shape &s) { return 1.0f / sqrtf((float)s.HS); }

std::shared_ptr<fe::graph::Graph> forward_graph(const Shape &s) {
    auto g = new_graph();
    const int64_t C = s.NH * s.HS;
    TensorPtr q = input(*g, as_heads, "q", UID_Q, s, 3 * C);
    TensorPtr k = input(*g, as_heads, "k", UID_K, s, 3 * C);
    TensorPtr v = input(*g, as_heads, "v", UID_V, s, 3 * C);
    auto options = fe::graph::SDPA_attributes()
                       .set_name("attention_forward")
                       .set_generate_stats(true)
                       .set_causal_mask(true)
                       .set_attn_scale(attn_scale(s));
    auto [o, stats] = g->sdpa(q, k, v, options);
    as_heads(*o, "out", UID_O, s, C).set_output(true);
    as_lse(*stats, s).set_output(true);
    return g;
}

std::shared_ptr<fe::graph::Graph> backward_graph(const Shape &s, bool deterministic) {
    auto g = new_graph();
    const int64_t C = s.NH * s.HS;
    TensorPtr q = input(*g, as_heads, "q", UID_Q, s, 3 * C);
    TensorPtr k = input(*g, as_heads, "k", UID_K, s, 3 * C);
    TensorPtr v = input(*g, as_heads, "v", UID_V, s, 3 * C);
    TensorPtr o = input(*g, as_heads, "out", UID_O, s, C);
    TensorPtr dout = input(*g, as_heads, "dout", UID_DO, s, C);
    TensorPtr lse = input(*g, as_lse, s);
    auto options = fe::graph::SDPA_backward_attributes()
                       .set_name("attention_backward")
                       .set_causal_mask(true)
                       .set_attn_scale(attn_scale(s))
                       .set_deterministic_algorithm(deterministic);
    auto [dq, dk, dv] = g->sdpa_backward(q, k, v, o, dout, lse, options);
    as_heads(*dq, "dq", UID_DQ, s, 3 * C).set_output(true);
    as_heads(*dk, "dk", UID_DK, s, 3 * C).set_output(true);
    as_heads(*dv, "dv", UID_DV, s, 3 * C).set_output(true);
    return g;
}

// validate, lower to cuDNN, pick an engine by heuristics among those within ws_limit, build it
const char *build(Plan *plan, const std::shared_ptr<fe::graph::Graph> &g, size_t ws_limit) {
    const char *step = "validate";
    fe::error_t e = g->validate();
    if (e.is_good()) { step = "build_operation_graph"; e = g->build_operation_graph(handle); }
    if (e.is_good()) { step = "create_execution_plans"; e = g->create_execution_plans({fe::HeurMode_t::A}); }
    if (e.is_good()) {
        g->deselect_workspace_greater_than(ws_limit > (size_t)INT64_MAX ? INT64_MAX : (int64_t)ws_limit);
        step = "check_support";
        e = g->check_support(handle);
    }
    if (e.is_good()) { step = "build_plans"; e = g->build_plans(handle); }
    if (e.is_good()) { step = "get_workspace_size"; e = g->get_workspace_size(plan->workspace); }
    if (!e.is_good()) { return fail("%s: %s", step, e.get_message().c_str()); }
    plan->graph = g;
    return nullptr;
}

const char *get_plan(bool backward, const Shape &s, size_t ws_limit, const Plan **out) {
    std::map<Shape, Plan> &cache = backward ? backward_plans : forward_plans;
    auto it = cache.find(s);
    if (it == cache.end()) {
        if (const char *err = ensure_handle()) { return err; }
        Plan plan;
        const char *err;
        if (backward) {
            plan.deterministic = want_deterministic;
            err = build(&plan, backward_graph(s, want_deterministic), ws_limit);
            if (err && want_deterministic) {  // cuDNN refused its deterministic algorithm for this shape: the default one
                std::string refused = err;
                plan.deterministic = false;
                err = build(&plan, backward_graph(s, false), ws_limit);
                if (err) { err = fail("%s (the deterministic algorithm: %s)", std::string(err).c_str(), refused.c_str()); }
            }
        } else {
            err = build(&plan, forward_graph(s), ws_limit);
        }
        if (err) {
            return fail("cuDNN cannot build the attention %s for B=%lld T=%lld NH=%lld HS=%lld (%s): %s",
                        backward ? "backward" : "forward", (long long)s.B, (long long)s.T, (long long)s.NH,
                        (long long)s.HS, ws_limit == SIZE_MAX ? "any workspace" : "within the allocated workspace",
                        std::string(err).c_str());
        }
        it = cache.emplace(s, plan).first;
    }
    *out = &it->second;
    return nullptr;
}

const char *run(const Plan *plan, std::unordered_map<int64_t, void *> &pack, void *workspace, size_t workspace_bytes,
                cudaStream_t stream, const char *what) {
    if ((size_t)plan->workspace > workspace_bytes) {
        return fail("internal: the cuDNN attention %s needs %lld bytes of workspace, %zu given", what,
                    (long long)plan->workspace, workspace_bytes);
    }
    cudnnStatus_t st = cudnnSetStream(handle, stream);
    if (st != CUDNN_STATUS_SUCCESS) { return fail("cudnnSetStream: %s", cudnnGetErrorString(st)); }
    fe::error_t e = plan->graph->execute(handle, pack, workspace);
    if (!e.is_good()) { return fail("cuDNN attention %s failed to execute: %s", what, e.get_message().c_str()); }
    return nullptr;
}

void *at(const void *base, int64_t elements) { return (void *)((const uint16_t *)base + elements); }  // bf16 offset

}  // namespace

extern "C" const char *cudnn_att_prepare(int B, int T, int NH, int HS, size_t ws_limit, size_t *ws_bytes) {
    const Shape s = {B, T, NH, HS};
    const Plan *fwd, *bwd;
    if (const char *err = get_plan(false, s, ws_limit, &fwd)) { return err; }
    if (const char *err = get_plan(true, s, ws_limit, &bwd)) { return err; }
    *ws_bytes = (size_t)(fwd->workspace > bwd->workspace ? fwd->workspace : bwd->workspace);
    return nullptr;
}

extern "C" const char *cudnn_att_forward(void *out, float *lse, const void *qkv, int B, int T, int NH, int HS,
                                         void *workspace, size_t workspace_bytes, cudaStream_t stream) {
    const Shape s = {B, T, NH, HS};
    const int64_t C = s.NH * s.HS;
    const Plan *plan;
    if (const char *err = get_plan(false, s, workspace_bytes, &plan)) { return err; }
    std::unordered_map<int64_t, void *> pack = {
        {UID_Q, at(qkv, 0)}, {UID_K, at(qkv, C)}, {UID_V, at(qkv, 2 * C)}, {UID_O, out}, {UID_STATS, lse}};
    return run(plan, pack, workspace, workspace_bytes, stream, "forward");
}

extern "C" const char *cudnn_att_backward(void *dqkv, const void *dout, const void *qkv, const void *out,
                                          const float *lse, int B, int T, int NH, int HS, void *workspace,
                                          size_t workspace_bytes, cudaStream_t stream) {
    const Shape s = {B, T, NH, HS};
    const int64_t C = s.NH * s.HS;
    const Plan *plan;
    if (const char *err = get_plan(true, s, workspace_bytes, &plan)) { return err; }
    std::unordered_map<int64_t, void *> pack = {
        {UID_Q, at(qkv, 0)},    {UID_K, at(qkv, C)},     {UID_V, at(qkv, 2 * C)},      {UID_O, (void *)out},
        {UID_DO, (void *)dout}, {UID_STATS, (void *)lse}, {UID_DQ, at(dqkv, 0)},       {UID_DK, at(dqkv, C)},
        {UID_DV, at(dqkv, 2 * C)}};
    return run(plan, pack, workspace, workspace_bytes, stream, "backward");
}

extern "C" int cudnn_att_deterministic(void) {
    for (const auto &kv : backward_plans) {
        if (!kv.second.deterministic) { return 0; }
    }
    return 1;
}

extern "C" const char *cudnn_att_describe(void) {
    const size_t v = cudnnGetVersion();  // e.g. 91900 for 9.19.0
    snprintf(description, sizeof(description), "cuDNN %zu.%zu.%zu, frontend %d.%d.%d, %s backward", v / 10000,
             v % 10000 / 100, v % 100, CUDNN_FRONTEND_MAJOR_VERSION, CUDNN_FRONTEND_MINOR_VERSION,
             CUDNN_FRONTEND_PATCH_VERSION, cudnn_att_deterministic() ? "deterministic" : "NON-deterministic");
    return description;
}

extern "C" void cudnn_att_set_deterministic(int deterministic) {
    if (want_deterministic != (deterministic != 0)) { backward_plans.clear(); }
    want_deterministic = deterministic != 0;
}

extern "C" void cudnn_att_forget_plans(void) {
    forward_plans.clear();
    backward_plans.clear();
}

extern "C" void cudnn_att_free(void) {
    cudnn_att_forget_plans();
    if (handle) {
        cudnnDestroy(handle);
        handle = nullptr;
    }
}
