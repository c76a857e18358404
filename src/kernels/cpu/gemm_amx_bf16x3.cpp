// The exact GEMM on AMX-BF16 tiles (gemm_amx_bf16.h, "The exact GEMM on AMX-BF16 tiles"): activations split
// into three exact BF16 pieces, weights decoded exactly into BF16 panels (gemm_amx_bf16_panel.h), per 32
// output rows and 256 columns one panel decoded once and run against every 16-token group of the call (the
// group's four C tiles loaded from and stored to scratch around it), the next panel decoded between the
// tile instructions. Compiled with -mamx-tile -mamx-bf16 -mavx512bf16 -mavx512vbmi; reached only where
// amx_bf16_supported().

#include <immintrin.h>

#include <cstdint>

#include "core/weight.h"
#include "kernels/cpu/gemm_amx_bf16.h"
#include "kernels/cpu/gemm_amx_bf16_panel.h"
#include "kernels/cpu/transpose_avx512.h"

namespace deepinfer::kernels::cpu::detail::gemm_amx_bf16x3 {
namespace {

using namespace amx_bf16_panel;

// f = p[0] + p[1] + p[2] exactly, each p a BF16 value: p[0] is f with its low 16 bits cleared (the top 8
// significant bits), r = f - p[0] is exact (the low 16 bits' value), p[1] is r's top 8 significant bits and
// p[2] = r - p[1] the rest (at most 8 significant bits). Infinities and NaNs are p[0] alone.
inline void split3(__m512 f, __m512 p[3]) {
    const __m512i bits = _mm512_castps_si512(f), top = _mm512_set1_epi32(static_cast<int>(0xffff0000u)),
                  exp = _mm512_set1_epi32(0x7f800000);
    const __mmask16 special = _mm512_cmpeq_epi32_mask(_mm512_and_si512(bits, exp), exp);
    p[0] = _mm512_mask_blend_ps(special, _mm512_castsi512_ps(_mm512_and_si512(bits, top)), f);
    const __m512 r = _mm512_maskz_sub_ps(static_cast<__mmask16>(~special), f, p[0]);
    p[1] = _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(r), top));
    p[2] = _mm512_sub_ps(r, p[1]);
}

// xb3 for groups [g0, g1): per 16 tokens, piece and 64 columns, each token's two 32-position chunks of the
// piece (exact in BF16, so vcvtne2ps2bf16 does not round them) transposed 16 x 16 into 16 pair rows.
template <bool kFp8Order, int P> void prepare(const MatmulArgs& a, int64_t g0, int64_t g1, uint16_t* xb3) {
    const int64_t cols = a.w->cols, piece = 16 * cols;
    for (int64_t g = g0; g < g1; ++g) {
        for (int64_t c0 = 0; c0 < cols; c0 += 64) {
            for (int p = 0; p < P; ++p) {
                __m512 r[2][16];
                for (int64_t i = 0; i < 16; ++i) {
                    __m512i ch[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()};
                    if (16 * g + i < a.n) {
                        const float* x = a.x + (16 * g + i) * a.ldx + c0;
                        __m512 f[4];
                        for (int q = 0; q < 4; ++q) {
                            if constexpr (P == 1) { // the activation itself, rounded to nearest even
                                f[q] = _mm512_loadu_ps(x + 16 * q);
                            } else {
                                __m512 s[3];
                                split3(_mm512_loadu_ps(x + 16 * q), s);
                                f[q] = s[p];
                            }
                        }
                        to_bf16_chunks<kFp8Order>(f, ch);
                    }
                    r[0][i] = _mm512_castsi512_ps(ch[0]);
                    r[1][i] = _mm512_castsi512_ps(ch[1]);
                }
                uint16_t* dst = xb3 + (P * g + p) * piece;
                for (int h = 0; h < 2; ++h) {
                    transpose16(r[h]);
                    for (int q = 0; q < 16; ++q) // pair row c0 / 2 + 16 h + q
                        _mm512_storeu_ps(reinterpret_cast<float*>(dst + (c0 / 2 + 16 * h + q) * 32), r[h][q]);
                }
            }
        }
    }
}

// C tiles 0..n-1 (n = 2 or 4) of a pass, kept at c + 256 t between passes: all four zeroed on the first
// pass, else loaded when spilled (`load`), else left in the tile unit; and stored back.
inline void c_tiles_start(bool first, bool load, const float* c, int n) {
    if (first) {
        _tile_zero(0);
        _tile_zero(1);
        _tile_zero(2);
        _tile_zero(3);
    } else if (load) {
        _tile_loadd(0, c, 64);
        _tile_loadd(1, c + 256, 64);
        if (n == 4) {
            _tile_loadd(2, c + 512, 64);
            _tile_loadd(3, c + 768, 64);
        }
    }
}
inline void c_tiles_store(float* c, int n) {
    _tile_stored(0, c, 64);
    _tile_stored(1, c + 256, 64);
    if (n == 4) {
        _tile_stored(2, c + 512, 64);
        _tile_stored(3, c + 768, 64);
    }
}

// One panel pass (rows of `panel` [32, kAmxBf16Kc], columns [k0, k0 + kc)) for every group: tiles 0-1 hold
// the first piece's sums (rows 0-15, 16-31), 2-3 the other two pieces', 4-5 the panel's halves, 6-7 the
// pieces' B tiles. `first`: the C tiles start at zero; otherwise from scratch, where they go back after the
// pass (a lone group keeps them in the tile unit from its first pass to its last). `last`: the two sums added
// and written to y. dec.run() between the column steps.
template <class Dec>
void panel_pass(const MatmulArgs& a, const uint16_t* panel, int64_t kc, int64_t k0, const uint16_t* xb3,
                int64_t groups, bool first, bool last, int64_t rt, int64_t rows, float* cacc, Dec& dec) {
    const int64_t astride = kAmxBf16Kc * 2, piece = 16 * a.w->cols;
    const int64_t steps = kc / 32, per_step = (dec.units + steps * groups - 1) / (steps * groups);
    for (int64_t g = 0; g < groups; ++g) {
        float* c = cacc + g * 1024;             // [4][16][16]: tile t at c + 256 t
        c_tiles_start(first, groups > 1, c, 4); // one group keeps its C tiles in the tile unit
        const uint16_t* b0 = xb3 + 3 * g * piece + k0 * 16;
        const uint16_t *b1 = b0 + piece, *b2 = b1 + piece;
        for (int64_t j = 0; j < kc; j += 32) {
            _tile_loadd(4, panel + j, astride);
            _tile_loadd(6, b0 + j * 16, 64);
            _tile_dpbf16ps(0, 4, 6);
            _tile_loadd(5, panel + 16 * kAmxBf16Kc + j, astride);
            _tile_loadd(7, b1 + j * 16, 64);
            _tile_dpbf16ps(2, 4, 7);
            _tile_dpbf16ps(1, 5, 6);
            _tile_dpbf16ps(3, 5, 7);
            _tile_loadd(6, b2 + j * 16, 64);
            _tile_dpbf16ps(2, 4, 6);
            _tile_dpbf16ps(3, 5, 6);
            dec.run(per_step);
        }
        if (groups == 1 && !last) continue;
        c_tiles_store(c, 4);
        if (last) {
            // c [0, 512) = [32 rows, 16 tokens] of the first piece's sums, [512, 1024) the others'
            for (int64_t m = 0; m < kAmxBf16RowTile; ++m)
                _mm512_storeu_ps(c + m * 16, _mm512_add_ps(_mm512_loadu_ps(c + m * 16),
                                                           _mm512_loadu_ps(c + 512 + m * 16)));
            const int64_t cnt = min64(16, a.n - 16 * g);
            store_transposed(c, rows, cnt, 16, a.y + 16 * g * a.ldy + rt, a.ldy);
        }
    }
}

// One panel pass of the one-piece GEMM (Numerics::kFast: the activations rounded to BF16): groups in pairs,
// tiles 0-1 the first group's sums (rows 0-15, 16-31), 2-3 the second's, 4-5 the panel's halves, 6-7 the two
// groups' B tiles; 4 tdpbf16ps per 32 columns. C tiles from / to scratch around the pass (a lone group
// keeps them in the tile unit); `last`: written to y.
template <class Dec>
void panel_pass1(const MatmulArgs& a, const uint16_t* panel, int64_t kc, int64_t k0, const uint16_t* xb,
                 int64_t groups, bool first, bool last, int64_t rt, int64_t rows, float* cacc, Dec& dec) {
    const int64_t astride = kAmxBf16Kc * 2, piece = 16 * a.w->cols;
    const int64_t steps = kc / 32, pairs = (groups + 1) / 2,
                  per_step = (dec.units + steps * pairs - 1) / (steps * pairs);
    for (int64_t g = 0; g < groups; g += 2) {
        const bool two = g + 1 < groups;
        float* c = cacc + g * 512; // per group [2][16][16]
        c_tiles_start(first, groups > 1, c, two ? 4 : 2);
        const uint16_t* b0 = xb + g * piece + k0 * 16;
        const uint16_t* b1 = b0 + piece;
        for (int64_t j = 0; j < kc; j += 32) {
            _tile_loadd(4, panel + j, astride);
            _tile_loadd(6, b0 + j * 16, 64);
            _tile_dpbf16ps(0, 4, 6);
            _tile_loadd(5, panel + 16 * kAmxBf16Kc + j, astride);
            _tile_dpbf16ps(1, 5, 6);
            if (two) {
                _tile_loadd(7, b1 + j * 16, 64);
                _tile_dpbf16ps(2, 4, 7);
                _tile_dpbf16ps(3, 5, 7);
            }
            dec.run(per_step);
        }
        if (groups == 1 && !last) continue;
        c_tiles_store(c, two ? 4 : 2);
        if (last)
            for (int64_t h = 0; h < (two ? 2 : 1); ++h)
                store_transposed(c + 512 * h, rows, min64(16, a.n - 16 * (g + h)), 16,
                                 a.y + 16 * (g + h) * a.ldy + rt, a.ldy);
    }
}

// The passes (32-row panel, 256 columns) in order (for_each_pass), each decoded while the one before it
// computes.
template <PanelFormat F, int P>
void gemm(const MatmulArgs& a, int64_t r0, int64_t r1, const uint16_t* xb3, int64_t groups, float* scratch) {
    const core::Weight& w = *a.w;
    float* cacc = scratch; // [groups][4][16][16] (P = 3), [groups][2][16][16] (P = 1)
    for_each_pass<F>(
        a, r0, r1, cacc + groups * 1024,
        [&](const uint16_t* panel, int64_t rt, int64_t rows, int64_t k0, int64_t kc, Decoder<F>& dec) {
            if constexpr (P == 3)
                panel_pass(a, panel, kc, k0, xb3, groups, k0 == 0, k0 + kc == w.cols, rt, rows, cacc, dec);
            else
                panel_pass1(a, panel, kc, k0, xb3, groups, k0 == 0, k0 + kc == w.cols, rt, rows, cacc, dec);
        });
}

} // namespace
} // namespace deepinfer::kernels::cpu::detail::gemm_amx_bf16x3

namespace deepinfer::kernels::cpu::detail {
AmxBf16x3Table avx512_amx_bf16x3_table() {
    using amx_bf16_panel::PanelFormat;
    AmxBf16x3Table t;
    t.prepare_fp8 = &gemm_amx_bf16x3::prepare<true, 3>;
    t.prepare_cols = &gemm_amx_bf16x3::prepare<false, 3>;
    t.fp8 = &gemm_amx_bf16x3::gemm<PanelFormat::kFp8, 3>;
    t.bf16 = &gemm_amx_bf16x3::gemm<PanelFormat::kBf16, 3>;
    t.fp4 = &gemm_amx_bf16x3::gemm<PanelFormat::kFp4, 3>;
    t.prepare1_fp8 = &gemm_amx_bf16x3::prepare<true, 1>;
    t.prepare1_cols = &gemm_amx_bf16x3::prepare<false, 1>;
    t.fp8_1 = &gemm_amx_bf16x3::gemm<PanelFormat::kFp8, 1>;
    t.bf16_1 = &gemm_amx_bf16x3::gemm<PanelFormat::kBf16, 1>;
    return t;
}
} // namespace deepinfer::kernels::cpu::detail
