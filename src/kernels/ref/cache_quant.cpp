#include "kernels/ref/cache_quant.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/dtype.h"

namespace deepinfer::kernels::ref {

float pow2_ceil_scale(float t) {
    uint32_t bits;
    std::memcpy(&bits, &t, 4);
    const int exponent = static_cast<int>((bits >> 23) & 0xFF);
    const int k = exponent - 127 + ((bits & 0x7FFFFF) != 0 ? 1 : 0);
    return std::ldexp(1.0f, k);
}

namespace {

float block_amax(const float* x, int64_t n) {
    float a = 0;
    for (int64_t i = 0; i < n; ++i) a = std::max(a, std::fabs(x[i]));
    return a;
}

} // namespace

void fake_quant_fp8_block(float* x, int64_t rows, int64_t n, int64_t block) {
    constexpr float kMax = 448.0f;
    if (n % block != 0) return;
    for (int64_t r = 0; r < rows; ++r) {
        for (int64_t b = 0; b < n; b += block) {
            float* v = x + r * n + b; // [block]
            const float amax = std::max(block_amax(v, block), 1e-4f);
            const float scale = pow2_ceil_scale(amax * (1.0f / kMax));
            for (int64_t i = 0; i < block; ++i) {
                const float q = std::clamp(v[i] / scale, -kMax, kMax);
                v[i] = core::fp8_e4m3_to_f32(core::f32_to_fp8_e4m3(q)) * scale;
            }
        }
    }
}

void fake_quant_fp4_block(float* x, int64_t rows, int64_t n, int64_t block, bool e4m3_scales) {
    constexpr float kMax = 6.0f;
    if (n % block != 0) return;
    const float* lut = core::fp4_e2m1_table();
    for (int64_t r = 0; r < rows; ++r) {
        for (int64_t b = 0; b < n; b += block) {
            float* v = x + r * n + b; // [block]
            const float amax = block_amax(v, block);
            const float scale =
                e4m3_scales
                    ? core::fp8_e4m3_to_f32(core::f32_to_fp8_e4m3(std::max(amax, 6.0f * 0x1p-9f) / kMax))
                    : pow2_ceil_scale(std::max(amax, 6.0f * 0x1p-126f) * (1.0f / kMax));
            for (int64_t i = 0; i < block; ++i) {
                const float q = std::clamp(v[i] / scale, -kMax, kMax);
                // The reference's table maps code 8 (-0) to +0.
                const uint8_t code = core::f32_to_fp4_e2m1(q);
                v[i] = (code == 8 ? 0.0f : lut[code]) * scale;
            }
        }
    }
}

} // namespace deepinfer::kernels::ref
