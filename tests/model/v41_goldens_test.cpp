// DeepSeek V4.1 against transformers' deepseek_v41 goldens (tests/fixtures/tiny-v41*/goldens.safetensors,
// tools/oracle/goldens_v41.py), both storage formats.
//
// What is compared exactly and where: Engram hash ids at every position of every prompt; 32 greedy tokens
// of every prompt (prefill one shot, in chunks of 1, 3, 7, 64, and all prompts as one ragged batch).
// Stage by stage (router picks, the index sources' top-k picks and the candidate blocks as sets, hidden
// streams per layer, prefill logits within 1e-4 max|ref|) on every prompt of up to kStrictLen tokens.
//
// Why not stage by stage on the 64- and 300-token prompts: V4.1's cache fake-quantization rounds to FP8 /
// FP4 grids inside the model, and the reference's own runs put elements within 1e-6 (relative) of a
// rounding boundary (manifest.json "quantizer_margins"; its one-shot vs chunked prefill differ by 0.84 in a
// logit on the 64-token fp8 prompt and 0.016 on the 300-token bf16 one, "chunked_prefill"). Our fp32
// rounding (~1e-6) crosses such a boundary there: measured, the fp8 64-token prompt's first divergence is
// layer 2 position 2, where one window-KV element lies within 2e-6 amax of an e4m3 rounding boundary; the
// selections downstream then legitimately differ. Those prompts still give the golden tokens, and their
// deviations are printed. Decode step logits are printed, not asserted, for the same reason (the fast
// kernels round differently at one row than at many, and a flip can follow; with DEEPINFER_ISA=ref the
// decode matches one forward exactly). Rejecting (seed, prompt) pairs with near-boundary quantizer inputs,
// as V4's oracle rejects near-ties, was measured infeasible: at a margin that covers our ~2e-6·amax
// deviation every prompt has 10-186 such elements (docs/deepseek-v41-model.md, "The 1e-4 logit point";
// tools/oracle/quant_margin_census_v41.py). The 1e-4 logit clause on every prompt (prefill and decode, one
// shot and chunked) is asserted with the reference's rounding at its near-ties: v41_near_ties_test.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/thread_pool.h"
#include "golden_util.h"
#include "kernels/ref/cache_quant.h"
#include "model/deepseek_v41/model.h"
#include "model/sequence_runner.h"
#include "weights/safetensors.h"

namespace deepinfer::model::deepseek_v41 {
namespace {

using deepinfer::testing::Goldens;
using deepinfer::testing::source_path;

constexpr double kLogitTol = 1e-4; // max|Δ| / max|ref| (acceptance criterion)
constexpr int64_t kStrictLen = 17; // prompts compared stage by stage (see the file comment)

std::string p(int i, const std::string& key) {
    return "prompt." + std::to_string(i) + "." + key;
}

double rel_err(const float* got, const float* ref, size_t n) {
    return deepinfer::testing::max_rel_error(got, ref, n);
}

// The tiny model's ops are far too small to split across threads: one thread keeps the (many) decode steps
// cheap on a loaded machine.
core::ThreadPool& single_thread() {
    static core::ThreadPool pool(1);
    return pool;
}

std::unique_ptr<DeepseekV41Model> load(const std::string& model, int64_t block_size, int64_t blocks,
                                       int32_t slots = 1) {
    auto m = DeepseekV41Model::load(source_path("models/" + model));
    EXPECT_TRUE(m.ok()) << m.status().to_string();
    if (!m.ok()) return nullptr;
    (*m)->set_thread_pool(&single_thread());
    KvCacheSpec spec;
    spec.block_size = block_size;
    spec.num_blocks = blocks;
    spec.num_slots = slots;
    EXPECT_TRUE((*m)->init_kv_cache(spec).ok());
    return std::move(*m);
}

std::vector<int32_t> iota_blocks(int64_t first, int64_t n) {
    std::vector<int32_t> b(n);
    std::iota(b.begin(), b.end(), static_cast<int32_t>(first));
    return b;
}

// Row t of a [T, w] int table as a set of its non-negative entries.
std::set<int32_t> row_set(const std::vector<int32_t>& v, int64_t w, int64_t t) {
    std::set<int32_t> s;
    for (int64_t i = 0; i < w; ++i)
        if (v[t * w + i] >= 0) s.insert(v[t * w + i]);
    return s;
}

class V41Goldens : public ::testing::TestWithParam<std::string> {
protected:
    void SetUp() override { g_ = std::make_unique<Goldens>(GetParam()); }
    std::unique_ptr<Goldens> g_;
};

TEST_P(V41Goldens, PrefillMatchesStageByStage) {
    auto m = load(GetParam(), 64, 6);
    ASSERT_TRUE(m);
    const ModelConfig& c = m->config();
    V41Probes probes;
    m->set_probes(&probes);
    const int n = g_->num_prompts();
    ASSERT_EQ(n, 9);
    double worst = 0, worst_hidden = 0;
    for (int i = 0; i < n; ++i) {
        SCOPED_TRACE("prompt " + std::to_string(i));
        const auto ids = g_->ids(p(i, "ids"));
        const int64_t T = static_cast<int64_t>(ids.size());
        const bool strict = T <= kStrictLen;
        SequenceRunner run(m.get(), 0, iota_blocks(0, 6));
        std::vector<float> logits;
        ASSERT_TRUE(run.feed(ids, 0, true, &logits).ok());
        // Engram hash ids (golden: [prompt + generated, cols] per Engram layer): exact on every prompt.
        const int64_t E = static_cast<int64_t>(c.engram.layer_ids.size()), cols = c.engram.n_hash_cols();
        for (int64_t e = 0; e < E; ++e) {
            const auto ref = g_->ids(p(i, "engram_hash." + std::to_string(c.engram.layer_ids[e])));
            for (int64_t t = 0; t < T; ++t)
                for (int64_t k = 0; k < cols; ++k)
                    ASSERT_EQ(probes.hash_ids[(t * E + e) * cols + k], ref[t * cols + k]) << "hash t " << t;
        }
        int64_t picks_differ = 0;
        std::string first_divergence;
        for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
            const std::string ls = std::to_string(l);
            const auto router = g_->ids(p(i, "router." + ls));
            for (int64_t t = 0; t < T; ++t) {
                const bool same = row_set(probes.router[l], c.num_experts_per_tok, t) ==
                                  row_set(router, c.num_experts_per_tok, t);
                picks_differ += !same;
                if (strict) {
                    EXPECT_TRUE(same) << "router layer " << l << " t " << t;
                }
            }
            if (g_->has(p(i, "index_topk." + ls))) {
                const auto ref = g_->ids(p(i, "index_topk." + ls));
                const int64_t w = static_cast<int64_t>(ref.size()) / T;
                for (int64_t t = 0; t < T; ++t) {
                    const bool same = row_set(probes.picks[l], c.index_topk, t) == row_set(ref, w, t);
                    picks_differ += !same;
                    if (strict) {
                        EXPECT_TRUE(same) << "index top-k layer " << l << " t " << t;
                    }
                }
            }
            if (g_->has(p(i, "hidden." + ls))) { // stored for prompts up to 64 tokens
                const auto hidden = g_->f32(p(i, "hidden." + ls));
                const double eh = rel_err(probes.hidden[l].data(), hidden.data(), hidden.size());
                const size_t row = hidden.size() / T;
                for (int64_t t = 0; t < T && first_divergence.empty() && eh > kLogitTol; ++t)
                    if (rel_err(probes.hidden[l].data() + t * row, hidden.data() + t * row, row) > kLogitTol)
                        first_divergence = "layer " + ls + " position " + std::to_string(t);
                if (strict) {
                    EXPECT_LE(eh, kLogitTol) << "hidden streams after layer " << l;
                    worst_hidden = std::max(worst_hidden, eh);
                }
            }
        }
        const std::string cb = "candidate_blocks." + std::to_string(c.candidate_source_layer_id);
        if (g_->has(p(i, cb))) {
            const auto ref = g_->ids(p(i, cb));
            const int64_t w = static_cast<int64_t>(ref.size()) / T;
            for (int64_t t = 0; t < T; ++t) {
                const bool same =
                    row_set(probes.candidate_blocks, c.candidate_topk_blocks, t) == row_set(ref, w, t);
                picks_differ += !same;
                if (strict) {
                    EXPECT_TRUE(same) << "candidate blocks t " << t;
                }
            }
        }
        const auto ref = g_->f32(p(i, "prefill_logits"));
        ASSERT_EQ(ref.size(), logits.size());
        const int64_t V = m->vocab_size();
        // The last position's argmax is the first greedy token: exact on every prompt.
        EXPECT_EQ(argmax(logits.data() + (T - 1) * V, V), g_->ids(p(i, "gen_tokens"))[0]);
        const double e = rel_err(logits.data(), ref.data(), ref.size());
        if (strict) {
            worst = std::max(worst, e);
            EXPECT_LE(e, kLogitTol) << "prefill logits max|Δ|/max|ref| = " << e;
        } else {
            std::printf(
                "[%s] prompt %d (%lld tokens, not compared stage by stage): prefill logits rel err %.3g, "
                "%lld differing pick rows, first hidden divergence: %s\n",
                GetParam().c_str(), i, static_cast<long long>(T), e, static_cast<long long>(picks_differ),
                first_divergence.empty() ? "none (or not stored)" : first_divergence.c_str());
        }
    }
    std::printf(
        "[%s] prefill, prompts of <= %lld tokens: max|Δ logit|/max|ref| = %.3g, hidden streams %.3g\n",
        GetParam().c_str(), static_cast<long long>(kStrictLen), worst, worst_hidden);
}

// Prefill (one shot or in chunks of 1 (prompts up to 64 tokens), 3, 7, 64) then greedy decode through the
// paged KV state (block size 16): the 32 golden tokens on every prompt.
TEST_P(V41Goldens, GreedyDecodeGivesTheGoldenTokens) {
    auto m = load(GetParam(), 16, 24);
    ASSERT_TRUE(m);
    const int64_t V = m->vocab_size();
    for (int64_t chunk : {0, 1, 3, 7, 64}) {
        double worst = 0;
        for (int i = 0; i < g_->num_prompts(); ++i) {
            SCOPED_TRACE("prompt " + std::to_string(i) + " chunk " + std::to_string(chunk));
            if (chunk == 1 && g_->ids(p(i, "ids")).size() > 64) continue; // 300 single-token steps: too slow
            SequenceRunner run(m.get(), 0, iota_blocks(0, 24));
            std::vector<float> logits;
            ASSERT_TRUE(run.feed(g_->ids(p(i, "ids")), chunk, false, &logits).ok());
            const auto gen = g_->ids(p(i, "gen_tokens"));
            const auto steps = g_->f32(p(i, "step_logits"));
            ASSERT_EQ(gen.size(), 32u);
            for (size_t s = 0; s < gen.size(); ++s) {
                worst = std::max(worst, rel_err(logits.data(), steps.data() + s * V, V));
                const int32_t tok = argmax(logits.data(), V);
                ASSERT_EQ(tok, gen[s]) << "step " << s;
                if (s + 1 < gen.size()) {
                    ASSERT_TRUE(run.feed({tok}, 0, false, &logits).ok());
                }
            }
        }
        std::printf("[%s] prefill chunk %lld: 9 prompts x 32 greedy tokens identical, max step logit rel err "
                    "%.3g\n",
                    GetParam().c_str(), static_cast<long long>(chunk), worst);
    }
}

// All 9 prompts as one ragged batch (one slot and 24 blocks each), then 32 batched decode steps: every
// sequence gives its golden tokens.
TEST_P(V41Goldens, RaggedBatchGivesTheGoldenTokens) {
    const int n = g_->num_prompts();
    auto m = load(GetParam(), 16, 24 * n, n);
    ASSERT_TRUE(m);
    const int64_t V = m->vocab_size();
    ForwardBatch b;
    for (int i = 0; i < n; ++i) {
        const auto ids = g_->ids(p(i, "ids"));
        SequenceChunk ch;
        ch.seq_id = i;
        ch.slot = i;
        ch.num_tokens = static_cast<int32_t>(ids.size());
        ch.token_offset = static_cast<int32_t>(b.token_ids.size());
        ch.block_table = iota_blocks(24 * i, 24);
        ch.reset_slot = true;
        for (size_t t = 0; t < ids.size(); ++t) {
            b.token_ids.push_back(ids[t]);
            b.positions.push_back(static_cast<int64_t>(t));
        }
        b.logits_rows.push_back(static_cast<int32_t>(b.token_ids.size() - 1));
        b.chunks.push_back(ch);
    }
    std::vector<float> logits(n * V);
    ASSERT_TRUE(m->forward(b, logits.data()).ok());
    std::vector<std::vector<int32_t>> gen(n);
    for (int i = 0; i < n; ++i) gen[i] = g_->ids(p(i, "gen_tokens"));
    ForwardBatch d;
    d.chunks = b.chunks;
    d.token_ids.resize(n);
    d.positions.resize(n);
    for (int i = 0; i < n; ++i) {
        d.chunks[i].num_tokens = 1;
        d.chunks[i].token_offset = i;
        d.chunks[i].reset_slot = false;
        d.chunks[i].start_pos = b.chunks[i].num_tokens;
        d.logits_rows.push_back(i);
    }
    for (int s = 0; s < 32; ++s) {
        for (int i = 0; i < n; ++i) {
            const int32_t tok = argmax(logits.data() + i * V, V);
            ASSERT_EQ(tok, gen[i][s]) << "prompt " << i << " step " << s;
            d.token_ids[i] = tok;
            d.positions[i] = d.chunks[i].start_pos;
        }
        if (s + 1 == 32) break;
        ASSERT_TRUE(m->forward(d, logits.data()).ok());
        for (int i = 0; i < n; ++i) ++d.chunks[i].start_pos;
    }
}

// A prefix-cache hit: sequence A (a golden prompt) fills its blocks; sequence B, in another slot, shares A's
// first blocks (restore_slot_from_block: the n-gram history comes from the last shared block's snapshot)
// and feeds only the rest. B gives the golden tokens, its prefill logits those of a solo run.
TEST_P(V41Goldens, PrefixHitGivesTheGoldenTokens) {
    auto m = load(GetParam(), 16, 48, 2);
    ASSERT_TRUE(m);
    const int64_t V = m->vocab_size();
    for (int i : {6, 7}) { // 17 and 64 tokens: 1 and 3 shared blocks
        SCOPED_TRACE("prompt " + std::to_string(i));
        const auto ids = g_->ids(p(i, "ids"));
        const int64_t shared = (static_cast<int64_t>(ids.size()) - 1) / 16 * 16;
        ASSERT_GT(shared, 0);
        SequenceRunner a(m.get(), 0, iota_blocks(0, 24));
        std::vector<float> la;
        ASSERT_TRUE(a.feed(ids, 5, false, &la).ok());
        std::vector<int32_t> blocks_b = iota_blocks(24, 24);
        for (int64_t k = 0; k < shared / 16; ++k) blocks_b[k] = static_cast<int32_t>(k); // A's blocks
        SequenceRunner b(m.get(), 1, blocks_b, 1);
        b.advance(shared);
        const std::vector<int32_t> rest(ids.begin() + shared, ids.end());
        ForwardBatch fb = b.next_batch(rest, false);
        fb.chunks[0].reset_slot = true;
        fb.chunks[0].restore_slot_from_block = true;
        std::vector<float> logits(V);
        ASSERT_TRUE(m->forward(fb, logits.data()).ok());
        b.advance(static_cast<int64_t>(rest.size()));
        const double e = rel_err(logits.data(), la.data(), V);
        EXPECT_LE(e, kLogitTol) << "prefix hit vs solo: last prefill logits";
        const auto gen = g_->ids(p(i, "gen_tokens"));
        for (size_t s = 0; s < 16; ++s) {
            const int32_t tok = argmax(logits.data(), V);
            ASSERT_EQ(tok, gen[s]) << "step " << s;
            ASSERT_TRUE(b.feed({tok}, 0, false, &logits).ok());
        }
    }
}

// The probe recorder (generate --dump-probes) over a chunked prefill of prompt 6 writes the golden key
// names, with the golden hash ids and hidden streams.
TEST_P(V41Goldens, ProbeRecorderWritesGoldenKeys) {
    auto m = load(GetParam(), 16, 4);
    ASSERT_TRUE(m);
    const auto ids = g_->ids(p(6, "ids"));
    auto rec = m->attach_probe_recorder();
    ASSERT_TRUE(rec);
    SequenceRunner run(m.get(), 0, iota_blocks(0, 4));
    std::vector<float> logits;
    for (size_t s = 0; s < ids.size(); s += 5) {
        const std::vector<int32_t> part(ids.begin() + s, ids.begin() + std::min(ids.size(), s + 5));
        ASSERT_TRUE(run.feed(part, 0, false, &logits).ok());
        rec->record(part);
    }
    const std::string path = (std::filesystem::temp_directory_path() / ("v41_probes_" + GetParam())).string();
    ASSERT_TRUE(rec->write(path).ok());
    rec.reset();
    auto f = weights::SafetensorsFile::open(path, "probes");
    ASSERT_TRUE(f.ok()) << f.status().to_string();
    auto get_f32 = [&](const std::string& name) {
        for (const auto& e : (*f)->header().tensors)
            if (e.name == name) {
                std::vector<float> v(e.shape.numel());
                std::memcpy(v.data(), (*f)->data(e), v.size() * 4);
                return v;
            }
        ADD_FAILURE() << name << " missing";
        return std::vector<float>();
    };
    auto get_i64 = [&](const std::string& name) {
        for (const auto& e : (*f)->header().tensors)
            if (e.name == name) {
                std::vector<int64_t> v(e.shape.numel());
                std::memcpy(v.data(), (*f)->data(e), v.size() * 8);
                return std::vector<int32_t>(v.begin(), v.end());
            }
        ADD_FAILURE() << name << " missing";
        return std::vector<int32_t>();
    };
    const int64_t T = static_cast<int64_t>(ids.size());
    EXPECT_EQ(get_i64("ids"), ids);
    for (int64_t layer : m->config().engram.layer_ids) {
        const auto ref = g_->ids(p(6, "engram_hash." + std::to_string(layer)));
        EXPECT_EQ(get_i64("engram_hash." + std::to_string(layer)),
                  std::vector<int32_t>(ref.begin(), ref.begin() + T * m->config().engram.n_hash_cols()));
    }
    for (int64_t l = 0; l < m->config().num_hidden_layers; ++l) {
        const auto ref = g_->f32(p(6, "hidden." + std::to_string(l)));
        const auto got = get_f32("hidden." + std::to_string(l));
        ASSERT_EQ(got.size(), ref.size());
        EXPECT_LE(rel_err(got.data(), ref.data(), ref.size()), kLogitTol) << "layer " << l;
    }
    const auto picks = get_i64("index_topk.3"), ref = g_->ids(p(6, "index_topk.3"));
    for (int64_t t = 0; t < T; ++t)
        EXPECT_EQ(row_set(picks, m->config().index_topk, t), row_set(ref, ref.size() / T, t)) << "t " << t;
    std::filesystem::remove(path);
}

TEST(V41Model, RejectsBadBatches) {
    auto m = load("tiny-v41", 16, 4);
    ASSERT_TRUE(m);
    ForwardBatch b;
    b.token_ids = {5, 6};
    b.positions = {8, 9};
    SequenceChunk ch;
    ch.num_tokens = 2;
    ch.start_pos = 8;
    ch.block_table = {0, 1};
    ch.reset_slot = true;
    ch.restore_slot_from_block = true; // not at a block boundary
    b.chunks.push_back(ch);
    b.logits_rows = {1};
    std::vector<float> logits(m->vocab_size());
    core::Status s = m->forward(b, logits.data());
    EXPECT_FALSE(s.ok());
    EXPECT_NE(s.message().find("block boundary"), std::string::npos) << s.message();
    b.chunks[0].restore_slot_from_block = false;
    b.token_ids[1] = 9999;
    s = m->forward(b, logits.data());
    EXPECT_NE(s.message().find("token id 9999"), std::string::npos) << s.message();
    EXPECT_FALSE(m->kv_geometry(15).ok()); // not a multiple of the compression ratio 2
    auto g = m->kv_geometry(16);
    ASSERT_TRUE(g.ok());
    // 5 layers x 16 positions x 64 window floats + (8 ratio-2 entries of source 1 + 16 ratio-1 entries of
    // source 3) x (64 + 32) floats: only the KV sources own compressed entries and indexer keys; and the
    // n-gram history at the block's end (count + N - 1 ids).
    EXPECT_EQ(g->bytes_per_block, (5 * 16 * 64 + (8 + 16) * (64 + 32)) * 4 + 3 * 8); // + n-gram snapshot
}

// Hash data computed from another tokenizer than the checkpoint's tokenizer.json is rejected at load.
TEST(V41Model, RejectsEngramHashDataOfAnotherTokenizer) {
    namespace fs = std::filesystem;
    const fs::path dir = fs::temp_directory_path() / "v41_other_tokenizer";
    fs::remove_all(dir);
    fs::create_directories(dir);
    for (const char* f : {"config.json", "model.safetensors", "engram_hash.safetensors"})
        fs::copy_file(source_path(std::string("models/tiny-v41/") + f), dir / f);
    fs::copy_file(source_path("models/tiny-v41/tokenizer.json"), dir / "tokenizer.json");
    std::ofstream(dir / "tokenizer.json", std::ios::app) << "\n"; // another tokenizer file
    auto m = DeepseekV41Model::load(dir.string());
    ASSERT_FALSE(m.ok());
    EXPECT_NE(m.status().message().find("engram_hash.safetensors"), std::string::npos)
        << m.status().message();
    EXPECT_NE(m.status().message().find("tokenizer"), std::string::npos) << m.status().message();
    fs::remove(dir / "tokenizer.json"); // without a tokenizer.json nothing to check against: loads
    EXPECT_TRUE(DeepseekV41Model::load(dir.string()).ok());
    fs::remove_all(dir);
}

// The KV pools hold F32 values on the fake-quant grids (docs/deepseek-v41-model.md, "Cache storage"). Storing
// them narrow (FP8 / FP4 codes + one scale byte per block) would be lossless: every value the quantizers
// write is exactly code × scale, and the scale itself is exact in its byte format (ue8m0 / e4m3).
TEST(V41CacheStorage, NarrowFormatsHoldTheFakeQuantValuesExactly) {
    std::mt19937 rng(4141);
    std::normal_distribution<float> normal(0.f, 1.f);
    std::uniform_real_distribution<float> log_mag(-12.f, 6.f);
    struct Case {
        int64_t n, block;
        bool fp4, e4m3_scales;
    };
    for (const Case c : {Case{64, 32, false, false}, Case{512, 32, false, false}, Case{64, 16, true, true},
                         Case{512, 16, true, true}, Case{32, 32, true, false}, Case{128, 32, true, false}}) {
        const int64_t rows = 64;
        std::vector<float> x(rows * c.n);
        for (int64_t r = 0; r < rows; ++r) {
            const float mag = std::exp2(log_mag(rng)); // rows from ~2e-4 to 64
            for (int64_t j = 0; j < c.n; ++j) x[r * c.n + j] = mag * normal(rng) * (j % 7 == 0 ? 0.01f : 1.f);
        }
        x[0] = 0.f; // a zero, and a block of zeros
        std::fill(x.begin() + c.n, x.begin() + c.n + c.block, 0.f);
        std::vector<float> y = x;
        if (c.fp4) {
            kernels::ref::fake_quant_fp4_block(y.data(), rows, c.n, c.block, c.e4m3_scales);
        } else {
            kernels::ref::fake_quant_fp8_block(y.data(), rows, c.n, c.block);
        }
        int64_t checked = 0;
        for (int64_t b = 0; b < rows * c.n / c.block; ++b) {
            float amax = 0.f;
            for (int64_t j = 0; j < c.block; ++j) amax = std::max(amax, std::fabs(x[b * c.block + j]));
            // The scale the quantizer used, and its one-byte form.
            float scale = 0.f;
            if (!c.fp4) {
                scale = kernels::ref::pow2_ceil_scale(std::max(amax, 1e-4f) * (1.0f / 448.0f));
            } else if (c.e4m3_scales) {
                scale = core::fp8_e4m3_to_f32(core::f32_to_fp8_e4m3(std::max(amax, 6.0f * 0x1p-9f) / 6.0f));
            } else {
                scale = kernels::ref::pow2_ceil_scale(std::max(amax, 6.0f * 0x1p-126f) * (1.0f / 6.0f));
            }
            const float scale_back = c.e4m3_scales
                                         ? core::fp8_e4m3_to_f32(core::f32_to_fp8_e4m3(scale))
                                         : core::e8m0_to_f32(static_cast<uint8_t>(std::ilogb(scale) + 127));
            ASSERT_EQ(core::f32_to_bits(scale_back), core::f32_to_bits(scale)) << "block " << b;
            for (int64_t j = 0; j < c.block; ++j) {
                const float v = y[b * c.block + j];
                const float back = c.fp4 ? core::fp4_e2m1_to_f32(core::f32_to_fp4_e2m1(v / scale)) * scale
                                         : core::fp8_e4m3_to_f32(core::f32_to_fp8_e4m3(v / scale)) * scale;
                ASSERT_EQ(core::f32_to_bits(back), core::f32_to_bits(v))
                    << "n " << c.n << " block " << b << " element " << j << ": " << v << " vs " << back;
                ++checked;
            }
        }
        EXPECT_EQ(checked, rows * c.n);
    }
}

INSTANTIATE_TEST_SUITE_P(Tiny, V41Goldens, ::testing::Values("tiny-v41", "tiny-v41-fp8"));

} // namespace
} // namespace deepinfer::model::deepseek_v41
