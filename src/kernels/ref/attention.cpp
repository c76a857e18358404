// Reference lightning-indexer selection and paged sparse attention (window + compressed entries + sink).

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/check.h"
#include "kernels/ops.h"
#include "kernels/ref/ops_ref.h"

namespace deepinfer::kernels::ref {

void topk_torch_into(const float* x, int64_t n, int64_t k, int32_t* idx, TopkElem* q) {
    DI_CHECK(k >= 0 && k <= n);
    if (k == 0) return;
    for (int64_t i = 0; i < n; ++i) q[i] = {x[i], i};
    auto larger = [](const TopkElem& a, const TopkElem& b) {
        return (std::isnan(a.value) && !std::isnan(b.value)) || (a.value > b.value);
    };
    if (k * 64 <= n)
        std::partial_sort(q, q + k, q + n, larger);
    else
        std::nth_element(q, q + (k - 1), q + n, larger);
    for (int64_t i = 0; i < k; ++i) idx[i] = static_cast<int32_t>(q[i].index);
}

void indexer_select(const float* scores, int64_t n_visible, int64_t n_total, int64_t topk, int32_t* picks,
                    TopkElem* scratch, int32_t* sel) {
    const int64_t k = std::min(topk, n_total);
    topk_torch_into(scores, n_total, k, sel, scratch);
    int64_t nv = 0;
    for (int64_t j = 0; j < k; ++j)
        if (sel[j] < n_visible) picks[nv++] = sel[j];
    std::sort(picks, picks + nv);
    std::fill(picks + nv, picks + topk, -1);
}

void indexer(const IndexerParams& p) {
    using Phase = IndexerParams::Phase;
    const int64_t HI = p.n_heads, dI = p.head_dim, m = p.keys.ratio;
    const float scale = 1.0f / std::sqrt(static_cast<float>(dI));
    DI_CHECK(p.phase == Phase::kBoth || p.scores != nullptr);
    DI_CHECK(p.phase == Phase::kScore || p.owned_blocks == nullptr);
    std::vector<float> own_scores(p.n_total);
    std::vector<TopkElem> scratch(p.n_total);
    std::vector<int32_t> sel(p.n_total);
    const float kNegInf = -std::numeric_limits<float>::infinity();
    for (int64_t i = 0; i < p.n; ++i) {
        const float* q = p.q + i * p.q_ld;
        const float* w = p.weights + i * p.w_ld;
        const int64_t n_visible = (p.start_pos + i + 1) / m;
        float* scores = p.phase == Phase::kBoth ? own_scores.data() : p.scores + i * p.n_total;
        if (p.phase == Phase::kSelect) {
            std::fill(scores + n_visible, scores + p.n_total, kNegInf);
            indexer_select(scores, n_visible, p.n_total, p.topk, p.picks + i * p.topk, scratch.data(),
                           sel.data());
            continue;
        }
        std::fill(scores, scores + p.n_total, p.phase == Phase::kScore ? 0.0f : kNegInf);
        for (int64_t e = 0; e < n_visible; ++e) {
            if (p.owned_blocks && !p.owned_blocks[e * m / p.keys.block_size]) continue;
            const float* k = p.keys.entry(e);
            float s = 0.0f;
            for (int64_t h = 0; h < HI; ++h) {
                float qk = 0.0f;
                for (int64_t j = 0; j < dI; ++j) qk += q[h * dI + j] * k[j];
                s += std::max(qk, 0.0f) * scale * w[h];
            }
            scores[e] = s;
        }
        if (p.phase == Phase::kBoth)
            indexer_select(scores, n_visible, p.n_total, p.topk, p.picks + i * p.topk, scratch.data(),
                           sel.data());
    }
}

int64_t sparse_attention_max_keys(const SparseAttentionParams& p) {
    const int64_t last = p.start_pos + p.n - 1;
    int64_t n = std::min<int64_t>(p.window, last + 1);
    if (p.compressed.base) n += p.picks ? p.topk : (last + 1) / p.compressed.ratio;
    return n;
}

void sparse_attention_head(const SparseAttentionParams& p, int64_t i, int64_t h, float* logits) {
    const int64_t d = p.head_dim, pos = p.start_pos + i, bs = p.block_size;
    const int64_t w0 = std::max<int64_t>(0, pos - p.window + 1);
    const int64_t n_win = pos - w0 + 1;
    int64_t n_comp = 0;
    const int32_t* picks = p.picks ? p.picks + i * p.topk : nullptr;
    if (p.compressed.base) {
        if (picks)
            while (n_comp < p.topk && picks[n_comp] >= 0) ++n_comp;
        else
            n_comp = (pos + 1) / p.compressed.ratio;
    }
    const int64_t n = n_win + n_comp;
    // Key j's position (raw row) or its window's first position (compressed entry): its block.
    auto key_pos = [&](int64_t j) -> int64_t {
        if (j < n_win) return w0 + j;
        return (picks ? picks[j - n_win] : j - n_win) * p.compressed.ratio;
    };
    auto owned = [&](int64_t j) { return !p.owned_blocks || p.owned_blocks[key_pos(j) / bs] != 0; };
    auto key = [&](int64_t j) -> const float* {
        if (j < n_win) {
            const int64_t k = w0 + j;
            return p.raw + (p.block_table[k / bs] * bs + k % bs) * d;
        }
        const int64_t e = picks ? picks[j - n_win] : j - n_win;
        return p.compressed.entry(e);
    };
    const float* qh = p.q + i * p.q_ld + h * d;
    const float neg_inf = -std::numeric_limits<float>::infinity();
    // logits [m]: the m-th owned key's (a CP rank skips the keys outside its blocks).
    int64_t m = 0;
    for (int64_t j = 0; j < n; ++j) {
        if (!owned(j)) continue;
        const float* kj = key(j);
        float s = 0.0f;
        for (int64_t c = 0; c < d; ++c) s += qh[c] * kj[c];
        logits[m++] = s * p.scale;
    }
    float* oh = p.o + i * p.o_ld + h * d;
    std::fill_n(oh, d, 0.0f);
    if (!p.sink && m == 0) { // nothing to attend to: the merge gives this partial weight 0
        if (p.lse_max) p.lse_max[i * p.n_heads + h] = neg_inf;
        if (p.lse_sum) p.lse_sum[i * p.n_heads + h] = 0.0f;
        return;
    }
    const SoftmaxStats st = softmax_sink(logits, m, p.sink ? p.sink + h : nullptr);
    m = 0;
    for (int64_t j = 0; j < n; ++j) {
        if (!owned(j)) continue;
        const float pj = logits[m++];
        const float* kj = key(j);
        for (int64_t c = 0; c < d; ++c) oh[c] += pj * kj[c];
    }
    if (p.lse_max) p.lse_max[i * p.n_heads + h] = st.max;
    if (p.lse_sum) p.lse_sum[i * p.n_heads + h] = st.sum;
}

SoftmaxStats softmax_sink(float* x, int64_t n, const float* sink) {
    constexpr int kLanes = kSoftmaxLanes;
    float mx = sink ? *sink : -std::numeric_limits<float>::infinity();
    for (int64_t j = 0; j < n; ++j) mx = std::max(mx, x[j]);
    float acc[kLanes] = {};
    for (int64_t j = 0; j < n; ++j) {
        x[j] = exp_ref(x[j] - mx);
        acc[j % kLanes] += x[j];
    }
    for (int half = kLanes / 2; half >= 1; half /= 2)
        for (int l = 0; l < half; ++l) acc[l] += acc[l + half];
    const float denom = (sink ? exp_ref(*sink - mx) : 0.0f) + acc[0];
    for (int64_t j = 0; j < n; ++j) x[j] = x[j] / denom;
    return {mx, denom};
}

void sparse_attention(const SparseAttentionParams& p) {
    std::vector<float> logits(sparse_attention_max_keys(p));
    for (int64_t i = 0; i < p.n; ++i)
        for (int64_t h = 0; h < p.n_heads; ++h) sparse_attention_head(p, i, h, logits.data());
}

} // namespace deepinfer::kernels::ref
