#pragma once
// OpenAI JSON bodies -> typed requests. Every rejection names the offending field in ApiError::param.
// Never throws: JSON errors are caught here.

#include <string_view>
#include <variant>

#include "server/api_error.h"
#include "server/chat_defaults.h"
#include "server/request_types.h"

namespace deepinfer::server {

struct ParserLimits {
    int vocab_size = 1 << 30;
    int max_n = 16;
    int max_stop = 16;
    int max_stop_token_ids = 1024;
    int max_top_logprobs = 20;
    int max_depth = 64;             // JSON nesting accepted at all
    int max_object_members = 1024;  // members of any one object
    int max_total_members = 100000; // members of all objects together
    ChatDefaults chat_defaults;     // a chat request's thinking mode where it says nothing
};

template <typename T> using Parsed = std::variant<T, ApiError>;

Parsed<ChatRequest> parse_chat_request(std::string_view body, const ParserLimits& limits);
Parsed<CompletionRequest> parse_completion_request(std::string_view body, const ParserLimits& limits);

// Rejects hostile shapes before building the JSON (the parser keeps key order, which makes huge objects
// quadratic): nesting deeper than max_depth, too many members in one object or in all. Returns the
// reason, empty when the body is acceptable.
std::string json_shape_problem(std::string_view body, const ParserLimits& limits);

} // namespace deepinfer::server
