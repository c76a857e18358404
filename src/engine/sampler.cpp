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

namespace {
constexpr int32_t kBuckets = 4096;
constexpr double kMaxBucketSpan = 64.0; // logits further below the max share the last bucket (mass < e^-64)

bool logit_before(double la, int32_t ta, double lb, int32_t tb) {
    return la != lb ? la > lb : ta < tb;
}
} // namespace

void Sampler::gather_bucket(int32_t bucket, bool kept_only) {
    sorted_.clear();
    for (Candidate& c : cand_)
        if (c.bucket == bucket && (!kept_only || c.kept)) sorted_.push_back(&c);
    std::sort(sorted_.begin(), sorted_.end(), [](const Candidate* a, const Candidate* b) {
        return logit_before(a->logit, a->token, b->logit, b->token);
    });
}

int32_t Sampler::draw(std::span<const float> processed, const SamplingParams& p, double u) {
    const int32_t vocab = static_cast<int32_t>(processed.size());
    const double inv_t = 1.0 / std::max(p.temperature, 1e-5f);
    cand_.clear();
    double max_logit = -std::numeric_limits<double>::infinity();
    double min_logit = std::numeric_limits<double>::infinity();
    for (int32_t t = 0; t < vocab; ++t) { // NaN (a broken model) and -inf (masked) never win a draw
        if (processed[t] == kNegInf || std::isnan(processed[t])) continue;
        const double v = double(processed[t]) * inv_t;
        cand_.push_back({t, 0, v, 0.0, true});
        max_logit = std::max(max_logit, v);
        min_logit = std::min(min_logit, v);
    }
    if (cand_.empty()) return argmax(processed);
    if (p.top_k > 0 && p.top_k < static_cast<int32_t>(cand_.size())) { // partial selection: O(vocab)
        std::nth_element(cand_.begin(), cand_.begin() + (p.top_k - 1), cand_.end(),
                         [](const Candidate& a, const Candidate& b) {
                             return logit_before(a.logit, a.token, b.logit, b.token);
                         });
        cand_.resize(p.top_k);
        min_logit = max_logit;
        for (const Candidate& c : cand_) min_logit = std::min(min_logit, c.logit);
    }
    // Buckets by distance below the max logit, finest where the candidates are: bucket order is the
    // sorted order up to ties inside a bucket.
    const double span = std::min(max_logit - min_logit, kMaxBucketSpan);
    const double scale = span > 0 ? (kBuckets - 1) / span : 0.0;
    bucket_mass_.assign(kBuckets, 0.0);
    double total = 0.0;
    for (Candidate& c : cand_) {
        const double d = max_logit - c.logit;
        c.bucket = d >= span ? kBuckets - 1 : static_cast<int32_t>(d * scale);
        c.mass = std::exp(c.logit - max_logit);
        bucket_mass_[c.bucket] += c.mass;
        total += c.mass;
    }
    // top-p: the smallest most-likely-first prefix whose mass reaches top_p (at least one token). Whole
    // buckets before the cut are kept; only the cut bucket is sorted.
    if (p.top_p < 1.0f) {
        const double goal = p.top_p * total;
        double cum = 0.0;
        int32_t cut = 0;
        while (cut < kBuckets - 1 && cum + bucket_mass_[cut] < goal) cum += bucket_mass_[cut++];
        gather_bucket(cut, false);
        size_t keep = 0;
        while (keep < sorted_.size() && (cum < goal || keep == 0)) cum += sorted_[keep++]->mass;
        for (size_t i = keep; i < sorted_.size(); ++i) sorted_[i]->kept = false;
        for (Candidate& c : cand_)
            if (c.bucket > cut) c.kept = false;
    }
    // min-p: relative to the most likely token, whose mass is exp(0) = 1; that token is always kept.
    if (p.min_p > 0.0f) {
        for (Candidate& c : cand_)
            if (c.mass < p.min_p && c.logit != max_logit) c.kept = false;
    }
    double kept_total = 0.0;
    std::fill(bucket_mass_.begin(), bucket_mass_.end(), 0.0);
    for (const Candidate& c : cand_) {
        if (!c.kept) continue;
        bucket_mass_[c.bucket] += c.mass;
        kept_total += c.mass;
    }
    // The inverse-CDF draw: locate the bucket holding u's share of the mass, then walk its tokens in order.
    const double target = u * kept_total;
    double cum = 0.0;
    int32_t b = 0, last = 0;
    for (; b < kBuckets; ++b) {
        if (bucket_mass_[b] == 0.0) continue;
        last = b;
        if (target < cum + bucket_mass_[b]) break;
        cum += bucket_mass_[b];
    }
    if (b == kBuckets) { // rounding left u above the cumulative sum: the least likely kept token
        gather_bucket(last, true);
        return sorted_.back()->token;
    }
    gather_bucket(b, true);
    for (Candidate* c : sorted_) {
        cum += c->mass;
        if (target < cum) return c->token;
    }
    return sorted_.back()->token;
}

SampleResult Sampler::sample(const SampleInput& in) {
    const SamplingParams& p = *in.params;
    process_logits(in, &work_);
    SampleResult r;
    if (p.greedy()) {
        r.token = argmax(work_);
    } else {
        double u = philox_uniform(in.seed, static_cast<uint64_t>(in.position),
                                  static_cast<uint32_t>(in.sample_index), 0);
        r.token = draw(work_, p, u);
    }
    if (p.logprobs) r.logprob = logprob_of(in.logits, r.token, *p.logprobs);
    return r;
}

} // namespace deepinfer::engine
