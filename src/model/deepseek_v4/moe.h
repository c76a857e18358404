#pragma once
// The V4 MoE block: router scores s = sqrt(softplus(x W_gate^T)); selection by top-k of s + bias (the
// bias only selects) or, on hash layers, by tid2eid[token]; weights s[idx] / (sum + 1e-20) * routed
// scale; experts and the shared expert are clamped SwiGLU: W2(silu(min(W1 x, L)) * clamp(W3 x, -L, L)).

#include <cstdint>
#include <vector>

#include "model/deepseek_v4/config.h"
#include "model/deepseek_v4/model_weights.h"

namespace deepinfer::model::deepseek_v4 {

// x [T, D] (post ffn_norm), token_ids [T], skip [T] (padding rows: never routed, output 0) -> out [T, D].
// router / router_weights, when non-null: [T, K], indices ascending per row.
void moe_forward(const ModelConfig& config, const MoeWeights& w, bool hash, const float* x,
                 const int32_t* token_ids, const std::vector<bool>& skip, int64_t T, float* out,
                 int32_t* router, float* router_weights);

} // namespace deepinfer::model::deepseek_v4
