#include "model/deepseek_v4/hyper_connection.h"

namespace deepinfer::model::deepseek_v4 {
namespace {

// mix [T, fn.rows] = UnweightedRMSNorm(h.flatten) @ fn^T, in the workspace.
float* mixes(kernels::Backend& be, const ModelConfig& c, const core::Weight& fn, const float* h, int64_t T) {
    const int64_t width = c.hc_mult * c.hidden_size;
    float* flat = be.workspace().take<float>(T * width); // [T, hc * D]
    be.rms_norm({h, nullptr, T, width, static_cast<float>(c.rms_norm_eps), flat});
    float* mix = be.workspace().take<float>(T * fn.rows); // [T, n_mix]
    be.linear(kernels::linear_args(flat, T, fn, mix));
    return mix;
}

} // namespace

void hc_pre(kernels::Backend& be, const ModelConfig& c, const HyperConnectionWeights& w, const float* h,
            int64_t T, float* post, float* comb, float* x) {
    const kernels::Workspace::Mark mark = be.workspace().mark();
    kernels::HcPreParams p;
    p.mix = mixes(be, c, w.fn, h, T);
    p.base = w.base.data();
    p.scale = w.scale.data();
    p.h = h;
    p.T = T;
    p.hc = c.hc_mult;
    p.D = c.hidden_size;
    p.hc_eps = static_cast<float>(c.hc_eps);
    p.sinkhorn_iters = c.hc_sinkhorn_iters;
    p.post = post;
    p.comb = comb;
    p.x = x;
    be.hc_pre(p);
    be.workspace().release(mark);
}

void hc_post(kernels::Backend& be, const ModelConfig& c, const float* post, const float* comb, const float* y,
             int64_t T, float* h) {
    be.hc_post({post, comb, y, T, c.hc_mult, c.hidden_size, h});
}

void hc_head(kernels::Backend& be, const ModelConfig& c, const core::Weight& fn, const float* base,
             const float* scale, const float* h, int64_t T, float* x) {
    const kernels::Workspace::Mark mark = be.workspace().mark();
    kernels::HcHeadParams p;
    p.mix = mixes(be, c, fn, h, T);
    p.base = base;
    p.scale = scale;
    p.h = h;
    p.T = T;
    p.hc = c.hc_mult;
    p.D = c.hidden_size;
    p.hc_eps = static_cast<float>(c.hc_eps);
    p.x = x;
    be.hc_head(p);
    be.workspace().release(mark);
}

} // namespace deepinfer::model::deepseek_v4
