#pragma once
// One V4 attention block over a ragged batch, as composition on a kernels::Backend: low-rank Q with a
// per-head RMS norm, shared K=V MQA, RoPE on the trailing dims, then per chunk: kv_store, the compressors
// (CSA/HCA entries, the indexer's keys), the lightning indexer's top-k (CSA), paged sparse attention
// (window + compressed entries + sink), inverse RoPE, and the grouped low-rank output projection.
// Projections run over all T rows at once; the KV-state ops run per chunk (one sequence each).

#include <cstdint>

#include "kernels/backend.h"
#include "model/deepseek_v4/config.h"
#include "model/deepseek_v4/context_parallel.h"
#include "model/deepseek_v4/kv_cache.h"
#include "model/deepseek_v4/model_weights.h"
#include "model/deepseek_v4/rope.h"
#include "model/deepseek_v4/tensor_parallel.h"
#include "model/forward_batch.h"

namespace deepinfer::model::deepseek_v4 {

struct AttentionContext {
    const ModelConfig* config = nullptr;
    const AttentionWeights* w = nullptr;
    int64_t layer = 0;
    const RopeTable* rope = nullptr;          // main (sliding layers) or compress (CSA/HCA)
    const RopeTable* compress_rope = nullptr; // compressors and indexer
    KvCache* cache = nullptr;
    kernels::Backend* backend = nullptr;
    // Tensor parallelism, or nullptr: this rank's heads H/tp (the KV head, compressors and indexer are
    // computed on every rank), the output projection gathered (tensor_parallel.h).
    const TpShard* tp = nullptr;
    // Context parallelism, or nullptr: attention over this rank's KV blocks, partials merged over the CP
    // group (context_parallel.h). Composes with TP (this rank's heads).
    const CpShard* cp = nullptr;
};

// x [T, D] (post attn_norm) -> out [T, D]. Padding chunks produce zeros and touch no KV state.
// indexer_topk, when non-null and the layer has an indexer: [T, index_topk] chosen entries, -1 padded.
// CP with split rows (cp_rows(ctx.cp, T).split): only this rank's rows of x are read and of out written;
// the projections are all-gathered, so the KV state, the indexer picks (every row) and the merge see every
// row on every rank.
void attention_forward(const AttentionContext& ctx, const ForwardBatch& batch, const float* x, float* out,
                       int32_t* indexer_topk);

} // namespace deepinfer::model::deepseek_v4
