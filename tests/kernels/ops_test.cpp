// Every op of kernels/ops.h against a straightforward independent computation (double precision, formats
// decoded here from their definitions), table-driven over shapes and weight formats. Floats: NMSE;
// integers: exact; top-k: set equality.

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/dtype.h"
#include "kernels/ops.h"

namespace deepinfer::kernels {
namespace {

double nmse(const std::vector<float>& got, const std::vector<double>& ref) {
    double num = 0.0, den = 0.0;
    for (size_t i = 0; i < ref.size(); ++i) {
        num += (got[i] - ref[i]) * (got[i] - ref[i]);
        den += ref[i] * ref[i];
    }
    return den > 0 ? num / den : num;
}

std::vector<float> randn(size_t n, std::mt19937* rng, float scale = 1.0f) {
    std::normal_distribution<float> d(0.0f, scale);
    std::vector<float> v(n);
    for (float& x : v) x = d(*rng);
    return v;
}

// A weight in a given format with its bytes, plus the exact values decoded independently.
struct TestWeight {
    core::Weight w;
    std::vector<uint8_t> data, scale;
    std::vector<double> values; // [rows, cols] exact
};

TestWeight make_weight(core::WeightFormat f, int64_t rows, int64_t cols, int br, int bc, std::mt19937* rng) {
    TestWeight t;
    t.w.format = f;
    t.w.rows = rows;
    t.w.cols = cols;
    t.values.resize(rows * cols);
    const std::vector<float> src = randn(rows * cols, rng);
    std::uniform_int_distribution<int> sc(120, 130);
    switch (f) {
    case core::WeightFormat::kF32:
        t.data.resize(rows * cols * 4);
        std::memcpy(t.data.data(), src.data(), t.data.size());
        for (int64_t i = 0; i < rows * cols; ++i) t.values[i] = src[i];
        break;
    case core::WeightFormat::kBF16:
    case core::WeightFormat::kF16: {
        t.data.resize(rows * cols * 2);
        auto* p = reinterpret_cast<uint16_t*>(t.data.data());
        for (int64_t i = 0; i < rows * cols; ++i) {
            const bool bf = f == core::WeightFormat::kBF16;
            p[i] = bf ? core::f32_to_bf16(src[i]) : core::f32_to_f16(src[i]);
            // bf16 is the top half of an f32; f16 decoded from sign/exponent/mantissa.
            if (bf) {
                t.values[i] = core::bits_to_f32(static_cast<uint32_t>(p[i]) << 16);
            } else {
                const int e = (p[i] >> 10) & 0x1f, m = p[i] & 0x3ff;
                const double mag = e == 0 ? std::ldexp(m, -24) : std::ldexp(1024 + m, e - 25);
                t.values[i] = (p[i] & 0x8000) ? -mag : mag;
            }
        }
        break;
    }
    case core::WeightFormat::kFp8Block: {
        t.w.block_rows = br;
        t.w.block_cols = bc;
        t.data.resize(rows * cols);
        t.scale.resize(t.w.scale_rows() * t.w.scale_cols());
        for (uint8_t& s : t.scale) s = static_cast<uint8_t>(sc(*rng));
        for (int64_t r = 0; r < rows; ++r)
            for (int64_t c = 0; c < cols; ++c) {
                const uint8_t b = core::f32_to_fp8_e4m3(src[r * cols + c] * 8.0f);
                t.data[r * cols + c] = b;
                // e4m3fn: 1 sign, 4 exponent (bias 7), 3 mantissa.
                const int e = (b >> 3) & 0xf, m = b & 7;
                const double mag = e == 0 ? std::ldexp(m, -9) : std::ldexp(8 + m, e - 10);
                const int s = t.scale[(r / br) * t.w.scale_cols() + c / bc];
                t.values[r * cols + c] = ((b & 0x80) ? -mag : mag) * std::ldexp(1.0, s - 127);
            }
        break;
    }
    case core::WeightFormat::kFp4Group: {
        t.w.block_rows = 1;
        t.w.block_cols = bc;
        t.data.assign(rows * cols / 2, 0);
        t.scale.resize(rows * t.w.scale_cols());
        for (uint8_t& s : t.scale) s = static_cast<uint8_t>(sc(*rng));
        static const double grid[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
        for (int64_t r = 0; r < rows; ++r)
            for (int64_t c = 0; c < cols; ++c) {
                const uint8_t code = core::f32_to_fp4_e2m1(src[r * cols + c] * 3.0f);
                t.data[r * (cols / 2) + c / 2] |= static_cast<uint8_t>(c % 2 ? code << 4 : code);
                const int s = t.scale[r * t.w.scale_cols() + c / bc];
                t.values[r * cols + c] =
                    ((code & 8) ? -grid[code & 7] : grid[code & 7]) * std::ldexp(1.0, s - 127);
            }
        break;
    }
    }
    t.w.data = t.data.data();
    t.w.scale = t.scale.empty() ? nullptr : t.scale.data();
    return t;
}

struct MatmulCase {
    core::WeightFormat format;
    int64_t n, rows, cols;
    int br, bc;
    std::string name;
};

class MatmulTest : public ::testing::TestWithParam<MatmulCase> {};

TEST_P(MatmulTest, RefAndCpuMatchIndependentDequantization) {
    const MatmulCase& mc = GetParam();
    std::mt19937 rng(7);
    TestWeight tw = make_weight(mc.format, mc.rows, mc.cols, mc.br, mc.bc, &rng);
    // Strided activations and a row range, as the grouped output projection uses them.
    const int64_t ldx = mc.cols + 3, r0 = mc.rows / 3, r1 = mc.rows, ldy = (r1 - r0) + 2;
    const std::vector<float> x = randn(mc.n * ldx, &rng);
    std::vector<double> ref(mc.n * (r1 - r0));
    for (int64_t i = 0; i < mc.n; ++i)
        for (int64_t r = r0; r < r1; ++r) {
            double s = 0.0;
            for (int64_t c = 0; c < mc.cols; ++c) s += x[i * ldx + c] * tw.values[r * mc.cols + c];
            ref[i * (r1 - r0) + (r - r0)] = s;
        }
    for (int impl = 0; impl < 2; ++impl) {
        std::vector<float> y(mc.n * ldy, -1.0f);
        MatmulArgs a{x.data(), mc.n, ldx, &tw.w, r0, r1, y.data(), ldy};
        impl == 0 ? ref::matmul(a) : cpu::matmul(a);
        std::vector<float> got(mc.n * (r1 - r0));
        for (int64_t i = 0; i < mc.n; ++i)
            for (int64_t r = 0; r < r1 - r0; ++r) got[i * (r1 - r0) + r] = y[i * ldy + r];
        EXPECT_LT(nmse(got, ref), 1e-11) << (impl ? "cpu" : "ref");
        for (int64_t i = 0; i < mc.n; ++i)
            for (int64_t r = r1 - r0; r < ldy; ++r)
                EXPECT_EQ(y[i * ldy + r], -1.0f) << "wrote past the row range";
    }
    // Row dequantization is exact.
    std::vector<float> row(mc.cols);
    ref::dequantize_row(tw.w, mc.rows - 1, row.data());
    for (int64_t c = 0; c < mc.cols; ++c) EXPECT_EQ(row[c], tw.values[(mc.rows - 1) * mc.cols + c]);
}

using F = core::WeightFormat;
INSTANTIATE_TEST_SUITE_P(Formats, MatmulTest,
                         ::testing::Values(MatmulCase{F::kF32, 1, 7, 64, 1, 1, "f32_gemv"},
                                           MatmulCase{F::kF32, 6, 40, 130, 1, 1, "f32"},
                                           MatmulCase{F::kBF16, 5, 33, 96, 1, 1, "bf16"},
                                           MatmulCase{F::kF16, 4, 17, 64, 1, 1, "f16"},
                                           MatmulCase{F::kFp8Block, 3, 64, 96, 32, 32, "fp8_32"},
                                           MatmulCase{F::kFp8Block, 9, 70, 100, 32, 32, "fp8_ragged_blocks"},
                                           MatmulCase{F::kFp8Block, 2, 300, 256, 128, 128, "fp8_128"},
                                           MatmulCase{F::kFp4Group, 5, 24, 64, 1, 32, "fp4"},
                                           MatmulCase{F::kFp4Group, 130, 64, 128, 1, 32, "fp4_prefill"}),
                         [](const auto& param_info) { return param_info.param.name; });

TEST(RmsNorm, WeightedAndUnweighted) {
    std::mt19937 rng(1);
    for (int64_t d : {1, 16, 64, 257}) {
        const int64_t n = 3;
        const std::vector<float> x = randn(n * d, &rng, 3.0f), w = randn(d, &rng);
        for (bool weighted : {false, true}) {
            std::vector<double> ref(n * d);
            for (int64_t i = 0; i < n; ++i) {
                double ss = 0;
                for (int64_t j = 0; j < d; ++j) ss += double(x[i * d + j]) * x[i * d + j];
                const double inv = 1.0 / std::sqrt(ss / d + 1e-6);
                for (int64_t j = 0; j < d; ++j) ref[i * d + j] = x[i * d + j] * inv * (weighted ? w[j] : 1.0);
            }
            std::vector<float> y(n * d);
            ref::rms_norm(x.data(), weighted ? w.data() : nullptr, n, d, 1e-6f, y.data());
            EXPECT_LT(nmse(y, ref), 1e-12) << "d=" << d;
            std::vector<float> inplace = x;
            ref::rms_norm(inplace.data(), weighted ? w.data() : nullptr, n, d, 1e-6f, inplace.data());
            EXPECT_EQ(inplace, y);
        }
    }
}

// exp_ref against the C library's expf: within 2 ulp over every 13th float in [-104, 89] (the whole range
// where e^x is a nonzero finite float), 0 below and inf above as expf, NaN kept.
TEST(ExpRef, WithinTwoUlpOfExpf) {
    auto ordered = [](float a) {
        int32_t i;
        std::memcpy(&i, &a, 4);
        return i < 0 ? static_cast<int64_t>(std::numeric_limits<int32_t>::min()) - i
                     : static_cast<int64_t>(i);
    };
    int64_t worst = 0, checked = 0;
    for (uint32_t b = 0; b < 0xffffffffu - 13; b += 13) {
        float x;
        std::memcpy(&x, &b, 4);
        if (!(x >= -104.0f && x <= 89.0f)) continue;
        const float want = std::exp(x), got = exp_ref(x);
        if (want == 0.0f || std::isinf(want)) {
            EXPECT_EQ(got, want) << x;
            continue;
        }
        const int64_t d = std::abs(ordered(got) - ordered(want));
        if (d > worst) worst = d;
        ++checked;
        if (d > 2) ADD_FAILURE() << "x " << x << ": " << got << " vs expf " << want;
        if (HasFailure()) break;
    }
    EXPECT_GT(checked, 1000000);
    EXPECT_LE(worst, 2);
    std::printf("exp_ref: at most %lld ulp from expf over %lld values\n", static_cast<long long>(worst),
                static_cast<long long>(checked));
    const float inf = std::numeric_limits<float>::infinity();
    EXPECT_EQ(exp_ref(-inf), 0.0f);
    EXPECT_EQ(exp_ref(-200.0f), 0.0f);
    EXPECT_EQ(exp_ref(inf), inf);
    EXPECT_EQ(exp_ref(100.0f), inf);
    EXPECT_EQ(exp_ref(0.0f), 1.0f);
    EXPECT_EQ(exp_ref(-0.0f), 1.0f);
    EXPECT_TRUE(std::isnan(exp_ref(std::numeric_limits<float>::quiet_NaN())));
}

TEST(Rope, InterleavedPairsOnTrailingDimsAreComplexRotations) {
    std::mt19937 rng(2);
    struct Case {
        int64_t n, ld, dim, rope_dim;
    };
    for (const Case& c : {Case{1, 32, 32, 16}, Case{4, 40, 32, 32}, Case{2, 64, 64, 2}}) {
        const std::vector<float> x = randn(c.n * c.ld, &rng);
        std::vector<float> cs(c.rope_dim / 2), sn(c.rope_dim / 2);
        std::vector<double> theta(c.rope_dim / 2);
        for (int64_t i = 0; i < c.rope_dim / 2; ++i) {
            theta[i] = 0.3 * (i + 1) + 0.1;
            cs[i] = static_cast<float>(std::cos(theta[i]));
            sn[i] = static_cast<float>(std::sin(theta[i]));
        }
        for (bool inverse : {false, true}) {
            std::vector<double> ref(x.begin(), x.end());
            for (int64_t v = 0; v < c.n; ++v)
                for (int64_t i = 0; i < c.rope_dim / 2; ++i) {
                    const int64_t o = v * c.ld + c.dim - c.rope_dim + 2 * i;
                    const std::complex<double> z(x[o], x[o + 1]);
                    const std::complex<double> r = z * std::polar(1.0, inverse ? -theta[i] : theta[i]);
                    ref[o] = r.real();
                    ref[o + 1] = r.imag();
                }
            std::vector<float> y = x;
            ref::rope(y.data(), c.n, c.ld, c.dim, c.rope_dim, cs.data(), sn.data(), inverse);
            EXPECT_LT(nmse(y, ref), 1e-13);
        }
        std::vector<float> y = x;
        ref::rope(y.data(), c.n, c.ld, c.dim, c.rope_dim, cs.data(), sn.data(), false);
        ref::rope(y.data(), c.n, c.ld, c.dim, c.rope_dim, cs.data(), sn.data(), true);
        std::vector<double> xd(x.begin(), x.end());
        EXPECT_LT(nmse(y, xd), 1e-13) << "inverse undoes forward";
    }
}

TEST(Softmax, MatchesDoubleAndMasksMinusInf) {
    std::mt19937 rng(3);
    for (int64_t n : {1, 5, 33}) {
        std::vector<float> x = randn(n, &rng, 4.0f);
        if (n > 2) x[1] = -std::numeric_limits<float>::infinity();
        std::vector<double> ref(n);
        double mx = -1e300, s = 0;
        for (float v : x) mx = std::max(mx, double(v));
        for (int64_t i = 0; i < n; ++i) s += ref[i] = std::exp(double(x[i]) - mx);
        for (double& r : ref) r /= s;
        ref::softmax(x.data(), n);
        EXPECT_LT(nmse(x, ref), 1e-13);
        if (n > 2) {
            EXPECT_EQ(x[1], 0.0f);
        }
    }
}

TEST(TopK, LargestKAsSets) {
    std::mt19937 rng(4);
    for (int64_t n : {1, 8, 10, 300}) {
        for (int64_t k : {int64_t(0), int64_t(1), std::min<int64_t>(3, n), n}) {
            const std::vector<float> x = randn(n, &rng);
            std::vector<int32_t> order(n);
            for (int32_t i = 0; i < n; ++i) order[i] = i;
            std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return x[a] > x[b]; });
            const std::set<int32_t> ref(order.begin(), order.begin() + k);
            std::vector<int32_t> a(k), b(k);
            ref::topk(x.data(), n, k, a.data());
            ref::topk_torch(x.data(), n, k, b.data());
            EXPECT_EQ(std::set<int32_t>(a.begin(), a.end()), ref) << "n=" << n << " k=" << k;
            EXPECT_EQ(std::set<int32_t>(b.begin(), b.end()), ref) << "n=" << n << " k=" << k;
            for (int64_t i = 0; i + 1 < k; ++i) EXPECT_GE(x[a[i]], x[a[i + 1]]) << "topk is sorted";
        }
    }
    // Ties: any k of the tied maxima is a valid pick; ref::topk takes the lowest indices.
    const std::vector<float> tied = {0.f, 1.f, 1.f, 1.f, -2.f, 1.f};
    std::vector<int32_t> a(2), b(2);
    ref::topk(tied.data(), 6, 2, a.data());
    EXPECT_EQ(a, (std::vector<int32_t>{1, 2}));
    ref::topk_torch(tied.data(), 6, 2, b.data());
    for (int32_t i : b) EXPECT_EQ(tied[i], 1.f);
}

// torch.topk's picks among exact ties (recorded with torch 2.15 CPU on these inputs): topk_torch must pick
// the same set, since the model's indexer and router reproduce the reference's tie breaking.
TEST(TopK, TorchCompatibleTieBreaking) {
    constexpr float kInf = std::numeric_limits<float>::infinity();
    struct Case {
        std::vector<float> x;
        int64_t k;
        std::vector<int32_t> torch_picks; // sorted
    };
    const std::vector<Case> cases = {
        {{-0.5f, -kInf, -kInf, -1.0f}, 3, {0, 2, 3}},
        {{0.5f, 1.0f, 1.0f, -1.0f, -kInf, 0.0f}, 3, {0, 1, 2}},
        {{-kInf, 0.0f, -kInf, 1.0f, 1.0f, 0.0f, -0.5f, -kInf, 0.5f, -0.5f}, 3, {3, 4, 8}},
        {{-0.5f, 0.5f, 1.0f, 0.0f, -1.0f, 0.0f, 1.0f, -kInf, -0.5f, -1.0f}, 2, {2, 6}},
        {{-0.5f, -kInf, 1.0f, -1.0f, -1.0f, 0.5f, 1.0f, 1.0f}, 2, {6, 7}},
        {{1.0f,  0.5f,  1.0f, -kInf, 1.0f,  0.5f, -1.0f, -kInf, 1.0f,  0.0f,  1.0f,
          1.0f,  0.0f,  1.0f, -1.0f, 0.0f,  0.0f, 1.0f,  -1.0f, -kInf, 0.5f,  -kInf,
          -kInf, -0.5f, 0.0f, -kInf, -0.5f, 1.0f, -kInf, -0.5f, -kInf, -kInf, -0.5f},
         5,
         {0, 8, 10, 11, 17}},
        {{1.0f,  0.0f,  -1.0f, 0.5f,  0.0f,  -1.0f, -0.5f, -1.0f, 0.0f,  1.0f,  0.5f,  1.0f,  1.0f,  1.0f,
          0.5f,  -1.0f, -1.0f, -0.5f, -0.5f, 0.0f,  0.0f,  0.0f,  1.0f,  0.0f,  0.5f,  1.0f,  0.5f,  -1.0f,
          -1.0f, 0.0f,  0.0f,  0.0f,  -1.0f, -1.0f, -0.5f, 1.0f,  1.0f,  1.0f,  0.0f,  0.5f,  0.5f,  1.0f,
          1.0f,  0.0f,  -1.0f, 0.0f,  0.5f,  0.5f,  0.0f,  0.0f,  1.0f,  0.5f,  0.0f,  0.0f,  -0.5f, 0.0f,
          -1.0f, 0.0f,  0.0f,  0.0f,  1.0f,  0.5f,  -1.0f, 0.0f,  -0.5f, 0.0f,  1.0f,  -0.5f, 0.0f,  -0.5f,
          0.5f,  0.0f,  1.0f,  0.0f,  0.5f,  1.0f,  1.0f,  -0.5f, 0.0f,  0.0f,  0.0f,  1.0f,  1.0f,  1.0f,
          1.0f,  -1.0f, 0.0f,  0.5f,  0.0f,  -1.0f, 1.0f,  -0.5f, 0.5f,  0.0f,  0.0f,  -0.5f, 0.5f,  0.0f,
          0.0f,  0.0f,  0.0f,  0.0f,  0.5f,  -0.5f, -1.0f, 1.0f,  0.5f,  0.5f,  1.0f,  -0.5f, 0.5f,  1.0f,
          0.5f,  -1.0f, 1.0f,  0.0f,  1.0f,  0.0f,  0.0f,  1.0f,  -1.0f, -0.5f, -1.0f, -0.5f, 0.5f,  0.5f,
          -0.5f, 0.0f,  0.0f,  0.5f,  0.0f,  0.5f,  0.0f,  0.0f,  0.0f,  -0.5f, 1.0f,  -1.0f, 0.5f,  -0.5f,
          0.0f,  0.0f,  1.0f,  0.0f,  -0.5f, 0.0f,  0.0f,  -1.0f, 0.5f,  0.0f,  0.0f,  -1.0f, -1.0f, 0.5f,
          0.5f,  0.0f,  -0.5f, 0.0f,  0.5f,  -0.5f, 0.5f,  0.0f,  -0.5f, 1.0f,  0.0f,  0.0f,  0.5f,  0.0f,
          0.0f,  -1.0f, 1.0f,  0.0f,  -0.5f, 0.0f,  -1.0f, 0.0f,  1.0f,  0.0f,  0.0f,  -0.5f, 0.5f,  0.0f,
          0.5f,  -1.0f, 0.5f,  0.5f,  1.0f,  1.0f,  0.0f,  0.5f,  -1.0f, -0.5f, 0.0f,  -1.0f, 1.0f,  -0.5f,
          0.0f,  1.0f,  0.5f,  1.0f},
         3,
         {0, 9, 11}},
        {{0.5f,  0.0f,  0.0f,  0.5f,  0.0f,  -0.5f, -0.5f, 0.0f,  0.0f,  1.0f,  -0.5f, 0.0f,  0.0f,  0.5f,
          0.0f,  1.0f,  -0.5f, 1.0f,  0.0f,  0.0f,  0.0f,  -1.0f, -0.5f, -0.5f, 0.0f,  0.0f,  0.0f,  0.0f,
          0.5f,  0.0f,  0.0f,  1.0f,  0.0f,  -0.5f, 1.0f,  0.0f,  0.0f,  1.0f,  0.5f,  -0.5f, 0.0f,  -0.5f,
          0.5f,  0.0f,  1.0f,  0.0f,  0.0f,  0.0f,  0.0f,  0.5f,  0.5f,  1.0f,  -0.5f, 0.0f,  -1.0f, 0.0f,
          0.5f,  1.0f,  0.0f,  0.0f,  0.0f,  1.0f,  -0.5f, 1.0f,  0.0f,  -0.5f, 0.0f,  0.5f,  -1.0f, 0.5f,
          0.0f,  0.5f,  0.0f,  1.0f,  0.0f,  0.5f,  0.0f,  0.0f,  0.5f,  0.5f,  0.0f,  -1.0f, -1.0f, 1.0f,
          0.0f,  -1.0f, 0.0f,  1.0f,  -0.5f, -0.5f, 0.0f,  0.5f,  1.0f,  0.0f,  0.0f,  0.0f,  0.5f,  -1.0f,
          0.0f,  -1.0f, -1.0f, 0.0f,  0.0f,  0.0f,  0.0f,  0.0f,  0.0f,  1.0f,  0.0f,  1.0f,  0.0f,  -1.0f,
          1.0f,  1.0f,  0.0f,  0.0f,  1.0f,  1.0f,  0.0f,  0.0f,  0.0f,  0.0f,  1.0f,  0.0f,  -1.0f, 1.0f,
          -1.0f, 0.0f,  0.0f,  -1.0f, -0.5f, 0.5f,  -0.5f, 0.0f,  0.5f,  0.0f,  -0.5f, 0.0f,  0.0f,  0.0f,
          0.0f,  0.0f,  -1.0f, -0.5f, -1.0f, 0.0f,  0.0f,  -1.0f, 0.5f,  -1.0f, 0.5f,  -1.0f, -0.5f, 0.0f,
          -0.5f, -0.5f, 0.5f,  -1.0f, 0.5f,  1.0f,  -1.0f, -0.5f, -1.0f, 0.0f,  -0.5f, 0.0f,  1.0f,  0.0f,
          0.0f,  -0.5f, -1.0f, -1.0f, 0.0f,  0.0f,  0.0f,  0.0f,  -1.0f, 0.5f,  -0.5f, 1.0f,  0.0f,  0.5f,
          0.5f,  -1.0f, 0.0f,  0.5f,  -1.0f, -1.0f, -0.5f, 0.0f,  1.0f,  0.5f,  0.5f,  0.5f,  1.0f,  0.0f,
          -0.5f, 0.5f,  0.0f,  -1.0f, 0.5f,  -0.5f, 0.0f,  0.5f,  -1.0f, 0.0f,  0.0f,  1.0f,  -0.5f, 0.0f,
          0.5f,  -0.5f, 0.0f,  1.0f,  -1.0f, -1.0f, -1.0f, 0.5f,  -0.5f, 0.0f,  -0.5f, 0.0f,  0.0f,  0.0f,
          1.0f,  0.0f,  -1.0f, 0.0f,  0.0f,  -1.0f, 0.0f,  0.0f,  -1.0f, 1.0f,  1.0f,  -1.0f, 0.0f,  0.0f,
          -0.5f, -1.0f, -0.5f, -1.0f, -1.0f, 0.0f,  0.0f,  0.0f,  -0.5f, -0.5f, 0.5f,  0.0f,  -0.5f, 0.5f,
          0.0f,  0.0f,  0.5f,  1.0f,  0.0f,  -0.5f, 0.0f,  0.5f,  -0.5f, 0.0f,  0.0f,  1.0f,  -1.0f, -1.0f,
          0.5f,  -1.0f, 0.0f,  0.0f,  -1.0f, -1.0f, -0.5f, 0.0f,  1.0f,  0.5f,  -0.5f, 0.5f,  -0.5f, -0.5f,
          0.0f,  -0.5f, 0.0f,  0.0f,  0.5f,  0.0f,  -0.5f, 1.0f,  0.0f,  -0.5f, -1.0f, 0.5f,  -0.5f, -0.5f,
          -1.0f, 1.0f,  -0.5f, 1.0f,  0.0f,  0.0f},
         3,
         {9, 15, 17}},
        {{0.0f,  0.0f,  -1.0f, 1.0f,  -1.0f, -1.0f, 0.5f,  -0.5f, 0.0f,  -0.5f, -0.5f, -1.0f, 0.0f,
          0.0f,  0.5f,  -1.0f, 0.0f,  0.0f,  0.0f,  1.0f,  0.0f,  0.0f,  1.0f,  0.5f,  1.0f,  -0.5f,
          0.0f,  -0.5f, 0.0f,  1.0f,  0.0f,  0.5f,  0.0f,  -0.5f, 1.0f,  0.0f,  0.0f,  0.0f,  0.0f,
          -0.5f, -1.0f, 0.0f,  0.5f,  0.0f,  -0.5f, -0.5f, 0.0f,  1.0f,  -0.5f, 0.0f,  -0.5f, 0.5f,
          -1.0f, -0.5f, -1.0f, 0.5f,  -1.0f, -0.5f, 0.0f,  0.0f,  0.0f,  1.0f,  -0.5f, 0.5f,  0.0f,
          -1.0f, -0.5f, 0.0f,  0.0f,  0.0f,  -0.5f, 0.5f,  -0.5f, 1.0f,  0.0f,  1.0f,  0.0f,  0.0f,
          0.0f,  0.0f,  0.0f,  -1.0f, 1.0f,  0.0f,  0.5f,  0.5f,  -0.5f, -1.0f, -1.0f, 0.0f,  0.0f,
          0.0f,  0.0f,  -1.0f, -0.5f, 1.0f,  0.5f,  -0.5f, 0.0f,  1.0f,  0.0f,  -1.0f, 0.0f,  1.0f,
          1.0f,  -0.5f, 0.0f,  0.0f,  0.0f,  1.0f,  0.0f,  1.0f,  -0.5f, 1.0f,  0.0f,  -0.5f, 0.0f,
          0.0f,  0.0f,  0.0f,  -1.0f, 1.0f,  -1.0f, 0.5f,  -1.0f, -0.5f, 0.0f,  0.5f,  0.5f,  -0.5f},
         2,
         {3, 19}},
    };
    for (size_t i = 0; i < cases.size(); ++i) {
        const Case& c = cases[i];
        std::vector<int32_t> got(c.k);
        ref::topk_torch(c.x.data(), static_cast<int64_t>(c.x.size()), c.k, got.data());
        std::sort(got.begin(), got.end());
        EXPECT_EQ(got, c.torch_picks) << "case " << i << " (n=" << c.x.size() << ", k=" << c.k << ")";
    }
}

TEST(Embedding, GathersDequantizedRows) {
    std::mt19937 rng(5);
    TestWeight tw = make_weight(F::kBF16, 10, 16, 1, 1, &rng);
    const std::vector<int32_t> ids = {3, 0, 9, 3};
    std::vector<float> out(ids.size() * 16);
    ref::embedding(tw.w, ids.data(), 4, out.data());
    for (size_t i = 0; i < ids.size(); ++i)
        for (int64_t c = 0; c < 16; ++c) EXPECT_EQ(out[i * 16 + c], tw.values[ids[i] * 16 + c]);
}

TEST(Activations, MatchTorchDefinitions) {
    for (double x : {-30.0, -5.0, -0.5, 0.0, 0.7, 3.0, 19.9, 20.5, 50.0}) {
        const float f = static_cast<float>(x);
        EXPECT_NEAR(sigmoid(f), 1.0 / (1.0 + std::exp(-x)), 1e-7);
        EXPECT_NEAR(silu(f), x / (1.0 + std::exp(-x)), 1e-6 * std::max(1.0, std::fabs(x)));
        const double sp = x > 20.0 ? x : std::log1p(std::exp(x));
        EXPECT_NEAR(softplus(f), sp, 1e-6 * std::max(1.0, std::fabs(x)));
    }
}

} // namespace
} // namespace deepinfer::kernels
