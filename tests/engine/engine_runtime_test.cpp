// The engine owns the compute pool the model runs on and plans the model's workspace before its KV pool:
// a model sees configure_runtime (with the step limits) before init_kv_cache, a live pool while the engine
// exists, and the fallback (nullptr) once the engine is gone.

#include <gtest/gtest.h>

#include "core/thread_pool.h"
#include "engine/engine.h"
#include "fake_model.h"

using namespace deepinfer;
using namespace deepinfer::engine;
using namespace deepinfer::engine::testing;

namespace {

class RuntimeRecordingModel : public FakeModel {
public:
    using FakeModel::FakeModel;
    core::Status configure_runtime(const model::RuntimeSpec& spec) override {
        runtime = spec;
        configured_before_kv = !kv_initialized;
        return core::Status();
    }
    core::Status init_kv_cache(const model::KvCacheSpec& spec) override {
        kv_initialized = true;
        return FakeModel::init_kv_cache(spec);
    }
    void set_thread_pool(core::ThreadPool* p) override { pool = p; }

    model::RuntimeSpec runtime;
    bool configured_before_kv = false;
    bool kv_initialized = false;
    core::ThreadPool* pool = nullptr;
};

TEST(EngineRuntime, EngineOwnsThePoolAndPlansTheWorkspaceFirst) {
    RuntimeRecordingModel model;
    EngineConfig c;
    c.block_size = 16;
    c.num_kv_blocks = 32;
    c.max_num_seqs = 3;
    c.max_num_batched_tokens = 48;
    c.num_threads = 2;
    {
        auto engine = LLMEngine::create(&model, c);
        ASSERT_TRUE(engine.ok()) << engine.status().to_string();
        EXPECT_EQ(model.runtime.max_num_batched_tokens, 48);
        EXPECT_EQ(model.runtime.max_num_seqs, 3);
        EXPECT_TRUE(model.configured_before_kv);
        ASSERT_NE(model.pool, nullptr);
        EXPECT_NE(model.pool, &core::ThreadPool::global()) << "the engine's own pool, not the global one";
        EXPECT_EQ(model.pool->num_threads(), 2);
    }
    EXPECT_EQ(model.pool, nullptr) << "the engine hands the model back to the fallback when it goes";
}

} // namespace
