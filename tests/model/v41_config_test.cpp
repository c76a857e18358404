// DeepSeek V4.1 config.json parsing: the released V4.1-Flash config, transformers' field names, the
// inference-side short names, and validation errors that name the field.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "core/logging.h"
#include "model/deepseek_v41/config.h"
#include "model/registry.h"

namespace {

using deepinfer::model::deepseek_v41::is_deepseek_v41_config;
using deepinfer::model::deepseek_v41::ModelConfig;
using nlohmann::json;

const std::string kFlash =
    std::string(DEEPINFER_SOURCE_DIR) + "/tests/fixtures/deepseek-v41-flash/config.json";

json read_json(const std::string& path) {
    std::ifstream in(path);
    EXPECT_TRUE(in.good()) << path;
    return json::parse(in);
}

// A small V4.1 in transformers' names, flat (what DeepseekV41TextConfig.save_pretrained writes).
json tiny_hf() {
    return json{
        {"model_type", "deepseek_v41_text"},
        {"vocab_size", 300},
        {"hidden_size", 64},
        {"num_hidden_layers", 5},
        {"num_attention_heads", 4},
        {"num_key_value_heads", 1},
        {"head_dim", 64},
        {"q_lora_rank", 32},
        {"o_groups", 2},
        {"o_lora_rank", 16},
        {"moe_intermediate_size", 32},
        {"n_routed_experts", 8},
        {"num_experts_per_tok", 2},
        {"n_shared_experts", 1},
        {"sliding_window", 8},
        {"compress_ratios", {0, 2, 2, 1, 1}},
        {"kv_source_layer_ids", {1, 3}},
        {"index_source_layer_ids", {1, 3, 4}},
        {"candidate_source_layer_id", 3},
        {"candidate_topk_blocks", 3},
        {"candidate_block_size", 2},
        {"index_n_heads", 2},
        {"index_head_dim", 32},
        {"index_topk", 4},
        {"rms_norm_eps", 1e-6},
        {"engram_layer_ids", {1, 3}},
        {"engram_num_embeddings", {420, 508}},
        {"engram_max_ngram_size", 3},
        {"engram_vocab_size", 101},
        {"engram_n_heads", 2},
        {"engram_head_dim", 32},
        {"engram_pad_id", 2},
        {"engram_compressed_vocab_size", 250},
        {"num_nextn_predict_layers", 0},
        {"rope_parameters",
         {{"main", {{"rope_type", "default"}, {"rope_theta", 10000.0}, {"partial_rotary_factor", 0.25}}},
          {"compress",
           {{"rope_type", "yarn"},
            {"rope_theta", 160000.0},
            {"partial_rotary_factor", 0.25},
            {"factor", 4.0},
            {"original_max_position_embeddings", 256},
            {"beta_fast", 32.0},
            {"beta_slow", 1.0},
            {"attention_factor", 1.0}}}}},
    };
}

deepinfer::core::Result<ModelConfig> parse(const json& j) {
    return ModelConfig::from_json_string(j.dump(), "cfg.json");
}

// Parsing `j` fails with a message containing every string in `needles`.
void expect_error(const json& j, std::initializer_list<std::string> needles) {
    auto r = parse(j);
    ASSERT_FALSE(r.ok()) << j.dump();
    const std::string msg = r.status().message();
    EXPECT_NE(msg.find("cfg.json"), std::string::npos) << msg;
    for (const std::string& n : needles)
        EXPECT_NE(msg.find(n), std::string::npos) << "'" << n << "' not in: " << msg;
}

TEST(V41Config, ReleasedFlashConfigParses) {
    auto r = ModelConfig::from_json_file(kFlash);
    ASSERT_TRUE(r.ok()) << r.status().message();
    const ModelConfig& c = r.value();
    EXPECT_EQ(c.vocab_size, 129280);
    EXPECT_EQ(c.hidden_size, 5120);
    EXPECT_EQ(c.num_hidden_layers, 40);
    EXPECT_EQ(c.head_dim, 512);
    EXPECT_EQ(c.qk_rope_head_dim, 64);
    EXPECT_EQ(c.num_experts_per_tok, 6);
    EXPECT_EQ(c.n_routed_experts, 384);
    EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-20);
    ASSERT_EQ(c.compress_ratios.size(), 40u); // the 3 trailing DSpark zeros are dropped
    EXPECT_EQ(c.compress_ratios[1], 0);
    EXPECT_EQ(c.compress_ratios[2], 2);
    EXPECT_EQ(c.compress_ratios[19], 2);
    EXPECT_EQ(c.compress_ratios[20], 1);
    EXPECT_EQ(c.compress_ratios[39], 1);
    EXPECT_EQ(c.kv_source_layer_ids, (std::vector<int64_t>{2, 8, 14, 20}));
    EXPECT_EQ(c.index_source_layer_ids, (std::vector<int64_t>{2, 8, 14, 20, 24, 28, 32, 36}));
    EXPECT_EQ(c.candidate_source_layer_id, 20);
    EXPECT_EQ(c.candidate_topk_blocks, 2048);
    EXPECT_EQ(c.candidate_block_size, 8);
    EXPECT_EQ(c.index_topk, 512);
    EXPECT_TRUE(c.yarn.enabled);
    EXPECT_DOUBLE_EQ(c.yarn.factor, 16.0);
    EXPECT_EQ(c.yarn.original_max_position_embeddings, 65536);
    EXPECT_DOUBLE_EQ(c.compress_rope_theta, 160000.0);
    EXPECT_EQ(c.engram.layer_ids, (std::vector<int64_t>{1, 14}));
    EXPECT_EQ(c.engram.num_embeddings, (std::vector<int64_t>{384006168, 384016682}));
    EXPECT_EQ(c.engram.n_hash_cols(), 24);
    EXPECT_EQ(c.engram.pad_token_id, 2);
    EXPECT_EQ(c.engram.compressed_vocab_size, 99092);
    EXPECT_EQ(c.engram.layer_index(14), 1);
    EXPECT_EQ(c.engram.layer_index(2), -1);
    EXPECT_EQ(c.num_nextn_predict_layers, 3);
    EXPECT_EQ(c.image_token_id, 129264);
    EXPECT_TRUE(c.quant.fp8);
    EXPECT_EQ(c.quant.block_rows, 32);
    EXPECT_EQ(c.quant.block_cols, 32);
    EXPECT_TRUE(c.expert_fp4);
    EXPECT_TRUE(c.vision.present); // recorded, ignored
    EXPECT_EQ(c.vision.num_hidden_layers, 32);
    EXPECT_EQ(c.vision.patch_size, 14);
}

// The released config's vision_config is ignored with exactly one log line (Info), naming the file; parsing
// at Warn logs nothing; a config without one (or with `vision_config: null`, as tiny-v41-fp8's
// save_pretrained config has) logs nothing; loading a checkpoint whose config has one logs it once.
std::vector<std::string> stderr_lines(const std::function<void()>& fn) {
    ::testing::internal::CaptureStderr();
    fn();
    const std::string err = ::testing::internal::GetCapturedStderr();
    std::vector<std::string> lines;
    size_t pos = 0;
    while (pos < err.size()) {
        const size_t nl = err.find('\n', pos);
        lines.push_back(err.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos));
        pos = nl == std::string::npos ? err.size() : nl + 1;
    }
    return lines;
}

TEST(V41Config, VisionConfigIgnoredWithOneLogLine) {
    using deepinfer::core::LogLevel;
    const LogLevel saved = deepinfer::core::log_level();
    deepinfer::core::set_log_level(LogLevel::kInfo);
    auto lines = stderr_lines([] { ASSERT_TRUE(ModelConfig::from_json_file(kFlash).ok()); });
    ASSERT_EQ(lines.size(), 1u) << ::testing::PrintToString(lines);
    EXPECT_NE(lines[0].find("vision_config"), std::string::npos) << lines[0];
    EXPECT_NE(lines[0].find("ignored"), std::string::npos) << lines[0];
    EXPECT_NE(lines[0].find(kFlash), std::string::npos) << lines[0];
    EXPECT_NE(lines[0].find("32 ViT layers"), std::string::npos) << lines[0];

    // No vision_config, no line.
    json text_only = read_json(kFlash);
    text_only.erase("vision_config");
    lines =
        stderr_lines([&] { ASSERT_TRUE(ModelConfig::from_json_string(text_only.dump(), "t.json").ok()); });
    EXPECT_TRUE(lines.empty()) << ::testing::PrintToString(lines);

    auto vision_lines = [](const std::vector<std::string>& ls) {
        int n = 0;
        for (const auto& l : ls) n += l.find("vision_config") != std::string::npos;
        return n;
    };
    const std::string src = std::string(DEEPINFER_SOURCE_DIR) + "/models/";
    lines = stderr_lines([&] { ASSERT_TRUE(deepinfer::model::load_causal_lm(src + "tiny-v41-fp8").ok()); });
    EXPECT_EQ(vision_lines(lines), 0) << ::testing::PrintToString(lines); // "vision_config": null

    // tiny-v41 (the released layout) with the released vision_config added: one line over the whole load.
    namespace fs = std::filesystem;
    const fs::path dir = fs::temp_directory_path() / ("v41_vision_" + std::to_string(::getpid()));
    fs::create_directories(dir);
    for (const char* f : {"model.safetensors", "engram_hash.safetensors", "tokenizer.json"})
        fs::copy_file(src + "tiny-v41/" + f, dir / f, fs::copy_options::overwrite_existing);
    json cfg = read_json(src + "tiny-v41/config.json");
    cfg["vision_config"] = read_json(kFlash).at("vision_config");
    std::ofstream(dir / "config.json") << cfg.dump(2);
    lines = stderr_lines([&] { ASSERT_TRUE(deepinfer::model::load_causal_lm(dir.string()).ok()); });
    EXPECT_EQ(vision_lines(lines), 1) << ::testing::PrintToString(lines);
    fs::remove_all(dir);

    deepinfer::core::set_log_level(LogLevel::kWarn);
    lines = stderr_lines([] { ASSERT_TRUE(ModelConfig::from_json_file(kFlash).ok()); });
    EXPECT_TRUE(lines.empty()) << ::testing::PrintToString(lines);
    deepinfer::core::set_log_level(saved);
}

TEST(V41Config, ReleasedFlashLayerRoles) {
    auto r = ModelConfig::from_json_file(kFlash);
    ASSERT_TRUE(r.ok()) << r.status().message();
    const ModelConfig& c = r.value();
    EXPECT_EQ(c.kv_source_of(0), -1); // window-only layers have no compressed KV
    EXPECT_EQ(c.kv_source_of(2), 2);
    EXPECT_EQ(c.kv_source_of(7), 2);
    EXPECT_EQ(c.kv_source_of(13), 8);
    EXPECT_EQ(c.kv_source_of(39), 20);
    EXPECT_EQ(c.index_source_of(27), 24); // reuses layer 24's top-k
    EXPECT_TRUE(c.is_kv_source(14));
    EXPECT_FALSE(c.is_kv_source(24));
    EXPECT_TRUE(c.is_index_source(24)); // a re-index layer: own weights, layer 20's keys
    EXPECT_TRUE(c.uses_candidates(24));
    EXPECT_FALSE(c.uses_candidates(20)); // the candidate source itself
    EXPECT_FALSE(c.uses_candidates(14));
    EXPECT_FALSE(c.uses_candidates(25)); // not an index source
}

TEST(V41Config, TransformersNamesFlat) {
    auto r = parse(tiny_hf());
    ASSERT_TRUE(r.ok()) << r.status().message();
    const ModelConfig& c = r.value();
    EXPECT_EQ(c.qk_rope_head_dim, 16); // partial_rotary_factor 0.25 * head_dim 64
    EXPECT_TRUE(c.yarn.enabled);
    EXPECT_DOUBLE_EQ(c.yarn.factor, 4.0);
    EXPECT_EQ(c.yarn.original_max_position_embeddings, 256);
    EXPECT_DOUBLE_EQ(c.rope_theta, 10000.0);
    EXPECT_DOUBLE_EQ(c.compress_rope_theta, 160000.0);
    EXPECT_EQ(c.engram.pad_token_id, 2); // engram_pad_id
    EXPECT_EQ(c.engram.n_hash_cols(), 4);
    EXPECT_EQ(c.kv_source_of(2), 1);
    EXPECT_EQ(c.kv_source_of(4), 3);
    EXPECT_TRUE(c.uses_candidates(4));
    EXPECT_FALSE(c.vision.present);
    EXPECT_FALSE(c.quant.fp8);
}

TEST(V41Config, TransformersComposite) {
    // DeepseekV41Config.save_pretrained: text params under text_config, vision_config beside it.
    json j{{"model_type", "deepseek_v41"},
           {"architectures", {"DeepseekV41ForCausalLM"}},
           {"image_token_id", 250},
           {"text_config", tiny_hf()},
           {"vision_config", {{"model_type", "deepseek_v41_vision"}, {"num_hidden_layers", 2}}}};
    auto r = parse(j);
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(r.value().hidden_size, 64);
    EXPECT_EQ(r.value().image_token_id, 250);
    EXPECT_TRUE(r.value().vision.present);
    // An error inside text_config names the nested field.
    j["text_config"]["engram_head_dim"] = "wide";
    expect_error(j, {"text_config.engram_head_dim", "integer"});
}

TEST(V41Config, InferenceShortNames) {
    json j = tiny_hf();
    for (auto [from, to] : std::vector<std::pair<std::string, std::string>>{
             {"hidden_size", "dim"},
             {"num_hidden_layers", "n_layers"},
             {"num_attention_heads", "n_heads"},
             {"sliding_window", "window_size"},
             {"num_experts_per_tok", "n_activated_experts"},
             {"candidate_source_layer_id", "candidate_source_layer"}}) {
        j[to] = j[from];
        j.erase(from);
    }
    j.erase("rope_parameters");
    j["qk_rope_head_dim"] = 16;
    j["rope_factor"] = 4;
    j["original_seq_len"] = 256;
    auto r = parse(j);
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(r.value().num_hidden_layers, 5);
    EXPECT_EQ(r.value().sliding_window, 8);
    EXPECT_EQ(r.value().candidate_source_layer_id, 3);
    EXPECT_TRUE(r.value().yarn.enabled);
    EXPECT_DOUBLE_EQ(r.value().yarn.factor, 4.0);
}

TEST(V41Config, TransformersDefaultsWhenSchedulesAreAbsent) {
    json j = tiny_hf();
    j.erase("kv_source_layer_ids");
    j.erase("index_source_layer_ids");
    j.erase("candidate_source_layer_id");
    auto r = parse(j);
    ASSERT_TRUE(r.ok()) << r.status().message();
    // first layer of each same-ratio run; index sources = kv sources; candidate = last kv source
    EXPECT_EQ(r.value().kv_source_layer_ids, (std::vector<int64_t>{1, 3}));
    EXPECT_EQ(r.value().index_source_layer_ids, (std::vector<int64_t>{1, 3}));
    EXPECT_EQ(r.value().candidate_source_layer_id, 3);
    j["candidate_source_layer_id"] = -1; // negative disables the two-level top-k
    r = parse(j);
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(r.value().candidate_source_layer_id, -1);
    EXPECT_FALSE(r.value().uses_candidates(3));
}

TEST(V41Config, RecognizesTheFamily) {
    EXPECT_TRUE(is_deepseek_v41_config(read_json(kFlash).dump()));
    EXPECT_TRUE(is_deepseek_v41_config(tiny_hf().dump()));
    EXPECT_TRUE(is_deepseek_v41_config(R"({"architectures": ["DeepseekV41ForCausalLM"]})"));
    EXPECT_FALSE(is_deepseek_v41_config(R"({"model_type": "deepseek_v4"})"));
    EXPECT_FALSE(is_deepseek_v41_config(R"({"architectures": ["DeepseekV4ForCausalLM"]})"));
    EXPECT_FALSE(is_deepseek_v41_config("not json"));
    // The V4 tiny config is not V4.1, and the V4.1 parser says why.
    const json v4 = read_json(std::string(DEEPINFER_SOURCE_DIR) + "/models/tiny-v4/config.json");
    EXPECT_FALSE(is_deepseek_v41_config(v4.dump()));
    expect_error(v4, {"model_type", "deepseek_v4"});
}

struct BadCase {
    const char* name;
    std::function<void(json&)> edit;
    std::vector<std::string> needles;
};

TEST(V41Config, ValidationNamesTheField) {
    const std::vector<BadCase> cases = {
        {"missing hidden", [](json& j) { j.erase("hidden_size"); }, {"hidden_size", "missing"}},
        {"ratio 3",
         [](json& j) { j["compress_ratios"][2] = 3; },
         {"compress_ratios[2]", "0 (window only), 1 or 2"}},
        {"too few ratios",
         [](json& j) {
             j["compress_ratios"] = {0, 2, 2};
         },
         {"compress_ratios", "3 entries"}},
        {"too many ratios",
         [](json& j) { j["compress_ratios"].push_back(0); },
         {"compress_ratios", "6 entries"}},
        {"draft ratio",
         [](json& j) {
             j["num_nextn_predict_layers"] = 1;
             j["compress_ratios"].push_back(2);
         },
         {"compress_ratios[5]", "DSpark"}},
        {"kv source on window layer",
         [](json& j) {
             j["kv_source_layer_ids"] = {0, 1, 3};
         },
         {"kv_source_layer_ids", "layer 0"}},
        {"kv source out of range",
         [](json& j) {
             j["kv_source_layer_ids"] = {1, 7};
         },
         {"kv_source_layer_ids", "outside [0, 5)"}},
        {"unsorted sources",
         [](json& j) {
             j["kv_source_layer_ids"] = {3, 1};
         },
         {"kv_source_layer_ids", "strictly increasing"}},
        {"no source before a layer",
         [](json& j) {
             j["kv_source_layer_ids"] = {3};
             j["index_source_layer_ids"] = {3, 4};
         },
         {"kv_source_layer_ids", "no source at or before layer 1"}},
        {"ratio differs from source",
         [](json& j) {
             j["compress_ratios"] = {0, 2, 1, 1, 1};
         },
         {"compress_ratios[2]", "kv source, layer 1"}},
        {"candidate not an index source",
         [](json& j) { j["candidate_source_layer_id"] = 2; },
         {"candidate_source_layer_id", "index_source_layer_ids"}},
        {"index source on window layer",
         [](json& j) {
             j["index_source_layer_ids"] = {0, 1, 3};
         },
         {"index_source_layer_ids", "layer 0"}},
        {"candidate blocks", [](json& j) { j["candidate_block_size"] = 0; }, {"candidate_block_size", "> 0"}},
        {"engram rows count",
         [](json& j) { j["engram_num_embeddings"] = {420}; },
         {"engram_num_embeddings", "1 entries"}},
        {"engram table too small",
         [](json& j) {
             j["engram_num_embeddings"] = {420, 100};
         },
         {"engram_num_embeddings[1]", "smaller than"}},
        {"engram layer range",
         [](json& j) {
             j["engram_layer_ids"] = {1, 9};
         },
         {"engram_layer_ids", "outside"}},
        {"engram ngram", [](json& j) { j["engram_max_ngram_size"] = 1; }, {"engram_max_ngram_size", ">= 2"}},
        {"engram cvs",
         [](json& j) { j["engram_compressed_vocab_size"] = 301; },
         {"engram_compressed_vocab_size", "vocab_size = 300"}},
        {"engram pad", [](json& j) { j["engram_pad_id"] = 300; }, {"engram_pad_token_id", "token id"}},
        {"engram list type",
         [](json& j) {
             j["engram_layer_ids"] = {1, "x"};
         },
         {"engram_layer_ids[1]", "integer"}},
        {"kv heads", [](json& j) { j["num_key_value_heads"] = 2; }, {"num_key_value_heads", "must be 1"}},
        {"scoring", [](json& j) { j["scoring_func"] = "softmax"; }, {"scoring_func", "sqrtsoftplus"}},
        {"gate temp", [](json& j) { j["gate_temp"] = 0.0; }, {"gate_temp", "> 0"}},
        {"rope dim",
         [](json& j) { j["rope_parameters"]["compress"]["partial_rotary_factor"] = 0.3; },
         {"partial_rotary_factor", "not an integer"}},
        {"yarn factor",
         [](json& j) { j["rope_parameters"]["compress"].erase("factor"); },
         {"rope_parameters.compress.factor", "missing"}},
        {"index heads", [](json& j) { j.erase("index_n_heads"); }, {"index_n_heads", "missing"}},
        {"quant method",
         [](json& j) {
             j["quantization_config"] = {{"quant_method", "gptq"}};
         },
         {"quantization_config.quant_method", "gptq"}},
        {"block size",
         [](json& j) {
             j["quantization_config"] = {{"weight_block_size", {32}}};
         },
         {"quantization_config.weight_block_size", "two integers"}},
        {"model type", [](json& j) { j["model_type"] = "llama"; }, {"model_type", "llama"}},
        {"not an object", [](json& j) { j = json::array(); }, {"not a JSON object"}},
    };
    for (const BadCase& bc : cases) {
        SCOPED_TRACE(bc.name);
        json j = tiny_hf();
        bc.edit(j);
        auto r = parse(j);
        ASSERT_FALSE(r.ok());
        const std::string msg = r.status().message();
        for (const std::string& n : bc.needles)
            EXPECT_NE(msg.find(n), std::string::npos) << "'" << n << "' not in: " << msg;
    }
    auto missing = ModelConfig::from_json_file("/nonexistent/config.json");
    ASSERT_FALSE(missing.ok());
    EXPECT_NE(missing.status().message().find("/nonexistent/config.json"), std::string::npos);
    auto garbage = ModelConfig::from_json_string("{", "cfg.json");
    ASSERT_FALSE(garbage.ok());
    EXPECT_NE(garbage.status().message().find("not valid JSON"), std::string::npos);
}

} // namespace
