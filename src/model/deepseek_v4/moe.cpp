#include "model/deepseek_v4/moe.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "kernels/ops.h"

namespace deepinfer::model::deepseek_v4 {
namespace {

// out [n, D] = clamped SwiGLU expert over x [n, D].
void swiglu(const ModelConfig& c, const ExpertWeights& e, const float* x, int64_t n, float* out) {
    const int64_t I = e.w1.rows;
    const float limit = static_cast<float>(c.swiglu_limit);
    std::vector<float> g(n * I), u(n * I); // [n, I]
    kernels::linear(x, n, e.w1, g.data());
    kernels::linear(x, n, e.w3, u.data());
    for (int64_t i = 0; i < n * I; ++i) {
        float gi = g[i], ui = u[i];
        if (limit > 0.0f) {
            gi = std::min(gi, limit);
            ui = std::clamp(ui, -limit, limit);
        }
        g[i] = kernels::silu(gi) * ui;
    }
    kernels::linear(g.data(), n, e.w2, out);
}

} // namespace

void moe_forward(const ModelConfig& c, const MoeWeights& w, bool hash, const float* x,
                 const int32_t* token_ids, const std::vector<bool>& skip, int64_t T, float* out,
                 int32_t* router, float* router_weights) {
    const int64_t D = c.hidden_size, E = c.n_routed_experts, K = c.num_experts_per_tok;
    std::vector<float> scores(T * E); // [T, E]
    kernels::linear(x, T, w.gate, scores.data());
    for (float& s : scores) s = std::sqrt(kernels::softplus(s));

    std::vector<int32_t> idx(T * K); // [T, K]
    std::vector<float> wts(T * K);   // [T, K]
    std::vector<float> biased(E);
    for (int64_t t = 0; t < T; ++t) {
        int32_t* it = idx.data() + t * K;
        if (skip[t]) {
            std::fill_n(it, K, -1);
            std::fill_n(wts.data() + t * K, K, 0.0f);
            continue;
        }
        const float* st = scores.data() + t * E;
        if (hash) {
            std::copy_n(w.tid2eid.data() + static_cast<int64_t>(token_ids[t]) * K, K, it);
        } else {
            for (int64_t e = 0; e < E; ++e) biased[e] = st[e] + w.bias[e];
            kernels::topk_torch(biased.data(), E, K, it);
        }
        std::sort(it, it + K);
        float sum = 0.0f;
        for (int64_t k = 0; k < K; ++k) sum += st[it[k]];
        for (int64_t k = 0; k < K; ++k)
            wts[t * K + k] = st[it[k]] / (sum + 1e-20f) * static_cast<float>(c.routed_scaling_factor);
    }
    if (router) std::copy(idx.begin(), idx.end(), router);
    if (router_weights) std::copy(wts.begin(), wts.end(), router_weights);

    // Routed experts, accumulated per token in ascending expert order (as the reference does).
    std::fill_n(out, T * D, 0.0f);
    std::vector<float> xe, ye;
    for (int64_t e = 0; e < E; ++e) {
        std::vector<int64_t> rows;
        std::vector<float> rw;
        for (int64_t t = 0; t < T; ++t)
            for (int64_t k = 0; k < K; ++k)
                if (idx[t * K + k] == e) {
                    rows.push_back(t);
                    rw.push_back(wts[t * K + k]);
                }
        if (rows.empty()) continue;
        const int64_t n = static_cast<int64_t>(rows.size());
        xe.resize(n * D);
        ye.resize(n * D);
        for (int64_t i = 0; i < n; ++i) std::copy_n(x + rows[i] * D, D, xe.data() + i * D);
        swiglu(c, w.experts[e], xe.data(), n, ye.data());
        for (int64_t i = 0; i < n; ++i)
            for (int64_t j = 0; j < D; ++j) out[rows[i] * D + j] += ye[i * D + j] * rw[i];
    }

    // Shared expert over the non-padding rows.
    if (!w.has_shared) return;
    std::vector<int64_t> live;
    for (int64_t t = 0; t < T; ++t)
        if (!skip[t]) live.push_back(t);
    const int64_t n = static_cast<int64_t>(live.size());
    xe.resize(n * D);
    ye.resize(n * D);
    for (int64_t i = 0; i < n; ++i) std::copy_n(x + live[i] * D, D, xe.data() + i * D);
    swiglu(c, w.shared, xe.data(), n, ye.data());
    for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < D; ++j) out[live[i] * D + j] += ye[i * D + j];
}

} // namespace deepinfer::model::deepseek_v4
