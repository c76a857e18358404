#pragma once
// The Anthropic Messages API's shapes (POST /v1/messages), as DeepSeek's own API offers them so that
// Anthropic-API coding agents can use the model: a Messages request is translated into the equivalent
// OpenAI chat request (then parsed and validated by the chat parser like any other), and the chat pipeline's
// output is rendered as Anthropic content blocks, stream events and errors.

#include <string>
#include <string_view>
#include <variant>

#include <nlohmann/json.hpp>

#include "server/api_error.h"
#include "server/backend.h"

namespace deepinfer::server {

// A Messages request body -> the OpenAI chat request body it means:
//   system (string or text blocks) -> a system message; user content blocks: text -> the user message,
//   tool_result -> a tool message (before the user's text); assistant blocks: text -> content, thinking ->
//   reasoning_content, tool_use -> tool_calls; max_tokens (required) -> max_tokens; stop_sequences -> stop;
//   temperature / top_p / top_k; tools (name, description, input_schema) -> function tools; tool_choice
//   auto / any / tool / none -> auto / required / named / none (disable_parallel_tool_use ->
//   parallel_tool_calls false); thinking {type: enabled|disabled} -> chat_template_kwargs.thinking;
//   metadata.user_id -> user; stream. Errors name the Messages field (`messages[1].content[0].tool_use_id`).
std::variant<nlohmann::ordered_json, ApiError> anthropic_to_chat_request(std::string_view body,
                                                                         const std::string& shape_problem);

// "end_turn", "max_tokens", "stop_sequence", "tool_use" from the chat pipeline's finish reason.
std::string anthropic_stop_reason(const std::string& finish_reason, const std::string& stop_sequence);

// tool_use input: the call's JSON arguments as an object ({} when they are not one).
nlohmann::ordered_json anthropic_tool_input(const std::string& arguments);

// Builds the stream of Anthropic events from the chat pipeline's parsed deltas: opens and closes content
// blocks (thinking, text, tool_use) as the output moves between them.
class AnthropicStreamWriter {
public:
    // SSE "event: <type>\ndata: <json>\n\n".
    static std::string event(const nlohmann::ordered_json& data);
    // content_block_start / _delta / _stop events for this delta, appended to `out`.
    void push(const ParsedDelta& delta, std::string& out);
    // Closes the open block.
    void close(std::string& out);

private:
    enum class Open { kNone, kThinking, kText, kToolUse };
    void open(Open kind, const nlohmann::ordered_json& block, std::string& out);
    Open open_ = Open::kNone;
    int index_ = -1;      // of the open block
    int tool_index_ = -1; // the parser's index of the open tool call
};

} // namespace deepinfer::server
