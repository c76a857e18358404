#pragma once
// The narrow surface the server needs from the rest of deepinfer: prompt rendering and tokenization,
// an engine that takes token-id requests and streams token deltas back, incremental detokenization, and
// the DeepSeek output parser (reasoning / content / DSML tool calls). It speaks the engine's and the
// tokenizer's own types (engine::Request / RequestOutput / SamplingParams, tokenizer::Conversation): the
// server declares none of its own. The server owns everything else (HTTP, OpenAI schemas, stop strings,
// metrics). engine_backend.cpp binds it to the real engine and tokenizer; tests/server/fake_backend.cpp
// is a small deterministic stand-in, linked only into tests.

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "engine/grammar_constraint.h"
#include "engine/metrics.h"
#include "engine/request.h"
#include "kernels/profiler.h"
#include "tokenizer/chat_encoding.h"
#include "tokenizer/output_parser.h"
#include "tokenizer/text_codec.h"

namespace deepinfer::server {

// ---- Requests (token ids only: what the engine sees) ----

// Structured output (docs/structured-outputs.md): what the sampled text must follow, enforced by the engine
// backend with a per-step token mask (compiled into engine::SamplingParams::constraint). The test tree's fake
// backend ignores it.
struct OutputConstraint {
    std::optional<engine::GrammarKind> kind; // unset: none
    std::string source;       // kJsonSchema: schema JSON; kRegex: regex; kGbnf: GBNF; kDsmlTools: tools array
    std::string field;        // the request field it came from (named in errors)
    std::string only_tool;    // kDsmlTools: the one tool allowed ("" = any declared tool)
    bool single_call = false; // kDsmlTools: at most one call (parallel_tool_calls: false)
    bool after_thinking = false; // applies from the token after </think> (a chat request in thinking mode)
};

// The engine's outputs of one request (engine/request.h), on the engine's thread.
using OutputCallback = std::function<void(const engine::RequestOutput&)>;

struct EngineStats {
    int running = 0;
    int waiting = 0;
    double kv_cache_usage = 0.0; // fraction of KV blocks in use
    // The engine's totals (preemptions, prefix-cache queries and hits, prefill tokens: n > 1 completions
    // share one prefill).
    engine::EngineCounters counters;
    // The op census of every forward since start (kernels/profiler.h), when serve runs with --profile.
    std::optional<kernels::ProfileSnapshot> ops;
    // More Prometheus text for /metrics, HELP/TYPE lines included (EP load statistics under mpirun).
    std::string extra_metrics;
};

// ---- Chat prompt: parsed once from the request, straight into the tokenizer's encoder types ----

struct ChatPrompt {
    // Messages as DeepSeek V4's encoder takes them; conversation.tools holds the request's tools as OpenAI
    // tool objects ({"type": "function", "function": {name, description, parameters}}), rendered unless
    // tool_choice is "none".
    tokenizer::Conversation conversation;
    std::string tool_choice = "auto"; // auto, none, required, or "function:<name>"
    bool thinking = false;
    std::string reasoning_effort;    // "" (thinking without an effort prompt), "high", "max"
    tokenizer::Json response_format; // OpenAI response_format object; null for plain text
    // /tokenize's add_generation_prompt (vLLM): false leaves the assistant turn's opening out. Generation
    // requests always add it.
    bool add_generation_prompt = true;
    // deepinfer extension: encode message text without matching special tokens, so role markers typed by
    // users stay text. Unset: the server's --plain-content default (off: the official behaviour).
    std::optional<bool> plain_content;

    bool has_tools() const { return conversation.tools.is_array() && !conversation.tools.empty(); }
};

// ---- Streaming text pipeline pieces ----

using IncrementalDetokenizer = tokenizer::StreamDecoder; // tokenizer/text_codec.h

// Reasoning / content / tool-call deltas of the output (tokenizer/output_parser.h).
using tokenizer::OutputParser;
using tokenizer::ParsedDelta;
using tokenizer::ToolCallDelta;

struct ParserOptions {
    bool thinking = false;   // output starts inside reasoning
    bool parse_tools = true; // recognise DSML tool calls
    // tool_choice "auto": a call to a tool not in this list, or whose arguments break its parameters schema,
    // is returned as content text, not as a call (docs/structured-outputs.md). Empty: no check.
    tokenizer::Json
        validate_tools; // OpenAI tool objects ({"type": "function", "function": {...}}); null: none
};

class Backend {
public:
    virtual ~Backend() = default;

    virtual std::string model_name() const = 0;
    virtual int context_length() const = 0;
    virtual int vocab_size() const = 0;
    // The max_tokens a request of prompt_tokens tokens runs with: the one asked for, or (unset) as many as
    // the engine allows. Errors, with the numbers: OutOfRange (over the context length), ResourceExhausted
    // (can never fit in the KV pool). Checked before a response starts. This default knows only the
    // context length; the engine backend asks the engine, which also knows its KV pool.
    virtual core::Result<int> resolve_max_tokens(int prompt_tokens, std::optional<int> max_tokens) const {
        const int ctx = context_length();
        const int resolved = max_tokens.value_or(ctx - prompt_tokens);
        if (prompt_tokens >= ctx || static_cast<long long>(prompt_tokens) + resolved > ctx)
            return core::out_of_range("prompt " + std::to_string(prompt_tokens) + " + max_tokens " +
                                      std::to_string(resolved) + " exceeds the context length " +
                                      std::to_string(ctx));
        return resolved;
    }

    virtual core::Result<std::vector<int32_t>> render_chat(const ChatPrompt& prompt) const = 0;
    virtual core::Result<std::vector<int32_t>> tokenize(std::string_view text) const = 0;
    virtual std::unique_ptr<IncrementalDetokenizer> new_detokenizer() const = 0;
    // The text of one token for logprobs (special tokens included).
    virtual std::string token_text(int32_t token) const = 0;
    virtual std::unique_ptr<OutputParser> new_output_parser(const ParserOptions& options) const = 0;

    // Thread-safe. One engine request: its prompt forked into params.n completions (one prefill, shared
    // prefix blocks). The callback runs on the engine's thread and must return quickly; after an output with
    // finished == true it is never called again. abort() of a finished or unknown id is a no-op; an aborted
    // request still gets a final output (finish kAbort). Errors before anything runs are returned here.
    virtual core::Status submit(engine::Request request, const OutputConstraint& constraint,
                                OutputCallback callback) = 0;
    // Compiles (or finds cached) the constraint so a bad schema / regex / grammar is an error before the
    // response starts; InvalidArgument carries the compiler's message. Backends that ignore constraints
    // accept everything.
    virtual core::Status check_constraint(const OutputConstraint& constraint) const {
        (void)constraint;
        return {};
    }
    virtual void abort(const std::string& request_id) = 0;
    virtual EngineStats stats() const = 0;
};

// No token decodes to more than the longest token's bytes, so a text longer than context x that cannot fit in
// the context: it is refused before it is tokenized. Doubled (and padded) for normalizers that shrink text.
inline size_t max_prompt_bytes(const Backend& b) {
    size_t longest = 1;
    for (int32_t t = 0; t < b.vocab_size(); ++t) longest = std::max(longest, b.token_text(t).size());
    return 2 * longest * static_cast<size_t>(std::max(0, b.context_length())) + 4096;
}

} // namespace deepinfer::server
