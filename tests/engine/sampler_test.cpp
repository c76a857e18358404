// Sampling transforms on fixed logits: exact masses of top-k / top-p / min-p / temperature against an
// independent computation, penalties and masks, and chi-square tests over many seeded draws.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <random>

#include "engine/sampler.h"

using namespace deepinfer::engine;

namespace {

// Probabilities by token id, deliberately not sorted by id.
const std::vector<double> kProbs = {0.05, 0.25, 0.02, 0.40, 0.10, 0.15, 0.03};

std::vector<float> logits_of(const std::vector<double>& p) {
    std::vector<float> l;
    for (double v : p) l.push_back(static_cast<float>(std::log(v) + 1.5)); // an offset must not matter
    return l;
}

std::map<int32_t, double> as_map(const std::vector<std::pair<int32_t, double>>& d) {
    return std::map<int32_t, double>(d.begin(), d.end());
}

SampleInput input(const std::vector<float>& logits, const SamplingParams& p, uint64_t seed = 0) {
    SampleInput in;
    in.logits = logits;
    in.params = &p;
    in.seed = seed;
    in.position = 10;
    in.eos_token_id = 0;
    return in;
}

// Upper critical value of chi-square with `df` degrees of freedom at p = 1e-4 (Wilson-Hilferty).
double chi2_critical_1e4(int df) {
    const double z = 3.719; // standard normal quantile for 1 - 1e-4
    double a = 2.0 / (9.0 * df);
    return df * std::pow(1.0 - a + z * std::sqrt(a), 3);
}

// Draws `n` tokens with seeds 0..n-1 and returns the chi-square statistic against `expected`.
double chi2_of_draws(const std::vector<float>& logits, const SamplingParams& p,
                     const std::map<int32_t, double>& expected, int n, std::map<int32_t, int>* counts_out) {
    Sampler s;
    std::map<int32_t, int> counts;
    for (int i = 0; i < n; ++i) ++counts[s.sample(input(logits, p, /*seed=*/i)).token];
    double chi2 = 0;
    for (const auto& [t, prob] : expected) {
        double e = prob * n;
        double o = counts.count(t) ? counts[t] : 0;
        chi2 += (o - e) * (o - e) / e;
    }
    *counts_out = counts;
    return chi2;
}

TEST(Sampler, GreedyIsArgmaxWithLowestIdOnTies) {
    std::vector<float> l = {1.0f, 3.0f, 2.0f, 3.0f};
    SamplingParams p;
    p.temperature = 0.0f;
    Sampler s;
    EXPECT_EQ(s.sample(input(l, p)).token, 1);
    p.logit_bias = {{2, 1.5f}};
    EXPECT_EQ(s.sample(input(l, p)).token, 2);
}

TEST(Sampler, TopKTopPMinPAndTemperatureMasses) {
    auto l = logits_of(kProbs);
    SamplingParams p;
    auto d = as_map(Sampler::final_distribution(l, p));
    ASSERT_EQ(d.size(), 7u);
    for (int t = 0; t < 7; ++t) EXPECT_NEAR(d[t], kProbs[t], 1e-6);

    p.top_k = 3; // 0.40, 0.25, 0.15
    d = as_map(Sampler::final_distribution(l, p));
    ASSERT_EQ(d.size(), 3u);
    EXPECT_NEAR(d[3], 0.40 / 0.80, 1e-6);
    EXPECT_NEAR(d[1], 0.25 / 0.80, 1e-6);
    EXPECT_NEAR(d[5], 0.15 / 0.80, 1e-6);

    p = {};
    p.top_p = 0.6f; // 0.40 + 0.25 reaches it
    d = as_map(Sampler::final_distribution(l, p));
    ASSERT_EQ(d.size(), 2u);
    EXPECT_NEAR(d[3], 0.40 / 0.65, 1e-6);

    p.top_p = 0.7f; // needs the 0.15 too
    EXPECT_EQ(Sampler::final_distribution(l, p).size(), 3u);

    p = {};
    p.min_p = 0.3f; // keep p >= 0.12
    d = as_map(Sampler::final_distribution(l, p));
    ASSERT_EQ(d.size(), 3u);
    EXPECT_NEAR(d[5], 0.15 / 0.80, 1e-6);

    p = {};
    p.temperature = 2.0f; // p^(1/2), renormalised
    d = as_map(Sampler::final_distribution(l, p));
    double z = 0;
    for (double v : kProbs) z += std::sqrt(v);
    for (int t = 0; t < 7; ++t) EXPECT_NEAR(d[t], std::sqrt(kProbs[t]) / z, 1e-6);

    p.top_k = 1; // top-1 is greedy whatever the temperature
    d = as_map(Sampler::final_distribution(l, p));
    ASSERT_EQ(d.size(), 1u);
    EXPECT_NEAR(d[3], 1.0, 1e-12);
}

TEST(Sampler, ChiSquareOfSeededDrawsMatchesTheDistribution) {
    auto l = logits_of(kProbs);
    const int n = 20000;
    std::map<int32_t, int> counts;

    SamplingParams p; // plain softmax over all 7
    std::map<int32_t, double> expected;
    for (int t = 0; t < 7; ++t) expected[t] = kProbs[t];
    double chi2 = chi2_of_draws(l, p, expected, n, &counts);
    EXPECT_LT(chi2, chi2_critical_1e4(6)) << "plain";

    // temperature 0.7, top-k 5, top-p 0.9, min-p 0.1, computed independently here.
    p.temperature = 0.7f;
    p.top_k = 5;
    p.top_p = 0.9f;
    p.min_p = 0.1f;
    std::vector<std::pair<double, int>> q;
    for (int t = 0; t < 7; ++t) q.emplace_back(std::pow(kProbs[t], 1 / 0.7), t);
    std::sort(q.rbegin(), q.rend());
    q.resize(5);
    double z = 0;
    for (auto& [v, t] : q) z += v;
    double cum = 0;
    size_t keep = 0;
    while (keep < q.size() && cum < 0.9) cum += q[keep++].first / z;
    q.resize(keep);
    while (q.size() > 1 && q.back().first < 0.1 * q.front().first) q.pop_back();
    z = 0;
    for (auto& [v, t] : q) z += v;
    expected.clear();
    for (auto& [v, t] : q) expected[t] = v / z;
    ASSERT_GE(expected.size(), 2u);
    chi2 = chi2_of_draws(l, p, expected, n, &counts);
    EXPECT_LT(chi2, chi2_critical_1e4(int(expected.size()) - 1)) << "filtered";
    for (const auto& [t, c] : counts) EXPECT_TRUE(expected.count(t)) << "token " << t << " was filtered out";
}

TEST(Sampler, SameSeedSameTokenDifferentCompletionIndexDiffers) {
    auto l = logits_of(kProbs);
    SamplingParams p;
    Sampler s;
    int differ = 0;
    for (int pos = 0; pos < 200; ++pos) {
        SampleInput a = input(l, p, 99);
        a.position = pos;
        SampleInput b = a;
        b.sample_index = 1;
        int32_t ta = s.sample(a).token;
        EXPECT_EQ(ta, Sampler().sample(a).token);
        differ += ta != s.sample(b).token;
    }
    EXPECT_GT(differ, 50);
}

TEST(Sampler, PenaltiesAndMasks) {
    std::vector<float> l = {1.0f, 2.0f, -1.0f, 0.5f};
    std::vector<int32_t> prompt = {1}, output = {2, 3, 3};
    SamplingParams p;
    p.repetition_penalty = 2.0f;
    Sampler s;
    SampleInput in = input(l, p);
    in.prompt = prompt;
    in.output = output;
    std::vector<float> out;
    s.process_logits(in, &out);
    EXPECT_FLOAT_EQ(out[0], 1.0f);  // unseen
    EXPECT_FLOAT_EQ(out[1], 1.0f);  // positive: divided
    EXPECT_FLOAT_EQ(out[2], -2.0f); // negative: multiplied
    EXPECT_FLOAT_EQ(out[3], 0.25f);

    p = {};
    p.presence_penalty = 0.5f;
    p.frequency_penalty = 0.25f;
    s.process_logits(in, &out);
    EXPECT_FLOAT_EQ(out[1], 2.0f); // prompt tokens are not penalised
    EXPECT_FLOAT_EQ(out[2], -1.0f - 0.5f - 0.25f);
    EXPECT_FLOAT_EQ(out[3], 0.5f - 0.5f - 0.5f); // counted twice

    p = {};
    p.min_tokens = 4; // 3 outputs so far: EOS (0) and stop ids masked
    p.stop_token_ids = {1};
    s.process_logits(in, &out);
    EXPECT_TRUE(std::isinf(out[0]) && out[0] < 0);
    EXPECT_TRUE(std::isinf(out[1]) && out[1] < 0);
    p.ignore_eos = true;
    s.process_logits(in, &out);
    EXPECT_FLOAT_EQ(out[0], 1.0f);
    p.min_tokens = 3;
    p.ignore_eos = false;
    s.process_logits(in, &out);
    EXPECT_FLOAT_EQ(out[0], 1.0f);
}

TEST(Sampler, LogprobsAreRawLogSoftmaxWithRanksAndTopN) {
    auto l = logits_of(kProbs);
    TokenLogprob lp = Sampler::logprob_of(l, 5, 3);
    EXPECT_NEAR(lp.logprob, std::log(0.15), 1e-5);
    EXPECT_EQ(lp.rank, 3);
    ASSERT_EQ(lp.top.size(), 3u);
    EXPECT_EQ(lp.top[0].token_id, 3);
    EXPECT_EQ(lp.top[1].token_id, 1);
    EXPECT_EQ(lp.top[2].token_id, 5);
    EXPECT_NEAR(lp.top[0].logprob, std::log(0.40), 1e-5);
    SamplingParams p;
    p.temperature = 0.0f;
    p.logprobs = 0;
    Sampler s;
    auto r = s.sample(input(l, p));
    ASSERT_TRUE(r.logprob.has_value());
    EXPECT_EQ(r.logprob->token_id, 3);
    EXPECT_TRUE(r.logprob->top.empty());
}

TEST(Sampler, EverythingMaskedOrNanDoesNotCrash) {
    std::vector<float> l = {1.0f, std::nanf(""), 0.5f};
    SamplingParams p;
    Sampler s;
    for (int i = 0; i < 50; ++i) EXPECT_NE(s.sample(input(l, p, i)).token, 1);
    p.temperature = 0.0f;
    EXPECT_EQ(s.sample(input(l, p)).token, 0);
    p.temperature = 1.0f;
    p.logit_bias = {{0, -INFINITY}, {1, -INFINITY}, {2, -INFINITY}};
    int32_t t = s.sample(input(l, p)).token;
    EXPECT_TRUE(t >= 0 && t < 3);
}

// The token an inverse-CDF walk over the sorted reference distribution takes at u; -1 when u lies within
// `eps` of a cumulative boundary (the two sum in different orders and precisions, so such u may differ).
int32_t reference_draw(const std::vector<std::pair<int32_t, double>>& dist, double u, double eps) {
    double cum = 0.0;
    for (const auto& [t, prob] : dist) {
        cum += prob;
        if (std::abs(u - cum) < eps) return -1;
        if (u < cum) return t;
    }
    return dist.back().first;
}

TEST(Sampler, DrawWithoutSortingMatchesTheSortedDistribution) {
    // Random logits over vocabularies up to the real one's size, shapes from flat to peaked, ties, masked
    // entries, and every combination of temperature / top-k / top-p / min-p; u on a grid plus edges.
    std::mt19937_64 rng(7);
    Sampler s;
    int compared = 0;
    for (int trial = 0; trial < 60; ++trial) {
        const int vocab = trial % 20 == 0 ? 129280 : 1 + static_cast<int>(rng() % 3000);
        const double spread = std::vector<double>{0.01, 0.5, 2.0, 8.0, 40.0}[trial % 5];
        std::normal_distribution<double> normal(0.0, spread);
        std::vector<float> l(vocab);
        for (auto& v : l) v = static_cast<float>(normal(rng));
        for (int i = 0; i < vocab / 50; ++i) l[rng() % vocab] = l[rng() % vocab]; // ties
        for (int i = 0; i < vocab / 20; ++i) l[rng() % vocab] = -std::numeric_limits<float>::infinity();
        SamplingParams p;
        p.temperature = std::vector<float>{0.3f, 0.7f, 1.0f, 1.5f}[trial % 4];
        if (trial % 3 == 0) p.top_k = 1 + static_cast<int>(rng() % 200);
        if (trial % 2 == 0) p.top_p = std::vector<float>{0.1f, 0.5f, 0.9f, 0.95f}[(trial / 2) % 4];
        if (trial % 5 == 1) p.min_p = std::vector<float>{0.01f, 0.1f, 0.5f}[(trial / 5) % 3];
        const auto dist = Sampler::final_distribution(l, p);
        std::vector<double> us = {0.0, 1.0 - 1e-12};
        for (int i = 0; i < 64; ++i) us.push_back((i + 0.5) / 64.0);
        for (double u : us) {
            int32_t want = reference_draw(dist, u, 1e-5); // draw() sums float masses
            if (want < 0) continue;
            ASSERT_EQ(s.draw(l, p, u), want) << "trial " << trial << " vocab " << vocab << " u " << u;
            ++compared;
        }
    }
    EXPECT_GT(compared, 60 * 60);
}

TEST(SamplingParams, ValidationNamesTheField) {
    SamplingParams p;
    EXPECT_TRUE(p.validate(100).ok());
    p.temperature = -1;
    EXPECT_NE(p.validate(100).message().find("temperature"), std::string::npos);
    p = {};
    p.logit_bias = {{100, 1.0f}};
    EXPECT_NE(p.validate(100).message().find("logit_bias"), std::string::npos);
    p = {};
    p.logprobs = 21;
    EXPECT_NE(p.validate(100).message().find("logprobs"), std::string::npos);
    p = {};
    p.max_tokens = 2;
    p.min_tokens = 3;
    EXPECT_NE(p.validate(100).message().find("min_tokens"), std::string::npos);
    p = {};
    p.n = 0;
    EXPECT_NE(p.validate(100).message().find("'n'"), std::string::npos);
}

} // namespace
