// AVX-512 (F/BW/VL/DQ) linear kernels: 16 floats per vector; e4m3 bytes sign-extended and shifted into
// place, e2m1 codes through vpermps on the 16-entry table. Compiled with -mavx512*; reached only when the
// CPU reports AVX-512 (see linear.cpp).

#include <immintrin.h>

#include <cstdint>

#define DI_ISA_NS avx512

namespace deepinfer::kernels::cpu::detail::avx512 {

struct Isa {
    using V = __m512;
    static constexpr int kW = 16;
    static constexpr int kNv = 4; // GEMM microtile: 6 rows x 4 x 16 tokens = 24 accumulators

    static V zero() { return _mm512_setzero_ps(); }
    static V set1(float f) { return _mm512_set1_ps(f); }
    static V loadu(const float* p) { return _mm512_loadu_ps(p); }
    static void storeu(float* p, V v) { _mm512_storeu_ps(p, v); }
    static V fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
    static V mul(V a, V b) { return _mm512_mul_ps(a, b); }
    static float reduce(V v) { return _mm512_reduce_add_ps(v); }

    static V bf16(const uint16_t* p) {
        const __m512i u = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
        return _mm512_castsi512_ps(_mm512_slli_epi32(u, 16));
    }
    static V f16(const uint16_t* p) {
        return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    }
    // e4m3 sign to bit 31, exponent+mantissa to bits 20..26: the float is the value times 2^-120 (exact,
    // subnormals included).
    static V fp8_raw(const uint8_t* p) {
        const __m512i b = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
        return _mm512_castsi512_ps(
            _mm512_and_si512(_mm512_slli_epi32(b, 20), _mm512_set1_epi32(static_cast<int>(0x87f00000u))));
    }
    static V fp4_lut() {
        return _mm512_setr_ps(0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f, -0.0f, -0.5f, -1.0f, -1.5f,
                              -2.0f, -3.0f, -4.0f, -6.0f);
    }
    // 16 bytes = 32 codes through `lut` (fp4_lut() times the group scale); vpermps reads the low 4 index
    // bits, so the low nibble needs no mask.
    static void fp4_pair(const uint8_t* p, V lut, V& even, V& odd) {
        const __m512i d = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
        even = _mm512_permutexvar_ps(d, lut);
        odd = _mm512_permutexvar_ps(_mm512_srli_epi32(d, 4), lut);
    }
    static V e8m0_vec(const uint8_t* p) {
        const __m512i s = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
        __m512i b = _mm512_slli_epi32(s, 23);
        b = _mm512_mask_mov_epi32(b, _mm512_cmpeq_epi32_mask(s, _mm512_setzero_si512()),
                                  _mm512_set1_epi32(0x00400000));
        b = _mm512_mask_mov_epi32(b, _mm512_cmpeq_epi32_mask(s, _mm512_set1_epi32(255)),
                                  _mm512_set1_epi32(0x7fc00000));
        return _mm512_castsi512_ps(b);
    }
    // 8 bytes = 16 codes in column order.
    static V fp4_natural(const uint8_t* p, V lut) {
        const __m512i d = _mm512_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
        const __m512i dup =
            _mm512_permutexvar_epi32(_mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7), d);
        const __m512i sh =
            _mm512_srlv_epi32(dup, _mm512_setr_epi32(0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4));
        return _mm512_permutexvar_ps(sh, lut);
    }
};

} // namespace deepinfer::kernels::cpu::detail::avx512

#include "kernels/cpu/linear_impl.h"

namespace deepinfer::kernels::cpu::detail {
KernelTable avx512_table() {
    return avx512::table();
}
} // namespace deepinfer::kernels::cpu::detail
