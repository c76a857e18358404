#pragma once
// LLMEngine: continuous batching over a CausalLm. Not thread-safe: one thread calls add_request / abort /
// step (AsyncEngine wraps it in a thread for the server). Each step schedules decodes and prefill chunks
// (scheduler.h), runs one ragged forward, samples, and returns per-request deltas.
//
//   DI_ASSIGN_OR_RETURN(auto engine, LLMEngine::create(&model, config));
//   DI_RETURN_IF_ERROR(engine->add_request({.id = "a", .prompt_ids = ids, .params = params}));
//   while (engine->has_work()) { DI_ASSIGN_OR_RETURN(auto outs, engine->step()); ... }

#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "engine/engine_config.h"
#include "engine/metrics.h"
#include "engine/request.h"
#include "model/causal_lm.h"

namespace deepinfer::engine {

class LLMEngine {
public:
    // Sizes the KV pool (config.num_kv_blocks, or from the memory budget), initialises the model's cache.
    // The model must outlive the engine.
    static core::Result<std::unique_ptr<LLMEngine>> create(model::CausalLm* model,
                                                           const EngineConfig& config);
    ~LLMEngine();
    LLMEngine(const LLMEngine&) = delete;
    LLMEngine& operator=(const LLMEngine&) = delete;

    // Validates and queues a request. Errors: InvalidArgument (bad field, duplicate id, token out of
    // vocabulary), OutOfRange (longer than the max model length), ResourceExhausted (cannot fit even in an
    // empty KV pool).
    core::Status add_request(Request request);
    // Aborts a live request: its blocks are freed and the next step() reports it finished with kAbort.
    // Returns false if no such live request.
    bool abort(const std::string& request_id);

    // One scheduling step + forward + sampling. Returns the outputs of requests that changed. If the model
    // fails, the requests in that step finish (kAbort) with the model's error in RequestOutput::status;
    // a non-ok Result means the engine itself is broken (a bug) and should not be stepped again.
    core::Result<std::vector<RequestOutput>> step();
    bool has_work() const;

    const EngineConfig& config() const; // resolved: num_kv_blocks and max_model_len filled in
    const StepMetrics& last_step_metrics() const;
    const EngineCounters& counters() const;
    int32_t num_live_requests() const;
    // For tests: block refcounts match the sequences' block tables, nothing leaked, slots balance, the
    // last step respected the token budget and sequence cap. Empty when everything holds.
    std::string check_invariants() const;

    class Impl;

private:
    explicit LLMEngine(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

} // namespace deepinfer::engine
