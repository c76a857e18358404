#include "weights/quantize.h"

#include <algorithm>
#include <cmath>
#include <thread>
#include <vector>

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

namespace {

// fp8_e4m3_encode of a finite x, on the f32 bits and without branches, so that the loops below vectorize:
// the normal binades round to nearest even on the bits, the subnormal steps of 2^-9 through the float adder
// (|x| * 512 < 8 is exact; adding 1.5 * 2^23 rounds it to an integer, nearest even), and codes past 0x7e
// (448; 464 and up round to 480) saturate to 0x7e.
inline uint8_t e4m3_code(float x) {
    const uint32_t bits = core::f32_to_bits(x);
    uint32_t u = bits & 0x7FFFFFFFu;
    const int32_t small = -static_cast<int32_t>(u < 0x3C800000u); // |x| < 2^-6: all ones
    const float a = core::bits_to_f32(u);
    const int32_t sub = static_cast<int32_t>(core::f32_to_bits(a * 512.0f + 12582912.0f) - 0x4B400000u);
    u += 0x7FFFFu + ((u >> 20) & 1u);
    const int32_t normal = static_cast<int32_t>(u >> 20) - ((127 - 7) << 3);
    int32_t code = (sub & small) | (normal & ~small);
    code = code < 0x7e ? code : 0x7e;
    return static_cast<uint8_t>(static_cast<uint32_t>(code) | ((bits >> 24) & 0x80u));
}

// One band of `n` rows of F32 values [n, cols] -> codes [n, cols] and the band's scales [sc]. amax: [sc]
// scratch. Maxima on the bits of |x| (ordered like the values for finite floats): an integer reduction
// vectorizes, a float one does not without -ffast-math.
void quantize_band(const float* w, int64_t n, int64_t cols, int bc, uint8_t* q, uint8_t* scale,
                   uint32_t* amax) {
    const int64_t sc = (cols + bc - 1) / bc;
    const uint32_t floor_bits = core::f32_to_bits(1e-4f);
    for (int64_t j = 0; j < sc; ++j) amax[j] = floor_bits;
    for (int64_t r = 0; r < n; ++r) {
        const uint32_t* wr = reinterpret_cast<const uint32_t*>(w + r * cols);
        for (int64_t j = 0; j < sc; ++j) {
            uint32_t m = amax[j];
            for (int64_t c = j * bc; c < std::min(cols, (j + 1) * bc); ++c) {
                const uint32_t v = wr[c] & 0x7FFFFFFFu;
                m = v > m ? v : m;
            }
            amax[j] = m;
        }
    }
    for (int64_t j = 0; j < sc; ++j) {
        // Inf / NaN (bits above the largest finite) would make no power-of-two scale: the block takes the
        // largest finite's, and they saturate to +-448 there.
        const float s = pow2_ceil(core::bits_to_f32(std::min(amax[j], 0x7F7FFFFFu)) / 448.0f);
        scale[j] = e8m0_of_pow2(s);
        amax[j] = core::f32_to_bits(1.0f / s); // now the block's inverse scale (exact: a power of two)
    }
    for (int64_t r = 0; r < n; ++r) {
        const float* wr = w + r * cols;
        uint8_t* qr = q + r * cols;
        for (int64_t j = 0; j < sc; ++j) {
            const float inv = core::bits_to_f32(amax[j]);
            for (int64_t c = j * bc; c < std::min(cols, (j + 1) * bc); ++c) qr[c] = e4m3_code(wr[c] * inv);
        }
    }
}

} // namespace

void quantize_weight_fp8_block(const core::Weight& w, int br, int bc, int64_t row_begin, int64_t row_end,
                               int threads, uint8_t* q, uint8_t* scale,
                               const std::function<void(int64_t r0, int64_t r1)>& after_band) {
    DI_CHECK(w.format == core::WeightFormat::kF32 || w.format == core::WeightFormat::kBF16 ||
             w.format == core::WeightFormat::kF16);
    DI_CHECK(br > 0 && bc > 0 && 0 <= row_begin && row_begin <= row_end && row_end <= w.rows);
    const int64_t cols = w.cols, sc = (cols + bc - 1) / bc;
    const int64_t b0 = row_begin / br, b1 = (row_end + br - 1) / br; // row blocks [b0, b1)
    if (b1 <= b0) return;
    const int parts = static_cast<int>(std::clamp<int64_t>(threads, 1, b1 - b0));
    auto part = [&](int i) {
        std::vector<float> band(static_cast<size_t>(br * cols)); // [br, cols]
        std::vector<uint32_t> amax(static_cast<size_t>(sc));
        for (int64_t b = b0 + (b1 - b0) * i / parts; b < b0 + (b1 - b0) * (i + 1) / parts; ++b) {
            const int64_t r0 = b * br, r1 = std::min(w.rows, r0 + br);
            for (int64_t r = r0; r < r1; ++r) {
                float* dst = band.data() + (r - r0) * cols;
                switch (w.format) {
                case core::WeightFormat::kF32: {
                    const float* src = static_cast<const float*>(w.data) + r * cols;
                    std::copy(src, src + cols, dst);
                    break;
                }
                case core::WeightFormat::kBF16: {
                    const uint16_t* src = static_cast<const uint16_t*>(w.data) + r * cols;
                    for (int64_t c = 0; c < cols; ++c) dst[c] = core::bf16_to_f32(src[c]);
                    break;
                }
                case core::WeightFormat::kF16: {
                    const uint16_t* src = static_cast<const uint16_t*>(w.data) + r * cols;
                    for (int64_t c = 0; c < cols; ++c) dst[c] = core::f16_to_f32(src[c]);
                    break;
                }
                case core::WeightFormat::kFp8Block:
                case core::WeightFormat::kFp4Group:
                    DI_CHECK(false);
                }
            }
            quantize_band(band.data(), r1 - r0, cols, bc, q + r0 * cols, scale + b * sc, amax.data());
            if (after_band) after_band(r0, r1);
        }
    };
    std::vector<std::thread> pool;
    for (int i = 1; i < parts; ++i) pool.emplace_back(part, i);
    part(0);
    for (auto& t : pool) t.join();
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
