// Engram hashing against transformers' deepseek_v41 (tests/fixtures/tiny-v41*/goldens.safetensors,
// `engram_hash.{layer}`), the shipped hash data of tiny-v41 and of the real V4.1-Flash, and rejection of
// hash data that does not belong to the model.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "model/deepseek_v41/config.h"
#include "model/deepseek_v41/engram_hash.h"
#include "weights/safetensors.h"
#include "weights/safetensors_writer.h"

namespace {

using deepinfer::model::deepseek_v41::EngramHasher;
using deepinfer::model::deepseek_v41::ModelConfig;
using deepinfer::model::deepseek_v41::NgramHistory;
namespace core = deepinfer::core;
namespace weights = deepinfer::weights;

std::string src(const std::string& rel) {
    return std::string(DEEPINFER_SOURCE_DIR) + "/" + rel;
}

// sha256 of data/tokenizer/deepseek-v4/tokenizer.json (its PROVENANCE.md).
constexpr const char* kV4TokenizerSha = "8f9f37ca37fdc4f5fd36d5cf4d3b0e8392edb4e894fd10cc0d70b4957c8633cf";

ModelConfig config(const std::string& rel) {
    auto c = ModelConfig::from_json_file(src(rel));
    EXPECT_TRUE(c.ok()) << c.status().message();
    return c.ok() ? *c : ModelConfig{};
}

class Goldens {
public:
    explicit Goldens(const std::string& model) {
        auto f =
            weights::SafetensorsFile::open(src("tests/fixtures/" + model + "/goldens.safetensors"), model);
        EXPECT_TRUE(f.ok()) << f.status().message();
        if (f.ok()) file_ = std::move(*f);
    }
    bool ok() const { return file_ != nullptr; }
    template <typename T> std::vector<T> get(const std::string& name, core::DType dtype) const {
        for (const auto& e : file_->header().tensors) {
            if (e.name != name) continue;
            EXPECT_EQ(e.dtype, dtype) << name;
            std::vector<T> v(static_cast<size_t>(e.shape.numel()));
            std::memcpy(v.data(), file_->data(e), v.size() * sizeof(T));
            return v;
        }
        ADD_FAILURE() << "golden " << name << " missing";
        return {};
    }
    std::vector<int64_t> i64(const std::string& name) const { return get<int64_t>(name, core::DType::kI64); }

private:
    std::unique_ptr<weights::SafetensorsFile> file_;
};

// Hash ids of `tokens` fed in chunks of `chunk`, as [tokens, layers, cols].
std::vector<int64_t> hash_chunked(const EngramHasher& h, const std::vector<int64_t>& tokens, size_t chunk,
                                  const std::vector<uint8_t>& dead = {}) {
    NgramHistory hist;
    std::vector<int64_t> out;
    for (size_t s = 0; s < tokens.size(); s += chunk) {
        const size_t n = std::min(chunk, tokens.size() - s);
        std::span<const uint8_t> d =
            dead.empty() ? std::span<const uint8_t>() : std::span(dead).subspan(s, n);
        h.hash(std::span(tokens).subspan(s, n), d, hist, out);
    }
    return out;
}

// Column e of [positions, layers, cols] as [positions, cols].
std::vector<int64_t> layer_slice(const std::vector<int64_t>& all, int64_t layers, int64_t cols, int64_t e) {
    std::vector<int64_t> r;
    const size_t positions = all.size() / static_cast<size_t>(layers * cols);
    for (size_t p = 0; p < positions; ++p)
        for (int64_t c = 0; c < cols; ++c) r.push_back(all[(p * layers + e) * cols + c]);
    return r;
}

class V41EngramHash : public ::testing::TestWithParam<std::string> {};

TEST_P(V41EngramHash, MatchesTransformersAtEveryPosition) {
    const std::string model = GetParam();
    const ModelConfig c = config("models/" + model + "/config.json");
    auto h = EngramHasher::load(src("models/" + model + "/engram_hash.safetensors"), c);
    ASSERT_TRUE(h.ok()) << h.status().message();
    Goldens g(model);
    ASSERT_TRUE(g.ok());
    for (int i = 0; i < 9; ++i) {
        SCOPED_TRACE("prompt " + std::to_string(i));
        std::vector<int64_t> seq = g.i64("prompt." + std::to_string(i) + ".ids");
        const std::vector<int64_t> gen = g.i64("prompt." + std::to_string(i) + ".gen_tokens");
        seq.insert(seq.end(), gen.begin(), gen.end());
        // one shot, token by token (decode) and odd chunks: the n-gram history carries across calls
        for (size_t chunk : {seq.size(), size_t{1}, size_t{3}, size_t{7}}) {
            const std::vector<int64_t> got = hash_chunked(*h, seq, chunk);
            ASSERT_EQ(got.size(), seq.size() * static_cast<size_t>(h->num_layers() * h->num_cols()));
            for (int64_t e = 0; e < h->num_layers(); ++e) {
                const std::string key =
                    "prompt." + std::to_string(i) + ".engram_hash." + std::to_string(c.engram.layer_ids[e]);
                EXPECT_EQ(layer_slice(got, h->num_layers(), h->num_cols(), e), g.i64(key))
                    << key << " chunk " << chunk;
            }
        }
    }
}

TEST_P(V41EngramHash, DeadTokensBlockTheNgram) {
    const std::string model = GetParam();
    const ModelConfig c = config("models/" + model + "/config.json");
    auto h = EngramHasher::load(src("models/" + model + "/engram_hash.safetensors"), c);
    ASSERT_TRUE(h.ok()) << h.status().message();
    Goldens g(model);
    const std::vector<int64_t> ids = g.i64("prompt.7.ids");
    const std::vector<uint8_t> dead = g.get<uint8_t>("prompt.7.engram_dead_mask", core::DType::kU8);
    ASSERT_EQ(ids.size(), dead.size());
    for (size_t chunk : {ids.size(), size_t{5}}) {
        const std::vector<int64_t> got = hash_chunked(*h, ids, chunk, dead);
        for (int64_t e = 0; e < h->num_layers(); ++e) {
            const std::string key = "prompt.7.engram_hash_dead." + std::to_string(c.engram.layer_ids[e]);
            EXPECT_EQ(layer_slice(got, h->num_layers(), h->num_cols(), e), g.i64(key)) << key;
        }
    }
    // and the mask matters: without it the ids after the dead span differ
    EXPECT_NE(layer_slice(hash_chunked(*h, ids, ids.size()), h->num_layers(), h->num_cols(), 0),
              g.i64("prompt.7.engram_hash_dead." + std::to_string(c.engram.layer_ids[0])));
}

INSTANTIATE_TEST_SUITE_P(Tiny, V41EngramHash, ::testing::Values("tiny-v41", "tiny-v41-fp8"));

TEST(V41EngramHashData, BothTinyConfigsDescribeTheSameModel) {
    const ModelConfig a = config("models/tiny-v41/config.json");     // released layout, official names
    const ModelConfig b = config("models/tiny-v41-fp8/config.json"); // transformers' save_pretrained
    EXPECT_EQ(a.compress_ratios, b.compress_ratios);
    EXPECT_EQ(a.kv_source_layer_ids, b.kv_source_layer_ids);
    EXPECT_EQ(a.index_source_layer_ids, b.index_source_layer_ids);
    EXPECT_EQ(a.candidate_source_layer_id, b.candidate_source_layer_id);
    EXPECT_EQ(a.qk_rope_head_dim, b.qk_rope_head_dim);
    EXPECT_EQ(a.yarn.enabled, b.yarn.enabled);
    EXPECT_DOUBLE_EQ(a.yarn.factor, b.yarn.factor);
    EXPECT_EQ(a.engram.num_embeddings, b.engram.num_embeddings);
    EXPECT_EQ(a.engram.pad_token_id, b.engram.pad_token_id);
    EXPECT_EQ(a.engram.compressed_vocab_size, b.engram.compressed_vocab_size);
    EXPECT_FALSE(a.quant.fp8);
    EXPECT_TRUE(b.quant.fp8);
    EXPECT_TRUE(b.expert_fp4);
    EXPECT_EQ(b.quant.block_rows, 32);
}

TEST(V41EngramHashData, RealFlashHashDataLoads) {
    const ModelConfig c = config("tests/fixtures/deepseek-v41-flash/config.json");
    auto h =
        EngramHasher::load(src("data/engram/deepseek-v41-flash/engram_hash.safetensors"), c, kV4TokenizerSha);
    ASSERT_TRUE(h.ok()) << h.status().message();
    EXPECT_EQ(h->num_layers(), 2);
    EXPECT_EQ(h->num_cols(), 24);
    // every id lands inside its layer's table
    NgramHistory hist;
    std::vector<int64_t> out;
    const std::vector<int64_t> toks = {0, 100, 128000, 5, 5, 129279, 2, 77};
    h->hash(toks, {}, hist, out);
    ASSERT_EQ(out.size(), toks.size() * 2 * 24);
    for (size_t i = 0; i < out.size(); ++i) {
        const int64_t e = static_cast<int64_t>(i / 24) % 2;
        EXPECT_GE(out[i], 0);
        EXPECT_LT(out[i], c.engram.num_embeddings[e]);
    }
}

TEST(V41EngramHashData, RejectsHashDataOfAnotherModel) {
    const std::string path = src("models/tiny-v41/engram_hash.safetensors");
    const ModelConfig good = config("models/tiny-v41/config.json");
    auto expect_error = [&](const ModelConfig& c, const std::string& file, const std::string& sha,
                            std::initializer_list<std::string> needles) {
        auto h = EngramHasher::load(file, c, sha);
        ASSERT_FALSE(h.ok());
        const std::string msg = h.status().message();
        EXPECT_NE(msg.find(file), std::string::npos) << msg;
        for (const auto& n : needles)
            EXPECT_NE(msg.find(n), std::string::npos) << "'" << n << "' not in: " << msg;
    };
    {
        ModelConfig c = good; // a table shorter than the hash data addresses
        c.engram.num_embeddings[1] -= 8;
        expect_error(c, path, "", {"num_embeddings"});
    }
    {
        ModelConfig c = good;
        c.engram.compressed_vocab_size -= 1;
        expect_error(c, path, "", {"compressed_vocab_size"});
    }
    // hash data for another tokenizer
    expect_error(good, path, kV4TokenizerSha, {"tokenizer_json_sha256"});
    // the real Flash data against the tiny model
    expect_error(good, src("data/engram/deepseek-v41-flash/engram_hash.safetensors"), "", {"layer_ids"});
    expect_error(good, "/nonexistent/engram_hash.safetensors", "", {});
    // a token_map of the wrong dtype
    auto orig = weights::SafetensorsFile::open(path, path);
    ASSERT_TRUE(orig.ok());
    weights::SafetensorsWriter w;
    for (const auto& [k, v] : (*orig)->header().metadata) w.set_metadata(k, v);
    for (const auto& e : (*orig)->header().tensors) {
        if (e.name == "token_map") {
            const auto* p = static_cast<const int32_t*>((*orig)->data(e));
            std::vector<int64_t> wide(p, p + e.shape.numel());
            w.add_i64("token_map", e.shape, wide);
        } else {
            w.add(e.name, e.dtype, e.shape, (*orig)->data(e));
        }
    }
    const std::string bad =
        (std::filesystem::temp_directory_path() / "v41_bad_engram_hash.safetensors").string();
    ASSERT_TRUE(w.write(bad).ok());
    expect_error(good, bad, "", {"token_map", "dtype I64", "I32"});
    std::filesystem::remove(bad);
}

} // namespace
