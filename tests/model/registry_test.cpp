// The model registry: the family comes from config.json (model_type / architectures, official and
// transformers spellings); an unknown family is an error naming the file and the field.

#include "model/registry.h"

#include <gtest/gtest.h>

#include <string>

#include "model/config_fields.h"

namespace deepinfer::model {
namespace {

const std::string kRoot = DEEPINFER_SOURCE_DIR;

ModelFamily family_of(const std::string& json) {
    auto f = detect_family(json, "x/config.json");
    EXPECT_TRUE(f.ok()) << f.status().to_string();
    return f.ok() ? *f : ModelFamily::kDeepseekV4;
}

TEST(ModelRegistry, DetectsFamiliesFromEveryShippedConfig) {
    for (const char* dir : {"models/tiny-v4", "models/tiny-v4-fp8"}) {
        auto text = read_config_file(kRoot + "/" + dir + "/config.json");
        ASSERT_TRUE(text.ok());
        EXPECT_EQ(family_of(*text), ModelFamily::kDeepseekV4) << dir;
    }
    for (const char* dir : {"models/tiny-v41", "models/tiny-v41-fp8", "tests/fixtures/deepseek-v41-flash"}) {
        auto text = read_config_file(kRoot + "/" + dir + "/config.json");
        ASSERT_TRUE(text.ok());
        EXPECT_EQ(family_of(*text), ModelFamily::kDeepseekV41) << dir;
    }
}

TEST(ModelRegistry, DetectsEachSpelling) {
    EXPECT_EQ(family_of(R"({"model_type": "deepseek_v4"})"), ModelFamily::kDeepseekV4);
    EXPECT_EQ(family_of(R"({"architectures": ["DeepseekV4ForCausalLM"]})"), ModelFamily::kDeepseekV4);
    EXPECT_EQ(family_of(R"({"model_type": "deepseek_v41"})"), ModelFamily::kDeepseekV41);
    EXPECT_EQ(family_of(R"({"text_config": {"model_type": "deepseek_v41_text"}})"),
              ModelFamily::kDeepseekV41);
    EXPECT_EQ(family_of(R"({"architectures": ["DeepseekV41ForCausalLM"]})"), ModelFamily::kDeepseekV41);
}

TEST(ModelRegistry, UnknownFamilyNamesFileAndField) {
    auto a = detect_family(R"({"model_type": "llama"})", "m/config.json");
    ASSERT_FALSE(a.ok());
    EXPECT_NE(a.status().message().find("m/config.json: field 'model_type' is \"llama\""), std::string::npos)
        << a.status().message();
    auto b = detect_family(R"({"architectures": ["LlamaForCausalLM"]})", "m/config.json");
    ASSERT_FALSE(b.ok());
    EXPECT_NE(b.status().message().find("field 'architectures'"), std::string::npos) << b.status().message();
    auto c = detect_family(R"({"hidden_size": 4})", "m/config.json");
    ASSERT_FALSE(c.ok());
    EXPECT_NE(c.status().message().find("field 'model_type' is missing"), std::string::npos);
    EXPECT_FALSE(detect_family("[1, 2]", "m/config.json").ok());
}

TEST(ModelRegistry, LoadsEachFamilyAsCausalLm) {
    auto m = load_causal_lm(kRoot + "/models/tiny-v4");
    ASSERT_TRUE(m.ok()) << m.status().to_string();
    const ModelInfo info = (*m)->info();
    EXPECT_EQ(info.family, "deepseek_v4");
    EXPECT_EQ(info.num_layers, 4);
    EXPECT_EQ((*m)->vocab_size(), 512);
    EXPECT_GT((*m)->decode_cost().dense_bytes, 0);
    EXPECT_GT((*m)->decode_cost().expert_macs, 0);
    auto v41 = load_causal_lm(kRoot + "/models/tiny-v41-fp8");
    ASSERT_TRUE(v41.ok()) << v41.status().to_string();
    EXPECT_EQ((*v41)->info().family, "deepseek_v41");
    EXPECT_EQ((*v41)->info().kv_block_unit, 2);
    EXPECT_EQ((*v41)->vocab_size(), 256);
    EXPECT_GT((*v41)->decode_cost().expert_bytes, 0);
    auto missing = load_causal_lm(kRoot + "/models/no-such-model");
    ASSERT_FALSE(missing.ok());
    EXPECT_NE(missing.status().message().find("no-such-model/config.json"), std::string::npos);
}

} // namespace
} // namespace deepinfer::model
