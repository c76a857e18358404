// AVX-512 mHC post: ref::hc_post (kernels/ref/hyper_connection.cpp) vectorized over 16 columns. Every output
// element is the same IEEE operations in the same order as the reference's (s = 0 + c_0k prev_0 + ... in
// order of i, then post_k y + s), and this file is compiled with -ffp-contract=off so no multiply-add is
// fused: the results are bit-identical to the reference's. Reached only when the CPU has AVX-512
// (cpu/backend.cpp).

#include <immintrin.h>

#include <cstdint>

#include "kernels/params.h"

namespace deepinfer::kernels::cpu::detail {

// The mixing of one token's hc streams: h [hc, D] in place, columns [j, j + 16) per step, the column tail
// as the reference computes it. hc <= kMaxHc (the caller checks).
void hc_post_avx512(const HcPostParams& p) {
    constexpr int64_t kMaxHc = 64;
    const int64_t hc = p.hc, D = p.D, vec = D / 16 * 16;
    __m512 prev[kMaxHc];
    float prev_s[kMaxHc];
    for (int64_t t = 0; t < p.T; ++t) {
        float* ht = p.h + t * hc * D;
        const float* cm = p.comb + t * hc * hc;
        const float* post = p.post + t * hc;
        const float* y = p.y + t * D;
        for (int64_t j = 0; j < vec; j += 16) {
            for (int64_t i = 0; i < hc; ++i) prev[i] = _mm512_loadu_ps(ht + i * D + j);
            const __m512 yj = _mm512_loadu_ps(y + j);
            for (int64_t k = 0; k < hc; ++k) {
                __m512 s = _mm512_setzero_ps();
                for (int64_t i = 0; i < hc; ++i)
                    s = _mm512_add_ps(s, _mm512_mul_ps(_mm512_set1_ps(cm[i * hc + k]), prev[i]));
                _mm512_storeu_ps(ht + k * D + j,
                                 _mm512_add_ps(_mm512_mul_ps(_mm512_set1_ps(post[k]), yj), s));
            }
        }
        for (int64_t j = vec; j < D; ++j) {
            for (int64_t i = 0; i < hc; ++i) prev_s[i] = ht[i * D + j];
            for (int64_t k = 0; k < hc; ++k) {
                float s = 0.0f;
                for (int64_t i = 0; i < hc; ++i) s += cm[i * hc + k] * prev_s[i];
                ht[k * D + j] = post[k] * y[j] + s;
            }
        }
    }
}

} // namespace deepinfer::kernels::cpu::detail
