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
    static constexpr bool kPairs = true; // GEMV layouts: see linear_impl.h
    using VI = __m512i;
    static constexpr int kNv = 4; // GEMM microtile: 6 rows x 4 x 16 tokens = 24 accumulators

    static V zero() { return _mm512_setzero_ps(); }
    static V set1(float f) { return _mm512_set1_ps(f); }
    static V loadu(const float* p) { return _mm512_loadu_ps(p); }
    // One load into a register: without the empty asm the compiler folds the load into every instruction
    // that reads the vector (two or four loads of the same 64 weight bytes, the load ports' bottleneck).
    static VI load_i(const void* p) {
        __m512i v = _mm512_loadu_si512(p);
        __asm__("" : "+v"(v));
        return v;
    }
    static void storeu(float* p, V v) { _mm512_storeu_ps(p, v); }
    static V fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
    static V mul(V a, V b) { return _mm512_mul_ps(a, b); }
    static V add(V a, V b) { return _mm512_add_ps(a, b); }
    static float reduce(V v) { return _mm512_reduce_add_ps(v); }

    static V bf16(const uint16_t* p) {
        const __m512i u = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
        return _mm512_castsi512_ps(_mm512_slli_epi32(u, 16));
    }
    // 32 BF16 weights in one load: the even ones are the low halves of the 32-bit lanes (shift them up),
    // the odd ones the high halves (mask off the low half).
    static void bf16_pair(const uint16_t* p, V& even, V& odd) {
        const __m512i v = load_i(p);
        even = _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
        odd = _mm512_castsi512_ps(_mm512_and_si512(v, _mm512_set1_epi32(static_cast<int>(0xffff0000u))));
    }
    static V f16(const uint16_t* p) {
        return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    }
    // e4m3 as FP16 bits (sign-extended byte shifted left 7: sign to bit 15, exponent and mantissa to bits
    // 7..13, bit 14 cleared), widened by vcvtph2ps: the value times 2^-8 (kFp8RawLog2), exact. Every e4m3
    // value, its subnormals too (FP16 subnormals, which vcvtph2ps widens to normal floats), becomes a normal
    // float. Until session 17 the bits went straight into a float (value x 2^-120), where the e4m3 subnormals
    // are float denormals: every FMA or multiply that met one took a microcode assist on Intel
    // (docs/kernels.md, "Denormals on Intel"). Same values up to the power of two, so the same sums
    // (bit-identical results).
    static V fp8_raw(const uint8_t* p) {
        const __m256i b = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
        return _mm512_cvtph_ps(
            _mm256_and_si256(_mm256_slli_epi16(b, 7), _mm256_set1_epi16(static_cast<short>(0xbf80))));
    }
    // FP4 "words" (linear_impl.h): the e2m1 values as BF16, 16 entries twice (vpermw reads 5 index bits, so
    // the code above a shifted nibble needs no mask).
    static VI fp4_word_lut() {
        const __m512i half = _mm512_setr_epi32(0x3f000000, 0x3fc03f80, 0x40404000, 0x40c04080, 0xbf008000,
                                               static_cast<int>(0xbfc0bf80u), static_cast<int>(0xc040c000u),
                                               static_cast<int>(0xc0c0c080u), 0, 0, 0, 0, 0, 0, 0, 0);
        return _mm512_shuffle_i64x2(half, half, 0x44); // entries 0..15 repeated as 16..31
    }
    // Code K of each 16-bit word of d (64 bytes: 128 codes) through the table, as floats: even words -> even,
    // odd words -> odd.
    template <int K> static void fp4_word(VI d, VI lut, V& even, V& odd) {
        const __m512i v = _mm512_permutexvar_epi16(K == 0 ? d : _mm512_srli_epi16(d, 4 * K), lut);
        even = _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
        odd = _mm512_castsi512_ps(_mm512_and_si512(v, _mm512_set1_epi32(static_cast<int>(0xffff0000u))));
    }
    // Activation layouts (linear_impl.h). 32 floats: the 16 even ones, then the 16 odd ones.
    static void split32(const float* x, float* dst) {
        const __m512 lo = _mm512_loadu_ps(x), hi = _mm512_loadu_ps(x + 16);
        const __m512i ev = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
        _mm512_storeu_ps(dst, _mm512_permutex2var_ps(lo, ev, hi));
        _mm512_storeu_ps(dst + 16,
                         _mm512_permutex2var_ps(lo, _mm512_add_epi32(ev, _mm512_set1_epi32(1)), hi));
    }
    // 128 floats: for k = 0..3, [x(8j + k)]_j then [x(8j + 4 + k)]_j.
    static void words128(const float* x, float* dst) {
        const __m512i j8 =
            _mm512_slli_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), 3);
        for (int k = 0; k < 4; ++k) {
            _mm512_storeu_ps(dst + 32 * k,
                             _mm512_i32gather_ps(_mm512_add_epi32(j8, _mm512_set1_epi32(k)), x, 4));
            _mm512_storeu_ps(dst + 32 * k + 16,
                             _mm512_i32gather_ps(_mm512_add_epi32(j8, _mm512_set1_epi32(k + 4)), x, 4));
        }
    }

    static VI add_i(VI a, int b) { return _mm512_add_epi32(a, _mm512_set1_epi32(b)); }
    static V perm(VI idx, V v) { return _mm512_permutexvar_ps(idx, v); }
    // Lane j of an FP4 "words" chunk covers columns 8j..8j+7: its group within the chunk is 8j / bc.
    static VI lane_groups(int64_t bc) {
        if (bc > 128) return _mm512_setzero_si512();
        const __m512i j8 =
            _mm512_slli_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), 3);
        return _mm512_srlv_epi32(j8, _mm512_set1_epi32(__builtin_ctzll(static_cast<unsigned long long>(bc))));
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
