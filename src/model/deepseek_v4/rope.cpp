#include "model/deepseek_v4/rope.h"

#include <algorithm>
#include <cmath>

#include "kernels/ops.h"

namespace deepinfer::model::deepseek_v4 {
namespace {

// base^(2i / dim) in F32, the way the reference evaluates it.
std::vector<float> pos_freqs(double base, int64_t dim) {
    std::vector<float> f(dim / 2);
    for (int64_t i = 0; i < dim / 2; ++i) {
        const float e = static_cast<float>(2 * i) / static_cast<float>(dim);
        f[i] = std::pow(static_cast<float>(base), e);
    }
    return f;
}

} // namespace

RopeTable::RopeTable(std::vector<float> inv_freq, int64_t rope_dim)
    : inv_freq_(std::move(inv_freq)), rope_dim_(rope_dim) {}

void RopeTable::angles(int64_t p, float* cos, float* sin) const {
    const float fp = static_cast<float>(p);
    for (int64_t i = 0; i < rope_dim_ / 2; ++i) {
        const float theta = fp * inv_freq_[i];
        cos[i] = std::cos(theta);
        sin[i] = std::sin(theta);
    }
}

void RopeTable::apply(float* x, int64_t n, int64_t ld, int64_t dim, int64_t p, bool inverse) const {
    float cos[256], sin[256];
    DI_CHECK(rope_dim_ / 2 <= 256);
    angles(p, cos, sin);
    kernels::rope(x, n, ld, dim, rope_dim_, cos, sin, inverse);
}

RopeTable make_main_rope(const ModelConfig& config) {
    const int64_t dim = config.qk_rope_head_dim;
    std::vector<float> f = pos_freqs(config.rope_theta, dim);
    for (float& v : f) v = 1.0f / v;
    return RopeTable(std::move(f), dim);
}

RopeTable make_compress_rope(const ModelConfig& config) {
    const int64_t dim = config.qk_rope_head_dim;
    const double base = config.compress_rope_theta;
    std::vector<float> f = pos_freqs(base, dim);
    if (!config.yarn.enabled) {
        for (float& v : f) v = 1.0f / v;
        return RopeTable(std::move(f), dim);
    }
    const double factor = config.yarn.factor;
    const double orig = static_cast<double>(config.yarn.original_max_position_embeddings);
    auto correction_dim = [&](double rotations) {
        return (dim * std::log(orig / (rotations * 2.0 * M_PI))) / (2.0 * std::log(base));
    };
    double low = std::max(std::floor(correction_dim(config.yarn.beta_fast)), 0.0);
    double high = std::min(std::ceil(correction_dim(config.yarn.beta_slow)), static_cast<double>(dim - 1));
    if (low == high) high += 0.001;
    std::vector<float> inv(dim / 2);
    for (int64_t i = 0; i < dim / 2; ++i) {
        const float extrapolation = 1.0f / f[i];
        const float interpolation = 1.0f / (static_cast<float>(factor) * f[i]);
        float ramp = static_cast<float>((static_cast<double>(i) - low) / (high - low));
        ramp = std::clamp(ramp, 0.0f, 1.0f);
        const float extrapolation_factor = 1.0f - ramp;
        inv[i] = interpolation * (1.0f - extrapolation_factor) + extrapolation * extrapolation_factor;
    }
    return RopeTable(std::move(inv), dim);
}

} // namespace deepinfer::model::deepseek_v4
