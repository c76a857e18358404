// The exact GEMM on AMX-BF16 tiles (kernels/cpu/gemm_amx_bf16.h, gemm_amx_bf16x3.cpp): every F32 activation
// split into three BF16 pieces that sum to it exactly, the weights decoded exactly, the products summed in
// F32. Checked through the dispatcher (Numerics::kExact, more than kGemvMaxTokens tokens):
//   - no bit of an activation is lost: a weight that selects one column per row, times a power of two,
//     gives that activation times the power of two, bit for bit (a split keeping 16 of the 24 significant
//     bits, or a weight decoded into the wrong column or scale, fails it);
//   - dense random weights against the double-precision sum, to an F32 GEMM's rounding, as the F32 GEMM
//     the dispatcher takes with AMX-BF16 off is checked here too;
//   - infinities and NaNs in the activations come out as ref's.

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/dtype.h"
#include "core/thread_pool.h"
#include "core/weight.h"
#include "gemm_test_support.h"
#include "kernels/cpu/linear.h"
#include "kernels/cpu/linear_kernels.h"
#include "kernels/ops.h"

namespace deepinfer::kernels {
namespace {

using namespace gemm_test;

bool amx_exact_available() {
    return cpu::amx_bf16_supported() && cpu::detail::amx_bf16_enabled();
}

// A weight in `format` whose row r holds sign_r x 2^e_r at column sel(r) and zeros elsewhere (FP8: e4m3 1.0
// or 2.0 times the block scale; FP4: e2m1 1, 2 or 4 times the group scale; BF16 the value).
struct SelectWeight {
    core::Weight w;
    std::vector<uint8_t> data, scale;
    std::vector<uint16_t> bf16;
    std::vector<double> value; // the selected value of each row
    std::vector<int64_t> col;  // sel(r)
};

SelectWeight select_weight(core::WeightFormat format, int64_t rows, int64_t cols, std::mt19937* rng) {
    SelectWeight s;
    s.w.format = format;
    s.w.rows = rows;
    s.w.cols = cols;
    std::uniform_int_distribution<int64_t> pick(0, cols - 1);
    std::uniform_int_distribution<int> sc(117, 137), bit(0, 1), mag(0, 2);
    for (int64_t r = 0; r < rows; ++r) s.col.push_back(pick(*rng));
    s.value.resize(rows);
    if (format == core::WeightFormat::kFp8Block) {
        s.w.block_rows = 128;
        s.w.block_cols = 128;
        s.data.assign(rows * cols, 0);
        s.scale.resize(s.w.scale_rows() * s.w.scale_cols());
        for (uint8_t& b : s.scale) b = static_cast<uint8_t>(sc(*rng));
        for (int64_t r = 0; r < rows; ++r) {
            const int neg = bit(*rng), two = bit(*rng);
            s.data[r * cols + s.col[r]] =
                static_cast<uint8_t>((neg ? 0x80 : 0) | (two ? 0x40 : 0x38)); // 2.0 / 1.0
            const int e = s.scale[r / 128 * s.w.scale_cols() + s.col[r] / 128] - 127 + two;
            s.value[r] = (neg ? -1.0 : 1.0) * std::ldexp(1.0, e);
        }
        s.w.data = s.data.data();
        s.w.scale = s.scale.data();
    } else if (format == core::WeightFormat::kFp4Group) {
        s.w.block_rows = 1;
        s.w.block_cols = 32;
        s.data.assign(rows * cols / 2, 0);
        s.scale.resize(rows * cols / 32);
        for (uint8_t& b : s.scale) b = static_cast<uint8_t>(sc(*rng));
        for (int64_t r = 0; r < rows; ++r) {
            const int neg = bit(*rng), m = mag(*rng); // e2m1 codes 2, 4, 6: 1, 2, 4
            const auto code = static_cast<uint8_t>((neg ? 8 : 0) | (2 + 2 * m));
            const int64_t c = s.col[r];
            s.data[(r * cols + c) / 2] |= static_cast<uint8_t>(c % 2 == 0 ? code : code << 4);
            s.value[r] = (neg ? -1.0 : 1.0) * std::ldexp(1.0, m + s.scale[r * cols / 32 + c / 32] - 127);
        }
        s.w.data = s.data.data();
        s.w.scale = s.scale.data();
    } else {
        s.bf16.assign(rows * cols, 0);
        for (int64_t r = 0; r < rows; ++r) {
            const int neg = bit(*rng), e = sc(*rng) - 127;
            s.value[r] = (neg ? -1.0 : 1.0) * std::ldexp(1.0, e);
            s.bf16[r * cols + s.col[r]] = core::f32_to_bf16(static_cast<float>(s.value[r]));
        }
        s.w.data = s.bf16.data();
    }
    return s;
}

// Activations with all 24 significant bits in use (a uniform mantissa), magnitudes 2^-20 .. 2^20 and both
// signs: what a split keeping fewer bits would round.
std::vector<float> full_mantissa(int64_t count, std::mt19937* rng) {
    std::uniform_int_distribution<uint32_t> mant(0, (1u << 23) - 1), ex(127 - 20, 127 + 20), sign(0, 1);
    std::vector<float> x(count);
    for (float& v : x) {
        const uint32_t u = sign(*rng) << 31 | ex(*rng) << 23 | mant(*rng) | 1u;
        std::memcpy(&v, &u, 4);
    }
    return x;
}

TEST(GemmAmxBf16x3, SelectingWeightsReproduceEveryActivationBit) {
    if (!amx_exact_available()) GTEST_SKIP() << "no AMX-BF16";
    core::ThreadPool pool(2);
    std::mt19937 rng(41);
    struct Case {
        int64_t rows, cols, n;
    };
    // One 16-token group (9, 16), several (17, 40), the 64-token chunks (65, 150: balanced 75 + 75), rows off
    // the 32-row panels, a last pass of 128 columns (384), strided x and y, a row range.
    for (const Case& c : {Case{33, 128, 9}, Case{64, 256, 16}, Case{97, 384, 17}, Case{45, 512, 40},
                          Case{70, 1024, 65}, Case{130, 256, 150}}) {
        for (core::WeightFormat f :
             {core::WeightFormat::kFp8Block, core::WeightFormat::kFp4Group, core::WeightFormat::kBF16}) {
            SCOPED_TRACE(std::to_string(c.rows) + "x" + std::to_string(c.cols) + " n=" + std::to_string(c.n) +
                         " format " + std::to_string(static_cast<int>(f)));
            const SelectWeight s = select_weight(f, c.rows, c.cols, &rng);
            const int64_t ldx = c.cols + 3, r0 = c.rows / 5, out = c.rows - r0, ldy = out + 2;
            const std::vector<float> x = full_mantissa(c.n * ldx, &rng);
            std::vector<float> y(c.n * ldy, -7.0f);
            cpu::matmul_isa(
                MatmulArgs{x.data(), c.n, ldx, &s.w, r0, c.rows, y.data(), ldy, &pool, Numerics::kExact},
                cpu::Isa::kAvx512);
            int64_t wrong = 0, past = 0;
            for (int64_t i = 0; i < c.n; ++i) {
                for (int64_t r = r0; r < c.rows; ++r) {
                    const auto want = static_cast<float>(s.value[r] * x[i * ldx + s.col[r]]); // exact
                    wrong += y[i * ldy + r - r0] != want;
                }
                for (int64_t r = out; r < ldy; ++r) past += y[i * ldy + r] != -7.0f;
            }
            EXPECT_EQ(wrong, 0);
            EXPECT_EQ(past, 0);
        }
    }
}

// Dense weights: per output row NMSE < 1e-11 against the double-precision sum of the stored weights times
// the F32 activations (an F32 sum of 4096 products is ~1e-12 off; activations rounded to BF16 ~1e-5, to 16
// significant bits ~1e-10), for the AMX-BF16 GEMM and, AMX-BF16 off, the F32 GEMM. FP8 128 x 128 and
// 128 x 256 blocks, FP4 groups of 32 (one case with scales outside amx_bf16_fp4_scale_ok: the F32 GEMM
// either way) and of 64, BF16 with a block of subnormal weights (read as zero by the tiles: a few 1e-39 x |x|
// off).
TEST(GemmAmxBf16x3, DenseWeightsMatchTheDoubleSum) {
    if (!amx_exact_available()) GTEST_SKIP() << "no AMX-BF16";
    core::ThreadPool pool(2);
    std::mt19937 rng(42);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    struct Case {
        int64_t rows, cols, n;
    };
    for (const Case& c : {Case{33, 256, 9}, Case{97, 384, 24}, Case{130, 512, 64}, Case{40, 4096, 70}}) {
        const Fp8Weight fp8 = random_fp8(c.rows, c.cols, 128, &rng);
        const Fp8Weight fp8w = random_fp8(c.rows, c.cols, c.cols % 256 == 0 ? 256 : 128, &rng);
        const Fp4Weight fp4 = random_fp4(c.rows, c.cols, 110, 135, &rng);
        const Fp4Weight fp4_low = random_fp4(c.rows, c.cols, 0, 3, &rng);
        Fp4Weight fp4_64 = random_fp4(c.rows, c.cols, 110, 135, &rng); // 64-column groups: the first half
        fp4_64.w.block_cols = 64;                                      // of the scales, [rows, cols / 64]
        const Bf16Weight bf16 = random_bf16(c.rows, c.cols, &rng);
        for (const core::Weight* w :
             {&fp8.w, &fp8w.w, &fp4.w, &fp4_low.w, static_cast<const core::Weight*>(&fp4_64.w), &bf16.w}) {
            const int64_t ldx = c.cols + 1, r0 = c.rows / 4, out = c.rows - r0, ldy = out + 1;
            std::vector<float> x(c.n * ldx);
            for (float& v : x) v = nd(rng);
            std::vector<double> want(c.n * out, 0.0);
            for (int64_t i = 0; i < c.n; ++i)
                for (int64_t r = r0; r < c.rows; ++r) {
                    double sum = 0.0;
                    for (int64_t col = 0; col < c.cols; ++col)
                        sum += static_cast<double>(w->at(r, col)) * x[i * ldx + col];
                    want[i * out + r - r0] = sum;
                }
            for (int amx : {-1, 0}) {
                SCOPED_TRACE(std::to_string(c.rows) + "x" + std::to_string(c.cols) + " n=" +
                             std::to_string(c.n) + " format " + std::to_string(static_cast<int>(w->format)) +
                             " block " + std::to_string(w->block_cols) + (amx ? " AMX-BF16" : " F32 GEMM"));
                cpu::detail::force_amx_bf16_off(amx);
                std::vector<float> y(c.n * ldy, -7.0f);
                cpu::matmul_isa(
                    MatmulArgs{x.data(), c.n, ldx, w, r0, c.rows, y.data(), ldy, &pool, Numerics::kExact},
                    cpu::Isa::kAvx512);
                cpu::detail::force_amx_bf16_off(-1);
                expect_rows_match(y, ldy, want, c.n, out, r0, 1e-11);
            }
        }
    }
}

// An infinite or NaN activation: ref's class (NaN, +inf, -inf) in every output of its token; the other
// tokens finite and unchanged.
TEST(GemmAmxBf16x3, InfinitiesAndNansAsRef) {
    if (!amx_exact_available()) GTEST_SKIP() << "no AMX-BF16";
    core::ThreadPool pool(2);
    std::mt19937 rng(43);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    const int64_t rows = 40, cols = 256, n = 20;
    // Positive FP4 weights (codes 1-7): an infinite activation gives an infinity of its sign, not NaN.
    Fp4Weight w = random_fp4(rows, cols, 120, 124, &rng);
    for (uint8_t& b : w.data) b = static_cast<uint8_t>((b & 0x77) | 0x11);
    std::vector<float> x(n * cols);
    for (float& v : x) v = nd(rng);
    x[3 * cols + 17] = INFINITY;
    x[5 * cols + 200] = -INFINITY;
    x[7 * cols + 5] = NAN;
    uint32_t low_payload_nan = 0x7f800001u; // a NaN whose payload lies in the low 16 bits only
    std::memcpy(&x[9 * cols + 130], &low_payload_nan, 4);
    MatmulArgs a{x.data(), n, cols, &w.w, 0, rows, nullptr, rows, &pool, Numerics::kExact};
    std::vector<float> want(n * rows), got(n * rows);
    a.y = want.data();
    ref::matmul(a);
    a.y = got.data();
    cpu::matmul_isa(a, cpu::Isa::kAvx512);
    auto cls = [](float v) { return std::isnan(v) ? 0 : std::isinf(v) ? (v > 0 ? 1 : -1) : 2; };
    for (int64_t i = 0; i < n; ++i)
        for (int64_t r = 0; r < rows; ++r) {
            const float g = got[i * rows + r], e = want[i * rows + r];
            ASSERT_EQ(cls(g), cls(e)) << "token " << i << " row " << r << ": " << g << " vs " << e;
            if (i == 3) {
                EXPECT_EQ(cls(g), 1);
            }
            if (i == 5) {
                EXPECT_EQ(cls(g), -1);
            }
            if (i == 7 || i == 9) {
                EXPECT_EQ(cls(g), 0);
            }
            if (cls(e) == 2) {
                EXPECT_NEAR(g, e, 1e-4 * (1.0 + std::fabs(e)));
            }
        }
}

} // namespace
} // namespace deepinfer::kernels
