#pragma once
// Manifold-constrained hyper-connections (mHC): the residual is hc parallel streams h [T, hc, D].
// A site computes, per token, from the RMS-normed flattened streams: pre = sigmoid(.) + eps (collapse
// weights), post = 2 sigmoid(.) (expand weights) and comb, a Sinkhorn-projected hc x hc mixing matrix.
// After the sublayer: h_new[k] = post[k] * y + sum_j comb[j][k] * h[j].

#include <cstdint>

#include "model/deepseek_v4/config.h"
#include "model/deepseek_v4/model_weights.h"

namespace deepinfer::model::deepseek_v4 {

// h [T, hc, D] -> post [T, hc], comb [T, hc, hc] (comb[j][k] at j * hc + k), collapsed x [T, D].
void hc_pre(const ModelConfig& config, const HyperConnectionWeights& w, const float* h, int64_t T,
            float* post, float* comb, float* x);
// h [T, hc, D] <- post * y + comb^T h, y [T, D].
void hc_post(const ModelConfig& config, const float* post, const float* comb, const float* y, int64_t T,
             float* h);
// Final collapse: x [T, D] = sum_j (sigmoid(mix_j * scale + base_j) + eps) h[j].
void hc_head(const ModelConfig& config, const core::Weight& fn, const float* base, const float* scale,
             const float* h, int64_t T, float* x);

} // namespace deepinfer::model::deepseek_v4
