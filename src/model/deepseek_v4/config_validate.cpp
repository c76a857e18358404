// ModelConfig::validate: the consistency rules a parsed config must satisfy before any tensor is bound.

#include "model/deepseek_v4/config.h"

#include <cstdint>

namespace deepinfer::model::deepseek_v4 {
namespace {

core::Status field_error(const std::string& src, const std::string& field, const std::string& what) {
    return core::invalid_argument(src + ": field '" + field + "' " + what);
}

} // namespace

core::Status ModelConfig::validate(const std::string& src) const {
    const std::pair<const char*, int64_t> positive[] = {
        {"vocab_size", vocab_size},
        {"hidden_size", hidden_size},
        {"num_hidden_layers", num_hidden_layers},
        {"num_attention_heads", num_attention_heads},
        {"head_dim", head_dim},
        {"qk_rope_head_dim", qk_rope_head_dim},
        {"q_lora_rank", q_lora_rank},
        {"o_groups", o_groups},
        {"o_lora_rank", o_lora_rank},
        {"moe_intermediate_size", moe_intermediate_size},
        {"n_routed_experts", n_routed_experts},
        {"num_experts_per_tok", num_experts_per_tok},
        {"sliding_window", sliding_window},
        {"max_position_embeddings", max_position_embeddings},
        {"hc_mult", hc_mult},
        {"hc_sinkhorn_iters", hc_sinkhorn_iters},
    };
    for (const auto& [name, v] : positive)
        if (v <= 0) return field_error(src, name, "must be positive, got " + std::to_string(v));
    // Positions and context lengths are 32-bit downstream (engine, server): refuse rather than truncate.
    if (max_position_embeddings > INT32_MAX)
        return field_error(src, "max_position_embeddings",
                           std::to_string(max_position_embeddings) +
                               " exceeds the largest supported context, " + std::to_string(INT32_MAX));
    if (num_key_value_heads != 1)
        return field_error(src, "num_key_value_heads",
                           "must be 1 (shared K=V), got " + std::to_string(num_key_value_heads));
    if (n_shared_experts < 0) return field_error(src, "n_shared_experts", "must be >= 0");
    if (num_nextn_predict_layers < 0) return field_error(src, "num_nextn_predict_layers", "must be >= 0");
    if (num_attention_heads % o_groups != 0 || (num_attention_heads * head_dim) % o_groups != 0)
        return field_error(src, "o_groups",
                           std::to_string(o_groups) + " must divide num_attention_heads (" +
                               std::to_string(num_attention_heads) + ") and num_attention_heads * head_dim");
    if (qk_rope_head_dim > head_dim || qk_rope_head_dim % 2 != 0)
        return field_error(src, "qk_rope_head_dim",
                           std::to_string(qk_rope_head_dim) + " must be even and <= head_dim (" +
                               std::to_string(head_dim) + ")");
    if (num_experts_per_tok > n_routed_experts)
        return field_error(src, "num_experts_per_tok",
                           std::to_string(num_experts_per_tok) + " exceeds n_routed_experts (" +
                               std::to_string(n_routed_experts) + ")");
    if (static_cast<int64_t>(layer_types.size()) != num_hidden_layers)
        return field_error(src, "layer_types",
                           "has " + std::to_string(layer_types.size()) + " entries, num_hidden_layers is " +
                               std::to_string(num_hidden_layers));
    if (static_cast<int64_t>(compress_ratios.size()) != num_hidden_layers)
        return field_error(src, "compress_ratios",
                           "has " + std::to_string(compress_ratios.size()) +
                               " entries, num_hidden_layers is " + std::to_string(num_hidden_layers));
    if (static_cast<int64_t>(mlp_layer_types.size()) != num_hidden_layers)
        return field_error(src, "mlp_layer_types",
                           "has " + std::to_string(mlp_layer_types.size()) +
                               " entries, num_hidden_layers is " + std::to_string(num_hidden_layers));
    bool has_csa = false;
    for (int64_t i = 0; i < num_hidden_layers; ++i) {
        const bool sliding = layer_types[i] == AttentionType::kSliding;
        has_csa = has_csa || layer_types[i] == AttentionType::kCompressedSparse;
        if (sliding != (compress_ratios[i] == 0) || compress_ratios[i] < 0)
            return field_error(src, "compress_ratios[" + std::to_string(i) + "]",
                               "= " + std::to_string(compress_ratios[i]) +
                                   " does not fit the layer's attention type");
    }
    if (has_csa) {
        if (index_n_heads <= 0) return field_error(src, "index_n_heads", "must be positive");
        if (index_head_dim <= 0) return field_error(src, "index_head_dim", "must be positive");
        if (index_topk <= 0) return field_error(src, "index_topk", "must be positive");
        if (qk_rope_head_dim > index_head_dim)
            return field_error(src, "qk_rope_head_dim",
                               std::to_string(qk_rope_head_dim) + " exceeds index_head_dim (" +
                                   std::to_string(index_head_dim) + ")");
    }
    if (!(rms_norm_eps > 0.0)) return field_error(src, "rms_norm_eps", "must be positive");
    if (!(hc_eps >= 0.0)) return field_error(src, "hc_eps", "must be >= 0");
    if (!(rope_theta > 0.0)) return field_error(src, "rope_theta", "must be positive");
    if (!(compress_rope_theta > 0.0)) return field_error(src, "compress_rope_theta", "must be positive");
    if (!(routed_scaling_factor > 0.0)) return field_error(src, "routed_scaling_factor", "must be positive");
    if (!(swiglu_limit >= 0.0)) return field_error(src, "swiglu_limit", "must be >= 0 (0 = no clamp)");
    if (yarn.enabled) {
        if (!(yarn.factor > 0.0)) return field_error(src, "rope_scaling.factor", "must be positive");
        if (yarn.original_max_position_embeddings <= 0)
            return field_error(src, "rope_scaling.original_max_position_embeddings", "must be positive");
        if (!(yarn.beta_fast > 0.0) || !(yarn.beta_slow > 0.0))
            return field_error(src, "rope_scaling.beta_fast", "and beta_slow must be positive");
    }
    if (quant.block_rows <= 0 || quant.block_cols <= 0)
        return field_error(src, "quantization_config.weight_block_size", "must be positive");
    if (quant.fp4_group <= 0)
        return field_error(src, "quantization_config.fp4_group_size", "must be positive");
    return {};
}

} // namespace deepinfer::model::deepseek_v4
