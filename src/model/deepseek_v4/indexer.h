#pragma once
// The lightning indexer's selection for one query: score(w) = sum_h wI_h * ReLU(qI_h . K_w) * d_I^-1/2
// over the visible entries w < n_visible, then the top min(index_topk, n_visible) (returned ascending).
// Ties (ReLU makes exact zeros common) are broken as the reference does: its top-k runs over all n_total
// entries that exist after the current forward (later ones scored -inf) with k = min(index_topk, n_total),
// using torch's CPU selection algorithm (kernels::topk_torch). The choice among tied entries can therefore
// depend on n_total, i.e. on how a prompt was chunked; the reference behaves the same way.

#include <cstdint>
#include <functional>
#include <vector>

namespace deepinfer::model::deepseek_v4 {

// q [H_I, d_I] (post RoPE); weights [H_I] (already scaled by H_I^-1/2); key(w) -> [d_I].
std::vector<int32_t> indexer_select(const float* q, const float* weights, int64_t n_heads, int64_t head_dim,
                                    int64_t n_visible, int64_t n_total, int64_t index_topk,
                                    const std::function<const float*(int64_t)>& key);

} // namespace deepinfer::model::deepseek_v4
