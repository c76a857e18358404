// The fast GEMM of FP8-block and BF16 weights on AMX-BF16 tiles (gemm_amx_bf16.h). Per 32 output rows and
// 256 columns the weights are decoded into a BF16 panel (FP8: two byte tables per block scale, vpermi2b on
// the 7-bit magnitude, the sign or'ed in, high and low bytes interleaved into words; BF16: copied), then
// every group of 32 tokens runs 2 x 2 C tiles (16 rows x 16 tokens, F32) over the panel's 8 column steps of
// 32, the C tiles kept in the output tile between panel passes. Compiled with -mamx-tile -mamx-bf16
// -mavx512bf16 -mavx512vbmi; reached only where amx_bf16_supported().

#include "kernels/cpu/gemm_amx_bf16.h"

#include <immintrin.h>

#include <cstdint>

#include "core/weight.h"
#include "kernels/cpu/gemm_amx_bf16_panel.h"
#include "kernels/cpu/transpose_avx512.h"

namespace deepinfer::kernels::cpu::detail::gemm_amx_bf16 {
namespace {

using namespace amx_bf16_panel;

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

// The passes (32-row panel, 256 columns) in order (for_each_pass), each decoded while the one before it
// computes.
template <PanelFormat F>
void gemm(const MatmulArgs& a, int64_t r0, int64_t r1, const uint16_t* xb, int64_t n_pad, float* scratch) {
    const core::Weight& w = *a.w;
    float* ct = scratch;                       // [32, n_pad]
    float* ct2 = ct + kAmxBf16RowTile * n_pad; // [32, 16]
    for_each_pass<F>(
        a, r0, r1, ct2 + kAmxBf16RowTile * 16,
        [&](const uint16_t* panel, int64_t rt, int64_t rows, int64_t k0, int64_t kc, Decoder<F>& dec) {
            const bool last = k0 + kc == w.cols;
            panel_pass(panel, kc, xb, k0, n_pad, k0 == 0, last, ct, ct2, dec);
            if (last) {
                if (n_pad == 16) // the odd column steps' sums
                    for (int64_t m = 0; m < kAmxBf16RowTile; ++m)
                        _mm512_storeu_ps(ct + m * 16, _mm512_add_ps(_mm512_loadu_ps(ct + m * 16),
                                                                    _mm512_loadu_ps(ct2 + m * 16)));
                store_transposed(ct, rows, a.n, n_pad, a.y + rt, a.ldy);
            }
        });
}

} // namespace
} // namespace deepinfer::kernels::cpu::detail::gemm_amx_bf16

namespace deepinfer::kernels::cpu::detail {
AmxBf16Table avx512_amx_bf16_table() {
    AmxBf16Table t;
    t.prepare_fp8 = &gemm_amx_bf16::prepare<true>;
    t.prepare_bf16 = &gemm_amx_bf16::prepare<false>;
    t.fp8 = &gemm_amx_bf16::gemm<amx_bf16_panel::PanelFormat::kFp8>;
    t.bf16 = &gemm_amx_bf16::gemm<amx_bf16_panel::PanelFormat::kBf16>;
    return t;
}
} // namespace deepinfer::kernels::cpu::detail
