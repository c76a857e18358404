#pragma once
// Typed, validated OpenAI requests: what request_parser produces from a JSON body.

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "server/backend.h"

namespace deepinfer::server {

// Fields shared by /v1/chat/completions and /v1/completions.
struct CommonRequest {
    std::string model;
    SamplingOptions sampling; // max_tokens < 0 until the prompt length is known ("as many as fit")
    bool max_tokens_set = false;
    int n = 1;
    std::vector<std::string> stop;
    bool stream = false;
    bool include_usage = false; // stream_options.include_usage
    std::string user;
    std::string forced_output; // test hook (deepinfer_test.forced_output), honoured only when enabled
};

struct ChatRequest {
    CommonRequest common;
    ChatPrompt prompt;
    bool logprobs = false;
    std::string response_format = "text"; // text, json_object, json_schema
    std::string json_schema;              // response_format.json_schema.schema as JSON text
};

struct CompletionRequest {
    CommonRequest common;
    // One entry per prompt: text prompts are tokenized later, token-id prompts are used as given.
    std::vector<std::variant<std::string, std::vector<int32_t>>> prompts;
    bool echo = false;
};

} // namespace deepinfer::server
