#pragma once
// Internal to the AMX-BF16 GEMMs (gemm_amx_bf16.cpp: fast; gemm_amx_bf16x3.cpp: exact), included only by
// translation units compiled with -mavx512bw -mavx512vbmi -mavx512bf16 -mamx-tile -mamx-bf16: the BF16 weight
// panels both decode (FP8-block, BF16, FP4-group weights), and the activations' BF16 chunks in a panel's
// column order. Exact: every weight value in a panel is the stored value (an e4m3 or e2m1 value times a power
// of two is a BF16 value; the callers check the scales keep it a normal one).

#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <cstring>

#include "core/weight.h"
#include "kernels/cpu/amx_tiles.h"
#include "kernels/cpu/gemm_amx_bf16.h"

namespace deepinfer::kernels::cpu::detail::amx_bf16_panel {

inline int64_t min64(int64_t a, int64_t b) {
    return a < b ? a : b;
}

// The weight formats a panel is decoded from.
enum class PanelFormat { kFp8, kBf16, kFp4 };

// tab[s]: the BF16 bits of e4m3 magnitude code c (0..127) times 2^(s - 127), high bytes then low bytes.
// Exact for scales amx_bf16_fp8_scale_ok accepts: 3 mantissa bits fit BF16's 7, and the exponents stay in
// the normal range. Code 0x7f (e4m3's NaN) is a BF16 NaN.
struct Fp8Bf16Tables {
    alignas(64) uint8_t tab[256][2][128];
};
inline uint16_t bf16_bits_exact(float v) {
    uint32_t u;
    std::memcpy(&u, &v, 4);
    return static_cast<uint16_t>(u >> 16); // exact: the callers' values have zero low 16 bits
}
inline const Fp8Bf16Tables& fp8_tables() {
    static const Fp8Bf16Tables t = [] {
        Fp8Bf16Tables k{};
        for (int s = 0; s < 256; ++s) {
            if (!amx_bf16_fp8_scale_ok(static_cast<uint8_t>(s))) continue;
            for (int c = 0; c < 128; ++c) {
                const int ef = c >> 3, mant = c & 7;
                uint16_t bits = 0x7fc0;
                if (c != 0x7f) // |value| = mant x 2^-9 (ef 0) or (8 + mant) x 2^(ef - 10); times 2^(s - 127)
                    bits = bf16_bits_exact(ef == 0
                                               ? std::ldexp(static_cast<float>(mant), -9 + s - 127)
                                               : std::ldexp(static_cast<float>(8 + mant), ef - 10 + s - 127));
                k.tab[s][0][c] = static_cast<uint8_t>(bits >> 8);
                k.tab[s][1][c] = static_cast<uint8_t>(bits & 0xff);
            }
        }
        return k;
    }();
    return t;
}

// tab[s][c]: the BF16 bits of e2m1 code c (0..15, the sign in bit 3) times 2^(s - 127); entries 16-31 (never
// indexed) zero. Exact for scales amx_bf16_fp4_scale_ok accepts.
struct Fp4Bf16Tables {
    alignas(64) uint16_t tab[256][32];
};
inline const Fp4Bf16Tables& fp4_tables() {
    static const Fp4Bf16Tables t = [] {
        static constexpr float kMag[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
        Fp4Bf16Tables k{};
        for (int s = 0; s < 256; ++s) {
            if (!amx_bf16_fp4_scale_ok(static_cast<uint8_t>(s))) continue;
            for (int c = 0; c < 16; ++c)
                k.tab[s][c] = bf16_bits_exact((c & 8 ? -1.0f : 1.0f) * std::ldexp(kMag[c & 7], s - 127));
        }
        return k;
    }();
    return t;
}

// 64 F32 activations of one token (f[0..3]: columns 16 i .. 16 i + 15) as two 32-position BF16 chunks,
// rounded to nearest even (vcvtne2ps2bf16), in FP8 panel order or column order.
template <bool kFp8Order> inline void to_bf16_chunks(const __m512 f[4], __m512i out[2]) {
    if constexpr (kFp8Order) {
        // chunk 0: columns 0-7, 16-23, 32-39, 48-55; chunk 1: 8-15, 24-31, 40-47, 56-63
        const __m512 a0 = _mm512_shuffle_f32x4(f[0], f[1], 0x44), b0 = _mm512_shuffle_f32x4(f[2], f[3], 0x44);
        const __m512 a1 = _mm512_shuffle_f32x4(f[0], f[1], 0xee), b1 = _mm512_shuffle_f32x4(f[2], f[3], 0xee);
        out[0] = reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(b0, a0));
        out[1] = reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(b1, a1));
    } else {
        out[0] = reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(f[1], f[0]));
        out[1] = reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(f[3], f[2]));
    }
}

// One pass's panel: weight rows [row0, row0 + rows) (panel rows past `rows` repeat its last row), columns
// [k0, k0 + kc), as BF16 rows of stride kAmxBf16Kc, decoded one (row, 128-column block) unit at a time so
// the decode of the next pass can be spread between the tile instructions of this one (the tile unit and
// the vector units then work at the same time). FP8: the block scale's two byte tables, vpermi2b on the
// 7-bit magnitude, the sign or'ed into the high byte, the bytes interleaved into words (FP8 panel order).
// BF16: copied. FP4: the nibbles spread into bytes in column order (vpmovzxbw, one vpternlogd), widened to
// words, then vpermw on the 32-column group's scaled table (column order). Each row's first unit prefetches
// the row's codes of the pass after (into L2).
template <PanelFormat F> struct Decoder {
    static constexpr int64_t kMaxBlocks = kAmxBf16Kc / kQBlock;
    // Weight bytes of n values: FP8 1, BF16 2, FP4 one half.
    static constexpr int64_t bytes(int64_t n) {
        return F == PanelFormat::kFp8 ? n : F == PanelFormat::kBf16 ? 2 * n : n / 2;
    }
    const core::Weight* w = nullptr;
    int64_t unit = 0, units = 0, blocks = 0, cur_m = 0, cur_b = 0; // the next unit: row cur_m, block cur_b
    int64_t prefetch_k = -1, prefetch_row0 = 0, prefetch_rows = 0, prefetch_kc = 0;
    uint16_t* panel = nullptr;
    const uint8_t* src[kAmxBf16RowTile] =
        {}; // each panel row's first code (FP8, FP4) or value (BF16) of the pass
    const uint8_t* srow[kAmxBf16RowTile] = {}; // FP8, FP4: each panel row's block-scale row
    int64_t scol[kMaxBlocks * 4] = {}; // FP8: each 128-column block's scale column; FP4: each 32 columns'

    // No division per unit: the rows' addresses and scale rows are set here, once per pass.
    void start(int64_t row0, int64_t rows, int64_t k0, int64_t kc, uint16_t* dst) {
        panel = dst;
        unit = cur_m = cur_b = 0;
        blocks = kc / kQBlock;
        units = kAmxBf16RowTile * blocks;
        const auto* base = static_cast<const uint8_t*>(w->data);
        int64_t sr = 0, rem = 0;
        if constexpr (F == PanelFormat::kFp8) {
            sr = row0 / w->block_rows;
            rem = row0 - sr * w->block_rows;
            for (int64_t b = 0; b < blocks; ++b) scol[b] = (k0 + b * kQBlock) / w->block_cols;
        } else if constexpr (F == PanelFormat::kFp4) {
            for (int64_t g = 0; g < blocks * 4; ++g) scol[g] = (k0 + g * 32) / w->block_cols;
        }
        for (int64_t m = 0; m < kAmxBf16RowTile; ++m) {
            const int64_t r = row0 + min64(m, rows - 1);
            src[m] = base + bytes(r * w->cols + k0);
            if constexpr (F == PanelFormat::kFp8) {
                srow[m] = w->scale + sr * w->scale_cols();
                if (m + 1 < rows && ++rem == w->block_rows) {
                    rem = 0;
                    ++sr;
                }
            } else if constexpr (F == PanelFormat::kFp4) {
                srow[m] = w->scale + r * w->scale_cols();
            }
        }
    }
    // Units go block by block (all 32 rows of block 0, then of block 1): the rows of an FP8 panel share their
    // block scales (within one FP8 row block), so the four table vectors are reloaded only when the scale
    // changes. The loop keeps its state in locals (as members it was stored and reloaded per unit).
    void run(int64_t count) {
        int64_t u = unit, m = cur_m, b = cur_b;
        const int64_t end = min64(units, u + count);
        if (u >= end) return;
        [[maybe_unused]] const uint8_t* loaded = nullptr;
        [[maybe_unused]] __m512i h0, h1, l0, l1;
        [[maybe_unused]] const Fp8Bf16Tables* t8 = nullptr;
        [[maybe_unused]] const Fp4Bf16Tables* t4 = nullptr;
        if constexpr (F == PanelFormat::kFp8) t8 = &fp8_tables();
        if constexpr (F == PanelFormat::kFp4) t4 = &fp4_tables();
        for (; u < end; ++u) {
            if (b == 0 && prefetch_k >= 0 && m < prefetch_rows) {
                const char* p =
                    static_cast<const char*>(w->data) + bytes((prefetch_row0 + m) * w->cols + prefetch_k);
                for (int64_t l = 0; l < bytes(prefetch_kc); l += 64) _mm_prefetch(p + l, _MM_HINT_T1);
            }
            uint16_t* dst = panel + m * kAmxBf16Kc + b * kQBlock;
            if constexpr (F == PanelFormat::kFp8) {
                const __m512i sign = _mm512_set1_epi8(static_cast<char>(0x80));
                const uint8_t* code = src[m] + b * kQBlock;
                const uint8_t* tab = t8->tab[srow[m][scol[b]]][0];
                if (tab != loaded) {
                    h0 = _mm512_load_si512(tab);
                    h1 = _mm512_load_si512(tab + 64);
                    l0 = _mm512_load_si512(tab + 128);
                    l1 = _mm512_load_si512(tab + 192);
                    loaded = tab;
                }
                for (int64_t q = 0; q < kQBlock; q += 64) {
                    const __m512i c = _mm512_loadu_si512(code + q);
                    const __m512i hi =
                        _mm512_ternarylogic_epi32(_mm512_permutex2var_epi8(h0, c, h1), c, sign, 0xf8);
                    const __m512i lo = _mm512_permutex2var_epi8(l0, c, l1);
                    _mm512_store_si512(dst + q, _mm512_unpacklo_epi8(lo, hi));
                    _mm512_store_si512(dst + q + 32, _mm512_unpackhi_epi8(lo, hi));
                }
            } else if constexpr (F == PanelFormat::kBf16) {
                const auto* v = reinterpret_cast<const uint16_t*>(src[m]) + b * kQBlock;
                for (int64_t q = 0; q < kQBlock; q += 32)
                    _mm512_store_si512(dst + q, _mm512_loadu_si512(v + q));
            } else {
                const uint8_t* code = src[m] + b * kQBlock / 2;
                const int64_t* sc = scol + b * 4;
                for (int64_t q = 0; q < kQBlock; q += 64) {
                    // word i = byte i of 32 code bytes; (w | w << 4) & 0x0f0f puts its low nibble (column 2i)
                    // in the word's low byte and its high nibble (column 2i + 1) in the high byte
                    const __m512i wb = _mm512_cvtepu8_epi16(
                        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(code + q / 2)));
                    const __m512i nib = _mm512_ternarylogic_epi32(wb, _mm512_slli_epi16(wb, 4),
                                                                  _mm512_set1_epi16(0x0f0f), 0xa8);
                    const __m512i i0 = _mm512_cvtepu8_epi16(_mm512_castsi512_si256(nib));
                    const __m512i i1 = _mm512_cvtepu8_epi16(_mm512_extracti64x4_epi64(nib, 1));
                    const __m512i t0 = _mm512_load_si512(t4->tab[srow[m][sc[q / 32]]]);
                    const __m512i t1 = _mm512_load_si512(t4->tab[srow[m][sc[q / 32 + 1]]]);
                    _mm512_store_si512(dst + q, _mm512_permutexvar_epi16(i0, t0));
                    _mm512_store_si512(dst + q + 32, _mm512_permutexvar_epi16(i1, t1));
                }
            }
            if (++m == kAmxBf16RowTile) {
                m = 0;
                ++b;
            }
        }
        unit = u;
        cur_m = m;
        cur_b = b;
    }
};

// The passes of output rows [r0, r1) (relative to a.row_begin; 32-row panels x kAmxBf16Kc columns) in
// order, each pass's panel decoded while the one before it computes: pass(panel, rt, rows, k0, kc, dec) runs
// with the next pass's decode started in dec (the callee spreads dec.run() between its tile instructions;
// what it leaves is finished after it). The two panels [32, kAmxBf16Kc] BF16 lie at `space` (64-byte aligned
// up: kAmxBf16RowTile x kAmxBf16Kc + 16 floats); the tiles are configured before and released after.
template <PanelFormat F, class Pass>
void for_each_pass(const MatmulArgs& a, int64_t r0, int64_t r1, float* space, const Pass& pass) {
    const core::Weight& w = *a.w;
    auto* buf = reinterpret_cast<uint16_t*>((reinterpret_cast<uintptr_t>(space) + 63) & ~uintptr_t{63});
    uint16_t* panels[2] = {buf, buf + kAmxBf16RowTile * kAmxBf16Kc};
    amx_configure_16x64();
    const int64_t passes_per_panel = (w.cols + kAmxBf16Kc - 1) / kAmxBf16Kc;
    const int64_t passes = (r1 - r0 + kAmxBf16RowTile - 1) / kAmxBf16RowTile * passes_per_panel;
    auto place = [&](int64_t s, int64_t* rt, int64_t* rows, int64_t* k0, int64_t* kc) {
        *rt = r0 + s / passes_per_panel * kAmxBf16RowTile;
        *rows = min64(kAmxBf16RowTile, r1 - *rt);
        *k0 = s % passes_per_panel * kAmxBf16Kc;
        *kc = min64(kAmxBf16Kc, w.cols - *k0);
    };
    Decoder<F> dec;
    dec.w = &w;
    int64_t rt = 0, rows = 0, k0 = 0, kc = 0;
    place(0, &rt, &rows, &k0, &kc);
    dec.start(a.row_begin + rt, rows, k0, kc, panels[0]);
    dec.prefetch_k = -1;
    dec.run(dec.units);
    for (int64_t s = 0; s < passes; ++s) {
        place(s, &rt, &rows, &k0, &kc);
        if (s + 1 < passes) {
            int64_t nrt = 0, nrows = 0, nk0 = 0, nkc = 0;
            place(s + 1, &nrt, &nrows, &nk0, &nkc);
            dec.start(a.row_begin + nrt, nrows, nk0, nkc, panels[(s + 1) % 2]);
            dec.prefetch_k = -1;
            if (s + 2 < passes) {
                int64_t prt = 0, prows = 0, pk0 = 0, pkc = 0;
                place(s + 2, &prt, &prows, &pk0, &pkc);
                dec.prefetch_row0 = a.row_begin + prt;
                dec.prefetch_rows = prows;
                dec.prefetch_k = pk0;
                dec.prefetch_kc = pkc;
            }
        } else {
            dec.units = dec.unit = 0;
        }
        pass(static_cast<const uint16_t*>(panels[s % 2]), rt, rows, k0, kc, dec);
        dec.run(dec.units);
    }
    _tile_release();
}

} // namespace deepinfer::kernels::cpu::detail::amx_bf16_panel
