#pragma once
// Server-side work per request: submits one engine request per prompt (its n choices forked in the engine),
// and turns each choice's token deltas into text (incremental detokenization -> stop strings with hold-back
// -> DeepSeek output parser). The engine calls back on its own thread into a per-request channel; the HTTP
// thread drains it.

#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "server/backend.h"
#include "server/stop_matcher.h"

namespace deepinfer::server {

// What one choice produced since the last call, ready for a response builder.
struct ChoiceOutput {
    std::string text;   // completions: raw text after stop strings
    ParsedDelta parsed; // chat: text split into reasoning / content / tool calls
    std::vector<engine::TokenLogprob> logprobs;
    int new_tokens = 0;
    std::optional<std::string> finish_reason; // "stop", "length", "tool_calls", "abort", "error"
    std::string stop_sequence;                // with "stop": the stop string that ended it, if one did
    core::Status error;
};

class ChoicePipeline {
public:
    ChoicePipeline(const Backend& backend, std::vector<std::string> stops, bool chat, ParserOptions parser,
                   bool include_stop = false);

    // New tokens of this choice (logprobs parallel when requested), and why the engine ended it, if it did.
    ChoiceOutput push(std::span<const int32_t> tokens, std::span<const engine::TokenLogprob> logprobs,
                      std::optional<engine::FinishReason> finish);
    // The engine failed the request: ends the choice with finish "error".
    ChoiceOutput fail(core::Status error);
    bool finished() const { return finished_; }
    int completion_tokens() const { return completion_tokens_; }
    int reasoning_tokens() const { return reasoning_tokens_; }

private:
    void emit(const std::string& text, ChoiceOutput& out);
    // The OpenAI finish reason: "stop", "length", "tool_calls", "abort" or "error".
    void finish(std::string_view reason, ChoiceOutput& out);

    std::unique_ptr<IncrementalDetokenizer> detok_;
    StopMatcher stop_;
    std::unique_ptr<OutputParser> parser_; // null for completions
    bool finished_ = false;
    int completion_tokens_ = 0;
    int reasoning_tokens_ = 0;
    bool saw_tool_call_ = false;
};

// What one HTTP request runs: one engine request per prompt, each forked into params.n choices.
struct GenerationSpec {
    std::vector<std::vector<int32_t>> prompts;
    engine::SamplingParams params; // max_tokens resolved
    OutputConstraint constraint;
    std::vector<std::string> stops;
    bool include_stop_str = false; // the matched stop string stays in the text
    bool chat = false;
    ParserOptions parser;
    std::string forced_output; // test hook: emitted instead of engine output when non-empty
};

// Runs the choices of one HTTP request: choice i is completion i % n of prompt i / n. Destroying it aborts
// whatever is unfinished.
class Generation {
public:
    Generation(Backend& backend, std::string request_id, GenerationSpec spec);
    ~Generation();
    Generation(const Generation&) = delete;
    Generation& operator=(const Generation&) = delete;

    core::Status start();
    // Waits up to `timeout` for output; returns (choice, output) pairs, empty on timeout.
    std::vector<std::pair<int, ChoiceOutput>> poll(std::chrono::milliseconds timeout);
    bool done() const { return remaining_ == 0; }
    void abort_all();

    int num_choices() const { return static_cast<int>(pipelines_.size()); }
    int num_prompts() const { return static_cast<int>(spec_.prompts.size()); }
    int prompt_of(int choice) const { return choice / n_; }
    const ChoicePipeline& pipeline(int i) const { return *pipelines_[i]; }
    int cached_tokens(int prompt) const { return cached_tokens_[prompt]; }
    const std::vector<int32_t>& prompt(int p) const { return spec_.prompts[p]; }
    // The engine's prompt logprobs (params.prompt_logprobs set): one entry per prompt token, the first empty;
    // empty until the engine's first output for that prompt (which precedes its choices' outputs).
    const std::vector<std::optional<engine::TokenLogprob>>& prompt_logprobs(int p) const {
        return prompt_logprobs_[p];
    }

private:
    struct Item {
        int prompt = 0;
        engine::RequestOutput output;
    };
    struct Channel {
        std::mutex mu;
        std::condition_variable cv;
        std::deque<Item> items;
    };
    std::string engine_id(int prompt) const { return request_id_ + "-" + std::to_string(prompt); }
    void replay_forced(int prompt, const std::vector<int32_t>& forced);

    Backend& backend_;
    std::string request_id_;
    GenerationSpec spec_;
    int n_ = 1;
    std::vector<std::unique_ptr<ChoicePipeline>> pipelines_;
    std::vector<int> cached_tokens_;                                                // per prompt
    std::vector<std::vector<std::optional<engine::TokenLogprob>>> prompt_logprobs_; // per prompt
    std::vector<bool> engine_done_; // per prompt: the engine sent its final output (or never got it)
    std::shared_ptr<Channel> channel_;
    int remaining_ = 0;
};

} // namespace deepinfer::server
