#pragma once
// DeepSeek V4.1 weights bound from a checkpoint by their official names (transformers' minus `model.`,
// `head.weight`). Linear weights are core::Weight views into the mmapped files in their stored format;
// small per-channel vectors are copied to F32. Engram tables stay in the map (engram_table.h).

#include <memory>
#include <vector>

#include "core/status.h"
#include "core/weight.h"
#include "model/deepseek_v41/config.h"
#include "model/deepseek_v41/engram_table.h"
#include "model/lm_head.h"
#include "weights/checkpoint.h"

namespace deepinfer::model::deepseek_v41 {

struct HcWeights {
    core::Weight fn;          // [(2 + hc) hc, hc D] F32
    std::vector<float> base;  // [(2 + hc) hc]
    std::vector<float> scale; // [3]
};

struct CompressorWeights {
    core::Weight wkv;        // [d, D]
    core::Weight wgate;      // [d, D] (ratio 2 only)
    std::vector<float> norm; // [d]
};

struct IndexerWeights {
    core::Weight wq_b;         // [H_I d_I, q_lora]
    core::Weight weights_proj; // [H_I, D]
    bool owns_k = false;       // a KV source's indexer derives the shared keys
    core::Weight wk;           // [d_I, d]
    std::vector<float> k_norm; // [d_I]
};

struct AttentionWeights {
    core::Weight wq_a;          // [q_lora, D]
    std::vector<float> q_norm;  // [q_lora]
    core::Weight wq_b;          // [H d, q_lora]
    core::Weight wkv;           // [d, D]
    std::vector<float> kv_norm; // [d]
    core::Weight wo_a;          // [G R, H d / G]
    core::Weight wo_b;          // [D, G R]
    std::vector<float> sink;    // [H]
    bool has_compressor = false;
    CompressorWeights compressor;
    bool has_indexer = false;
    IndexerWeights indexer;
};

struct ExpertWeights {
    core::Weight w1, w2, w3;
};

struct MoeWeights {
    core::Weight gate;       // [E, D]
    std::vector<float> bias; // [E] selection only
    std::vector<ExpertWeights> experts;
    ExpertWeights shared;
};

struct EngramWeights {
    core::Weight wkv;             // [(hc + 1) D, cols * head_dim]
    std::vector<float> qk_weight; // [hc, D] = q_weight * k_weight (only ever used as the product)
};

struct LayerWeights {
    HcWeights hc_attn, hc_ffn;
    std::vector<float> attn_norm, ffn_norm; // [D]
    AttentionWeights attn;
    MoeWeights ffn;
    bool has_engram = false;
    EngramWeights engram;
};

struct ModelWeights {
    core::Weight embed;      // [V, D]
    std::vector<float> norm; // [D]
    core::Weight head;       // [V, D]
    std::vector<LayerWeights> layers;
    std::vector<EngramTable> engram_tables; // per Engram layer, config.engram.layer_ids order

    // Binds the routed experts [first_expert, last_expert) only (last < 0: all; expert parallelism); the
    // others stay empty and must not be run. The LM head goes through model::bind_lm_head (FP8 blocks under
    // fast numerics, computing the vocabulary rows `head_rows` only).
    static core::Result<ModelWeights> bind(const weights::Checkpoint& ckpt, const ModelConfig& config,
                                           int64_t first_expert = 0, int64_t last_expert = -1,
                                           model::HeadRows head_rows = {});
    // Under model::dense_int8_panels(): int8 panels (model/int8_panels.h) for every dense FP8-block weight
    // (attention, compressor, indexer, shared expert, Engram; not the routed experts, not the head, which
    // bind_lm_head handles). Not under tensor parallelism (deepseek_v4's attach_dense_int8_panels says why).
    void attach_dense_int8_panels(const weights::Checkpoint& ckpt);
    // Bytes of the weights this process holds, as they sit in memory: each bound weight's stored bytes plus
    // its int8 panels (core::Weight::resident_bytes; fast's FP8 head counts as FP8, an expert-parallel rank
    // only its own experts), the per-channel vectors, and the Engram tables' mapped rows (resident once
    // gathered, as the token embedding's).
    int64_t resident_weight_bytes() const;
    // The most columns of any matrix a forward multiplies (the mHC `fn` weights: hc x D): what the
    // matmuls' per-thread scratch is planned for (Backend::reserve_scratch).
    int64_t max_linear_cols() const;
};

} // namespace deepinfer::model::deepseek_v41
