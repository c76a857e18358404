#pragma once
// The V4 MoE block as composition: router logits (linear), the moe_routing op (s = sqrt(softplus(.)),
// top-k of s + bias or tid2eid[token] on hash layers, weights s[idx] / (sum + 1e-20) * routed scale) and
// the moe_experts op (clamped SwiGLU experts grouped per expert, the shared expert fused in).

#include <cstdint>

#include "kernels/backend.h"
#include "model/deepseek_v4/config.h"
#include "model/deepseek_v4/model_weights.h"

namespace deepinfer::model::deepseek_v4 {

// The experts of one layer as the op sees them (built once at load).
struct MoeRefs {
    std::vector<kernels::ExpertRef> experts; // [E]
    kernels::ExpertRef shared;
};
MoeRefs make_moe_refs(const MoeWeights& w);

// x [T, D] (post ffn_norm), token_ids [T], skip [T] (padding rows: never routed, output 0) -> out [T, D].
// router / router_weights, when non-null: [T, K], indices ascending per row.
void moe_forward(kernels::Backend& be, const ModelConfig& config, const MoeWeights& w, const MoeRefs& refs,
                 bool hash, const float* x, const int32_t* token_ids, const uint8_t* skip, int64_t T,
                 float* out, int32_t* router, float* router_weights);

} // namespace deepinfer::model::deepseek_v4
