// The int8 GEMM kernels called through their tables, not the dispatcher (kernels/cpu/gemm_int8.h): the
// quantization and the FP8 / FP4 / BF16 kernels with VNNI / VBMI emulated (gemm_int8_emulated.cpp, so they
// are tested on any AVX-512 CPU) against their scalar definitions, and the AMX tile kernels bit for bit
// against VNNI where the CPU has both.

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
#include "kernels/ops.h"

namespace deepinfer::kernels {
namespace cpu::detail {
GemmQTable emulated_vnni_gemm_table(); // gemm_int8_emulated.cpp
} // namespace cpu::detail
namespace {

using namespace gemm_test;

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
            int32_t qb[128];
            q.xs[kb * n_pad + i] = quantize_block_by_definition(x.data() + i * ldx + kb * 128, qb);
            int32_t total = 0;
            for (int k = 0; k < 128; ++k) {
                const int64_t col = kb * 128 + k;
                const int32_t v = qb[k];
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

// Int8 panels packed at load from a BF16 weight (gemm_int8.h, "int8 panels") give the BF16 kernel's results
// bit for bit: emulated and real tables, row ranges starting on a panel tile, last tiles partial; and the
// dispatcher takes them at the int8 GEMM's token counts (the same bits as the real `panels` kernel).
// One call of the table's GEMM `stored` (its fp8 / bf16) on w and of its `panels` GEMM on wp (w with int8
// panels) over rows [r0, w.rows) of n tokens x [n, w.cols]: the same bits. Returns the panels call's
// output [n, ldy = w.rows - r0 + 1].
std::vector<float> expect_panels_match(const cpu::detail::GemmQTable& t, cpu::detail::GemmQ8Fn stored,
                                       const core::Weight& w, const core::Weight& wp,
                                       const std::vector<float>& x, int64_t n, int64_t r0) {
    const int64_t n_pad = (n + 7) / 8 * 8, out = w.rows - r0, ldy = out + 1, ldx = w.cols;
    const QuantizedActs q = quantize_by_definition(x, n, ldx, w.cols, n_pad);
    std::vector<float> scratch(cpu::detail::int8_scratch_floats(n_pad));
    std::vector<float> want(n * ldy, -7.0f), got(n * ldy, -7.0f);
    MatmulArgs a{x.data(), n, ldx, &w, r0, w.rows, want.data(), ldy, nullptr, Numerics::kFast};
    stored(a, 0, out, q.xq.data(), q.xs.data(), q.seed.data(), n_pad, scratch.data());
    a.w = &wp;
    a.y = got.data();
    t.panels(a, 0, out, q.xq.data(), q.xs.data(), q.seed.data(), n_pad, scratch.data());
    EXPECT_EQ(std::memcmp(want.data(), got.data(), want.size() * sizeof(float)), 0);
    return got;
}

TEST(GemmInt8Emulated, PanelsFromBf16MatchTheBf16KernelBitForBit) {
    if (!cpu::isa_supported(cpu::Isa::kAvx512)) GTEST_SKIP() << "no AVX-512";
    const auto [emu, hw, real] = vnni_tables();
    std::mt19937 rng(28);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    constexpr int64_t kT = cpu::detail::kQRowTile;
    // Panels of rows [row0, rows) (row0 > 0: a tensor-parallel rank's rows, tiles counted from it); the call
    // computes rows [r0, rows), r0 on one of those tiles.
    struct Case {
        int64_t rows, cols, n, r0, row0;
    };
    for (const Case& c : {Case{100, 256, 32, 0, 0}, Case{2 * kT + 5, 512, 9, kT, 0}, Case{19, 384, 72, 0, 0},
                          Case{kT, 1024, 40, 0, 0}, Case{2 * kT + 30, 256, 16, 17, 17},
                          Case{2 * kT + 30, 256, 33, 17 + kT, 17}, Case{4 * kT, 384, 24, kT + 10, kT + 10},
                          Case{5 * kT + 3, 256, 12, 3 * kT + 50, kT + 50}}) {
        SCOPED_TRACE(std::to_string(c.rows) + "x" + std::to_string(c.cols) + " n=" + std::to_string(c.n) +
                     " r0=" + std::to_string(c.r0) + " row0=" + std::to_string(c.row0));
        Bf16Weight s = random_bf16(c.rows, c.cols, &rng);
        const int64_t held = c.rows - c.row0;
        std::vector<uint8_t> codes(cpu::detail::int8_panel_code_bytes(held, c.cols), 7);
        std::vector<float> scales(cpu::detail::int8_panel_scale_floats(held, c.cols), 7.0f);
        const int64_t tiles = cpu::detail::int8_panel_tiles(held);
        cpu::detail::pack_bf16_int8_panels(s.w, c.row0, c.rows, 0, tiles / 2, codes.data(), scales.data());
        cpu::detail::pack_bf16_int8_panels(s.w, c.row0, c.rows, tiles / 2, tiles, codes.data(),
                                           scales.data());
        // The tables' vectorized pack writes the scalar pack's bytes.
        for (const cpu::detail::GemmQTable* t : {&emu, &hw}) {
            if (t->pack_bf16 == nullptr) continue;
            SCOPED_TRACE(t == &emu ? "emulated pack" : "real pack");
            std::vector<uint8_t> vcodes(codes.size(), 9);
            std::vector<float> vscales(scales.size(), 9.0f);
            t->pack_bf16(s.w, c.row0, c.rows, tiles / 2, tiles, vcodes.data(), vscales.data());
            t->pack_bf16(s.w, c.row0, c.rows, 0, tiles / 2, vcodes.data(), vscales.data());
            EXPECT_EQ(vcodes, codes);
            EXPECT_EQ(std::memcmp(vscales.data(), scales.data(), scales.size() * sizeof(float)), 0);
        }
        core::Weight wp = s.w;
        wp.panel_codes = codes.data();
        wp.panel_scales = scales.data();
        wp.panel_row0 = c.row0;
        wp.panel_rows = held;
        const int64_t out = c.rows - c.r0, ldy = out + 1, ldx = c.cols;
        std::vector<float> x(c.n * ldx);
        for (float& v : x) v = nd(rng);
        for (const cpu::detail::GemmQTable* t : {&emu, &hw}) {
            if (t->bf16 == nullptr) continue;
            SCOPED_TRACE(t == &emu ? "emulated" : "real");
            const std::vector<float> got = expect_panels_match(*t, t->bf16, s.w, wp, x, c.n, c.r0);
            if (t == &hw && c.n >= cpu::kPanelsMinTokens) {
                // Through the dispatcher (2 threads): the `panels` kernel's bits.
                std::vector<float> y(c.n * ldy, -7.0f);
                core::ThreadPool pool(2);
                MatmulArgs d{x.data(), c.n, ldx, &wp, c.r0, c.rows, y.data(), ldy, &pool, Numerics::kFast};
                cpu::matmul_isa(d, cpu::Isa::kAvx512);
                for (int64_t i = 0; i < c.n; ++i)
                    for (int64_t r = 0; r < out; ++r)
                        ASSERT_EQ(y[i * ldy + r], got[i * ldy + r]) << "token " << i << " row " << r;
            }
        }
    }
}

// The dense FP8 weights' panels (model/int8_panels.h): packed by the `fp8` GEMM's decoder (emulated and
// real tables write the same bytes), then the `panels` GEMM gives the `fp8` GEMM's results bit for bit.
TEST(GemmInt8Emulated, PanelsFromFp8MatchTheFp8KernelBitForBit) {
    if (!cpu::isa_supported(cpu::Isa::kAvx512)) GTEST_SKIP() << "no AVX-512";
    const auto [emu, hw, real] = vnni_tables();
    std::mt19937 rng(29);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    constexpr int64_t kT = cpu::detail::kQRowTile;
    struct Case {
        int64_t rows, cols;
        int bc; // block columns
        int64_t n, r0;
    };
    for (const Case& c :
         {Case{130, 256, 128, 32, 0}, Case{2 * kT + 5, 512, 256, 9, kT}, Case{19, 384, 128, 41, 0},
          Case{4 * kT, 256, 128, 8, 2 * kT}, Case{300, 128, 128, 24, kT}}) {
        SCOPED_TRACE(std::to_string(c.rows) + "x" + std::to_string(c.cols) + " bc=" + std::to_string(c.bc) +
                     " n=" + std::to_string(c.n) + " r0=" + std::to_string(c.r0));
        Fp8Weight s = random_fp8(c.rows, c.cols, c.bc, &rng);
        s.w.data = s.data.data();
        s.w.scale = s.scale.data();
        const int64_t tiles = cpu::detail::int8_panel_tiles(c.rows);
        std::vector<uint8_t> codes(cpu::detail::int8_panel_code_bytes(c.rows, c.cols), 7);
        std::vector<float> scales(cpu::detail::int8_panel_scale_floats(c.rows, c.cols), 7.0f);
        emu.pack_fp8(s.w, 0, c.rows, 0, tiles / 2, codes.data(), scales.data());
        emu.pack_fp8(s.w, 0, c.rows, tiles / 2, tiles, codes.data(), scales.data());
        if (hw.pack_fp8 != nullptr) {
            std::vector<uint8_t> hcodes(codes.size(), 9);
            std::vector<float> hscales(scales.size(), 9.0f);
            hw.pack_fp8(s.w, 0, c.rows, 0, tiles, hcodes.data(), hscales.data());
            EXPECT_EQ(hcodes, codes);
            EXPECT_EQ(std::memcmp(hscales.data(), scales.data(), scales.size() * sizeof(float)), 0);
        }
        core::Weight wp = s.w;
        wp.panel_codes = codes.data();
        wp.panel_scales = scales.data();
        wp.panel_row0 = 0;
        wp.panel_rows = c.rows;
        wp.panels_are_decode = true;
        const int64_t ldy = c.rows - c.r0 + 1, ldx = c.cols;
        std::vector<float> x(c.n * ldx);
        for (float& v : x) v = nd(rng);
        for (const cpu::detail::GemmQTable* t : {&emu, &hw}) {
            if (t->fp8 == nullptr) continue;
            SCOPED_TRACE(t == &emu ? "emulated" : "real");
            expect_panels_match(*t, t->fp8, s.w, wp, x, c.n, c.r0);
        }
        if (!real) continue;
        // Through the dispatcher (2 threads), at every token count: the weight's results with its panels are
        // its results without them (the panels serve only the calls its FP8 int8 GEMM takes). From
        // kInt8OverBf16Tokens (on or past that GEMM's first count on every CPU without AMX) the panels are
        // read: one changed scale changes the output.
        core::ThreadPool pool(2);
        auto run = [&](const core::Weight* w) {
            std::vector<float> y(c.n * ldy, -7.0f);
            MatmulArgs d{x.data(), c.n, ldx, w, c.r0, c.rows, y.data(), ldy, &pool, Numerics::kFast};
            cpu::matmul_isa(d, cpu::Isa::kAvx512);
            return y;
        };
        const std::vector<float> plain = run(&s.w), with = run(&wp);
        EXPECT_EQ(std::memcmp(plain.data(), with.data(), plain.size() * sizeof(float)), 0);
        if (!cpu::amx_supported() && c.n >= cpu::kInt8OverBf16Tokens) {
            scales[(c.r0 / kT) * (c.cols / 128) * kT] *= 2.0f; // row r0's first block
            EXPECT_NE(run(&wp)[0], with[0]);
        }
    }
}

} // namespace
} // namespace deepinfer::kernels
