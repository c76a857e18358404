// AVX2 + FMA + F16C linear kernels: 8 floats per vector; e2m1 magnitudes through vpermps on the 8-entry
// table with the sign bit moved in by a shift. Compiled with -mavx2 -mfma -mf16c; reached only when the CPU
// reports them (see linear.cpp).

#include <immintrin.h>

#include <cstdint>

#define DI_ISA_NS avx2

namespace deepinfer::kernels::cpu::detail::avx2 {

struct Isa {
    using V = __m256;
    static constexpr int kW = 8;
    static constexpr bool kPairs = false; // GEMV layouts: see linear_impl.h
    static constexpr int kNv = 2;         // GEMM microtile: 6 rows x 2 x 8 tokens = 12 accumulators

    static V zero() { return _mm256_setzero_ps(); }
    static V set1(float f) { return _mm256_set1_ps(f); }
    static V loadu(const float* p) { return _mm256_loadu_ps(p); }
    static void storeu(float* p, V v) { _mm256_storeu_ps(p, v); }
    static V fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
    static V mul(V a, V b) { return _mm256_mul_ps(a, b); }
    static V add(V a, V b) { return _mm256_add_ps(a, b); }
    static float reduce(V v) {
        const __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
        const __m128 h = _mm_add_ps(s, _mm_movehl_ps(s, s));
        return _mm_cvtss_f32(_mm_add_ss(h, _mm_movehdup_ps(h)));
    }

    static V bf16(const uint16_t* p) {
        const __m256i u = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
        return _mm256_castsi256_ps(_mm256_slli_epi32(u, 16));
    }
    static V f16(const uint16_t* p) {
        return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    }
    // e4m3 as FP16 (linear_avx512.cpp's fp8_raw), widened by vcvtph2ps: the value times 2^-kFp8RawLog2.
    static V fp8_raw(const uint8_t* p) {
        const __m128i b = _mm_cvtepi8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
        return _mm256_cvtph_ps(
            _mm_and_si128(_mm_slli_epi16(b, 7), _mm_set1_epi16(static_cast<short>(0xbf80))));
    }
    // The 8 e2m1 magnitudes (the sign is bit 3 of the code).
    static V fp4_lut() { return _mm256_setr_ps(0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f); }
    // Codes in the low 4 bits of each lane (higher bits ignored): magnitude from `lut` (fp4_lut() times the
    // group scale; vpermps reads 3 index bits), code bit 3 shifted to the sign.
    static V decode_e2m1(__m256i code, V lut) {
        const __m256 mag = _mm256_permutevar8x32_ps(lut, code);
        const __m256i sign =
            _mm256_and_si256(_mm256_slli_epi32(code, 28), _mm256_set1_epi32(static_cast<int>(0x80000000u)));
        return _mm256_or_ps(mag, _mm256_castsi256_ps(sign));
    }
    // 8 bytes = 16 codes.
    static void fp4_pair(const uint8_t* p, V lut, V& even, V& odd) {
        const __m256i d = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
        even = decode_e2m1(d, lut);
        odd = decode_e2m1(_mm256_srli_epi32(d, 4), lut);
    }
    static V e8m0_vec(const uint8_t* p) {
        const __m256i s = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
        __m256i b = _mm256_slli_epi32(s, 23);
        b = _mm256_blendv_epi8(b, _mm256_set1_epi32(0x00400000),
                               _mm256_cmpeq_epi32(s, _mm256_setzero_si256()));
        b = _mm256_blendv_epi8(b, _mm256_set1_epi32(0x7fc00000),
                               _mm256_cmpeq_epi32(s, _mm256_set1_epi32(255)));
        return _mm256_castsi256_ps(b);
    }
    // 4 bytes = 8 codes in column order.
    static V fp4_natural(const uint8_t* p, V lut) {
        int32_t b4;
        __builtin_memcpy(&b4, p, 4);
        const __m256i d = _mm256_cvtepu8_epi32(_mm_cvtsi32_si128(b4));
        const __m256i dup = _mm256_permutevar8x32_epi32(d, _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3));
        return decode_e2m1(_mm256_srlv_epi32(dup, _mm256_setr_epi32(0, 4, 0, 4, 0, 4, 0, 4)), lut);
    }
};

} // namespace deepinfer::kernels::cpu::detail::avx2

#include "kernels/cpu/linear_impl.h"

namespace deepinfer::kernels::cpu::detail {
KernelTable avx2_table() {
    return avx2::table();
}
} // namespace deepinfer::kernels::cpu::detail
