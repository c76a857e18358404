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
    std::vector<TokenLogprob> logprobs;
    std::string finish_reason;
    void merge(const ParsedDelta& d);
};

struct TextChoiceResult {
    std::string text;
    std::vector<TokenLogprob> logprobs;
    std::string finish_reason;
};

// token_text renders a token id for logprobs.
using TokenText = std::function<std::string(int32_t)>;

json chat_logprobs_json(const std::vector<TokenLogprob>& lps, const TokenText& token_text);
json text_logprobs_json(const std::vector<TokenLogprob>& lps, const TokenText& token_text,
                        size_t text_offset);

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
