#pragma once
// Per-request sampling parameters (OpenAI / vLLM semantics). The server fills this struct from a request;
// validate() names the offending field so the message can go straight back to the client.

#include <cstdint>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "core/status.h"
#include "engine/logits_constraint.h"

namespace deepinfer::engine {

struct SamplingParams {
    int32_t n = 1;                   // completions per request; they share the prompt's KV blocks
    float temperature = 1.0f;        // 0 = greedy (argmax fast path)
    int32_t top_k = 0;               // 0 or -1 = off
    float top_p = 1.0f;              // (0, 1]
    float min_p = 0.0f;              // [0, 1]
    float repetition_penalty = 1.0f; // > 0; over prompt and output tokens (vLLM/HF semantics)
    float presence_penalty = 0.0f;   // [-2, 2]; over output tokens
    float frequency_penalty = 0.0f;  // [-2, 2]; over output tokens
    std::vector<std::pair<int32_t, float>> logit_bias; // token id -> bias added to the logit
    std::optional<uint64_t> seed;      // same seed => same tokens, whatever else shares the batch
    std::optional<int32_t> max_tokens; // unset: up to the engine's max model length
    int32_t min_tokens = 0;            // stop tokens (and EOS) are suppressed before this many outputs
    std::vector<int32_t> stop_token_ids;
    bool ignore_eos = false;
    std::optional<int32_t> logprobs;        // per output token: the sampled token's logprob + this many top
    std::optional<int32_t> prompt_logprobs; // per prompt token (first is empty), with this many top
    // Structured output: a prototype each sequence clones (logits_constraint.h); null = unconstrained.
    std::shared_ptr<const LogitsConstraint> constraint;

    bool greedy() const { return temperature < 1e-5f; }
    // Checks ranges; vocab_size bounds logit_bias and stop ids; max_logprobs bounds logprobs fields.
    core::Status validate(int64_t vocab_size, int32_t max_logprobs = 20) const;
};

} // namespace deepinfer::engine
