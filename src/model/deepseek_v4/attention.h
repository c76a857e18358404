#pragma once
// One V4 attention block over a ragged batch: shared K=V MQA with low-rank Q, per-head q RMS norm,
// interleaved RoPE on the trailing dims, a sliding window over raw kv rows, for CSA/HCA layers a compressed
// branch (HCA: every closed window; CSA: the lightning indexer's top-k), a per-head sink, inverse RoPE of
// the output and the grouped low-rank output projection.
// Projections run over all T rows at once; KV writes, compressors, indexer and attention run per chunk.

#include <cstdint>

#include "model/deepseek_v4/config.h"
#include "model/deepseek_v4/kv_cache.h"
#include "model/deepseek_v4/model_weights.h"
#include "model/deepseek_v4/rope.h"
#include "model/forward_batch.h"

namespace deepinfer::model::deepseek_v4 {

struct AttentionContext {
    const ModelConfig* config = nullptr;
    const AttentionWeights* w = nullptr;
    int64_t layer = 0;
    const RopeTable* rope = nullptr;          // main (sliding layers) or compress (CSA/HCA)
    const RopeTable* compress_rope = nullptr; // compressors and indexer
    KvCache* cache = nullptr;
};

// x [T, D] (post attn_norm) -> out [T, D]. Padding chunks produce zeros and touch only scratch.
// indexer_topk, when non-null and the layer has an indexer: [T, index_topk] chosen entries, -1 padded.
void attention_forward(const AttentionContext& ctx, const ForwardBatch& batch, const float* x, float* out,
                       int32_t* indexer_topk);

} // namespace deepinfer::model::deepseek_v4
