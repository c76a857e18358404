// Reference MoE routing (sqrt-softplus scores, bias-selected top-k or hash routing) and grouped experts.

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/check.h"
#include "kernels/ops.h"
#include "kernels/ref/ops_ref.h"

namespace deepinfer::kernels::ref {
namespace {
constexpr int64_t kMaxExperts = 4096;
} // namespace

void moe_routing(const MoeRoutingParams& p) {
    const int64_t E = p.E, K = p.K;
    DI_CHECK(E <= kMaxExperts && K <= E);
    for (int64_t i = 0; i < p.T * E; ++i) p.scores[i] = std::sqrt(softplus(p.scores[i]));
    float biased[kMaxExperts];
    TopkElem scratch[kMaxExperts];
    for (int64_t t = 0; t < p.T; ++t) {
        int32_t* it = p.idx + t * K;
        float* wt = p.weights + t * K;
        if (p.skip && p.skip[t]) {
            std::fill_n(it, K, -1);
            std::fill_n(wt, K, 0.0f);
            continue;
        }
        const float* st = p.scores + t * E;
        if (p.tid2eid) {
            std::copy_n(p.tid2eid + static_cast<int64_t>(p.token_ids[t]) * K, K, it);
        } else {
            for (int64_t e = 0; e < E; ++e) biased[e] = st[e] + p.bias[e];
            topk_torch_into(biased, E, K, it, scratch);
        }
        std::sort(it, it + K);
        float sum = 0.0f;
        for (int64_t k = 0; k < K; ++k) sum += st[it[k]];
        for (int64_t k = 0; k < K; ++k) wt[k] = st[it[k]] / (sum + 1e-20f) * p.routed_scale;
    }
}

namespace {
void swiglu_ref(const ExpertRef& e, float limit, const float* x, int64_t n, float* out) {
    const int64_t I = e.w1->rows;
    std::vector<float> g(n * I), u(n * I);
    ref::matmul(linear_args(x, n, *e.w1, g.data()));
    ref::matmul(linear_args(x, n, *e.w3, u.data()));
    for (int64_t i = 0; i < n * I; ++i) {
        float gi = g[i], ui = u[i];
        if (limit > 0.0f) {
            gi = std::min(gi, limit);
            ui = std::clamp(ui, -limit, limit);
        }
        g[i] = silu(gi) * ui;
    }
    ref::matmul(linear_args(g.data(), n, *e.w2, out));
}
} // namespace

void moe_experts(const MoeExpertsParams& p) {
    const int64_t D = p.D, K = p.K;
    std::fill_n(p.out, p.T * D, 0.0f);
    std::vector<float> xe, ye;
    for (int64_t e = 0; e <= p.E; ++e) {
        const bool shared = e == p.E;
        if (shared && !p.shared) break;
        std::vector<int64_t> rows;
        std::vector<float> rw;
        for (int64_t t = 0; t < p.T; ++t) {
            if (shared) {
                if (!(p.skip && p.skip[t])) {
                    rows.push_back(t);
                    rw.push_back(1.0f);
                }
                continue;
            }
            for (int64_t k = 0; k < K; ++k)
                if (p.idx[t * K + k] == e) {
                    rows.push_back(t);
                    rw.push_back(p.weights[t * K + k]);
                }
        }
        if (rows.empty()) continue;
        const int64_t n = static_cast<int64_t>(rows.size());
        xe.resize(n * D);
        ye.resize(n * D);
        for (int64_t i = 0; i < n; ++i) std::copy_n(p.x + rows[i] * D, D, xe.data() + i * D);
        swiglu_ref(shared ? *p.shared : p.experts[e], p.swiglu_limit, xe.data(), n, ye.data());
        for (int64_t i = 0; i < n; ++i)
            for (int64_t j = 0; j < D; ++j) {
                const float v = ye[i * D + j];
                p.out[rows[i] * D + j] += shared ? v : v * rw[i];
            }
    }
}

} // namespace deepinfer::kernels::ref
