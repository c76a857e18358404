#pragma once
// Typed, validated OpenAI requests: what request_parser produces from a JSON body.

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "engine/sampling_params.h"
#include "server/backend.h"

namespace deepinfer::server {

// Fields shared by /v1/chat/completions and /v1/completions.
struct CommonRequest {
    std::string model;
    // The engine's own struct: n completions forked from one prompt, logprobs, stop ids, min_tokens,
    // ignore_eos. max_tokens unset until the prompt length is known ("as many as fit").
    engine::SamplingParams sampling;
    OutputConstraint constraint; // compiled by the backend into sampling.constraint
    std::vector<std::string> stop;
    bool include_stop_str_in_output = false; // vLLM: the matched stop string ends the text
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
    bool echo = false; // the prompt's text (and, with logprobs, its tokens' logprobs) before the output
    bool prompt_logprobs = false; // vLLM's prompt_logprobs field was given: each choice carries them
};

} // namespace deepinfer::server
