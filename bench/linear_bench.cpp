// Perf mode of the linear-kernel harness: GB/s and GFLOP/s of kernels::cpu::matmul per ISA x weight format
// x shape x token count x numerics, as ratios to the streaming-read bandwidth and FP32 FMA peak measured in
// the same run (cli/bench_machine, the probe `deepinfer bench` uses; fast mode against the int8 VNNI peak).
// Decode cases stream a weight set far larger than the last-level cache; prefill cases reuse one weight
// across many tokens. --only hot: the GEMVs' compute ceiling, one thread over a weight that stays in L2.
//
//   linear_bench [--threads 2] [--mb 512] [--isa avx512|avx2|ref] [--reps 5] [--only decode|prefill|hot]
//                [--cols 4096]   (the reduction dim: 1024 = bench-small's short 2 KiB BF16 rows)
//                [--format bf16|fp8_128|fp4_g32|f32]   (one weight format only)

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <immintrin.h>
#include <sys/mman.h>

#include "cli/bench_machine.h"
#include "core/thread_pool.h"
#include "core/weight.h"
#include "kernels/cpu/linear.h"
#include "kernels/cpu/linear_kernels.h"
#include "kernels/ops.h"
#include "stream_read.h"

namespace {

using namespace deepinfer;
using F = core::WeightFormat;
using Clock = std::chrono::steady_clock;

struct Format {
    F format;
    int br, bc;
    const char* name;
    double bytes_per_weight;
};

core::Weight make(const Format& f, int64_t rows, int64_t cols, const uint8_t* data, const uint8_t* scale) {
    core::Weight w;
    w.format = f.format;
    w.rows = rows;
    w.cols = cols;
    w.block_rows = f.br;
    w.block_cols = f.bc;
    w.data = data;
    w.scale = scale;
    return w;
}

using bench::median;
using bench::stream_read_seconds;

} // namespace

int main(int argc, char** argv) {
    int threads = 2, reps = 5;
    std::string only;   // "decode" / "prefill": just those cases
    std::string format; // "bf16" / "fp8_128" / "fp4_g32" / "f32": just that weight format
    int64_t mb = 512;
    int64_t cols = 4096;
    std::vector<kernels::cpu::Isa> isas;
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string flag = argv[i];
        if (flag == "--threads") {
            threads = std::atoi(argv[i + 1]);
        } else if (flag == "--mb") {
            mb = std::atoll(argv[i + 1]);
        } else if (flag == "--cols") {
            cols = std::atoll(argv[i + 1]);
        } else if (flag == "--only") {
            only = argv[i + 1];
        } else if (flag == "--format") {
            format = argv[i + 1];
        } else if (flag == "--reps") {
            reps = std::atoi(argv[i + 1]);
        } else if (flag == "--isa") {
            kernels::cpu::Isa isa;
            if (!kernels::cpu::parse_isa(argv[i + 1], &isa) || !kernels::cpu::isa_supported(isa)) {
                std::fprintf(stderr, "linear_bench: --isa %s: not one of the supported avx512|avx2|ref\n",
                             argv[i + 1]);
                return 2;
            }
            isas.push_back(isa);
        } else {
            std::fprintf(stderr, "linear_bench: unknown flag %s\n", flag.c_str());
            return 2;
        }
    }
    const bool explicit_isa = !isas.empty();
    if (isas.empty())
        for (auto i : {kernels::cpu::Isa::kAvx512, kernels::cpu::Isa::kAvx2, kernels::cpu::Isa::kRef})
            if (kernels::cpu::isa_supported(i)) isas.push_back(i);
    threads = std::max(threads, 1);
    reps = std::max(reps, 1);
    core::ThreadPool pool(threads);

    const Format formats[] = {{F::kBF16, 1, 1, "bf16", 2.0},
                              {F::kFp8Block, 128, 128, "fp8_128", 1.0 + 1.0 / (128 * 128)},
                              {F::kFp4Group, 1, 32, "fp4_g32", 0.5 + 1.0 / 32},
                              {F::kF32, 1, 1, "f32", 4.0}};
    // One byte buffer serves every format (random bytes, the e4m3 NaN codes cleared), in 2 MiB pages where
    // the kernel offers transparent huge pages, as a model's weights are by default (weights::Placement).
    const int64_t bytes = mb << 20;
    constexpr size_t kHuge = size_t{2} << 20;
    std::unique_ptr<uint8_t, decltype(&std::free)> data_buf(
        static_cast<uint8_t*>(
            std::aligned_alloc(kHuge, (static_cast<size_t>(bytes) + kHuge - 1) / kHuge * kHuge)),
        &std::free);
    if (!data_buf) {
        std::fprintf(stderr, "linear_bench: cannot allocate %lld MiB\n", static_cast<long long>(mb));
        return 1;
    }
    madvise(data_buf.get(), static_cast<size_t>(bytes), MADV_HUGEPAGE); // advice only
    const std::span<uint8_t> data(data_buf.get(), static_cast<size_t>(bytes));
    std::vector<uint8_t> scale(bytes / 16 + 4096);
    uint32_t s = 12345;
    for (auto& b : data) {
        s = s * 1664525u + 1013904223u;
        b = static_cast<uint8_t>(s >> 24) & 0xbf; // no NaN / inf in any format, exponents moderate
        // No subnormals: e4m3 exponent field nonzero, and so BF16 exponents >= 16 (the high byte's bits
        // 3-6 are its exponent's top four), so no product with x is an F32 denormal either. Intel cores
        // take a microcode assist (~100+ cycles) per FMA with a denormal input or output, which turned
        // the exact GEMVs' rates into a count of denormals (BF16 5.5 / FP8 0.4 GB/s a core, 2026-12-02);
        // a real checkpoint's e4m3 are ~1e-4 subnormal (flash2: 0.007-0.011%), its BF16 weights ~0.
        if ((b & 0x78) == 0) b |= 0x08;
    }
    for (auto& b : scale) b = 120;
    cols = std::max<int64_t>(128, cols / 128 * 128); // whole FP8 blocks / FP4 words
    const int64_t max_n = 512;
    std::vector<float> x(max_n * cols), y(max_n * (bytes / cols));
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 7919) % 1000) * 1e-3f - 0.5f;

    const cli::MachineLimits lim = cli::measure_machine(threads, size_t{1} << 30, 5);
    std::printf(
        "machine (%s, %d threads): read %.1f GB/s (best streaming pattern; 1 stream %.1f, 4 streams on 4 "
        "KiB pages %.1f), FP32 FMA %.1f GFLOP/s, int8 VNNI %.0f GOP/s\n",
        lim.isa.c_str(), threads, lim.read_gb_s, lim.read_1stream_gb_s, lim.read_4k_gb_s, lim.fma_gflop_s,
        lim.vnni_gop_s);
    if (only == "hot") {
        // The GEMVs' compute ceiling: one thread, a weight of ~256 KiB (it stays in that core's L2) run
        // kHotCalls times per rep, so the rate is what the kernel's instructions allow, not the memory's.
        // threads x that rate is the most a decode over these weights could stream on this machine's cores;
        // where it lies below the read probe, the decode is compute-bound.
        core::ThreadPool one(1);
        constexpr int kHotCalls = 200;
        std::printf("%-7s %-8s %-13s %5s %-5s %12s %16s %7s\n", "isa", "format", "shape", "n", "mode",
                    "GB/s a core", "x threads GB/s", "%read");
        for (const Format& f : formats) {
            if (!format.empty() && format != f.name) continue;
            const int64_t rows = std::max<int64_t>(
                64, static_cast<int64_t>((256 << 10) / (f.bytes_per_weight * cols)) / 64 * 64);
            const core::Weight w = make(f, rows, cols, data.data(), scale.data());
            for (int64_t n : {1, 4}) {
                for (auto isa : isas)
                    for (auto num : {kernels::Numerics::kExact, kernels::Numerics::kFast}) {
                        if (num == kernels::Numerics::kFast && isa != kernels::cpu::Isa::kAvx512) continue;
                        kernels::MatmulArgs a = kernels::linear_args(x.data(), n, w, y.data());
                        a.pool = &one;
                        a.numerics = num;
                        std::vector<double> t;
                        for (int r = 0; r <= reps; ++r) { // the first rep warms up
                            const auto t0 = Clock::now();
                            for (int c = 0; c < kHotCalls; ++c) kernels::cpu::matmul_isa(a, isa);
                            if (r > 0) t.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
                        }
                        const double gbs =
                            kHotCalls * static_cast<double>(w.stored_bytes()) / median(t) / 1e9;
                        char shape[48];
                        std::snprintf(shape, sizeof shape, "%lldx%lld", static_cast<long long>(rows),
                                      static_cast<long long>(cols));
                        std::printf("%-7s %-8s %-13s %5lld %-5s %12.1f %16.1f %6.1f%%\n",
                                    kernels::cpu::isa_name(isa), f.name, shape, static_cast<long long>(n),
                                    num == kernels::Numerics::kFast ? "fast" : "exact", gbs, gbs * threads,
                                    100.0 * gbs * threads / lim.read_gb_s);
                        std::fflush(stdout);
                    }
            }
        }
        return 0;
    }
    // ISAs interleaved rep by rep, and for decode a streaming read of the very same weight bytes (4 streams
    // per thread, like the GEMV) in the same rep: on a shared machine the ratios stay fair.
    std::printf("%-7s %-8s %-13s %5s %-5s %8s %8s %7s %9s %7s %10s\n", "isa", "format", "shape", "n", "mode",
                "ms", "GB/s", "%read", "GFLOP/s", "%peak", "%same-rd");
    for (const Format& f : formats) {
        if (!format.empty() && format != f.name) continue;
        for (int64_t n : {1, 2, 4, 8, 32, 128, 512}) {
            const bool decode = n <= kernels::cpu::kGemvMaxTokens;
            if ((only == "decode" && !decode) || (only == "prefill" && decode)) continue;
            // kFast kernels: int8 for FP4 (the GEMV with or without VNNI, the GEMM with it), BF16 dot
            // products for BF16 / FP8; elsewhere it would repeat the exact row.
            const bool has_fast =
                (f.format == F::kFp4Group &&
                 (decode ? kernels::cpu::int8_gemv_supported() : kernels::cpu::int8_supported())) ||
                ((f.format == F::kBF16 || f.format == F::kFp8Block) && kernels::cpu::bf16_supported());
            const int64_t rows =
                decode ? static_cast<int64_t>(bytes / (f.bytes_per_weight * cols)) / 64 * 64 : int64_t{2048};
            const core::Weight w = make(f, rows, cols, data.data(), scale.data());
            kernels::MatmulArgs a = kernels::linear_args(x.data(), n, w, y.data());
            a.pool = &pool;
            // Every (ISA, numerics) variant of this case, interleaved rep by rep with each other and, for
            // decode, with a streaming read of the same bytes: exact and fast see the same machine.
            struct Variant {
                kernels::cpu::Isa isa;
                kernels::Numerics num;
            };
            std::vector<Variant> run;
            for (auto isa : isas)
                if (decode || isa != kernels::cpu::Isa::kRef || explicit_isa)
                    run.push_back({isa, kernels::Numerics::kExact});
            for (auto isa : isas)
                if (isa == kernels::cpu::Isa::kAvx512 && has_fast)
                    run.push_back({isa, kernels::Numerics::kFast});
            std::vector<std::vector<double>> t(run.size());
            std::vector<double> rd;
            for (const Variant& v : run) { // warm-up: pages, scratch
                a.numerics = v.num;
                kernels::cpu::matmul_isa(a, v.isa);
            }
            for (int r = 0; r < reps; ++r) {
                for (size_t k = 0; k < run.size(); ++k) {
                    a.numerics = run[k].num;
                    const auto t0 = Clock::now();
                    kernels::cpu::matmul_isa(a, run[k].isa);
                    t[k].push_back(std::chrono::duration<double>(Clock::now() - t0).count());
                }
                if (decode) rd.push_back(stream_read_seconds(&pool, data.data(), w.stored_bytes()));
            }
            const double read_s = decode ? median(rd) : 0.0;
            for (size_t k = 0; k < run.size(); ++k) {
                const bool fast = run[k].num == kernels::Numerics::kFast;
                const double sec = median(t[k]);
                const double gbs = static_cast<double>(w.stored_bytes()) / sec / 1e9;
                const double gflops = 2.0 * n * rows * cols / sec / 1e9;
                char shape[48], same[16] = "-";
                std::snprintf(shape, sizeof shape, "%lldx%lld", static_cast<long long>(rows),
                              static_cast<long long>(cols));
                if (decode) std::snprintf(same, sizeof same, "%.1f%%", 100.0 * read_s / sec);
                // Peak: FP32 FMA for exact, int8 VNNI for fast.
                const double peak = fast ? lim.vnni_gop_s : lim.fma_gflop_s;
                std::printf("%-7s %-8s %-13s %5lld %-5s %8.2f %8.2f %6.1f%% %9.1f %6.1f%% %10s\n",
                            kernels::cpu::isa_name(run[k].isa), f.name, shape, static_cast<long long>(n),
                            fast ? "fast" : "exact", sec * 1e3, gbs, 100.0 * gbs / lim.read_gb_s, gflops,
                            100.0 * gflops / peak, same);
            }
            std::fflush(stdout);
        }
    }
    return 0;
}
