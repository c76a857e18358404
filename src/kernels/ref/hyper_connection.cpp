// Reference mHC ops: pre (sigmoid gates, Sinkhorn-normalized combination, collapse), post and the head's
// collapse. The mixing matmul itself is a linear the caller runs.

#include <algorithm>

#include "core/check.h"
#include "kernels/ops.h"
#include "kernels/ref/ops_ref.h"

namespace deepinfer::kernels::ref {
namespace {

constexpr int64_t kMaxHc = 64;

void collapse(const float* pre, const float* h, int64_t hc, int64_t D, float* x) {
    for (int64_t j = 0; j < D; ++j) {
        float s = 0.0f;
        for (int64_t k = 0; k < hc; ++k) s += pre[k] * h[k * D + j];
        x[j] = s;
    }
}

} // namespace

void hc_pre(const HcPreParams& p) {
    const int64_t hc = p.hc, D = p.D, n_mix = (2 + hc) * hc;
    DI_CHECK(hc >= 1 && hc <= kMaxHc);
    const float eps = p.hc_eps;
    const float* scale = p.scale;
    const float* base = p.base;
    float pre[kMaxHc];
    for (int64_t t = 0; t < p.T; ++t) {
        const float* m = p.mix + t * n_mix;
        for (int64_t k = 0; k < hc; ++k) {
            pre[k] = sigmoid(m[k] * scale[0] + base[k]) + eps;
            p.post[t * hc + k] = 2.0f * sigmoid(m[hc + k] * scale[1] + base[hc + k]);
        }
        float* cm = p.comb + t * hc * hc; // [hc, hc]
        for (int64_t j = 0; j < hc; ++j) {
            for (int64_t k = 0; k < hc; ++k)
                cm[j * hc + k] = m[2 * hc + j * hc + k] * scale[2] + base[2 * hc + j * hc + k];
            softmax(cm + j * hc, hc);
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
        for (int64_t it = 0; it + 1 < p.sinkhorn_iters; ++it) {
            normalize_rows();
            normalize_columns();
        }
        collapse(pre, p.h + t * hc * D, hc, D, p.x + t * D);
    }
}

void hc_post(const HcPostParams& p) {
    const int64_t hc = p.hc, D = p.D;
    DI_CHECK(hc >= 1 && hc <= kMaxHc);
    float prev[kMaxHc];
    for (int64_t t = 0; t < p.T; ++t) {
        float* ht = p.h + t * hc * D;
        const float* cm = p.comb + t * hc * hc;
        for (int64_t j = 0; j < D; ++j) {
            for (int64_t i = 0; i < hc; ++i) prev[i] = ht[i * D + j];
            for (int64_t k = 0; k < hc; ++k) {
                float s = 0.0f;
                for (int64_t i = 0; i < hc; ++i) s += cm[i * hc + k] * prev[i];
                ht[k * D + j] = p.post[t * hc + k] * p.y[t * D + j] + s;
            }
        }
    }
}

void hc_head(const HcHeadParams& p) {
    const int64_t hc = p.hc, D = p.D;
    DI_CHECK(hc >= 1 && hc <= kMaxHc);
    float pre[kMaxHc];
    for (int64_t t = 0; t < p.T; ++t) {
        for (int64_t k = 0; k < hc; ++k)
            pre[k] = sigmoid(p.mix[t * hc + k] * p.scale[0] + p.base[k]) + p.hc_eps;
        collapse(pre, p.h + t * hc * D, hc, D, p.x + t * D);
    }
}

} // namespace deepinfer::kernels::ref
