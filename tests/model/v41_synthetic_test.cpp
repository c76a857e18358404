// make-synthetic's V4.1 writer (model/deepseek_v41/synthetic.h): the tiny-text-v41 preset loads with the
// real V4 tokenizer's hash data (checked against tokenizer.json's sha256) and runs; the same seed gives the
// same bytes; sparse Engram tables are valid safetensors whose unwritten rows read as zeros; the overlapped
// gather gives the rows EngramTable::gather gives; the bench-only short circuit feeds zeros (so on all-zero
// tables it changes nothing, and on seeded tables it changes the logits).

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "model/deepseek_v41/engram_prefetch.h"
#include "model/deepseek_v41/model.h"
#include "model/deepseek_v41/synthetic.h"
#include "model/registry.h"

namespace deepinfer::model::deepseek_v41 {
namespace {

std::string src(const std::string& rel) {
    return std::string(DEEPINFER_SOURCE_DIR) + "/" + rel;
}

std::string tmp_dir(const std::string& name) {
    const auto d =
        std::filesystem::temp_directory_path() / ("di_v41_synth_" + name + "_" + std::to_string(::getpid()));
    std::filesystem::remove_all(d);
    return d.string();
}

std::string read_all(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

core::Status write_preset(const std::string& preset, bool fp8, const SyntheticOptions& o,
                          const std::string& dir) {
    auto json = synthetic_preset_json(preset, fp8);
    if (!json.ok()) return json.status();
    return write_synthetic_checkpoint(*json, o, src("data/" + synthetic_preset_hash_data(preset)),
                                      src("data/tokenizer/deepseek-v4/tokenizer.json"), dir);
}

// Greedy prefill logits of a fixed prompt [n, vocab] on the first row only (last position).
std::vector<float> last_logits(CausalLm& m, const std::vector<int32_t>& ids, bool gather = true) {
    RuntimeSpec rs{static_cast<int64_t>(ids.size()), 1};
    rs.engram_gather = gather;
    EXPECT_TRUE(m.configure_runtime(rs).ok());
    KvCacheSpec kv;
    kv.block_size = 16;
    kv.num_blocks = 8;
    kv.num_slots = 1;
    EXPECT_TRUE(m.init_kv_cache(kv).ok());
    ForwardBatch b;
    b.token_ids = ids;
    for (size_t i = 0; i < ids.size(); ++i) b.positions.push_back(static_cast<int32_t>(i));
    SequenceChunk ch;
    ch.slot = 0;
    ch.start_pos = 0;
    ch.num_tokens = static_cast<int32_t>(ids.size());
    ch.token_offset = 0;
    ch.reset_slot = true;
    for (int32_t i = 0; i < kv.num_blocks; ++i) ch.block_table.push_back(i);
    b.chunks.push_back(ch);
    b.logits_rows = {static_cast<int32_t>(ids.size()) - 1};
    std::vector<float> logits(m.vocab_size());
    EXPECT_TRUE(m.forward(b, logits.data()).ok());
    return logits;
}

const std::vector<int32_t> kPrompt = {0,    19923, 2058, 14, 4657, 1187, 303, 39, 3458, 11, 1001,
                                      1002, 7,     8,    9,  10,   11,   12,  13, 14,   15};

TEST(V41Synthetic, PresetsParseAndNameTheVisionConfig) {
    for (const std::string& p : synthetic_preset_names())
        for (bool fp8 : {false, true}) {
            auto json = synthetic_preset_json(p, fp8);
            ASSERT_TRUE(json.ok()) << p;
            auto c = ModelConfig::from_json_string(*json, p);
            ASSERT_TRUE(c.ok()) << p << ": " << c.status().to_string();
            EXPECT_EQ(c->vocab_size, 129280);
            EXPECT_TRUE(c->vision.present);
            EXPECT_EQ(c->quant.fp8, fp8);
            EXPECT_EQ(c->engram.compressed_vocab_size, 99092);
        }
    auto flash = ModelConfig::from_json_string(*synthetic_preset_json("flash-v41-engram", true), "flash");
    auto released = ModelConfig::from_json_file(src("tests/fixtures/deepseek-v41-flash/config.json"));
    ASSERT_TRUE(released.ok());
    // Flash's per-layer dims and Engram tables
    EXPECT_EQ(flash->hidden_size, released->hidden_size);
    EXPECT_EQ(flash->head_dim, released->head_dim);
    EXPECT_EQ(flash->moe_intermediate_size, released->moe_intermediate_size);
    EXPECT_EQ(flash->engram.num_embeddings, released->engram.num_embeddings);
    EXPECT_EQ(flash->engram.head_dim, released->engram.head_dim);
    EXPECT_FALSE(synthetic_preset_json("nope", false).ok());
}

TEST(V41Synthetic, TinyTextLoadsWithTheRealTokenizerAndIsDeterministic) {
    const std::string a = tmp_dir("a"), b = tmp_dir("b"), c = tmp_dir("c");
    SyntheticOptions o;
    o.seed = 5;
    ASSERT_TRUE(write_preset("tiny-text-v41", false, o, a).ok());
    ASSERT_TRUE(write_preset("tiny-text-v41", false, o, b).ok());
    o.seed = 6;
    ASSERT_TRUE(write_preset("tiny-text-v41", false, o, c).ok());
    EXPECT_EQ(read_all(a + "/model.safetensors"), read_all(b + "/model.safetensors"));
    EXPECT_NE(read_all(a + "/model.safetensors"), read_all(c + "/model.safetensors"));
    EXPECT_EQ(read_all(a + "/tokenizer.json"), read_all(src("data/tokenizer/deepseek-v4/tokenizer.json")));
    // the hash data names the tokenizer's sha256: load() checks it
    auto lm = load_causal_lm(a);
    ASSERT_TRUE(lm.ok()) << lm.status().to_string();
    EXPECT_EQ((*lm)->info().family, "deepseek_v41");
    const std::vector<float> logits = last_logits(**lm, kPrompt);
    float amax = 0;
    for (float v : logits) {
        ASSERT_TRUE(std::isfinite(v));
        amax = std::max(amax, std::fabs(v));
    }
    EXPECT_GT(amax, 0.0f);
    for (const auto& d : {a, b, c}) std::filesystem::remove_all(d);
}

TEST(V41Synthetic, Fp8TinyTextUsesTheReleasedLayout) {
    const std::string d = tmp_dir("fp8");
    ASSERT_TRUE(write_preset("tiny-text-v41", true, {}, d).ok());
    auto ck = weights::Checkpoint::open(d);
    ASSERT_TRUE(ck.ok());
    const weights::TensorInfo* t = (*ck)->find("layers.1.engram.embed.weight");
    const weights::TensorInfo* s = (*ck)->find("layers.1.engram.embed.scale");
    ASSERT_TRUE(t && s);
    EXPECT_EQ(t->dtype, core::DType::kF8E4M3);
    EXPECT_EQ(t->shape, (core::Shape{4062, 32}));
    EXPECT_EQ(s->dtype, core::DType::kF8E8M0);
    EXPECT_EQ(s->shape, (core::Shape{4062, 1}));
    EXPECT_EQ((*ck)->find("layers.0.ffn.experts.0.w1.weight")->dtype, core::DType::kI8);
    EXPECT_EQ((*ck)->find("layers.0.attn.wq_b.weight")->dtype, core::DType::kF8E4M3);
    auto lm = load_causal_lm(d);
    ASSERT_TRUE(lm.ok()) << lm.status().to_string();
    for (float v : last_logits(**lm, kPrompt)) ASSERT_TRUE(std::isfinite(v));
    std::filesystem::remove_all(d);
}

TEST(V41Synthetic, SparseTablesReadAsZerosPastTheSeededRows) {
    const std::string d = tmp_dir("sparse");
    SyntheticOptions o;
    o.engram_dense_rows = 1000; // tiny-text-v41's tables (4062, 4152 rows) go sparse
    o.engram_seeded_rows = 100;
    o.engram_fill_prompts = {{5, 6, 7, 8}};
    ASSERT_TRUE(write_preset("tiny-text-v41", true, o, d).ok());
    EXPECT_TRUE(std::filesystem::exists(d + "/model.safetensors.index.json"));
    EXPECT_TRUE(std::filesystem::exists(d + "/model-00003-of-00003.safetensors"));
    auto ck = weights::Checkpoint::open(d);
    ASSERT_TRUE(ck.ok()) << ck.status().to_string();
    auto cfg = ModelConfig::from_json_file(d + "/config.json");
    ASSERT_TRUE(cfg.ok());
    auto table = EngramTable::bind(**ck, *cfg, 0);
    ASSERT_TRUE(table.ok()) << table.status().to_string();
    EXPECT_NE((*ck)->find("layers.1.engram.embed.weight")->file, (*ck)->find("embed.weight")->file);
    std::vector<float> row(32);
    auto row_absmax = [&](int64_t r) {
        const int64_t id = r;
        table->gather({&id, 1}, row.data());
        float m = 0;
        for (float v : row) m = std::max(m, std::fabs(v));
        return m;
    };
    EXPECT_GT(row_absmax(0), 0.0f);
    EXPECT_GT(row_absmax(99), 0.0f);
    // the fill prompt's rows are written; the rest past the seeded ones read as zeros
    auto hasher = EngramHasher::load(d + "/engram_hash.safetensors", *cfg);
    ASSERT_TRUE(hasher.ok());
    NgramHistory hist;
    std::vector<int64_t> ids;
    hasher->hash(std::vector<int64_t>{5, 6, 7, 8}, {}, hist, ids);
    std::vector<int64_t> filled; // layer 0's rows: [4 tokens, 2 layers, 4 cols]
    for (int64_t t = 0; t < 4; ++t)
        for (int64_t k = 0; k < 4; ++k) filled.push_back(ids[t * 8 + k]);
    int64_t zero_checked = 0;
    for (int64_t r = 100; r < 4062; ++r) {
        const bool fill = std::find(filled.begin(), filled.end(), r) != filled.end();
        if (fill) {
            EXPECT_GT(row_absmax(r), 0.0f) << r;
        } else if (r % 37 == 0 || r == 4061) {
            EXPECT_EQ(row_absmax(r), 0.0f) << r;
            ++zero_checked;
        }
    }
    EXPECT_GT(zero_checked, 50);
    std::filesystem::remove_all(d);
}

TEST(V41Synthetic, GatherShortCircuitFeedsZeros) {
    // All-zero tables: the short circuit is exact. Seeded tables: it changes the logits.
    const std::string z = tmp_dir("zero"), s = tmp_dir("seeded");
    SyntheticOptions o;
    o.engram_dense_rows = 0;
    o.engram_seeded_rows = 0;
    ASSERT_TRUE(write_preset("tiny-text-v41", false, o, z).ok());
    ASSERT_TRUE(write_preset("tiny-text-v41", false, {}, s).ok());
    auto zm = load_causal_lm(z);
    auto sm = load_causal_lm(s);
    ASSERT_TRUE(zm.ok() && sm.ok());
    EXPECT_EQ(last_logits(**zm, kPrompt, true), last_logits(**zm, kPrompt, false));
    EXPECT_NE(last_logits(**sm, kPrompt, true), last_logits(**sm, kPrompt, false));
    std::filesystem::remove_all(z);
    std::filesystem::remove_all(s);
}

TEST(V41EngramPrefetch, JobsGiveTheRowsOfADirectGather) {
    const std::string d = tmp_dir("prefetch");
    ASSERT_TRUE(write_preset("tiny-text-v41", true, {}, d).ok());
    auto ck = weights::Checkpoint::open(d);
    auto cfg = ModelConfig::from_json_file(d + "/config.json");
    ASSERT_TRUE(ck.ok() && cfg.ok());
    auto tables = EngramTable::bind_all(**ck, *cfg);
    ASSERT_TRUE(tables.ok());
    // ids [n, E=2, cols=4]: job e reads column block e of each token's row (stride E * cols)
    const int64_t n = 7, E = 2, cols = 4, dim = 32;
    std::vector<int64_t> ids(n * E * cols);
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int64_t>((i * 977 + 13) % 4062);
    EngramPrefetcher pf;
    for (int step = 0; step < 3; ++step) { // reused across steps
        std::vector<std::vector<float>> out(E, std::vector<float>(n * cols * dim, -1.0f));
        pf.begin();
        std::vector<int64_t> jobs;
        for (int64_t e = 0; e < E; ++e)
            jobs.push_back(pf.add((*tables)[e], ids.data() + e * cols, n, cols, E * cols, out[e].data(),
                                  /*zeros=*/step == 2));
        pf.start(nullptr);
        for (int64_t e = E - 1; e >= 0; --e) {
            pf.wait(jobs[e]);
            std::vector<float> want(n * cols * dim, 0.0f);
            if (step != 2)
                for (int64_t t = 0; t < n; ++t)
                    (*tables)[e].gather({ids.data() + (t * E + e) * cols, static_cast<size_t>(cols)},
                                        want.data() + t * cols * dim);
            EXPECT_EQ(out[e], want) << "step " << step << " job " << e;
        }
        pf.finish();
    }
    std::filesystem::remove_all(d);
}

// resident_weight_bytes counts the weights as held (it was the checkpoint's file size before session 26,
// whatever a rank bound): the shipped FP8 / FP4 checkpoint at about its stored size, and a rank binding
// half the routed experts less by exactly those experts' bytes.
TEST(V41Weights, ResidentBytesCountTheWeightsAsHeld) {
    const std::string dir = src("models/tiny-v41-fp8");
    auto m = DeepseekV41Model::load(dir);
    ASSERT_TRUE(m.ok()) << m.status().to_string();
    const ModelWeights& w = (*m)->weights();
    const int64_t resident = w.resident_weight_bytes();
    auto ck = weights::Checkpoint::open(dir);
    ASSERT_TRUE(ck.ok());
    const auto file = static_cast<int64_t>((*ck)->mapped_bytes());
    EXPECT_EQ(static_cast<double>(resident), (*m)->info().resident_weight_bytes);
    EXPECT_GT(resident, file * 8 / 10);
    EXPECT_LT(resident, file * 11 / 10);

    const ModelConfig& c = (*m)->config();
    const int64_t half = c.n_routed_experts / 2;
    auto part = ModelWeights::bind(**ck, c, 0, half);
    ASSERT_TRUE(part.ok()) << part.status().to_string();
    int64_t dropped = 0;
    for (const LayerWeights& l : w.layers)
        for (int64_t e = half; e < c.n_routed_experts; ++e) {
            const ExpertWeights& x = l.ffn.experts[static_cast<size_t>(e)];
            dropped += x.w1.resident_bytes() + x.w2.resident_bytes() + x.w3.resident_bytes();
        }
    EXPECT_GT(dropped, 0);
    EXPECT_EQ(part->resident_weight_bytes(), resident - dropped);
}

} // namespace
} // namespace deepinfer::model::deepseek_v41
