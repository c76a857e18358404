#pragma once
// OpenAI JSON bodies -> typed requests. Every rejection names the offending field in ApiError::param.
// Never throws: JSON errors are caught here.

#include <optional>
#include <string_view>
#include <variant>

#include "http/body.h"
#include "server/api_error.h"
#include "server/json_fields.h"
#include "server/request_types.h"
#include "tokenizer/chat_defaults.h"

namespace deepinfer::server {

// The body's JSON shape limits (http/body.h), then the request's.
struct ParserLimits : http::JsonShapeLimits {
    int vocab_size = 1 << 30;
    int max_n = 16;
    int max_stop = 16;
    int max_stop_token_ids = 1024;
    int max_top_logprobs = 20;
    tokenizer::ChatDefaults chat_defaults; // a chat request's thinking mode where it says nothing
};

template <typename T> using Parsed = std::variant<T, ApiError>;

Parsed<ChatRequest> parse_chat_request(std::string_view body, const ParserLimits& limits);
Parsed<CompletionRequest> parse_completion_request(std::string_view body, const ParserLimits& limits);

using http::json_shape_problem;

namespace detail { // shared by request_parser.cpp (common fields, completions) and chat_request_parser.cpp
std::optional<json> parse_body(std::string_view body, const ParserLimits& limits, FieldErrors& err);
bool parse_common(const json& j, const ParserLimits& limits, CommonRequest& r, FieldErrors& err);
} // namespace detail

} // namespace deepinfer::server
