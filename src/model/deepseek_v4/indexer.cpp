#include "model/deepseek_v4/indexer.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/ops.h"

namespace deepinfer::model::deepseek_v4 {

std::vector<int32_t> indexer_select(const float* q, const float* weights, int64_t n_heads, int64_t head_dim,
                                    int64_t n_visible, int64_t n_total, int64_t index_topk,
                                    const std::function<const float*(int64_t)>& key) {
    const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
    std::vector<float> scores(n_total, -std::numeric_limits<float>::infinity()); // [n_total]
    for (int64_t e = 0; e < n_visible; ++e) {
        const float* k = key(e);
        float s = 0.0f;
        for (int64_t h = 0; h < n_heads; ++h) {
            float qk = 0.0f;
            for (int64_t j = 0; j < head_dim; ++j) qk += q[h * head_dim + j] * k[j];
            s += std::max(qk, 0.0f) * scale * weights[h];
        }
        scores[e] = s;
    }
    const int64_t k = std::min(index_topk, n_total);
    std::vector<int32_t> idx(k);
    kernels::topk_torch(scores.data(), n_total, k, idx.data());
    std::vector<int32_t> valid;
    for (int32_t e : idx)
        if (e < n_visible) valid.push_back(e);
    std::sort(valid.begin(), valid.end());
    return valid;
}

} // namespace deepinfer::model::deepseek_v4
