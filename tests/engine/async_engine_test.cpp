// AsyncEngine: submissions from several threads, callbacks with complete token streams, aborts, a full
// queue, errors delivered through the callback, and shutdown with requests in flight. Run under TSan.

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "engine/async_engine.h"
#include "engine_harness.h"
#include "fake_model.h"

using namespace deepinfer;
using namespace deepinfer::engine;
using namespace deepinfer::engine::testing;

namespace {

constexpr int64_t kVocab = 64;

std::unique_ptr<LLMEngine> make_engine(FakeModel* model, int64_t blocks = 64) {
    EngineConfig c;
    c.block_size = 16;
    c.num_kv_blocks = blocks;
    c.max_num_seqs = 8;
    c.max_num_batched_tokens = 64;
    auto e = LLMEngine::create(model, c);
    EXPECT_TRUE(e.ok());
    return std::move(*e);
}

struct Collector {
    std::mutex mu;
    std::condition_variable cv;
    std::map<std::string, std::vector<int32_t>> tokens;
    std::map<std::string, RequestOutput> final;
    AsyncEngine::Callback callback() {
        return [this](const RequestOutput& o) {
            std::lock_guard<std::mutex> lock(mu);
            for (const auto& d : o.deltas) {
                auto& t = tokens[o.request_id];
                t.insert(t.end(), d.token_ids.begin(), d.token_ids.end());
            }
            if (o.finished) {
                EXPECT_FALSE(final.count(o.request_id)) << "two final outputs for " << o.request_id;
                final[o.request_id] = o;
                cv.notify_all();
            }
        };
    }
    void wait_for(size_t n) {
        std::unique_lock<std::mutex> lock(mu);
        cv.wait(lock, [&] { return final.size() >= n; });
    }
};

TEST(AsyncEngine, ConcurrentSubmittersGetTheSoloTokens) {
    FakeModel model(kVocab);
    Collector col; // outlives the engine, whose thread calls into it
    AsyncEngine engine(make_engine(&model));
    auto reqs = mixed_workload(40, 60, 20, kVocab, 21);
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t)
        threads.emplace_back([&, t] {
            for (size_t i = t; i < reqs.size(); i += 4)
                EXPECT_TRUE(engine.submit(reqs[i], col.callback()).ok());
        });
    for (auto& th : threads) th.join();
    col.wait_for(reqs.size());
    for (const auto& q : reqs) {
        EXPECT_TRUE(col.final[q.id].status.ok());
        EXPECT_EQ(col.tokens[q.id], fake_greedy(q.prompt_ids, *q.params.max_tokens, kVocab, 0)) << q.id;
    }
    EXPECT_EQ(engine.num_pending(), 0);
    EXPECT_GT(engine.counters().steps, 0);
}

TEST(AsyncEngine, AbortErrorsQueueFullAndShutdown) {
    FakeModel model(kVocab);
    Collector col;
    auto engine = std::make_unique<AsyncEngine>(make_engine(&model, 8192), AsyncEngineConfig{3});
    Request bad;
    bad.id = "bad";
    bad.prompt_ids = {1};
    bad.params.top_p = 2.0f;
    ASSERT_TRUE(engine->submit(bad, col.callback()).ok());
    col.wait_for(1);
    EXPECT_EQ(col.final["bad"].status.code(), core::StatusCode::kInvalidArgument);

    Request longr;
    longr.prompt_ids = {1, 2, 3};
    longr.params.temperature = 0.0f;
    longr.params.ignore_eos = true;
    longr.params.max_tokens = 100000; // still running at shutdown
    for (const char* id : {"l1", "l2", "l3"}) {
        longr.id = id;
        ASSERT_TRUE(engine->submit(longr, col.callback()).ok());
    }
    longr.id = "l4";
    EXPECT_EQ(engine->submit(longr, col.callback()).code(), core::StatusCode::kResourceExhausted);
    engine->abort("l1");
    col.wait_for(2);
    {
        std::lock_guard<std::mutex> lock(col.mu);
        ASSERT_TRUE(col.final.count("l1"));
        EXPECT_EQ(col.final["l1"].deltas.back().finish_reason, FinishReason::kAbort);
    }
    engine->shutdown(); // l2, l3 still running: they get a final Unavailable output
    EXPECT_EQ(col.final.size(), 4u);
    EXPECT_EQ(col.final["l2"].status.code(), core::StatusCode::kUnavailable);
    EXPECT_EQ(engine->submit(longr, col.callback()).code(), core::StatusCode::kUnavailable);
    engine.reset();
}

} // namespace
