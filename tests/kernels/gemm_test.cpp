// The fast FP8 int8 GEMM (kernels/cpu/gemm_int8.h): its weight requantization against the e4m3 definition,
// and the dispatched kernel against a scalar emulation of the same numerics (int8 activations per 128
// columns, the requantized weights, exact integer sums): the two must agree to F32 rounding, far tighter
// than the fast-vs-ref tolerance the linear harness applies.

#include <algorithm>
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
#include "kernels/cpu/gemm_int8.h"
#include "kernels/cpu/linear.h"
#include "kernels/ops.h"

namespace deepinfer::kernels {
namespace cpu::detail {
GemmQTable emulated_vnni_gemm_table(); // gemm_int8_emulated.cpp
} // namespace cpu::detail
namespace {

float e4m3_magnitude(uint8_t code) {
    const int c = code & 0x7f, ef = c >> 3, mant = c & 7;
    return ef == 0 ? std::ldexp(static_cast<float>(mant), -9) : std::ldexp(8.0f + mant, ef - 10);
}

// Every (max code, code <= max code): the int8 is the value at the step, rounded to nearest, exact in
// the top four binades, within [-127, 127], signed as the code.
TEST(GemmInt8, Fp8RequantizationFollowsTheDefinition) {
    for (int max_code = 0; max_code < 127; ++max_code) {
        const int step = cpu::detail::fp8_requant_step_log2(static_cast<uint8_t>(max_code));
        const float unit = std::ldexp(1.0f, step - 9);
        int largest = 0;
        for (int c = 0; c <= max_code; ++c) {
            for (int sign : {0, 0x80}) {
                const auto code = static_cast<uint8_t>(c | sign);
                const int q = cpu::detail::fp8_requant_code(code, static_cast<uint8_t>(max_code));
                const float v = e4m3_magnitude(code) * (sign ? -1.0f : 1.0f);
                ASSERT_LE(std::abs(q), 127);
                ASSERT_LE(std::abs(q * unit - v), 0.5f * unit) << "code " << c << " max " << max_code;
                if ((c >> 3) + 3 >= (max_code >> 3)) {
                    ASSERT_EQ(q * unit, v) << "code " << c << " max " << max_code;
                }
                largest = std::max(largest, std::abs(q));
            }
        }
        // The step uses the range: the largest code lands in [56, 120].
        EXPECT_GE(largest, max_code < 8 ? 0 : 64) << max_code;
        EXPECT_LE(largest, 120) << max_code;
    }
}

struct Fp8Weight {
    core::Weight w;
    std::vector<uint8_t> data, scale;
};

Fp8Weight random_fp8(int64_t rows, int64_t cols, int bc, std::mt19937* rng) {
    Fp8Weight s;
    s.w.format = core::WeightFormat::kFp8Block;
    s.w.rows = rows;
    s.w.cols = cols;
    s.w.block_rows = 128;
    s.w.block_cols = bc;
    std::uniform_int_distribution<int> byte(0, 255), sc(115, 130);
    s.data.resize(rows * cols);
    for (uint8_t& b : s.data) {
        b = static_cast<uint8_t>(byte(*rng));
        if ((b & 0x7f) == 0x7f) b ^= 1;
    }
    s.scale.resize(s.w.scale_rows() * s.w.scale_cols());
    for (uint8_t& b : s.scale) b = static_cast<uint8_t>(sc(*rng));
    s.w.data = s.data.data();
    s.w.scale = s.scale.data();
    return s;
}

// FP4 e2m1 weights in 32-column groups: random codes, group scales uniform in [lo, hi] (e8m0).
struct Fp4Weight {
    core::Weight w;
    std::vector<uint8_t> data, scale;
};

Fp4Weight random_fp4(int64_t rows, int64_t cols, int lo, int hi, std::mt19937* rng) {
    Fp4Weight s;
    std::uniform_int_distribution<int> byte(0, 255), sc(lo, hi);
    s.data.resize(rows * cols / 2);
    s.scale.resize(rows * cols / 32);
    for (uint8_t& b : s.data) b = static_cast<uint8_t>(byte(*rng));
    for (uint8_t& b : s.scale) b = static_cast<uint8_t>(sc(*rng));
    s.w.format = core::WeightFormat::kFp4Group;
    s.w.rows = rows;
    s.w.cols = cols;
    s.w.block_rows = 1;
    s.w.block_cols = 32;
    s.w.data = s.data.data();
    s.w.scale = s.scale.data();
    return s;
}

// The exact matmul computes every token on its own: a call over 300 tokens (on AVX-512 AMD CPUs the FP8 / FP4
// GEMV in three balanced chunks of 100, linear.cpp; elsewhere the F32 GEMM in chunks of 128) writes, bit for
// bit, what calls over pieces of those tokens write (each piece > kGemvMaxTokens, so every ISA takes the same
// kernel for the whole call and its pieces), and 700 tokens (past one 512-token call) likewise. (Not BF16:
// its GEMV sums a tile of 1-3 tokens in another order than a tile of 4, so where a token falls in its
// chunk can move its last bits; the linear harness holds it to the same tolerance against ref.) F32 with at
// most 64 rows (the mHC `fn` matrices: the GEMV at every token count on AVX-512) likewise.
TEST(GemmExact, EveryTokenIsComputedAsInAnyTokenSplit) {
    core::ThreadPool pool(2);
    std::mt19937 rng(23);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    const int64_t quant_rows = 70, cols = 512;
    const Fp8Weight fp8 = random_fp8(quant_rows, cols, 128, &rng);
    const Fp4Weight fp4s = random_fp4(quant_rows, cols, 118, 124, &rng);
    const core::Weight& fp4 = fp4s.w;
    std::vector<float> f32_data(24 * cols);
    for (float& v : f32_data) v = nd(rng);
    core::Weight f32;
    f32.format = core::WeightFormat::kF32;
    f32.rows = 24;
    f32.cols = cols;
    f32.data = f32_data.data();
    std::vector<cpu::Isa> isas = {cpu::Isa::kAvx2, cpu::Isa::kAvx512};
    for (const core::Weight* w :
         {&fp8.w, static_cast<const core::Weight*>(&fp4), static_cast<const core::Weight*>(&f32)}) {
        const int64_t rows = w->rows;
        for (cpu::Isa isa : isas) {
            if (!cpu::isa_supported(isa)) continue;
            for (const std::vector<int64_t>& pieces :
                 {std::vector<int64_t>{300, 0}, std::vector<int64_t>{37, 113, 150},
                  std::vector<int64_t>{700, 0}, std::vector<int64_t>{512, 9, 179}}) {
                SCOPED_TRACE(std::string(cpu::isa_name(isa)) +
                             (w == &fp4   ? " fp4 "
                              : w == &f32 ? " f32 "
                                          : " fp8 ") +
                             std::to_string(pieces[0]));
                int64_t n = 0;
                for (int64_t p : pieces) n += p;
                std::vector<float> x(n * cols);
                for (float& v : x) v = nd(rng);
                std::vector<float> whole(n * rows), parts(n * rows, -7.0f);
                cpu::matmul_isa(
                    MatmulArgs{x.data(), n, cols, w, 0, rows, whole.data(), rows, &pool, Numerics::kExact},
                    isa);
                int64_t t0 = 0;
                for (int64_t p : pieces) {
                    if (p == 0) continue;
                    cpu::matmul_isa(MatmulArgs{x.data() + t0 * cols, p, cols, w, 0, rows,
                                               parts.data() + t0 * rows, rows, &pool, Numerics::kExact},
                                    isa);
                    t0 += p;
                }
                // A split of one piece is the whole call again: compare it with a 2-piece split instead.
                if (pieces.back() == 0) {
                    const int64_t h = n / 2 + 5;
                    cpu::matmul_isa(MatmulArgs{x.data(), h, cols, w, 0, rows, parts.data(), rows, &pool,
                                               Numerics::kExact},
                                    isa);
                    cpu::matmul_isa(MatmulArgs{x.data() + h * cols, n - h, cols, w, 0, rows,
                                               parts.data() + h * rows, rows, &pool, Numerics::kExact},
                                    isa);
                }
                int64_t differ = 0;
                for (int64_t i = 0; i < n * rows; ++i) differ += whole[i] != parts[i];
                EXPECT_EQ(differ, 0);
            }
        }
    }
}

// The fast numerics, scalar: per token and 128 columns, x ~ qx * (amax / 127) (nearest even); per row and
// 128 columns the int8 values q and scale that block(r, kb, q) gives; the integer sums exact, the rest in
// double.
template <typename Block>
std::vector<double> emulate_blocks(const std::vector<float>& x, int64_t n, int64_t ldx, int64_t cols,
                                   int64_t r0, int64_t r1, const Block& block) {
    std::vector<double> y(n * (r1 - r0), 0.0);
    for (int64_t i = 0; i < n; ++i) {
        for (int64_t kb = 0; kb < cols / 128; ++kb) {
            const float* xb = x.data() + i * ldx + kb * 128;
            float amax = 0.0f;
            for (int c = 0; c < 128; ++c) amax = std::max(amax, std::abs(xb[c]));
            const float inv = amax > 0.0f ? 127.0f / amax : 0.0f, xs = amax / 127.0f;
            int32_t qx[128];
            for (int c = 0; c < 128; ++c) qx[c] = static_cast<int32_t>(std::nearbyint(xb[c] * inv));
            for (int64_t r = r0; r < r1; ++r) {
                int8_t q[128];
                const double ws = block(r, kb, q);
                int64_t sum = 0;
                for (int c = 0; c < 128; ++c) sum += qx[c] * q[c];
                y[i * (r1 - r0) + r - r0] += static_cast<double>(sum) * ws * xs;
            }
        }
    }
    return y;
}

// FP8: w ~ qw * 2^(step - 9) * block scale (fp8_requant_code).
std::vector<double> emulate(const Fp8Weight& s, const std::vector<float>& x, int64_t n, int64_t ldx,
                            int64_t r0, int64_t r1) {
    const core::Weight& w = s.w;
    return emulate_blocks(x, n, ldx, w.cols, r0, r1, [&](int64_t r, int64_t kb, int8_t* q) {
        const uint8_t* wb = s.data.data() + r * w.cols + kb * 128;
        uint8_t max_code = 0;
        for (int c = 0; c < 128; ++c) max_code = std::max<uint8_t>(max_code, wb[c] & 0x7f);
        for (int c = 0; c < 128; ++c) q[c] = cpu::detail::fp8_requant_code(wb[c], max_code);
        const uint8_t sb = s.scale[r / 128 * w.scale_cols() + kb * 128 / w.block_cols];
        return std::ldexp(1.0, sb - 127) * std::ldexp(1.0, cpu::detail::fp8_requant_step_log2(max_code) - 9);
    });
}

// y [n, ldy] (columns [0, out) for rows r0..) against want [n, out]: NMSE < 1e-11 per output row (rows may
// differ in magnitude by many binades), an all-zero row exactly, and nothing written past column out.
void expect_rows_match(const std::vector<float>& y, int64_t ldy, const std::vector<double>& want, int64_t n,
                       int64_t out, int64_t r0, double tol = 1e-11) {
    std::vector<double> num(out, 0.0), den(out, 0.0);
    int64_t past = 0;
    for (int64_t i = 0; i < n; ++i) {
        for (int64_t r = 0; r < out; ++r) {
            const double wv = want[i * out + r], d = y[i * ldy + r] - wv;
            num[r] += d * d;
            den[r] += wv * wv;
        }
        for (int64_t r = out; r < ldy; ++r) past += y[i * ldy + r] != -7.0f;
    }
    for (int64_t r = 0; r < out; ++r) {
        if (den[r] == 0.0)
            EXPECT_EQ(num[r], 0.0) << "row " << r0 + r;
        else
            EXPECT_LT(num[r] / den[r], tol) << "row " << r0 + r;
    }
    EXPECT_EQ(past, 0);
}

// The dispatched fast matmul of w (rows [rows / 5, rows), n tokens of Gaussian x, strided x and y) against
// emulate(x, ldx, r0, r1).
template <typename Emulate>
void check_fast_matmul(const core::Weight& w, int64_t n, core::ThreadPool* pool, std::mt19937* rng,
                       const Emulate& emulate, double tol = 1e-11) {
    std::normal_distribution<float> nd(0.0f, 1.0f);
    const int64_t ldx = w.cols + 3, r0 = w.rows / 5, r1 = w.rows, out = r1 - r0, ldy = out + 2;
    std::vector<float> x(n * ldx);
    for (float& v : x) v = nd(*rng);
    std::vector<float> y(n * ldy, -7.0f);
    cpu::matmul_isa(MatmulArgs{x.data(), n, ldx, &w, r0, r1, y.data(), ldy, pool, Numerics::kFast},
                    cpu::Isa::kAvx512);
    expect_rows_match(y, ldy, emulate(x, ldx, r0, r1), n, out, r0, tol);
}

// The int8 GEMMs' tests: where the CPU has AMX-BF16, FP8 and BF16 weights at up to kAmxBf16MaxTokens take
// gemm_amx_bf16.h instead (its own test below); this switches it off for the test's scope.
struct AmxBf16Off {
    AmxBf16Off() { cpu::detail::force_amx_bf16_off(0); }
    ~AmxBf16Off() { cpu::detail::force_amx_bf16_off(-1); }
    AmxBf16Off(const AmxBf16Off&) = delete;
    AmxBf16Off& operator=(const AmxBf16Off&) = delete;
};

TEST(GemmInt8, Fp8GemmMatchesItsScalarEmulation) {
    if (!cpu::fp8_int8_supported() || !cpu::isa_supported(cpu::Isa::kAvx512))
        GTEST_SKIP() << "no AVX-512 VNNI + VBMI";
    const AmxBf16Off int8_only;
    core::ThreadPool pool(2);
    std::mt19937 rng(21);
    struct Case {
        int64_t rows, cols;
        int bc;
        int64_t n;
    };
    // Odd row counts (microtile and panel tails), token counts past one 64-token group and not multiples
    // of 16 (8 mod 16: the 8-token ymm tail, alone at 72, after 3 vectors at 56), 256-column blocks, a row
    // range inside the weight. At least 40 tokens (>= kInt8OverBf16Tokens: below, CPUs with AVX-512 BF16
    // take the BF16 GEMV instead, linear.cpp); the FP4 test covers the 1- and 2-vector tiles.
    for (const Case& c :
         {Case{7, 128, 128, 41}, Case{50, 256, 128, 47}, Case{130, 512, 256, 100}, Case{97, 384, 128, 512},
          Case{61, 1024, 128, 64}, Case{30, 256, 128, 56}, Case{19, 128, 128, 72}}) {
        SCOPED_TRACE(std::to_string(c.rows) + "x" + std::to_string(c.cols) + " n=" + std::to_string(c.n));
        const Fp8Weight s = random_fp8(c.rows, c.cols, c.bc, &rng);
        check_fast_matmul(s.w, c.n, &pool, &rng,
                          [&](const std::vector<float>& x, int64_t ldx, int64_t r0, int64_t r1) {
                              return emulate(s, x, c.n, ldx, r0, r1);
                          });
    }
}

// BF16 weights: Gaussian values whose scale changes from row to row by up to 2^±20 (so the per-block
// scale, not a shared one, is what keeps them), with an all-zero 128-column block and a block of
// subnormals in the first rows.
struct Bf16Weight {
    core::Weight w;
    std::vector<uint16_t> data;
};

Bf16Weight random_bf16(int64_t rows, int64_t cols, std::mt19937* rng) {
    Bf16Weight s;
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::uniform_int_distribution<int> ex(-20, 20);
    s.data.resize(rows * cols);
    for (int64_t r = 0; r < rows; ++r) {
        const float row_scale = std::ldexp(1.0f, ex(*rng));
        for (int64_t c = 0; c < cols; ++c) s.data[r * cols + c] = core::f32_to_bf16(nd(*rng) * row_scale);
    }
    if (rows > 1 && cols >= 256) {
        std::fill_n(s.data.begin() + 128, 128, uint16_t{0});
        for (int64_t c = 0; c < 128; ++c) s.data[cols + c] = core::f32_to_bf16(nd(*rng) * 1e-39f);
    }
    s.w.format = core::WeightFormat::kBF16;
    s.w.rows = rows;
    s.w.cols = cols;
    s.w.data = s.data.data();
    return s;
}

// The scalar definition: each value within half a step of the scale (amax / 127), the largest magnitude at
// 127, an all-zero block all zero.
TEST(GemmInt8, Bf16RequantizationFollowsTheDefinition) {
    std::mt19937 rng(24);
    const Bf16Weight s = random_bf16(40, 256, &rng);
    for (int64_t r = 0; r < 40; ++r) {
        for (int64_t kb = 0; kb < 2; ++kb) {
            const uint16_t* w = s.data.data() + r * 256 + kb * 128;
            int8_t q[128];
            const float scale = cpu::detail::bf16_requant_block(w, q);
            float amax = 0.0f;
            int largest = 0;
            for (int c = 0; c < 128; ++c) {
                const float v = core::bf16_to_f32(w[c]);
                amax = std::max(amax, std::abs(v));
                if (r == 1 && kb == 0) { // subnormals: below kBf16RequantMin, all zero
                    ASSERT_EQ(q[c], 0) << c;
                    continue;
                }
                ASSERT_LE(std::abs(static_cast<double>(q[c]) * scale - v), 0.5001 * scale) << r << " " << c;
                largest = std::max(largest, std::abs(static_cast<int>(q[c])));
            }
            EXPECT_EQ(scale, amax / 127.0f);
            EXPECT_EQ(largest, amax >= cpu::detail::kBf16RequantMin ? 127 : 0) << r << " " << kb;
        }
    }
}

// BF16: the weights by bf16_requant_block.
std::vector<double> emulate_bf16(const Bf16Weight& s, const std::vector<float>& x, int64_t n, int64_t ldx,
                                 int64_t r0, int64_t r1) {
    const int64_t cols = s.w.cols;
    return emulate_blocks(x, n, ldx, cols, r0, r1, [&](int64_t r, int64_t kb, int8_t* q) {
        return static_cast<double>(cpu::detail::bf16_requant_block(s.data.data() + r * cols + kb * 128, q));
    });
}

TEST(GemmInt8, Bf16GemmMatchesItsScalarEmulation) {
    if (!cpu::fp8_int8_supported() || !cpu::isa_supported(cpu::Isa::kAvx512))
        GTEST_SKIP() << "no AVX-512 VNNI + VBMI";
    const AmxBf16Off int8_only;
    core::ThreadPool pool(2);
    std::mt19937 rng(25);
    struct Case {
        int64_t rows, cols, n;
    };
    // From kInt8OverBf16Tokens (below it, CPUs with AVX-512 BF16 take the BF16 GEMV); microtile and panel
    // tails, the 8-token tail, past one 64-token group, a row range inside the weight.
    for (const Case& c : {Case{7, 128, 41}, Case{50, 256, 47}, Case{130, 512, 100}, Case{97, 384, 512},
                          Case{61, 1024, 64}, Case{30, 256, 56}, Case{19, 128, 72}, Case{49, 256, 28}}) {
        SCOPED_TRACE(std::to_string(c.rows) + "x" + std::to_string(c.cols) + " n=" + std::to_string(c.n));
        const Bf16Weight s = random_bf16(c.rows, c.cols, &rng);
        check_fast_matmul(s.w, c.n, &pool, &rng,
                          [&](const std::vector<float>& x, int64_t ldx, int64_t r0, int64_t r1) {
                              return emulate_bf16(s, x, c.n, ldx, r0, r1);
                          });
    }
}

// The AMX-BF16 GEMM (gemm_amx_bf16.h) against its definition: the activations rounded to BF16 (nearest
// even), the weights exact (FP8: e4m3 x block scale, subnormal codes included; BF16 as stored, subnormal
// values read as zero, as the tiles read them), the products summed in double. The tiles sum in F32 in
// their own order, hence NMSE < 1e-9 per row: panel columns paired with the wrong activation columns give
// ~1, activations truncated instead of rounded ~1e-5. Token counts 9..32 (the one or two 16-token tile
// groups), rows off the 32-row panels, columns off the 256-column passes (a last pass of 128), 256-column
// FP8 blocks, a row range inside the weight. An FP8 weight with a block scale outside
// amx_bf16_fp8_scale_ok takes the int8 GEMM instead (its emulation then holds to 1e-11).
double bf16_value(uint16_t b) {
    const float f = core::bf16_to_f32(b);
    return std::abs(f) < 0x1p-126f ? 0.0 : static_cast<double>(f);
}

template <typename WeightAt>
std::vector<double> emulate_amx_bf16(const std::vector<float>& x, int64_t n, int64_t ldx, int64_t cols,
                                     int64_t r0, int64_t r1, const WeightAt& weight_at) {
    std::vector<double> y(n * (r1 - r0), 0.0);
    for (int64_t i = 0; i < n; ++i)
        for (int64_t r = r0; r < r1; ++r) {
            double sum = 0.0;
            for (int64_t c = 0; c < cols; ++c)
                sum += bf16_value(core::f32_to_bf16(x[i * ldx + c])) * weight_at(r, c);
            y[i * (r1 - r0) + r - r0] = sum;
        }
    return y;
}

TEST(GemmAmxBf16, Fp8AndBf16MatchTheirScalarEmulation) {
    if (!cpu::amx_bf16_supported()) GTEST_SKIP() << "no AMX-BF16";
    ASSERT_TRUE(cpu::detail::amx_bf16_enabled());
    core::ThreadPool pool(2);
    std::mt19937 rng(31);
    struct Case {
        int64_t rows, cols;
        int bc;
        int64_t n;
    };
    for (const Case& c :
         {Case{7, 128, 128, 9}, Case{50, 256, 128, 16}, Case{130, 640, 256, 32}, Case{97, 384, 128, 17},
          Case{61, 1024, 128, 31}, Case{40, 4096, 128, 24}, Case{300, 512, 128, 32}}) {
        SCOPED_TRACE(std::to_string(c.rows) + "x" + std::to_string(c.cols) + " n=" + std::to_string(c.n));
        const Fp8Weight f = random_fp8(c.rows, c.cols, c.bc, &rng);
        check_fast_matmul(
            f.w, c.n, &pool, &rng,
            [&](const std::vector<float>& x, int64_t ldx, int64_t r0, int64_t r1) {
                return emulate_amx_bf16(x, c.n, ldx, c.cols, r0, r1, [&](int64_t r, int64_t col) {
                    const uint8_t sb = f.scale[r / 128 * f.w.scale_cols() + col / c.bc];
                    return static_cast<double>(core::fp8_e4m3_to_f32(f.data[r * c.cols + col])) *
                           std::ldexp(1.0, sb - 127);
                });
            },
            1e-9);
        const Bf16Weight b = random_bf16(c.rows, c.cols, &rng);
        check_fast_matmul(
            b.w, c.n, &pool, &rng,
            [&](const std::vector<float>& x, int64_t ldx, int64_t r0, int64_t r1) {
                return emulate_amx_bf16(x, c.n, ldx, c.cols, r0, r1, [&](int64_t r, int64_t col) {
                    return bf16_value(b.data[r * c.cols + col]);
                });
            },
            1e-9);
    }
    // One block scale out of range (2^-118: e4m3 subnormals would be BF16 subnormals): the int8 GEMM.
    Fp8Weight f = random_fp8(64, 256, 128, &rng);
    f.scale[1] = 9;
    check_fast_matmul(f.w, 20, &pool, &rng,
                      [&](const std::vector<float>& x, int64_t ldx, int64_t r0, int64_t r1) {
                          return emulate(f, x, 20, ldx, r0, r1);
                      });
}

// FP4 e2m1 (group 32): 2 x e2m1 is an exact int8, so the fast GEMM is the exact weights times the int8
// activations. Scales within 2^3 per 128 columns take the folded one-sum kernel, wider ones the per-group
// kernel; both against the same double-precision emulation.
TEST(GemmInt8, Fp4GemmFoldedAndPerGroupMatchTheirScalarEmulation) {
    if (!cpu::fp8_int8_supported() || !cpu::isa_supported(cpu::Isa::kAvx512))
        GTEST_SKIP() << "no AVX-512 VNNI + VBMI";
    core::ThreadPool pool(2);
    std::mt19937 rng(22);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    struct Case {
        int64_t rows, cols, n;
        int lo_scale, hi_scale;
    };
    for (const Case& c :
         {Case{50, 256, 17, 120, 123}, Case{97, 512, 100, 119, 122}, Case{13, 128, 9, 110, 130},
          Case{61, 384, 64, 100, 140}, Case{48, 256, 33, 0, 3}, Case{25, 256, 24, 119, 121},
          Case{31, 128, 72, 100, 140}, Case{20, 256, 56, 120, 122}, Case{40, 256, 6, 119, 121},
          Case{70, 384, 8, 100, 140}}) {
        SCOPED_TRACE(std::to_string(c.rows) + "x" + std::to_string(c.cols) + " n=" + std::to_string(c.n) +
                     " scales " + std::to_string(c.lo_scale) + ".." + std::to_string(c.hi_scale));
        const Fp4Weight ws = random_fp4(c.rows, c.cols, c.lo_scale, c.hi_scale, &rng);
        const core::Weight& w = ws.w;
        const int64_t ldx = c.cols + 1, r0 = c.rows / 3, r1 = c.rows, out = r1 - r0, ldy = out + 1;
        std::vector<float> x(c.n * ldx);
        for (float& v : x) v = nd(rng);
        std::vector<float> y(c.n * ldy, -7.0f);
        MatmulArgs a{x.data(), c.n, ldx, &w, r0, r1, y.data(), ldy, &pool, Numerics::kFast};
        cpu::matmul_isa(a, cpu::Isa::kAvx512);
        double num = 0.0, den = 0.0;
        int64_t past = 0;
        for (int64_t i = 0; i < c.n; ++i) {
            for (int64_t r = r0; r < r1; ++r) {
                double want = 0.0;
                for (int64_t kb = 0; kb < c.cols / 128; ++kb) {
                    const float* xb = x.data() + i * ldx + kb * 128;
                    float amax = 0.0f;
                    for (int k = 0; k < 128; ++k) amax = std::max(amax, std::abs(xb[k]));
                    const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
                    double sum = 0.0;
                    for (int k = 0; k < 128; ++k)
                        sum += std::nearbyint(xb[k] * inv) * static_cast<double>(w.at(r, kb * 128 + k));
                    want += sum * (amax / 127.0f);
                }
                const double d = y[i * ldy + r - r0] - want;
                num += d * d;
                den += want * want;
            }
            for (int64_t r = out; r < ldy; ++r) past += y[i * ldy + r] != -7.0f;
        }
        EXPECT_LT(num / den, 1e-11);
        EXPECT_EQ(past, 0);
    }
}

// The int8 GEMMs' code with VNNI / VBMI emulated (gemm_int8_emulated.cpp: exact AVX-512 BW sequences), so it
// runs on every AVX-512 CPU, including those where the tests above skip (no VNNI: the dispatcher never takes
// the int8 GEMM there). Activations quantized here by the definition (int8 per token per 128 columns, stored
// + 128 as u8, [cols / 4, n_pad, 4]); FP4 with folded, per-group and mixed panels (48-row panels whose rows
// differ), FP8 with 128- and 256-column blocks and rows of every magnitude range; row ranges with microtile
// and panel tails, token counts with the 8-token ymm tail and past one 64-token group. Against the
// double-precision definitions above, and, where the CPU has VNNI + VBMI, bit for bit against the real
// instructions.
// The fast GEMMs' output rows go to the pool in chunks of whole 48-row panels (linear.cpp's matmul_int8),
// so every panel holds the same rows on any pool: an FP4 panel's kernel depends on its rows (one that mixes
// folded and unfolded rows runs the per-group kernel), so a split inside a panel could change a row's last
// bits. Pools of 1, 2 and 3 threads write the same bits, on FP4 weights with mixed and whole folded panels
// and on FP8, for row counts that are not a multiple of 48.
TEST(GemmInt8, OutputDoesNotDependOnThePool) {
    if (!cpu::fp8_int8_supported() || !cpu::isa_supported(cpu::Isa::kAvx512))
        GTEST_SKIP() << "no AVX-512 VNNI + VBMI";
    std::mt19937 rng(31);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    const int64_t cols = 512;
    for (const int64_t rows : {int64_t{200}, int64_t{1000}}) {
        // Scales within 2^2 (every row folds) except one row in 97, whose first group is 2^10 smaller: the
        // panels holding such a row are mixed, the others fold whole.
        Fp4Weight fp4s = random_fp4(rows, cols, 120, 122, &rng);
        for (int64_t r = 5; r < rows; r += 97) fp4s.scale[r * (cols / 32)] = 110;
        const core::Weight& fp4 = fp4s.w;
        const Fp8Weight fp8 = random_fp8(rows, cols, 128, &rng);
        const Bf16Weight bf16 = random_bf16(rows, cols, &rng);
        for (const core::Weight* w : {static_cast<const core::Weight*>(&fp4), &fp8.w, &bf16.w}) {
            for (const int64_t n : {int64_t{24}, int64_t{72}}) {
                if (w == &bf16.w && n < cpu::kInt8OverBf16Tokens) continue; // the BF16 GEMV below
                SCOPED_TRACE(std::string(w == &fp4     ? "fp4 "
                                         : w == &fp8.w ? "fp8 "
                                                       : "bf16 ") +
                             std::to_string(rows) + " rows, n=" + std::to_string(n));
                std::vector<float> x(n * cols);
                for (float& v : x) v = nd(rng);
                std::vector<float> want;
                for (const int threads : {1, 2, 3}) {
                    core::ThreadPool pool(threads);
                    std::vector<float> y(n * rows, -7.0f);
                    cpu::matmul_isa(
                        MatmulArgs{x.data(), n, cols, w, 0, rows, y.data(), rows, &pool, Numerics::kFast},
                        cpu::Isa::kAvx512);
                    if (threads == 1)
                        want = y;
                    else
                        EXPECT_EQ(y, want) << threads << " threads";
                }
            }
        }
    }
}

// The emulated kernels' table, the real one where the CPU has VNNI + VBMI (else empty), and whether it has.
struct VnniTables {
    cpu::detail::GemmQTable emu, hw;
    bool real;
};
VnniTables vnni_tables() {
    const bool real = cpu::fp8_int8_supported();
    return {cpu::detail::emulated_vnni_gemm_table(),
            real ? cpu::detail::avx512_vnni_gemm_table() : cpu::detail::GemmQTable{}, real};
}

// The GEMMs' activations by their definition (gemm_int8.h): int8 per token per 128 columns (scale
// amax / 127, nearest even) in [cols / 4, n_pad, 4], scales [cols / 128, n_pad], seeds [cols / 128, 5,
// n_pad] (-128 x each 32-column group's sum, then the block's); tokens past n zero.
struct QuantizedActs {
    std::vector<int8_t> xq;
    std::vector<float> xs;
    std::vector<int32_t> seed;
};

QuantizedActs quantize_by_definition(const std::vector<float>& x, int64_t n, int64_t ldx, int64_t cols,
                                     int64_t n_pad) {
    QuantizedActs q;
    q.xq.assign(cols * n_pad, 0);
    q.xs.assign(cols / 128 * n_pad, 0.0f);
    q.seed.assign(5 * (cols / 128) * n_pad, 0);
    for (int64_t i = 0; i < n; ++i) {
        for (int64_t kb = 0; kb < cols / 128; ++kb) {
            const float* xb = x.data() + i * ldx + kb * 128;
            float amax = 0.0f;
            for (int k = 0; k < 128; ++k) amax = std::max(amax, std::abs(xb[k]));
            const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
            q.xs[kb * n_pad + i] = amax / 127.0f;
            int32_t total = 0;
            for (int k = 0; k < 128; ++k) {
                const int64_t col = kb * 128 + k;
                const auto v = static_cast<int32_t>(std::nearbyint(xb[k] * inv));
                q.xq[((col / 4) * n_pad + i) * 4 + col % 4] = static_cast<int8_t>(v);
                q.seed[(kb * 5 + k / 32) * n_pad + i] -= 128 * v;
                total -= 128 * v;
            }
            q.seed[(kb * 5 + 4) * n_pad + i] = total;
        }
    }
    return q;
}

// One call of an emulated GEMM kernel: output rows [rows / 3, rows) of a rows x cols weight for n tokens, one
// guard column past each output row (ldy = out + 1), normal activations quantized by the definition.
struct EmulatedCall {
    int64_t ldx, r0, r1, out, ldy, n_pad;
    std::vector<float> x;
    QuantizedActs q;
};
EmulatedCall emulated_call(int64_t rows, int64_t cols, int64_t n, std::mt19937& rng,
                           std::normal_distribution<float>& nd) {
    EmulatedCall e;
    e.ldx = cols;
    e.r0 = rows / 3;
    e.r1 = rows;
    e.out = e.r1 - e.r0;
    e.ldy = e.out + 1;
    e.n_pad = (n + cpu::detail::kGemmQPad - 1) / cpu::detail::kGemmQPad * cpu::detail::kGemmQPad;
    e.x.resize(n * e.ldx);
    for (float& v : e.x) v = nd(rng);
    e.q = quantize_by_definition(e.x, n, e.ldx, cols, e.n_pad);
    return e;
}

// The kernels' quantize (emulated build, and the real one where the CPU has VNNI + VBMI) writes exactly the
// definition's bytes, scales and seeds, for token counts with padding and for a range of 8-token groups.
TEST(GemmInt8Emulated, QuantizeMatchesTheDefinition) {
    if (!cpu::isa_supported(cpu::Isa::kAvx512)) GTEST_SKIP() << "no AVX-512";
    const auto [emu, hw, real] = vnni_tables();
    std::mt19937 rng(27);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    for (const int64_t n : {int64_t{1}, int64_t{9}, int64_t{24}, int64_t{41}}) {
        for (const int64_t cols : {int64_t{128}, int64_t{512}}) {
            SCOPED_TRACE("n=" + std::to_string(n) + " cols=" + std::to_string(cols));
            const int64_t ldx = cols + 3, n_pad = (n + 7) / 8 * 8;
            std::vector<float> x(n * ldx);
            for (float& v : x) v = nd(rng) * (1.0f + static_cast<float>(&v - x.data()) * 0.01f);
            if (n > 2)
                for (int64_t k = 0; k < cols; ++k) x[2 * ldx + k] = 0.0f; // an all-zero token
            const QuantizedActs want = quantize_by_definition(x, n, ldx, cols, n_pad);
            core::Weight w;
            w.cols = cols;
            const MatmulArgs a{x.data(), n, ldx, &w, 0, 1, nullptr, 1, nullptr, Numerics::kFast};
            for (const cpu::detail::GemmQTable* t : {&emu, &hw}) {
                if (t->quantize == nullptr) continue;
                SCOPED_TRACE(t == &emu ? "emulated" : "real");
                QuantizedActs got{std::vector<int8_t>(want.xq.size(), 99),
                                  std::vector<float>(want.xs.size(), 99.0f),
                                  std::vector<int32_t>(want.seed.size(), 99)};
                // Two calls over the 8-token groups, as the pool splits them.
                const int64_t mid = n_pad / 16 * 8;
                t->quantize(a, 0, mid, n_pad, got.xq.data(), got.xs.data(), got.seed.data());
                t->quantize(a, mid, n_pad, n_pad, got.xq.data(), got.xs.data(), got.seed.data());
                EXPECT_EQ(got.xq, want.xq);
                EXPECT_EQ(got.xs, want.xs);
                EXPECT_EQ(got.seed, want.seed);
            }
        }
    }
}

TEST(GemmInt8Emulated, Fp4AndFp8KernelsMatchTheirScalarDefinitions) {
    if (!cpu::isa_supported(cpu::Isa::kAvx512)) GTEST_SKIP() << "no AVX-512";
    const auto [emu, hw, real] = vnni_tables();
    std::mt19937 rng(23);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::uniform_int_distribution<int> byte(0, 255);
    struct Case {
        bool fp4;
        int64_t rows, cols, n;
        int lo_scale, hi_scale; // FP4 group scales (FP8: block size lo_scale)
    };
    for (const Case& c : {Case{true, 50, 256, 24, 119, 121}, Case{true, 97, 512, 9, 120, 123},
                          Case{true, 61, 384, 72, 100, 140}, Case{true, 130, 256, 17, 118, 125},
                          Case{true, 7, 128, 100, 0, 3}, Case{true, 49, 256, 40, 110, 126},
                          Case{true, 48, 1024, 128, 119, 122}, Case{false, 50, 256, 24, 128, 0},
                          Case{false, 130, 512, 41, 256, 0}, Case{false, 19, 384, 72, 128, 0}}) {
        SCOPED_TRACE(std::string(c.fp4 ? "fp4 " : "fp8 ") + std::to_string(c.rows) + "x" +
                     std::to_string(c.cols) + " n=" + std::to_string(c.n) + " " + std::to_string(c.lo_scale) +
                     ".." + std::to_string(c.hi_scale));
        Fp8Weight s; // FP8: random_fp8; FP4: the same holder, e2m1 bytes and group scales
        if (c.fp4) {
            std::uniform_int_distribution<int> sc(c.lo_scale, c.hi_scale);
            s.data.resize(c.rows * c.cols / 2);
            s.scale.resize(c.rows * c.cols / 32);
            for (uint8_t& b : s.data) b = static_cast<uint8_t>(byte(rng));
            for (uint8_t& b : s.scale) b = static_cast<uint8_t>(sc(rng));
            s.w.format = core::WeightFormat::kFp4Group;
            s.w.rows = c.rows;
            s.w.cols = c.cols;
            s.w.block_rows = 1;
            s.w.block_cols = 32;
            s.w.data = s.data.data();
            s.w.scale = s.scale.data();
        } else {
            s = random_fp8(c.rows, c.cols, c.lo_scale, &rng);
            s.w.data = s.data.data();
            s.w.scale = s.scale.data();
            // Rows of every magnitude range, so every requantization step's table is used.
            for (int64_t r = 0; r < c.rows; ++r) {
                const int lim = byte(rng) % 127;
                for (int64_t k = 0; k < c.cols; ++k) {
                    uint8_t& b = s.data[r * c.cols + k];
                    b = static_cast<uint8_t>((b & 0x80) | ((b & 0x7f) % (lim + 1)));
                }
            }
        }
        const core::Weight& w = s.w;
        const EmulatedCall e = emulated_call(c.rows, c.cols, c.n, rng, nd);
        const auto& [ldx, r0, r1, out, ldy, n_pad, x, q] = e;
        const std::vector<int8_t>& xq = q.xq;
        std::vector<double> want(c.n * out, 0.0);
        if (c.fp4) {
            for (int64_t i = 0; i < c.n; ++i)
                for (int64_t r = r0; r < r1; ++r)
                    for (int64_t kb = 0; kb < c.cols / 128; ++kb) {
                        double sum = 0.0;
                        for (int64_t col = kb * 128; col < kb * 128 + 128; ++col)
                            sum +=
                                xq[((col / 4) * n_pad + i) * 4 + col % 4] * static_cast<double>(w.at(r, col));
                        want[i * out + r - r0] += sum * q.xs[kb * n_pad + i];
                    }
        } else {
            want = emulate(s, x, c.n, ldx, r0, r1);
        }
        std::vector<float> scratch(cpu::detail::int8_scratch_floats(n_pad));
        std::vector<float> y(c.n * ldy, -7.0f);
        MatmulArgs a{x.data(), c.n, ldx, &w, r0, r1, y.data(), ldy, nullptr, Numerics::kFast};
        (c.fp4 ? emu.fp4 : emu.fp8)(a, 0, out, xq.data(), q.xs.data(), q.seed.data(), n_pad, scratch.data());
        double num = 0.0, den = 0.0;
        int64_t past = 0;
        for (int64_t i = 0; i < c.n; ++i) {
            for (int64_t r = 0; r < out; ++r) {
                const double d = y[i * ldy + r] - want[i * out + r];
                num += d * d;
                den += want[i * out + r] * want[i * out + r];
            }
            past += y[i * ldy + out] != -7.0f;
        }
        EXPECT_LT(num / den, 1e-11);
        EXPECT_EQ(past, 0);
        if (real) {
            std::vector<float> y_hw(c.n * ldy, -7.0f);
            a.y = y_hw.data();
            (c.fp4 ? hw.fp4 : hw.fp8)(a, 0, out, xq.data(), q.xs.data(), q.seed.data(), n_pad,
                                      scratch.data());
            EXPECT_EQ(std::memcmp(y.data(), y_hw.data(), y.size() * sizeof(float)), 0);
        }
    }
}

// The AMX table (FP8, BF16 and FP4 through tiles) against the VNNI one, bit for bit: the same activations in
// one buffer laid out as matmul_int8's (xq, xs, seeds: the tile loads of a last group of fewer than 16 tokens
// read up to 32 bytes past xq's end, into xs), row counts that are not multiples of 16 and ranges inside the
// weight, token counts of a partial 16 (8 mod 16) and of an odd number of 16s, 256-column FP8 blocks. The
// scratch is dirtied first so stale panel rows past a range's end would show.
TEST(GemmInt8Amx, Fp8Bf16AndFp4MatchVnniBitForBit) {
    if (!cpu::amx_supported()) GTEST_SKIP() << "no AMX (or DEEPINFER_AMX=0)";
    const cpu::detail::GemmQTable vnni = cpu::detail::avx512_vnni_gemm_table();
    const cpu::detail::GemmQTable amx = cpu::detail::avx512_amx_gemm_table();
    std::mt19937 rng(31);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    struct Case {
        int64_t rows, cols;
        int bc;
        int64_t n;
    };
    int64_t checked = 0;
    for (const Case& c :
         {Case{7, 128, 128, 16}, Case{50, 256, 128, 24}, Case{130, 512, 256, 33}, Case{97, 384, 128, 48},
          Case{61, 1024, 128, 72}, Case{48, 256, 128, 9}, Case{19, 128, 128, 128}, Case{200, 256, 128, 1}}) {
        SCOPED_TRACE(std::to_string(c.rows) + "x" + std::to_string(c.cols) + " n=" + std::to_string(c.n));
        const Fp8Weight f8 = random_fp8(c.rows, c.cols, c.bc, &rng);
        const Bf16Weight b16 = random_bf16(c.rows, c.cols, &rng);
        // FP4 whose group scales fold (the tile kernel) and whose scales often do not (per-group VNNI
        // microkernel on the AMX variant's column-order panel).
        const Fp4Weight f4 = random_fp4(c.rows, c.cols, 120, 122, &rng);
        const Fp4Weight f4_mixed = random_fp4(c.rows, c.cols, 100, 140, &rng);
        const int64_t ldx = c.cols + 3, r0 = c.rows / 3, out = c.rows - r0, ldy = out + 1;
        const int64_t n_pad = (c.n + 7) / 8 * 8, nkb = c.cols / 128;
        std::vector<float> x(c.n * ldx);
        for (float& v : x) v = nd(rng);
        std::vector<float> buf(static_cast<size_t>(cpu::detail::gemm_q8_act_floats(n_pad, c.cols)));
        auto* xq = reinterpret_cast<int8_t*>(buf.data());
        float* xs = buf.data() + c.cols * n_pad / 4;
        auto* seed = reinterpret_cast<int32_t*>(xs + nkb * n_pad);
        const struct {
            const core::Weight* w;
            cpu::detail::GemmQ8Fn vnni, amx;
            const char* name;
        } kinds[] = {{&f8.w, vnni.fp8, amx.fp8, "fp8"},
                     {&b16.w, vnni.bf16, amx.bf16, "bf16"},
                     {&f4.w, vnni.fp4, amx.fp4, "fp4 folded"},
                     {&f4_mixed.w, vnni.fp4, amx.fp4, "fp4 mixed scales"}};
        for (const auto& k : kinds) {
            SCOPED_TRACE(k.name);
            MatmulArgs a{x.data(), c.n, ldx, k.w, r0, c.rows, nullptr, ldy, nullptr, Numerics::kFast};
            vnni.quantize(a, 0, n_pad, n_pad, xq, xs, seed);
            std::vector<float> y_vnni(c.n * ldy, -7.0f), y_amx(c.n * ldy, -7.0f);
            std::vector<float> scratch(cpu::detail::int8_scratch_floats(n_pad), 3.0f);
            a.y = y_vnni.data();
            k.vnni(a, 0, out, xq, xs, seed, n_pad, scratch.data());
            std::fill(scratch.begin(), scratch.end(), 5.0f);
            a.y = y_amx.data();
            k.amx(a, 0, out, xq, xs, seed, n_pad, scratch.data());
            EXPECT_EQ(std::memcmp(y_vnni.data(), y_amx.data(), y_vnni.size() * sizeof(float)), 0);
            int64_t nonzero = 0;
            for (int64_t i = 0; i < c.n; ++i) {
                EXPECT_EQ(y_amx[i * ldy + out], -7.0f) << "guard column written, token " << i;
                for (int64_t r = 0; r < out; ++r) nonzero += y_amx[i * ldy + r] != 0.0f;
            }
            EXPECT_GT(nonzero, c.n * out / 2); // a real product, not two equal fills
            ++checked;
        }
    }
    EXPECT_EQ(checked, 32);
}

// The BF16 GEMM likewise: the emulated kernel against emulate_bf16, and bit for bit against the real
// instructions where the CPU has them.
TEST(GemmInt8Emulated, Bf16KernelMatchesItsScalarDefinition) {
    if (!cpu::isa_supported(cpu::Isa::kAvx512)) GTEST_SKIP() << "no AVX-512";
    const auto [emu, hw, real] = vnni_tables();
    std::mt19937 rng(26);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    struct Case {
        int64_t rows, cols, n;
    };
    for (const Case& c : {Case{50, 256, 24}, Case{97, 512, 9}, Case{19, 384, 72}, Case{48, 1024, 128}}) {
        SCOPED_TRACE(std::to_string(c.rows) + "x" + std::to_string(c.cols) + " n=" + std::to_string(c.n));
        const Bf16Weight s = random_bf16(c.rows, c.cols, &rng);
        const EmulatedCall e = emulated_call(c.rows, c.cols, c.n, rng, nd);
        const auto& [ldx, r0, r1, out, ldy, n_pad, x, q] = e;
        const std::vector<int8_t>& xq = q.xq;
        const std::vector<double> want = emulate_bf16(s, x, c.n, ldx, r0, r1);
        std::vector<float> scratch(cpu::detail::int8_scratch_floats(n_pad));
        std::vector<float> y(c.n * ldy, -7.0f);
        MatmulArgs a{x.data(), c.n, ldx, &s.w, r0, r1, y.data(), ldy, nullptr, Numerics::kFast};
        emu.bf16(a, 0, out, xq.data(), q.xs.data(), q.seed.data(), n_pad, scratch.data());
        expect_rows_match(y, ldy, want, c.n, out, r0);
        if (real) {
            std::vector<float> y_hw(c.n * ldy, -7.0f);
            a.y = y_hw.data();
            hw.bf16(a, 0, out, xq.data(), q.xs.data(), q.seed.data(), n_pad, scratch.data());
            EXPECT_EQ(std::memcmp(y.data(), y_hw.data(), y.size() * sizeof(float)), 0);
        }
    }
}

} // namespace
} // namespace deepinfer::kernels
