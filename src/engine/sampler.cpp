#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/check.h"
#include "engine/philox.h"

namespace deepinfer::engine {

namespace {
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

int32_t argmax(std::span<const float> v) { // ties: lowest id; NaN never wins
    int32_t best = 0;
    for (int32_t i = 1; i < static_cast<int32_t>(v.size()); ++i)
        if (v[i] > v[best] || (std::isnan(v[best]) && !std::isnan(v[i]))) best = i;
    return best;
}

bool before(const std::pair<int32_t, double>& a, const std::pair<int32_t, double>& b) {
    return a.second != b.second ? a.second > b.second : a.first < b.first;
}
} // namespace

void Sampler::process_logits(const SampleInput& in, std::vector<float>* out) const {
    const SamplingParams& p = *in.params;
    const int64_t vocab = static_cast<int64_t>(in.logits.size());
    out->assign(in.logits.begin(), in.logits.end());
    std::vector<float>& l = *out;
    if (static_cast<int32_t>(in.output.size()) < p.min_tokens) {
        for (int32_t t : p.stop_token_ids) l[t] = kNegInf;
        if (!p.ignore_eos && in.eos_token_id >= 0 && in.eos_token_id < vocab) l[in.eos_token_id] = kNegInf;
    }
    for (const auto& [t, bias] : p.logit_bias) l[t] += bias;
    if (p.repetition_penalty != 1.0f) {
        std::vector<bool> seen(vocab, false);
        for (int32_t t : in.prompt) seen[t] = true;
        for (int32_t t : in.output) seen[t] = true;
        for (int64_t t = 0; t < vocab; ++t)
            if (seen[t]) l[t] = l[t] > 0 ? l[t] / p.repetition_penalty : l[t] * p.repetition_penalty;
    }
    if (p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f) {
        std::vector<int32_t> counts(vocab, 0);
        for (int32_t t : in.output) ++counts[t];
        for (int64_t t = 0; t < vocab; ++t)
            if (counts[t] > 0) l[t] -= p.frequency_penalty * counts[t] + p.presence_penalty;
    }
}

std::vector<std::pair<int32_t, double>> Sampler::final_distribution(std::span<const float> processed,
                                                                    const SamplingParams& p) {
    const int32_t vocab = static_cast<int32_t>(processed.size());
    const double inv_t = 1.0 / std::max(p.temperature, 1e-5f);
    std::vector<std::pair<int32_t, double>> c; // (token, scaled logit), then probabilities
    c.reserve(vocab);
    for (int32_t t = 0; t < vocab; ++t) // NaN (a broken model) and -inf (masked) never win a draw
        if (processed[t] != kNegInf && !std::isnan(processed[t]))
            c.emplace_back(t, double(processed[t]) * inv_t);
    if (c.empty()) return {{argmax(processed), 1.0}}; // everything masked (e.g. logit_bias -inf everywhere)
    if (p.top_k > 0 && p.top_k < static_cast<int32_t>(c.size())) {
        std::nth_element(c.begin(), c.begin() + (p.top_k - 1), c.end(), before);
        c.resize(p.top_k);
    }
    std::sort(c.begin(), c.end(), before);
    const double max_logit = c.front().second;
    double sum = 0.0;
    for (auto& [t, v] : c) sum += (v = std::exp(v - max_logit));
    for (auto& [t, v] : c) v /= sum;
    if (p.top_p < 1.0f) { // smallest prefix whose mass reaches top_p
        double cum = 0.0;
        size_t keep = 0;
        while (keep < c.size() && cum < p.top_p) cum += c[keep++].second;
        c.resize(std::max<size_t>(keep, 1));
    }
    if (p.min_p > 0.0f) { // ratio to the most likely token, so renormalising first changes nothing
        const double floor = p.min_p * c.front().second;
        size_t keep = 1;
        while (keep < c.size() && c[keep].second >= floor) ++keep;
        c.resize(keep);
    }
    sum = 0.0;
    for (const auto& [t, v] : c) sum += v;
    for (auto& [t, v] : c) v /= sum;
    return c;
}

TokenLogprob Sampler::logprob_of(std::span<const float> logits, int32_t token, int32_t top_n) {
    const int32_t vocab = static_cast<int32_t>(logits.size());
    float max_logit = logits[argmax(logits)];
    double sum = 0.0;
    for (float v : logits) sum += std::exp(double(v) - max_logit);
    const double log_z = max_logit + std::log(sum);
    TokenLogprob r;
    r.token_id = token;
    r.logprob = static_cast<float>(logits[token] - log_z);
    r.rank = 1;
    for (int32_t t = 0; t < vocab; ++t)
        if (logits[t] > logits[token] || (logits[t] == logits[token] && t < token)) ++r.rank;
    if (top_n > 0) {
        std::vector<std::pair<int32_t, double>> all(vocab);
        for (int32_t t = 0; t < vocab; ++t) all[t] = {t, logits[t]};
        int32_t k = std::min(top_n, vocab);
        std::partial_sort(all.begin(), all.begin() + k, all.end(), before);
        for (int32_t i = 0; i < k; ++i)
            r.top.push_back({all[i].first, static_cast<float>(all[i].second - log_z)});
    }
    return r;
}

SampleResult Sampler::sample(const SampleInput& in) {
    const SamplingParams& p = *in.params;
    process_logits(in, &work_);
    SampleResult r;
    if (p.greedy()) {
        r.token = argmax(work_);
    } else {
        auto dist = final_distribution(work_, p);
        double u = philox_uniform(in.seed, static_cast<uint64_t>(in.position),
                                  static_cast<uint32_t>(in.sample_index), 0);
        r.token = dist.back().first; // if rounding leaves u above the cumulative sum
        double cum = 0.0;
        for (const auto& [t, prob] : dist) {
            cum += prob;
            if (u < cum) {
                r.token = t;
                break;
            }
        }
    }
    if (p.logprobs) r.logprob = logprob_of(in.logits, r.token, *p.logprobs);
    return r;
}

} // namespace deepinfer::engine
