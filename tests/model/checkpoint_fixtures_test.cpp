// The oracle's tiny checkpoints (models/tiny-v4: BF16, official config names, one file;
// models/tiny-v4-fp8: FP8/FP4, sharded, transformers config names) against the config, the official
// tensor list and the oracle's own F32 dequantization (tests/fixtures/tiny-v4-fp8/dequantized.safetensors,
// written by the Python tooling, not by this code). Skipped where the fixtures are not checked out.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "model/deepseek_v4/config.h"
#include "weights/safetensors.h"

namespace deepinfer::model::deepseek_v4 {
namespace {

const std::string kRoot = DEEPINFER_SOURCE_DIR;

void expect_clean(const std::string& dir) {
    if (!std::filesystem::exists(dir + "/config.json")) GTEST_SKIP() << dir << " not present";
    auto config = ModelConfig::from_json_file(dir + "/config.json");
    ASSERT_TRUE(config.ok()) << config.status().to_string();
    auto ck = weights::Checkpoint::open(dir);
    ASSERT_TRUE(ck.ok()) << ck.status().to_string();
    CheckpointCheck check = check_checkpoint(**ck, *config);
    EXPECT_GT(check.required, 0u);
    for (const auto& p : check.problems) ADD_FAILURE() << p;
}

TEST(CheckpointFixtures, TinyV4Bf16) {
    expect_clean(kRoot + "/models/tiny-v4");
}

TEST(CheckpointFixtures, TinyV4Fp8) {
    expect_clean(kRoot + "/models/tiny-v4-fp8");
}

// The two configs name the same model in the two namings (official vs transformers).
TEST(CheckpointFixtures, BothNamingsGiveTheSameConfig) {
    const std::string a = kRoot + "/models/tiny-v4/config.json",
                      b = kRoot + "/models/tiny-v4-fp8/config.json";
    if (!std::filesystem::exists(a) || !std::filesystem::exists(b)) GTEST_SKIP() << "fixtures not present";
    auto off = ModelConfig::from_json_file(a);
    auto hf = ModelConfig::from_json_file(b);
    ASSERT_TRUE(off.ok() && hf.ok());
    EXPECT_EQ(off->compress_ratios, (std::vector<int64_t>{0, 4, 8, 4}));
    EXPECT_EQ(off->layer_types, hf->layer_types);
    EXPECT_EQ(off->compress_ratios, hf->compress_ratios);
    EXPECT_EQ(off->mlp_layer_types, hf->mlp_layer_types);
    EXPECT_EQ(off->qk_rope_head_dim, 16);
    EXPECT_EQ(hf->qk_rope_head_dim, 16);
    EXPECT_TRUE(off->yarn.enabled && hf->yarn.enabled);
    EXPECT_EQ(off->yarn.factor, hf->yarn.factor);
    EXPECT_EQ(off->yarn.original_max_position_embeddings, hf->yarn.original_max_position_embeddings);
    EXPECT_EQ(off->rope_theta, hf->rope_theta);
    EXPECT_EQ(off->compress_rope_theta, hf->compress_rope_theta);
    EXPECT_EQ(off->index_n_heads, hf->index_n_heads);
    EXPECT_FALSE(off->quant.fp8);
    EXPECT_TRUE(hf->quant.fp8);
    EXPECT_EQ(hf->quant.block_rows, 32);
    EXPECT_EQ(hf->quant.block_cols, 32);
}

TEST(CheckpointFixtures, Fp8DequantizationMatchesOracleExactly) {
    const std::string dir = kRoot + "/models/tiny-v4-fp8";
    const std::string golden_path = kRoot + "/tests/fixtures/tiny-v4-fp8/dequantized.safetensors";
    if (!std::filesystem::exists(golden_path)) GTEST_SKIP() << golden_path << " not present";
    auto config = ModelConfig::from_json_file(dir + "/config.json");
    ASSERT_TRUE(config.ok()) << config.status().to_string();
    auto ck = weights::Checkpoint::open(dir);
    ASSERT_TRUE(ck.ok()) << ck.status().to_string();
    auto golden = weights::SafetensorsFile::open(golden_path, "dequantized.safetensors");
    ASSERT_TRUE(golden.ok()) << golden.status().to_string();

    size_t quantized = 0, fp8 = 0, fp4 = 0;
    for (const auto& t : (*ck)->tensors())
        if (t.dtype == core::DType::kF8E4M3 || t.dtype == core::DType::kI8) ++quantized;
    ASSERT_GT(quantized, 0u) << "tiny-v4-fp8 holds no quantized tensor";
    size_t compared = 0;
    for (const weights::HeaderEntry& e : (*golden)->header().tensors) {
        SCOPED_TRACE(e.name);
        ASSERT_EQ(e.dtype, core::DType::kF32);
        ASSERT_EQ(e.shape.ndim(), 2);
        const std::string suffix = ".weight";
        ASSERT_GT(e.name.size(), suffix.size());
        ASSERT_EQ(e.name.substr(e.name.size() - suffix.size()), suffix);
        const std::string prefix = e.name.substr(0, e.name.size() - suffix.size());
        auto w = (*ck)->weight(prefix, e.shape[0], e.shape[1], config->quant);
        ASSERT_TRUE(w.ok()) << w.status().to_string();
        if (w->format == core::WeightFormat::kFp8Block) ++fp8;
        if (w->format == core::WeightFormat::kFp4Group) ++fp4;
        const std::vector<float> got = weights::dequantize(*w);
        const float* want = static_cast<const float*>((*golden)->data(e));
        size_t mismatches = 0;
        for (size_t i = 0; i < got.size(); ++i) {
            uint32_t a, b;
            std::memcpy(&a, &got[i], 4);
            std::memcpy(&b, &want[i], 4);
            if (a != b && mismatches++ < 5)
                ADD_FAILURE() << "element " << i << " (row " << i / e.shape[1] << ", col " << i % e.shape[1]
                              << "): got " << got[i] << ", oracle " << want[i];
        }
        EXPECT_EQ(mismatches, 0u);
        ++compared;
    }
    EXPECT_EQ(compared, quantized) << "every quantized tensor must have an oracle dequantization";
    EXPECT_GT(fp8, 0u);
    EXPECT_GT(fp4, 0u);
}

} // namespace
} // namespace deepinfer::model::deepseek_v4
