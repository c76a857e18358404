#include "engine/sampling_params.h"

#include <cmath>
#include <string>

#include "engine/request.h"

namespace deepinfer::engine {

namespace {
core::Status bad(const std::string& field, const std::string& why) {
    return core::invalid_argument("sampling parameter '" + field + "' " + why);
}
} // namespace

core::Status SamplingParams::validate(int64_t vocab_size, int32_t max_logprobs) const {
    if (n < 1 || n > 128) return bad("n", "must be in [1, 128], got " + std::to_string(n));
    if (!std::isfinite(temperature) || temperature < 0.0f)
        return bad("temperature", "must be >= 0, got " + std::to_string(temperature));
    if (top_k < -1) return bad("top_k", "must be -1, 0 (off) or positive, got " + std::to_string(top_k));
    if (!(top_p > 0.0f && top_p <= 1.0f))
        return bad("top_p", "must be in (0, 1], got " + std::to_string(top_p));
    if (!(min_p >= 0.0f && min_p <= 1.0f))
        return bad("min_p", "must be in [0, 1], got " + std::to_string(min_p));
    if (!(repetition_penalty > 0.0f) || !std::isfinite(repetition_penalty))
        return bad("repetition_penalty", "must be > 0, got " + std::to_string(repetition_penalty));
    if (!(presence_penalty >= -2.0f && presence_penalty <= 2.0f))
        return bad("presence_penalty", "must be in [-2, 2], got " + std::to_string(presence_penalty));
    if (!(frequency_penalty >= -2.0f && frequency_penalty <= 2.0f))
        return bad("frequency_penalty", "must be in [-2, 2], got " + std::to_string(frequency_penalty));
    for (const auto& [t, b] : logit_bias) {
        if (t < 0 || t >= vocab_size)
            return bad("logit_bias", "token id " + std::to_string(t) + " out of vocab");
        if (!std::isfinite(b) && !(std::isinf(b) && b < 0))
            return bad("logit_bias", "bias for token " + std::to_string(t) + " is not finite");
    }
    if (max_tokens && *max_tokens < 1)
        return bad("max_tokens", "must be >= 1, got " + std::to_string(*max_tokens));
    if (min_tokens < 0) return bad("min_tokens", "must be >= 0, got " + std::to_string(min_tokens));
    if (max_tokens && min_tokens > *max_tokens) return bad("min_tokens", "must be <= max_tokens");
    for (int32_t t : stop_token_ids)
        if (t < 0 || t >= vocab_size)
            return bad("stop_token_ids", "token id " + std::to_string(t) + " out of vocab");
    if (logprobs && (*logprobs < 0 || *logprobs > max_logprobs))
        return bad("logprobs",
                   "must be in [0, " + std::to_string(max_logprobs) + "], got " + std::to_string(*logprobs));
    if (prompt_logprobs && (*prompt_logprobs < 0 || *prompt_logprobs > max_logprobs))
        return bad("prompt_logprobs", "must be in [0, " + std::to_string(max_logprobs) + "], got " +
                                          std::to_string(*prompt_logprobs));
    return {};
}

} // namespace deepinfer::engine
