#include "model/deepseek_v4/moe.h"

#include <algorithm>

namespace deepinfer::model::deepseek_v4 {

MoeRefs make_moe_refs(const MoeWeights& w) {
    MoeRefs r;
    for (const ExpertWeights& e : w.experts) r.experts.push_back({&e.w1, &e.w2, &e.w3});
    if (w.has_shared) r.shared = {&w.shared.w1, &w.shared.w2, &w.shared.w3};
    return r;
}

void moe_forward(kernels::Backend& be, const ModelConfig& c, const MoeWeights& w, const MoeRefs& refs,
                 bool hash, const float* x, const int32_t* token_ids, const uint8_t* skip, int64_t T,
                 float* out, int32_t* router, float* router_weights) {
    const int64_t D = c.hidden_size, E = c.n_routed_experts, K = c.num_experts_per_tok;
    kernels::Workspace& ws = be.workspace();
    const kernels::Workspace::Mark mark = ws.mark();
    float* scores = ws.take<float>(T * E); // [T, E]
    be.linear(kernels::linear_args(x, T, w.gate, scores));
    int32_t* idx = ws.take<int32_t>(T * K); // [T, K]
    float* wts = ws.take<float>(T * K);     // [T, K]
    kernels::MoeRoutingParams r;
    r.scores = scores;
    r.bias = hash ? nullptr : w.bias.data();
    r.tid2eid = hash ? w.tid2eid.data() : nullptr;
    r.token_ids = token_ids;
    r.skip = skip;
    r.T = T;
    r.E = E;
    r.K = K;
    r.routed_scale = static_cast<float>(c.routed_scaling_factor);
    r.idx = idx;
    r.weights = wts;
    be.moe_routing(r);
    if (router) std::copy_n(idx, T * K, router);
    if (router_weights) std::copy_n(wts, T * K, router_weights);

    kernels::MoeExpertsParams p;
    p.x = x;
    p.T = T;
    p.D = D;
    p.E = E;
    p.K = K;
    p.idx = idx;
    p.weights = wts;
    p.skip = skip;
    p.experts = refs.experts.data();
    p.shared = w.has_shared ? &refs.shared : nullptr;
    p.swiglu_limit = static_cast<float>(c.swiglu_limit);
    p.out = out;
    be.moe_experts(p);
    ws.release(mark);
}

} // namespace deepinfer::model::deepseek_v4
