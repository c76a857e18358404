#pragma once
// mHC (manifold-constrained hyper-connections) as composition on a kernels::Backend: the mixing matmul
// mix = UnweightedRMSNorm(h.flatten) @ fn^T runs as rms_norm + linear, then the hc_pre / hc_post / hc_head
// ops (kernels/params.h) do the gates, the Sinkhorn-normalized combination and the collapse.

#include <cstdint>

#include "kernels/backend.h"
#include "model/deepseek_v4/config.h"
#include "model/deepseek_v4/model_weights.h"

namespace deepinfer::model::deepseek_v4 {

// h [T, hc, D] -> post [T, hc], comb [T, hc, hc], x [T, D]. Scratch from the backend's workspace.
void hc_pre(kernels::Backend& be, const ModelConfig& c, const HyperConnectionWeights& w, const float* h,
            int64_t T, float* post, float* comb, float* x);
// h [T, hc, D] <- post * y + comb^T h.
void hc_post(kernels::Backend& be, const ModelConfig& c, const float* post, const float* comb, const float* y,
             int64_t T, float* h);
// Final collapse of the streams: h [T, hc, D] -> x [T, D].
void hc_head(kernels::Backend& be, const ModelConfig& c, const core::Weight& fn, const float* base,
             const float* scale, const float* h, int64_t T, float* x);

} // namespace deepinfer::model::deepseek_v4
