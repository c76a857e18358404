// V4.1's Engram injection (spec §3.3) and MoE block for one chunk: host-side gather from the memory-mapped
// tables + wkv + the signed-sqrt gate; the router (gate_temp, selection bias) and experts through V4's ops.

#include <algorithm>
#include <cmath>

#include "kernels/ops.h"
#include "model/deepseek_v41/model.h"

namespace deepinfer::model::deepseek_v41 {

// Engram (spec §3.3): rows of the layer's table at the hash ids -> wkv -> one key per stream and a shared
// value; gate = sigmoid(signed sqrt(<h, w * key> rstd(h) rstd(key) / sqrt(D))), h += gate * value.
// The rows were gathered by prefetch_ (engram_prefetch.h), queued at the start of the step: the layer waits
// for its own job only.
void DeepseekV41Model::engram(int64_t l, const Chunk& ch, float* h) {
    const ModelConfig& c = config_;
    const int64_t e = c.engram.layer_index(l);
    const int64_t cols = c.engram.n_hash_cols(), hd = c.engram.head_dim, hc = c.hc_mult, D = c.hidden_size;
    const int64_t n = ch.rows.count(); // this rank's rows (all of the chunk's unless split)
    const EngramWeights& w = weights_.layers[l].engram;
    prefetch_.wait(ch.job0 + e);
    if (n == 0) return;
    const float* emb = engram_rows_[e].data() + (ch.row0 + ch.rows.begin) * cols * hd; // [n, cols * hd]
    float* kv = engram_kv_.data(); // [n, (hc + 1) D]: hc keys, the value
    // TP: each rank's rows of wkv (its keys' and the value's columns), gathered: the one-process bits.
    // (The TP group shares this rank's CP rank, hence its rows.)
    deepseek_v4::tp_linear(*backend_, tp_, emb, n, w.wkv, kv);
    const float eps = static_cast<float>(c.rms_norm_eps);
    for (int64_t t = 0; t < n; ++t) {
        const float* value = kv + (t * (hc + 1) + hc) * D;
        for (int64_t k = 0; k < hc; ++k) {
            float* hs = h + (t * hc + k) * D;
            const float* key = kv + (t * (hc + 1) + k) * D;
            const float* wt = w.qk_weight.data() + k * D;
            float hh = 0, kk = 0, dot = 0;
            for (int64_t i = 0; i < D; ++i) {
                hh += hs[i] * hs[i];
                kk += key[i] * key[i];
                dot += hs[i] * wt[i] * key[i];
            }
            const float rstd = (1.0f / std::sqrt(hh / D + eps)) * (1.0f / std::sqrt(kk / D + eps));
            const float s = dot * rstd * (1.0f / std::sqrt(static_cast<float>(D)));
            const float mag = std::sqrt(std::max(std::fabs(s), 1e-6f));
            const float gate = 1.0f / (1.0f + std::exp(-std::copysign(mag, s)));
            for (int64_t i = 0; i < D; ++i) hs[i] += gate * value[i];
        }
    }
}

// Router (gate_temp, selection bias, weights s / (sum + 1e-20) * routed scale) + routed and shared experts,
// on this rank's rows. With split rows and a MoE group that spans the CP group (EP on CP) on every row:
// the input gathered first, this rank's rows of the output kept.
void DeepseekV41Model::moe(int64_t l, const Chunk& ch, const float* x, float* out) {
    if (ch.rows.split && moe_whole_rows_) {
        const int64_t D = config_.hidden_size, b = ch.rows.begin, n = ch.rows.count();
        std::vector<float> xa(ch.n * D), ya(ch.n * D); // [chunk rows, D]
        std::copy_n(x, n * D, xa.data() + b * D);
        gather_rows(ch.rows, {{xa.data(), D}});
        Chunk whole = ch;
        whole.rows = deepseek_v4::CpRows{false, ch.n, ch.n, 0, ch.n};
        moe(l, whole, xa.data(), ya.data());
        std::copy_n(ya.data() + b * D, n * D, out);
        return;
    }
    const ModelConfig& c = config_;
    const MoeWeights& w = weights_.layers[l].ffn;
    const int64_t n = ch.rows.count(), E = c.n_routed_experts, K = c.num_experts_per_tok;
    const int64_t r0 = ch.row0 + ch.rows.begin; // this rank's first row in the batch
    row_work_.moe += n;
    // Without rows (split, none here) nothing runs, nor does any collective: the MoE group shares this
    // rank's rows (moe_whole_rows_ covers the one that does not).
    if (n == 0) return;
    std::vector<float> scores(n * E);
    // Exact in either numerics, as V4's router (deepseek_v4/moe.cpp).
    kernels::MatmulArgs ga = kernels::linear_args(x, n, w.gate, scores.data());
    ga.numerics = kernels::Numerics::kExact;
    backend_->linear(ga);
    if (c.gate_temp != 1.0)
        for (float& s : scores) s /= static_cast<float>(c.gate_temp);
    std::vector<int32_t> idx(n * K);
    std::vector<float> wts(n * K);
    kernels::MoeRoutingParams r;
    r.scores = scores.data();
    r.bias = w.bias.data();
    r.T = n;
    r.E = E;
    r.K = K;
    r.routed_scale = static_cast<float>(c.routed_scaling_factor);
    r.idx = idx.data();
    r.weights = wts.data();
    backend_->moe_routing(r);
    if (probes_) std::copy(idx.begin(), idx.end(), probes_->router[l].begin() + r0 * K);
    if (moe_shard_.load) // EP statistics: each expert's rows counted by its owner
        for (int32_t e : idx)
            if (e >= moe_shard_.first && e < moe_shard_.last) moe_shard_.load->record(e);
    std::vector<kernels::ExpertRef> experts(E);
    for (int64_t e = 0; e < E; ++e) experts[e] = {&w.experts[e].w1, &w.experts[e].w2, &w.experts[e].w3};
    const kernels::ExpertRef shared{&w.shared.w1, &w.shared.w2, &w.shared.w3};
    kernels::MoeExpertsParams p;
    p.x = x;
    p.T = n;
    p.D = c.hidden_size;
    p.E = E;
    p.K = K;
    p.idx = idx.data();
    p.weights = wts.data();
    p.experts = experts.data();
    p.shared = &shared;
    p.swiglu_limit = static_cast<float>(c.swiglu_limit);
    p.out = out;
    if (moe_shard_.group && moe_shard_.group->size() > 1)
        deepseek_v4::moe_experts_ep(*backend_, moe_shard_, p); // the same bits as the op below
    else
        backend_->moe_experts(p);
}

} // namespace deepinfer::model::deepseek_v41
