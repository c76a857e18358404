#pragma once
// Token sampling for one logits row. Transforms, in vLLM's order:
//   min_tokens (stop ids and EOS masked until enough outputs), logit_bias, penalties (repetition over
//   prompt + output, presence/frequency over output), then greedy argmax, or temperature, top-k, top-p,
//   min-p and one inverse-CDF draw from Philox keyed by (seed, position, completion index). The draw never
//   sorts the vocabulary (draw()); final_distribution() is the obvious sorted version it is tested against.
// Logprobs are taken from the raw logits (log_softmax before any transform).

#include <cstdint>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "engine/request.h"
#include "engine/sampling_params.h"

namespace deepinfer::engine {

struct SampleInput {
    std::span<const float> logits; // [vocab] raw
    const SamplingParams* params = nullptr;
    std::span<const int32_t> prompt;
    std::span<const int32_t> output; // outputs so far (penalties, min_tokens)
    uint64_t seed = 0;
    int64_t position = 0;     // position of the token being sampled
    int32_t sample_index = 0; // which of the request's n completions
    int64_t eos_token_id = -1;
};

struct SampleResult {
    int32_t token = 0;
    std::optional<TokenLogprob> logprob; // when params->logprobs is set
};

class Sampler {
public:
    SampleResult sample(const SampleInput& in);

    // The processed logits (min_tokens mask, bias, penalties) before temperature; exposed for tests.
    void process_logits(const SampleInput& in, std::vector<float>* out) const;
    // Whether process_logits() changes anything for `in` (else sample() reads the raw row in place).
    static bool changes_logits(const SampleInput& in);
    // The final distribution a random draw uses: (token, probability) pairs, most likely first, summing
    // to 1, after temperature / top-k / top-p / min-p. Exposed for the statistical tests.
    static std::vector<std::pair<int32_t, double>> final_distribution(std::span<const float> processed,
                                                                      const SamplingParams& params);
    // The token an inverse-CDF draw at u in [0, 1) takes from final_distribution(processed, params), found
    // without sorting the vocabulary: candidates are bucketed by logit, bucket masses locate the top-p cut
    // and the draw, and only the (few) tokens of those two buckets are sorted. sample() uses this.
    int32_t draw(std::span<const float> processed, const SamplingParams& params, double u);
    // The raw log_softmax of token with its rank and the top_n most likely tokens.
    static TokenLogprob logprob_of(std::span<const float> logits, int32_t token, int32_t top_n);

private:
    // draw() with min_p > 0, after the buckets are counted (`total`: the mass of every candidate).
    int32_t draw_min_p(std::span<const float> processed, const SamplingParams& params, double u,
                       double total);
    // The tokens of `bucket` that are still kept, most likely first, into sorted_.
    void gather_bucket(std::span<const float> processed, int32_t bucket);
    bool kept(std::span<const float> processed, int32_t t) const;

    std::vector<float> work_;
    std::vector<int32_t> counts_;
    // draw()'s scratch, one entry per vocabulary id unless noted.
    std::vector<int16_t> bucket_; // -1: not a candidate (masked, NaN, outside top-k, or past the top-p cut)
    std::vector<float> mass_;     // exp(scaled logit - max)
    std::vector<double> bucket_mass_;             // [buckets]
    std::vector<double> partial_mass_;            // [4 * (buckets + 1)]: bucket_histogram()'s scratch
    std::vector<int32_t> sorted_;                 // the few buckets' tokens the draw needs, sorted
    std::vector<std::pair<float, int32_t>> topk_; // top-k selection
    float max_logit_ = 0.0f;
    float min_p_ = 0.0f;
    int32_t last_bucket_ = 0;
};

} // namespace deepinfer::engine
