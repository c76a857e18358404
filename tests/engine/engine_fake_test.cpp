// The engine end to end against FakeModel: many requests through a small pool (preemptions), different
// token budgets, prefix caching on and off, static-shape padding; every result must equal the request's
// solo greedy continuation, and the engine's invariants must hold after every step.

#include <gtest/gtest.h>

#include "engine/engine.h"
#include "engine_harness.h"
#include "fake_model.h"

using namespace deepinfer;
using namespace deepinfer::engine;
using namespace deepinfer::engine::testing;

namespace {

constexpr int64_t kVocab = 64;

EngineConfig small_pool(int32_t budget, bool prefix) {
    EngineConfig c;
    c.block_size = 16;
    c.num_kv_blocks = 48; // 768 positions; one 400 + 64 request takes 29 blocks
    c.max_num_seqs = 16;
    c.max_num_batched_tokens = budget;
    c.enable_prefix_caching = prefix;
    return c;
}

void expect_solo(const RunResult& r, const std::vector<Request>& reqs) {
    for (const Request& q : reqs) {
        auto want = fake_greedy(q.prompt_ids, *q.params.max_tokens, kVocab, 0);
        ASSERT_EQ(r.tokens.at(q.id)[0], want) << q.id;
        std::string reason = want.back() == 0 ? "stop" : "length";
        EXPECT_EQ(r.finish.at(q.id)[0], reason) << q.id;
    }
}

struct Case {
    int32_t budget;
    bool prefix;
};

class MixedWorkload : public ::testing::TestWithParam<Case> {};

TEST_P(MixedWorkload, SmallPoolPreemptsAndEveryRequestMatchesItsSoloRun) {
    FakeModel model(kVocab);
    auto engine = LLMEngine::create(&model, small_pool(GetParam().budget, GetParam().prefix));
    ASSERT_TRUE(engine.ok()) << engine.status().to_string();
    auto reqs = mixed_workload(64, 400, 64, kVocab, 1234);
    RunResult r = run_engine(**engine, reqs);
    ASSERT_TRUE(r.ok);
    expect_solo(r, reqs);
    EXPECT_GT(r.counters.preemptions, 0) << "the pool was meant to be too small";
    EXPECT_GT(r.max_batch, 1);
    RecordProperty("preemptions", std::to_string(r.counters.preemptions));
    std::printf("budget %d prefix %d: %lld steps, %lld preemptions, prefix hit rate %.3f\n",
                GetParam().budget, GetParam().prefix, (long long)r.steps, (long long)r.counters.preemptions,
                r.counters.prefix_hit_rate());
}

INSTANTIATE_TEST_SUITE_P(Budgets, MixedWorkload,
                         ::testing::Values(Case{16, true}, Case{64, true}, Case{512, true}, Case{16, false},
                                           Case{64, false}, Case{512, false}));

TEST(EngineFake, SharedPrefixHitsTheCacheWithUnchangedTokens) {
    std::vector<Request> reqs = mixed_workload(24, 40, 16, kVocab, 77);
    std::vector<int32_t> prefix = mixed_workload(1, 1, 1, kVocab, 5)[0].prompt_ids;
    prefix.clear();
    for (int i = 0; i < 200; ++i) prefix.push_back(1 + (i * 7) % (kVocab - 1));
    for (Request& q : reqs) q.prompt_ids.insert(q.prompt_ids.begin(), prefix.begin(), prefix.end());
    for (bool on : {true, false}) {
        FakeModel model(kVocab);
        EngineConfig c = small_pool(64, on);
        c.num_kv_blocks = 200;
        auto engine = LLMEngine::create(&model, c);
        ASSERT_TRUE(engine.ok());
        RunResult r = run_engine(**engine, reqs);
        ASSERT_TRUE(r.ok);
        expect_solo(r, reqs);
        std::printf("shared prefix, caching %d: hit rate %.3f\n", on, r.counters.prefix_hit_rate());
        if (on) {
            EXPECT_GT(r.counters.prefix_hit_rate(), 0.5);
            int cached = 0;
            for (const auto& [id, o] : r.last) cached += o.cached_tokens > 0;
            EXPECT_GT(cached, 0);
        } else {
            EXPECT_EQ(r.counters.prefix_hit_tokens, 0);
        }
    }
}

TEST(EngineFake, StaticShapeBucketsPadIntoScratchWithoutChangingTokens) {
    FakeModel model(kVocab);
    EngineConfig c = small_pool(64, true);
    c.token_buckets = {8, 16, 32, 64};
    auto engine = LLMEngine::create(&model, c);
    ASSERT_TRUE(engine.ok());
    auto reqs = mixed_workload(16, 100, 20, kVocab, 99);
    RunResult r = run_engine(**engine, reqs);
    ASSERT_TRUE(r.ok);
    expect_solo(r, reqs);
    EXPECT_GT(model.padding_rows, 0);
}

TEST(EngineFake, ChunkedPrefillStaysUnderTheTokenBudget) {
    FakeModel model(kVocab);
    EngineConfig c = small_pool(32, false);
    auto engine = LLMEngine::create(&model, c);
    ASSERT_TRUE(engine.ok());
    auto reqs = mixed_workload(1, 1, 1, kVocab, 3);
    reqs[0].prompt_ids.assign(300, 5);
    reqs[0].params.max_tokens = 4;
    ASSERT_TRUE((*engine)->add_request(reqs[0]).ok());
    int prefill_steps = 0;
    while ((*engine)->has_work()) {
        ASSERT_TRUE((*engine)->step().ok());
        const StepMetrics& m = (*engine)->last_step_metrics();
        EXPECT_LE(m.num_prefill_tokens + m.num_decode_tokens, 32);
        prefill_steps += m.num_prefill_tokens > 0;
    }
    EXPECT_EQ(prefill_steps, (300 + 31) / 32);
}

TEST(EngineFake, RequestLargerThanTheWholePoolIsRejectedClearly) {
    FakeModel model(kVocab);
    EngineConfig c = small_pool(64, true);
    c.num_kv_blocks = 10; // 160 positions
    auto engine = LLMEngine::create(&model, c);
    ASSERT_TRUE(engine.ok());
    Request q;
    q.id = "big";
    q.prompt_ids.assign(150, 3);
    q.params.max_tokens = 30;
    core::Status st = (*engine)->add_request(q);
    EXPECT_EQ(st.code(), core::StatusCode::kResourceExhausted);
    EXPECT_NE(st.message().find("KV blocks"), std::string::npos) << st.message();
    q.params.max_tokens = 10; // 159 KV tokens: fits exactly
    EXPECT_TRUE((*engine)->add_request(q).ok());
    RunResult r = run_engine(**engine, {});
    EXPECT_TRUE(r.ok);
}

TEST(EngineFake, InvalidRequestsNameTheProblem) {
    FakeModel model(kVocab);
    EngineConfig c = small_pool(64, true);
    c.max_model_len = 500;
    auto engine = LLMEngine::create(&model, c);
    ASSERT_TRUE(engine.ok());
    Request q;
    q.id = "a";
    EXPECT_EQ((*engine)->add_request(q).code(), core::StatusCode::kInvalidArgument); // empty prompt
    q.prompt_ids = {1, 2, 999};
    EXPECT_NE((*engine)->add_request(q).message().find("999"), std::string::npos);
    q.prompt_ids = {1, 2};
    q.params.top_p = 0.0f;
    EXPECT_NE((*engine)->add_request(q).message().find("top_p"), std::string::npos);
    q.params.top_p = 1.0f;
    EXPECT_TRUE((*engine)->add_request(q).ok());
    EXPECT_NE((*engine)->add_request(q).message().find("duplicate"), std::string::npos);
    q.id = "b";
    q.params.max_tokens = 600;
    EXPECT_EQ((*engine)->add_request(q).code(), core::StatusCode::kOutOfRange);
}

TEST(EngineFake, BlockSizeMustSuitTheModel) {
    FakeModel model(kVocab);
    EngineConfig c = small_pool(64, true);
    c.block_size = 6; // not a multiple of the fake compression ratio 4
    EXPECT_FALSE(LLMEngine::create(&model, c).ok());
    c.block_size = 16;
    c.num_kv_blocks = 0;
    c.kv_cache_memory_bytes = (16 * 16) * 11 + 64 * 17; // 10 usable blocks + scratch, 16 + 1 slots
    auto engine = LLMEngine::create(&model, c);
    ASSERT_TRUE(engine.ok());
    EXPECT_EQ((*engine)->config().num_kv_blocks, 10);
}

TEST(EngineFake, AbortFreesEverythingAndReportsAbort) {
    FakeModel model(kVocab);
    auto engine = LLMEngine::create(&model, small_pool(64, true));
    ASSERT_TRUE(engine.ok());
    auto reqs = mixed_workload(8, 100, 50, kVocab, 11);
    for (auto& q : reqs) {
        q.params.max_tokens = 50;
        q.params.ignore_eos = true;
        ASSERT_TRUE((*engine)->add_request(q).ok());
    }
    for (int i = 0; i < 5; ++i) ASSERT_TRUE((*engine)->step().ok());
    EXPECT_TRUE((*engine)->abort("r3"));
    EXPECT_FALSE((*engine)->abort("nope"));
    bool saw = false;
    while ((*engine)->has_work()) {
        auto outs = (*engine)->step();
        ASSERT_TRUE(outs.ok());
        EXPECT_EQ((*engine)->check_invariants(), "");
        for (const auto& o : *outs)
            if (o.request_id == "r3") {
                saw = true;
                EXPECT_TRUE(o.finished);
                ASSERT_EQ(o.deltas.size(), 1u);
                EXPECT_EQ(o.deltas[0].finish_reason, FinishReason::kAbort);
            }
    }
    EXPECT_TRUE(saw);
    EXPECT_EQ((*engine)->last_step_metrics().kv_blocks_used, 0);
}

} // namespace

namespace {

TEST(EngineFake, StepMetricsDescribeTheStep) {
    FakeModel model(kVocab);
    EngineConfig c = small_pool(32, true);
    c.max_num_seqs = 4;
    auto engine = LLMEngine::create(&model, c);
    ASSERT_TRUE(engine.ok());
    auto reqs = mixed_workload(6, 20, 8, kVocab, 31);
    for (auto& q : reqs) ASSERT_TRUE((*engine)->add_request(q).ok());
    ASSERT_TRUE((*engine)->step().ok());
    const StepMetrics& m = (*engine)->last_step_metrics();
    EXPECT_EQ(m.step, 1);
    EXPECT_EQ(m.num_decode_tokens, 0);
    EXPECT_GT(m.num_prefill_tokens, 0);
    EXPECT_LE(m.num_prefill_tokens, 32);
    EXPECT_EQ(m.batch_size, m.num_running); // everything running was admitted this step
    EXPECT_EQ(m.num_running + m.num_waiting, 6);
    EXPECT_GT(m.kv_blocks_used, 0);
    EXPECT_EQ(m.kv_blocks_total, 48);
    EXPECT_GE(m.prefix_query_tokens, m.num_prefill_tokens); // admitted prompts were looked up
    int64_t decode_seen = 0;
    while ((*engine)->has_work()) {
        ASSERT_TRUE((*engine)->step().ok());
        decode_seen += (*engine)->last_step_metrics().num_decode_tokens;
        EXPECT_LE((*engine)->last_step_metrics().batch_size, 4);
    }
    EXPECT_GT(decode_seen, 0);
    EXPECT_EQ((*engine)->counters().requests_finished, 6);
    EXPECT_EQ((*engine)->counters().decode_tokens, decode_seen);
    EXPECT_EQ((*engine)->last_step_metrics().kv_blocks_used, 0);
}

} // namespace

namespace {

TEST(EngineFake, ModelFailureAbortsTheStepsRequestsWithTheError) {
    FakeModel model(kVocab);
    auto engine = LLMEngine::create(&model, small_pool(64, true));
    ASSERT_TRUE(engine.ok());
    auto reqs = mixed_workload(4, 30, 10, kVocab, 8);
    for (auto& q : reqs) ASSERT_TRUE((*engine)->add_request(q).ok());
    model.fail_at_call = 2;
    int failed = 0;
    while ((*engine)->has_work()) {
        auto outs = (*engine)->step();
        ASSERT_TRUE(outs.ok());
        EXPECT_EQ((*engine)->check_invariants(), "");
        for (const auto& o : *outs)
            if (o.finished && !o.status.ok()) {
                ++failed;
                EXPECT_NE(o.status.message().find("injected"), std::string::npos);
                EXPECT_EQ(o.deltas.back().finish_reason, FinishReason::kAbort);
            }
    }
    EXPECT_EQ(failed, 4); // all four were in the failing step
    // The engine still serves new requests.
    ASSERT_TRUE((*engine)->add_request(reqs[0]).ok());
    RunResult r = run_engine(**engine, {});
    EXPECT_TRUE(r.ok);
}

} // namespace
