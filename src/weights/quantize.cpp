#include "weights/quantize.h"

#include <algorithm>
#include <cmath>

#include "core/check.h"
#include "core/dtype.h"

namespace deepinfer::weights {

float pow2_ceil(float x) {
    const uint32_t u = core::f32_to_bits(x);
    int e = static_cast<int>((u >> 23) & 0xFF) - 127;
    if ((u & 0x7FFFFF) != 0) ++e;
    return std::ldexp(1.0f, e);
}

uint8_t e8m0_of_pow2(float s) {
    int e = 0;
    const float m = std::frexp(s, &e); // s = m * 2^e, m = 0.5 for a power of two
    DI_CHECK(m == 0.5f);
    DI_CHECK(e - 1 >= -127 && e - 1 <= 127);
    return static_cast<uint8_t>(e - 1 + 127);
}

uint8_t fp8_e4m3_encode(float f) {
    if (std::isnan(f)) return 0x7f;
    const uint8_t sign = std::signbit(f) ? 0x80 : 0;
    const float a = std::fabs(f);
    if (a >= 448.0f) return sign | 0x7e;
    if (a < 0.015625f) { // below 2^-6: subnormal steps of 2^-9; 8 * 2^-9 = 2^-6 is code 0x08
        return sign | static_cast<uint8_t>(std::nearbyint(a * 512.0f));
    }
    uint32_t u = core::f32_to_bits(a);
    u += 0x7FFFFu + ((u >> 20) & 1u); // RNE to 3 mantissa bits
    u &= ~0xFFFFFu;
    const int e = static_cast<int>(u >> 23) - 127;
    const uint32_t man = (u >> 20) & 7u;
    if (e > 8 || (e == 8 && man == 7)) return sign | 0x7e;
    return sign | static_cast<uint8_t>(((e + 7) << 3) | man);
}

void quantize_fp8_block(const float* w, int64_t rows, int64_t cols, int br, int bc, uint8_t* q,
                        uint8_t* scale) {
    const int64_t sr = (rows + br - 1) / br, sc = (cols + bc - 1) / bc;
    for (int64_t bi = 0; bi < sr; ++bi) {
        const int64_t r0 = bi * br, r1 = std::min(rows, r0 + br);
        for (int64_t bj = 0; bj < sc; ++bj) {
            const int64_t c0 = bj * bc, c1 = std::min(cols, c0 + bc);
            float amax = 1e-4f;
            for (int64_t r = r0; r < r1; ++r)
                for (int64_t c = c0; c < c1; ++c) amax = std::max(amax, std::fabs(w[r * cols + c]));
            const float s = pow2_ceil(amax / 448.0f);
            scale[bi * sc + bj] = e8m0_of_pow2(s);
            const float inv = 1.0f / s; // exact: s is a power of two
            for (int64_t r = r0; r < r1; ++r)
                for (int64_t c = c0; c < c1; ++c) q[r * cols + c] = fp8_e4m3_encode(w[r * cols + c] * inv);
        }
    }
}

void quantize_fp4_group(const float* w, int64_t rows, int64_t cols, int group, uint8_t* packed,
                        uint8_t* scale) {
    DI_CHECK(cols % group == 0 && cols % 2 == 0);
    const int64_t ng = cols / group;
    for (int64_t r = 0; r < rows; ++r) {
        const float* wr = w + r * cols;
        uint8_t* pr = packed + r * (cols / 2);
        for (int64_t g = 0; g < ng; ++g) {
            float amax = 6.0f * std::ldexp(1.0f, -126);
            for (int64_t c = g * group; c < (g + 1) * group; ++c) amax = std::max(amax, std::fabs(wr[c]));
            const float s = pow2_ceil(amax / 6.0f);
            scale[r * ng + g] = e8m0_of_pow2(s);
            const float inv = 1.0f / s;
            for (int64_t c = g * group; c < (g + 1) * group; c += 2) {
                const uint8_t lo = core::f32_to_fp4_e2m1(wr[c] * inv);
                const uint8_t hi = core::f32_to_fp4_e2m1(wr[c + 1] * inv);
                pr[c / 2] = static_cast<uint8_t>(lo | (hi << 4));
            }
        }
    }
}

} // namespace deepinfer::weights
