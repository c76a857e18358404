#pragma once
// Layer probes: what one forward computed at every stage, so a mismatch against the reference is found at
// the first stage that diverges. Filled by DeepseekV4Model::forward when a ForwardProbes is attached.
// Rows follow ForwardBatch::token_ids (T rows, padding rows included).

#include <cstdint>
#include <vector>

namespace deepinfer::model::deepseek_v4 {

struct ForwardProbes {
    int64_t num_tokens = 0;                         // T
    std::vector<std::vector<float>> hidden;         // [L][T, hc, D] streams after layer l
    std::vector<std::vector<int32_t>> router;       // [L][T, K] expert indices, ascending per row
    std::vector<std::vector<float>> router_weights; // [L][T, K] routed weights (scaled), same order
    std::vector<std::vector<int32_t>>
        indexer_topk;                // [L][T, index_topk] ascending, -1 padded; empty if no indexer
    std::vector<float> final_hidden; // [T, D] after hc_head and the final norm
};

} // namespace deepinfer::model::deepseek_v4

#include <string>

#include "core/status.h"

namespace deepinfer::model::deepseek_v4 {

// Probes of a whole run (prefill chunks then decode steps of one sequence), rows concatenated in order.
class ProbeLog {
public:
    void append(const ForwardProbes& p, const std::vector<int32_t>& token_ids);
    int64_t rows() const { return static_cast<int64_t>(ids_.size()); }
    const ForwardProbes& all() const { return all_; }
    // Writes safetensors with the golden key names: ids I64 [N], hidden.{l} F32 [N, hc, D],
    // router.{l} I64 [N, K], router_weights.{l} F32 [N, K], indexer_topk.{l} I64 [N, index_topk],
    // final_hidden F32 [N, D].
    core::Status write_safetensors(const std::string& path, int64_t hc, int64_t D, int64_t K,
                                   int64_t topk) const;

private:
    ForwardProbes all_;
    std::vector<int32_t> ids_;
};

} // namespace deepinfer::model::deepseek_v4
