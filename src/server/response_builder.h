#pragma once
// OpenAI response and stream-chunk JSON for chat and text completions.

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/backend.h"

namespace deepinfer::server {

using json = nlohmann::json;

struct Usage {
    int prompt_tokens = 0;
    int completion_tokens = 0;
    int cached_tokens = 0;
    int reasoning_tokens = 0;
};
json usage_json(const Usage& u);

struct ResponseMeta {
    std::string id; // chatcmpl-... / cmpl-...
    long long created = 0;
    std::string model;
};

// Accumulated result of one chat choice (non-streaming).
struct ChatChoiceResult {
    std::string content;
    std::string reasoning;
    std::vector<ToolCallDelta> tool_calls; // merged: one entry per call, arguments complete
    std::vector<engine::TokenLogprob> logprobs;
    std::string finish_reason;
    void merge(const ParsedDelta& d);
};

// A prompt echoed before a completion's output (echo with logprobs): its ids and their logprobs (the
// first entry is empty: nothing predicts the first token).
struct EchoedPrompt {
    std::vector<int32_t> ids;
    std::vector<std::optional<engine::TokenLogprob>> logprobs;
};

struct TextChoiceResult {
    std::string text;
    const EchoedPrompt* echo = nullptr;            // echo with logprobs: prompt entries lead the logprobs
    const EchoedPrompt* prompt_logprobs = nullptr; // vLLM's prompt_logprobs requested
    std::vector<engine::TokenLogprob> logprobs;
    std::string finish_reason;
};

// token_text renders a token id for logprobs.
using TokenText = std::function<std::string(int32_t)>;

json chat_logprobs_json(const std::vector<engine::TokenLogprob>& lps, const TokenText& token_text);
// Completions logprobs; text_offset counts characters (code points), as OpenAI's do. `echo`: the prompt's
// tokens first (the first with null logprobs).
json text_logprobs_json(const std::vector<engine::TokenLogprob>& lps, const TokenText& token_text,
                        size_t text_offset, const EchoedPrompt* echo = nullptr);
// vLLM's prompt_logprobs: per prompt token null (the first) or {"<id>": {logprob, rank, decoded_token}} for
// the token itself and the top alternatives.
json prompt_logprobs_json(const EchoedPrompt& prompt, const TokenText& token_text);
// Characters (code points) in UTF-8 text: bytes that do not continue a sequence.
size_t utf8_chars(std::string_view text);

json chat_completion_json(const ResponseMeta& meta, const std::vector<ChatChoiceResult>& choices,
                          const Usage& usage, bool with_logprobs, const TokenText& token_text);
json text_completion_json(const ResponseMeta& meta, const std::vector<TextChoiceResult>& choices,
                          const Usage& usage, bool with_logprobs, const TokenText& token_text);

// Stream chunks. `delta` is the chat delta object ({"role"}, {"content"}, {"reasoning_content", "reasoning"},
// {"tool_calls": [...]}) built by chat_delta_json.
json chat_delta_json(const ParsedDelta& d, bool first);
json chat_chunk_json(const ResponseMeta& meta, int index, json delta,
                     const std::optional<std::string>& finish, json logprobs);
json text_chunk_json(const ResponseMeta& meta, int index, const std::string& text,
                     const std::optional<std::string>& finish, json logprobs);
json usage_chunk_json(const ResponseMeta& meta, const char* object, const Usage& usage);

std::string sse_event(const json& j);
inline const char* sse_done() {
    return "data: [DONE]\n\n";
}

} // namespace deepinfer::server
