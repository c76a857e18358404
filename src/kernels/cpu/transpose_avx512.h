#pragma once
// Transposes in registers: 16 x 16 floats (AVX-512), shared by the int8 and AMX-BF16 GEMMs' output store
// (store_transposed) and attention's key tiles (attention.cpp); 8 x 8 int32 (AVX2), the int8 GEMM's
// activation quantize. Pure data movement: no rounding.

#include <immintrin.h>

#include <cstdint>

namespace deepinfer::kernels::cpu::detail {

// r[m] = row m of a 16 x 16 float block; on return r[i] = its column i (4 rounds of 16 shuffles). Inlined
// into callers compiled for AVX-512 (by flags or a target attribute).
__attribute__((target("avx512f"), always_inline)) inline void transpose16(__m512 r[16]) {
    __m512 t[16];
    for (int i = 0; i < 8; ++i) {
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for (int i = 0; i < 4; ++i) {
        r[4 * i] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
        r[4 * i + 1] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0xee);
        r[4 * i + 2] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
        r[4 * i + 3] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xee);
    }
    for (int h = 0; h < 2; ++h)
        for (int j = 0; j < 4; ++j) {
            t[8 * h + j] = _mm512_shuffle_f32x4(r[8 * h + j], r[8 * h + 4 + j], 0x88);
            t[8 * h + 4 + j] = _mm512_shuffle_f32x4(r[8 * h + j], r[8 * h + 4 + j], 0xdd);
        }
    for (int j = 0; j < 8; ++j) {
        r[j] = _mm512_shuffle_f32x4(t[j], t[8 + j], 0x88);
        r[8 + j] = _mm512_shuffle_f32x4(t[j], t[8 + j], 0xdd);
    }
}

// y[i * ldy + m] = ct[m * n_pad + i] (m < rows, i < n): 16 rows x 16 tokens at a time through registers,
// so each token's 16 rows leave in one 64-byte store. One scalar store per element filled the store queue
// while a large output's lines were fetched (wq_b's 16 MiB at 128 tokens); rows past the last 16 scalar.
// The output tiles of the int8 and AMX-BF16 GEMMs ([rows, n_pad] floats) into y.
__attribute__((target("avx512f"))) inline void store_transposed(const float* ct, int64_t rows, int64_t n,
                                                                int64_t n_pad, float* y, int64_t ldy) {
    const int64_t r16 = rows / 16 * 16;
    for (int64_t i0 = 0; i0 < n; i0 += 16) {
        const int64_t cnt = n - i0 < 16 ? n - i0 : 16;
        const __mmask16 k = static_cast<__mmask16>((1u << cnt) - 1);
        for (int64_t m0 = 0; m0 < r16; m0 += 16) {
            __m512 r[16];
            for (int m = 0; m < 16; ++m) r[m] = _mm512_maskz_loadu_ps(k, ct + (m0 + m) * n_pad + i0);
            transpose16(r);
            for (int64_t i = 0; i < cnt; ++i) _mm512_storeu_ps(y + (i0 + i) * ldy + m0, r[i]);
        }
    }
    for (int64_t i = 0; i < n; ++i)
        for (int64_t m = r16; m < rows; ++m) y[i * ldy + m] = ct[m * n_pad + i];
}

// r[i] (ymm) = row i of an 8 x 8 int32 block; on return r[j] = its column j.
__attribute__((target("avx2"), always_inline)) inline void transpose8(__m256i r[8]) {
    __m256i t[8];
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_epi32(r[i], r[i + 1]);
        t[i + 1] = _mm256_unpackhi_epi32(r[i], r[i + 1]);
    }
    __m256i u[8];
    for (int i = 0; i < 8; i += 4) {
        u[i] = _mm256_unpacklo_epi64(t[i], t[i + 2]);
        u[i + 1] = _mm256_unpackhi_epi64(t[i], t[i + 2]);
        u[i + 2] = _mm256_unpacklo_epi64(t[i + 1], t[i + 3]);
        u[i + 3] = _mm256_unpackhi_epi64(t[i + 1], t[i + 3]);
    }
    for (int i = 0; i < 4; ++i) {
        r[i] = _mm256_permute2x128_si256(u[i], u[i + 4], 0x20);
        r[i + 4] = _mm256_permute2x128_si256(u[i], u[i + 4], 0x31);
    }
}

} // namespace deepinfer::kernels::cpu::detail
