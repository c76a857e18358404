#include "model/deepseek_v4/hyper_connection.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/ops.h"

namespace deepinfer::model::deepseek_v4 {
namespace {

// mix [T, n_mix] = UnweightedRMSNorm(h.flatten) @ fn^T
std::vector<float> mixes(const ModelConfig& c, const core::Weight& fn, const float* h, int64_t T) {
    const int64_t width = c.hc_mult * c.hidden_size;
    std::vector<float> flat(T * width); // [T, hc * D]
    kernels::rms_norm(h, nullptr, T, width, static_cast<float>(c.rms_norm_eps), flat.data());
    std::vector<float> mix(T * fn.rows);
    kernels::linear(flat.data(), T, fn, mix.data());
    return mix;
}

void collapse(const float* pre, const float* h, int64_t hc, int64_t D, float* x) {
    for (int64_t j = 0; j < D; ++j) {
        float s = 0.0f;
        for (int64_t k = 0; k < hc; ++k) s += pre[k] * h[k * D + j];
        x[j] = s;
    }
}

} // namespace

void hc_pre(const ModelConfig& c, const HyperConnectionWeights& w, const float* h, int64_t T, float* post,
            float* comb, float* x) {
    const int64_t hc = c.hc_mult, D = c.hidden_size, n_mix = (2 + hc) * hc;
    const float eps = static_cast<float>(c.hc_eps);
    const std::vector<float> mix = mixes(c, w.fn, h, T);
    std::vector<float> pre(hc);
    for (int64_t t = 0; t < T; ++t) {
        const float* m = mix.data() + t * n_mix;
        for (int64_t k = 0; k < hc; ++k) {
            pre[k] = kernels::sigmoid(m[k] * w.scale[0] + w.base[k]) + eps;
            post[t * hc + k] = 2.0f * kernels::sigmoid(m[hc + k] * w.scale[1] + w.base[hc + k]);
        }
        float* cm = comb + t * hc * hc; // [hc, hc]
        for (int64_t j = 0; j < hc; ++j) {
            for (int64_t k = 0; k < hc; ++k)
                cm[j * hc + k] = m[2 * hc + j * hc + k] * w.scale[2] + w.base[2 * hc + j * hc + k];
            kernels::softmax(cm + j * hc, hc);
            for (int64_t k = 0; k < hc; ++k) cm[j * hc + k] += eps;
        }
        auto normalize_columns = [&] {
            for (int64_t k = 0; k < hc; ++k) {
                float s = 0.0f;
                for (int64_t j = 0; j < hc; ++j) s += cm[j * hc + k];
                for (int64_t j = 0; j < hc; ++j) cm[j * hc + k] /= (s + eps);
            }
        };
        auto normalize_rows = [&] {
            for (int64_t j = 0; j < hc; ++j) {
                float s = 0.0f;
                for (int64_t k = 0; k < hc; ++k) s += cm[j * hc + k];
                for (int64_t k = 0; k < hc; ++k) cm[j * hc + k] /= (s + eps);
            }
        };
        normalize_columns();
        for (int64_t it = 0; it + 1 < c.hc_sinkhorn_iters; ++it) {
            normalize_rows();
            normalize_columns();
        }
        collapse(pre.data(), h + t * hc * D, hc, D, x + t * D);
    }
}

void hc_post(const ModelConfig& c, const float* post, const float* comb, const float* y, int64_t T,
             float* h) {
    const int64_t hc = c.hc_mult, D = c.hidden_size;
    std::vector<float> prev(hc * D);
    for (int64_t t = 0; t < T; ++t) {
        float* ht = h + t * hc * D;
        std::copy_n(ht, hc * D, prev.data());
        const float* cm = comb + t * hc * hc;
        for (int64_t k = 0; k < hc; ++k)
            for (int64_t j = 0; j < D; ++j) {
                float s = 0.0f;
                for (int64_t i = 0; i < hc; ++i) s += cm[i * hc + k] * prev[i * D + j];
                ht[k * D + j] = post[t * hc + k] * y[t * D + j] + s;
            }
    }
}

void hc_head(const ModelConfig& c, const core::Weight& fn, const float* base, const float* scale,
             const float* h, int64_t T, float* x) {
    const int64_t hc = c.hc_mult, D = c.hidden_size;
    const std::vector<float> mix = mixes(c, fn, h, T);
    std::vector<float> pre(hc);
    for (int64_t t = 0; t < T; ++t) {
        for (int64_t k = 0; k < hc; ++k)
            pre[k] = kernels::sigmoid(mix[t * hc + k] * scale[0] + base[k]) + static_cast<float>(c.hc_eps);
        collapse(pre.data(), h + t * hc * D, hc, D, x + t * D);
    }
}

} // namespace deepinfer::model::deepseek_v4
