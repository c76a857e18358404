#pragma once
// What goes into the engine (Request) and what comes out of each step (RequestOutput): per-request deltas
// of new token ids with optional logprobs, finish reasons, and usage counts. This is the API the HTTP server
// and the offline driver use; the engine speaks token ids only.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/finish_reason.h"
#include "core/status.h"
#include "engine/sampling_params.h"

namespace deepinfer::engine {

struct Request {
    std::string id; // unique among live requests; chosen by the caller
    std::vector<int32_t> prompt_ids;
    SamplingParams params;
};

using core::finish_reason_name;
using core::FinishReason; // core/finish_reason.h: stop (EOS or a stop token id), length, abort

struct TopLogprob {
    int32_t token_id = 0;
    float logprob = 0.0f;
};

// Logprobs are of the model's raw distribution (log_softmax of the logits before penalties, bias and
// temperature), as vLLM reports them by default.
struct TokenLogprob {
    int32_t token_id = 0;
    float logprob = 0.0f;
    int32_t rank = 0;            // 1 = most likely token
    std::vector<TopLogprob> top; // the requested number of most likely tokens, best first
};

// New tokens of one completion (index within n) produced since the last output.
struct CompletionDelta {
    int32_t index = 0;
    std::vector<int32_t> token_ids;     // new tokens; a stop token / EOS that finished it is included
    std::vector<TokenLogprob> logprobs; // parallel to token_ids when logprobs were requested
    std::optional<FinishReason> finish_reason;
    std::optional<int32_t> stop_token_id; // the stop token (or EOS) when finish_reason is kStop
    int32_t num_output_tokens = 0;        // total so far for this completion
};

struct RequestOutput {
    std::string request_id;
    std::vector<CompletionDelta> deltas; // completions that changed this step
    // Set once, on the first output of a request that asked for prompt logprobs: one entry per prompt
    // token; entry 0 is empty (nothing predicts the first token).
    std::optional<std::vector<std::optional<TokenLogprob>>> prompt_logprobs;
    bool finished = false; // every completion has finished; no more outputs for this request
    core::Status status;   // non-ok if the request was aborted by an error
    // Usage (OpenAI "usage"): prompt tokens, output tokens over all completions, prompt tokens served from
    // the prefix cache on first admission.
    int32_t prompt_tokens = 0;
    int32_t completion_tokens = 0;
    int32_t cached_tokens = 0;
};

} // namespace deepinfer::engine
