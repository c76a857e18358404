// The 1e-4 logit point of V4.1 with the reference's own rounding at its near-ties
// (docs/deepseek-v41-model.md, "The 1e-4 logit point"). tests/fixtures/tiny-v41*/near_ties.safetensors
// (tools/oracle/near_ties_v41.py) lists, per golden prompt, every cache fake-quant decision (element or block
// scale) of the reference's golden run whose input lay within 1e-4 (amax-relative) of a rounding boundary,
// with the reference's choice. With that table (QuantTieOverride, model/deepseek_v41/quant_ties.h) the engine
// takes the reference's choice there and its own everywhere else; the table is checked both ways (an unlisted
// near-boundary element of ours, a listed element ours is not near, a listed element never reached: all
// failures), so it cannot hide a real bug. Then the logits of the prefill and of the 31 decode steps are
// within 1e-4 max|ref| on every prompt, one shot and chunked. Without the table nothing changes
// (v41_goldens_test.cpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "golden_util.h"
#include "kernels/ref/cache_quant.h"
#include "model/deepseek_v41/model.h"
#include "model/deepseek_v41/quant_ties.h"
#include "model/sequence_runner.h"
#include "weights/safetensors.h"

namespace deepinfer::model::deepseek_v41 {
namespace {

using deepinfer::testing::Goldens;
using deepinfer::testing::source_path;

constexpr double kLogitTol = 1e-4; // max|Δ| / max|ref| (acceptance criterion)
constexpr double kMargin = 1e-4;   // the fixture's (its metadata "margin" and manifest "near_ties")

std::string p(int i, const std::string& key) {
    return "prompt." + std::to_string(i) + "." + key;
}

core::ThreadPool& single_thread() {
    static core::ThreadPool pool(1);
    return pool;
}

std::unique_ptr<DeepseekV41Model> load(const std::string& model) {
    auto m = DeepseekV41Model::load(source_path("models/" + model));
    EXPECT_TRUE(m.ok()) << m.status().to_string();
    if (!m.ok()) return nullptr;
    (*m)->set_thread_pool(&single_thread());
    KvCacheSpec spec;
    spec.block_size = 16;
    spec.num_blocks = 24;
    spec.num_slots = 1;
    EXPECT_TRUE((*m)->init_kv_cache(spec).ok());
    return std::move(*m);
}

std::vector<int32_t> blocks24() {
    std::vector<int32_t> b(24);
    for (int32_t i = 0; i < 24; ++i) b[i] = i;
    return b;
}

// The near-tie table of one prompt.
class NearTies {
public:
    explicit NearTies(const std::string& model) {
        auto f = weights::SafetensorsFile::open(
            source_path("tests/fixtures/" + model + "/near_ties.safetensors"), "near_ties.safetensors");
        EXPECT_TRUE(f.ok()) << f.status().to_string();
        if (!f.ok()) return;
        file_ = std::move(*f);
        const auto& md = file_->header().metadata;
        EXPECT_TRUE(md.count("margin") && md.at("margin") == "0.0001") << "near_ties.safetensors: margin";
    }
    bool ok() const { return file_ != nullptr; }
    QuantTieOverride table(int i) const {
        QuantTieOverride ov;
        ov.margin = kMargin;
        const weights::HeaderEntry* keys = find(p(i, "tie_keys"));
        const weights::HeaderEntry* vals = find(p(i, "tie_values"));
        EXPECT_TRUE(keys && vals) << "near_ties.safetensors: prompt " << i;
        if (!keys || !vals) return ov;
        EXPECT_EQ(keys->dtype, core::DType::kI64);
        EXPECT_EQ(vals->dtype, core::DType::kF32);
        const int64_t K = keys->shape.numel() / 4;
        EXPECT_EQ(vals->shape.numel(), K * 3);
        const auto* k = static_cast<const int64_t*>(file_->data(*keys));
        const auto* v = static_cast<const float*>(file_->data(*vals));
        for (int64_t r = 0; r < K; ++r) {
            QuantTieOverride::Tie t;
            t.boundary = v[r * 3];
            t.value = v[r * 3 + 1];
            EXPECT_LT(v[r * 3 + 2], kMargin);
            const bool fresh =
                ov.ties.emplace(QuantTieOverride::Key{k[r * 4], k[r * 4 + 1], k[r * 4 + 2], k[r * 4 + 3]}, t)
                    .second;
            EXPECT_TRUE(fresh) << "duplicate key at row " << r;
        }
        return ov;
    }

private:
    const weights::HeaderEntry* find(const std::string& name) const {
        for (const auto& e : file_->header().tensors)
            if (e.name == name) return &e;
        return nullptr;
    }
    std::unique_ptr<weights::SafetensorsFile> file_;
};

struct RunResult {
    double prefill = 0;       // every prefill position's logits against prefill_logits
    double steps = 0;         // the 32 step logits (prefill's last row, then the 31 decode forwards)
    bool tokens_equal = true; // every greedy token the golden one
    double worst() const { return std::max(prefill, steps); }
};

// The golden protocol: prefill (chunk <= 0: one shot), then the 31 decode forwards of the golden tokens.
RunResult run_prompt(DeepseekV41Model& m, const Goldens& g, int i, int64_t chunk) {
    RunResult res;
    const int64_t V = m.vocab_size();
    SequenceRunner run(&m, 0, blocks24());
    const auto ids = g.ids(p(i, "ids"));
    const int64_t T = static_cast<int64_t>(ids.size());
    std::vector<float> all;
    EXPECT_TRUE(run.feed(ids, chunk, true, &all).ok());
    const auto pre = g.f32(p(i, "prefill_logits"));
    EXPECT_EQ(all.size(), static_cast<size_t>(T * V));
    EXPECT_EQ(pre.size(), static_cast<size_t>(T * V));
    if (all.size() != static_cast<size_t>(T * V) || pre.size() != all.size()) return res;
    for (int64_t t = 0; t < T; ++t)
        res.prefill = std::max(res.prefill,
                               deepinfer::testing::max_rel_error(all.data() + t * V, pre.data() + t * V, V));
    std::vector<float> logits(all.end() - V, all.end());
    const auto gen = g.ids(p(i, "gen_tokens"));
    const auto steps = g.f32(p(i, "step_logits"));
    for (size_t s = 0; s < gen.size(); ++s) {
        res.steps =
            std::max(res.steps, deepinfer::testing::max_rel_error(logits.data(), steps.data() + s * V, V));
        res.tokens_equal = res.tokens_equal && argmax(logits.data(), V) == gen[s];
        if (s + 1 < gen.size()) {
            EXPECT_TRUE(run.feed({gen[s]}, 0, false, &logits).ok());
        }
    }
    return res;
}

// Every decision the table lists was reached, except indexer queries at positions that see no compressed
// entry ((p + 1) / ratio == 0): a one-shot prefill quantizes them (its forward emits entries), a chunk that
// emits none returns before scoring, as the reference's does; their scores are all masked either way.
void expect_table_clean(const QuantTieOverride& ov, const ModelConfig& c) {
    EXPECT_TRUE(ov.failures.empty()) << ov.failures.size() << " failures, first: " << ov.failures.front();
    std::vector<QuantTieOverride::Key> unused;
    for (const auto& k : ov.unused())
        if (!(k.kind == QuantTieOverride::kIndexerQ && (k.row + 1) / c.compress_ratios[k.layer] == 0))
            unused.push_back(k);
    EXPECT_TRUE(unused.empty()) << unused.size() << " listed decisions never reached, first: layer "
                                << unused.front().layer << " kind " << unused.front().kind << " row "
                                << unused.front().row << " element " << unused.front().element;
}

class V41NearTies : public ::testing::TestWithParam<std::string> {};

TEST_P(V41NearTies, LogitsWithinTolWithTheReferencesRoundingAtNearTies) {
    Goldens g(GetParam());
    NearTies nt(GetParam());
    ASSERT_TRUE(nt.ok());
    auto m = load(GetParam());
    ASSERT_TRUE(m);
    ASSERT_EQ(g.num_prompts(), 9);
    for (int64_t chunk : {0, 1, 3, 7, 64}) {
        double worst = 0, worst_without = 0;
        for (int i = 0; i < g.num_prompts(); ++i) {
            SCOPED_TRACE("prompt " + std::to_string(i) + " chunk " + std::to_string(chunk));
            if (chunk == 1 && g.ids(p(i, "ids")).size() > 64) continue; // 300 one-token steps: slow, as there
            QuantTieOverride ov = nt.table(i);
            const size_t listed = ov.ties.size();
            m->set_quant_ties(&ov);
            const RunResult with = run_prompt(*m, g, i, chunk);
            m->set_quant_ties(nullptr);
            EXPECT_TRUE(with.tokens_equal);
            EXPECT_LE(with.prefill, kLogitTol) << "prefill logits";
            EXPECT_LE(with.steps, kLogitTol) << "step logits";
            expect_table_clean(ov, m->config());
            worst = std::max(worst, with.worst());
            if (chunk == 0 || chunk == 7) { // without the table, for the record (not asserted here)
                const RunResult without = run_prompt(*m, g, i, chunk);
                worst_without = std::max(worst_without, without.worst());
                std::printf(
                    "[%s] chunk %lld prompt %d: %zu listed, %lld taken from the reference (%lld differ "
                    "from ours); max logit rel err, prefill / steps: %.3g / %.3g with, %.3g / %.3g without\n",
                    GetParam().c_str(), static_cast<long long>(chunk), i, listed,
                    static_cast<long long>(ov.applied), static_cast<long long>(ov.flipped), with.prefill,
                    with.steps, without.prefill, without.steps);
            }
        }
        std::printf("[%s] chunk %lld: every prompt, all prefill rows + 32 steps, max logit rel err %.3g with "
                    "the near-tie table%s\n",
                    GetParam().c_str(), static_cast<long long>(chunk), worst,
                    (chunk == 0 || chunk == 7) ? (", " + std::to_string(worst_without) + " without").c_str()
                                               : "");
    }
}

std::set<int32_t> row_set(const std::vector<int32_t>& v, int64_t w, int64_t t) {
    std::set<int32_t> out;
    for (int64_t k = 0; k < w; ++k)
        if (v[t * w + k] >= 0) out.insert(v[t * w + k]);
    return out;
}

// With the reference's rounding at its near-ties, the discrete decisions of a one-shot prefill are the
// reference's on EVERY prompt, the long ones included (v41_goldens_test compares them on prompts of <= 17
// tokens only, where no tie flips): router picks, the index sources' top-k picks and the candidate blocks,
// each row equal as a set.
TEST_P(V41NearTies, PicksEqualWithTheReferencesRoundingAtNearTies) {
    Goldens g(GetParam());
    NearTies nt(GetParam());
    ASSERT_TRUE(nt.ok());
    auto m = load(GetParam());
    ASSERT_TRUE(m);
    const ModelConfig& c = m->config();
    int64_t rows = 0;
    for (int i = 0; i < g.num_prompts(); ++i) {
        SCOPED_TRACE("prompt " + std::to_string(i));
        QuantTieOverride ov = nt.table(i);
        V41Probes probes;
        m->set_quant_ties(&ov);
        m->set_probes(&probes);
        SequenceRunner run(m.get(), 0, blocks24());
        const auto ids = g.ids(p(i, "ids"));
        const int64_t T = static_cast<int64_t>(ids.size());
        std::vector<float> logits;
        ASSERT_TRUE(run.feed(ids, 0, true, &logits).ok());
        m->set_probes(nullptr);
        m->set_quant_ties(nullptr);
        EXPECT_TRUE(ov.failures.empty()) << ov.failures.front();
        for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
            const std::string ls = std::to_string(l);
            const auto router = g.ids(p(i, "router." + ls));
            for (int64_t t = 0; t < T; ++t, ++rows)
                ASSERT_EQ(row_set(probes.router[l], c.num_experts_per_tok, t),
                          row_set(router, c.num_experts_per_tok, t))
                    << "router layer " << l << " t " << t;
            if (!g.has(p(i, "index_topk." + ls))) continue;
            const auto ref = g.ids(p(i, "index_topk." + ls));
            const int64_t w = static_cast<int64_t>(ref.size()) / T;
            for (int64_t t = 0; t < T; ++t, ++rows)
                ASSERT_EQ(row_set(probes.picks[l], c.index_topk, t), row_set(ref, w, t))
                    << "index top-k layer " << l << " t " << t;
        }
        const std::string cb = "candidate_blocks." + std::to_string(c.candidate_source_layer_id);
        if (g.has(p(i, cb))) {
            const auto ref = g.ids(p(i, cb));
            const int64_t w = static_cast<int64_t>(ref.size()) / T;
            for (int64_t t = 0; t < T; ++t, ++rows)
                ASSERT_EQ(row_set(probes.candidate_blocks, c.candidate_topk_blocks, t), row_set(ref, w, t))
                    << "candidate blocks t " << t;
        }
    }
    std::printf("[%s] router, index top-k and candidate-block rows equal as sets on every prompt: %lld\n",
                GetParam().c_str(), static_cast<long long>(rows));
}

// The checks bite: dropping a listed decision that this run reaches, or listing one that is not near a
// boundary, or moving a listed boundary, each make the table fail.
TEST_P(V41NearTies, TableMismatchesFail) {
    Goldens g(GetParam());
    NearTies nt(GetParam());
    ASSERT_TRUE(nt.ok());
    auto m = load(GetParam());
    ASSERT_TRUE(m);
    const int i = 6;
    QuantTieOverride full = nt.table(i);
    ASSERT_FALSE(full.ties.empty());
    { // a decision ours reached within margin / 2 of its boundary, dropped from the table
        QuantTieOverride ov = full;
        m->set_quant_ties(&ov);
        run_prompt(*m, g, i, 0);
        m->set_quant_ties(nullptr);
        expect_table_clean(ov, m->config());
        auto near = std::find_if(ov.ties.begin(), ov.ties.end(), [](const auto& kv) {
            return kv.second.used && kv.second.distance < kMargin / 2;
        });
        ASSERT_NE(near, ov.ties.end());
        QuantTieOverride dropped = full;
        dropped.ties.erase(near->first);
        m->set_quant_ties(&dropped);
        run_prompt(*m, g, i, 0);
        m->set_quant_ties(nullptr);
        ASSERT_FALSE(dropped.failures.empty());
        EXPECT_NE(dropped.failures.front().find("not listed"), std::string::npos) << dropped.failures.front();
    }
    { // a bogus entry: window KV, layer 0, position 0, an element with no near boundary in our run
        QuantTieOverride ov = full;
        for (int64_t e = 0; e < 64; ++e) {
            QuantTieOverride::Key k{0, QuantTieOverride::kWindowKv, 0, e};
            if (!ov.ties.count(k)) {
                ov.ties[k] = QuantTieOverride::Tie{100.5f, 100.0f};
                break;
            }
        }
        m->set_quant_ties(&ov);
        run_prompt(*m, g, i, 0);
        m->set_quant_ties(nullptr);
        EXPECT_FALSE(ov.failures.empty() && ov.unused().empty());
    }
    { // every listed boundary moved far (an element's by 1 in |q|, >= 1/448 amax_q; a scale's by 1%)
        QuantTieOverride ov = full;
        for (auto& [k, t] : ov.ties) t.boundary = k.element >= 0 ? t.boundary + 1.0f : t.boundary * 1.01f;
        m->set_quant_ties(&ov);
        run_prompt(*m, g, i, 0);
        m->set_quant_ties(nullptr);
        EXPECT_FALSE(ov.failures.empty());
        EXPECT_EQ(ov.applied, 0);
    }
    { // the table emptied: our near-boundary elements are unlisted
        QuantTieOverride ov = full;
        ov.ties.clear();
        m->set_quant_ties(&ov);
        run_prompt(*m, g, i, 0);
        m->set_quant_ties(nullptr);
        EXPECT_FALSE(ov.failures.empty());
    }
}

// With nothing near a boundary (margin 0) the hook quantizes exactly as kernels/ref/cache_quant.
TEST(V41QuantTies, EmptyTableAtMarginZeroEqualsThePlainQuantizers) {
    std::mt19937 rng(7);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    const int64_t rows = 40, n = 128;
    std::vector<int64_t> ids(rows);
    for (int64_t r = 0; r < rows; ++r) ids[r] = r;
    for (auto kind : {QuantTieOverride::kWindowKv, QuantTieOverride::kIndexerK,
                      QuantTieOverride::kCompressedKv, QuantTieOverride::kIndexerQ}) {
        std::vector<float> x(rows * n);
        for (int64_t r = 0; r < rows; ++r) {
            const float mag = std::ldexp(1.0f, static_cast<int>(r % 13) - 6);
            for (int64_t i = 0; i < n; ++i) x[r * n + i] = nd(rng) * mag;
        }
        std::vector<float> a = x, b = x;
        QuantTieOverride ov;
        ov.margin = 0;
        fake_quant_with_ties(a.data(), rows, n, kind, 0, ids.data(), ov);
        if (kind == QuantTieOverride::kWindowKv)
            kernels::ref::fake_quant_fp8_block(b.data(), rows, n, 32);
        else
            kernels::ref::fake_quant_fp4_block(b.data(), rows, n,
                                               kind == QuantTieOverride::kCompressedKv ? 16 : 32,
                                               kind == QuantTieOverride::kCompressedKv);
        EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0) << "kind " << kind;
        EXPECT_TRUE(ov.failures.empty());
        EXPECT_EQ(ov.applied, 0);
    }
}

INSTANTIATE_TEST_SUITE_P(Tiny, V41NearTies, ::testing::Values("tiny-v41", "tiny-v41-fp8"));

} // namespace
} // namespace deepinfer::model::deepseek_v41
