#pragma once
// The V4 MoE block as composition: router logits (linear), the moe_routing op (s = sqrt(softplus(.)),
// top-k of s + bias or tid2eid[token] on hash layers, weights s[idx] / (sum + 1e-20) * routed scale) and
// the moe_experts op (clamped SwiGLU experts grouped per expert, the shared expert fused in).

#include <cstdint>

#include "kernels/backend.h"
#include "model/deepseek_v4/config.h"
#include "model/deepseek_v4/model_weights.h"
#include "parallel/communicator.h"
#include "parallel/expert_load.h"

namespace deepinfer::model::deepseek_v4 {

// The experts of one layer as the op sees them (built once at load).
struct MoeRefs {
    std::vector<kernels::ExpertRef> experts; // [E]
    kernels::ExpertRef shared;
};
MoeRefs make_moe_refs(const MoeWeights& w);

// Expert parallelism (EP) over ranks that all hold the same tokens (replicated rows): rank r of `group`
// holds the routed experts [first, last) (ExpertLoadStats' contiguous ranges); the shared expert is split
// over the group (shared_expert_splits: rank r of n computes w1/w3 rows [r I/n, (r+1) I/n), the pieces are
// gathered, then w2 rows [r D/n, (r+1) D/n)), or runs whole on the last rank when I or D does not split.
// Every rank routes every row (the router is replicated), runs its experts on the rows routed to them, and
// one all-reduce in rank order assembles every (row, k) slot's expert output; each slot has exactly one owner
// (the others add zeros), so the sum is exact and the weighted accumulation then runs in the single-process
// order: the EP result is bit-identical to one process.
struct MoeShard {
    parallel::Communicator* group = nullptr; // nullptr or size 1: the single-process path
    int64_t first = 0, last = 0;             // routed experts held here
    bool has_shared = true;                  // this rank computes the whole shared expert (when unsplit)
    core::Status* status = nullptr;          // the first collective failure lands here
    // EP load statistics: the routed rows of the experts held here are recorded (each expert by its
    // owner only, so the all-gathered sum counts every row once), or nullptr.
    parallel::ExpertLoadStats* load = nullptr;
};

// x [T, D] (post ffn_norm), token_ids [T], skip [T] (padding rows: never routed, output 0) -> out [T, D].
// router / router_weights, when non-null: [T, K], indices ascending per row.
void moe_forward(kernels::Backend& be, const ModelConfig& config, const MoeWeights& w, const MoeRefs& refs,
                 bool hash, const float* x, const int32_t* token_ids, const uint8_t* skip, int64_t T,
                 float* out, int32_t* router, float* router_weights, const MoeShard* shard = nullptr);

// The EP form of be.moe_experts(p) over `shard.group` (size > 1), for rows every rank holds: `p` exactly
// as one process would pass it (K experts per row, weights, skip, the shared expert or nullptr); `p.out`
// gets the single-process bits on every rank. Scratch from the backend's workspace.
void moe_experts_ep(kernels::Backend& be, const MoeShard& shard, const kernels::MoeExpertsParams& p);

// Whether moe_experts_ep splits `shared` over the group (more than one rank, I and D divisible).
bool shared_expert_splits(const MoeShard& shard, const kernels::ExpertRef& shared, int64_t D);

// Workspace floats per token the EP path adds (0 without EP).
int64_t moe_shard_floats_per_token(const ModelConfig& config);

} // namespace deepinfer::model::deepseek_v4
