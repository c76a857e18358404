// Sampling through the engine: seeded requests give the same tokens alone and in any batch, n > 1 forks
// share the prompt's blocks (copy-on-write) and match the unforked run, logprobs and prompt logprobs are
// the model's, and stop ids / min_tokens / ignore_eos / max_tokens end completions as specified.

#include <gtest/gtest.h>

#include <cmath>

#include "engine/engine.h"
#include "engine_harness.h"
#include "fake_model.h"

using namespace deepinfer;
using namespace deepinfer::engine;
using namespace deepinfer::engine::testing;

namespace {

constexpr int64_t kVocab = 64;

EngineConfig config(int32_t blocks = 200, int32_t max_seqs = 16, int32_t budget = 64) {
    EngineConfig c;
    c.block_size = 16;
    c.num_kv_blocks = blocks;
    c.max_num_seqs = max_seqs;
    c.max_num_batched_tokens = budget;
    return c;
}

RunResult run(const EngineConfig& c, const std::vector<Request>& reqs, FakeModel* model_out = nullptr) {
    FakeModel local(kVocab);
    FakeModel& model = model_out ? *model_out : local;
    auto engine = LLMEngine::create(&model, c);
    EXPECT_TRUE(engine.ok());
    return run_engine(**engine, reqs);
}

Request seeded(const std::string& id, uint64_t seed, int n = 1) {
    Request r;
    r.id = id;
    for (int i = 0; i < 37; ++i) r.prompt_ids.push_back(1 + (i * 5 + int(seed)) % 63);
    r.params.temperature = 0.9f;
    r.params.top_p = 0.95f;
    r.params.top_k = 40;
    r.params.seed = seed;
    r.params.max_tokens = 40;
    r.params.n = n;
    return r;
}

TEST(EngineSampling, SeededRequestsAreBatchInvariant) {
    std::vector<Request> mine = {seeded("s1", 42), seeded("s2", 7), seeded("s3", 42)};
    mine[2].prompt_ids.push_back(9); // same seed, other prompt
    std::map<std::string, std::vector<int32_t>> alone;
    for (const Request& q : mine) alone[q.id] = run(config(), {q}).tokens.at(q.id)[0];
    EXPECT_NE(alone["s1"], alone["s2"]);

    // In a crowd (greedy and unseeded sampled neighbours), in different orders, budgets, and a pool small
    // enough to preempt.
    auto crowd = mixed_workload(30, 120, 30, kVocab, 5);
    for (size_t i = 0; i < crowd.size(); i += 3) crowd[i].params.temperature = 1.0f;
    for (int variant = 0; variant < 3; ++variant) {
        std::vector<Request> reqs = crowd;
        reqs.insert(reqs.begin() + variant * 10, mine.begin(), mine.end());
        EngineConfig c = variant == 2 ? config(24, 8, 16) : config(200, 16, variant == 0 ? 64 : 512);
        // A step's rows are sampled on the engine's pool (variant 0: one thread, in order; 1 and 2: rows
        // split over 2 and 3 threads), with the same tokens.
        c.num_threads = 1 + variant;
        RunResult r = run(c, reqs);
        ASSERT_TRUE(r.ok);
        for (const Request& q : mine)
            EXPECT_EQ(r.tokens.at(q.id)[0], alone[q.id]) << q.id << " variant " << variant;
        if (variant == 2) {
            EXPECT_GT(r.counters.preemptions, 0);
        }
    }
}

TEST(EngineSampling, NGreaterThanOneForksSharingThePromptBlocks) {
    Request q = seeded("n4", 3, 4);
    q.prompt_ids.resize(37); // partial last block: forks must copy it on write
    FakeModel forked_model(kVocab);
    RunResult forked = run(config(), {q}, &forked_model);
    ASSERT_TRUE(forked.ok);
    EXPECT_EQ(forked_model.slot_copies, 3);
    EXPECT_GE(forked_model.block_copies, 3);
    // Prompt prefilled once: 37 prompt rows, not 4 x 37.
    EXPECT_LT(forked_model.real_rows, 37 + 4 * 40 + 1);
    // One running sequence at a time: no fork possible, every completion recomputes the prompt.
    FakeModel serial_model(kVocab);
    RunResult serial = run(config(200, 1, 64), {q}, &serial_model);
    ASSERT_TRUE(serial.ok);
    EXPECT_EQ(serial_model.slot_copies, 0);
    EXPECT_EQ(forked.tokens.at("n4"), serial.tokens.at("n4"));
    std::set<std::vector<int32_t>> distinct(forked.tokens.at("n4").begin(), forked.tokens.at("n4").end());
    EXPECT_GT(distinct.size(), 1u);
    size_t total = 0;
    for (const auto& t : forked.tokens.at("n4")) total += t.size();
    EXPECT_EQ(forked.last.at("n4").completion_tokens, int32_t(total));

    // Greedy n = 3: three copies of the greedy continuation.
    Request g = q;
    g.id = "g3";
    g.params.temperature = 0.0f;
    g.params.n = 3;
    RunResult gr = run(config(), {g});
    auto want = fake_greedy(g.prompt_ids, 40, kVocab, 0);
    for (const auto& t : gr.tokens.at("g3")) EXPECT_EQ(t, want);
}

double fake_logprob(const std::vector<int32_t>& prefix, int32_t token) {
    uint64_t h = kFakeInitialHash;
    for (int32_t t : prefix) h = fake_extend(h, t);
    std::vector<float> l(kVocab);
    FakeModel::logits_for(h, kVocab, l.data());
    double z = 0;
    for (float v : l) z += std::exp(double(v));
    return l[token] - std::log(z);
}

TEST(EngineSampling, LogprobsAndPromptLogprobsAreTheModels) {
    Request q = seeded("lp", 11);
    q.params.logprobs = 3;
    q.params.prompt_logprobs = 2;
    q.params.max_tokens = 10;
    FakeModel model(kVocab);
    auto engine = LLMEngine::create(&model, config(200, 16, 16)); // prompt in 3 chunks
    ASSERT_TRUE(engine.ok());
    ASSERT_TRUE((*engine)->add_request(q).ok());
    std::vector<int32_t> tokens = q.prompt_ids;
    bool got_prompt = false;
    while ((*engine)->has_work()) {
        auto outs = (*engine)->step();
        ASSERT_TRUE(outs.ok());
        for (const auto& o : *outs) {
            if (o.prompt_logprobs) {
                EXPECT_FALSE(got_prompt);
                got_prompt = true;
                ASSERT_EQ(o.prompt_logprobs->size(), q.prompt_ids.size());
                EXPECT_FALSE((*o.prompt_logprobs)[0].has_value());
                for (size_t i = 1; i < q.prompt_ids.size(); ++i) {
                    const auto& e = (*o.prompt_logprobs)[i];
                    ASSERT_TRUE(e.has_value()) << i;
                    EXPECT_EQ(e->token_id, q.prompt_ids[i]);
                    std::vector<int32_t> prefix(q.prompt_ids.begin(), q.prompt_ids.begin() + i);
                    EXPECT_NEAR(e->logprob, fake_logprob(prefix, q.prompt_ids[i]), 1e-4);
                    EXPECT_EQ(e->top.size(), 2u);
                }
            }
            for (const auto& d : o.deltas) {
                ASSERT_EQ(d.logprobs.size(), d.token_ids.size());
                for (size_t k = 0; k < d.token_ids.size(); ++k) {
                    EXPECT_EQ(d.logprobs[k].token_id, d.token_ids[k]);
                    EXPECT_NEAR(d.logprobs[k].logprob, fake_logprob(tokens, d.token_ids[k]), 1e-4);
                    EXPECT_EQ(d.logprobs[k].top.size(), 3u);
                    EXPECT_GE(d.logprobs[k].top[0].logprob, d.logprobs[k].logprob);
                    tokens.push_back(d.token_ids[k]);
                }
            }
        }
    }
    EXPECT_TRUE(got_prompt);
    EXPECT_EQ(tokens.size(), q.prompt_ids.size() + 10);
}

TEST(EngineSampling, StopIdsMinTokensIgnoreEosAndLength) {
    Request q;
    q.id = "st";
    q.prompt_ids = {3, 1, 4, 1, 5, 9, 2, 6};
    q.params.temperature = 0.0f;
    q.params.max_tokens = 30;
    q.params.ignore_eos = true;
    auto free_run = fake_greedy(q.prompt_ids, 30, kVocab, /*eos=*/-1);
    ASSERT_EQ(free_run.size(), 30u);

    Request s = q; // stop at the 3rd token's id (its first occurrence)
    s.params.stop_token_ids = {free_run[2]};
    size_t first = std::find(free_run.begin(), free_run.end(), free_run[2]) - free_run.begin();
    RunResult r = run(config(), {s});
    EXPECT_EQ(r.tokens.at("st")[0], std::vector<int32_t>(free_run.begin(), free_run.begin() + first + 1));
    EXPECT_EQ(r.finish.at("st")[0], "stop");

    RunResult len = run(config(), {q});
    EXPECT_EQ(len.tokens.at("st")[0], free_run);
    EXPECT_EQ(len.finish.at("st")[0], "length");

    // min_tokens masks the stop id until 5 tokens are out: the continuation changes after the mask.
    Request m = s;
    m.params.min_tokens = 5;
    RunResult mr = run(config(), {m});
    const auto& mt = mr.tokens.at("st")[0];
    ASSERT_GE(mt.size(), 5u);
    for (size_t i = 0; i + 1 < 5 && i < mt.size(); ++i) EXPECT_NE(mt[i], free_run[2]);
    if (mr.finish.at("st")[0] == "stop") {
        EXPECT_EQ(mt.back(), free_run[2]);
    }
}

TEST(EngineSampling, EosStopsUnlessIgnored) {
    // Find a prompt whose greedy continuation hits EOS (token 0) early.
    std::vector<int32_t> prompt;
    std::vector<int32_t> cont;
    for (int seed = 1; seed < 500; ++seed) {
        prompt = {seed % 63 + 1, (seed * 7) % 63 + 1, (seed * 13) % 63 + 1};
        cont = fake_greedy(prompt, 20, kVocab, 0);
        if (cont.back() == 0 && cont.size() < 20) break;
    }
    ASSERT_EQ(cont.back(), 0);
    Request q;
    q.id = "eos";
    q.prompt_ids = prompt;
    q.params.temperature = 0.0f;
    q.params.max_tokens = 20;
    RunResult r = run(config(), {q});
    EXPECT_EQ(r.tokens.at("eos")[0], cont);
    EXPECT_EQ(r.finish.at("eos")[0], "stop");
    EXPECT_EQ(r.last.at("eos").deltas.back().stop_token_id, 0);
    q.params.ignore_eos = true;
    r = run(config(), {q});
    EXPECT_EQ(r.tokens.at("eos")[0].size(), 20u);
    EXPECT_EQ(r.finish.at("eos")[0], "length");
}

} // namespace
