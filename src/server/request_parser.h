#pragma once
// OpenAI JSON bodies -> typed requests. Every rejection names the offending field in ApiError::param.
// Never throws: JSON errors are caught here.

#include <string_view>
#include <variant>

#include "server/api_error.h"
#include "server/request_types.h"

namespace deepinfer::server {

struct ParserLimits {
    int vocab_size = 1 << 30;
    int max_n = 16;
    int max_stop = 16;
    int max_top_logprobs = 20;
    int max_depth = 64; // JSON nesting accepted at all
};

template <typename T> using Parsed = std::variant<T, ApiError>;

Parsed<ChatRequest> parse_chat_request(std::string_view body, const ParserLimits& limits);
Parsed<CompletionRequest> parse_completion_request(std::string_view body, const ParserLimits& limits);

// Rejects bodies nested deeper than max_depth without building them (hostile bodies).
bool json_depth_ok(std::string_view body, int max_depth);

} // namespace deepinfer::server
