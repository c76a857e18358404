#pragma once
// Layer probes: what one forward computed at every stage, so a mismatch against the reference is found at
// the first stage that diverges. Filled by DeepseekV4Model::forward when a ForwardProbes is attached.
// Rows follow ForwardBatch::token_ids (T rows, padding rows included).

#include <cstdint>
#include <vector>

namespace deepinfer::model::deepseek_v4 {

struct ForwardProbes {
    int64_t num_tokens = 0;                          // T
    std::vector<std::vector<float>> hidden;          // [L][T, hc, D] streams after layer l
    std::vector<std::vector<int32_t>> router;        // [L][T, K] expert indices, ascending per row
    std::vector<std::vector<float>> router_weights;  // [L][T, K] routed weights (scaled), same order
    std::vector<std::vector<int32_t>> indexer_topk;  // [L][T, index_topk] ascending, -1 padded; empty if no indexer
    std::vector<float> final_hidden;                 // [T, D] after hc_head and the final norm
};

} // namespace deepinfer::model::deepseek_v4
