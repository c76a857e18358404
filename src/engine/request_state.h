#pragma once
// The engine's record of a live request: its sequences (n of them), resolved limits, the random stream
// key, prompt logprobs gathered so far, and what has not been reported yet. Internal to the engine.

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "engine/request.h"
#include "engine/sequence.h"

namespace deepinfer::engine {

struct RequestState {
    Request request;
    uint64_t number = 0;                         // arrival order
    uint64_t rng_seed = 0;                       // params.seed, or derived from the engine seed and `number`
    int32_t max_tokens = 0;                      // resolved
    std::vector<std::unique_ptr<Sequence>> seqs; // [n]; seqs[0] prefills, the others fork from it
    bool children_started = false;               // seqs[1..] forked or queued
    int32_t cached_tokens = -1;                  // prefix-hit tokens at seqs[0]'s first admission
    std::vector<std::optional<TokenLogprob>> prompt_logprobs; // [prompt_len] when requested
    bool prompt_logprobs_sent = false;
    std::vector<std::vector<TokenLogprob>> pending_logprobs; // [n] not yet reported
    bool changed = false;                                    // has something to report this step
    bool finished = false;                                   // reported finished
    core::Status status;                                     // abort error, if any

    bool wants_prompt_logprobs() const { return request.params.prompt_logprobs.has_value(); }
    // Prompt position p's row yields the logprob of prompt token p + 1.
    bool needs_prompt_row(const Sequence& seq, int64_t p) const {
        return wants_prompt_logprobs() && seq.sample_index == 0 && p + 1 < seq.prompt_len &&
               !prompt_logprobs[p + 1].has_value();
    }
    void on_admitted(const Sequence& seq, int64_t hit_tokens) {
        if (seq.sample_index == 0 && cached_tokens < 0) cached_tokens = static_cast<int32_t>(hit_tokens);
    }
    bool all_finished() const {
        for (const auto& s : seqs)
            if (!s->is_finished()) return false;
        return true;
    }
};

} // namespace deepinfer::engine
