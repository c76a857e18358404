// The GEMMs through the dispatcher (kernels::cpu::matmul_isa): the exact GEMM's token-split invariance; the
// fast int8 GEMMs (kernels/cpu/gemm_int8.h) against a scalar emulation of the same numerics (int8
// activations per 128 columns, the requantized weights, exact integer sums), which they must match to F32
// rounding, far tighter than the fast-vs-ref tolerance the linear harness applies; the FP8 and BF16
// requantization against their definitions; the AMX-BF16 GEMM against its BF16 definition. The kernels
// called through their tables directly: gemm_int8_kernels_test.cpp.

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
#include "gemm_test_support.h"
#include "kernels/cpu/gemm_int8.h"
#include "kernels/cpu/linear.h"
#include "kernels/cpu/linear_kernels.h"
#include "kernels/ops.h"

namespace deepinfer::kernels {
namespace {

using namespace gemm_test;

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

// The exact matmul computes every token on its own: a call over 300 tokens (on AVX-512 AMD CPUs the FP8 / FP4
// GEMV in three balanced chunks of 100, linear.cpp; where the CPU has AMX-BF16 the three-piece AMX GEMM in
// chunks of 64, and with it forced off, as elsewhere, the F32 GEMM in chunks of 128) writes, bit for
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
    for (int amx : {-1, 0})
        for (const core::Weight* w :
             {&fp8.w, static_cast<const core::Weight*>(&fp4), static_cast<const core::Weight*>(&f32)}) {
            const int64_t rows = w->rows;
            for (cpu::Isa isa : isas) {
                if (!cpu::isa_supported(isa)) continue;
                for (const std::vector<int64_t>& pieces :
                     {std::vector<int64_t>{300, 0}, std::vector<int64_t>{37, 113, 150},
                      std::vector<int64_t>{700, 0}, std::vector<int64_t>{512, 9, 179}}) {
                    cpu::detail::force_amx_bf16_off(amx);
                    SCOPED_TRACE(std::string(amx == 0 ? "AMX-BF16 off " : "") + cpu::isa_name(isa) +
                                 (w == &fp4   ? " fp4 "
                                  : w == &f32 ? " f32 "
                                              : " fp8 ") +
                                 std::to_string(pieces[0]));
                    int64_t n = 0;
                    for (int64_t p : pieces) n += p;
                    std::vector<float> x(n * cols);
                    for (float& v : x) v = nd(rng);
                    std::vector<float> whole(n * rows), parts(n * rows, -7.0f);
                    cpu::matmul_isa(MatmulArgs{x.data(), n, cols, w, 0, rows, whole.data(), rows, &pool,
                                               Numerics::kExact},
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
                    cpu::detail::force_amx_bf16_off(-1);
                    int64_t differ = 0;
                    for (int64_t i = 0; i < n * rows; ++i) differ += whole[i] != parts[i];
                    EXPECT_EQ(differ, 0);
                }
            }
        }
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
// groups) and past 32 (the one-piece variant of gemm_amx_bf16x3.cpp: groups in pairs and a lone last one,
// several 128-token chunks at 300), rows off the 32-row panels, columns off the 256-column passes (a last
// pass of 128), 256-column
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
          Case{61, 1024, 128, 31}, Case{40, 4096, 128, 24}, Case{300, 512, 128, 32}, Case{97, 384, 128, 33},
          Case{61, 1024, 128, 48}, Case{130, 640, 256, 100}, Case{40, 256, 128, 300}}) {
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
                    int32_t q[128];
                    const float xs = quantize_block_by_definition(x.data() + i * ldx + kb * 128, q);
                    double sum = 0.0;
                    for (int k = 0; k < 128; ++k) sum += q[k] * static_cast<double>(w.at(r, kb * 128 + k));
                    want += sum * xs;
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

} // namespace
} // namespace deepinfer::kernels
