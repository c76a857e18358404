#pragma once
// AsyncEngine: runs an LLMEngine's loop on its own thread so HTTP threads can submit and abort. Callbacks
// run on the engine thread, one per RequestOutput, in order; the last one has finished == true (also for
// aborts and errors). Callbacks should be quick; they may call submit/abort (those take only the inbox lock).

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "core/status.h"
#include "engine/engine.h"

namespace deepinfer::engine {

struct AsyncEngineConfig {
    int32_t max_pending_requests = 1024; // queued + live; submit answers ResourceExhausted beyond this
};

class AsyncEngine {
public:
    using Callback = std::function<void(const RequestOutput&)>;

    AsyncEngine(std::unique_ptr<LLMEngine> engine, AsyncEngineConfig config = {});
    ~AsyncEngine(); // shutdown()
    AsyncEngine(const AsyncEngine&) = delete;
    AsyncEngine& operator=(const AsyncEngine&) = delete;

    // Thread-safe. Validation errors from the engine (bad params, too long) arrive through the callback as
    // a finished output with a non-ok status; submit itself fails only when the queue is full
    // (ResourceExhausted) or the engine is shutting down (Unavailable).
    core::Status submit(Request request, Callback callback);
    // Thread-safe; the request's callback gets a final output with FinishReason::kAbort.
    void abort(const std::string& request_id);
    // Stops the loop; live requests are aborted (their callbacks get a final kUnavailable output).
    void shutdown();

    // Thread-safe snapshots for the server's /metrics.
    StepMetrics last_step_metrics() const;
    EngineCounters counters() const;
    int32_t num_pending() const;

private:
    struct State;
    std::unique_ptr<State> state_;
};

} // namespace deepinfer::engine
