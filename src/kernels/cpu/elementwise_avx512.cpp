// Numerics::kFast's element-wise parts on AVX-512 (compiled with -mavx512f; reached only when the CPU has
// it): the experts' SwiGLU with a vector exp (backend.h).

#include <immintrin.h>

#include <cstdint>

#include "kernels/cpu/backend.h"

namespace deepinfer::kernels::cpu {

// exp(x) = 2^k e^r, k = round(x log2 e), r = x - k ln 2 in two steps (Cody-Waite: ln 2's high part has 8
// significant bits, so k * hi is exact for |k| < 2^16), e^r on [-ln2/2, ln2/2] by Cephes' expf polynomial
// (degree 6 beyond 1 + r), 2^k applied by vscalefps (overflow to inf, underflow to 0 as expf). x is clamped
// to [-104, 89] first, where expf is already 0 / inf, so k stays finite.
void swiglu_fast(float* g, const float* u, int64_t n, float limit) {
    const bool clamp = limit > 0.0f;
    const __m512 L = _mm512_set1_ps(limit), nL = _mm512_set1_ps(-limit), one = _mm512_set1_ps(1.0f);
    const __m512 lo = _mm512_set1_ps(-104.0f), hi = _mm512_set1_ps(89.0f);
    const __m512 log2e = _mm512_set1_ps(1.44269504088896341f), ln2hi = _mm512_set1_ps(0.693359375f),
                 ln2lo = _mm512_set1_ps(-2.12194440e-4f);
    const __m512 c0 = _mm512_set1_ps(1.9875691500e-4f), c1 = _mm512_set1_ps(1.3981999507e-3f),
                 c2 = _mm512_set1_ps(8.3334519073e-3f), c3 = _mm512_set1_ps(4.1665795894e-2f),
                 c4 = _mm512_set1_ps(1.6666665459e-1f), c5 = _mm512_set1_ps(5.0000001201e-1f);
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 k = n - i >= 16 ? 0xffff : static_cast<__mmask16>((1u << (n - i)) - 1);
        __m512 gi = _mm512_maskz_loadu_ps(k, g + i), ui = _mm512_maskz_loadu_ps(k, u + i);
        if (clamp) {
            // std::min(g, L) and std::clamp(u, -L, L): a NaN input stays NaN (min / max return the second
            // operand when either is NaN).
            gi = _mm512_min_ps(L, gi);
            ui = _mm512_max_ps(nL, _mm512_min_ps(L, ui));
        }
        // x = -g, clamped (NaN stays NaN: the operand order again)
        const __m512 x = _mm512_max_ps(lo, _mm512_min_ps(hi, _mm512_sub_ps(_mm512_setzero_ps(), gi)));
        const __m512 kf =
            _mm512_roundscale_ps(_mm512_mul_ps(x, log2e), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        __m512 r = _mm512_fnmadd_ps(kf, ln2hi, x);
        r = _mm512_fnmadd_ps(kf, ln2lo, r);
        __m512 p = _mm512_fmadd_ps(c0, r, c1);
        p = _mm512_fmadd_ps(p, r, c2);
        p = _mm512_fmadd_ps(p, r, c3);
        p = _mm512_fmadd_ps(p, r, c4);
        p = _mm512_fmadd_ps(p, r, c5);
        p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, one));
        const __m512 e = _mm512_scalef_ps(p, kf);
        const __m512 y = _mm512_mul_ps(_mm512_div_ps(gi, _mm512_add_ps(one, e)), ui);
        _mm512_mask_storeu_ps(g + i, k, y);
    }
}

} // namespace deepinfer::kernels::cpu
