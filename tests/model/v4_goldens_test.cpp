// DeepSeek V4 against the transformers goldens, on both tiny checkpoints (BF16 and FP8/FP4).
// Metric for logits and hidden states: max|got - ref| <= 1e-4 * max|ref| (per prompt, per stage).
// Router indices: identical sets per token (weights matched by expert). Indexer top-k: equal as sets.
// Stages are compared in forward order, so a failure names the first one that diverges.

#include <cstdio>

#include "golden_util.h"
#include "model/sequence_runner.h"

namespace deepinfer::testing {
namespace {

using model::SequenceRunner;
using model::deepseek_v4::DeepseekV4Model;
using model::deepseek_v4::ForwardProbes;

class V4Goldens : public ::testing::TestWithParam<std::string> {
protected:
    void SetUp() override { g_ = std::make_unique<Goldens>(GetParam()); }
    std::string p(int i, const std::string& key) const { return "prompt." + std::to_string(i) + "." + key; }
    std::unique_ptr<Goldens> g_;
};

// Checks one prompt's probes stage by stage; returns "" or the first diverging stage.
std::string first_divergence(const Goldens& g, const std::string& pfx, const ForwardProbes& pr,
                             const model::deepseek_v4::ModelConfig& c, int64_t L, double* worst_hidden) {
    const int64_t K = c.num_experts_per_tok;
    for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
        const std::string s = std::to_string(l);
        const std::string ik = pfx + "indexer_topk." + s;
        if (g.has(ik)) {
            const int64_t k = g.shape(ik)[1];
            const auto ref = row_sets(g.ids(ik), L, k);
            const auto got = row_sets(pr.indexer_topk[l], L, c.index_topk);
            for (int64_t t = 0; t < L; ++t)
                if (ref[t] != got[t])
                    return "layer " + s + " indexer top-k (token " + std::to_string(t) + ")";
        }
        const auto ridx = g.ids(pfx + "router." + s);
        const auto rw = g.f32(pfx + "router_weights." + s);
        for (int64_t t = 0; t < L; ++t) {
            std::map<int32_t, float> ref, got;
            for (int64_t k = 0; k < K; ++k) {
                ref[ridx[t * K + k]] = rw[t * K + k];
                got[pr.router[l][t * K + k]] = pr.router_weights[l][t * K + k];
            }
            for (const auto& [e, w] : ref) {
                if (!got.count(e)) return "layer " + s + " router indices (token " + std::to_string(t) + ")";
                if (std::fabs(got[e] - w) > 1e-4 * std::max(1.0f, std::fabs(w)))
                    return "layer " + s + " router weights (token " + std::to_string(t) + ")";
            }
        }
        const double e = max_rel_error(pr.hidden[l], g.f32(pfx + "hidden." + s));
        *worst_hidden = std::max(*worst_hidden, e);
        if (e > kHiddenTol) return "layer " + s + " hidden streams (rel err " + std::to_string(e) + ")";
    }
    const double e = max_rel_error(pr.final_hidden, g.f32(pfx + "final_hidden"));
    *worst_hidden = std::max(*worst_hidden, e);
    if (e > kHiddenTol) return "final hidden (rel err " + std::to_string(e) + ")";
    return "";
}

// One-shot prefill of every golden prompt: probes stage by stage, then logits at every position.
TEST_P(V4Goldens, PrefillMatchesLayerByLayer) {
    auto m = load_model(GetParam(), 256, 1, 1);
    ASSERT_TRUE(m);
    ForwardProbes probes;
    m->set_probes(&probes);
    double worst = 0.0, worst_hidden = 0.0;
    const int n = g_->num_prompts();
    ASSERT_EQ(n, 9);
    for (int i = 0; i < n; ++i) {
        const auto ids = g_->ids(p(i, "ids"));
        const int64_t L = static_cast<int64_t>(ids.size());
        SequenceRunner run(m.get(), 0, {0});
        std::vector<float> logits;
        ASSERT_TRUE(run.feed(ids, 0, true, &logits).ok());
        const std::string where = first_divergence(*g_, p(i, ""), probes, m->config(), L, &worst_hidden);
        EXPECT_EQ(where, "") << "prompt " << i << " (length " << L << "): first diverging stage: " << where;
        const double e = max_rel_error(logits, g_->f32(p(i, "prefill_logits")));
        worst = std::max(worst, e);
        EXPECT_LE(e, kLogitTol) << "prompt " << i << ": prefill logits max|Δ|/max|ref| = " << e;
    }
    std::printf("[%s] prefill: max|Δ logit|/max|ref| = %.3g, hidden %.3g over %d prompts\n",
                GetParam().c_str(), worst, worst_hidden, n);
}

// Greedy decode over the slot state: 32 tokens identical, each step's logits within tolerance.
void check_decode(const Goldens& g, const std::string& pfx, SequenceRunner* run, std::vector<float> logits,
                  int64_t V, double* worst) {
    const auto gen = g.ids(pfx + "gen_tokens");
    const auto steps = g.f32(pfx + "step_logits");
    ASSERT_EQ(gen.size(), 32u);
    for (size_t s = 0; s < gen.size(); ++s) {
        const double e = max_rel_error(logits.data(), steps.data() + s * V, V);
        *worst = std::max(*worst, e);
        EXPECT_LE(e, kLogitTol) << pfx << " step " << s;
        const int32_t tok = model::argmax(logits.data(), V);
        ASSERT_EQ(tok, gen[s]) << pfx << " step " << s;
        if (s + 1 < gen.size()) {
            ASSERT_TRUE(run->feed({tok}, 0, false, &logits).ok());
        }
    }
}

TEST_P(V4Goldens, GreedyDecodeMatchesGoldens) {
    auto m = load_model(GetParam(), 16, 12, 1);
    ASSERT_TRUE(m);
    const int64_t V = m->vocab_size();
    double worst = 0.0;
    for (int i = 0; i < g_->num_prompts(); ++i) {
        SequenceRunner run(m.get(), 0, iota_blocks(0, 12));
        std::vector<float> logits;
        ASSERT_TRUE(run.feed(g_->ids(p(i, "ids")), 0, false, &logits).ok());
        check_decode(*g_, p(i, ""), &run, logits, V, &worst);
    }
    std::printf("[%s] decode: 9 prompts x 32 greedy tokens identical, max step logit rel err %.3g\n",
                GetParam().c_str(), worst);
}

// A prompt fed in chunks of 1, 3, 7 and 64 gives the one-shot logits at every position and the same tokens.
TEST_P(V4Goldens, ChunkedPrefillMatchesOneShot) {
    auto m = load_model(GetParam(), 16, 12, 1);
    ASSERT_TRUE(m);
    const int64_t V = m->vocab_size();
    double worst = 0.0;
    for (int64_t chunk : {1, 3, 7, 64}) {
        for (int i = 0; i < g_->num_prompts(); ++i) {
            SequenceRunner run(m.get(), 0, iota_blocks(0, 12));
            std::vector<float> logits;
            const auto ids = g_->ids(p(i, "ids"));
            ASSERT_TRUE(run.feed(ids, chunk, true, &logits).ok());
            const double e = max_rel_error(logits, g_->f32(p(i, "prefill_logits")));
            worst = std::max(worst, e);
            EXPECT_LE(e, kLogitTol) << "prompt " << i << " chunk " << chunk;
            std::vector<float> last(logits.end() - V, logits.end());
            check_decode(*g_, p(i, ""), &run, last, V, &worst);
        }
    }
    std::printf("[%s] chunked prefill (1, 3, 7, 64) + decode: max logit rel err %.3g\n", GetParam().c_str(),
                worst);
}

INSTANTIATE_TEST_SUITE_P(TinyV4, V4Goldens, ::testing::Values("tiny-v4", "tiny-v4-fp8"),
                         [](const auto& param_info) {
                             return param_info.param == "tiny-v4" ? "bf16" : "fp8_fp4";
                         });

} // namespace
} // namespace deepinfer::testing
