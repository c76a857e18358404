#pragma once
// Server-side work per request: submits one engine request per choice, and turns each choice's token
// deltas into text (incremental detokenization -> stop strings with hold-back -> DeepSeek output parser).
// The engine calls back on its own thread into a per-request channel; the HTTP thread drains it.

#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "server/backend.h"
#include "server/stop_matcher.h"

namespace deepinfer::server {

// What one choice produced since the last call, ready for a response builder.
struct ChoiceOutput {
    std::string text;   // completions: raw text after stop strings
    ParsedDelta parsed; // chat: text split into reasoning / content / tool calls
    std::vector<TokenLogprob> logprobs;
    int new_tokens = 0;
    std::optional<std::string> finish_reason; // "stop", "length", "tool_calls", "abort", "error"
    std::string stop_sequence;                // with "stop": the stop string that ended it, if one did
    core::Status error;
};

class ChoicePipeline {
public:
    ChoicePipeline(const Backend& backend, std::vector<std::string> stops, bool chat, ParserOptions parser);

    ChoiceOutput push(const GenerationDelta& delta);
    bool finished() const { return finished_; }
    int completion_tokens() const { return completion_tokens_; }
    int reasoning_tokens() const { return reasoning_tokens_; }
    bool saw_tool_call() const { return saw_tool_call_; }

private:
    void emit(const std::string& text, ChoiceOutput& out);
    void finish(FinishReason reason, ChoiceOutput& out);

    std::unique_ptr<IncrementalDetokenizer> detok_;
    StopMatcher stop_;
    std::unique_ptr<OutputParser> parser_; // null for completions
    bool finished_ = false;
    int completion_tokens_ = 0;
    int reasoning_tokens_ = 0;
    bool saw_tool_call_ = false;
};

struct ChoiceSpec {
    std::vector<int32_t> prompt;
    SamplingOptions sampling;
    std::string forced_output; // test hook: emitted instead of engine output when non-empty
};

struct ChannelItem {
    int choice = 0;
    GenerationDelta delta;
};

// Runs the choices of one HTTP request. Destroying it aborts whatever is unfinished.
class Generation {
public:
    Generation(Backend& backend, std::string request_id, std::vector<ChoiceSpec> choices,
               std::vector<std::string> stops, bool chat, ParserOptions parser);
    ~Generation();
    Generation(const Generation&) = delete;
    Generation& operator=(const Generation&) = delete;

    core::Status start();
    // Waits up to `timeout` for output; returns (choice, output) pairs, empty on timeout.
    std::vector<std::pair<int, ChoiceOutput>> poll(std::chrono::milliseconds timeout);
    bool done() const { return remaining_ == 0; }
    void abort_all();

    int num_choices() const { return static_cast<int>(pipelines_.size()); }
    const ChoicePipeline& pipeline(int i) const { return *pipelines_[i]; }
    int prompt_tokens(int i) const { return prompt_tokens_[i]; }
    int cached_tokens(int i) const { return cached_tokens_[i]; }

private:
    struct Channel {
        std::mutex mu;
        std::condition_variable cv;
        std::deque<ChannelItem> items;
    };

    Backend& backend_;
    std::string request_id_;
    std::vector<ChoiceSpec> specs_;
    std::vector<std::unique_ptr<ChoicePipeline>> pipelines_;
    std::vector<int> prompt_tokens_;
    std::vector<int> cached_tokens_;
    std::vector<bool> engine_done_; // the engine sent its final delta (or never got the request)
    std::shared_ptr<Channel> channel_;
    int remaining_ = 0;
};

} // namespace deepinfer::server
