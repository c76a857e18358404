#include <gtest/gtest.h>

#include <map>

#include "../weights/test_files.h"
#include "model/deepseek_v4/config.h"

namespace deepinfer::model::deepseek_v4 {
namespace {

using core::DType;
namespace wt = weights::testing;

// tiny-v4 (spec §6.1): layers sliding, CSA(4), HCA(8), CSA(4); layer 0 hash-routed; fp8 blocks 16x32.
ModelConfig tiny() {
    auto c = ModelConfig::from_json_string(R"({"vocab_size": 512, "hidden_size": 64, "num_hidden_layers": 4,
      "num_attention_heads": 4, "head_dim": 32, "qk_rope_head_dim": 16, "q_lora_rank": 32, "o_groups": 2,
      "o_lora_rank": 16, "n_routed_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 32,
      "compress_ratios": [0, 4, 8, 4], "num_hash_layers": 1, "sliding_window": 8, "index_n_heads": 2,
      "index_head_dim": 32, "index_topk": 3,
      "quantization_config": {"quant_method": "fp8", "weight_block_size": [16, 32]}})",
                                           "tiny");
    EXPECT_TRUE(c.ok()) << c.status().to_string();
    return *c;
}

std::map<std::string, TensorSpec> by_name(const std::vector<TensorSpec>& specs) {
    std::map<std::string, TensorSpec> m;
    for (const auto& s : specs) EXPECT_TRUE(m.emplace(s.name, s).second) << "duplicate spec " << s.name;
    return m;
}

TEST(TensorSpecs, TinyV4List) {
    const auto specs = required_tensors(tiny());
    // top 6; per layer 16 attention/norm/hc + 2 gate + 24 experts + 3 shared = 45; compressor 4; indexer 6.
    EXPECT_EQ(specs.size(), 6u + 45 + (45 + 4 + 6) + (45 + 4) + (45 + 4 + 6));
    const auto m = by_name(specs);
    auto shape = [&](const std::string& n) { return m.count(n) ? m.at(n).shape : core::Shape{-1}; };
    EXPECT_EQ(shape("embed.weight"), (core::Shape{512, 64}));
    EXPECT_EQ(shape("hc_head_fn"), (core::Shape{4, 256}));
    EXPECT_EQ(shape("layers.0.hc_attn_fn"), (core::Shape{24, 256}));
    EXPECT_EQ(shape("layers.3.hc_ffn_scale"), (core::Shape{3}));
    EXPECT_EQ(shape("layers.0.attn.wq_b.weight"), (core::Shape{128, 32}));
    EXPECT_EQ(shape("layers.0.attn.wo_a.weight"), (core::Shape{32, 64}));
    EXPECT_EQ(shape("layers.0.attn.wo_b.weight"), (core::Shape{64, 32}));
    EXPECT_EQ(shape("layers.1.attn.compressor.wkv.weight"), (core::Shape{64, 64}));
    EXPECT_EQ(shape("layers.1.attn.compressor.ape"), (core::Shape{4, 64}));
    EXPECT_EQ(shape("layers.2.attn.compressor.ape"), (core::Shape{8, 32}));
    EXPECT_EQ(shape("layers.2.attn.compressor.wgate.weight"), (core::Shape{32, 64}));
    EXPECT_EQ(shape("layers.3.attn.indexer.wq_b.weight"), (core::Shape{64, 32}));
    EXPECT_EQ(shape("layers.3.attn.indexer.weights_proj.weight"), (core::Shape{2, 64}));
    EXPECT_EQ(shape("layers.3.attn.indexer.compressor.ape"), (core::Shape{4, 64}));
    EXPECT_EQ(shape("layers.3.attn.indexer.compressor.norm.weight"), (core::Shape{32}));
    EXPECT_EQ(shape("layers.0.ffn.gate.tid2eid"), (core::Shape{512, 2}));
    EXPECT_EQ(shape("layers.1.ffn.gate.bias"), (core::Shape{8}));
    EXPECT_EQ(shape("layers.2.ffn.experts.7.w2.weight"), (core::Shape{64, 32}));
    EXPECT_EQ(shape("layers.2.ffn.shared_experts.w1.weight"), (core::Shape{32, 64}));
    EXPECT_EQ(m.count("layers.0.attn.compressor.wkv.weight"), 0u); // sliding: no compressor
    EXPECT_EQ(m.count("layers.2.attn.indexer.wq_b.weight"), 0u);   // HCA: no indexer
    EXPECT_EQ(m.count("layers.0.ffn.gate.bias"), 0u);              // hash layer: no bias
    EXPECT_EQ(m.count("layers.1.ffn.gate.tid2eid"), 0u);
    EXPECT_EQ(m.at("layers.0.ffn.gate.tid2eid").dtypes, std::vector<DType>{DType::kI64});
    const TensorSpec& w2 = m.at("layers.1.ffn.experts.0.w2.weight");
    EXPECT_TRUE(w2.linear);
    EXPECT_EQ(w2.stored_shape(DType::kI8), (core::Shape{64, 16}));
    EXPECT_EQ(w2.stored_shape(DType::kF8E4M3), (core::Shape{64, 32}));
    EXPECT_FALSE(m.at("layers.1.attn.attn_sink").linear);
    // Non-linear tensors are BF16 or F32 only; attention projections are never fp4.
    EXPECT_EQ(m.at("layers.1.attn.kv_norm.weight").dtypes, (std::vector<DType>{DType::kF32, DType::kBF16}));
    const auto& wq = m.at("layers.1.attn.wq_a.weight").dtypes;
    EXPECT_EQ(std::count(wq.begin(), wq.end(), DType::kI8), 0);
    EXPECT_EQ(std::count(wq.begin(), wq.end(), DType::kF8E4M3), 1);
}

// Writes every required tensor as zeros: fp4 routed experts, fp8 attention projections, bf16 the rest,
// plus an mtp tensor; returns the file image.
std::string full_checkpoint(const ModelConfig& c, const std::string& skip, const std::string& bad_shape) {
    std::vector<wt::StTensor> ts;
    for (const TensorSpec& s : required_tensors(c)) {
        if (s.name == skip) continue;
        DType d = s.dtypes.size() == 1 ? s.dtypes[0] : DType::kBF16;
        const bool expert = s.name.find(".experts.") != std::string::npos;
        if (s.linear && expert)
            d = DType::kI8;
        else if (s.linear && s.name.find(".attn.wq") != std::string::npos)
            d = DType::kF8E4M3;
        core::Shape shape = s.name == bad_shape ? core::Shape{1} : s.stored_shape(d);
        ts.push_back({s.name, std::string(core::dtype_name(d)), shape.to_vector(),
                      std::string(shape.numel() * core::dtype_size(d), '\0')});
        if (d == DType::kI8 || d == DType::kF8E4M3) {
            const std::string prefix = s.name.substr(0, s.name.size() - 7);
            const int64_t r = s.shape[0], cols = s.shape[1];
            core::Shape sc = d == DType::kI8
                                 ? core::Shape{r, (cols + 31) / 32}
                                 : core::Shape{(r + c.quant.block_rows - 1) / c.quant.block_rows,
                                               (cols + c.quant.block_cols - 1) / c.quant.block_cols};
            if (prefix + ".scale" != skip)
                ts.push_back({prefix + ".scale", "F8_E8M0", sc.to_vector(), std::string(sc.numel(), '\x7f')});
        }
    }
    ts.push_back({"mtp.0.enorm.weight", "BF16", {64}, std::string(128, '\0')});
    return wt::make_file(ts);
}

CheckpointCheck check(const std::string& image) {
    wt::TempDir dir;
    wt::write_text(dir.path() / "model.safetensors", image);
    auto ck = weights::Checkpoint::open(dir.str());
    EXPECT_TRUE(ck.ok()) << ck.status().to_string();
    return ck.ok() ? check_checkpoint(**ck, tiny()) : CheckpointCheck{};
}

bool mentions(const std::vector<std::string>& problems, const std::string& what) {
    for (const auto& p : problems)
        if (p.find(what) != std::string::npos) return true;
    return false;
}

TEST(TensorSpecs, CheckFindsProblems) {
    const ModelConfig c = tiny();
    CheckpointCheck good = check(full_checkpoint(c, "", ""));
    EXPECT_TRUE(good.ok()) << (good.problems.empty() ? "" : good.problems[0]);
    EXPECT_EQ(good.required, required_tensors(c).size());
    EXPECT_EQ(good.unexpected, std::vector<std::string>{"mtp.0.enorm.weight"});

    CheckpointCheck missing = check(full_checkpoint(c, "layers.2.attn.compressor.ape", ""));
    ASSERT_EQ(missing.problems.size(), 1u);
    EXPECT_TRUE(mentions(missing.problems, "'layers.2.attn.compressor.ape'"));

    CheckpointCheck no_scale = check(full_checkpoint(c, "layers.1.attn.wq_b.scale", ""));
    ASSERT_EQ(no_scale.problems.size(), 1u);
    EXPECT_TRUE(mentions(no_scale.problems, "'layers.1.attn.wq_b.scale'"));

    CheckpointCheck shape = check(full_checkpoint(c, "", "layers.3.ffn.experts.5.w1.weight"));
    ASSERT_EQ(shape.problems.size(), 1u);
    EXPECT_TRUE(mentions(shape.problems, "model.safetensors: tensor 'layers.3.ffn.experts.5.w1.weight'"));

    CheckpointCheck dense_shape = check(full_checkpoint(c, "", "norm.weight"));
    ASSERT_EQ(dense_shape.problems.size(), 1u);
    EXPECT_TRUE(mentions(dense_shape.problems, "'norm.weight'"));
}

TEST(TensorSpecs, CheckRejectsWrongDtype) {
    const ModelConfig c = tiny();
    std::vector<wt::StTensor> ts = {
        {"layers.0.ffn.gate.tid2eid", "I32", {512, 2}, std::string(512 * 2 * 4, '\0')},
        {"layers.0.attn.wq_a.weight", "I8", {32, 32}, std::string(32 * 32, '\0')}};
    CheckpointCheck r = check(wt::make_file(ts));
    EXPECT_TRUE(mentions(r.problems, "'layers.0.ffn.gate.tid2eid': dtype I32"));
    EXPECT_TRUE(mentions(r.problems, "'layers.0.attn.wq_a.weight': dtype I8"));
    EXPECT_TRUE(mentions(r.problems, "missing tensor 'embed.weight'"));
}

} // namespace
} // namespace deepinfer::model::deepseek_v4
