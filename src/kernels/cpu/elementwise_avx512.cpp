// Element-wise ops on AVX-512 (compiled with -mavx512f; reached only when the CPU has it), bit-identical to
// their scalar definitions through exp16 (exp_avx512.h): the experts' SwiGLU, and exp_ref over an array
// (for the tests); greedy decoding's argmax (the index ref::argmax gives); RMSNorm (ref::rms_norm's sums).

#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <limits>

#include "kernels/cpu/backend.h"
#include "kernels/cpu/exp_avx512.h"
#include "kernels/ops.h"

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

// Pass 1: the largest non-NaN entry (max_ps(v, m) returns m where v is NaN), four accumulators. Pass 2: its
// first occurrence. No finite or +inf maximum (every entry NaN or -inf): ref::argmax decides.
int32_t argmax_avx512(const float* x, int64_t n) {
    const __m512 ninf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
    __m512 m0 = ninf, m1 = ninf, m2 = ninf, m3 = ninf;
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
        m0 = _mm512_max_ps(_mm512_loadu_ps(x + i), m0);
        m1 = _mm512_max_ps(_mm512_loadu_ps(x + i + 16), m1);
        m2 = _mm512_max_ps(_mm512_loadu_ps(x + i + 32), m2);
        m3 = _mm512_max_ps(_mm512_loadu_ps(x + i + 48), m3);
    }
    for (; i < n; i += 16) {
        const __mmask16 k = tail(n, i);
        m0 = _mm512_mask_max_ps(m0, k, _mm512_maskz_loadu_ps(k, x + i), m0);
    }
    const float m = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_max_ps(m0, m1), _mm512_max_ps(m2, m3)));
    if (m == -std::numeric_limits<float>::infinity()) return ref::argmax(x, n);
    const __m512 mv = _mm512_set1_ps(m);
    for (i = 0; i < n; i += 16) {
        const __mmask16 k = tail(n, i);
        const __mmask16 eq = _mm512_mask_cmp_ps_mask(k, _mm512_maskz_loadu_ps(k, x + i), mv, _CMP_EQ_OQ);
        if (eq != 0) return static_cast<int32_t>(i + __builtin_ctz(eq));
    }
    return ref::argmax(x, n); // not reached: m is one of the entries
}

// ref::rms_norm's operations (ref/elementwise.cpp): the sum of squares in 16 double lanes, element j into
// lane j % 16 (two zmm of 8 doubles; a square of a float is exact in double, so the fused multiply-add
// rounds as the scalar add does), the tail into lanes 0.., the lanes folded in halves in the same order;
// then x * inv and weight * that, as two roundings. The reference, compiled for the baseline ISA, runs its
// double lanes two at a time.
void rms_norm_avx512(const float* x, const float* weight, int64_t n, int64_t d, float eps, float* y) {
    for (int64_t i = 0; i < n; ++i) {
        const float* xi = x + i * d;
        __m512d a0 = _mm512_setzero_pd(), a1 = _mm512_setzero_pd();
        int64_t j = 0;
        for (; j + 16 <= d; j += 16) {
            const __m512 v = _mm512_loadu_ps(xi + j);
            const __m512d lo = _mm512_cvtps_pd(_mm512_castps512_ps256(v));
            const __m512d hi =
                _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
            a0 = _mm512_fmadd_pd(lo, lo, a0);
            a1 = _mm512_fmadd_pd(hi, hi, a1);
        }
        alignas(64) double acc[16];
        _mm512_store_pd(acc, a0);
        _mm512_store_pd(acc + 8, a1);
        for (int l = 0; j + l < d; ++l) acc[l] += static_cast<double>(xi[j + l]) * xi[j + l];
        for (int half = 8; half >= 1; half /= 2)
            for (int l = 0; l < half; ++l) acc[l] += acc[l + half];
        const float mean = static_cast<float>(acc[0] / static_cast<double>(d));
        const float inv = 1.0f / std::sqrt(mean + eps);
        const __m512 iv = _mm512_set1_ps(inv);
        float* yi = y + i * d;
        for (int64_t c = 0; c < d; c += 16) {
            const __mmask16 k = tail(d, c);
            __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(k, xi + c), iv);
            if (weight) v = _mm512_mul_ps(_mm512_maskz_loadu_ps(k, weight + c), v);
            _mm512_mask_storeu_ps(yi + c, k, v);
        }
    }
}

} // namespace deepinfer::kernels::cpu
