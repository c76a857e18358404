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

struct Panel {
    int8_t* w;     // [kQRowTile, kQBlock]
    float* scale;  // [kQRowTile]
    int32_t* corr; // [kQRowTile]
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

// Row r's columns [kb * 128, kb * 128 + 128) into panel row m.
void decode_fp8_block(const core::Weight& w, const Fp8Tables& t, int64_t r, int64_t kb, int64_t m,
                      const Panel& p) {
    const uint8_t* src = static_cast<const uint8_t*>(w.data) + r * w.cols + kb * kQBlock;
    const __m512i b0 = _mm512_loadu_si512(src), b1 = _mm512_loadu_si512(src + 64);
    const __m512i mask = _mm512_set1_epi8(0x7f);
    const __m512i m0 = _mm512_and_si512(b0, mask), m1 = _mm512_and_si512(b1, mask);
    const uint8_t max_code = max_epu8(_mm512_max_epu8(m0, m1));
    const int step = fp8_requant_step_log2(max_code);
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
    p.corr[m] = -128 * _mm512_reduce_add_epi32(sum);
    const int64_t sc = (w.cols + w.block_cols - 1) / w.block_cols;
    const uint8_t s = w.scale[r / w.block_rows * sc + kb * kQBlock / w.block_cols];
    p.scale[m] = e8m0(s) * bits_f32(static_cast<uint32_t>(127 + step - 9) << 23);
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

// ct [MR, n_pad] += panel rows [MR, 128] x tokens [NV x 16] over one 128-column block.
template <int MR, int NV>
void micro(const Panel& p, int64_t m0, const uint8_t* xq, int64_t n_pad, const float* xs, float* ct) {
    __m512i acc[MR][NV];
    for (int m = 0; m < MR; ++m)
        for (int v = 0; v < NV; ++v) acc[m][v] = _mm512_set1_epi32(p.corr[m0 + m]);
    const int8_t* pw = p.w + m0 * kQBlock;
#pragma GCC unroll 2
    for (int k4 = 0; k4 < kQBlock / 4; ++k4) {
        __m512i xv[NV];
        for (int v = 0; v < NV; ++v) xv[v] = _mm512_loadu_si512(xq + (k4 * n_pad + v * 16) * 4);
        for (int m = 0; m < MR; ++m)
            for (int v = 0; v < NV; ++v) acc[m][v] = dpbusd_bcst(acc[m][v], xv[v], pw + m * kQBlock + k4 * 4);
    }
    for (int v = 0; v < NV; ++v) {
        const __m512 xsv = _mm512_loadu_ps(xs + v * 16);
        for (int m = 0; m < MR; ++m) {
            float* c = ct + m * n_pad + v * 16;
            const __m512 s = _mm512_mul_ps(_mm512_set1_ps(p.scale[m0 + m]), xsv);
            _mm512_storeu_ps(c, _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc[m][v]), s, _mm512_loadu_ps(c)));
        }
    }
}

template <int MR>
void micro_nv(int nv, const Panel& p, int64_t m0, const uint8_t* xq, int64_t n_pad, const float* xs,
              float* ct) {
    switch (nv) {
    case 1:
        return micro<MR, 1>(p, m0, xq, n_pad, xs, ct);
    case 2:
        return micro<MR, 2>(p, m0, xq, n_pad, xs, ct);
    case 3:
        return micro<MR, 3>(p, m0, xq, n_pad, xs, ct);
    default:
        return micro<MR, 4>(p, m0, xq, n_pad, xs, ct);
    }
}

void micro_dispatch(int mr, int nv, const Panel& p, int64_t m0, const uint8_t* xq, int64_t n_pad,
                    const float* xs, float* ct) {
    switch (mr) {
    case 1:
        return micro_nv<1>(nv, p, m0, xq, n_pad, xs, ct);
    case 2:
        return micro_nv<2>(nv, p, m0, xq, n_pad, xs, ct);
    case 3:
        return micro_nv<3>(nv, p, m0, xq, n_pad, xs, ct);
    case 4:
        return micro_nv<4>(nv, p, m0, xq, n_pad, xs, ct);
    case 5:
        return micro_nv<5>(nv, p, m0, xq, n_pad, xs, ct);
    default:
        return micro_nv<6>(nv, p, m0, xq, n_pad, xs, ct);
    }
}

// Blocked: a panel of kQRowTile rows x 128 columns is requantized once and reused by every token; within
// it, one group of up to 64 tokens (their 8 KiB of activations stay in L1) meets every 6-row microtile.
void gemm_fp8(const MatmulArgs& a, int64_t r0, int64_t r1, const uint8_t* xq, const float* xs, int64_t n_pad,
              float* scratch) {
    const core::Weight& w = *a.w;
    const Fp8Tables& t = fp8_tables();
    float* ct = scratch;                   // [kQRowTile, n_pad]
    float* scale = ct + kQRowTile * n_pad; // [kQRowTile] (room for 4 per row)
    int32_t* corr = reinterpret_cast<int32_t*>(scale + kQRowTile * 4);
    int8_t* wq = reinterpret_cast<int8_t*>(corr + kQRowTile * 4); // [kQRowTile, kQBlock]
    const Panel p{wq, scale, corr};
    for (int64_t rt = r0; rt < r1; rt += kQRowTile) {
        const int64_t rows = min64(kQRowTile, r1 - rt);
        for (int64_t i = 0; i < rows * n_pad; ++i) ct[i] = 0.0f;
        for (int64_t kb = 0; kb < w.cols / kQBlock; ++kb) {
            for (int64_t m = 0; m < rows; ++m) decode_fp8_block(w, t, a.row_begin + rt + m, kb, m, p);
            for (int64_t i0 = 0; i0 < n_pad; i0 += 64) {
                const int nv = static_cast<int>(min64(4, (n_pad - i0) / 16));
                const uint8_t* xqb = xq + (kb * (kQBlock / 4) * n_pad + i0) * 4;
                const float* xsb = xs + kb * n_pad + i0;
                for (int64_t m0 = 0; m0 < rows; m0 += 6)
                    micro_dispatch(static_cast<int>(min64(6, rows - m0)), nv, p, m0, xqb, n_pad, xsb,
                                   ct + m0 * n_pad + i0);
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
    t.fp8 = &gemm_vnni::gemm_fp8;
    return t;
}
} // namespace deepinfer::kernels::cpu::detail
