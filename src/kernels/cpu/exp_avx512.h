#pragma once
// exp_ref (ops.h) on 16 lanes: the same operations in the same order, each rounded as the scalar version
// rounds it (explicit round-to-nearest intrinsics, which the compiler cannot fuse into FMAs), so the lanes
// equal exp_ref's bits. Inlined into callers compiled for AVX-512 (flags or a target attribute).

#include <immintrin.h>

namespace deepinfer::kernels::cpu::detail {

__attribute__((target("avx512f"), always_inline)) inline __m512 exp16(__m512 x) {
    constexpr int kRn = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
    const __mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
    // std::min(std::max(x, lo), hi) for non-NaN x (the NaN lanes are put back at the end)
    const __m512 c = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-104.0f)), _mm512_set1_ps(89.0f));
    const __m512 k = _mm512_roundscale_ps(_mm512_mul_round_ps(c, _mm512_set1_ps(1.44269504088896341f), kRn),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_sub_round_ps(c, _mm512_mul_round_ps(k, _mm512_set1_ps(0.693359375f), kRn), kRn);
    r = _mm512_sub_round_ps(r, _mm512_mul_round_ps(k, _mm512_set1_ps(-2.12194440e-4f), kRn), kRn);
    __m512 p = _mm512_set1_ps(1.9875691500e-4f);
    p = _mm512_add_round_ps(_mm512_mul_round_ps(p, r, kRn), _mm512_set1_ps(1.3981999507e-3f), kRn);
    p = _mm512_add_round_ps(_mm512_mul_round_ps(p, r, kRn), _mm512_set1_ps(8.3334519073e-3f), kRn);
    p = _mm512_add_round_ps(_mm512_mul_round_ps(p, r, kRn), _mm512_set1_ps(4.1665795894e-2f), kRn);
    p = _mm512_add_round_ps(_mm512_mul_round_ps(p, r, kRn), _mm512_set1_ps(1.6666665459e-1f), kRn);
    p = _mm512_add_round_ps(_mm512_mul_round_ps(p, r, kRn), _mm512_set1_ps(5.0000001201e-1f), kRn);
    p = _mm512_add_round_ps(_mm512_mul_round_ps(p, _mm512_mul_round_ps(r, r, kRn), kRn),
                            _mm512_add_round_ps(r, _mm512_set1_ps(1.0f), kRn), kRn);
    return _mm512_mask_mov_ps(_mm512_scalef_ps(p, k), nan, x);
}

} // namespace deepinfer::kernels::cpu::detail
