#pragma once
// DeepSeek V4 model configuration, read from config.json in either DeepSeek's official field names
// (compress_ratios, num_hash_layers, qk_rope_head_dim, rope_scaling, ...) or transformers' names
// (layer_types, mlp_layer_types, compress_rates, partial_rotary_factor, rope_parameters, ...), and validated.

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "weights/checkpoint.h"

namespace deepinfer::model::deepseek_v4 {

enum class AttentionType : uint8_t {
    kSliding,           // window only (compress ratio 0)
    kCompressedSparse,  // CSA: ratio m (4), overlapping windows, lightning indexer top-k
    kHeavilyCompressed, // HCA: ratio m (128), dense over compressed entries
};

enum class MlpType : uint8_t {
    kHashMoe, // routed by tid2eid[token]
    kMoe,     // top-k of sqrt-softplus scores + e_score_correction_bias
};

struct YarnConfig {
    bool enabled = false;
    double factor = 1.0;
    int64_t original_max_position_embeddings = 0;
    double beta_fast = 32.0;
    double beta_slow = 1.0;
};

struct ModelConfig {
    int64_t vocab_size = 0;
    int64_t hidden_size = 0; // D
    int64_t num_hidden_layers = 0;
    int64_t num_attention_heads = 0; // H
    int64_t num_key_value_heads = 1; // always 1 (shared K=V)
    int64_t head_dim = 0;            // d (K = V dim)
    int64_t qk_rope_head_dim = 0;    // rd: trailing RoPE dims of each head
    int64_t q_lora_rank = 0;
    int64_t o_groups = 0;
    int64_t o_lora_rank = 0;
    int64_t moe_intermediate_size = 0;
    int64_t n_routed_experts = 0;
    int64_t num_experts_per_tok = 0;
    int64_t n_shared_experts = 1;
    double routed_scaling_factor = 1.0;
    double swiglu_limit = 0.0; // 0 = no clamp
    int64_t sliding_window = 0;
    std::vector<AttentionType> layer_types; // [num_hidden_layers]
    std::vector<int64_t> compress_ratios;   // [num_hidden_layers]: 0, or the layer's compression ratio m
    std::vector<MlpType> mlp_layer_types;   // [num_hidden_layers]
    double rope_theta = 10000.0;            // main table (sliding layers)
    double compress_rope_theta = 160000.0;  // compress table (CSA/HCA layers, compressors, indexer)
    YarnConfig yarn;                        // applies to the compress table only
    int64_t max_position_embeddings = 0;
    int64_t index_n_heads = 0;
    int64_t index_head_dim = 0;
    int64_t index_topk = 0;
    int64_t hc_mult = 4;
    int64_t hc_sinkhorn_iters = 20;
    double hc_eps = 1e-6;
    double rms_norm_eps = 1e-6;
    int64_t num_nextn_predict_layers = 0;
    int64_t bos_token_id = 0;
    int64_t eos_token_id = 1;
    bool tie_word_embeddings = false;
    weights::QuantizationConfig quant; // quantization_config, if any

    // Parse and validate; errors name the file and the field.
    static core::Result<ModelConfig> from_json_file(const std::string& path);
    static core::Result<ModelConfig> from_json_string(const std::string& json,
                                                      const std::string& source_name);
    core::Status validate(const std::string& source_name) const;
};

// Every tensor the architecture needs, in DeepSeek's official naming (spec §4.1), with its expected
// dtype(s) and shape, for `inspect` and loading.
struct TensorSpec {
    std::string name;
    std::vector<core::DType> dtypes; // accepted stored dtypes
    core::Shape shape;               // stored shape; for a linear weight the logical [rows, cols]
    // `<prefix>.weight` of a matmul (Checkpoint::weight binds it): F8_E4M3 needs `<prefix>.scale`
    // [ceil(rows/br), ceil(cols/bc)], I8 (packed fp4, routed experts only) is stored [rows, cols/2] and
    // needs `<prefix>.scale` [rows, cols/group].
    bool linear = false;
    core::Shape stored_shape(core::DType dtype) const; // shape as stored in `dtype`
};
std::vector<TensorSpec> required_tensors(const ModelConfig& config);

// A checkpoint checked against required_tensors(config): problems (missing tensor, dtype not accepted,
// wrong shape, missing or misshapen scale), each naming the tensor (and file); unexpected = tensors no
// spec accounts for (e.g. `mtp.*`), reported but not errors.
struct CheckpointCheck {
    size_t required = 0;
    std::vector<std::string> problems;
    std::vector<std::string> unexpected;
    bool ok() const { return problems.empty(); }
};
CheckpointCheck check_checkpoint(const weights::Checkpoint& checkpoint, const ModelConfig& config);

} // namespace deepinfer::model::deepseek_v4
