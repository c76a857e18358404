// V4.1 cache fake-quantization (kernels/ref/cache_quant.h) against hand-computed values of the reference's
// rules: ue8m0 scale rounding, e4m3 and e2m1 round-to-nearest-even with the reference's tie directions,
// e4m3 scales, the amax floors, and rows the reference cannot block left untouched.
#include "kernels/ref/cache_quant.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "core/dtype.h"

namespace deepinfer::kernels::ref {
namespace {

TEST(CacheQuant, Pow2CeilScale) {
    EXPECT_EQ(pow2_ceil_scale(1.0f), 1.0f);
    EXPECT_EQ(pow2_ceil_scale(1.0000001f), 2.0f);
    EXPECT_EQ(pow2_ceil_scale(0.75f), 1.0f);
    EXPECT_EQ(pow2_ceil_scale(0.5f), 0.5f);
    EXPECT_EQ(pow2_ceil_scale(1.0f / 448.0f), 0x1p-8f);
    EXPECT_EQ(pow2_ceil_scale(3.0e-3f), 0x1p-8f);
}

TEST(CacheQuant, Fp8BlockHandValues) {
    // amax 1 -> scale 2^ceil(log2(1/448)) = 2^-8; 0.3 * 256 = 76.8 -> e4m3 80 (step 8 in [64, 128)) -> 0.3125
    std::vector<float> x(32, 0.0f);
    x[0] = 1.0f;
    x[1] = 0.3f;
    x[2] = -0.3f;
    x[3] = 0x1p-20f; // far below the block's resolution: flushes to 0 (e4m3 min subnormal 2^-9 * 2^-8)
    fake_quant_fp8_block(x.data(), 1, 32, 32);
    EXPECT_EQ(x[0], 1.0f);
    EXPECT_EQ(x[1], 0.3125f);
    EXPECT_EQ(x[2], -0.3125f);
    EXPECT_EQ(x[3], 0.0f);
    // an all-zero block uses the amax floor 1e-4 and stays zero
    std::vector<float> z(32, 0.0f);
    fake_quant_fp8_block(z.data(), 1, 32, 32);
    for (float v : z) EXPECT_EQ(v, 0.0f);
    // blocks are independent: a large value in block 1 does not coarsen block 0
    std::vector<float> two(64, 0.0f);
    two[0] = 0.3f;
    two[1] = 1.0f;
    two[32] = 1000.0f;
    fake_quant_fp8_block(two.data(), 1, 64, 32);
    EXPECT_EQ(two[0], 0.3125f);
    EXPECT_EQ(two[32], 1024.0f); // scale 4, 250 -> e4m3 256
}

TEST(CacheQuant, Fp4Ue8m0TiesFollowTheReference) {
    // amax 6 -> scale 1: the e2m1 grid directly. Ties at 0.25, 1.25, 2.5, 5 round down; at 0.75, 1.75, 3.5
    // up.
    const std::vector<float> in = {6.0f,   0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f,  5.0f,
                                   -0.75f, 0.26f, 2.9f,  -6.0f, 0.1f,  4.4f, -2.5f, 1.5f};
    const std::vector<float> want = {6.0f,  0.0f, 1.0f, 1.0f,  2.0f, 2.0f, 4.0f,  4.0f,
                                     -1.0f, 0.5f, 3.0f, -6.0f, 0.0f, 4.0f, -2.0f, 1.5f};
    std::vector<float> x(32, 0.0f);
    std::copy(in.begin(), in.end(), x.begin());
    fake_quant_fp4_block(x.data(), 1, 32, 32, /*e4m3_scales=*/false);
    for (size_t i = 0; i < in.size(); ++i) EXPECT_EQ(x[i], want[i]) << "input " << in[i];
    // amax 1 -> scale 2^ceil(log2(1/6)) = 2^-2 = 0.25: 0.3 -> 1.2 -> 1.0 -> 0.25
    std::vector<float> y(32, 0.0f);
    y[0] = 1.0f;
    y[1] = 0.3f;
    fake_quant_fp4_block(y.data(), 1, 32, 32, false);
    EXPECT_EQ(y[0], 1.0f);
    EXPECT_EQ(y[1], 0.25f);
}

TEST(CacheQuant, Fp4E4m3Scales) {
    // amax 3 -> scale e4m3(0.5) = 0.5: 0.3 -> 0.6 -> 0.5 -> 0.25; 3 -> 6 -> 3
    std::vector<float> x(16, 0.0f);
    x[0] = 3.0f;
    x[1] = 0.3f;
    fake_quant_fp4_block(x.data(), 1, 16, 16, /*e4m3_scales=*/true);
    EXPECT_EQ(x[0], 3.0f);
    EXPECT_EQ(x[1], 0.25f);
    // amax 1 -> 1/6 = 0.1667 -> e4m3 0.171875 (step 2^-6 in [0.125, 0.25)), not a power of two
    std::vector<float> y(16, 0.0f);
    y[0] = 1.0f;
    fake_quant_fp4_block(y.data(), 1, 16, 16, true);
    EXPECT_EQ(y[0], 0.171875f * 6.0f); // 1 / 0.171875 = 5.82 -> 6
    // tiny amax: floor 6 * 2^-9 -> scale 2^-9 (the smallest e4m3 subnormal)
    std::vector<float> z(16, 0.0f);
    z[0] = 0x1p-12f;
    fake_quant_fp4_block(z.data(), 1, 16, 16, true);
    EXPECT_EQ(z[0], 0.0f); // 2^-12 / 2^-9 = 0.125 -> 0
}

TEST(CacheQuant, UnblockableRowsAreLeftAsIs) {
    std::vector<float> x = {0.3f, 1.0f, 0.7f};
    const std::vector<float> orig = x;
    fake_quant_fp8_block(x.data(), 1, 3, 32);
    EXPECT_EQ(x, orig);
    fake_quant_fp4_block(x.data(), 1, 3, 16, true);
    EXPECT_EQ(x, orig);
}

// Random rows: every output lies on its block's grid (value / scale is a grid point) within half a grid
// step of the input, and quantizing again changes nothing (the dequantized values are fixed points).
TEST(CacheQuant, RandomRowsLandOnTheGridAndAreIdempotent) {
    std::mt19937 rng(7);
    std::normal_distribution<float> d(0.0f, 2.0f);
    const int64_t rows = 8, n = 64;
    for (int kind = 0; kind < 3; ++kind) {
        std::vector<float> x(rows * n);
        for (float& v : x) v = d(rng);
        std::vector<float> q = x;
        const int64_t block = kind == 2 ? 16 : 32;
        auto apply = [&](std::vector<float>& v) {
            if (kind == 0) fake_quant_fp8_block(v.data(), rows, n, block);
            if (kind == 1) fake_quant_fp4_block(v.data(), rows, n, block, false);
            if (kind == 2) fake_quant_fp4_block(v.data(), rows, n, block, true);
        };
        apply(q);
        std::vector<float> again = q;
        apply(again);
        EXPECT_EQ(again, q) << "kind " << kind;
        for (int64_t r = 0; r < rows; ++r)
            for (int64_t b = 0; b < n; b += block) {
                float amax = 0;
                for (int64_t i = 0; i < block; ++i) amax = std::max(amax, std::fabs(x[r * n + b + i]));
                for (int64_t i = 0; i < block; ++i) {
                    const float in = x[r * n + b + i], out = q[r * n + b + i];
                    // half a grid step at the top of the block: e4m3 16 / (448 / 2) of a ue8m0-scaled amax;
                    // e2m1 1 / (6 / 2); with an e4m3 scale (amax ~ 6 scale) 1 / 6
                    const float tol = kind == 0 ? amax / 14 : kind == 1 ? amax / 3 : amax / 5;
                    EXPECT_LE(std::fabs(out - in), tol) << "kind " << kind;
                }
            }
    }
}

} // namespace
} // namespace deepinfer::kernels::ref
