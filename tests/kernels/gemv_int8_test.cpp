// The fast FP4 int8 GEMV (kernels/cpu/gemv_int8_impl.h: vpdpbusd with VNNI, vpmaddubsw + vpmaddwd on
// AVX-512 F/BW without it) against a scalar emulation of its numerics: int8 activations per 128 columns
// (amax / 127, round to nearest even), 2 x e2m1 weights, exact integer sums per 32-column group, then the
// group scale and the activation scale. The two must agree to F32 rounding, far tighter than the fast-vs-ref
// tolerance of the linear harness; the largest sums (every weight +-6, every activation +-127) check that
// the int16 pair sums of the non-VNNI kernel never saturate.

#include <cmath>
#include <cstdint>
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

struct Fp4Weight {
    core::Weight w;
    std::vector<uint8_t> data, scale; // [rows, cols / 2] (low nibble: even column), [rows, cols / 32]
};

Fp4Weight fp4_weight(int64_t rows, int64_t cols) {
    Fp4Weight s;
    s.w.format = core::WeightFormat::kFp4Group;
    s.w.rows = rows;
    s.w.cols = cols;
    s.w.block_rows = 1;
    s.w.block_cols = 32;
    s.data.resize(rows * cols / 2);
    s.scale.resize(rows * cols / 32);
    s.w.data = s.data.data();
    s.w.scale = s.scale.data();
    return s;
}

// y [n, rows] (double) as the int8 GEMV defines it.
std::vector<double> emulate(const Fp4Weight& s, const std::vector<float>& x, int64_t n) {
    const int64_t rows = s.w.rows, cols = s.w.cols;
    std::vector<double> y(n * rows, 0.0);
    std::vector<int32_t> q(cols);
    std::vector<float> xs(cols / 128);
    for (int64_t t = 0; t < n; ++t) {
        for (int64_t kb = 0; kb < cols / 128; ++kb) {
            xs[kb] =
                gemm_test::quantize_block_by_definition(x.data() + t * cols + kb * 128, q.data() + kb * 128);
        }
        for (int64_t r = 0; r < rows; ++r) {
            double acc = 0.0;
            for (int64_t g = 0; g < cols / 32; ++g) {
                int64_t isum = 0; // exact: the kernels' int32 lanes hold parts of it
                for (int64_t c = g * 32; c < g * 32 + 32; ++c) {
                    const uint8_t b = s.data[(r * cols + c) / 2];
                    const auto code = static_cast<uint8_t>(c % 2 == 0 ? b & 15 : b >> 4);
                    isum += q[c] * static_cast<int64_t>(2.0f * core::fp4_e2m1_to_f32(code));
                }
                acc += static_cast<double>(isum) * std::ldexp(1.0, s.scale[r * (cols / 32) + g] - 127) * 0.5 *
                       xs[g / 4];
            }
            y[t * rows + r] = acc;
        }
    }
    return y;
}

double nmse(const std::vector<float>& got, const std::vector<double>& want) {
    double num = 0.0, den = 0.0;
    for (size_t i = 0; i < want.size(); ++i) {
        num += (got[i] - want[i]) * (got[i] - want[i]);
        den += want[i] * want[i];
    }
    return den > 0 ? num / den : num;
}

// Rows [r0, rows) of y through the dispatched fast kernel.
std::vector<float> run_fast(const Fp4Weight& s, const std::vector<float>& x, int64_t n, int64_t r0,
                            core::ThreadPool* pool) {
    const int64_t rows = s.w.rows;
    std::vector<float> y(n * rows, 0.0f);
    MatmulArgs a{x.data(), n, s.w.cols, &s.w, r0, rows, y.data() + r0, rows, pool, Numerics::kFast};
    cpu::matmul_isa(a, cpu::Isa::kAvx512);
    return y;
}

TEST(GemvInt8, Fp4MatchesTheInt8Emulation) {
    if (!cpu::int8_gemv_supported()) GTEST_SKIP() << "no AVX-512: no int8 GEMV";
    core::ThreadPool pool(2);
    std::mt19937 rng(31);
    std::uniform_int_distribution<int> byte(0, 255), sc(116, 132);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    for (int64_t cols : {128, 512, 4096}) {
        for (int64_t n = 1; n <= cpu::fast_fp4_gemv_max_tokens(); ++n) {
            SCOPED_TRACE("cols=" + std::to_string(cols) + " n=" + std::to_string(n));
            Fp4Weight s = fp4_weight(37, cols); // 37 rows: a 1-row tail after the 4-row tiles
            for (uint8_t& b : s.data) b = static_cast<uint8_t>(byte(rng));
            for (uint8_t& b : s.scale) b = static_cast<uint8_t>(sc(rng));
            std::vector<float> x(n * cols);
            for (float& v : x) v = nd(rng);
            const std::vector<double> want = emulate(s, x, n);
            std::vector<float> got = run_fast(s, x, n, 0, &pool);
            EXPECT_LT(nmse(got, want), 1e-11);
            // The emulation is the int8 numerics, not the exact product: exact F32 is far off it.
            std::vector<float> exact(n * 37);
            cpu::matmul_isa(
                MatmulArgs{x.data(), n, cols, &s.w, 0, 37, exact.data(), 37, &pool, Numerics::kExact},
                cpu::Isa::kAvx512);
            EXPECT_GT(nmse(exact, want), 1e-8);
            // A row range starting past 0: the same rows, the same bits.
            const std::vector<float> part = run_fast(s, x, n, 9, &pool);
            for (int64_t t = 0; t < n; ++t)
                for (int64_t r = 9; r < 37; ++r) ASSERT_EQ(part[t * 37 + r], got[t * 37 + r]) << r;
            // One token runs one row at a time (one stream), more tokens 4-row tiles of up to 4 tokens:
            // every row's sums are the same operations either way, so each token alone gives the bits it
            // gives beside the others (whichever tile of 4 it falls in).
            for (int64_t t = 0; t < n && n > 1; ++t) {
                const std::vector<float> xt(x.begin() + t * cols, x.begin() + (t + 1) * cols);
                const std::vector<float> one = run_fast(s, xt, 1, 0, &pool);
                for (int64_t r = 0; r < 37; ++r)
                    ASSERT_EQ(one[r], got[t * 37 + r]) << "token " << t << " row " << r;
            }
        }
    }
}

// Every weight +-6 (u8 24 or 0 after the +12 offset) against every activation +-127 (a constant +-1 block):
// the largest pair sums the kernels form. With saturating int16 pair sums these would come out short.
TEST(GemvInt8, Fp4LargestSumsAreExact) {
    if (!cpu::int8_gemv_supported()) GTEST_SKIP() << "no AVX-512: no int8 GEMV";
    core::ThreadPool pool(2);
    const int64_t cols = 512, n = 2;
    Fp4Weight s = fp4_weight(8, cols);
    // Rows: +6 everywhere, -6 everywhere, then +6 / -6 by column parity and by 32-column group.
    for (int64_t r = 0; r < 8; ++r)
        for (int64_t i = 0; i < cols / 2; ++i) {
            const int64_t g = 2 * i / 32;
            const uint8_t pos = 0x7, neg = 0xf;
            uint8_t lo = pos, hi = pos;
            if (r % 4 == 1) lo = hi = neg;
            if (r % 4 == 2) hi = neg;
            if (r % 4 == 3) lo = hi = g % 2 ? neg : pos;
            s.data[r * cols / 2 + i] = static_cast<uint8_t>(lo | hi << 4);
        }
    for (uint8_t& b : s.scale) b = 127;
    std::vector<float> x(n * cols);
    for (int64_t c = 0; c < cols; ++c) {
        x[c] = 1.0f;                                // token 0: +127 everywhere
        x[cols + c] = c % 256 < 128 ? -1.0f : 1.0f; // token 1: -127 / +127 by block
    }
    const std::vector<double> want = emulate(s, x, n);
    const std::vector<float> got = run_fast(s, x, n, 0, &pool);
    for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-3) << i; // of sums up to 3072
    // Row 0, token 0: 512 columns x 12 x 127 x (1 / 127) x 0.5 = 3072; row 1 its negative.
    EXPECT_NEAR(got[0], 3072.0f, 1e-2f);
    EXPECT_NEAR(got[1], -3072.0f, 1e-2f);
}

} // namespace
} // namespace deepinfer::kernels
