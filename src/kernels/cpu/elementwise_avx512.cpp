// Element-wise ops on AVX-512 (compiled with -mavx512f; reached only when the CPU has it), bit-identical to
// their scalar definitions through exp16 (exp_avx512.h): the experts' SwiGLU, and exp_ref over an array
// (for the tests).

#include <immintrin.h>

#include <cstdint>

#include "kernels/cpu/backend.h"
#include "kernels/cpu/exp_avx512.h"

namespace deepinfer::kernels::cpu {

namespace {
inline __mmask16 tail(int64_t n, int64_t i) {
    return n - i >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << (n - i)) - 1);
}
} // namespace

// swiglu's operations per lane: std::min(g, L), std::clamp(u, -L, L) (min / max return the second operand
// when either is NaN, as those do with these operand orders), g / (1 + exp_ref(-g)) * u.
void swiglu_avx512(float* g, const float* u, int64_t n, float limit) {
    constexpr int kRn = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
    const bool clamp = limit > 0.0f;
    const __m512 L = _mm512_set1_ps(limit), nL = _mm512_set1_ps(-limit), one = _mm512_set1_ps(1.0f);
    const __m512i sign = _mm512_set1_epi32(static_cast<int>(0x80000000u));
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 k = tail(n, i);
        __m512 gi = _mm512_maskz_loadu_ps(k, g + i), ui = _mm512_maskz_loadu_ps(k, u + i);
        if (clamp) {
            gi = _mm512_min_ps(L, gi);
            ui = _mm512_max_ps(nL, _mm512_min_ps(L, ui));
        }
        const __m512 e = detail::exp16(_mm512_castsi512_ps(
            _mm512_xor_si512(_mm512_castps_si512(gi), sign))); // -g: the sign flipped, as scalar -x
        const __m512 s = _mm512_div_round_ps(gi, _mm512_add_round_ps(one, e, kRn), kRn);
        _mm512_mask_storeu_ps(g + i, k, _mm512_mul_round_ps(s, ui, kRn));
    }
}

void exp_ref_avx512(const float* x, int64_t n, float* y) {
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 k = tail(n, i);
        _mm512_mask_storeu_ps(y + i, k, detail::exp16(_mm512_maskz_loadu_ps(k, x + i)));
    }
}

} // namespace deepinfer::kernels::cpu
