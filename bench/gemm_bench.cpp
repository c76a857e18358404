// The prefill / batched GEMMs on one core, timed in thread CPU time (CLOCK_THREAD_CPUTIME_ID), so time
// slices lost to other processes on a shared machine do not count (their cache pollution still does).
// Weights: a rotating set of 16 matrices of rows x cols (64 MiB of FP4, 128 MiB of FP8, 256 MiB of BF16),
// larger than the last-level cache, as the experts of a MoE layer are. Per token count: exact and fast as
// the dispatcher picks them (exact: the AMX-BF16 three-piece GEMM where the CPU has AMX-BF16, else the F32
// GEMM; fast: AMX-BF16, int8 tiles / VNNI, or the BF16 GEMV) for FP8 128x128 blocks, FP4 group 32 and BF16,
// exact through the F32 GEMM where AMX-BF16 took it, the FP8 int8 GEMM at every count, and for FP4 the
// previous int8 GEMM
// (linear_avx512_vnni.cpp's, kept for CPUs without VBMI), as GOP/s per core and as a fraction of the
// single-core FP32 FMA / int8 VNNI peaks measured in the same run, in the same thread CPU time (12
// independent register-resident chains, as `deepinfer bench`'s probe).
//
//   gemm_bench [--rows 2048] [--cols 4096] [--reps 3] [--tokens 16,24,32,64,128,512] [--formats fp8,fp4,bf16]
//              [--fast-only]

#include <immintrin.h>
#include <time.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "core/weight.h"
#include "kernels/cpu/gemm_int8.h"
#include "kernels/cpu/linear.h"
#include "kernels/cpu/linear_kernels.h"

namespace {

using namespace deepinfer;
using namespace deepinfer::kernels;

double thread_seconds() {
    timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

// Bytes at a 4 KiB-aligned address, as the loader places every tensor (weights/placement.h). A plain
// std::vector's data sit 16 bytes past a page boundary, which splits every 64-byte block of FP4 codes over
// two cache lines: the int8 GEMMs then looked memory-bound where the engine's weights are not (FP4 at 24
// tokens: 2.05 ms per matrix misaligned, ~1.45 aligned, same kernel).
struct AlignedBytes {
    std::vector<uint8_t> raw;
    uint8_t* p = nullptr;
    size_t n = 0;
    void resize(size_t bytes) {
        raw.resize(bytes + 4096);
        p = raw.data() + (4096 - reinterpret_cast<uintptr_t>(raw.data()) % 4096) % 4096;
        n = bytes;
    }
    uint8_t* data() { return p; }
    uint8_t* begin() { return p; }
    uint8_t* end() { return p + n; }
};

struct WeightSet {
    AlignedBytes data, scale;
    std::vector<core::Weight> w;
};

WeightSet make_set(core::WeightFormat f, int64_t rows, int64_t cols, int count, std::mt19937* rng) {
    WeightSet s;
    if (f == core::WeightFormat::kBF16) { // N(0, 1/64) values: the BF16 LM head / dense projections
        const int64_t n = rows * cols;
        s.data.resize(count * n * 2);
        std::normal_distribution<float> nd(0.0f, 0.125f);
        for (int64_t i = 0; i < count * n; ++i) {
            const float v = nd(*rng);
            uint32_t b;
            std::memcpy(&b, &v, 4);
            const auto h = static_cast<uint16_t>(b >> 16);
            std::memcpy(s.data.data() + 2 * i, &h, 2);
        }
        for (int i = 0; i < count; ++i) {
            core::Weight w;
            w.format = f;
            w.rows = rows;
            w.cols = cols;
            w.data = s.data.data() + i * n * 2;
            s.w.push_back(w);
        }
        return s;
    }
    const bool fp4 = f == core::WeightFormat::kFp4Group;
    const int64_t bytes = fp4 ? rows * cols / 2 : rows * cols;
    const int64_t scales = fp4 ? rows * cols / 32 : ((rows + 127) / 128) * ((cols + 127) / 128);
    s.data.resize(count * bytes);
    s.scale.resize(count * scales);
    for (uint8_t& b : s.data) {
        b = static_cast<uint8_t>((*rng)() & 0xff);
        if (!fp4 && (b & 0x7f) == 0x7f) b ^= 1; // e4m3 NaN codes are not weights
        // No e4m3 subnormals: the exact GEMV widens them to F32 denormals, and on Intel every FMA with a
        // denormal operand takes a microcode assist, so a random byte's 1/16 chance of one timed the assists
        // (the exact FP8 GEMV at 16 tokens: 180 ms per matrix instead of ~4; linear_bench does the same).
        if (!fp4 && (b & 0x78) == 0) b |= 0x08;
    }
    // Group scales of Gaussian-like weights: within a few binades of each other.
    for (uint8_t& b : s.scale) b = static_cast<uint8_t>(119 + (*rng)() % 3);
    for (int i = 0; i < count; ++i) {
        core::Weight w;
        w.format = f;
        w.rows = rows;
        w.cols = cols;
        w.block_rows = fp4 ? 1 : 128;
        w.block_cols = fp4 ? 32 : 128;
        w.data = s.data.data() + i * bytes;
        w.scale = s.scale.data() + i * scales;
        s.w.push_back(w);
    }
    return s;
}

// Peak rates of one core in thread CPU time: 12 independent chains of zmm FMA / vpdpbusd.
__attribute__((target("avx512f"))) double fma_peak() {
    __m512 a[12];
    for (int i = 0; i < 12; ++i) a[i] = _mm512_set1_ps(1.0f + 1e-7f * static_cast<float>(i));
    const __m512 m = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-7f);
    const int64_t iters = 20000000;
    const double t0 = thread_seconds();
    for (int64_t k = 0; k < iters; ++k)
        for (int i = 0; i < 12; ++i) a[i] = _mm512_fmadd_ps(a[i], m, c);
    const double t = thread_seconds() - t0;
    float sink = 0.0f;
    for (int i = 0; i < 12; ++i) sink += _mm512_reduce_add_ps(a[i]);
    if (sink == 12345.0f) std::printf(" ");
    return 2.0 * 16 * 12 * static_cast<double>(iters) / t * 1e-9;
}

__attribute__((target("avx512f,avx512vnni"))) double vnni_peak() {
    __m512i a[12];
    for (int i = 0; i < 12; ++i) a[i] = _mm512_set1_epi32(i);
    const __m512i x = _mm512_set1_epi8(3), w = _mm512_set1_epi8(-2);
    const int64_t iters = 20000000;
    const double t0 = thread_seconds();
    for (int64_t k = 0; k < iters; ++k)
        for (int i = 0; i < 12; ++i) a[i] = _mm512_dpbusd_epi32(a[i], x, w);
    const double t = thread_seconds() - t0;
    int64_t sink = 0;
    for (int i = 0; i < 12; ++i) sink += _mm512_reduce_add_epi32(a[i]);
    if (sink == 12345) std::printf(" ");
    return 2.0 * 64 * 12 * static_cast<double>(iters) / t * 1e-9;
}

} // namespace

int main(int argc, char** argv) {
    int64_t rows = 2048, cols = 4096, reps = 3;
    std::vector<int64_t> tokens = {16, 24, 32, 64, 128, 512};
    std::string formats = "fp8,fp4,bf16";
    bool fast_only = false;
    for (int i = 1; i < argc; i += 2) {
        const std::string k = argv[i];
        if (k == "--fast-only") {
            fast_only = true;
            --i;
            continue;
        }
        if (i + 1 >= argc) {
            std::fprintf(stderr, "gemm_bench: %s needs a value\n", k.c_str());
            return 2;
        }
        if (k == "--formats") {
            formats = argv[i + 1];
        } else if (k == "--rows") {
            rows = std::atoll(argv[i + 1]);
        } else if (k == "--cols") {
            cols = std::atoll(argv[i + 1]);
        } else if (k == "--reps") {
            reps = std::atoll(argv[i + 1]);
        } else if (k == "--tokens") {
            tokens.clear();
            for (const char* p = argv[i + 1]; *p != '\0';) {
                tokens.push_back(std::strtoll(p, const_cast<char**>(&p), 10));
                if (*p == ',') ++p;
            }
        } else {
            std::fprintf(stderr, "gemm_bench: unknown flag %s\n", k.c_str());
            return 2;
        }
    }
    if (!cpu::fp8_int8_supported() || !cpu::isa_supported(cpu::Isa::kAvx512) || cols % 128 != 0) {
        std::fprintf(stderr, "gemm_bench: needs AVX-512 VNNI + VBMI and cols %% 128 == 0\n");
        return 2;
    }
    core::ThreadPool one(1);
    const double fma1 = fma_peak(), vnni1 = vnni_peak();
    std::printf(
        "one core, thread CPU time: FP32 FMA %.1f GFLOP/s, int8 VNNI %.1f GOP/s; %lld x %lld weights\n", fma1,
        vnni1, static_cast<long long>(rows), static_cast<long long>(cols));
    std::mt19937 rng(1);
    const int count = 16;
    const WeightSet fp8 = make_set(core::WeightFormat::kFp8Block, rows, cols, count, &rng);
    const WeightSet fp4 = make_set(core::WeightFormat::kFp4Group, rows, cols, count, &rng);
    const WeightSet bf16 = make_set(core::WeightFormat::kBF16, rows, cols, count, &rng);
    const cpu::detail::Int8Table old = cpu::detail::avx512_vnni_table();
    const cpu::detail::GemmQTable gemm = cpu::detail::avx512_vnni_gemm_table();
    std::printf("%-6s %-16s %5s %10s %10s %8s\n", "format", "kernel", "n", "ms/matrix", "GOP/s", "%peak");
    for (int64_t n : tokens) {
        std::vector<float> x(n * cols), y(n * rows);
        std::normal_distribution<float> nd(0.0f, 1.0f);
        for (float& v : x) v = nd(rng);
        const int64_t n_pad = (n + 15) / 16 * 16;
        std::vector<float> buf(cpu::detail::gemm_q8_act_floats(n_pad, cols));
        std::vector<float> scratch(cpu::detail::int8_scratch_floats(n_pad));
        auto report = [&](const char* fmt, const char* kernel, double peak, auto&& one_matrix) {
            double best = 1e30;
            for (int64_t r = 0; r < reps; ++r) {
                const double t0 = thread_seconds();
                for (int i = 0; i < count; ++i) one_matrix(i);
                best = std::min(best, (thread_seconds() - t0) / count);
            }
            const double gop = 2.0 * static_cast<double>(n * rows * cols) / best * 1e-9;
            std::printf("%-6s %-16s %5lld %10.3f %10.1f %7.1f%%\n", fmt, kernel, static_cast<long long>(n),
                        best * 1e3, gop, 100.0 * gop / peak);
        };
        for (const WeightSet* s : {&fp8, &fp4, &bf16}) {
            const bool is4 = s == &fp4;
            const char* fmt = is4 ? "fp4" : s == &fp8 ? "fp8" : "bf16";
            if (("," + formats + ",").find("," + std::string(fmt) + ",") == std::string::npos) continue;
            for (Numerics num : {Numerics::kExact, Numerics::kFast}) {
                if (fast_only && num == Numerics::kExact) continue;
                report(fmt, num == Numerics::kFast ? "fast (dispatch)" : "exact (dispatch)",
                       num == Numerics::kFast ? vnni1 : fma1, [&](int i) {
                           const MatmulArgs a{x.data(), n,        cols, &s->w[i], 0,
                                              rows,     y.data(), rows, &one,     num};
                           cpu::matmul_isa(a, cpu::Isa::kAvx512);
                       });
            }
            if (fast_only) continue;
            if (cpu::amx_bf16_supported()) {
                // exact without AMX-BF16: the F32 GEMM the dispatcher takes on other AVX-512 CPUs
                report(fmt, "exact, F32 GEMM", fma1, [&](int i) {
                    const MatmulArgs a{x.data(), n,        cols, &s->w[i], 0,
                                       rows,     y.data(), rows, &one,     Numerics::kExact};
                    cpu::detail::force_amx_bf16_off(0);
                    cpu::matmul_isa(a, cpu::Isa::kAvx512);
                    cpu::detail::force_amx_bf16_off(-1);
                });
            }
            if (s == &fp8) {
                // The int8 GEMM whatever the token count (the dispatcher picks the BF16 GEMV below
                // kInt8OverBf16Tokens where the CPU has AVX-512 BF16).
                report(fmt, "fast, int8 GEMM", vnni1, [&](int i) {
                    const MatmulArgs a{x.data(), n,        cols, &s->w[i], 0,
                                       rows,     y.data(), rows, &one,     Numerics::kFast};
                    const int64_t n8 = (n + 7) / 8 * 8;
                    auto* xq = reinterpret_cast<int8_t*>(buf.data());
                    float* xs = buf.data() + cols * n8 / 4;
                    auto* seed = reinterpret_cast<int32_t*>(xs + cols / 128 * n8);
                    gemm.quantize(a, 0, n8, n8, xq, xs, seed);
                    gemm.fp8(a, 0, rows, xq, xs, seed, n8, scratch.data());
                });
            }
            if (is4) {
                report(fmt, "fast, old GEMM", vnni1, [&](int i) {
                    const MatmulArgs a{x.data(), n,        cols, &s->w[i], 0,
                                       rows,     y.data(), rows, &one,     Numerics::kFast};
                    auto* xq = reinterpret_cast<uint8_t*>(buf.data());
                    float* xs = buf.data() + cols * n_pad / 4;
                    old.quantize(a, 0, n_pad, n_pad, xq, xs);
                    old.gemm(a, 0, rows, xq, xs, n_pad, scratch.data());
                });
            }
        }
    }
    return 0;
}
