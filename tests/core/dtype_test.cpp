// The codecs are checked exhaustively over every code against independent definitions of the formats.

#include <cmath>
#include <cstdint>

#include <gtest/gtest.h>

#include "core/dtype.h"

using namespace deepinfer::core;

namespace {

// e4m3fn by its definition: 1 sign, 4 exponent (bias 7), 3 mantissa; exp 0 subnormal; S.1111.111 NaN.
double e4m3_reference(int b) {
    int s = (b >> 7) & 1, e = (b >> 3) & 15, m = b & 7;
    if (e == 15 && m == 7) return NAN;
    double v = e == 0 ? (m / 8.0) * std::pow(2.0, -6) : (1.0 + m / 8.0) * std::pow(2.0, e - 7);
    return s ? -v : v;
}

} // namespace

TEST(DType, Fp8E4M3DecodesEveryCode) {
    int nan_count = 0;
    for (int b = 0; b < 256; ++b) {
        double ref = e4m3_reference(b);
        float got = fp8_e4m3_to_f32(static_cast<uint8_t>(b));
        if (std::isnan(ref)) {
            EXPECT_TRUE(std::isnan(got)) << b;
            ++nan_count;
        } else {
            EXPECT_EQ(static_cast<double>(got), ref) << "code " << b;
            EXPECT_EQ(fp8_e4m3_table()[b], got);
        }
    }
    EXPECT_EQ(nan_count, 2);
    EXPECT_EQ(fp8_e4m3_to_f32(0x7e), 448.0f);
    EXPECT_EQ(fp8_e4m3_to_f32(0x01), std::ldexp(1.0f, -9));
}

TEST(DType, Fp8E4M3RoundTripsAndRoundsToNearestEven) {
    for (int b = 0; b < 256; ++b) {
        float v = fp8_e4m3_to_f32(static_cast<uint8_t>(b));
        if (std::isnan(v)) continue;
        uint8_t back = f32_to_fp8_e4m3(v);
        if (v == 0.0f) {
            EXPECT_EQ(fp8_e4m3_to_f32(back), v);
            EXPECT_EQ(std::signbit(fp8_e4m3_to_f32(back)), std::signbit(v));
        } else {
            EXPECT_EQ(back, b) << "value " << v;
        }
    }
    // Halfway between 1.0 (mantissa 0, even) and 1.125 (mantissa 1): rounds to 1.0.
    EXPECT_EQ(fp8_e4m3_to_f32(f32_to_fp8_e4m3(1.0625f)), 1.0f);
    // Halfway between 1.125 (odd) and 1.25 (even): rounds to 1.25.
    EXPECT_EQ(fp8_e4m3_to_f32(f32_to_fp8_e4m3(1.1875f)), 1.25f);
    EXPECT_EQ(fp8_e4m3_to_f32(f32_to_fp8_e4m3(1000.0f)), 448.0f);
    EXPECT_EQ(fp8_e4m3_to_f32(f32_to_fp8_e4m3(-1000.0f)), -448.0f);
}

TEST(DType, E8M0DecodesEveryCode) {
    for (int b = 0; b < 255; ++b) {
        EXPECT_EQ(static_cast<double>(e8m0_to_f32(static_cast<uint8_t>(b))), std::pow(2.0, b - 127)) << b;
    }
    EXPECT_TRUE(std::isnan(e8m0_to_f32(255)));
}

TEST(DType, Fp4E2M1DecodesEveryCodeAndRoundTrips) {
    const double mags[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
    for (int c = 0; c < 16; ++c) {
        double ref = (c & 8) ? -mags[c & 7] : mags[c & 7];
        float v = fp4_e2m1_to_f32(static_cast<uint8_t>(c));
        EXPECT_EQ(static_cast<double>(v), ref) << c;
        EXPECT_EQ(fp4_e2m1_table()[c], v);
        if (v != 0.0f) {
            EXPECT_EQ(f32_to_fp4_e2m1(v), c);
        }
    }
    // Ties to the even code: 0.75 -> 1.0, 1.25 -> 1.0, 2.5 -> 2.0, 3.5 -> 4.0, 5.0 -> 4.0, 0.25 -> 0.
    EXPECT_EQ(fp4_e2m1_to_f32(f32_to_fp4_e2m1(0.75f)), 1.0f);
    EXPECT_EQ(fp4_e2m1_to_f32(f32_to_fp4_e2m1(1.25f)), 1.0f);
    EXPECT_EQ(fp4_e2m1_to_f32(f32_to_fp4_e2m1(2.5f)), 2.0f);
    EXPECT_EQ(fp4_e2m1_to_f32(f32_to_fp4_e2m1(3.5f)), 4.0f);
    EXPECT_EQ(fp4_e2m1_to_f32(f32_to_fp4_e2m1(5.0f)), 4.0f);
    EXPECT_EQ(fp4_e2m1_to_f32(f32_to_fp4_e2m1(0.25f)), 0.0f);
    EXPECT_EQ(fp4_e2m1_to_f32(f32_to_fp4_e2m1(-9.0f)), -6.0f);
}

TEST(DType, Bf16AndF16AreExactOverAllCodes) {
    for (uint32_t h = 0; h < 65536; ++h) {
        float b = bf16_to_f32(static_cast<uint16_t>(h));
        if (!std::isnan(b)) {
            EXPECT_EQ(f32_to_bf16(b), h);
        }
        float f = f16_to_f32(static_cast<uint16_t>(h));
        if (!std::isnan(f)) {
            EXPECT_EQ(f32_to_f16(f), h) << "f16 code " << h;
        }
    }
    EXPECT_EQ(f16_to_f32(0x3c00), 1.0f);
    EXPECT_EQ(f16_to_f32(0x0001), std::ldexp(1.0f, -24));
    // RNE: 1 + 2^-8 is halfway between bf16 1.0 and 1.0078125 -> 1.0.
    EXPECT_EQ(bf16_to_f32(f32_to_bf16(1.00390625f)), 1.0f);
}

TEST(DType, SafetensorsNames) {
    for (auto t : {DType::kF32, DType::kBF16, DType::kF16, DType::kF8E4M3, DType::kF8E8M0, DType::kI8,
                   DType::kU8, DType::kI32, DType::kI64, DType::kBool}) {
        auto back = dtype_from_safetensors(dtype_name(t));
        ASSERT_TRUE(back.has_value());
        EXPECT_EQ(*back, t);
    }
    EXPECT_FALSE(dtype_from_safetensors("F4").has_value());
    EXPECT_EQ(dtype_size(DType::kI64), 8u);
}
