#pragma once
// The largest magnitude of a kQBlock-column activation block (AVX-512), shared by the int8 quantizers of
// the fast GEMV (gemv_int8_impl.h) and GEMMs (gemm_int8_vnni.cpp): the block's int8 scale is amax / 127.
// The maximum is exact, so every caller gets the same scale.

#include <immintrin.h>

#include "kernels/cpu/linear_kernels.h"

namespace deepinfer::kernels::cpu::detail {

// Inlined into callers compiled for AVX-512 (by flags or a target attribute).
__attribute__((target("avx512f"), always_inline)) inline float block_amax(const float* x) {
    __m512 mx = _mm512_setzero_ps();
    for (int c = 0; c < kQBlock; c += 16) mx = _mm512_max_ps(mx, _mm512_abs_ps(_mm512_loadu_ps(x + c)));
    return _mm512_reduce_max_ps(mx);
}

} // namespace deepinfer::kernels::cpu::detail
