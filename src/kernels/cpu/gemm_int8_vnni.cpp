// The fast (int8 VNNI) GEMM for FP8 e4m3 block weights (gemm_int8.h). Per weight row and 128-column block
// the 128 codes become int8 through a 128-entry byte table picked by the block's largest magnitude
// (vpermi2b on the 7-bit magnitude, the sign applied by a masked subtract), with one F32 scale (block scale
// x the table's power-of-two step) and the -128 x sum(q) correction that removes the activations' +128
// offset. The microkernel keeps 6 rows x 4 vectors of 16 tokens of int32 accumulators over the whole 128
// columns (one conversion per 128 multiply-adds per lane). Compiled with -mavx512vnni -mavx512vbmi;
// reached only when the CPU reports both (linear.cpp).

#include <immintrin.h>

#include <cstdint>

#include "core/weight.h"
#include "kernels/cpu/gemm_int8.h"

namespace deepinfer::kernels::cpu::detail::gemm_vnni {
namespace {

inline int64_t min64(int64_t a, int64_t b) {
    return a < b ? a : b;
}
inline float bits_f32(uint32_t b) {
    float f;
    __builtin_memcpy(&f, &b, 4);
    return f;
}
inline float e8m0(uint8_t s) {
    return bits_f32(s == 0 ? 0x00400000u : s == 255 ? 0x7fc00000u : static_cast<uint32_t>(s) << 23);
}

constexpr int kSteps = 15; // step_log2 in [-3, 11]

// tab[step + 3][c]: the int8 magnitude of 7-bit e4m3 magnitude code c at that step.
struct Fp8Tables {
    alignas(64) int8_t tab[kSteps][128];
};
const Fp8Tables& fp8_tables() {
    static const Fp8Tables t = [] {
        Fp8Tables k{};
        for (int s = 0; s < kSteps; ++s) {
            // A max code whose step is s - 3: exponent field s + 1 (s = 0 also covers exponent fields 0, 1).
            const auto max_code = static_cast<uint8_t>((s + 1) << 3);
            for (int c = 0; c < 128; ++c) k.tab[s][c] = fp8_requant_code(static_cast<uint8_t>(c), max_code);
        }
        return k;
    }();
    return t;
}

// Per (row, 32-column group g) a scale and a correction, stride 4 per row. A row whose 128 columns share
// one scale (FP8; FP4 whose group scales were folded into its int8) keeps it at [m * 4] (every group's
// entry holds it) and its correction split over the groups (the G = 1 kernel sums them).
struct Panel {
    int8_t* w;     // [kQRowTile, kQBlock]
    float* scale;  // [kQRowTile, 4]
    int32_t* corr; // [kQRowTile, 4]
};

inline uint8_t max_epu8(__m512i v) {
    __m256i y = _mm256_max_epu8(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1));
    __m128i z = _mm_max_epu8(_mm256_castsi256_si128(y), _mm256_extracti128_si256(y, 1));
    z = _mm_max_epu8(z, _mm_srli_si128(z, 8));
    z = _mm_max_epu8(z, _mm_srli_si128(z, 4));
    z = _mm_max_epu8(z, _mm_srli_si128(z, 2));
    z = _mm_max_epu8(z, _mm_srli_si128(z, 1));
    return static_cast<uint8_t>(_mm_cvtsi128_si32(z));
}

// One row's 128 codes at `src` (with block scale byte `s`) into panel row m; `next`: prefetch the row's
// next block, needed after one block of compute. The caller resolves the row and scale addresses once per
// panel (three 64-bit divisions per row and block were a fifth of the decode).
inline void decode_fp8_block(const Fp8Tables& t, const uint8_t* src, uint8_t s, bool next, int64_t m,
                             const Panel& p) {
    if (next) {
        _mm_prefetch(reinterpret_cast<const char*>(src + kQBlock), _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(src + kQBlock + 64), _MM_HINT_T0);
    }
    const __m512i b0 = _mm512_loadu_si512(src), b1 = _mm512_loadu_si512(src + 64);
    const __m512i mask = _mm512_set1_epi8(0x7f);
    const __m512i m0 = _mm512_and_si512(b0, mask), m1 = _mm512_and_si512(b1, mask);
    const uint8_t max_code = max_epu8(_mm512_max_epu8(m0, m1));
    const int ef = max_code >> 3; // fp8_requant_step_log2, inlined: (max(ef, 1)) - 4
    const int step = (ef > 1 ? ef : 1) - 4;
    const int8_t* tab = t.tab[step + 3];
    const __m512i lo = _mm512_load_si512(tab), hi = _mm512_load_si512(tab + 64),
                  zero = _mm512_setzero_si512();
    __m512i q0 = _mm512_permutex2var_epi8(lo, m0, hi), q1 = _mm512_permutex2var_epi8(lo, m1, hi);
    q0 = _mm512_mask_sub_epi8(q0, _mm512_movepi8_mask(b0), zero, q0);
    q1 = _mm512_mask_sub_epi8(q1, _mm512_movepi8_mask(b1), zero, q1);
    _mm512_storeu_si512(p.w + m * kQBlock, q0);
    _mm512_storeu_si512(p.w + m * kQBlock + 64, q1);
    const __m512i ones = _mm512_set1_epi8(1);
    const __m512i sum = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(zero, ones, q0), ones, q1);
    p.corr[m * 4] = -128 * _mm512_reduce_add_epi32(sum);
    p.corr[m * 4 + 1] = p.corr[m * 4 + 2] = p.corr[m * 4 + 3] = 0;
    p.scale[m * 4] = e8m0(s) * bits_f32(static_cast<uint32_t>(127 + step - 9) << 23);
}

// FP4 e2m1, 32-column groups: row r's columns [kb * 128, kb * 128 + 128) into panel row m as 2 x e2m1
// (an exact int8 in [-12, 12], vpshufb on a 16-entry table per 128-bit lane = per group, the 64 bytes'
// low / high nibbles interleaved back into column order by vpermi2b). When the 4 group scales are within
// 2^3 of the smallest, each group's table is shifted left by its difference (|q| <= 96: still exact) and
// the row has one scale (returns true); otherwise per-group scales.
bool decode_fp4_block(const core::Weight& w, int64_t r, int64_t kb, int64_t m, const Panel& p) {
    const uint8_t* src = static_cast<const uint8_t*>(w.data) + r * (w.cols / 2) + kb * (kQBlock / 2);
    const uint8_t* srow = w.scale + r * (w.cols / 32) + kb * 4; // cols % 128 == 0
    if ((kb + 1) * kQBlock < w.cols)
        _mm_prefetch(reinterpret_cast<const char*>(src + kQBlock / 2), _MM_HINT_T0);
    uint8_t lo_s = srow[0], hi_s = srow[0];
    for (int g = 1; g < 4; ++g) {
        lo_s = srow[g] < lo_s ? srow[g] : lo_s;
        hi_s = srow[g] > hi_s ? srow[g] : hi_s;
    }
    const bool fold = hi_s - lo_s <= 3 && lo_s != 0 && hi_s != 255;
    // The 16-entry table of 2 x e2m1 shifted left by 0..3, one per 128-bit lane; each group's lane picked.
    const __m512i tables = _mm512_setr_epi32(
        0x03020100, 0x0c080604, static_cast<int>(0xfdfeff00u), static_cast<int>(0xf4f8fafcu), 0x06040200,
        0x18100c08, static_cast<int>(0xfafcfe00u), static_cast<int>(0xe8f0f4f8u), 0x0c080400, 0x30201810,
        static_cast<int>(0xf4f8fc00u), static_cast<int>(0xd0e0e8f0u), 0x18100800, 0x60403020,
        static_cast<int>(0xe8f0f800u), static_cast<int>(0xa0c0d0e0u));
    // qword 2g, 2g + 1 of the index: 2 d_g, 2 d_g + 1 (d_g = s_g - lo_s when folding, else 0), built in
    // registers (a vector load of scalar stores stalls on store forwarding).
    int32_t s4;
    __builtin_memcpy(&s4, srow, 4);
    const __m128i pairs = _mm_unpacklo_epi8(_mm_cvtsi32_si128(s4), _mm_cvtsi32_si128(s4));
    const __m512i d = fold ? _mm512_sub_epi64(_mm512_cvtepu8_epi64(pairs), _mm512_set1_epi64(lo_s))
                           : _mm512_setzero_si512();
    const __m512i sel = _mm512_add_epi64(_mm512_slli_epi64(d, 1), _mm512_setr_epi64(0, 1, 0, 1, 0, 1, 0, 1));
    const __m512i table = _mm512_permutexvar_epi64(sel, tables);
    const __m512i b = _mm512_loadu_si512(src), low = _mm512_set1_epi8(0x0f);
    const __m512i qe = _mm512_shuffle_epi8(table, _mm512_and_si512(b, low));
    const __m512i qo = _mm512_shuffle_epi8(table, _mm512_and_si512(_mm512_srli_epi16(b, 4), low));
    // Column 2i is byte i's low nibble, 2i + 1 its high one.
    const __m512i idx0 =
        _mm512_set_epi8(95, 31, 94, 30, 93, 29, 92, 28, 91, 27, 90, 26, 89, 25, 88, 24, 87, 23, 86, 22, 85,
                        21, 84, 20, 83, 19, 82, 18, 81, 17, 80, 16, 79, 15, 78, 14, 77, 13, 76, 12, 75, 11,
                        74, 10, 73, 9, 72, 8, 71, 7, 70, 6, 69, 5, 68, 4, 67, 3, 66, 2, 65, 1, 64, 0);
    const __m512i idx1 = _mm512_add_epi8(idx0, _mm512_set1_epi8(32));
    const __m512i q0 = _mm512_permutex2var_epi8(qe, idx0, qo), q1 = _mm512_permutex2var_epi8(qe, idx1, qo);
    _mm512_storeu_si512(p.w + m * kQBlock, q0);
    _mm512_storeu_si512(p.w + m * kQBlock + 64, q1);
    // Sums for the correction: the row's total when folded (the G = 1 kernel adds the four entries), else
    // per group (int32 lanes 0-7 of s0 are group 0, 8-15 group 1; s1 likewise groups 2 and 3).
    const __m512i ones = _mm512_set1_epi8(1), zero = _mm512_setzero_si512();
    const __m512i s0 = _mm512_dpbusd_epi32(zero, ones, q0), s1 = _mm512_dpbusd_epi32(zero, ones, q1);
    int32_t* corr = p.corr + m * 4;
    float* scale = p.scale + m * 4;
    if (fold) {
        corr[0] = -128 * _mm512_reduce_add_epi32(_mm512_add_epi32(s0, s1));
        corr[1] = corr[2] = corr[3] = 0;
        scale[0] = scale[1] = scale[2] = scale[3] = 0.5f * e8m0(lo_s);
        return true;
    }
    corr[0] = -128 * _mm512_mask_reduce_add_epi32(0x00ff, s0);
    corr[1] = -128 * _mm512_mask_reduce_add_epi32(0xff00, s0);
    corr[2] = -128 * _mm512_mask_reduce_add_epi32(0x00ff, s1);
    corr[3] = -128 * _mm512_mask_reduce_add_epi32(0xff00, s1);
    for (int g = 0; g < 4; ++g) scale[g] = 0.5f * e8m0(srow[g]);
    return false;
}

// acc += the 64 u8 x s8 products of x and the int32 at w broadcast, summed by 4 (vpdpbusd with an embedded
// broadcast). Inline asm: GCC 12 copies the accumulator around every _mm512_dpbusd_epi32 and, past 16
// accumulators, spills them (see docs/kernels.md).
using Int32Unaligned = int32_t __attribute__((may_alias, aligned(1)));
inline __m512i dpbusd_bcst(__m512i acc, __m512i x, const int8_t* w) {
    asm("vpdpbusd %2%{1to16%}, %1, %0"
        : "+v"(acc)
        : "v"(x), "m"(*reinterpret_cast<const Int32Unaligned*>(w)));
    return acc;
}
// The same on 8 tokens (ymm): a token count that is 8 mod 16 runs its last 8 tokens at half the work of a
// zero-padded 16 (on Zen 4 a zmm vpdpbusd is two ymm ones).
inline __m256i dpbusd_bcst(__m256i acc, __m256i x, const int8_t* w) {
    asm("vpdpbusd %2%{1to8%}, %1, %0" : "+v"(acc) : "v"(x), "m"(*reinterpret_cast<const Int32Unaligned*>(w)));
    return acc;
}

// ct [MR, n_pad] += panel rows [MR, 128] x tokens [NV x 16 (+ 8 if kH)] over one 128-column block.
// G == 1: one int32 sum per (row, token) over the 128 columns, one scale per row. G == 4: per 32-column
// group (FP4 rows whose group scales could not be folded), each group's sum scaled into ct on its own.
template <int MR, int NV, int G, bool kH>
void micro(const Panel& p, int64_t m0, const uint8_t* xq, int64_t n_pad, const float* xs, float* ct) {
    constexpr int kK4 = kQBlock / 4 / G; // 4-column steps per group
    constexpr int kNvA = NV > 0 ? NV : 1;
    const int8_t* pw = p.w + m0 * kQBlock;
    for (int g = 0; g < G; ++g) {
        __m512i acc[MR][kNvA];
        [[maybe_unused]] __m256i acch[MR];
        for (int m = 0; m < MR; ++m) {
            const int32_t* cr = p.corr + (m0 + m) * 4;
            const int32_t seed = G == 1 ? cr[0] + cr[1] + cr[2] + cr[3] : cr[g];
            for (int v = 0; v < NV; ++v) acc[m][v] = _mm512_set1_epi32(seed);
            if constexpr (kH) acch[m] = _mm256_set1_epi32(seed);
        }
#pragma GCC unroll 2
        for (int k4 = g * kK4; k4 < (g + 1) * kK4; ++k4) {
            __m512i xv[kNvA];
            for (int v = 0; v < NV; ++v) xv[v] = _mm512_loadu_si512(xq + (k4 * n_pad + v * 16) * 4);
            [[maybe_unused]] __m256i xh;
            if constexpr (kH)
                xh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + (k4 * n_pad + NV * 16) * 4));
            for (int m = 0; m < MR; ++m) {
                for (int v = 0; v < NV; ++v)
                    acc[m][v] = dpbusd_bcst(acc[m][v], xv[v], pw + m * kQBlock + k4 * 4);
                if constexpr (kH) acch[m] = dpbusd_bcst(acch[m], xh, pw + m * kQBlock + k4 * 4);
            }
        }
        for (int v = 0; v < NV; ++v) {
            const __m512 xsv = _mm512_loadu_ps(xs + v * 16);
            for (int m = 0; m < MR; ++m) {
                float* c = ct + m * n_pad + v * 16;
                const __m512 s = _mm512_mul_ps(_mm512_set1_ps(p.scale[(m0 + m) * 4 + g]), xsv);
                _mm512_storeu_ps(c, _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc[m][v]), s, _mm512_loadu_ps(c)));
            }
        }
        if constexpr (kH) {
            const __m256 xsv = _mm256_loadu_ps(xs + NV * 16);
            for (int m = 0; m < MR; ++m) {
                float* c = ct + m * n_pad + NV * 16;
                const __m256 s = _mm256_mul_ps(_mm256_set1_ps(p.scale[(m0 + m) * 4 + g]), xsv);
                _mm256_storeu_ps(c, _mm256_fmadd_ps(_mm256_cvtepi32_ps(acch[m]), s, _mm256_loadu_ps(c)));
            }
        }
    }
}

// nv whole vectors of 16 tokens, then 8 more tokens if `half` (nv <= 3 then).
template <int MR, int G>
void micro_nv(int nv, bool half, const Panel& p, int64_t m0, const uint8_t* xq, int64_t n_pad,
              const float* xs, float* ct) {
    if (half) {
        switch (nv) {
        case 0:
            return micro<MR, 0, G, true>(p, m0, xq, n_pad, xs, ct);
        case 1:
            return micro<MR, 1, G, true>(p, m0, xq, n_pad, xs, ct);
        case 2:
            return micro<MR, 2, G, true>(p, m0, xq, n_pad, xs, ct);
        default:
            return micro<MR, 3, G, true>(p, m0, xq, n_pad, xs, ct);
        }
    }
    switch (nv) {
    case 1:
        return micro<MR, 1, G, false>(p, m0, xq, n_pad, xs, ct);
    case 2:
        return micro<MR, 2, G, false>(p, m0, xq, n_pad, xs, ct);
    case 3:
        return micro<MR, 3, G, false>(p, m0, xq, n_pad, xs, ct);
    default:
        return micro<MR, 4, G, false>(p, m0, xq, n_pad, xs, ct);
    }
}

template <int G>
void micro_dispatch(int mr, int nv, bool half, const Panel& p, int64_t m0, const uint8_t* xq, int64_t n_pad,
                    const float* xs, float* ct) {
    switch (mr) {
    case 1:
        return micro_nv<1, G>(nv, half, p, m0, xq, n_pad, xs, ct);
    case 2:
        return micro_nv<2, G>(nv, half, p, m0, xq, n_pad, xs, ct);
    case 3:
        return micro_nv<3, G>(nv, half, p, m0, xq, n_pad, xs, ct);
    case 4:
        return micro_nv<4, G>(nv, half, p, m0, xq, n_pad, xs, ct);
    case 5:
        return micro_nv<5, G>(nv, half, p, m0, xq, n_pad, xs, ct);
    default:
        return micro_nv<6, G>(nv, half, p, m0, xq, n_pad, xs, ct);
    }
}

// Blocked: a panel of kQRowTile rows x 128 columns is requantized once and reused by every token; within
// it, one group of up to 64 tokens (their 8 KiB of activations stay in L1) meets every 6-row microtile.
template <bool kFp4>
void gemm(const MatmulArgs& a, int64_t r0, int64_t r1, const uint8_t* xq, const float* xs, int64_t n_pad,
          float* scratch) {
    const core::Weight& w = *a.w;
    const Fp8Tables& t = fp8_tables();
    float* ct = scratch;                   // [kQRowTile, n_pad]
    float* scale = ct + kQRowTile * n_pad; // [kQRowTile] (room for 4 per row)
    int32_t* corr = reinterpret_cast<int32_t*>(scale + kQRowTile * 4);
    int8_t* wq = reinterpret_cast<int8_t*>(corr + kQRowTile * 4); // [kQRowTile, kQBlock]
    const Panel p{wq, scale, corr};
    const int64_t nkb = w.cols / kQBlock;
    const uint8_t* wrow[kQRowTile]; // FP8: each panel row's codes and block-scale row
    const uint8_t* srow[kQRowTile];
    for (int64_t rt = r0; rt < r1; rt += kQRowTile) {
        const int64_t rows = min64(kQRowTile, r1 - rt);
        for (int64_t i = 0; i < rows * n_pad; ++i) ct[i] = 0.0f;
        if constexpr (!kFp4) {
            const int64_t sc = (w.cols + w.block_cols - 1) / w.block_cols;
            for (int64_t m = 0; m < rows; ++m) {
                const int64_t r = a.row_begin + rt + m;
                wrow[m] = static_cast<const uint8_t*>(w.data) + r * w.cols;
                srow[m] = w.scale + r / w.block_rows * sc;
            }
        }
        for (int64_t kb = 0; kb < nkb; ++kb) {
            bool one_scale = true;
            if constexpr (kFp4) {
                for (int64_t m = 0; m < rows; ++m)
                    one_scale &= decode_fp4_block(w, a.row_begin + rt + m, kb, m, p);
            } else {
                const int64_t sb = kb * kQBlock / w.block_cols;
                for (int64_t m = 0; m < rows; ++m)
                    decode_fp8_block(t, wrow[m] + kb * kQBlock, srow[m][sb], kb + 1 < nkb, m, p);
            }
            for (int64_t i0 = 0; i0 < n_pad; i0 += 64) {
                const int nv = static_cast<int>(min64(4, (n_pad - i0) / 16));
                const bool half = n_pad - i0 < 64 && (n_pad - i0) % 16 != 0;
                const uint8_t* xqb = xq + (kb * (kQBlock / 4) * n_pad + i0) * 4;
                const float* xsb = xs + kb * n_pad + i0;
                for (int64_t m0 = 0; m0 < rows; m0 += 6) {
                    const int mr = static_cast<int>(min64(6, rows - m0));
                    float* c = ct + m0 * n_pad + i0;
                    one_scale ? micro_dispatch<1>(mr, nv, half, p, m0, xqb, n_pad, xsb, c)
                              : micro_dispatch<4>(mr, nv, half, p, m0, xqb, n_pad, xsb, c);
                }
            }
        }
        for (int64_t i = 0; i < a.n; ++i)
            for (int64_t m = 0; m < rows; ++m) a.y[i * a.ldy + (rt + m)] = ct[m * n_pad + i];
    }
}

} // namespace
} // namespace deepinfer::kernels::cpu::detail::gemm_vnni

namespace deepinfer::kernels::cpu::detail {
GemmQTable avx512_vnni_gemm_table() {
    GemmQTable t;
    t.fp8 = &gemm_vnni::gemm<false>;
    t.fp4 = &gemm_vnni::gemm<true>;
    return t;
}
} // namespace deepinfer::kernels::cpu::detail
