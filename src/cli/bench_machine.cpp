#include "cli/bench_machine.h"

#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <sys/mman.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace deepinfer::cli {
namespace {

using Clock = std::chrono::steady_clock;
volatile float g_sink = 0.0f; // keeps the measured loops observable

// Streaming read the way the GEMV kernels stream weights: `streams` independent sequential streams per
// thread (one per weight row the kernel decodes at once), 4 cache lines of each per iteration.
__attribute__((target("avx512f"))) float sum_avx512(const float* p, size_t n, int streams) {
    const size_t per = n / streams / 64 * 64;
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    if (streams == 8) {
        for (size_t i = 0; i + 64 <= per; i += 64) {
            for (int k = 0; k < 8; k += 2) {
                const float* q0 = p + k * per + i;
                const float* q1 = q0 + per;
                a0 = _mm512_add_ps(a0, _mm512_add_ps(_mm512_load_ps(q0), _mm512_load_ps(q0 + 16)));
                a1 = _mm512_add_ps(a1, _mm512_add_ps(_mm512_load_ps(q0 + 32), _mm512_load_ps(q0 + 48)));
                a2 = _mm512_add_ps(a2, _mm512_add_ps(_mm512_load_ps(q1), _mm512_load_ps(q1 + 16)));
                a3 = _mm512_add_ps(a3, _mm512_add_ps(_mm512_load_ps(q1 + 32), _mm512_load_ps(q1 + 48)));
            }
        }
    } else if (streams == 4) {
        const float *s0 = p, *s1 = p + per, *s2 = p + 2 * per, *s3 = p + 3 * per;
        for (size_t i = 0; i + 64 <= per; i += 64) {
            for (int k = 0; k < 64; k += 16) {
                a0 = _mm512_add_ps(a0, _mm512_load_ps(s0 + i + k));
                a1 = _mm512_add_ps(a1, _mm512_load_ps(s1 + i + k));
                a2 = _mm512_add_ps(a2, _mm512_load_ps(s2 + i + k));
                a3 = _mm512_add_ps(a3, _mm512_load_ps(s3 + i + k));
            }
        }
    } else {
        for (size_t i = 0; i + 64 <= n; i += 64) {
            a0 = _mm512_add_ps(a0, _mm512_load_ps(p + i));
            a1 = _mm512_add_ps(a1, _mm512_load_ps(p + i + 16));
            a2 = _mm512_add_ps(a2, _mm512_load_ps(p + i + 32));
            a3 = _mm512_add_ps(a3, _mm512_load_ps(p + i + 48));
        }
    }
    // Stored and summed rather than _mm512_reduce_add_ps, whose GCC 12 header trips -Wuninitialized.
    alignas(64) float t[16];
    _mm512_store_ps(t, _mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
    float s = 0.0f;
    for (float v : t) s += v;
    return s;
}

__attribute__((target("avx2"))) float sum_avx2(const float* p, size_t n, int streams) {
    const size_t per = n / streams / 32 * 32;
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    if (streams == 4) {
        const float *s0 = p, *s1 = p + per, *s2 = p + 2 * per, *s3 = p + 3 * per;
        for (size_t i = 0; i + 32 <= per; i += 32) {
            for (int k = 0; k < 32; k += 8) {
                a0 = _mm256_add_ps(a0, _mm256_load_ps(s0 + i + k));
                a1 = _mm256_add_ps(a1, _mm256_load_ps(s1 + i + k));
                a2 = _mm256_add_ps(a2, _mm256_load_ps(s2 + i + k));
                a3 = _mm256_add_ps(a3, _mm256_load_ps(s3 + i + k));
            }
        }
    } else {
        for (size_t i = 0; i + 32 <= n; i += 32) {
            a0 = _mm256_add_ps(a0, _mm256_load_ps(p + i));
            a1 = _mm256_add_ps(a1, _mm256_load_ps(p + i + 8));
            a2 = _mm256_add_ps(a2, _mm256_load_ps(p + i + 16));
            a3 = _mm256_add_ps(a3, _mm256_load_ps(p + i + 24));
        }
    }
    alignas(32) float t[8];
    _mm256_store_ps(t, _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
    return t[0] + t[1] + t[2] + t[3] + t[4] + t[5] + t[6] + t[7];
}

// 12 independent vpdpbusd chains (u8 x s8, 4 products summed into each int32 lane); returns int8 ops done
// (a multiply-add = 2 ops, as FMA flops are counted).
__attribute__((target("avx512f,avx512bw,avx512vnni"))) double vnni_avx512(int64_t iters, float* sink) {
    __m512i acc[12];
    for (int k = 0; k < 12; ++k) acc[k] = _mm512_set1_epi32(k);
    const __m512i a = _mm512_set1_epi8(3), b = _mm512_set1_epi8(-2);
    for (int64_t i = 0; i < iters; ++i)
        for (int k = 0; k < 12; ++k) acc[k] = _mm512_dpbusd_epi32(acc[k], a, b);
    __m512i s = acc[0];
    for (int k = 1; k < 12; ++k) s = _mm512_add_epi32(s, acc[k]);
    // The chains overflow by design: sum the lanes as uint32 (wrapping is defined; GCC's
    // _mm512_reduce_add_epi32 adds as signed int, which UBSan reports).
    alignas(64) uint32_t lanes[16];
    _mm512_store_si512(lanes, s);
    uint32_t total = 0;
    for (const uint32_t v : lanes) total += v;
    *sink += static_cast<float>(total);
    return static_cast<double>(iters) * 12 * 64 * 2;
}

float sum_scalar(const float* p, size_t n, int /*streams*/) {
    float s = 0.0f;
    for (size_t i = 0; i < n; ++i) s += p[i];
    return s;
}

// 12 independent accumulator chains hide the FMA latency; returns flops done.
__attribute__((target("avx512f"))) double fma_avx512(int64_t iters, float* sink) {
    __m512 acc[12];
    for (int k = 0; k < 12; ++k) acc[k] = _mm512_set1_ps(1.0f + 0.01f * k);
    const __m512 m = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
    for (int64_t i = 0; i < iters; ++i)
        for (int k = 0; k < 12; ++k) acc[k] = _mm512_fmadd_ps(acc[k], m, b);
    __m512 s = acc[0];
    for (int k = 1; k < 12; ++k) s = _mm512_add_ps(s, acc[k]);
    alignas(64) float lanes[16];
    _mm512_store_ps(lanes, s);
    for (float v : lanes) *sink += v;
    return static_cast<double>(iters) * 12 * 16 * 2;
}

__attribute__((target("avx2,fma"))) double fma_avx2(int64_t iters, float* sink) {
    __m256 acc[12];
    for (int k = 0; k < 12; ++k) acc[k] = _mm256_set1_ps(1.0f + 0.01f * k);
    const __m256 m = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
    for (int64_t i = 0; i < iters; ++i)
        for (int k = 0; k < 12; ++k) acc[k] = _mm256_fmadd_ps(acc[k], m, b);
    alignas(32) float t[8];
    __m256 s = acc[0];
    for (int k = 1; k < 12; ++k) s = _mm256_add_ps(s, acc[k]);
    _mm256_store_ps(t, s);
    *sink += t[0] + t[7];
    return static_cast<double>(iters) * 12 * 8 * 2;
}

double fma_scalar(int64_t iters, float* sink) {
    float acc[12];
    for (int k = 0; k < 12; ++k) acc[k] = 1.0f + 0.01f * k;
    for (int64_t i = 0; i < iters; ++i)
        for (int k = 0; k < 12; ++k) acc[k] = acc[k] * 0.999999f + 1e-7f;
    for (int k = 0; k < 12; ++k) *sink += acc[k];
    return static_cast<double>(iters) * 12 * 2;
}

// Runs fn(thread_index) on `threads` threads started together; returns wall seconds.
template <typename Fn> double run_threads(int threads, Fn fn) {
    std::vector<std::thread> ts;
    const auto t0 = Clock::now();
    for (int i = 1; i < threads; ++i) ts.emplace_back(fn, i);
    fn(0);
    for (auto& t : ts) t.join();
    return std::chrono::duration<double>(Clock::now() - t0).count();
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

} // namespace

struct ReadProbe::Impl {
    int threads = 1;
    bool avx512 = false, avx2 = false;
    size_t per = 0; // floats per thread and half (a multiple of 128)
    std::unique_ptr<float, void (*)(void*)> buf{nullptr, &std::free};
    float* small = nullptr;
    std::vector<float> sinks; // one cache line per thread

    // Median GB/s of `passes` streams of `base` (after one warm-up pass).
    double rate(const float* base, int streams, int passes) {
        std::vector<double> bw;
        for (int pass = 0; pass < passes + 1; ++pass) {
            const double s = run_threads(threads, [&](int t) {
                const float* p = base + t * per;
                sinks[t * 16] += avx512 ? sum_avx512(p, per, streams)
                                 : avx2 ? sum_avx2(p, per, streams)
                                        : sum_scalar(p, per, streams);
            });
            if (pass > 0) bw.push_back(static_cast<double>(per * threads * sizeof(float)) / s / 1e9);
        }
        return median(bw);
    }
};

size_t last_level_cache_bytes() {
    for (const int name : {_SC_LEVEL3_CACHE_SIZE, _SC_LEVEL2_CACHE_SIZE}) {
        const long v = sysconf(name);
        if (v > 0) return static_cast<size_t>(v);
    }
    return 0;
}

ReadProbe::ReadProbe(int threads, size_t buffer_bytes) : impl_(std::make_unique<Impl>()) {
    Impl& m = *impl_;
    m.avx512 = __builtin_cpu_supports("avx512f");
    m.avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    m.threads = threads = std::max(threads, 1);
    const size_t n =
        std::max<size_t>(buffer_bytes / sizeof(float), 256 * threads) / (256 * threads) * 256 * threads;
    // One allocation, two halves of n / 2 floats: the first offered to transparent huge pages (what the best
    // streaming kernel can see: no TLB misses, prefetchers not stopped at 4 KiB boundaries), the second
    // kept in 4 KiB pages, like a checkpoint mapped from a filesystem without huge pages.
    constexpr size_t kHuge = size_t{2} << 20;
    const size_t half = (n / 2 * sizeof(float) + kHuge - 1) / kHuge * kHuge; // bytes per half
    m.buf.reset(static_cast<float*>(std::aligned_alloc(kHuge, 2 * half)));
    m.small = reinterpret_cast<float*>(reinterpret_cast<char*>(m.buf.get()) + half);
    madvise(m.buf.get(), half, MADV_HUGEPAGE); // advice only: without THP the figures just coincide
    madvise(m.small, half, MADV_NOHUGEPAGE);
    m.per = n / 2 / threads;
    m.sinks.assign(threads * 16, 0.0f);
    run_threads(threads, [&](int t) { // first touch by the thread that reads it
        for (float* b : {m.buf.get(), m.small}) {
            float* p = b + t * m.per;
            for (size_t i = 0; i < m.per; ++i) p[i] = static_cast<float>(i & 1023) * 1e-3f;
        }
    });
}

ReadProbe::~ReadProbe() {
    for (float v : impl_->sinks) g_sink = g_sink + v;
}

size_t ReadProbe::buffer_bytes() const {
    return impl_->per * impl_->threads * sizeof(float);
}

ReadProbe::Reading ReadProbe::measure(int passes) {
    Impl& m = *impl_;
    passes = std::max(passes, 1);
    Reading r;
    r.one_stream = m.rate(m.buf.get(), 1, passes);
    r.best = std::max(
        {r.one_stream, m.rate(m.buf.get(), 4, passes), m.avx512 ? m.rate(m.buf.get(), 8, passes) : 0.0});
    return r;
}

ReadProbe::Reading ReadProbe::measure_all(int passes) {
    Impl& m = *impl_;
    Reading r = measure(passes);
    r.four_k = m.rate(m.small, 4, std::max(passes, 1));
    r.best = std::max(r.best, r.four_k);
    return r;
}

ComputePeaks measure_compute(int threads, int passes, int64_t iters) {
    const bool avx512 = __builtin_cpu_supports("avx512f");
    const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    threads = std::max(threads, 1);
    passes = std::max(passes, 1);
    std::vector<float> sinks(threads * 16, 0.0f); // one cache line per thread
    // Median over passes of the summed work / wall seconds, work(t) run on every thread t.
    auto peak = [&](auto work) {
        std::vector<double> rate;
        for (int pass = 0; pass < passes + 1; ++pass) {
            std::vector<double> done(threads);
            const double s = run_threads(threads, [&](int t) { done[t] = work(&sinks[t * 16]); });
            double total = 0.0;
            for (double d : done) total += d;
            if (pass > 0) rate.push_back(total / s / 1e9);
        }
        return median(rate);
    };
    ComputePeaks out;
    out.fma_gflop_s = peak([&](float* sink) {
        return avx512 ? fma_avx512(iters, sink) : avx2 ? fma_avx2(iters, sink) : fma_scalar(iters / 4, sink);
    });
    if (__builtin_cpu_supports("avx512vnni"))
        out.vnni_gop_s = peak([&](float* sink) { return vnni_avx512(iters, sink); });
    for (float v : sinks) g_sink = g_sink + v;
    return out;
}

MachineLimits measure_machine(int threads, size_t buffer_bytes, int passes) {
    ReadProbe probe(threads, buffer_bytes);
    return measure_machine(probe, threads, passes);
}

MachineLimits measure_machine(ReadProbe& probe, int threads, int passes) {
    MachineLimits out;
    const bool avx512 = __builtin_cpu_supports("avx512f");
    const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    out.isa = avx512 ? "avx512" : avx2 ? "avx2" : "scalar";
    out.buffer_bytes = probe.buffer_bytes();
    const ReadProbe::Reading r = probe.measure_all(passes);
    out.read_gb_s = r.best;
    out.read_1stream_gb_s = r.one_stream;
    out.read_4k_gb_s = r.four_k;
    const ComputePeaks c = measure_compute(threads, passes, 20'000'000);
    out.fma_gflop_s = c.fma_gflop_s;
    out.vnni_gop_s = c.vnni_gop_s;
    return out;
}

} // namespace deepinfer::cli
