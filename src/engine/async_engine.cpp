#include "engine/async_engine.h"

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/logging.h"

namespace deepinfer::engine {

struct AsyncEngine::State {
    std::unique_ptr<LLMEngine> engine; // touched by the loop thread only
    AsyncEngineConfig config;

    mutable std::mutex mu; // guards everything below up to `thread`
    std::condition_variable cv;
    std::deque<std::pair<Request, Callback>> inbox;
    std::vector<std::string> aborts;
    bool stop = false;
    int32_t pending = 0; // submitted and not yet finished
    StepMetrics metrics;
    EngineCounters counters;

    std::thread thread;
    std::unordered_map<std::string, Callback> callbacks; // loop thread only

    void loop();
    void finish_one() {
        std::lock_guard<std::mutex> lock(mu);
        --pending;
    }
};

namespace {
RequestOutput final_error(const std::string& id, core::Status status) {
    RequestOutput o;
    o.request_id = id;
    o.finished = true;
    o.status = std::move(status);
    CompletionDelta d;
    d.finish_reason = FinishReason::kAbort;
    o.deltas.push_back(std::move(d));
    return o;
}
} // namespace

void AsyncEngine::State::loop() {
    bool broken = false;
    for (;;) {
        std::deque<std::pair<Request, Callback>> new_requests;
        std::vector<std::string> new_aborts;
        {
            std::unique_lock<std::mutex> lock(mu);
            cv.wait(lock, [&] { return stop || !inbox.empty() || !aborts.empty() || engine->has_work(); });
            if (stop) break;
            new_requests.swap(inbox);
            new_aborts.swap(aborts);
        }
        for (auto& [request, callback] : new_requests) {
            std::string id = request.id;
            core::Status st = broken ? core::unavailable("engine failed; not accepting requests")
                                     : engine->add_request(std::move(request));
            if (!st.ok()) {   // the engine rejects duplicates of live ids too
                finish_one(); // before the callback, so a caller woken by it can submit again
                callback(final_error(id, st));
                continue;
            }
            callbacks.emplace(id, std::move(callback));
        }
        for (const std::string& id : new_aborts) engine->abort(id);
        if (!engine->has_work()) continue;
        auto outs = engine->step();
        if (!outs.ok()) {
            DI_LOG(Error) << "engine step failed: " << outs.status().to_string();
            broken = true;
            for (auto& [id, cb] : callbacks) {
                engine->abort(id);
                finish_one();
                cb(final_error(id, outs.status()));
            }
            callbacks.clear();
            while (engine->has_work() && engine->step().ok()) {
            }
            continue;
        }
        for (const RequestOutput& o : *outs) {
            auto it = callbacks.find(o.request_id);
            if (it == callbacks.end()) continue;
            if (o.finished) {
                Callback cb = std::move(it->second);
                callbacks.erase(it);
                finish_one();
                cb(o);
            } else {
                it->second(o);
            }
        }
        std::lock_guard<std::mutex> lock(mu);
        metrics = engine->last_step_metrics();
        counters = engine->counters();
    }
    // Shutting down: everything still queued or live gets a final Unavailable output.
    std::deque<std::pair<Request, Callback>> left;
    {
        std::lock_guard<std::mutex> lock(mu);
        left.swap(inbox);
    }
    for (auto& [request, callback] : left) {
        finish_one();
        callback(final_error(request.id, core::unavailable("engine shutting down")));
    }
    for (auto& [id, cb] : callbacks) {
        engine->abort(id);
        finish_one();
        cb(final_error(id, core::unavailable("engine shutting down")));
    }
    callbacks.clear();
}

AsyncEngine::AsyncEngine(std::unique_ptr<LLMEngine> engine, AsyncEngineConfig config)
    : state_(std::make_unique<State>()) {
    state_->engine = std::move(engine);
    state_->config = config;
    state_->thread = std::thread([s = state_.get()] { s->loop(); });
}

AsyncEngine::~AsyncEngine() {
    shutdown();
}

core::Status AsyncEngine::submit(Request request, Callback callback) {
    {
        std::lock_guard<std::mutex> lock(state_->mu);
        if (state_->stop) return core::unavailable("engine shutting down");
        if (state_->pending >= state_->config.max_pending_requests)
            return core::resource_exhausted("engine queue full (" + std::to_string(state_->pending) +
                                            " requests pending); retry later");
        ++state_->pending;
        state_->inbox.emplace_back(std::move(request), std::move(callback));
    }
    state_->cv.notify_one();
    return {};
}

void AsyncEngine::abort(const std::string& request_id) {
    {
        std::lock_guard<std::mutex> lock(state_->mu);
        if (state_->stop) return;
        state_->aborts.push_back(request_id);
    }
    state_->cv.notify_one();
}

void AsyncEngine::shutdown() {
    {
        std::lock_guard<std::mutex> lock(state_->mu);
        state_->stop = true;
    }
    state_->cv.notify_one();
    if (state_->thread.joinable()) state_->thread.join();
}

StepMetrics AsyncEngine::last_step_metrics() const {
    std::lock_guard<std::mutex> lock(state_->mu);
    return state_->metrics;
}

EngineCounters AsyncEngine::counters() const {
    std::lock_guard<std::mutex> lock(state_->mu);
    return state_->counters;
}

int32_t AsyncEngine::num_pending() const {
    std::lock_guard<std::mutex> lock(state_->mu);
    return state_->pending;
}

} // namespace deepinfer::engine
