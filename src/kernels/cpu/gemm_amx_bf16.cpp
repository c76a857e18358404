// The fast GEMM of FP8-block and BF16 weights on AMX-BF16 tiles (gemm_amx_bf16.h). Per 32 output rows and
// 256 columns the weights are decoded into a BF16 panel (FP8: two byte tables per block scale, vpermi2b on
// the 7-bit magnitude, the sign or'ed in, high and low bytes interleaved into words; BF16: copied), then
// every group of 32 tokens runs 2 x 2 C tiles (16 rows x 16 tokens, F32) over the panel's 8 column steps of
// 32, the C tiles kept in the output tile between panel passes. Compiled with -mamx-tile -mamx-bf16
// -mavx512bf16 -mavx512vbmi; reached only where amx_bf16_supported().

#include "kernels/cpu/gemm_amx_bf16.h"

#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <cstring>

#include "core/weight.h"
#include "kernels/cpu/amx_tiles.h"
#include "kernels/cpu/transpose_avx512.h"

namespace deepinfer::kernels::cpu::detail::gemm_amx_bf16 {
namespace {

inline int64_t min64(int64_t a, int64_t b) {
    return a < b ? a : b;
}

// tab[s]: the BF16 bits of e4m3 magnitude code c (0..127) times 2^(s - 127), high bytes then low bytes.
// Exact for scales amx_bf16_fp8_scale_ok accepts: 3 mantissa bits fit BF16's 7, and the exponents stay in
// the normal range. Code 0x7f (e4m3's NaN) is a BF16 NaN.
struct Fp8Bf16Tables {
    alignas(64) uint8_t tab[256][2][128];
};
const Fp8Bf16Tables& fp8_tables() {
    static const Fp8Bf16Tables t = [] {
        Fp8Bf16Tables k{};
        for (int s = 0; s < 256; ++s) {
            if (!amx_bf16_fp8_scale_ok(static_cast<uint8_t>(s))) continue;
            for (int c = 0; c < 128; ++c) {
                const int ef = c >> 3, mant = c & 7;
                uint16_t bits = 0x7fc0;
                if (c != 0x7f) {
                    // |value| = mant x 2^-9 (ef 0) or (8 + mant) x 2^(ef - 10); times 2^(s - 127)
                    const float v = ef == 0 ? std::ldexp(static_cast<float>(mant), -9 + s - 127)
                                            : std::ldexp(static_cast<float>(8 + mant), ef - 10 + s - 127);
                    uint32_t u;
                    std::memcpy(&u, &v, 4);
                    bits = static_cast<uint16_t>(u >> 16); // exact: the low 16 bits are zero
                }
                k.tab[s][0][c] = static_cast<uint8_t>(bits >> 8);
                k.tab[s][1][c] = static_cast<uint8_t>(bits & 0xff);
            }
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

// xb [cols / 2, n_pad, 2] for tokens [t0, t1) (multiples of 16): per 16 tokens and 64 columns, each token's
// two 32-position chunks (16 dwords each) transposed 16 x 16 into 16 pair rows of 16 tokens.
template <bool kFp8Order>
void prepare(const MatmulArgs& a, int64_t t0, int64_t t1, int64_t n_pad, uint16_t* xb) {
    const int64_t cols = a.w->cols;
    for (int64_t i0 = t0; i0 < t1; i0 += 16) {
        for (int64_t c0 = 0; c0 < cols; c0 += 64) {
            __m512 r[2][16];
            for (int64_t i = 0; i < 16; ++i) {
                __m512i ch[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()};
                if (i0 + i < a.n) {
                    const float* x = a.x + (i0 + i) * a.ldx + c0;
                    const __m512 f[4] = {_mm512_loadu_ps(x), _mm512_loadu_ps(x + 16), _mm512_loadu_ps(x + 32),
                                         _mm512_loadu_ps(x + 48)};
                    to_bf16_chunks<kFp8Order>(f, ch);
                }
                r[0][i] = _mm512_castsi512_ps(ch[0]);
                r[1][i] = _mm512_castsi512_ps(ch[1]);
            }
            for (int h = 0; h < 2; ++h) {
                transpose16(r[h]);
                // pair row p of this chunk: cols / 2 index c0 / 2 + 16 h + p
                for (int p = 0; p < 16; ++p)
                    _mm512_storeu_ps(reinterpret_cast<float*>(xb + ((c0 / 2 + 16 * h + p) * n_pad + i0) * 2),
                                     r[h][p]);
            }
        }
    }
}

// One pass's panel: weight rows [row0, row0 + rows) (panel rows past `rows` repeat its last row), columns
// [k0, k0 + kc), as BF16 rows of stride kAmxBf16Kc, decoded one (row, 128-column block) unit at a time so
// the decode of the next pass can be spread between the tile instructions of this one (the tile unit and
// the vector units then work at the same time). FP8: the block scale's two byte tables, vpermi2b on the
// 7-bit magnitude, the sign or'ed into the high byte, the bytes interleaved into words. BF16: copied.
// Each row's first unit prefetches the row's codes of the pass after (into L2).
template <bool kFp8> struct Decoder {
    static constexpr int64_t kMaxBlocks = kAmxBf16Kc / kQBlock;
    const core::Weight* w = nullptr;
    int64_t unit = 0, units = 0, blocks = 0, cur_m = 0, cur_b = 0; // the next unit: row cur_m, block cur_b
    int64_t prefetch_k = -1, prefetch_row0 = 0, prefetch_rows = 0, prefetch_kc = 0;
    uint16_t* panel = nullptr;
    const uint8_t* src[kAmxBf16RowTile] = {}; // each panel row's first code (FP8) or value (BF16) of the pass
    const uint8_t* srow[kAmxBf16RowTile] = {}; // FP8: each panel row's block-scale row
    int64_t scol[kMaxBlocks] = {};             // FP8: each 128-column block's scale column

    // No division per unit: the rows' addresses and scale rows are set here, once per pass.
    void start(int64_t row0, int64_t rows, int64_t k0, int64_t kc, uint16_t* dst) {
        panel = dst;
        unit = cur_m = cur_b = 0;
        blocks = kc / kQBlock;
        units = kAmxBf16RowTile * blocks;
        const int64_t esize = kFp8 ? 1 : 2;
        const auto* base = static_cast<const uint8_t*>(w->data);
        int64_t sr = 0, rem = 0;
        if constexpr (kFp8) {
            sr = row0 / w->block_rows;
            rem = row0 - sr * w->block_rows;
            for (int64_t b = 0; b < blocks; ++b) scol[b] = (k0 + b * kQBlock) / w->block_cols;
        }
        for (int64_t m = 0; m < kAmxBf16RowTile; ++m) {
            const int64_t r = row0 + min64(m, rows - 1);
            src[m] = base + (r * w->cols + k0) * esize;
            if constexpr (kFp8) {
                srow[m] = w->scale + sr * w->scale_cols();
                if (m + 1 < rows && ++rem == w->block_rows) {
                    rem = 0;
                    ++sr;
                }
            }
        }
    }
    // Units go block by block (all 32 rows of block 0, then of block 1): the rows of a panel share their
    // block scales (within one FP8 row block), so the four table vectors are reloaded only when the scale
    // changes. The loop keeps its state in locals (as members it was stored and reloaded per unit).
    void run(int64_t count) {
        int64_t u = unit, m = cur_m, b = cur_b;
        const int64_t end = min64(units, u + count);
        if (u >= end) return;
        [[maybe_unused]] const Fp8Bf16Tables& t = fp8_tables();
        [[maybe_unused]] const uint8_t* loaded = nullptr;
        [[maybe_unused]] __m512i h0, h1, l0, l1;
        const __m512i sign = _mm512_set1_epi8(static_cast<char>(0x80));
        const int64_t esize = kFp8 ? 1 : 2;
        for (; u < end; ++u) {
            if (b == 0 && prefetch_k >= 0 && m < prefetch_rows) {
                const char* p =
                    static_cast<const char*>(w->data) + ((prefetch_row0 + m) * w->cols + prefetch_k) * esize;
                for (int64_t l = 0; l < prefetch_kc * esize; l += 64) _mm_prefetch(p + l, _MM_HINT_T1);
            }
            uint16_t* dst = panel + m * kAmxBf16Kc + b * kQBlock;
            if constexpr (kFp8) {
                const uint8_t* code = src[m] + b * kQBlock;
                const uint8_t* tab = t.tab[srow[m][scol[b]]][0];
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
            } else {
                const auto* v = reinterpret_cast<const uint16_t*>(src[m]) + b * kQBlock;
                for (int64_t q = 0; q < kQBlock; q += 32)
                    _mm512_store_si512(dst + q, _mm512_loadu_si512(v + q));
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

// Tiles 0-3: C (rows 0-15 / 16-31 x tokens 0-15 / 16-31), 4-5: A (the panel's two 16-row halves, 32
// columns), 6-7: B (16 pair rows x 16 tokens, the two token groups), all 16 rows x 64 bytes
// (amx_configure_16x64).

// C tiles (+)= panel [32, kc] x xb's pair rows [k0 / 2, (k0 + kc) / 2), one group of 16 or 32 tokens, with
// dec.run() between the column steps (its whole pass spread over them). The C tiles stay in the tile unit
// from a panel's first pass (`first`: zeroed) to its last (`last`: stored to ct [32, n_pad]). 16 tokens run
// their two C tiles as four, even and odd column steps apart (one chain of tdpbf16ps per tile would wait
// on its latency), the odd ones stored to ct2 [32, 16] and added by the caller.
template <class Dec>
void panel_pass(const uint16_t* panel, int64_t kc, const uint16_t* xb, int64_t k0, int64_t n_pad, bool first,
                bool last, float* ct, float* ct2, Dec& dec) {
    const int64_t bstride = n_pad * 4, astride = kAmxBf16Kc * 2;
    const bool two = n_pad == 32;
    const int64_t steps = kc / 32, per_step = (dec.units + steps - 1) / steps;
    if (first) {
        _tile_zero(0);
        _tile_zero(1);
        _tile_zero(2);
        _tile_zero(3);
    }
    const uint16_t* b = xb + k0 / 2 * n_pad * 2;
    if (two) {
        for (int64_t j = 0; j < kc; j += 32) {
            _tile_loadd(4, panel + j, astride);
            _tile_loadd(6, b + j / 2 * n_pad * 2, bstride);
            _tile_dpbf16ps(0, 4, 6);
            _tile_loadd(5, panel + 16 * kAmxBf16Kc + j, astride);
            _tile_dpbf16ps(2, 5, 6);
            _tile_loadd(7, b + j / 2 * n_pad * 2 + 32, bstride);
            _tile_dpbf16ps(1, 4, 7);
            _tile_dpbf16ps(3, 5, 7);
            dec.run(per_step);
        }
    } else {
        for (int64_t j = 0; j < kc; j += 64) { // kc is a multiple of 128
            _tile_loadd(4, panel + j, astride);
            _tile_loadd(6, b + j / 2 * n_pad * 2, bstride);
            _tile_dpbf16ps(0, 4, 6);
            _tile_loadd(5, panel + 16 * kAmxBf16Kc + j, astride);
            _tile_dpbf16ps(2, 5, 6);
            _tile_loadd(4, panel + j + 32, astride);
            _tile_loadd(7, b + (j + 32) / 2 * n_pad * 2, bstride);
            _tile_dpbf16ps(1, 4, 7);
            _tile_loadd(5, panel + 16 * kAmxBf16Kc + j + 32, astride);
            _tile_dpbf16ps(3, 5, 7);
            dec.run(2 * per_step);
        }
    }
    dec.run(dec.units);
    if (last) {
        const int64_t cstride = n_pad * 4;
        _tile_stored(0, ct, cstride);
        _tile_stored(2, ct + 16 * n_pad, cstride);
        if (two) {
            _tile_stored(1, ct + 16, cstride);
            _tile_stored(3, ct + 16 * n_pad + 16, cstride);
        } else {
            _tile_stored(1, ct2, 64);
            _tile_stored(3, ct2 + 16 * 16, 64);
        }
    }
}

// The passes (32-row panel, 256 columns) in order, each decoded while the one before it computes.
template <bool kFp8>
void gemm(const MatmulArgs& a, int64_t r0, int64_t r1, const uint16_t* xb, int64_t n_pad, float* scratch) {
    const core::Weight& w = *a.w;
    float* ct = scratch;                       // [32, n_pad]
    float* ct2 = ct + kAmxBf16RowTile * n_pad; // [32, 16]
    auto* buf = reinterpret_cast<uint16_t*>((reinterpret_cast<uintptr_t>(ct2 + kAmxBf16RowTile * 16) + 63) &
                                            ~uintptr_t{63}); // two panels [32, Kc]
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
    Decoder<kFp8> dec;
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
        const bool last = k0 + kc == w.cols;
        panel_pass(panels[s % 2], kc, xb, k0, n_pad, k0 == 0, last, ct, ct2, dec);
        if (last) {
            if (n_pad == 16) // the odd column steps' sums
                for (int64_t m = 0; m < kAmxBf16RowTile; ++m)
                    _mm512_storeu_ps(ct + m * 16, _mm512_add_ps(_mm512_loadu_ps(ct + m * 16),
                                                                _mm512_loadu_ps(ct2 + m * 16)));
            store_transposed(ct, rows, a.n, n_pad, a.y + rt, a.ldy);
        }
    }
    _tile_release();
}

} // namespace
} // namespace deepinfer::kernels::cpu::detail::gemm_amx_bf16

namespace deepinfer::kernels::cpu::detail {
AmxBf16Table avx512_amx_bf16_table() {
    AmxBf16Table t;
    t.prepare_fp8 = &gemm_amx_bf16::prepare<true>;
    t.prepare_bf16 = &gemm_amx_bf16::prepare<false>;
    t.fp8 = &gemm_amx_bf16::gemm<true>;
    t.bf16 = &gemm_amx_bf16::gemm<false>;
    return t;
}
} // namespace deepinfer::kernels::cpu::detail
