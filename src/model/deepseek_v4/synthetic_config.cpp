// Presets of synthetic_preset() and the official config.json writer.

#include <nlohmann/json.hpp>

#include "model/deepseek_v4/synthetic.h"

namespace deepinfer::model::deepseek_v4 {
namespace {

// Layer types from compress ratios (0 sliding, 4 CSA, other HCA), hash MoE on the first `hash` layers.
void set_layers(ModelConfig& c, const std::vector<int64_t>& ratios, int64_t hash) {
    c.num_hidden_layers = static_cast<int64_t>(ratios.size());
    c.compress_ratios = ratios;
    c.layer_types.clear();
    c.mlp_layer_types.clear();
    for (size_t i = 0; i < ratios.size(); ++i) {
        c.layer_types.push_back(ratios[i] == 0   ? AttentionType::kSliding
                                : ratios[i] == 4 ? AttentionType::kCompressedSparse
                                                 : AttentionType::kHeavilyCompressed);
        c.mlp_layer_types.push_back(static_cast<int64_t>(i) < hash ? MlpType::kHashMoe : MlpType::kMoe);
    }
}

void set_yarn(ModelConfig& c, double factor, int64_t original) {
    c.yarn.enabled = true;
    c.yarn.factor = factor;
    c.yarn.original_max_position_embeddings = original;
    c.yarn.beta_fast = 32.0;
    c.yarn.beta_slow = 1.0;
    // transformers versions that recompute the factor from these agree only when they match.
    c.max_position_embeddings = static_cast<int64_t>(factor) * original;
}

// models/tiny-v4 (spec §6.1 with 8 indexer heads) with the real DeepSeek V4 tokenizer's vocabulary.
ModelConfig tiny_text() {
    ModelConfig c;
    c.vocab_size = 129280;
    c.hidden_size = 64;
    c.num_attention_heads = 4;
    c.head_dim = 32;
    c.qk_rope_head_dim = 16;
    c.q_lora_rank = 32;
    c.o_groups = 2;
    c.o_lora_rank = 16;
    c.moe_intermediate_size = 32;
    c.n_routed_experts = 8;
    c.num_experts_per_tok = 2;
    c.routed_scaling_factor = 1.5;
    c.swiglu_limit = 1.0;
    c.sliding_window = 8;
    set_layers(c, {0, 4, 8, 4}, 1);
    set_yarn(c, 4.0, 256);
    c.index_n_heads = 8;
    c.index_head_dim = 32;
    c.index_topk = 3;
    return c;
}

// DeepSeek V4-Flash's shapes (spec §1.1) with 4 layers: sliding, CSA, HCA, CSA.
ModelConfig flash_mini() {
    ModelConfig c;
    c.vocab_size = 129280;
    c.hidden_size = 4096;
    c.num_attention_heads = 64;
    c.head_dim = 512;
    c.qk_rope_head_dim = 64;
    c.q_lora_rank = 1024;
    c.o_groups = 8;
    c.o_lora_rank = 1024;
    c.moe_intermediate_size = 2048;
    c.n_routed_experts = 256;
    c.num_experts_per_tok = 6;
    c.routed_scaling_factor = 1.5;
    c.swiglu_limit = 10.0;
    c.sliding_window = 128;
    set_layers(c, {0, 4, 128, 4}, 1);
    set_yarn(c, 16.0, 65536);
    c.index_n_heads = 64;
    c.index_head_dim = 128;
    c.index_topk = 512;
    return c;
}

// V4-Flash's per-layer shapes with 4 layers and 64 experts: a Flash-shaped model under 8 GB in fp8.
ModelConfig flash_small() {
    ModelConfig c = flash_mini();
    c.n_routed_experts = 64;
    return c;
}

// DeepSeek V4-Pro's shapes (spec §1.1: hidden 7168, 128 heads, q_lora 1536, o 16 x 1024, experts x 3072,
// route scale 2.5, indexer top-1024) with 2 layers (HCA then CSA, as Pro starts; the first hash-routed) and
// 16 experts: ~5.6 GB in fp8.
ModelConfig pro_mini() {
    ModelConfig c;
    c.vocab_size = 129280;
    c.hidden_size = 7168;
    c.num_attention_heads = 128;
    c.head_dim = 512;
    c.qk_rope_head_dim = 64;
    c.q_lora_rank = 1536;
    c.o_groups = 16;
    c.o_lora_rank = 1024;
    c.moe_intermediate_size = 3072;
    c.n_routed_experts = 16;
    c.num_experts_per_tok = 6;
    c.routed_scaling_factor = 2.5;
    c.swiglu_limit = 10.0;
    c.sliding_window = 128;
    set_layers(c, {128, 4}, 1);
    set_yarn(c, 16.0, 65536);
    c.index_n_heads = 64;
    c.index_head_dim = 128;
    c.index_topk = 1024;
    return c;
}

// A mid-size model both engines run in seconds; ratios 4/128 only, so transformers parses its config.
ModelConfig bench_small() {
    ModelConfig c;
    c.vocab_size = 32000;
    c.hidden_size = 1024;
    c.num_attention_heads = 16;
    c.head_dim = 128;
    c.qk_rope_head_dim = 64;
    c.q_lora_rank = 512;
    c.o_groups = 4;
    c.o_lora_rank = 256;
    c.moe_intermediate_size = 512;
    c.n_routed_experts = 64;
    c.num_experts_per_tok = 6;
    c.routed_scaling_factor = 1.5;
    c.swiglu_limit = 10.0;
    c.sliding_window = 128;
    set_layers(c, {0, 4, 128, 4, 128, 4, 128, 4}, 1);
    set_yarn(c, 16.0, 4096);
    c.index_n_heads = 8;
    c.index_head_dim = 128;
    c.index_topk = 64;
    return c;
}

} // namespace

std::vector<std::string> synthetic_preset_names() {
    return {"tiny-text", "flash-mini", "flash-small", "pro-mini", "bench-small"};
}

core::Result<ModelConfig> synthetic_preset(const std::string& name) {
    ModelConfig c;
    if (name == "tiny-text")
        c = tiny_text();
    else if (name == "flash-mini")
        c = flash_mini();
    else if (name == "flash-small")
        c = flash_small();
    else if (name == "pro-mini")
        c = pro_mini();
    else if (name == "bench-small")
        c = bench_small();
    else
        return core::invalid_argument("unknown preset '" + name +
                                      "' (known: tiny-text, flash-mini, flash-small, pro-mini, bench-small)");
    DI_RETURN_IF_ERROR(c.validate("preset " + name));
    return c;
}

core::Result<std::string> official_config_json(const ModelConfig& c) {
    int64_t hash_layers = 0;
    while (hash_layers < c.num_hidden_layers && c.mlp_layer_types[hash_layers] == MlpType::kHashMoe)
        ++hash_layers;
    for (int64_t i = hash_layers; i < c.num_hidden_layers; ++i)
        if (c.mlp_layer_types[i] == MlpType::kHashMoe)
            return core::invalid_argument(
                "official config names need the hash-routed layers first (num_hash_layers)");
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
        const bool csa = c.layer_types[i] == AttentionType::kCompressedSparse;
        if (csa != (c.compress_ratios[i] == 4))
            return core::invalid_argument(
                "official config names need CSA layers at ratio 4 and only there (layer " +
                std::to_string(i) + ")");
    }
    nlohmann::ordered_json j;
    j["architectures"] = {"DeepseekV4ForCausalLM"};
    j["model_type"] = "deepseek_v4";
    j["vocab_size"] = c.vocab_size;
    j["hidden_size"] = c.hidden_size;
    j["num_hidden_layers"] = c.num_hidden_layers;
    j["num_attention_heads"] = c.num_attention_heads;
    j["num_key_value_heads"] = c.num_key_value_heads;
    j["head_dim"] = c.head_dim;
    j["qk_rope_head_dim"] = c.qk_rope_head_dim;
    j["q_lora_rank"] = c.q_lora_rank;
    j["o_groups"] = c.o_groups;
    j["o_lora_rank"] = c.o_lora_rank;
    j["moe_intermediate_size"] = c.moe_intermediate_size;
    j["n_routed_experts"] = c.n_routed_experts;
    j["num_experts_per_tok"] = c.num_experts_per_tok;
    j["n_shared_experts"] = c.n_shared_experts;
    j["scoring_func"] = "sqrtsoftplus";
    j["routed_scaling_factor"] = c.routed_scaling_factor;
    j["norm_topk_prob"] = true;
    j["topk_method"] = "noaux_tc";
    j["num_hash_layers"] = hash_layers;
    j["swiglu_limit"] = c.swiglu_limit;
    j["sliding_window"] = c.sliding_window;
    j["compress_ratios"] = c.compress_ratios;
    j["compress_rope_theta"] = c.compress_rope_theta;
    j["rope_theta"] = c.rope_theta;
    if (c.yarn.enabled)
        j["rope_scaling"] = {{"type", "yarn"},
                             {"factor", c.yarn.factor},
                             {"original_max_position_embeddings", c.yarn.original_max_position_embeddings},
                             {"beta_fast", c.yarn.beta_fast},
                             {"beta_slow", c.yarn.beta_slow}};
    j["max_position_embeddings"] = c.max_position_embeddings;
    j["index_n_heads"] = c.index_n_heads;
    j["index_head_dim"] = c.index_head_dim;
    j["index_topk"] = c.index_topk;
    j["hc_mult"] = c.hc_mult;
    j["hc_sinkhorn_iters"] = c.hc_sinkhorn_iters;
    j["hc_eps"] = c.hc_eps;
    j["rms_norm_eps"] = c.rms_norm_eps;
    j["hidden_act"] = "silu";
    j["num_nextn_predict_layers"] = c.num_nextn_predict_layers;
    j["bos_token_id"] = c.bos_token_id;
    j["eos_token_id"] = c.eos_token_id;
    j["tie_word_embeddings"] = c.tie_word_embeddings;
    j["torch_dtype"] = "bfloat16";
    if (c.quant.fp8) {
        j["quantization_config"] = {{"quant_method", "fp8"},
                                    {"fmt", "e4m3"},
                                    {"scale_fmt", "ue8m0"},
                                    {"weight_block_size", {c.quant.block_rows, c.quant.block_cols}},
                                    {"activation_scheme", "dynamic"}};
        if (c.quant.fp4_group != 32) j["quantization_config"]["fp4_group_size"] = c.quant.fp4_group;
        j["expert_dtype"] = "fp4";
    }
    return j.dump(2) + "\n";
}

} // namespace deepinfer::model::deepseek_v4
