#pragma once
// Drives an LLMEngine to completion, checking the engine's invariants after every step, and collects
// each request's tokens and finish reasons.

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <string>
#include <vector>

#include "engine/engine.h"

namespace deepinfer::engine::testing {

struct RunResult {
    std::map<std::string, std::vector<std::vector<int32_t>>> tokens; // id -> [n] output tokens
    std::map<std::string, std::vector<std::string>> finish;          // id -> [n] finish reasons
    std::map<std::string, RequestOutput> last;                       // id -> final output
    std::map<std::string, std::vector<std::optional<TokenLogprob>>> prompt_logprobs;
    EngineCounters counters;
    int64_t max_batch = 0;
    int64_t padding_tokens = 0;
    int64_t steps = 0;
    bool ok = true;
};

inline RunResult run_engine(LLMEngine& engine, const std::vector<Request>& requests,
                            int64_t max_steps = 200000) {
    RunResult r;
    for (const Request& req : requests) {
        core::Status st = engine.add_request(req);
        EXPECT_TRUE(st.ok()) << req.id << ": " << st.to_string();
        r.tokens[req.id].resize(req.params.n);
        r.finish[req.id].resize(req.params.n);
    }
    while (engine.has_work()) {
        auto outs = engine.step();
        if (!outs.ok()) {
            ADD_FAILURE() << "step failed: " << outs.status().to_string();
            r.ok = false;
            break;
        }
        std::string bad = engine.check_invariants();
        if (!bad.empty()) {
            ADD_FAILURE() << "invariants after step " << r.steps + 1 << ": " << bad;
            r.ok = false;
            break;
        }
        r.max_batch = std::max<int64_t>(r.max_batch, engine.last_step_metrics().batch_size);
        r.padding_tokens += engine.last_step_metrics().num_padding_tokens;
        for (const RequestOutput& o : *outs) {
            if (!o.status.ok()) {
                ADD_FAILURE() << o.request_id << ": " << o.status.to_string();
                r.ok = false;
            }
            for (const CompletionDelta& d : o.deltas) {
                auto& all = r.tokens[o.request_id];
                if (all.size() <= size_t(d.index)) all.resize(d.index + 1);
                auto& reasons = r.finish[o.request_id];
                if (reasons.size() <= size_t(d.index)) reasons.resize(d.index + 1);
                auto& t = all[d.index];
                t.insert(t.end(), d.token_ids.begin(), d.token_ids.end());
                EXPECT_EQ(static_cast<int32_t>(t.size()), d.num_output_tokens);
                if (d.finish_reason)
                    r.finish[o.request_id][d.index] = std::string(finish_reason_name(*d.finish_reason));
            }
            if (o.prompt_logprobs) r.prompt_logprobs[o.request_id] = *o.prompt_logprobs;
            if (o.finished) r.last[o.request_id] = o;
        }
        if (++r.steps > max_steps) {
            ADD_FAILURE() << "no completion after " << max_steps << " steps (livelock?)";
            r.ok = false;
            break;
        }
    }
    EXPECT_EQ(engine.num_live_requests(), 0);
    r.counters = engine.counters();
    return r;
}

// `count` requests with prompts of 1..max_prompt random tokens (never EOS) and 1..max_new new tokens.
inline std::vector<Request> mixed_workload(int count, int max_prompt, int max_new, int64_t vocab,
                                           uint32_t seed, int32_t eos = 0) {
    std::mt19937 rng(seed);
    std::vector<Request> reqs;
    for (int i = 0; i < count; ++i) {
        Request r;
        r.id = "r" + std::to_string(i);
        int len = 1 + int(rng() % max_prompt);
        for (int k = 0; k < len; ++k) {
            int32_t t = int32_t(rng() % vocab);
            r.prompt_ids.push_back(t == eos ? t + 1 : t);
        }
        r.params.temperature = 0.0f;
        r.params.max_tokens = 1 + int(rng() % max_new);
        reqs.push_back(std::move(r));
    }
    return reqs;
}

} // namespace deepinfer::engine::testing
