// Synthetic checkpoints (model/deepseek_v4/synthetic.h): they open, pass the required-tensor check, carry a
// config that parses back to the same ModelConfig, are byte-identical per seed, store what the generator
// drew within each format's rounding, and run. Small configs only (tiny-text's layers, vocab 512).

#include "model/deepseek_v4/synthetic.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <unistd.h>

#include "core/dtype.h"
#include "model/deepseek_v4/model.h"
#include "model/sequence_runner.h"
#include "weights/checkpoint.h"
#include "weights/quantize.h"

namespace deepinfer::model::deepseek_v4 {
namespace {

namespace fs = std::filesystem;

ModelConfig small_config(bool fp8) {
    auto c = synthetic_preset("tiny-text");
    EXPECT_TRUE(c.ok());
    c->vocab_size = 512;
    c->quant.fp8 = fp8;
    c->quant.block_rows = 32; // several scale blocks per matrix
    c->quant.block_cols = 16;
    return *c;
}

class TempDir {
public:
    TempDir() {
        path_ = (fs::temp_directory_path() /
                 ("di_synth_" + std::to_string(::getpid()) + "_" + std::to_string(counter_++)))
                    .string();
    }
    ~TempDir() {
        std::error_code ec;
        fs::remove_all(path_, ec);
    }
    const std::string& path() const { return path_; }

private:
    static inline int counter_ = 0;
    std::string path_;
};

std::string read_file(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

void expect_same_config(const ModelConfig& a, const ModelConfig& b) {
    EXPECT_EQ(a.vocab_size, b.vocab_size);
    EXPECT_EQ(a.hidden_size, b.hidden_size);
    EXPECT_EQ(a.num_hidden_layers, b.num_hidden_layers);
    EXPECT_EQ(a.num_attention_heads, b.num_attention_heads);
    EXPECT_EQ(a.head_dim, b.head_dim);
    EXPECT_EQ(a.qk_rope_head_dim, b.qk_rope_head_dim);
    EXPECT_EQ(a.q_lora_rank, b.q_lora_rank);
    EXPECT_EQ(a.o_groups, b.o_groups);
    EXPECT_EQ(a.o_lora_rank, b.o_lora_rank);
    EXPECT_EQ(a.moe_intermediate_size, b.moe_intermediate_size);
    EXPECT_EQ(a.n_routed_experts, b.n_routed_experts);
    EXPECT_EQ(a.num_experts_per_tok, b.num_experts_per_tok);
    EXPECT_EQ(a.n_shared_experts, b.n_shared_experts);
    EXPECT_EQ(a.routed_scaling_factor, b.routed_scaling_factor);
    EXPECT_EQ(a.swiglu_limit, b.swiglu_limit);
    EXPECT_EQ(a.sliding_window, b.sliding_window);
    EXPECT_EQ(a.layer_types, b.layer_types);
    EXPECT_EQ(a.compress_ratios, b.compress_ratios);
    EXPECT_EQ(a.mlp_layer_types, b.mlp_layer_types);
    EXPECT_EQ(a.rope_theta, b.rope_theta);
    EXPECT_EQ(a.compress_rope_theta, b.compress_rope_theta);
    EXPECT_EQ(a.yarn.enabled, b.yarn.enabled);
    EXPECT_EQ(a.yarn.factor, b.yarn.factor);
    EXPECT_EQ(a.yarn.original_max_position_embeddings, b.yarn.original_max_position_embeddings);
    EXPECT_EQ(a.max_position_embeddings, b.max_position_embeddings);
    EXPECT_EQ(a.index_n_heads, b.index_n_heads);
    EXPECT_EQ(a.index_head_dim, b.index_head_dim);
    EXPECT_EQ(a.index_topk, b.index_topk);
    EXPECT_EQ(a.hc_mult, b.hc_mult);
    EXPECT_EQ(a.hc_sinkhorn_iters, b.hc_sinkhorn_iters);
    EXPECT_EQ(a.hc_eps, b.hc_eps);
    EXPECT_EQ(a.rms_norm_eps, b.rms_norm_eps);
    EXPECT_EQ(a.bos_token_id, b.bos_token_id);
    EXPECT_EQ(a.eos_token_id, b.eos_token_id);
    EXPECT_EQ(a.tie_word_embeddings, b.tie_word_embeddings);
    EXPECT_EQ(a.quant.fp8, b.quant.fp8);
    if (a.quant.fp8) {
        EXPECT_EQ(a.quant.block_rows, b.quant.block_rows);
        EXPECT_EQ(a.quant.block_cols, b.quant.block_cols);
        EXPECT_EQ(a.quant.fp4_group, b.quant.fp4_group);
    }
}

const TensorSpec& spec_named(const std::vector<TensorSpec>& specs, const std::string& name) {
    for (const TensorSpec& s : specs)
        if (s.name == name) return s;
    ADD_FAILURE() << "no spec " << name;
    return specs.front();
}

// Writes, opens, checks against required_tensors and the config round trip; returns the checkpoint.
std::unique_ptr<weights::Checkpoint> write_and_check(const ModelConfig& c, const std::string& dir,
                                                     uint64_t seed, int64_t shard_bytes = 4LL << 30) {
    SyntheticOptions o;
    o.seed = seed;
    o.shard_bytes = shard_bytes;
    EXPECT_TRUE(write_synthetic_checkpoint(c, o, dir).ok());
    auto parsed = ModelConfig::from_json_file(dir + "/config.json");
    EXPECT_TRUE(parsed.ok()) << parsed.status().to_string();
    if (parsed.ok()) expect_same_config(c, *parsed);
    auto ck = weights::Checkpoint::open(dir);
    EXPECT_TRUE(ck.ok()) << ck.status().to_string();
    if (!ck.ok()) return nullptr;
    const CheckpointCheck check = check_checkpoint(**ck, c);
    EXPECT_TRUE(check.ok()) << (check.problems.empty() ? "" : check.problems.front());
    EXPECT_TRUE(check.unexpected.empty()) << check.unexpected.front();
    EXPECT_EQ(check.required, required_tensors(c).size());
    return std::move(*ck);
}

TEST(Synthetic, PresetsValidateAndTheirConfigsRoundTrip) {
    for (const std::string& name : synthetic_preset_names()) {
        auto c = synthetic_preset(name);
        ASSERT_TRUE(c.ok()) << name;
        for (bool fp8 : {false, true}) {
            c->quant.fp8 = fp8;
            auto text = official_config_json(*c);
            ASSERT_TRUE(text.ok()) << name;
            auto parsed = ModelConfig::from_json_string(*text, name);
            ASSERT_TRUE(parsed.ok()) << parsed.status().to_string();
            expect_same_config(*c, *parsed);
        }
    }
    EXPECT_EQ(synthetic_preset("tiny-text")->vocab_size, 129280);
    EXPECT_EQ(synthetic_preset("flash-mini")->head_dim, 512);
    auto bad = synthetic_preset("tiny");
    ASSERT_FALSE(bad.ok());
    EXPECT_NE(bad.status().message().find("tiny-text"), std::string::npos);
}

// The matrices' draws: mean 0, standard deviation 1/sqrt(in), a bell bounded at 2*sqrt(3) sigma (Irwin-Hall
// of four uniforms), reproducible from (seed, name) and different for another name or seed.
TEST(Synthetic, MatrixDrawsHaveTheScaleOfTheirInputWidth) {
    TensorSpec spec;
    spec.name = "layers.0.attn.wq_a.weight";
    spec.shape = core::Shape({512, 1024});
    const std::vector<float> v = synthetic_values(spec, 11);
    ASSERT_EQ(v.size(), 512u * 1024u);
    double sum = 0, sq = 0, peak = 0;
    for (float x : v) {
        sum += x;
        sq += static_cast<double>(x) * x;
        peak = std::max(peak, std::fabs(static_cast<double>(x)));
    }
    const double n = static_cast<double>(v.size()), sigma = 1.0 / std::sqrt(1024.0);
    const double mean = sum / n, sd = std::sqrt(sq / n - mean * mean);
    EXPECT_LT(std::fabs(mean), 0.01 * sigma);
    EXPECT_NEAR(sd, sigma, 0.01 * sigma);
    EXPECT_LE(peak, 2.0 * std::sqrt(3.0) * sigma * 1.0001);
    EXPECT_GT(peak, 3.0 * sigma); // the tails are there (P(|z| > 3) ~ 4e-4: ~200 of these draws)
    EXPECT_EQ(synthetic_values(spec, 11), v);
    EXPECT_NE(synthetic_values(spec, 12), v);
    spec.name = "layers.0.attn.wq_b.weight";
    EXPECT_NE(synthetic_values(spec, 11), v);
}

TEST(Synthetic, Bf16CheckpointStoresBf16RoundingOfTheDraws) {
    TempDir dir;
    const ModelConfig c = small_config(false);
    auto ck = write_and_check(c, dir.path(), 7);
    ASSERT_NE(ck, nullptr);
    EXPECT_TRUE(fs::exists(dir.path() + "/model.safetensors"));
    EXPECT_FALSE(fs::exists(dir.path() + "/model.safetensors.index.json"));
    const auto specs = required_tensors(c);
    for (const char* name :
         {"layers.1.attn.wq_b.weight", "layers.2.ffn.experts.3.w2.weight", "embed.weight"}) {
        const TensorSpec& s = spec_named(specs, name);
        const std::string prefix = std::string(name).substr(0, std::string(name).size() - 7);
        auto w = ck->weight(prefix, s.shape[0], s.shape[1], c.quant);
        ASSERT_TRUE(w.ok()) << name;
        EXPECT_EQ(w->format, core::WeightFormat::kBF16);
        const std::vector<float> got = weights::dequantize(*w), want = synthetic_values(s, 7);
        ASSERT_EQ(got.size(), want.size());
        for (size_t i = 0; i < got.size(); ++i)
            ASSERT_LE(std::fabs(got[i] - want[i]), std::ldexp(std::fabs(want[i]), -8)) << name << " " << i;
    }
    // F32 classes are stored exactly; the mHC scales are 0.5 + U[0, 1).
    const weights::TensorInfo* sc = ck->find("layers.0.hc_attn_scale");
    ASSERT_NE(sc, nullptr);
    EXPECT_EQ(sc->dtype, core::DType::kF32);
    const std::vector<float> want = synthetic_values(spec_named(specs, "layers.0.hc_attn_scale"), 7);
    for (int i = 0; i < 3; ++i) {
        EXPECT_EQ(static_cast<const float*>(sc->data)[i], want[i]);
        EXPECT_GE(want[i], 0.5f);
        EXPECT_LT(want[i], 1.5f);
    }
    // tid2eid: K distinct experts in range per token, as drawn.
    const weights::TensorInfo* t = ck->find("layers.0.ffn.gate.tid2eid");
    ASSERT_NE(t, nullptr);
    const auto* ids = static_cast<const int64_t*>(t->data);
    const std::vector<int64_t> drawn = synthetic_tid2eid(c, "layers.0.ffn.gate.tid2eid", 7);
    std::set<int64_t> used;
    for (int64_t v = 0; v < c.vocab_size; ++v) {
        std::set<int64_t> row;
        for (int64_t k = 0; k < c.num_experts_per_tok; ++k) {
            const int64_t e = ids[v * c.num_experts_per_tok + k];
            ASSERT_EQ(e, drawn[v * c.num_experts_per_tok + k]);
            ASSERT_GE(e, 0);
            ASSERT_LT(e, c.n_routed_experts);
            row.insert(e);
            used.insert(e);
        }
        ASSERT_EQ(static_cast<int64_t>(row.size()), c.num_experts_per_tok) << "token " << v;
    }
    EXPECT_EQ(static_cast<int64_t>(used.size()), c.n_routed_experts);
}

// FP8 blocks: scale = pow2ceil(amax/448); |deq - v| within half an e4m3 step of v (3 mantissa bits, or
// the subnormal step 2^-9 * s). FP4: per-group scale pow2ceil(amax/6); error within half the e2m1 spacing.
TEST(Synthetic, Fp8CheckpointDequantizesToTheDrawsWithinRounding) {
    TempDir dir;
    const ModelConfig c = small_config(true);
    auto ck = write_and_check(c, dir.path(), 3, 100 * 1000); // forces several shards
    ASSERT_NE(ck, nullptr);
    EXPECT_TRUE(fs::exists(dir.path() + "/model.safetensors.index.json"));
    EXPECT_FALSE(fs::exists(dir.path() + "/model.safetensors"));
    const auto specs = required_tensors(c);
    EXPECT_EQ(ck->find("head.weight")->dtype, core::DType::kBF16);
    EXPECT_EQ(ck->find("layers.1.attn.compressor.wkv.weight")->dtype, core::DType::kBF16);
    EXPECT_EQ(ck->find("layers.1.ffn.shared_experts.w1.weight")->dtype, core::DType::kF8E4M3);

    for (const char* name :
         {"layers.1.attn.wq_b.weight", "layers.3.attn.wo_a.weight", "layers.0.attn.wkv.weight"}) {
        const TensorSpec& s = spec_named(specs, name);
        const std::string prefix = std::string(name).substr(0, std::string(name).size() - 7);
        EXPECT_EQ(ck->find(name)->dtype, core::DType::kF8E4M3);
        auto w = ck->weight(prefix, s.shape[0], s.shape[1], c.quant);
        ASSERT_TRUE(w.ok()) << name;
        ASSERT_EQ(w->format, core::WeightFormat::kFp8Block);
        const std::vector<float> got = weights::dequantize(*w), v = synthetic_values(s, 3);
        const int64_t rows = s.shape[0], cols = s.shape[1];
        for (int64_t bi = 0; bi < w->scale_rows(); ++bi)
            for (int64_t bj = 0; bj < w->scale_cols(); ++bj) {
                float amax = 0.0f;
                for (int64_t r = bi * 32; r < std::min<int64_t>(rows, bi * 32 + 32); ++r)
                    for (int64_t k = bj * 16; k < std::min<int64_t>(cols, bj * 16 + 16); ++k)
                        amax = std::max(amax, std::fabs(v[r * cols + k]));
                const float s_blk = core::e8m0_to_f32(w->scale[bi * w->scale_cols() + bj]);
                EXPECT_GE(s_blk * 448.0f, amax); // large enough: nothing saturates
                EXPECT_LT(s_blk * 224.0f, amax); // and the smallest such power of two
                for (int64_t r = bi * 32; r < std::min<int64_t>(rows, bi * 32 + 32); ++r)
                    for (int64_t k = bj * 16; k < std::min<int64_t>(cols, bj * 16 + 16); ++k) {
                        const float want = v[r * cols + k], d = std::fabs(got[r * cols + k] - want);
                        ASSERT_LE(d, std::max(std::ldexp(std::fabs(want), -4), s_blk * std::ldexp(1.0f, -10)))
                            << name << " [" << r << ", " << k << "]";
                    }
            }
    }
    for (const char* name : {"layers.1.ffn.experts.5.w1.weight", "layers.3.ffn.experts.0.w2.weight"}) {
        const TensorSpec& s = spec_named(specs, name);
        const std::string prefix = std::string(name).substr(0, std::string(name).size() - 7);
        EXPECT_EQ(ck->find(name)->dtype, core::DType::kI8);
        auto w = ck->weight(prefix, s.shape[0], s.shape[1], c.quant);
        ASSERT_TRUE(w.ok()) << name;
        ASSERT_EQ(w->format, core::WeightFormat::kFp4Group);
        const std::vector<float> got = weights::dequantize(*w), v = synthetic_values(s, 3);
        const int64_t rows = s.shape[0], cols = s.shape[1], g = c.quant.fp4_group;
        for (int64_t r = 0; r < rows; ++r)
            for (int64_t k0 = 0; k0 < cols; k0 += g) {
                float amax = 0.0f;
                for (int64_t k = k0; k < k0 + g; ++k) amax = std::max(amax, std::fabs(v[r * cols + k]));
                const float sg = core::e8m0_to_f32(w->scale[r * (cols / g) + k0 / g]);
                ASSERT_GE(sg * 6.0f, amax);
                ASSERT_LT(sg * 3.0f, amax);
                for (int64_t k = k0; k < k0 + g; ++k) {
                    const float x = std::fabs(v[r * cols + k]) / sg;
                    const float half_step = x <= 2.0f ? 0.25f : x <= 4.0f ? 0.5f : 1.0f;
                    ASSERT_LE(std::fabs(got[r * cols + k] - v[r * cols + k]), half_step * sg) << name;
                }
            }
    }
}

// The fast e4m3 encoder against the table-scanning one in core (an independent implementation).
TEST(Synthetic, Fp8EncoderMatchesCoreEncoder) {
    std::vector<float> xs = {
        0.0f,          -0.0f,        448.0f,        449.0f,       464.0f,        480.0f, 1e9f,   0.015625f,
        0.0146484375f, 0.013671875f, 0.0009765625f, 0.001953125f, 0.0029296875f, 1e-7f,  240.0f, 248.0f};
    uint64_t st = 1;
    for (int i = 0; i < 200000; ++i) {
        st = st * 6364136223846793005ull + 1442695040888963407ull;
        const int e = static_cast<int>((st >> 33) % 30) - 20;
        const float m = 1.0f + static_cast<float>((st >> 10) & 0x7FFFFF) * 0x1.0p-23f;
        xs.push_back(((st >> 63) ? -1.0f : 1.0f) * std::ldexp(m, e));
    }
    for (int c = 0; c < 127; ++c) { // every code, and the midpoints to its neighbour (ties)
        const float a = core::fp8_e4m3_to_f32(static_cast<uint8_t>(c));
        xs.push_back(a);
        if (c < 126) xs.push_back(0.5f * (a + core::fp8_e4m3_to_f32(static_cast<uint8_t>(c + 1))));
    }
    for (float x : xs) ASSERT_EQ(weights::fp8_e4m3_encode(x), core::f32_to_fp8_e4m3(x)) << x;
    EXPECT_EQ(weights::pow2_ceil(3.0f), 4.0f);
    EXPECT_EQ(weights::pow2_ceil(4.0f), 4.0f);
    EXPECT_EQ(weights::e8m0_of_pow2(0.25f), 125);
}

TEST(Synthetic, SameSeedSameBytesOtherSeedDiffers) {
    TempDir a, b, d;
    const ModelConfig c = small_config(true);
    SyntheticOptions o;
    o.seed = 11;
    o.shard_bytes = 200 * 1000;
    ASSERT_TRUE(write_synthetic_checkpoint(c, o, a.path()).ok());
    ASSERT_TRUE(write_synthetic_checkpoint(c, o, b.path()).ok());
    o.seed = 12;
    ASSERT_TRUE(write_synthetic_checkpoint(c, o, d.path()).ok());
    int files = 0;
    for (const auto& e : fs::directory_iterator(a.path())) {
        const std::string name = e.path().filename().string();
        ++files;
        EXPECT_EQ(read_file(a.path() + "/" + name), read_file(b.path() + "/" + name)) << name;
        if (name.find(".safetensors") != std::string::npos && name.find("index") == std::string::npos) {
            EXPECT_NE(read_file(a.path() + "/" + name), read_file(d.path() + "/" + name)) << name;
        }
    }
    EXPECT_GE(files, 4); // config, index, >= 2 shards
}

TEST(Synthetic, ModelRunsGreedyStepsWithFiniteLogits) {
    for (bool fp8 : {false, true}) {
        TempDir dir;
        const ModelConfig c = small_config(fp8);
        ASSERT_NE(write_and_check(c, dir.path(), 5), nullptr);
        auto lm = DeepseekV4Model::load(dir.path());
        ASSERT_TRUE(lm.ok()) << lm.status().to_string();
        KvCacheSpec spec;
        spec.block_size = 64;
        spec.num_blocks = 1;
        spec.num_slots = 1;
        ASSERT_TRUE((*lm)->init_kv_cache(spec).ok());
        SequenceRunner runner(lm->get(), 0, {0});
        std::vector<float> logits;
        std::vector<int32_t> ids = {5, 17, 300, 42, 9, 88, 123, 7, 64, 2};
        ASSERT_TRUE(runner.feed(ids, 0, false, &logits).ok());
        for (int step = 0; step < 6; ++step) {
            float lo = logits[0], hi = logits[0];
            for (float x : logits) {
                ASSERT_TRUE(std::isfinite(x)) << "fp8 " << fp8 << " step " << step;
                lo = std::min(lo, x);
                hi = std::max(hi, x);
            }
            EXPECT_GT(hi - lo, 1e-3f); // not a constant output
            const int32_t next = argmax(logits.data(), c.vocab_size);
            ASSERT_TRUE(runner.feed({next}, 0, false, &logits).ok());
        }
    }
}

TEST(Synthetic, ErrorsNameTheProblem) {
    TempDir dir;
    ASSERT_TRUE(fs::create_directories(dir.path()));
    const std::string file = dir.path() + "/file";
    std::ofstream(file) << "x";
    const core::Status s = write_synthetic_checkpoint(small_config(false), {}, file + "/sub");
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.message().find(file + "/sub"), std::string::npos) << s.message();
    ModelConfig c = small_config(false);
    c.mlp_layer_types[2] = MlpType::kHashMoe; // not a prefix: num_hash_layers cannot say it
    EXPECT_FALSE(official_config_json(c).ok());
}

} // namespace
} // namespace deepinfer::model::deepseek_v4
