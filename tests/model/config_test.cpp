#include "model/deepseek_v4/config.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <unistd.h>

namespace deepinfer::model::deepseek_v4 {
namespace {

using core::StatusCode;
using nlohmann::json;

constexpr const char* kSrc = "models/x/config.json";

// tiny-v4 (spec §6.1) in DeepSeek's official names: per-layer compress_ratios with a trailing MTP entry,
// num_hash_layers, qk_rope_head_dim, rope_scaling, quantization_config.
json official() {
    return json::parse(R"({
      "architectures": ["DeepseekV4ForCausalLM"], "vocab_size": 512, "hidden_size": 64,
      "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 32,
      "qk_rope_head_dim": 16, "q_lora_rank": 32, "o_groups": 2, "o_lora_rank": 16,
      "n_routed_experts": 8, "num_experts_per_tok": 2, "n_shared_experts": 1, "moe_intermediate_size": 32,
      "compress_ratios": [0, 4, 8, 4, 0], "num_hash_layers": 1, "sliding_window": 8,
      "index_n_heads": 2, "index_head_dim": 32, "index_topk": 3, "hc_mult": 4, "hc_sinkhorn_iters": 20,
      "hc_eps": 1e-6, "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "compress_rope_theta": 160000.0,
      "rope_scaling": {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 256,
                       "beta_fast": 32.0, "beta_slow": 1.0},
      "max_position_embeddings": 1024, "scoring_func": "sqrtsoftplus", "routed_scaling_factor": 1.5,
      "swiglu_limit": 1.0, "num_nextn_predict_layers": 1, "tie_word_embeddings": false,
      "bos_token_id": 0, "eos_token_id": 1,
      "quantization_config": {"quant_method": "fp8", "fmt": "e4m3", "weight_block_size": [16, 32],
                              "scale_fmt": "ue8m0", "activation_scheme": "dynamic"}})");
}

// The same model in transformers' names.
json transformers() {
    json j = official();
    for (const char* k : {"compress_ratios", "num_hash_layers", "qk_rope_head_dim", "rope_scaling"})
        j.erase(k);
    j["layer_types"] = {"sliding_attention", "compressed_sparse_attention", "heavily_compressed_attention",
                        "compressed_sparse_attention"};
    j["compress_rates"] = {{"compressed_sparse_attention", 4}, {"heavily_compressed_attention", 8}};
    j["mlp_layer_types"] = {"hash_moe", "moe", "moe", "moe"};
    j["partial_rotary_factor"] = 0.5;
    j["rope_parameters"] = {{"rope_type", "yarn"},
                            {"factor", 4.0},
                            {"original_max_position_embeddings", 256},
                            {"beta_fast", 32.0},
                            {"beta_slow", 1.0}};
    return j;
}

core::Result<ModelConfig> parse(const json& j) {
    return ModelConfig::from_json_string(j.dump(), kSrc);
}

void expect_tiny(const ModelConfig& c) {
    EXPECT_EQ(c.vocab_size, 512);
    EXPECT_EQ(c.hidden_size, 64);
    EXPECT_EQ(c.num_hidden_layers, 4);
    EXPECT_EQ(c.num_attention_heads, 4);
    EXPECT_EQ(c.head_dim, 32);
    EXPECT_EQ(c.qk_rope_head_dim, 16);
    EXPECT_EQ(c.q_lora_rank, 32);
    EXPECT_EQ(c.o_groups, 2);
    EXPECT_EQ(c.o_lora_rank, 16);
    EXPECT_EQ(c.moe_intermediate_size, 32);
    EXPECT_EQ(c.n_routed_experts, 8);
    EXPECT_EQ(c.num_experts_per_tok, 2);
    EXPECT_EQ(c.sliding_window, 8);
    EXPECT_EQ(c.layer_types, (std::vector<AttentionType>{
                                 AttentionType::kSliding, AttentionType::kCompressedSparse,
                                 AttentionType::kHeavilyCompressed, AttentionType::kCompressedSparse}));
    EXPECT_EQ(c.compress_ratios, (std::vector<int64_t>{0, 4, 8, 4}));
    EXPECT_EQ(c.mlp_layer_types,
              (std::vector<MlpType>{MlpType::kHashMoe, MlpType::kMoe, MlpType::kMoe, MlpType::kMoe}));
    EXPECT_TRUE(c.yarn.enabled);
    EXPECT_EQ(c.yarn.factor, 4.0);
    EXPECT_EQ(c.yarn.original_max_position_embeddings, 256);
    EXPECT_EQ(c.yarn.beta_fast, 32.0);
    EXPECT_EQ(c.yarn.beta_slow, 1.0);
    EXPECT_EQ(c.rope_theta, 10000.0);
    EXPECT_EQ(c.compress_rope_theta, 160000.0);
    EXPECT_EQ(c.max_position_embeddings, 1024);
    EXPECT_EQ(c.index_n_heads, 2);
    EXPECT_EQ(c.index_head_dim, 32);
    EXPECT_EQ(c.index_topk, 3);
    EXPECT_EQ(c.routed_scaling_factor, 1.5);
    EXPECT_EQ(c.swiglu_limit, 1.0);
    EXPECT_EQ(c.num_nextn_predict_layers, 1);
    EXPECT_TRUE(c.quant.fp8);
    EXPECT_EQ(c.quant.block_rows, 16);
    EXPECT_EQ(c.quant.block_cols, 32);
    EXPECT_EQ(c.quant.fp4_group, 32);
}

TEST(ModelConfig, OfficialNames) {
    auto c = parse(official());
    ASSERT_TRUE(c.ok()) << c.status().to_string();
    expect_tiny(*c);
}

TEST(ModelConfig, TransformersNames) {
    auto c = parse(transformers());
    ASSERT_TRUE(c.ok()) << c.status().to_string();
    expect_tiny(*c);
}

TEST(ModelConfig, TransformersNestedRopeParameters) {
    json j = transformers();
    j.erase("rope_theta");
    j.erase("compress_rope_theta");
    j["rope_parameters"] = json::parse(R"({"main": {"rope_type": "default", "rope_theta": 10000.0},
        "compress": {"rope_type": "yarn", "rope_theta": 160000.0, "factor": 4.0,
                     "original_max_position_embeddings": 256, "beta_fast": 32.0, "beta_slow": 1.0,
                     "partial_rotary_factor": 0.5}})");
    j.erase("partial_rotary_factor");
    j["rope_theta"] = 1.0; // overridden by main.rope_theta
    auto c = parse(j);
    ASSERT_TRUE(c.ok()) << c.status().to_string();
    expect_tiny(*c);
}

TEST(ModelConfig, InferenceShortNames) {
    json j = official();
    const std::pair<const char*, const char*> renames[] = {{"hidden_size", "dim"},
                                                           {"num_hidden_layers", "n_layers"},
                                                           {"num_attention_heads", "n_heads"},
                                                           {"num_hash_layers", "n_hash_layers"},
                                                           {"moe_intermediate_size", "moe_inter_dim"},
                                                           {"num_experts_per_tok", "n_activated_experts"},
                                                           {"routed_scaling_factor", "route_scale"},
                                                           {"qk_rope_head_dim", "rope_head_dim"},
                                                           {"sliding_window", "window_size"},
                                                           {"rms_norm_eps", "norm_eps"}};
    for (const auto& [from, to] : renames) {
        j[to] = j[from];
        j.erase(from);
    }
    j.erase("rope_scaling");
    j["rope_factor"] = 4.0;
    j["original_seq_len"] = 256;
    auto c = parse(j);
    ASSERT_TRUE(c.ok()) << c.status().to_string();
    expect_tiny(*c);
}

TEST(ModelConfig, OfficialRatioMapping) {
    // Flash's layer map: 0 = sliding, 4 = CSA, 128 = HCA; trailing MTP entry dropped.
    json j = official();
    j["compress_ratios"] = {128, 4, 0, 128, 0};
    j["num_hash_layers"] = 0;
    auto c = parse(j);
    ASSERT_TRUE(c.ok()) << c.status().to_string();
    EXPECT_EQ(c->layer_types,
              (std::vector<AttentionType>{AttentionType::kHeavilyCompressed, AttentionType::kCompressedSparse,
                                          AttentionType::kSliding, AttentionType::kHeavilyCompressed}));
    EXPECT_EQ(c->compress_ratios, (std::vector<int64_t>{128, 4, 0, 128}));
    EXPECT_EQ(c->mlp_layer_types, std::vector<MlpType>(4, MlpType::kMoe));
}

TEST(ModelConfig, EosListAndDefaults) {
    json j = official();
    j["eos_token_id"] = {7, 9};
    j.erase("quantization_config");
    j.erase("hc_mult");
    auto c = parse(j);
    ASSERT_TRUE(c.ok()) << c.status().to_string();
    EXPECT_EQ(c->eos_token_id, 7);
    EXPECT_FALSE(c->quant.fp8);
    EXPECT_EQ(c->hc_mult, 4);
}

void expect_error(const json& j, const std::string& field, StatusCode code = StatusCode::kInvalidArgument) {
    auto c = parse(j);
    ASSERT_FALSE(c.ok()) << "expected an error about " << field;
    EXPECT_EQ(c.status().code(), code) << c.status().to_string();
    EXPECT_NE(c.status().message().find(kSrc), std::string::npos) << c.status().message();
    EXPECT_NE(c.status().message().find("'" + field), std::string::npos) << c.status().message();
}

TEST(ModelConfig, MissingFields) {
    for (const char* f : {"vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "head_dim",
                          "q_lora_rank", "o_groups", "o_lora_rank", "moe_intermediate_size",
                          "n_routed_experts", "num_experts_per_tok", "sliding_window", "compress_ratios",
                          "qk_rope_head_dim", "index_n_heads", "index_head_dim", "index_topk"}) {
        json j = official();
        j.erase(f);
        expect_error(j, f);
    }
}

TEST(ModelConfig, WrongTypes) {
    const std::pair<const char*, json> cases[] = {
        {"hidden_size", "64"},           {"num_attention_heads", 4.5}, {"compress_ratios", 4},
        {"compress_ratios[1]", "x"},     {"rope_theta", "big"},        {"tie_word_embeddings", 1},
        {"rope_scaling", json::array()}, {"quantization_config", 3},   {"num_hash_layers", true},
        {"eos_token_id", "eos"}};
    for (const auto& [field, value] : cases) {
        json j = official();
        std::string key = field;
        if (key == "compress_ratios[1]")
            j["compress_ratios"][1] = value;
        else
            j[key] = value;
        expect_error(j, field);
    }
    json j = official();
    j["quantization_config"]["weight_block_size"] = {128};
    expect_error(j, "quantization_config.weight_block_size");
    j = official();
    j["rope_scaling"]["factor"] = "4";
    expect_error(j, "rope_scaling.factor");
    j = transformers();
    j["layer_types"][2] = "full_attention";
    expect_error(j, "layer_types[2]");
    j = transformers();
    j["mlp_layer_types"][0] = "dense";
    expect_error(j, "mlp_layer_types[0]");
    j = transformers();
    j["compress_rates"]["heavily_compressed_attention"] = 8.5;
    expect_error(j, "compress_rates.heavily_compressed_attention");
    auto bad = ModelConfig::from_json_string("{\"vocab_size\": ", kSrc);
    ASSERT_FALSE(bad.ok());
    EXPECT_NE(bad.status().message().find(kSrc), std::string::npos);
}

TEST(ModelConfig, InconsistentValues) {
    auto with = [](const char* key, json v) {
        json j = official();
        j[key] = v;
        return j;
    };
    expect_error(with("hidden_size", 0), "hidden_size");
    expect_error(with("num_attention_heads", -4), "num_attention_heads");
    expect_error(with("o_groups", 3), "o_groups");                  // 4 heads not divisible by 3
    expect_error(with("qk_rope_head_dim", 48), "qk_rope_head_dim"); // > head_dim 32
    expect_error(with("qk_rope_head_dim", 15), "qk_rope_head_dim"); // odd
    expect_error(with("index_head_dim", 8), "qk_rope_head_dim");    // rope 16 > index_head_dim 8
    expect_error(with("num_experts_per_tok", 9), "num_experts_per_tok");
    expect_error(with("sliding_window", 0), "sliding_window");
    expect_error(with("compress_ratios", json{0, 4, 8}), "compress_ratios");
    expect_error(with("compress_ratios", json{0, 4, -1, 4}), "compress_ratios[2]");
    expect_error(with("num_hash_layers", 5), "num_hash_layers");
    expect_error(with("num_key_value_heads", 2), "num_key_value_heads");
    expect_error(with("scoring_func", "softmax"), "scoring_func");
    json j = transformers();
    j["mlp_layer_types"] = {"hash_moe", "moe"};
    expect_error(j, "mlp_layer_types");
    j = transformers();
    j["layer_types"].push_back("sliding_attention");
    expect_error(j, "layer_types");
    j = transformers();
    j["partial_rotary_factor"] = 0.3; // 0.3 * 32 is not an integer
    expect_error(j, "partial_rotary_factor");
    j = official();
    j["quantization_config"]["weight_block_size"] = {0, 128};
    expect_error(j, "quantization_config.weight_block_size");
    j = official();
    j["rope_scaling"]["original_max_position_embeddings"] = 0;
    expect_error(j, "rope_scaling.original_max_position_embeddings");
}

TEST(ModelConfig, FromFile) {
    const auto path =
        std::filesystem::temp_directory_path() / ("di_config_test_" + std::to_string(::getpid()) + ".json");
    { std::ofstream(path) << official().dump(); }
    auto c = ModelConfig::from_json_file(path.string());
    ASSERT_TRUE(c.ok()) << c.status().to_string();
    expect_tiny(*c);
    { std::ofstream(path) << "{\"vocab_size\": 3}"; }
    auto bad = ModelConfig::from_json_file(path.string());
    ASSERT_FALSE(bad.ok());
    EXPECT_NE(bad.status().message().find(path.string()), std::string::npos);
    std::filesystem::remove(path);
    auto missing = ModelConfig::from_json_file(path.string());
    ASSERT_FALSE(missing.ok());
    EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
}

} // namespace
} // namespace deepinfer::model::deepseek_v4
