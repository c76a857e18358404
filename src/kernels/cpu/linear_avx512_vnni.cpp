// Numerics::kFast on AVX-512 VNNI: the blocked GEMM for FP4 e2m1 weights (group 32) in int8. Weights: e2m1
// x 2 is an exact int8 in [-12, 12] (vpshufb on a 16-entry table), the group scale / 2 kept in F32.
// Activations: int8 per token per 128 columns (scale amax / 127, round to nearest even), stored +128 as u8
// for vpdpbusd (u8 x s8); the offset comes back out through -128 * sum(w) per group, which seeds each
// group's int32 accumulator. Compiled with -mavx512vnni; reached only when the CPU reports it.

#include <immintrin.h>

#include <cstdint>

#include "core/weight.h"
#include "kernels/cpu/block_amax_avx512.h"
#include "kernels/cpu/linear_kernels.h"

namespace deepinfer::kernels::cpu::detail::avx512vnni {
namespace {

inline int64_t min64(int64_t a, int64_t b) {
    return a < b ? a : b;
}
inline float e8m0(uint8_t s) {
    const uint32_t b = s == 0 ? 0x00400000u : s == 255 ? 0x7fc00000u : static_cast<uint32_t>(s) << 23;
    float f;
    __builtin_memcpy(&f, &b, 4);
    return f;
}

#include "kernels/cpu/gemv_int8_impl.h" // quantize_gemv, gemv_q (vpdpbusd here)

// Panel of up to kQRowTile rows x kQBlock columns: int8 weights, and per (row, 32-column group) the scale
// and the offset correction.
struct QPanel {
    int8_t* w;     // [kQRowTile, kQBlock]
    float* scale;  // [kQRowTile, 4]
    int32_t* corr; // [kQRowTile, 4]
};

void decode_fp4_block(const core::Weight& w, int64_t r, int64_t kb, int64_t m, const QPanel& p) {
    const __m128i table = _mm_setr_epi8(0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12);
    const __m128i low = _mm_set1_epi8(0x0f), ones8 = _mm_set1_epi8(1), ones16 = _mm_set1_epi16(1);
    const uint8_t* src = static_cast<const uint8_t*>(w.data) + r * (w.cols / 2) + kb * (kQBlock / 2);
    const uint8_t* srow = w.scale + r * (w.cols / 32) + kb * (kQBlock / 32); // groups of 32, cols % 128 == 0
    for (int g = 0; g < 4; ++g) {
        const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + g * 16));
        const __m128i lo = _mm_and_si128(b, low), hi = _mm_and_si128(_mm_srli_epi16(b, 4), low);
        const __m128i v0 = _mm_shuffle_epi8(table, _mm_unpacklo_epi8(lo, hi));
        const __m128i v1 = _mm_shuffle_epi8(table, _mm_unpackhi_epi8(lo, hi));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(p.w + m * kQBlock + g * 32), v0);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(p.w + m * kQBlock + g * 32 + 16), v1);
        const __m128i s16 = _mm_add_epi16(_mm_maddubs_epi16(ones8, v0), _mm_maddubs_epi16(ones8, v1));
        __m128i s32 = _mm_madd_epi16(s16, ones16);
        s32 = _mm_add_epi32(s32, _mm_shuffle_epi32(s32, 0x4e));
        s32 = _mm_add_epi32(s32, _mm_shuffle_epi32(s32, 0xb1));
        p.corr[m * 4 + g] = -128 * _mm_cvtsi128_si32(s32);
        p.scale[m * 4 + g] = 0.5f * e8m0(srow[g]);
    }
}

// ct [MR, ld] += panel rows x tokens over one 128-column block: per 32-column group an int32 accumulator
// per (row, token) seeded with the offset correction, converted and scaled into an F32 block sum, which
// is scaled by the tokens' activation scale into ct.
template <int MR, int NV>
void micro_q(const QPanel& p, int64_t m0, const uint8_t* xq, int64_t n_pad, const float* xs, float* ct) {
    __m512 blk[MR][NV];
    for (int m = 0; m < MR; ++m)
        for (int v = 0; v < NV; ++v) blk[m][v] = _mm512_setzero_ps();
    for (int g = 0; g < 4; ++g) {
        __m512i acc[MR][NV];
        for (int m = 0; m < MR; ++m)
            for (int v = 0; v < NV; ++v) acc[m][v] = _mm512_set1_epi32(p.corr[(m0 + m) * 4 + g]);
        for (int k4 = 0; k4 < 8; ++k4) {
            __m512i xv[NV];
            for (int v = 0; v < NV; ++v) xv[v] = _mm512_loadu_si512(xq + ((g * 8 + k4) * n_pad + v * 16) * 4);
            for (int m = 0; m < MR; ++m) {
                int32_t wd;
                __builtin_memcpy(&wd, p.w + (m0 + m) * kQBlock + g * 32 + k4 * 4, 4);
                const __m512i wb = _mm512_set1_epi32(wd);
                for (int v = 0; v < NV; ++v) acc[m][v] = _mm512_dpbusd_epi32(acc[m][v], xv[v], wb);
            }
        }
        for (int m = 0; m < MR; ++m) {
            const __m512 s = _mm512_set1_ps(p.scale[(m0 + m) * 4 + g]);
            for (int v = 0; v < NV; ++v)
                blk[m][v] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc[m][v]), s, blk[m][v]);
        }
    }
    for (int v = 0; v < NV; ++v) {
        const __m512 xsv = _mm512_loadu_ps(xs + v * 16);
        for (int m = 0; m < MR; ++m) {
            float* c = ct + m * n_pad + v * 16;
            _mm512_storeu_ps(c, _mm512_fmadd_ps(blk[m][v], xsv, _mm512_loadu_ps(c)));
        }
    }
}

template <int MR>
void micro_q_nv(int nv, const QPanel& p, int64_t m0, const uint8_t* xq, int64_t n_pad, const float* xs,
                float* ct) {
    nv == 2 ? micro_q<MR, 2>(p, m0, xq, n_pad, xs, ct) : micro_q<MR, 1>(p, m0, xq, n_pad, xs, ct);
}

void gemm_q(const MatmulArgs& a, int64_t r0, int64_t r1, const uint8_t* xq, const float* xs, int64_t n_pad,
            float* scratch) {
    const core::Weight& w = *a.w;
    float* ct = scratch;                   // [kQRowTile, n_pad]
    float* scale = ct + kQRowTile * n_pad; // [kQRowTile, 4]
    int32_t* corr = reinterpret_cast<int32_t*>(scale + kQRowTile * 4);
    int8_t* wq = reinterpret_cast<int8_t*>(corr + kQRowTile * 4); // [kQRowTile, kQBlock]
    const QPanel p{wq, scale, corr};
    for (int64_t rt = r0; rt < r1; rt += kQRowTile) {
        const int64_t rows = min64(kQRowTile, r1 - rt);
        for (int64_t i = 0; i < rows * n_pad; ++i) ct[i] = 0.0f;
        for (int64_t kb = 0; kb < w.cols / kQBlock; ++kb) {
            for (int64_t m = 0; m < rows; ++m) decode_fp4_block(w, a.row_begin + rt + m, kb, m, p);
            for (int64_t i0 = 0; i0 < n_pad; i0 += 32) {
                const int nv = static_cast<int>(min64(2, (n_pad - i0) / 16));
                const uint8_t* xqb = xq + (kb * (kQBlock / 4) * n_pad + i0) * 4;
                const float* xsb = xs + kb * n_pad + i0;
                for (int64_t m0 = 0; m0 < rows; m0 += 4) {
                    float* c = ct + m0 * n_pad + i0;
                    switch (min64(4, rows - m0)) {
                    case 1:
                        micro_q_nv<1>(nv, p, m0, xqb, n_pad, xsb, c);
                        break;
                    case 2:
                        micro_q_nv<2>(nv, p, m0, xqb, n_pad, xsb, c);
                        break;
                    case 3:
                        micro_q_nv<3>(nv, p, m0, xqb, n_pad, xsb, c);
                        break;
                    default:
                        micro_q_nv<4>(nv, p, m0, xqb, n_pad, xsb, c);
                        break;
                    }
                }
            }
        }
        for (int64_t i = 0; i < a.n; ++i)
            for (int64_t m = 0; m < rows; ++m) a.y[i * a.ldy + (rt + m)] = ct[m * n_pad + i];
    }
}

// Tokens [t0, t1) of xq [cols / 4, n_pad, 4] (u8 = int8 + 128) and xs [cols / kQBlock, n_pad]; tokens past
// a.n are zero.
void quantize(const MatmulArgs& a, int64_t t0, int64_t t1, int64_t n_pad, uint8_t* xq, float* xs) {
    const int64_t cols = a.w->cols;
    for (int64_t i = t0; i < t1; ++i) {
        for (int64_t kb = 0; kb < cols / kQBlock; ++kb) {
            if (i >= a.n) {
                for (int64_t k4 = kb * (kQBlock / 4); k4 < (kb + 1) * (kQBlock / 4); ++k4)
                    __builtin_memset(xq + (k4 * n_pad + i) * 4, 0x80, 4);
                xs[kb * n_pad + i] = 0.0f;
                continue;
            }
            const float* x = a.x + i * a.ldx + kb * kQBlock;
            const float amax = block_amax(x);
            const __m512 inv = _mm512_set1_ps(amax > 0.0f ? 127.0f / amax : 0.0f);
            xs[kb * n_pad + i] = amax / 127.0f;
            for (int c = 0; c < kQBlock; c += 16) {
                const __m512i q = _mm512_add_epi32(
                    _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(x + c), inv)), _mm512_set1_epi32(128));
                alignas(16) uint8_t b[16];
                _mm_store_si128(reinterpret_cast<__m128i*>(b), _mm512_cvtusepi32_epi8(q));
                const int64_t k4 = (kb * kQBlock + c) / 4;
                for (int j = 0; j < 4; ++j) __builtin_memcpy(xq + ((k4 + j) * n_pad + i) * 4, b + 4 * j, 4);
            }
        }
    }
}

} // namespace
} // namespace deepinfer::kernels::cpu::detail::avx512vnni

namespace deepinfer::kernels::cpu::detail {
Int8Table avx512_vnni_table() {
    Int8Table t;
    t.quantize = &avx512vnni::quantize;
    t.gemm = &avx512vnni::gemm_q;
    t.quantize_gemv = &avx512vnni::quantize_gemv;
    t.gemv = &avx512vnni::gemv_q;
    return t;
}
} // namespace deepinfer::kernels::cpu::detail
