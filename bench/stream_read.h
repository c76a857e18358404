#pragma once
// The plain streaming read the decode benches set beside a GEMV over the very same bytes in the same rep
// (linear_bench, placement_bench): 4 sequential streams per thread, the GEMV's pattern.

#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <vector>

#include "core/thread_pool.h"

namespace deepinfer::bench {

__attribute__((target("avx512f"))) inline float sum_streams_avx512(const uint8_t* p, int64_t bytes) {
    const int64_t per = bytes / 4 / 256 * 256;
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (int64_t i = 0; i < per; i += 256)
        for (int k = 0; k < 256; k += 64) {
            a0 = _mm512_add_ps(a0, _mm512_loadu_ps(reinterpret_cast<const float*>(p + i + k)));
            a1 = _mm512_add_ps(a1, _mm512_loadu_ps(reinterpret_cast<const float*>(p + per + i + k)));
            a2 = _mm512_add_ps(a2, _mm512_loadu_ps(reinterpret_cast<const float*>(p + 2 * per + i + k)));
            a3 = _mm512_add_ps(a3, _mm512_loadu_ps(reinterpret_cast<const float*>(p + 3 * per + i + k)));
        }
    // Stored and summed rather than _mm512_reduce_add_ps, whose GCC 12 header trips -Wuninitialized.
    alignas(64) float t[16];
    _mm512_store_ps(t, _mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
    float s = 0.0f;
    for (float v : t) s += v;
    return s;
}

inline volatile float g_stream_sink = 0.0f; // keeps the reads observable

// Seconds to stream `bytes` from p over the pool (0 without AVX-512).
inline double stream_read_seconds(core::ThreadPool* pool, const uint8_t* p, int64_t bytes) {
    if (!__builtin_cpu_supports("avx512f")) return 0.0;
    const int64_t chunk = bytes / pool->num_threads() / 1024 * 1024;
    const auto t0 = std::chrono::steady_clock::now();
    pool->parallel_for(pool->num_threads(), [&](int64_t b, int64_t e) {
        float s = 0.0f;
        for (int64_t i = b; i < e; ++i) s += sum_streams_avx512(p + i * chunk, chunk);
        g_stream_sink = g_stream_sink + s;
    });
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

inline double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

} // namespace deepinfer::bench
