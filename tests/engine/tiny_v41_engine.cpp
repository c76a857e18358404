// The engine over the real tiny DeepSeek V4.1 (models/tiny-v41*, loaded through model::load_causal_lm): the
// 9 golden prompts, each twice (the second copy reuses the first's blocks through the prefix cache), in a
// pool small enough to force preemptions, with a token budget that chunks the prefills; every request gives
// transformers' 32 greedy tokens.

#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <memory>

#include "engine/engine.h"
#include "engine_harness.h"
#include "model/registry.h"
#include "weights/safetensors.h"

using namespace deepinfer;
using namespace deepinfer::engine;
using namespace deepinfer::engine::testing;

namespace {

std::string source_path(const std::string& rel) {
    return std::string(DEEPINFER_SOURCE_DIR) + "/" + rel;
}

std::vector<std::pair<Request, std::vector<int32_t>>> golden_requests(const std::string& model, int copy) {
    std::vector<std::pair<Request, std::vector<int32_t>>> out;
    auto f = weights::SafetensorsFile::open(source_path("tests/fixtures/" + model + "/goldens.safetensors"),
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
        Request q;
        q.id = "golden" + std::to_string(i) + "_" + std::to_string(copy);
        q.prompt_ids = ids("prompt." + std::to_string(i) + ".ids");
        auto want = ids("prompt." + std::to_string(i) + ".gen_tokens");
        q.params.temperature = 0.0f;
        q.params.ignore_eos = true; // the goldens run a fixed number of steps
        q.params.max_tokens = static_cast<int32_t>(want.size());
        out.emplace_back(std::move(q), std::move(want));
    }
    return out;
}

class TinyV41Engine : public ::testing::TestWithParam<std::string> {};

TEST_P(TinyV41Engine, GoldensUnderPreemptionAndPrefixHits) {
    auto m = model::load_causal_lm(source_path("models/" + GetParam()));
    ASSERT_TRUE(m.ok()) << m.status().to_string();
    EngineConfig c;
    c.block_size = 16;    // a multiple of the ratios (2, 1)
    c.num_kv_blocks = 40; // 640 positions for 18 requests of up to 332: preempts
    c.max_num_seqs = 8;
    c.max_num_batched_tokens = 64; // chunks the long prefills
    c.enable_prefix_caching = true;
    auto engine = LLMEngine::create(m->get(), c);
    ASSERT_TRUE(engine.ok()) << engine.status().to_string();
    std::vector<Request> reqs;
    std::map<std::string, std::vector<int32_t>> want;
    for (int copy : {0, 1})
        for (auto& [q, w] : golden_requests(GetParam(), copy)) {
            want[q.id] = w;
            reqs.push_back(q);
        }
    RunResult r = run_engine(**engine, reqs);
    for (const Request& q : reqs) EXPECT_EQ(r.tokens.at(q.id)[0], want[q.id]) << q.id;
    EXPECT_GT(r.counters.preemptions, 0);
    EXPECT_GT(r.counters.prefix_hit_rate(), 0.0);
    std::printf("[%s] %zu requests, %lld steps, %lld preemptions, prefix hit rate %.3f\n", GetParam().c_str(),
                reqs.size(), static_cast<long long>(r.steps), static_cast<long long>(r.counters.preemptions),
                r.counters.prefix_hit_rate());
}

INSTANTIATE_TEST_SUITE_P(Tiny, TinyV41Engine, ::testing::Values("tiny-v41", "tiny-v41-fp8"));

} // namespace
