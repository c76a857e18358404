#include "model/deepseek_v4/moe.h"

#include <algorithm>

namespace deepinfer::model::deepseek_v4 {

MoeRefs make_moe_refs(const MoeWeights& w) {
    MoeRefs r;
    for (const ExpertWeights& e : w.experts) r.experts.push_back({&e.w1, &e.w2, &e.w3});
    if (w.has_shared) r.shared = {&w.shared.w1, &w.shared.w2, &w.shared.w3};
    return r;
}

// The EP path (MoeShard): slot outputs [T * K + T, D] = each (row, k)'s unweighted expert output, then
// each row's shared-expert output; the owner of a slot writes it, the others zeros.
void moe_experts_ep(kernels::Backend& be, const MoeShard& shard, const kernels::MoeExpertsParams& q) {
    const int64_t D = q.D, E = q.E, K = q.K, T = q.T, TK = T * K;
    const int32_t* idx = q.idx;
    const float* wts = q.weights;
    const float* x = q.x;
    const uint8_t* skip = q.skip;
    const bool has_shared = q.shared != nullptr;
    float* out = q.out;
    kernels::Workspace& ws = be.workspace();
    const kernels::Workspace::Mark mark = ws.mark();
    float* slots = ws.take<float>((TK + T) * D); // [T * K + T, D]
    float* xs = ws.take<float>(TK * D);          // [T * K, D] row t's input in each of its K slots
    int32_t* own = ws.take<int32_t>(TK);         // [T * K] the slot's expert when held here, else -1
    float* ones = ws.take<float>(TK);            // [T * K] unit weights: the op returns y * 1 = y
    for (int64_t t = 0; t < T; ++t)
        for (int64_t k = 0; k < K; ++k) {
            const int32_t e = idx[t * K + k];
            own[t * K + k] = e >= shard.first && e < shard.last && !(skip && skip[t]) ? e : -1;
            ones[t * K + k] = 1.0f;
            std::copy_n(x + t * D, D, xs + (t * K + k) * D);
        }
    // Grouped per expert as in one process: expert e sees the same rows in the same order, so its
    // matmuls produce the same bits.
    kernels::MoeExpertsParams p = q;
    p.x = xs;
    p.T = TK;
    p.D = D;
    p.E = E;
    p.K = 1;
    p.idx = own;
    p.weights = ones;
    p.skip = nullptr;
    p.shared = nullptr;
    p.out = slots;
    be.moe_experts(p);
    float* shared_out = slots + TK * D; // [T, D]
    if (has_shared && shard.has_shared) {
        kernels::MoeExpertsParams s = q;
        s.E = 0;
        s.K = 0;
        s.idx = nullptr;
        s.weights = nullptr;
        s.out = shared_out;
        be.moe_experts(s);
    } else {
        std::fill_n(shared_out, T * D, 0.0f);
    }
    core::Status st = shard.group->all_reduce_sum(std::span<float>(slots, (TK + T) * D));
    if (!st.ok() && shard.status && shard.status->ok())
        *shard.status = st.with_context("MoE expert parallel");
    // The single-process accumulation order: per row, experts ascending (idx is sorted per row), then the
    // shared expert.
    std::fill_n(out, T * D, 0.0f);
    for (int64_t t = 0; t < T; ++t) {
        float* o = out + t * D;
        for (int64_t k = 0; k < K; ++k) {
            if (idx[t * K + k] < 0) continue;
            const float* y = slots + (t * K + k) * D;
            const float rw = wts[t * K + k];
            for (int64_t j = 0; j < D; ++j) o[j] += y[j] * rw;
        }
        if (has_shared && !(skip && skip[t])) {
            const float* y = shared_out + t * D;
            for (int64_t j = 0; j < D; ++j) o[j] += y[j];
        }
    }
    ws.release(mark);
}

int64_t moe_shard_floats_per_token(const ModelConfig& c) {
    const int64_t K = c.num_experts_per_tok, D = c.hidden_size;
    const int64_t I = c.moe_intermediate_size * std::max<int64_t>(1, c.n_shared_experts);
    // Slots, replicated inputs, owners and unit weights, plus the experts op's scratch over T * K rows.
    return (K + 1) * D + K * D + 2 * K + K * (2 * D + 2 * I + 3);
}

void moe_forward(kernels::Backend& be, const ModelConfig& c, const MoeWeights& w, const MoeRefs& refs,
                 bool hash, const float* x, const int32_t* token_ids, const uint8_t* skip, int64_t T,
                 float* out, int32_t* router, float* router_weights, const MoeShard* shard) {
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
    if (shard && shard->load)
        for (int64_t i = 0; i < T * K; ++i)
            if (idx[i] >= shard->first && idx[i] < shard->last) shard->load->record(idx[i]);
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
    if (shard && shard->group && shard->group->size() > 1)
        moe_experts_ep(be, *shard, p);
    else
        be.moe_experts(p);
    ws.release(mark);
}

} // namespace deepinfer::model::deepseek_v4
