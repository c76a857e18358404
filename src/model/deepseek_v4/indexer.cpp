#include "model/deepseek_v4/indexer.h"

#include <algorithm>
#include <cmath>

#include "kernels/ops.h"

namespace deepinfer::model::deepseek_v4 {

std::vector<int32_t> indexer_select(const float* q, const float* weights, int64_t n_heads, int64_t head_dim,
                                    int64_t n_visible, int64_t index_topk,
                                    const std::function<const float*(int64_t)>& key) {
    const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
    std::vector<float> scores(n_visible); // [n_visible]
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
    const int64_t k = std::min(index_topk, n_visible);
    std::vector<int32_t> idx(k);
    kernels::topk(scores.data(), n_visible, k, idx.data());
    std::sort(idx.begin(), idx.end());
    return idx;
}

} // namespace deepinfer::model::deepseek_v4
