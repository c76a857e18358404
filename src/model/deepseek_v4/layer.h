#pragma once
// One V4 decoder layer on the hc_mult residual streams:
//   post, comb, x = HC_attn(h);  h = post * Attn(RMSNorm_attn(x)) + comb^T h
//   post, comb, x = HC_ffn(h);   h = post * MoE(RMSNorm_ffn(x), ids) + comb^T h

#include <cstdint>

#include "kernels/backend.h"
#include "model/deepseek_v4/config.h"
#include "model/deepseek_v4/context_parallel.h"
#include "model/deepseek_v4/kv_cache.h"
#include "model/deepseek_v4/model_weights.h"
#include "model/deepseek_v4/moe.h"
#include "model/deepseek_v4/rope.h"
#include "model/deepseek_v4/tensor_parallel.h"
#include "model/forward_batch.h"

namespace deepinfer::model::deepseek_v4 {

struct LayerContext {
    const ModelConfig* config = nullptr;
    const LayerWeights* w = nullptr;
    int64_t layer = 0;
    const RopeTable* main_rope = nullptr;
    const RopeTable* compress_rope = nullptr;
    KvCache* cache = nullptr;
    kernels::Backend* backend = nullptr;
    const MoeRefs* moe = nullptr;
    const MoeShard* moe_shard = nullptr; // expert parallelism, or nullptr (one process)
    const TpShard* tp = nullptr;         // tensor parallelism, or nullptr
    const CpShard* cp = nullptr;         // context parallelism, or nullptr
    // The MoE group holds ranks of several CP ranks (EP on CP): the MoE runs on every row even when the
    // rows are split (its slot all-reduce needs replicated tokens).
    bool moe_spans_cp = false;
};

// Optional probe outputs (nullptr = not wanted): indexer_topk [T, index_topk] (-1 padded, layers with an
// indexer only), router / router_weights [T, K].
struct LayerProbeOut {
    int32_t* indexer_topk = nullptr;
    int32_t* router = nullptr;
    float* router_weights = nullptr;
};

// h [T, hc, D] updated in place; ids [T] route hash layers; skip [T] marks padding rows. Buffers come from
// the backend's workspace and are released on return.
// CP with split rows (cp_rows(ctx.cp, T).split, prompt chunks of >= kCpSplitMinRows rows): the residual
// stream is split too — this rank reads and updates only its rows [begin, end) of h (the others are left as
// they were), runs mHC, the projections, the output projection and the MoE on them, and the attention
// projections are all-gathered once per layer for the parts that need every row (attention.h). Probe rows
// (router) are this rank's only; indexer_topk has every row.
void decoder_layer_forward(const LayerContext& ctx, const ForwardBatch& batch, const int32_t* ids,
                           const uint8_t* skip, float* h, const LayerProbeOut& probe);

} // namespace deepinfer::model::deepseek_v4
