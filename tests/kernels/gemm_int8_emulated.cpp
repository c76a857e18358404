// The fast int8 GEMMs of src/kernels/cpu/gemm_int8_vnni.cpp compiled a second time, with their AVX-512
// VNNI / VBMI instructions replaced by exact AVX-512 F/BW sequences, so the kernels' logic (the panel
// decode, its column order, the per-token seeds, the scale order) is tested on CPUs without VNNI too, where
// the dispatcher never reaches the real ones (gemm_test.cpp, GemmInt8Emulated). Compiled with AVX-512
// F/BW/VL/DQ flags only (tests/kernels/CMakeLists.txt); no gtest here, so no inline function of the test
// framework is compiled with them.

#include <immintrin.h>

#include <cstdint>

namespace deepinfer::kernels::cpu::detail::vnni_emulation {

// vpdpbusd: acc + the sum of the 4 products u8(a) x s8(b) per int32 lane. The u8 / s8 bytes widened to
// 16 bits, then vpmaddwd: every product and pair sum is exact in 32 bits.
inline __m512i dpbusd(__m512i acc, __m512i a, __m512i b) {
    const __m512i a_even = _mm512_and_si512(a, _mm512_set1_epi16(0x00ff)), a_odd = _mm512_srli_epi16(a, 8);
    const __m512i b_even = _mm512_srai_epi16(_mm512_slli_epi16(b, 8), 8), b_odd = _mm512_srai_epi16(b, 8);
    return _mm512_add_epi32(
        acc, _mm512_add_epi32(_mm512_madd_epi16(a_even, b_even), _mm512_madd_epi16(a_odd, b_odd)));
}
inline __m256i dpbusd(__m256i acc, __m256i a, __m256i b) {
    const __m256i a_even = _mm256_and_si256(a, _mm256_set1_epi16(0x00ff)), a_odd = _mm256_srli_epi16(a, 8);
    const __m256i b_even = _mm256_srai_epi16(_mm256_slli_epi16(b, 8), 8), b_odd = _mm256_srai_epi16(b, 8);
    return _mm256_add_epi32(
        acc, _mm256_add_epi32(_mm256_madd_epi16(a_even, b_even), _mm256_madd_epi16(a_odd, b_odd)));
}
inline __m512i maskz_dpbusd(__mmask16 k, __m512i acc, __m512i a, __m512i b) {
    return _mm512_maskz_mov_epi32(k, dpbusd(acc, a, b));
}
// vpermi2b: byte i = (idx[i] & 64 ? b : a)[idx[i] & 63].
inline __m512i permutex2var_epi8(__m512i a, __m512i idx, __m512i b) {
    alignas(64) uint8_t va[64], vi[64], vb[64], r[64];
    _mm512_store_si512(va, a);
    _mm512_store_si512(vi, idx);
    _mm512_store_si512(vb, b);
    for (int i = 0; i < 64; ++i) r[i] = (vi[i] & 64) != 0 ? vb[vi[i] & 63] : va[vi[i] & 63];
    return _mm512_load_si512(r);
}

} // namespace deepinfer::kernels::cpu::detail::vnni_emulation

// The kernel's own #include <immintrin.h> is a no-op now, so these names reach the emulation (GCC defines
// some of them as macros: AVX-VNNI's _mm256_dpbusd_epi32).
#undef _mm512_dpbusd_epi32
#undef _mm256_dpbusd_epi32
#undef _mm512_maskz_dpbusd_epi32
#undef _mm512_permutex2var_epi8
#define _mm512_dpbusd_epi32 ::deepinfer::kernels::cpu::detail::vnni_emulation::dpbusd
#define _mm256_dpbusd_epi32 ::deepinfer::kernels::cpu::detail::vnni_emulation::dpbusd
#define _mm512_maskz_dpbusd_epi32 ::deepinfer::kernels::cpu::detail::vnni_emulation::maskz_dpbusd
#define _mm512_permutex2var_epi8 ::deepinfer::kernels::cpu::detail::vnni_emulation::permutex2var_epi8
#define DEEPINFER_GEMM_INT8_EMULATED 1
#include "kernels/cpu/gemm_int8_vnni.cpp" // NOLINT(bugprone-suspicious-include): the point of this file
