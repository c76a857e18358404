// The linear-kernel harness: every CPU implementation compiled in (ref = portable C++, avx2, avx512; those
// the CPU lacks are skipped) x every weight format x a grid of shapes (tiny, odd, the real V4-Flash / V4-Pro
// dims for a few rows) x token counts (GEMV and GEMM paths), against ref::matmul (double accumulation over
// Weight::at, the format's definition). Tolerance: NMSE per numerics mode. Weights are random bytes in
// the stored format, so every code (subnormal e4m3, -0, every e2m1) occurs.

#include <cmath>
#include <cstdint>
#include <cstring>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/dtype.h"
#include "core/thread_pool.h"
#include "kernels/cpu/linear.h"
#include "kernels/cpu/linear_kernels.h"
#include "kernels/ops.h"

namespace deepinfer::kernels {
namespace {

using F = core::WeightFormat;
using cpu::Isa;

struct StoredWeight {
    core::Weight w;
    std::vector<uint8_t> data, scale;
};

// Random stored bytes; scales in [lo_scale, hi_scale] (e8m0).
StoredWeight random_weight(F format, int64_t rows, int64_t cols, int br, int bc, std::mt19937* rng,
                           int lo_scale = 118, int hi_scale = 130) {
    StoredWeight s;
    s.w.format = format;
    s.w.rows = rows;
    s.w.cols = cols;
    std::uniform_int_distribution<int> byte(0, 255), sc(lo_scale, hi_scale);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    switch (format) {
    case F::kF32: {
        s.data.resize(rows * cols * 4);
        auto* p = reinterpret_cast<float*>(s.data.data());
        for (int64_t i = 0; i < rows * cols; ++i) p[i] = nd(*rng);
        break;
    }
    case F::kBF16:
    case F::kF16: {
        s.data.resize(rows * cols * 2);
        auto* p = reinterpret_cast<uint16_t*>(s.data.data());
        for (int64_t i = 0; i < rows * cols; ++i)
            p[i] = format == F::kBF16 ? core::f32_to_bf16(nd(*rng)) : core::f32_to_f16(nd(*rng));
        break;
    }
    case F::kFp8Block:
        s.w.block_rows = br;
        s.w.block_cols = bc;
        s.data.resize(rows * cols);
        for (uint8_t& b : s.data) {
            b = static_cast<uint8_t>(byte(*rng));
            if ((b & 0x7f) == 0x7f) b ^= 1; // e4m3fn NaN codes are not weights
        }
        break;
    case F::kFp4Group:
        s.w.block_rows = 1;
        s.w.block_cols = bc;
        s.data.resize(rows * cols / 2);
        for (uint8_t& b : s.data) b = static_cast<uint8_t>(byte(*rng));
        break;
    }
    if (format == F::kFp8Block || format == F::kFp4Group) {
        s.scale.resize(s.w.scale_rows() * s.w.scale_cols());
        for (uint8_t& b : s.scale) b = static_cast<uint8_t>(sc(*rng));
    }
    s.w.data = s.data.data();
    s.w.scale = s.scale.empty() ? nullptr : s.scale.data();
    return s;
}

double nmse(const std::vector<float>& got, const std::vector<float>& ref) {
    double num = 0.0, den = 0.0;
    for (size_t i = 0; i < ref.size(); ++i) {
        num += (static_cast<double>(got[i]) - ref[i]) * (static_cast<double>(got[i]) - ref[i]);
        den += static_cast<double>(ref[i]) * ref[i];
    }
    return den > 0 ? num / den : num;
}

struct Shape {
    int64_t rows, cols;
    std::vector<int64_t> tokens;
};

struct FormatCase {
    F format;
    int br, bc;
    std::string name;
    int lo_scale = 118, hi_scale = 130;
};

std::vector<Isa> isas() {
    std::vector<Isa> out;
    for (Isa i : {Isa::kRef, Isa::kAvx2, Isa::kAvx512})
        if (cpu::isa_supported(i)) out.push_back(i);
    return out;
}

// Runs one (format, shape, n) through every ISA, with a row range and strided x / y; returns failures.
// Per numerics mode: exact is F32 accumulation of exact products; fast adds int8 activation rounding
// (per 128 columns, relative step 1/127 of the block's max: NMSE ~ 1e-5 on Gaussian activations).
double tolerance(Numerics num) {
    return num == Numerics::kFast ? 5e-4 : 1e-10;
}

void check_case(const FormatCase& fc, int64_t rows, int64_t cols, int64_t n, core::ThreadPool* pool,
                std::mt19937* rng, Numerics num = Numerics::kExact) {
    SCOPED_TRACE(fc.name + " rows=" + std::to_string(rows) + " cols=" + std::to_string(cols) +
                 " n=" + std::to_string(n) + " " + cpu::numerics_name(num));
    const StoredWeight sw = random_weight(fc.format, rows, cols, fc.br, fc.bc, rng, fc.lo_scale, fc.hi_scale);
    const int64_t ldx = cols + 5, r0 = rows / 4, r1 = rows, out = r1 - r0, ldy = out + 3;
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<float> x(n * ldx);
    for (float& v : x) v = nd(*rng);
    MatmulArgs a{x.data(), n, ldx, &sw.w, r0, r1, nullptr, ldy, pool, num};
    std::vector<float> want(n * ldy, -7.0f);
    a.y = want.data();
    ref::matmul(a);
    std::vector<float> want_c(n * out);
    for (int64_t i = 0; i < n; ++i)
        for (int64_t r = 0; r < out; ++r) want_c[i * out + r] = want[i * ldy + r];
    for (Isa isa : isas()) {
        std::vector<float> y(n * ldy, -7.0f);
        a.y = y.data();
        cpu::matmul_isa(a, isa);
        std::vector<float> got(n * out);
        int64_t past = 0;
        for (int64_t i = 0; i < n; ++i) {
            for (int64_t r = 0; r < out; ++r) got[i * out + r] = y[i * ldy + r];
            for (int64_t r = out; r < ldy; ++r) past += y[i * ldy + r] != -7.0f;
        }
        const double e = nmse(got, want_c);
        EXPECT_LT(e, tolerance(num)) << cpu::isa_name(isa);
        // The int8 kernel really ran: its activation rounding shows (exact F32 sums are ~1e-14 off). The
        // GEMV (n <= kGemvMaxTokens) on every AVX-512 CPU (vpmaddubsw without VNNI), the GEMM with VNNI.
        if (num == Numerics::kFast && isa == Isa::kAvx512 &&
            (cpu::int8_supported() || (cpu::int8_gemv_supported() && n <= cpu::kGemvMaxTokens)) &&
            fc.format == F::kFp4Group && fc.bc == 32 && cols % 128 == 0) {
            EXPECT_GT(e, 1e-8) << "fast numerics did not take the int8 path";
        }
        // The int8 GEMM for FP8 blocks of whole 128-column activation blocks (gemm_int8.h); from
        // kInt8OverBf16Tokens where the CPU has AVX-512 BF16 (whose GEMV takes fewer).
        if (num == Numerics::kFast && isa == Isa::kAvx512 && cpu::fp8_int8_supported() &&
            fc.format == F::kFp8Block && fc.bc % 128 == 0 && cols % 128 == 0 &&
            n >= (cpu::bf16_supported() ? cpu::kInt8OverBf16Tokens : cpu::kGemvMaxTokens + 1)) {
            EXPECT_GT(e, 1e-8) << "fast numerics did not take the FP8 int8 GEMM";
        }
        // Likewise the BF16-activation path for BF16 / FP8 weights (whole 32-column pairs).
        const bool fp8_bf16 =
            fc.format == F::kFp8Block && fc.bc % 32 == 0 && fc.lo_scale >= 60 && fc.hi_scale <= 134;
        if (num == Numerics::kFast && isa == Isa::kAvx512 && cpu::bf16_supported() &&
            (fc.format == F::kBF16 || fp8_bf16) && cols % 32 == 0) {
            EXPECT_GT(e, 1e-8) << "fast numerics did not take the BF16 path";
        }
        EXPECT_EQ(past, 0) << cpu::isa_name(isa) << " wrote past the row range";
    }
}

const std::vector<FormatCase>& formats() {
    static const std::vector<FormatCase> f = {
        {F::kF32, 1, 1, "f32"},
        {F::kBF16, 1, 1, "bf16"},
        {F::kF16, 1, 1, "f16"},
        {F::kFp8Block, 128, 128, "fp8_128x128"},
        {F::kFp8Block, 32, 32, "fp8_32x32"},
        {F::kFp8Block, 24, 40, "fp8_24x40"}, // blocks not a multiple of the vector: GEMM path for every n
        {F::kFp8Block, 32, 32, "fp8_big_scales", 120, 140}, // scales past 2^7: the GEMV declines
        {F::kFp8Block, 32, 32, "fp8_small_scales", 40, 70}, // scales below 2^-67: the GEMV declines too
        {F::kFp4Group, 1, 32, "fp4_g32"},
        {F::kFp4Group, 1, 16, "fp4_g16"},
        {F::kFp4Group, 1, 64, "fp4_g64"},   // AVX-512 FP4 GEMV: two groups per 128-column chunk
        {F::kFp4Group, 1, 256, "fp4_g256"}, // one group over two chunks
    };
    return f;
}

class LinearHarness : public ::testing::TestWithParam<FormatCase> {};

// Tiny and odd shapes over the whole token grid.
TEST_P(LinearHarness, SmallShapesAllTokenCounts) {
    const FormatCase& fc = GetParam();
    core::ThreadPool pool(2);
    std::mt19937 rng(11);
    const std::vector<Shape> shapes = {
        {7, 96, {1, 2, 3, 8, 17, 64}},
        {33, 130, {1, 3, 9, 17}},
        {64, 256, {1, 2, 3, 8, 17, 64, 128, 512, 700}}, // 700: two token chunks
        {100, 384, {1, 5, 8, 128}},
    };
    for (const Shape& s : shapes) {
        if (fc.format == F::kFp4Group && s.cols % 2 != 0) continue;
        for (int64_t n : s.tokens) check_case(fc, s.rows, s.cols, n, &pool, &rng);
    }
}

// The real V4-Flash (hidden 4096, q_lora 1024, expert inter 2048) and V4-Pro (hidden 7168) reduction
// dims, a few rows each.
TEST_P(LinearHarness, RealDimsFewRows) {
    const FormatCase& fc = GetParam();
    core::ThreadPool pool(2);
    std::mt19937 rng(12);
    for (int64_t cols : {1024, 2048, 4096, 7168})
        for (int64_t n : {1, 3, 8, 17}) check_case(fc, 13, cols, n, &pool, &rng);
}

// Numerics::kFast over the decode (int8 GEMV) and prefill (int8 GEMM) token counts: int8 where the kernel
// exists (FP4 g32), exact elsewhere.
TEST_P(LinearHarness, FastNumerics) {
    const FormatCase& fc = GetParam();
    core::ThreadPool pool(2);
    std::mt19937 rng(13);
    const std::vector<Shape> shapes = {{7, 128, {1, 2, 3, 5, 8, 9, 17}},
                                       {64, 256, {1, 4, 17, 64, 128, 512}},
                                       {50, 4096, {1, 6, 17, 40}},
                                       {21, 2048, {1, 2, 7}}};
    for (const Shape& s : shapes)
        for (int64_t n : s.tokens) check_case(fc, s.rows, s.cols, n, &pool, &rng, Numerics::kFast);
}

// matmul_multi: several weights over shared and distinct activations give, bit for bit, what one matmul
// each gives, on every ISA and both numerics (the fused GEMV where the format has one, the loop of calls
// elsewhere); rows of every weight are written (a sentinel shows any row a chunk mapping skipped) and none
// past them.
TEST_P(LinearHarness, MultiMatchesOneCallEach) {
    const FormatCase& fc = GetParam();
    core::ThreadPool pool(2);
    std::mt19937 rng(14);
    const int64_t cols = 256, ldx = cols + 3;
    struct Part {
        int64_t rows, r0, r1;
    };
    const std::vector<Part> parts = {{300, 0, 300}, {37, 5, 37}, {8, 0, 8}, {256, 128, 256}, {520, 4, 517}};
    std::vector<StoredWeight> ws;
    for (const Part& p : parts)
        ws.push_back(random_weight(fc.format, p.rows, cols, fc.br, fc.bc, &rng, fc.lo_scale, fc.hi_scale));
    // One more of another format: a set that mixes formats runs one call each.
    const F other = fc.format == F::kBF16 ? F::kF32 : F::kBF16;
    const StoredWeight mixed = random_weight(other, 64, cols, 1, 1, &rng);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    for (Numerics num : {Numerics::kExact, Numerics::kFast}) {
        for (int64_t n : {1, 2, 5, 17}) {
            for (bool mix : {false, true}) {
                SCOPED_TRACE(fc.name + " n=" + std::to_string(n) + " " + cpu::numerics_name(num) +
                             (mix ? " mixed" : ""));
                // Entries 0-2 read x, 3 reads x2 (another stride), 4 reads x again.
                std::vector<float> x(n * ldx), x2(n * (ldx + 32));
                for (float& v : x) v = nd(rng);
                for (float& v : x2) v = nd(rng);
                std::vector<MatmulArgs> args;
                for (size_t i = 0; i < parts.size(); ++i) {
                    const bool second = i == 3;
                    args.push_back({second ? x2.data() + 7 : x.data(), n, second ? ldx + 32 : ldx, &ws[i].w,
                                    parts[i].r0, parts[i].r1, nullptr, parts[i].r1 - parts[i].r0 + 2, &pool,
                                    num});
                }
                if (mix) args.push_back({x.data(), n, ldx, &mixed.w, 3, 64, nullptr, 63, &pool, num});
                for (Isa isa : isas()) {
                    std::vector<std::vector<float>> want(args.size()), got(args.size());
                    for (size_t i = 0; i < args.size(); ++i) {
                        want[i].assign(n * args[i].ldy, -7.0f);
                        got[i].assign(n * args[i].ldy, -7.0f);
                        MatmulArgs a = args[i];
                        a.y = want[i].data();
                        cpu::matmul_isa(a, isa);
                        args[i].y = got[i].data();
                    }
                    cpu::matmul_multi_isa(args, isa);
                    for (size_t i = 0; i < args.size(); ++i) {
                        const int64_t out = args[i].row_end - args[i].row_begin;
                        int64_t differ = 0, unwritten = 0;
                        for (int64_t t = 0; t < n; ++t)
                            for (int64_t r = 0; r < out; ++r) {
                                const float g = got[i][t * args[i].ldy + r];
                                unwritten += g == -7.0f;
                                differ += std::memcmp(&g, &want[i][t * args[i].ldy + r], sizeof g) != 0;
                            }
                        EXPECT_EQ(differ, 0) << cpu::isa_name(isa) << " weight " << i;
                        EXPECT_EQ(unwritten, 0) << cpu::isa_name(isa) << " weight " << i;
                        for (int64_t t = 0; t < n; ++t)
                            for (int64_t r = out; r < args[i].ldy; ++r)
                                EXPECT_EQ(got[i][t * args[i].ldy + r], -7.0f) << "past the row range";
                    }
                }
            }
        }
    }
}

// Output rows are split over the pool in chunks of 4-row groups, down to one group per chunk when a
// weight has few rows (the mHC `fn` weights: 24 rows): whatever the split, every row is the same tile code,
// so two threads give the one-thread result bit for bit, on every ISA and both numerics.
TEST_P(LinearHarness, RowSplitOverThreadsIsBitIdentical) {
    const FormatCase& fc = GetParam();
    core::ThreadPool one(1), two(2);
    std::mt19937 rng(15);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    for (int64_t rows : {6, 24, 40, 64, 200}) {
        const int64_t cols = 1024;
        const StoredWeight sw =
            random_weight(fc.format, rows, cols, fc.br, fc.bc, &rng, fc.lo_scale, fc.hi_scale);
        for (int64_t n : {1, 3}) {
            std::vector<float> x(n * cols);
            for (float& v : x) v = nd(rng);
            for (Numerics num : {Numerics::kExact, Numerics::kFast}) {
                for (Isa isa : isas()) {
                    SCOPED_TRACE(fc.name + " rows=" + std::to_string(rows) + " n=" + std::to_string(n) + " " +
                                 cpu::numerics_name(num) + " " + cpu::isa_name(isa));
                    std::vector<float> y1(n * rows, -7.0f), y2(n * rows, -9.0f);
                    MatmulArgs a{x.data(), n, cols, &sw.w, 0, rows, y1.data(), rows, &one, num};
                    cpu::matmul_isa(a, isa);
                    a.y = y2.data();
                    a.pool = &two;
                    cpu::matmul_isa(a, isa);
                    EXPECT_EQ(std::memcmp(y1.data(), y2.data(), y1.size() * sizeof(float)), 0);
                }
            }
        }
    }
}

// The fast one-token BF16-dot GEMV tile keeps its rows' sums in an L1 array (AMD) or in registers
// (elsewhere; gemv_rows_in_l1, linear_kernels.h): the same chains in the same order, so both give the same
// bits, on every ISA and both numerics (exact runs the same code either way). Columns: 1024, 2048 and 4352
// (a width that is not a power of two).
TEST_P(LinearHarness, OneTokenSumsInL1OrRegistersAreBitIdentical) {
    const FormatCase& fc = GetParam();
    core::ThreadPool two(2);
    std::mt19937 rng(16);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    for (int64_t cols : {1024, 2048, 4352}) {
        if (fc.bc > 0 && cols % fc.bc != 0) continue;
        const int64_t rows = 200;
        const StoredWeight sw =
            random_weight(fc.format, rows, cols, fc.br, fc.bc, &rng, fc.lo_scale, fc.hi_scale);
        std::vector<float> x(cols);
        for (float& v : x) v = nd(rng);
        for (Numerics num : {Numerics::kExact, Numerics::kFast}) {
            for (Isa isa : isas()) {
                SCOPED_TRACE(fc.name + " cols=" + std::to_string(cols) + " " + cpu::numerics_name(num) + " " +
                             cpu::isa_name(isa));
                std::vector<float> y1(rows, -7.0f), y2(rows, -9.0f);
                MatmulArgs a{x.data(), 1, cols, &sw.w, 0, rows, y1.data(), rows, &two, num};
                cpu::detail::force_gemv_rows_in_l1(1);
                cpu::matmul_isa(a, isa);
                a.y = y2.data();
                cpu::detail::force_gemv_rows_in_l1(0);
                cpu::matmul_isa(a, isa);
                cpu::detail::force_gemv_rows_in_l1(-1);
                EXPECT_EQ(std::memcmp(y1.data(), y2.data(), y1.size() * sizeof(float)), 0);
            }
        }
    }
}

// The decode GEMVs read a run of rows as 4 row streams (a tile takes rows j, j + q, j + 2q, j + 3q) or as
// tiles of consecutive rows (DEEPINFER_GEMV_ROWS=tile): every row's sums are the same operations either way.
// Odd row counts leave rows for the one-row tail; 5 tokens take two token tiles; on one thread the whole
// weight is one run, so 1027 rows make streams of 256 rows that cross FP8 row blocks (the one-token FP8
// streams then fold each stream's activations on their own).
TEST_P(LinearHarness, RowStreamsOrConsecutiveTilesAreBitIdentical) {
    const FormatCase& fc = GetParam();
    core::ThreadPool two(2), one(1);
    std::mt19937 rng(23);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    for (int64_t cols : {1024, 4352}) {
        if (fc.bc > 0 && cols % fc.bc != 0) continue;
        for (int64_t rows : {200, 203, 1027}) {
            core::ThreadPool* pool = rows > 1000 ? &one : &two;
            const StoredWeight sw =
                random_weight(fc.format, rows, cols, fc.br, fc.bc, &rng, fc.lo_scale, fc.hi_scale);
            for (int64_t n : {1, 2, 5}) {
                std::vector<float> x(n * cols);
                for (float& v : x) v = nd(rng);
                for (Numerics num : {Numerics::kExact, Numerics::kFast}) {
                    for (Isa isa : isas()) {
                        SCOPED_TRACE(fc.name + " cols=" + std::to_string(cols) +
                                     " rows=" + std::to_string(rows) + " n=" + std::to_string(n) + " " +
                                     cpu::numerics_name(num) + " " + cpu::isa_name(isa));
                        std::vector<float> y1(n * rows, -7.0f), y2(n * rows, -9.0f);
                        MatmulArgs a{x.data(), n, cols, &sw.w, 0, rows, y1.data(), rows, pool, num};
                        cpu::detail::force_row_streams(1);
                        cpu::matmul_isa(a, isa);
                        a.y = y2.data();
                        cpu::detail::force_row_streams(0);
                        cpu::matmul_isa(a, isa);
                        cpu::detail::force_row_streams(-1);
                        EXPECT_EQ(std::memcmp(y1.data(), y2.data(), y1.size() * sizeof(float)), 0);
                    }
                }
            }
        }
    }
}

// fast's BF16-dot GEMV (BF16 and FP8-block weights, where the CPU has AVX-512 BF16) sums a token's row in
// one chain whatever the token count: alone (decode at batch 1: row streams, sums in L1 on AMD; on Intel the
// FP8 streams with their own folds) or in a tile of 2-4 tokens of a larger call, the same bits. So a
// request's fast logits from these weights do not depend on how many others share its step. Rows: 200 on
// two threads, 1027 on one (streams that cross FP8 row blocks); 4096 columns: the LM head's and wq_a's.
// AMX-BF16 forced off: where a CPU has it, it takes fast FP8 / BF16 from kAmxBf16MinTokens (another kernel).
TEST_P(LinearHarness, FastBf16DotTokenAloneOrInATileIsBitIdentical) {
    const FormatCase& fc = GetParam();
    if (fc.format != F::kBF16 && fc.name != "fp8_128x128" && fc.name != "fp8_32x32")
        GTEST_SKIP() << "not a BF16-dot GEMV format";
    if (!cpu::bf16_supported()) GTEST_SKIP() << "no AVX-512 BF16";
    core::ThreadPool two(2), one(1);
    cpu::detail::force_amx_bf16_off(0);
    std::mt19937 rng(31);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    for (int64_t cols : {1024, 4096}) {
        for (int64_t rows : {200, 1027}) {
            core::ThreadPool* pool = rows > 1000 ? &one : &two;
            const StoredWeight sw =
                random_weight(fc.format, rows, cols, fc.br, fc.bc, &rng, fc.lo_scale, fc.hi_scale);
            for (int64_t n : {2, 5, 8}) {
                SCOPED_TRACE(fc.name + " cols=" + std::to_string(cols) + " rows=" + std::to_string(rows) +
                             " n=" + std::to_string(n));
                std::vector<float> x(n * cols), all(n * rows, -7.0f);
                for (float& v : x) v = nd(rng);
                cpu::matmul_isa(
                    MatmulArgs{x.data(), n, cols, &sw.w, 0, rows, all.data(), rows, pool, Numerics::kFast},
                    Isa::kAvx512);
                for (int64_t t = 0; t < n; ++t) {
                    std::vector<float> alone(rows, -9.0f);
                    cpu::matmul_isa(MatmulArgs{x.data() + t * cols, 1, cols, &sw.w, 0, rows, alone.data(),
                                               rows, pool, Numerics::kFast},
                                    Isa::kAvx512);
                    EXPECT_EQ(std::memcmp(alone.data(), all.data() + t * rows, rows * sizeof(float)), 0)
                        << "token " << t;
                }
            }
        }
    }
    cpu::detail::force_amx_bf16_off(-1);
}

INSTANTIATE_TEST_SUITE_P(Formats, LinearHarness, ::testing::ValuesIn(formats()),
                         [](const auto& param_info) { return param_info.param.name; });

void PrintTo(const FormatCase& f, std::ostream* os) {
    *os << f.name;
}

TEST(LinearNumerics, DefaultIsExactAndSettable) {
    EXPECT_EQ(cpu::default_numerics(), Numerics::kExact);
    Numerics n;
    ASSERT_TRUE(cpu::parse_numerics("fast", &n));
    EXPECT_EQ(n, Numerics::kFast);
    EXPECT_FALSE(cpu::parse_numerics("sloppy", &n));
    // kDefault follows the process default: the fast kernel's rounding shows only after the switch.
    std::mt19937 rng(5);
    const StoredWeight sw = random_weight(F::kFp4Group, 32, 256, 1, 32, &rng);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<float> x(64 * 256), y0(64 * 32), y1(64 * 32), y2(64 * 32);
    for (float& v : x) v = nd(rng);
    cpu::matmul_isa(linear_args(x.data(), 64, sw.w, y0.data()), cpu::best_isa());
    cpu::set_default_numerics(Numerics::kFast);
    cpu::matmul_isa(linear_args(x.data(), 64, sw.w, y1.data()), cpu::best_isa());
    cpu::set_default_numerics(Numerics::kDefault);
    EXPECT_EQ(cpu::default_numerics(), Numerics::kExact);
    cpu::matmul_isa(linear_args(x.data(), 64, sw.w, y2.data()), cpu::best_isa());
    EXPECT_EQ(y0, y2);
    if (cpu::int8_supported() && cpu::best_isa() == Isa::kAvx512) {
        EXPECT_NE(y0, y1);
    }
}

// e4m3 subnormals (exponent field 0: m x 2^-9) through the exact FP8 kernels of every ISA, the GEMV (1 and 3
// tokens) and the GEMM's dequantized panels (16 tokens), against ref: the SIMD decode widens them as FP16
// bits (vcvtph2ps), where they are FP16 subnormals; a decode that flushed them, or read them as normals,
// would be off by the whole product. Weights of only subnormals and zeros, block scales 2^0.
TEST(LinearIsa, ExactFp8SubnormalWeights) {
    std::mt19937 rng(21);
    const int64_t rows = 64, cols = 256;
    StoredWeight sw = random_weight(F::kFp8Block, rows, cols, 128, 128, &rng, 127, 127);
    for (uint8_t& b : sw.data) b &= 0x87; // sign and mantissa only
    std::normal_distribution<float> nd(0.0f, 1.0f);
    core::ThreadPool pool(2);
    for (int64_t n : {1, 3, 16}) {
        std::vector<float> x(n * cols), want(n * rows);
        for (float& v : x) v = nd(rng);
        MatmulArgs a{x.data(), n, cols, &sw.w, 0, rows, want.data(), rows, &pool, Numerics::kExact};
        ref::matmul(a);
        double norm = 0.0;
        for (float v : want) norm += std::fabs(v);
        ASSERT_GT(norm, 0.0);
        for (Isa isa : isas()) {
            SCOPED_TRACE(std::string(cpu::isa_name(isa)) + " n=" + std::to_string(n));
            std::vector<float> got(n * rows, -7.0f);
            a.y = got.data();
            cpu::matmul_isa(a, isa);
            EXPECT_LT(nmse(got, want), 1e-10);
        }
    }
}

TEST(LinearIsa, NamesRoundTripAndRefIsAlwaysSupported) {
    for (Isa i : {Isa::kRef, Isa::kAvx2, Isa::kAvx512}) {
        Isa back;
        ASSERT_TRUE(cpu::parse_isa(cpu::isa_name(i), &back));
        EXPECT_EQ(back, i);
    }
    Isa unused;
    EXPECT_FALSE(cpu::parse_isa("sse9", &unused));
    EXPECT_TRUE(cpu::isa_supported(Isa::kRef));
    EXPECT_TRUE(cpu::isa_supported(cpu::active_isa()));
}

// The exact GEMV's column tail is defined, not left to the compiler: on AVX-512 one fused multiply-add per
// column in column order. FP4 calls of 1 or 2 tokens take the "words" path, whose vector steps cover 128
// columns, so rows of 64 columns are all tail. The sanitizer build had not fused them (its checks sat
// between the multiply and the add): its bits differed from the release build's and a V4.1 golden flipped
// a rounding. This fails on such a build.
TEST(LinearIsa, ExactGemvColumnTailIsFusedOnAvx512) {
    std::mt19937 rng(9);
    const int64_t rows = 8, cols = 64;
    std::vector<uint8_t> codes(rows * cols / 2), scales(rows * cols / 32);
    for (auto& b : codes) b = static_cast<uint8_t>(rng());
    for (auto& b : scales) b = static_cast<uint8_t>(120 + rng() % 8);
    core::Weight w;
    w.format = F::kFp4Group;
    w.rows = rows;
    w.cols = cols;
    w.block_rows = 1;
    w.block_cols = 32;
    w.data = codes.data();
    w.scale = scales.data();
    std::uniform_real_distribution<float> ud(-1.0f, 1.0f);
    if (!cpu::isa_supported(Isa::kAvx512)) GTEST_SKIP() << "no AVX-512";
    const Isa before = cpu::active_isa();
    cpu::set_active_isa(Isa::kAvx512);
    for (int64_t n : {1, 2}) {
        std::vector<float> x(n * cols), y(n * rows);
        for (auto& v : x) v = ud(rng);
        core::ThreadPool pool(1);
        cpu::matmul({x.data(), n, cols, &w, 0, rows, y.data(), rows, &pool, Numerics::kExact});
        for (int64_t t = 0; t < n; ++t)
            for (int64_t r = 0; r < rows; ++r) {
                float s = 0.0f;
                for (int64_t c = 0; c < cols; ++c) s = std::fma(w.at(r, c), x[t * cols + c], s);
                EXPECT_EQ(std::memcmp(&y[t * rows + r], &s, 4), 0)
                    << "n " << n << " t " << t << " row " << r << ": " << y[t * rows + r] << " vs " << s;
            }
    }
    cpu::set_active_isa(before);
}

// DEEPINFER_ISA, when set to a supported name, is what matmul dispatches to (the ctest runs under each).
TEST(LinearIsa, EnvironmentForcesTheActiveIsa) {
    const char* env = std::getenv("DEEPINFER_ISA");
    Isa want;
    if (env == nullptr || !cpu::parse_isa(env, &want) || !cpu::isa_supported(want)) want = cpu::best_isa();
    EXPECT_EQ(cpu::active_isa(), want) << (env ? env : "(unset)");
}

} // namespace
} // namespace deepinfer::kernels
