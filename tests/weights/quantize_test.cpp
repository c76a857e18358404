// quantize_weight_fp8_block (the load-time quantizer of an LM head stored F32 / BF16 / F16, model/lm_head.h)
// against quantize_fp8_block on the same F32 values, code for code and scale for scale: over values spread
// across every e4m3 binade, the subnormal steps, exact ties and saturation; partial blocks; row ranges; one
// and several threads.

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "weights/quantize.h"

namespace deepinfer::weights {
namespace {

// [rows, cols] values: each block's magnitudes span 2^-14 .. 2^2 of a per-block level, with exact e4m3 ties
// (a code's value plus half a step) and zeros mixed in.
std::vector<float> values(int64_t rows, int64_t cols, uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(-14.0f, 2.0f);
    std::uniform_int_distribution<int> kind(0, 9);
    std::vector<float> v(rows * cols);
    for (int64_t i = 0; i < rows * cols; ++i) {
        const float level = std::ldexp(1.0f, static_cast<int>((i / cols) % 7) * 3 - 10);
        const float sign = (i * 2654435761u) & 1 ? -1.0f : 1.0f;
        switch (kind(rng)) {
        case 0:
            v[i] = 0.0f;
            break;
        case 1: // a tie between two e4m3 codes once scaled: m.5 steps of 2^-3 in some binade
            v[i] = sign * level * std::ldexp(1.0f + (2 * (i % 8) + 1) / 16.0f, static_cast<int>(i % 9) - 7);
            break;
        default:
            v[i] = sign * level * std::exp2(u(rng));
        }
    }
    return v;
}

void expect_same(const core::Weight& w, const std::vector<float>& f, int br, int bc, int64_t r0, int64_t r1,
                 int threads) {
    SCOPED_TRACE("rows " + std::to_string(w.rows) + " cols " + std::to_string(w.cols) + " blocks " +
                 std::to_string(br) + "x" + std::to_string(bc) + " range [" + std::to_string(r0) + ", " +
                 std::to_string(r1) + ") threads " + std::to_string(threads));
    const int64_t sr = (w.rows + br - 1) / br, sc = (w.cols + bc - 1) / bc;
    std::vector<uint8_t> want_q(w.rows * w.cols), want_s(sr * sc);
    quantize_fp8_block(f.data(), w.rows, w.cols, br, bc, want_q.data(), want_s.data());
    std::vector<uint8_t> q(w.rows * w.cols, 0xAA), s(sr * sc, 0xAA);
    quantize_weight_fp8_block(w, br, bc, r0, r1, threads, q.data(), s.data());
    for (int64_t b = 0; b < sr; ++b) {
        const bool done = b * br < r1 && (b + 1) * br > r0;
        for (int64_t j = 0; j < sc; ++j)
            ASSERT_EQ(s[b * sc + j], done ? want_s[b * sc + j] : 0xAA) << "scale " << b << "," << j;
        for (int64_t r = b * br; r < std::min(w.rows, (b + 1) * br); ++r)
            for (int64_t c = 0; c < w.cols; ++c)
                ASSERT_EQ(q[r * w.cols + c], done ? want_q[r * w.cols + c] : 0xAA)
                    << "row " << r << " col " << c << " value " << f[r * w.cols + c];
    }
}

TEST(QuantizeWeightFp8Block, F32MatchesQuantizeFp8Block) {
    for (auto [rows, cols, br, bc] :
         {std::tuple{300, 260, 128, 128}, {64, 64, 128, 128}, {97, 130, 32, 32}, {256, 4096, 128, 128}}) {
        const std::vector<float> f = values(rows, cols, 7);
        core::Weight w;
        w.format = core::WeightFormat::kF32;
        w.data = f.data();
        w.rows = rows;
        w.cols = cols;
        expect_same(w, f, br, bc, 0, rows, 1);
        expect_same(w, f, br, bc, 0, rows, 3);
        expect_same(w, f, br, bc, rows / 3, rows / 2 + 1, 2);
    }
}

TEST(QuantizeWeightFp8Block, Bf16AndF16MatchOnTheirValues) {
    const int64_t rows = 200, cols = 384;
    const std::vector<float> f = values(rows, cols, 9);
    for (core::WeightFormat fmt : {core::WeightFormat::kBF16, core::WeightFormat::kF16}) {
        std::vector<uint16_t> h(f.size());
        std::vector<float> back(f.size());
        for (size_t i = 0; i < f.size(); ++i) {
            h[i] = fmt == core::WeightFormat::kBF16 ? core::f32_to_bf16(f[i]) : core::f32_to_f16(f[i]);
            back[i] = fmt == core::WeightFormat::kBF16 ? core::bf16_to_f32(h[i]) : core::f16_to_f32(h[i]);
        }
        core::Weight w;
        w.format = fmt;
        w.data = h.data();
        w.rows = rows;
        w.cols = cols;
        expect_same(w, back, 128, 128, 0, rows, 2);
    }
}

// Past e4m3's range after scaling cannot happen with scale = pow2ceil(amax / 448), except for the amax
// floor (1e-4) and non-finite values: a block of Inf / NaN saturates instead of failing.
TEST(QuantizeWeightFp8Block, NonFiniteSaturates) {
    std::vector<float> f(128 * 128, 1.0f);
    f[5] = INFINITY;
    f[6] = -INFINITY;
    f[7] = NAN;
    core::Weight w;
    w.format = core::WeightFormat::kF32;
    w.data = f.data();
    w.rows = 128;
    w.cols = 128;
    std::vector<uint8_t> q(f.size()), s(1);
    quantize_weight_fp8_block(w, 128, 128, 0, 128, 1, q.data(), s.data());
    EXPECT_EQ(q[5], 0x7e);
    EXPECT_EQ(q[6], 0xfe);
    EXPECT_EQ(q[7] & 0x7f, 0x7e);
}

} // namespace
} // namespace deepinfer::weights
