// Reference norms, RoPE, softmax, top-k and scalar activations.

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <utility>
#include <vector>

#include "core/check.h"
#include "kernels/ops.h"

namespace deepinfer::kernels {

float sigmoid(float x) {
    return 1.0f / (1.0f + std::exp(-x));
}

float softplus(float x) {
    return x > 20.0f ? x : std::log1p(std::exp(x));
}

float silu(float x) {
    return x / (1.0f + exp_ref(-x));
}

// ops.h. fp-contract off: a build that enables FMA must not fuse the products below into their sums.
__attribute__((optimize("fp-contract=off"))) float exp_ref(float x) {
    if (std::isnan(x)) return x;
    const float c = std::min(std::max(x, -104.0f), 89.0f);
    const float k = std::nearbyint(c * 1.44269504088896341f);
    float r = c - k * 0.693359375f;
    r = r - k * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * (r * r) + (r + 1.0f);
    return std::ldexp(p, static_cast<int>(k));
}

namespace ref {

namespace {

// Sum of x[j]^2 in double over 16 interleaved partial sums (element j goes to sum j % 16), folded in halves
// (sum l += sum l + 8, then + 4, + 2, + 1). Each square of a float is exact in double, so a fused or unfused
// multiply-add gives the same bits and so does any vector width the compiler picks for the 16 independent
// sums: one fixed order for every build and ISA. A single chain in column order, as before, was bound by the
// add latency (~4 cycles per element: ~18 us for V4-Flash's 16384-wide mHC norm); this one vectorizes.
double sum_squares(const float* x, int64_t d) {
    constexpr int kLanes = 16;
    double acc[kLanes] = {};
    int64_t j = 0;
    for (; j + kLanes <= d; j += kLanes)
        for (int l = 0; l < kLanes; ++l) acc[l] += static_cast<double>(x[j + l]) * x[j + l];
    for (int l = 0; j + l < d; ++l) acc[l] += static_cast<double>(x[j + l]) * x[j + l];
    for (int half = kLanes / 2; half >= 1; half /= 2)
        for (int l = 0; l < half; ++l) acc[l] += acc[l + half];
    return acc[0];
}

} // namespace

void rms_norm(const float* x, const float* weight, int64_t n, int64_t d, float eps, float* y) {
    for (int64_t i = 0; i < n; ++i) {
        const float* xi = x + i * d;
        const double ss = sum_squares(xi, d);
        const float mean = static_cast<float>(ss / static_cast<double>(d));
        const float inv = 1.0f / std::sqrt(mean + eps);
        float* yi = y + i * d;
        for (int64_t j = 0; j < d; ++j) {
            const float v = xi[j] * inv;
            yi[j] = weight ? weight[j] * v : v;
        }
    }
}

void rope(float* x, int64_t n, int64_t ld, int64_t dim, int64_t rope_dim, const float* cos, const float* sin,
          bool inverse) {
    DI_CHECK(rope_dim % 2 == 0 && rope_dim <= dim && dim <= ld);
    for (int64_t i = 0; i < n; ++i) {
        float* r = x + i * ld + (dim - rope_dim);
        for (int64_t p = 0; p < rope_dim / 2; ++p) {
            const float c = cos[p];
            const float s = inverse ? -sin[p] : sin[p];
            const float x0 = r[2 * p], x1 = r[2 * p + 1];
            r[2 * p] = x0 * c - x1 * s;
            r[2 * p + 1] = x1 * c + x0 * s;
        }
    }
}

void softmax(float* x, int64_t n) {
    float m = -std::numeric_limits<float>::infinity();
    for (int64_t i = 0; i < n; ++i) m = std::max(m, x[i]);
    DI_CHECK(std::isfinite(m)) << "softmax over no finite entry";
    double sum = 0.0;
    for (int64_t i = 0; i < n; ++i) {
        x[i] = std::exp(x[i] - m);
        sum += x[i];
    }
    const float inv = static_cast<float>(1.0 / sum);
    for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

int32_t argmax(const float* x, int64_t n) {
    int32_t best = 0;
    for (int64_t i = 1; i < n; ++i)
        if (x[i] > x[best] || (std::isnan(x[best]) && !std::isnan(x[i]))) best = static_cast<int32_t>(i);
    return best;
}

void topk(const float* x, int64_t n, int64_t k, int32_t* idx) {
    DI_CHECK(k >= 0 && k <= n);
    std::vector<int32_t> order(n);
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + k, order.end(), [x](int32_t a, int32_t b) {
        if (x[a] != x[b]) return x[a] > x[b];
        return a < b;
    });
    std::copy(order.begin(), order.begin() + k, idx);
}

void topk_torch(const float* x, int64_t n, int64_t k, int32_t* idx) {
    DI_CHECK(k >= 0 && k <= n);
    if (k == 0) return;
    using Elem = std::pair<float, int64_t>;
    std::vector<Elem> q(n);
    for (int64_t i = 0; i < n; ++i) q[i] = {x[i], i};
    auto larger = [](const Elem& a, const Elem& b) {
        return (std::isnan(a.first) && !std::isnan(b.first)) || (a.first > b.first);
    };
    if (k * 64 <= n)
        std::partial_sort(q.begin(), q.begin() + k, q.end(), larger);
    else
        std::nth_element(q.begin(), q.begin() + (k - 1), q.end(), larger);
    for (int64_t i = 0; i < k; ++i) idx[i] = static_cast<int32_t>(q[i].second);
}

} // namespace ref
} // namespace deepinfer::kernels
