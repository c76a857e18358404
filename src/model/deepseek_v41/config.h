#pragma once
// DeepSeek V4.1 (V4.1-Flash) model configuration, read from config.json and validated. Accepts:
//  * the released layout: a composite object whose `text_config` carries DeepSeek's names
//    (`engram_pad_token_id`, `rope_scaling{rope_type: yarn}`, `compress_ratios` with trailing MTP entries),
//    plus `vision_config` (ignored with a log line until images are supported) and `quantization_config`;
//  * what transformers' `DeepseekV41Config.save_pretrained` writes (`engram_pad_id`,
//    `rope_parameters{main, compress}`, `layer_types`, ...), composite or flat;
//  * the inference-side short names (`dim`, `n_layers`, `window_size`, `n_activated_experts`, ...).
// Spec: shared/spec/deepseek-v4-architecture.md §3. Defaults follow transformers' DeepseekV41TextConfig.

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "weights/checkpoint.h"

namespace deepinfer::model::deepseek_v41 {

struct YarnConfig {
    bool enabled = false;
    double factor = 1.0;
    int64_t original_max_position_embeddings = 0;
    double beta_fast = 32.0;
    double beta_slow = 1.0;
};

// Engram n-gram memory (spec §3.3). Empty layer_ids = no Engram.
struct EngramConfig {
    std::vector<int64_t> layer_ids;      // backbone layers with an Engram module
    std::vector<int64_t> num_embeddings; // table rows per Engram layer (= sum of its primes)
    int64_t max_ngram_size = 4;          // N: n-grams 2..N are hashed
    int64_t vocab_size = 16000000;       // engram_vocab_size: primes are drawn above vocab_size - 1
    int64_t n_heads = 8;                 // hash heads per n-gram size
    int64_t head_dim = 256;              // table row width
    int64_t pad_token_id = 2;            // engram_pad_token_id (official) / engram_pad_id (transformers)
    int64_t compressed_vocab_size = 99092;

    bool enabled() const { return !layer_ids.empty(); }
    int64_t n_hash_cols() const { return (max_ngram_size - 1) * n_heads; } // ids per position per layer
    int64_t layer_index(int64_t layer) const; // position of `layer` in layer_ids, or -1
};

// The vision tower's config is recorded (so `inspect` can say what it skipped) but not used.
struct VisionConfig {
    bool present = false;
    int64_t num_hidden_layers = 0;
    int64_t hidden_size = 0;
    int64_t patch_size = 0;
};

struct ModelConfig {
    int64_t vocab_size = 0;
    int64_t hidden_size = 0; // D
    int64_t num_hidden_layers = 0;
    int64_t num_attention_heads = 0; // H
    int64_t num_key_value_heads = 1; // always 1 (shared K=V latent)
    int64_t head_dim = 0;            // d (K = V dim)
    int64_t qk_rope_head_dim = 0;    // rd: trailing RoPE dims of each head
    int64_t q_lora_rank = 0;
    int64_t o_groups = 0;
    int64_t o_lora_rank = 0;
    int64_t moe_intermediate_size = 0;
    int64_t n_routed_experts = 0;
    int64_t num_experts_per_tok = 0;
    int64_t n_shared_experts = 1;
    double gate_temp = 1.0; // router logits are divided by it before sqrt-softplus
    bool norm_topk_prob = true;
    double routed_scaling_factor = 1.5;
    double swiglu_limit = 10.0; // 0 = no clamp
    int64_t sliding_window = 0;
    // [num_hidden_layers] (trailing MTP entries of the official list dropped): 0 = window only,
    // 2 = "encoder" (2 tokens pooled per entry), 1 = "decoder" (one entry per token).
    std::vector<int64_t> compress_ratios;
    std::vector<int64_t> kv_source_layer_ids;    // layers owning a compressor (and the index keys)
    std::vector<int64_t> index_source_layer_ids; // layers running an indexer
    int64_t candidate_source_layer_id = -1;      // two-level top-k source; -1 = disabled
    int64_t candidate_topk_blocks = 2048;
    int64_t candidate_block_size = 8;
    int64_t index_n_heads = 0;
    int64_t index_head_dim = 0;
    int64_t index_topk = 0;
    double rope_theta = 10000.0;           // main table (ratio-0 layers)
    double compress_rope_theta = 160000.0; // compress table (ratio > 0 layers, compressed KV, indexer)
    YarnConfig yarn;                       // applies to the compress table only
    int64_t max_position_embeddings = 1048576;
    int64_t hc_mult = 4;
    int64_t hc_sinkhorn_iters = 20;
    double hc_eps = 1e-6;
    double rms_norm_eps = 1e-20;
    EngramConfig engram;
    int64_t num_nextn_predict_layers = 0; // DSpark draft layers (not run)
    int64_t image_token_id = -1;          // -1 when the config names none
    int64_t bos_token_id = 0;
    int64_t eos_token_id = 1;
    bool tie_word_embeddings = false;
    weights::QuantizationConfig quant; // quantization_config, if any
    bool expert_fp4 = false;           // quantization_config.expert_dtype (or expert_dtype) == "fp4"
    VisionConfig vision;

    // Layer roles (spec §3.1). The source of a layer is the nearest source at or before it (-1: none).
    int64_t kv_source_of(int64_t layer) const;
    int64_t index_source_of(int64_t layer) const;
    bool is_kv_source(int64_t layer) const;
    bool is_index_source(int64_t layer) const;
    // An index source after the candidate source: scores only inside the candidate blocks.
    bool uses_candidates(int64_t layer) const;

    // Parse and validate; errors name the file and the field.
    static core::Result<ModelConfig> from_json_file(const std::string& path);
    static core::Result<ModelConfig> from_json_string(const std::string& json,
                                                      const std::string& source_name);
    core::Status validate(const std::string& source_name) const;
};

// True when a config.json's `model_type` / `architectures` names DeepSeek V4.1 (for a model registry).
bool is_deepseek_v41_config(const std::string& json_text);

} // namespace deepinfer::model::deepseek_v41
