#include "engine/sampler.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <tuple>

#include "core/check.h"
#include "engine/philox.h"
#include "kernels/ops.h"

namespace deepinfer::engine {

namespace {
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

int32_t argmax(std::span<const float> v) { // ties: lowest id; NaN never wins
    return kernels::argmax(v.data(), static_cast<int64_t>(v.size()));
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
constexpr int32_t kMaxBuckets = 4096;   // about 32 tokens a bucket at the real vocabulary
constexpr float kMaxBucketSpan = 64.0f; // logits further below the max share the last bucket (mass < e^-64)

// Most likely first, ties by lower id: final_distribution's order (scaling by 1/temperature keeps it).
bool logit_before(float la, int32_t ta, float lb, int32_t tb) {
    return la != lb ? la > lb : ta < tb;
}
} // namespace

bool Sampler::kept(std::span<const float> processed, int32_t t) const {
    const int32_t b = bucket_[t];
    return b >= 0 && b <= last_bucket_ && (mass_[t] >= min_p_ || processed[t] == max_logit_);
}

void Sampler::gather_bucket(std::span<const float> processed, int32_t bucket) {
    sorted_.clear();
    const int32_t vocab = static_cast<int32_t>(processed.size());
    for (int32_t t = 0; t < vocab; ++t)
        if (bucket_[t] == bucket && kept(processed, t)) sorted_.push_back(t);
    std::sort(sorted_.begin(), sorted_.end(),
              [&](int32_t a, int32_t b) { return logit_before(processed[a], a, processed[b], b); });
}

namespace {
// e^y for y in [-87, 0], to ~2e-7 relative, in plain arithmetic the compiler vectorizes (std::exp is a
// call per element): 2^z with z = y log2(e) split into an integer (the float's exponent bits; rounded by
// the 1.5 * 2^23 trick, since a float-to-int conversion keeps GCC from vectorizing under trapping math)
// and a fraction in [-0.5, 0.5] (a degree-6 polynomial).
inline float exp_in_range(float y) {
    const float z = y * 1.44269504f;
    const float magic = 12582912.0f;
    const float r = z + magic;
    const float f = z - (r - magic);
    const int32_t k = std::bit_cast<int32_t>(r) - std::bit_cast<int32_t>(magic);
    float p = 1.5403530e-4f;
    p = p * f + 1.3333558e-3f;
    p = p * f + 9.6181291e-3f;
    p = p * f + 5.5504109e-2f;
    p = p * f + 2.4022651e-1f;
    p = p * f + 6.9314718e-1f;
    p = p * f + 1.0f;
    return p * std::bit_cast<float>((k + 127) << 23);
}
} // namespace

namespace {
// The vectorizable passes, compiled for AVX-512 and AVX2 too (picked at load time): the engine is built for
// baseline x86-64, and these passes are most of a sampled token's cost. Results are the same bits on every
// ISA (no FMA contraction in ISO C++ mode; only elementwise IEEE operations).
// Not under sanitizers: an ifunc resolver runs before their runtimes start (TSan crashes in it).
#if defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
#define DI_SAMPLER_NO_CLONES 1
#endif
#endif
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__) || defined(DI_SAMPLER_NO_CLONES)
#define DI_SAMPLER_CLONES
#else
#define DI_SAMPLER_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#endif

struct Range {
    float max_x, min_x;
    int32_t n_valid;
};

// Floats as ints that order the same way (for the non-NaN ones): integer max/min reductions vectorize where
// float ones do not (not associative under IEEE rules, as far as the compiler knows).
inline int32_t ordered_int(float x) {
    const int32_t i = std::bit_cast<int32_t>(x);
    return i ^ ((i >> 31) & 0x7fffffff);
}
inline float from_ordered_int(int32_t i) {
    return std::bit_cast<float>(i ^ ((i >> 31) & 0x7fffffff));
}

DI_SAMPLER_CLONES Range scan_range(const float* xs, int32_t vocab) {
    int32_t max_i = std::numeric_limits<int32_t>::min(), min_i = std::numeric_limits<int32_t>::max();
    int32_t n_valid = 0;
    // Valid: above -inf and not NaN, tested on the ints (a float comparison may trap on NaN, which keeps
    // the compiler from vectorizing it): NaNs map above +inf or below -inf.
    const int32_t lowest = ordered_int(kNegInf),
                  highest = ordered_int(std::numeric_limits<float>::infinity());
    for (int32_t t = 0; t < vocab; ++t) {
        const int32_t k = ordered_int(xs[t]);
        const int32_t ok = static_cast<int32_t>(k > lowest) & static_cast<int32_t>(k <= highest);
        const int32_t mask = -ok; // all ones for a valid logit
        max_i = std::max(max_i, (k & mask) | (std::numeric_limits<int32_t>::min() & ~mask));
        min_i = std::min(min_i, (k & mask) | (std::numeric_limits<int32_t>::max() & ~mask));
        n_valid += ok;
    }
    if (n_valid == 0) return {kNegInf, std::numeric_limits<float>::infinity(), 0};
    return {from_ordered_int(max_i), from_ordered_int(min_i), n_valid};
}

// One pass: each token's mass exp((x - max) / T) and its bucket by distance below the max (-1: masked).
DI_SAMPLER_CLONES void masses_and_buckets(const float* xs, int32_t vocab, float max_x, float inv_t,
                                          float span, float scale, int32_t num_buckets, float* mass,
                                          int16_t* bucket) {
    for (int32_t t = 0; t < vocab; ++t) {
        const float x = xs[t];
        const float y = (x - max_x) * inv_t;
        mass[t] = exp_in_range(y > -87.0f ? y : -87.0f); // NaN and -inf too (their masses are never read)
        // Rounded rather than truncated (the same trick as exp_in_range): any monotone map will do.
        const float d = std::min(span, (max_x - x) * inv_t); // NaN -> span
        const int32_t b =
            std::bit_cast<int32_t>(d * scale + 12582912.0f) - std::bit_cast<int32_t>(12582912.0f);
        bucket[t] = static_cast<int16_t>(x > kNegInf ? std::min(num_buckets - 1, b) : -1);
    }
}
// Appends to `out` the tokens whose bucket is in [lo, hi] or is `extra`. Blocks of 64 are tested with a
// vectorizable OR first: the (rare) hits cost a scalar look only in their block.
DI_SAMPLER_CLONES void collect_buckets(const int16_t* bucket, int32_t vocab, int32_t lo, int32_t hi,
                                       int32_t extra, std::vector<int32_t>& out) {
    const uint32_t width = static_cast<uint32_t>(hi - lo);
    auto wanted = [&](int16_t b) { return static_cast<uint32_t>(b - lo) <= width || b == extra; };
    int32_t t = 0;
    for (; t + 64 <= vocab; t += 64) {
        int hit = 0;
        for (int32_t i = t; i < t + 64; ++i) hit |= wanted(bucket[i]);
        if (!hit) continue;
        for (int32_t i = t; i < t + 64; ++i)
            if (wanted(bucket[i])) out.push_back(i);
    }
    for (; t < vocab; ++t)
        if (wanted(bucket[t])) out.push_back(t);
}

// Each candidate's mass added to its bucket's: the one pass of draw() that cannot vectorize (a scatter).
// Four interleaved partial histograms let consecutive adds proceed without waiting on one another (even to
// one bucket), and a discard slot in front of each takes the non-candidates (bucket -1), so the loop has
// no branch to mispredict.
void bucket_histogram(const int16_t* bucket, const float* mass, int32_t vocab, int32_t num_buckets,
                      std::vector<double>& partial, std::vector<double>& out) {
    const size_t stride = static_cast<size_t>(num_buckets) + 1;
    partial.assign(4 * stride, 0.0);
    double* h0 = partial.data() + 1; // h0[-1]: the discard slot
    double* h1 = h0 + stride;
    double* h2 = h1 + stride;
    double* h3 = h2 + stride;
    int32_t t = 0;
    for (; t + 16 <= vocab; t += 16) {
        // A block of 16 tokens all in the discard slot (-1: masked, e.g. by a grammar, or below the range)
        // adds nothing to a kept bucket: skip it. The kept buckets' sums are unchanged (same lanes, same
        // order), so every draw is too; a constrained row no longer pays a chain of dependent stores into
        // the one discard slot.
        int16_t all = -1; // stays -1 only if every token of the block is discarded
        for (int32_t i = t; i < t + 16; ++i) all = static_cast<int16_t>(all & bucket[i]);
        if (all == -1) continue;
        for (int32_t i = t; i < t + 16; i += 4) {
            h0[bucket[i]] += mass[i];
            h1[bucket[i + 1]] += mass[i + 1];
            h2[bucket[i + 2]] += mass[i + 2];
            h3[bucket[i + 3]] += mass[i + 3];
        }
    }
    for (; t + 4 <= vocab; t += 4) {
        h0[bucket[t]] += mass[t];
        h1[bucket[t + 1]] += mass[t + 1];
        h2[bucket[t + 2]] += mass[t + 2];
        h3[bucket[t + 3]] += mass[t + 3];
    }
    for (; t < vocab; ++t) h0[bucket[t]] += mass[t];
    out.resize(num_buckets);
    for (int32_t b = 0; b < num_buckets; ++b) out[b] = (h0[b] + h1[b]) + (h2[b] + h3[b]);
}
} // namespace

int32_t Sampler::draw(std::span<const float> processed, const SamplingParams& p, double u) {
    const int32_t vocab = static_cast<int32_t>(processed.size());
    const float inv_t = 1.0f / std::max(p.temperature, 1e-5f);
    // NaN (a broken model) and -inf (masked) never win a draw.
    auto [max_x, min_x, n_valid] = scan_range(processed.data(), vocab);
    if (n_valid == 0) return argmax(processed);
    // top-k by partial selection: the k-th candidate bounds the rest.
    float kth_x = kNegInf;
    int32_t kth_t = vocab;
    if (p.top_k > 0 && p.top_k < n_valid) {
        topk_.clear();
        for (int32_t t = 0; t < vocab; ++t)
            if (processed[t] > kNegInf) topk_.emplace_back(processed[t], t);
        std::nth_element(topk_.begin(), topk_.begin() + (p.top_k - 1), topk_.end(),
                         [](auto& a, auto& b) { return logit_before(a.first, a.second, b.first, b.second); });
        std::tie(kth_x, kth_t) = topk_[p.top_k - 1];
        min_x = kth_x;
    }
    // Buckets by distance below the max, finest where the candidates are: bucket order is the sorted order
    // up to ties inside a bucket.
    const float span = std::min((max_x - min_x) * inv_t, kMaxBucketSpan);
    const int32_t num_buckets = std::clamp(vocab / 32, 1, kMaxBuckets);
    const float scale = span > 0 ? (num_buckets - 1) / span : 0.0f;
    bucket_.resize(vocab);
    mass_.resize(vocab);
    max_logit_ = max_x;
    min_p_ = 0.0f;
    last_bucket_ = num_buckets - 1;
    masses_and_buckets(processed.data(), vocab, max_x, inv_t, span, scale, num_buckets, mass_.data(),
                       bucket_.data());
    if (kth_t < vocab) {
        for (int32_t t = 0; t < vocab; ++t) {
            const float x = processed[t];
            if (!(x > kth_x || (x == kth_x && t <= kth_t))) {
                bucket_[t] = -1;
                mass_[t] = 0.0f;
            }
        }
    }
    bucket_histogram(bucket_.data(), mass_.data(), vocab, num_buckets, partial_mass_, bucket_mass_);
    double total = 0.0;
    for (double m : bucket_mass_) total += m;
    if (p.min_p > 0.0f) return draw_min_p(processed, p, u, total);

    // The buckets the draw can land in. With top-p the kept mass is known only once the cut bucket (where
    // the most-likely-first prefix reaches top_p) is sorted; it lies between the mass before that bucket
    // and the mass through it, so u's share of it lies in the buckets [lo, hi] between u times each. One
    // scan collects those and the cut bucket, one sort orders them.
    const bool top_p = p.top_p < 1.0f;
    int32_t cut = num_buckets - 1;
    double before_cut = 0.0; // mass of the buckets before `cut`
    const double goal = p.top_p * total;
    if (top_p) {
        cut = 0;
        while (cut < num_buckets - 1 && before_cut + bucket_mass_[cut] < goal)
            before_cut += bucket_mass_[cut++];
    }
    const double lo_target = top_p ? u * before_cut : u * total;
    const double hi_target = top_p ? u * (before_cut + bucket_mass_[cut]) : u * total;
    int32_t lo = 0;
    double before_lo = 0.0;
    while (lo < cut && before_lo + bucket_mass_[lo] <= lo_target) before_lo += bucket_mass_[lo++];
    int32_t hi = lo;
    for (double before_hi = before_lo; hi < cut && before_hi + bucket_mass_[hi] <= hi_target;)
        before_hi += bucket_mass_[hi++];
    const int32_t extra = top_p ? cut : hi; // the cut bucket, when it is not in [lo, hi]
    sorted_.clear();
    const int16_t* bucket = bucket_.data();
    collect_buckets(bucket, vocab, lo, hi, extra, sorted_);
    DI_CHECK(!sorted_.empty()); // bucket lo holds mass (the most likely token's, 1, at the least)
    std::sort(sorted_.begin(), sorted_.end(),
              [&](int32_t a, int32_t b) { return logit_before(processed[a], a, processed[b], b); });
    // [0, first_cut): the buckets [lo, hi] before the cut one; [first_cut, keep): the cut bucket's tokens
    // inside the top-p prefix (the smallest most-likely-first prefix reaching top_p, at least one token).
    size_t first_cut = sorted_.size(), keep = sorted_.size();
    double kept_total = total;
    if (top_p) {
        first_cut = 0;
        while (first_cut < sorted_.size() && bucket[sorted_[first_cut]] < cut) ++first_cut;
        double cum = before_cut, cut_mass = 0.0;
        keep = first_cut;
        while (keep < sorted_.size() && (cum < goal || keep == first_cut)) {
            cum += mass_[sorted_[keep]];
            cut_mass += mass_[sorted_[keep++]];
        }
        kept_total = before_cut + cut_mass;
    }
    // The inverse-CDF draw, walking from bucket lo on.
    const double target = u * kept_total;
    double cum = before_lo;
    const size_t walk_end = hi == cut ? keep : first_cut;
    for (size_t i = 0; i < walk_end; ++i) {
        cum += mass_[sorted_[i]];
        if (target < cum) return sorted_[i];
    }
    // Rounding left u above the cumulative sum: the least likely token walked.
    return sorted_[walk_end > 0 ? walk_end - 1 : 0];
}

// min-p drops tokens anywhere below a fraction of the most likely token's mass: the buckets are recounted
// over the tokens still kept, then the draw walks them.
int32_t Sampler::draw_min_p(std::span<const float> processed, const SamplingParams& p, double u,
                            double total) {
    const int32_t vocab = static_cast<int32_t>(processed.size());
    const int32_t num_buckets = static_cast<int32_t>(bucket_mass_.size());
    if (p.top_p < 1.0f) {
        const double goal = p.top_p * total;
        double cum = 0.0;
        int32_t cut = 0;
        while (cut < num_buckets - 1 && cum + bucket_mass_[cut] < goal) cum += bucket_mass_[cut++];
        gather_bucket(processed, cut);
        size_t keep = 0;
        while (keep < sorted_.size() && (cum < goal || keep == 0)) cum += mass_[sorted_[keep++]];
        for (size_t i = keep; i < sorted_.size(); ++i) bucket_[sorted_[i]] = -1;
        last_bucket_ = cut;
    }
    // Relative to the most likely token, whose mass is exp(0) = 1 (always kept).
    min_p_ = p.min_p;
    double kept_total = 0.0;
    std::fill(bucket_mass_.begin(), bucket_mass_.end(), 0.0);
    for (int32_t t = 0; t < vocab; ++t) {
        if (!kept(processed, t)) continue;
        bucket_mass_[bucket_[t]] += mass_[t];
        kept_total += mass_[t];
    }
    const double target = u * kept_total;
    double cum = 0.0;
    int32_t b = 0, last = 0;
    for (; b < num_buckets; ++b) {
        if (bucket_mass_[b] == 0.0) continue;
        last = b;
        if (target < cum + bucket_mass_[b]) break;
        cum += bucket_mass_[b];
    }
    gather_bucket(processed, b == num_buckets ? last : b);
    if (b < num_buckets) {
        for (int32_t t : sorted_) {
            cum += mass_[t];
            if (target < cum) return t;
        }
    }
    return sorted_.back();
}

bool Sampler::changes_logits(const SampleInput& in) {
    const SamplingParams& p = *in.params;
    const bool min_tokens_mask =
        static_cast<int32_t>(in.output.size()) < p.min_tokens &&
        (!p.stop_token_ids.empty() ||
         (!p.ignore_eos && in.eos_token_id >= 0 && in.eos_token_id < static_cast<int64_t>(in.logits.size())));
    return min_tokens_mask || !p.logit_bias.empty() || p.repetition_penalty != 1.0f ||
           p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f;
}

SampleResult Sampler::sample(const SampleInput& in) {
    const SamplingParams& p = *in.params;
    // Without a transform the processed row is the raw one: read it in place rather than copy 0.5 MB.
    std::span<const float> processed = in.logits;
    if (changes_logits(in)) {
        process_logits(in, &work_);
        processed = work_;
    }
    SampleResult r;
    if (p.greedy()) {
        r.token = argmax(processed);
    } else {
        double u = philox_uniform(in.seed, static_cast<uint64_t>(in.position),
                                  static_cast<uint32_t>(in.sample_index), 0);
        r.token = draw(processed, p, u);
    }
    if (p.logprobs) r.logprob = logprob_of(in.logits, r.token, *p.logprobs);
    return r;
}

} // namespace deepinfer::engine
