// The engine over the real tiny DeepSeek V4 (models/tiny-v4): many requests of mixed lengths through a pool
// small enough to force preemptions, with several token budgets and prefix caching on and off; every
// request's greedy tokens must equal its solo run, and the transformers goldens where they exist. Seeded
// sampled requests must give the same tokens alone and in a batch.
// TinyV4Fast.* is the quick subset (label engine); TinyV4Slow.* the full acceptance (label slow).

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <set>

#include "engine/engine.h"
#include "engine_harness.h"
#include "model/deepseek_v4/model.h"
#include "weights/safetensors.h"

using namespace deepinfer;
using namespace deepinfer::engine;
using namespace deepinfer::engine::testing;
using model::deepseek_v4::DeepseekV4Model;

namespace {

std::string source_path(const std::string& rel) {
    return std::string(DEEPINFER_SOURCE_DIR) + "/" + rel;
}

DeepseekV4Model& tiny() {
    static std::unique_ptr<DeepseekV4Model> m = [] {
        auto r = DeepseekV4Model::load(source_path("models/tiny-v4"));
        EXPECT_TRUE(r.ok()) << r.status().to_string();
        return r.ok() ? std::move(*r) : nullptr;
    }();
    return *m;
}

EngineConfig pool(int64_t blocks, int32_t budget, bool prefix, int32_t max_seqs = 16) {
    EngineConfig c;
    c.block_size = 16; // a multiple of the tiny model's ratios (4, 8)
    c.num_kv_blocks = blocks;
    c.max_num_seqs = max_seqs;
    c.max_num_batched_tokens = budget;
    c.enable_prefix_caching = prefix;
    return c;
}

RunResult run(const EngineConfig& c, const std::vector<Request>& reqs) {
    auto engine = LLMEngine::create(&tiny(), c);
    EXPECT_TRUE(engine.ok()) << engine.status().to_string();
    if (!engine.ok()) return {};
    return run_engine(**engine, reqs);
}

// Each request alone in an engine with room to spare: the reference. Cached per request id.
const std::vector<int32_t>& solo(const Request& q) {
    static std::map<std::string, std::vector<int32_t>> cache;
    auto it = cache.find(q.id);
    if (it != cache.end()) return it->second;
    RunResult r = run(pool(64, 512, false, 4), {q});
    return cache[q.id] = r.tokens[q.id].empty() ? std::vector<int32_t>{} : r.tokens[q.id][0];
}

std::vector<Request> workload(int count, int max_prompt, int max_new, uint32_t seed) {
    auto reqs = mixed_workload(count, max_prompt, max_new, 510, seed);
    for (Request& q : reqs) {
        q.id = "w" + std::to_string(seed) + "_" + q.id;
        for (int32_t& t : q.prompt_ids) t += 2; // [2, 512): no BOS / EOS in prompts
    }
    return reqs;
}

void expect_solo(const RunResult& r, const std::vector<Request>& reqs) {
    int mismatches = 0;
    for (const Request& q : reqs) {
        const auto& got = r.tokens.at(q.id)[0];
        if (got != solo(q)) {
            ++mismatches;
            ADD_FAILURE() << q.id << " (prompt " << q.prompt_ids.size() << ") differs from its solo run";
        }
    }
    EXPECT_EQ(mismatches, 0);
}

// Golden prompts of transformers with their greedy continuations.
std::vector<std::pair<Request, std::vector<int32_t>>> golden_requests() {
    std::vector<std::pair<Request, std::vector<int32_t>>> out;
    auto f = weights::SafetensorsFile::open(source_path("tests/fixtures/tiny-v4/goldens.safetensors"),
                                            "goldens.safetensors");
    EXPECT_TRUE(f.ok());
    if (!f.ok()) return out;
    std::map<std::string, const weights::HeaderEntry*> index;
    for (const auto& e : (*f)->header().tensors) index[e.name] = &e;
    auto ids = [&](const std::string& name) {
        const auto* e = index.at(name);
        std::vector<int32_t> v(e->shape.numel());
        const int64_t* p = static_cast<const int64_t*>((*f)->data(*e));
        for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int32_t>(p[i]);
        return v;
    };
    for (int i = 0; index.count("prompt." + std::to_string(i) + ".ids"); ++i) {
        std::string gen = "prompt." + std::to_string(i) + ".gen_tokens";
        if (!index.count(gen)) continue;
        Request q;
        q.id = "golden" + std::to_string(i);
        q.prompt_ids = ids("prompt." + std::to_string(i) + ".ids");
        auto want = ids(gen);
        q.params.temperature = 0.0f;
        q.params.ignore_eos = true; // the goldens run a fixed number of steps
        q.params.max_tokens = static_cast<int32_t>(want.size());
        out.emplace_back(std::move(q), std::move(want));
    }
    return out;
}

TEST(TinyV4Fast, GoldensAndMixedRequestsUnderPreemption) {
    auto goldens = golden_requests();
    ASSERT_FALSE(goldens.empty());
    std::vector<Request> reqs = workload(10, 120, 24, 17);
    for (auto& [q, want] : goldens) reqs.push_back(q);
    RunResult r = run(pool(14, 16, true, 8), reqs); // 224 positions for ~1000 requested: preempts
    ASSERT_TRUE(r.ok);
    for (auto& [q, want] : goldens) EXPECT_EQ(r.tokens.at(q.id)[0], want) << q.id << " vs transformers";
    expect_solo(r, workload(10, 120, 24, 17));
    EXPECT_GT(r.counters.preemptions, 0);
    std::printf("fast: %lld steps, %lld preemptions, prefix hit rate %.3f\n", (long long)r.steps,
                (long long)r.counters.preemptions, r.counters.prefix_hit_rate());
}

TEST(TinyV4Fast, StaticShapeBucketsDoNotChangeTokens) {
    auto reqs = workload(8, 90, 12, 31);
    EngineConfig c = pool(40, 48, true, 8);
    c.token_buckets = {8, 16, 32, 48};
    RunResult r = run(c, reqs);
    ASSERT_TRUE(r.ok);
    EXPECT_GT(r.padding_tokens, 0);
    expect_solo(r, reqs);
}

TEST(TinyV4Fast, SeededSamplingIsBatchInvariant) {
    std::vector<Request> mine;
    for (uint64_t seed : {1, 2}) {
        Request q = workload(1, 50, 1, 100 + uint32_t(seed))[0];
        q.id = "seeded" + std::to_string(seed);
        q.params.temperature = 0.8f;
        q.params.top_p = 0.9f;
        q.params.seed = seed;
        q.params.max_tokens = 16;
        mine.push_back(q);
    }
    std::vector<Request> crowd = workload(8, 80, 16, 23);
    crowd.insert(crowd.begin() + 3, mine.begin(), mine.end());
    RunResult together = run(pool(12, 32, true, 6), crowd);
    ASSERT_TRUE(together.ok);
    EXPECT_GT(together.counters.preemptions, 0); // the seeded ones may be among the recomputed
    for (const Request& q : mine) {
        RunResult alone = run(pool(64, 512, false, 4), {q});
        EXPECT_EQ(together.tokens.at(q.id)[0], alone.tokens.at(q.id)[0]) << q.id;
    }
}

TEST(TinyV4Fast, NGreaterThanOneForksMatchTheUnforkedRun) {
    Request q = workload(1, 1, 1, 5)[0];
    q.id = "fork";
    q.prompt_ids.assign(37, 0); // 37 = 2 full blocks + a shared partial block (copy-on-write)
    for (int i = 0; i < 37; ++i) q.prompt_ids[i] = 2 + (i * 29) % 510;
    q.params.n = 3;
    q.params.temperature = 1.0f;
    q.params.seed = 77;
    q.params.max_tokens = 12;
    q.params.ignore_eos = true;
    RunResult forked = run(pool(64, 64, true, 8), {q});  // forks share the prompt's blocks
    RunResult serial = run(pool(64, 64, false, 1), {q}); // one running sequence: each recomputes
    ASSERT_TRUE(forked.ok && serial.ok);
    EXPECT_EQ(forked.tokens.at("fork"), serial.tokens.at("fork"));
    std::set<std::vector<int32_t>> distinct(forked.tokens.at("fork").begin(), forked.tokens.at("fork").end());
    EXPECT_GT(distinct.size(), 1u);
}

TEST(TinyV4Fast, PromptLogprobsMatchTheGoldenPrefillLogits) {
    auto f = weights::SafetensorsFile::open(source_path("tests/fixtures/tiny-v4/goldens.safetensors"),
                                            "goldens.safetensors");
    ASSERT_TRUE(f.ok());
    const weights::HeaderEntry *ids_e = nullptr, *logits_e = nullptr;
    for (const auto& e : (*f)->header().tensors) {
        if (e.name == "prompt.0.ids") ids_e = &e;
        if (e.name == "prompt.0.prefill_logits") logits_e = &e;
    }
    ASSERT_TRUE(ids_e && logits_e);
    Request q;
    q.id = "plp";
    const int64_t* ip = static_cast<const int64_t*>((*f)->data(*ids_e));
    for (int64_t i = 0; i < ids_e->shape.numel(); ++i) q.prompt_ids.push_back(static_cast<int32_t>(ip[i]));
    const float* ref = static_cast<const float*>((*f)->data(*logits_e)); // [L, V]
    const int64_t V = tiny().vocab_size();
    q.params.temperature = 0.0f;
    q.params.max_tokens = 1;
    q.params.prompt_logprobs = 1;
    auto engine = LLMEngine::create(&tiny(), pool(64, 5, true)); // prompt in chunks of 5
    ASSERT_TRUE(engine.ok());
    RunResult r = run_engine(**engine, {q});
    ASSERT_TRUE(r.ok);
    ASSERT_EQ(r.prompt_logprobs.at("plp").size(), q.prompt_ids.size());
    for (size_t i = 1; i < q.prompt_ids.size(); ++i) {
        const float* row = ref + (i - 1) * V;
        double m = row[0], z = 0;
        for (int64_t v = 1; v < V; ++v) m = std::max<double>(m, row[v]);
        for (int64_t v = 0; v < V; ++v) z += std::exp(double(row[v]) - m);
        double want = row[q.prompt_ids[i]] - m - std::log(z);
        ASSERT_TRUE(r.prompt_logprobs.at("plp")[i].has_value());
        EXPECT_NEAR(r.prompt_logprobs.at("plp")[i]->logprob, want, 1e-3) << i;
    }
}

struct Case {
    int32_t budget;
    bool prefix;
};
class TinyV4Slow : public ::testing::TestWithParam<Case> {};

TEST_P(TinyV4Slow, SixtyFourMixedRequestsMatchTheirSoloRuns) {
    auto reqs = workload(64, 400, 64, 4242);
    auto goldens = golden_requests();
    for (auto& [q, want] : goldens) reqs.push_back(q);
    RunResult r = run(pool(40, GetParam().budget, GetParam().prefix), reqs); // 640 positions
    ASSERT_TRUE(r.ok);
    for (auto& [q, want] : goldens) EXPECT_EQ(r.tokens.at(q.id)[0], want) << q.id << " vs transformers";
    expect_solo(r, workload(64, 400, 64, 4242));
    EXPECT_GT(r.counters.preemptions, 0);
    std::printf(
        "budget %d prefix %d: %zu requests (%zu with goldens), %lld steps, %lld preemptions, prefix hit "
        "rate %.3f\n",
        GetParam().budget, GetParam().prefix, reqs.size(), goldens.size(), (long long)r.steps,
        (long long)r.counters.preemptions, r.counters.prefix_hit_rate());
}

INSTANTIATE_TEST_SUITE_P(Budgets, TinyV4Slow,
                         ::testing::Values(Case{16, true}, Case{64, true}, Case{512, true}, Case{16, false},
                                           Case{64, false}, Case{512, false}));

TEST(TinyV4Slow, SharedPrefixHitsWithUnchangedTokens) {
    auto reqs = workload(16, 60, 16, 808);
    auto prefix = workload(1, 1, 1, 9)[0].prompt_ids;
    prefix.clear();
    for (int i = 0; i < 150; ++i) prefix.push_back(2 + (i * 37) % 510);
    for (Request& q : reqs) q.prompt_ids.insert(q.prompt_ids.begin(), prefix.begin(), prefix.end());
    for (bool on : {true, false}) {
        RunResult r = run(pool(200, 64, on), reqs);
        ASSERT_TRUE(r.ok);
        expect_solo(r, reqs);
        std::printf("shared prefix, caching %d: hit rate %.3f\n", on, r.counters.prefix_hit_rate());
        if (on) {
            EXPECT_GT(r.counters.prefix_hit_rate(), 0.3);
        } else {
            EXPECT_EQ(r.counters.prefix_hit_tokens, 0);
        }
    }
}

} // namespace
