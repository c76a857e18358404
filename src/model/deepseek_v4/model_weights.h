#pragma once
// Every tensor of a V4 checkpoint bound by its official name (DeepSeek's own names, which
// transformers' save_pretrained writes back). Linear weights are core::Weight views into the mmapped
// files in their stored format (F32/BF16/FP8 blocks/FP4 groups); only small per-channel vectors (norm
// weights, biases, sinks, mHC base/scale, compressor position biases) are copied to F32.

#include <cstdint>
#include <memory>
#include <vector>

#include "core/status.h"
#include "core/weight.h"
#include "model/deepseek_v4/config.h"
#include "model/lm_head.h"
#include "weights/checkpoint.h"

namespace deepinfer::model::deepseek_v4 {

// One mHC site: fn [(2 + hc) * hc, hc * D], base [(2 + hc) * hc], scale [3].
struct HyperConnectionWeights {
    core::Weight fn;
    std::vector<float> base;
    std::vector<float> scale;
};

// A compressor (attention CSA/HCA or indexer): coff = 2 for overlapping (CSA) windows, 1 for HCA.
struct CompressorWeights {
    int64_t ratio = 0; // m
    int64_t width = 0; // d or d_I (entry width)
    int64_t coff = 1;
    core::Weight wkv;        // [coff * width, D]
    core::Weight wgate;      // [coff * width, D]
    std::vector<float> ape;  // [m, coff * width]
    std::vector<float> norm; // [width]
};

struct IndexerWeights {
    core::Weight wq_b;         // [H_I * d_I, q_lora]
    core::Weight weights_proj; // [H_I, D]
    CompressorWeights compressor;
};

struct AttentionWeights {
    core::Weight wq_a;          // [q_lora, D]
    std::vector<float> q_norm;  // [q_lora]
    core::Weight wq_b;          // [H * d, q_lora]
    core::Weight wkv;           // [d, D]
    std::vector<float> kv_norm; // [d]
    core::Weight wo_a;          // [G * R, H * d / G]
    core::Weight wo_b;          // [D, G * R]
    std::vector<float> sink;    // [H]
    bool has_compressor = false;
    CompressorWeights compressor;
    bool has_indexer = false;
    IndexerWeights indexer;
};

struct ExpertWeights {
    core::Weight w1; // [I, D] gate
    core::Weight w2; // [D, I] down
    core::Weight w3; // [I, D] up
};

struct MoeWeights {
    core::Weight gate;                  // [E, D]
    std::vector<float> bias;            // [E] e_score_correction_bias (top-k layers)
    std::vector<int32_t> tid2eid;       // [vocab, K] (hash layers)
    std::vector<ExpertWeights> experts; // [E]; under EP only [first, last) are bound, the others empty
    bool has_shared = false;
    ExpertWeights shared; // width n_shared_experts * moe_intermediate_size
};

struct LayerWeights {
    std::vector<float> attn_norm; // [D]
    std::vector<float> ffn_norm;  // [D]
    HyperConnectionWeights hc_attn;
    HyperConnectionWeights hc_ffn;
    AttentionWeights attn;
    MoeWeights ffn;
};

struct ModelWeights {
    core::Weight embed; // [vocab, D]
    std::vector<LayerWeights> layers;
    core::Weight hc_head_fn;          // [hc, hc * D]
    std::vector<float> hc_head_base;  // [hc]
    std::vector<float> hc_head_scale; // [1]
    std::vector<float> norm;          // [D]
    core::Weight head;                // [vocab, D]

    // Bytes of the bound weights as stored (views) plus the small F32 copies.
    int64_t resident_weight_bytes() const;
    // The most columns of any matrix a forward multiplies (the mHC `fn` weights: hc x D): what the
    // matmuls' per-thread scratch is planned for (Backend::reserve_scratch).
    int64_t max_linear_cols() const;
};

// Which routed experts a rank binds (expert parallelism): [first, last); last < 0 means all. Unbound
// experts' pages are never touched, so they cost no resident memory.
struct ExpertRange {
    int64_t first = 0;
    int64_t last = -1;
};

// Binds every tensor (the routed experts of `experts` only; the LM head through model::bind_lm_head, FP8
// blocks under fast numerics, computing the vocabulary rows `head_rows` only); errors name the tensor and
// the checkpoint file.
core::Result<ModelWeights> bind_weights(const weights::Checkpoint& ckpt, const ModelConfig& config,
                                        ExpertRange experts = {}, model::HeadRows head_rows = {});

// Under model::dense_int8_panels(): int8 panels (model/int8_panels.h) for every dense FP8-block weight
// (attention, compressors, indexer, shared expert; not the routed experts, not the head, which
// bind_lm_head handles). Not under tensor parallelism: a rank computes a slice of rows that need not start
// on a panel tile, and would hold panels of rows it never computes.
void attach_dense_int8_panels(const weights::Checkpoint& ckpt, ModelWeights* w);

} // namespace deepinfer::model::deepseek_v4
