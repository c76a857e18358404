// Per-call cost of the decode GEMVs: the projections of one attention layer that read the same activations
// (wq_a, wkv, the compressor's and the indexer's wkv / wgate, weights_proj), streamed at batch 1
//   (a) one matmul per weight, as the model called them,
//   (b) kernels::matmul_multi per layer (one parallel loop over all of them),
//   (c) one matmul over the same bytes as a single weight (the ceiling: no call boundaries),
// interleaved rep by rep with a plain streaming read of the same bytes, so the ratios hold on a shared
// machine. The layer sets are replicated over --mb of memory (far past the last-level cache, as a model's).
//
//   multi_bench [--threads 2] [--mb 256] [--reps 7] [--preset small|flash] [--numerics exact|fast]
//               [--subnormals 0|1]
//     small: bench-small's layer (BF16, hidden 1024: 7 weights, 3.4 MB);
//     flash: V4-Flash's (FP8 128x128, hidden 4096: 7 weights, 17 MB).
//   --subnormals 0 (default): no weight decodes to a subnormal float, as in a model's weights (a BF16 or
//     e4m3 code with a zero exponent is rare there); 1: random bytes, where 1/128 of BF16 codes and 1/16 of
//     e4m3 ones do. On Intel cores every FMA with a subnormal input takes a microcode assist.

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <sys/mman.h>

#include "core/thread_pool.h"
#include "core/weight.h"
#include "kernels/cpu/linear.h"
#include "kernels/ops.h"
#include "stream_read.h"

namespace {

using namespace deepinfer;
using F = core::WeightFormat;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
    return std::chrono::duration<double>(Clock::now() - t0).count();
}

} // namespace

int main(int argc, char** argv) {
    int threads = 2, reps = 7;
    int64_t mb = 256;
    std::string preset = "small";
    bool subnormals = false;
    kernels::Numerics num = kernels::Numerics::kExact;
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string flag = argv[i];
        if (flag == "--threads") {
            threads = std::max(1, std::atoi(argv[i + 1]));
        } else if (flag == "--mb") {
            mb = std::atoll(argv[i + 1]);
        } else if (flag == "--reps") {
            reps = std::max(1, std::atoi(argv[i + 1]));
        } else if (flag == "--subnormals") {
            subnormals = std::atoi(argv[i + 1]) != 0;
        } else if (flag == "--preset") {
            preset = argv[i + 1];
        } else if (flag == "--numerics") {
            if (!kernels::cpu::parse_numerics(argv[i + 1], &num)) {
                std::fprintf(stderr, "multi_bench: --numerics %s: not exact|fast\n", argv[i + 1]);
                return 2;
            }
        } else {
            std::fprintf(stderr, "multi_bench: unknown flag %s\n", flag.c_str());
            return 2;
        }
    }
    if (preset != "small" && preset != "flash") {
        std::fprintf(stderr, "multi_bench: --preset %s: not small|flash\n", preset.c_str());
        return 2;
    }
    const bool small = preset == "small";
    const F format = small ? F::kBF16 : F::kFp8Block;
    const int64_t cols = small ? 1024 : 4096;
    const double bytes_per_weight = small ? 2.0 : 1.0;
    // wq_a, wkv, compressor wkv / wgate, indexer compressor wkv / wgate, indexer weights_proj.
    const std::vector<int64_t> layer_rows = small ? std::vector<int64_t>{512, 128, 256, 256, 256, 256, 8}
                                                  : std::vector<int64_t>{1024, 512, 1024, 1024, 256, 256, 64};
    int64_t set_rows = 0;
    for (int64_t r : layer_rows) set_rows += r;
    const auto set_bytes = static_cast<int64_t>(static_cast<double>(set_rows * cols) * bytes_per_weight);
    const int64_t sets = std::max<int64_t>(1, (mb << 20) / set_bytes), total_rows = sets * set_rows;
    const int64_t bytes = sets * set_bytes;

    constexpr size_t kHuge = size_t{2} << 20;
    std::unique_ptr<uint8_t, decltype(&std::free)> buf(
        static_cast<uint8_t*>(
            std::aligned_alloc(kHuge, (static_cast<size_t>(bytes) + kHuge - 1) / kHuge * kHuge)),
        &std::free);
    if (!buf) {
        std::fprintf(stderr, "multi_bench: cannot allocate %lld MiB\n", static_cast<long long>(mb));
        return 1;
    }
    madvise(buf.get(), static_cast<size_t>(bytes), MADV_HUGEPAGE); // advice only
    uint32_t s = 12345;
    for (int64_t i = 0; i < bytes; ++i) {
        s = s * 1664525u + 1013904223u;
        uint8_t b = static_cast<uint8_t>(s >> 24) & 0xbf; // no NaN / inf, moderate exponents
        if (!subnormals) {
            if (!small && (b & 0x78) == 0) b |= 0x08;                // e4m3 exponent field nonzero
            if (small && (i & 1) != 0 && (b & 0x7f) == 0) b |= 0x01; // BF16 (high byte) exponent nonzero
        }
        buf.get()[i] = b;
    }
    // e8m0 scales of 2^-7 for every FP8 block (far more than any weight needs).
    std::vector<uint8_t> scale(static_cast<size_t>((total_rows / 128 + 2 * sets * 7 + 8) * (cols / 128)),
                               120);

    auto make = [&](int64_t rows, const uint8_t* data) {
        core::Weight w;
        w.format = format;
        w.rows = rows;
        w.cols = cols;
        w.block_rows = small ? 1 : 128;
        w.block_cols = small ? 1 : 128;
        w.data = data;
        w.scale = small ? nullptr : scale.data();
        return w;
    };
    std::vector<core::Weight> weights; // sets x layer_rows, laid out one after another
    {
        const uint8_t* p = buf.get();
        for (int64_t k = 0; k < sets; ++k)
            for (int64_t r : layer_rows) {
                weights.push_back(make(r, p));
                p += static_cast<int64_t>(static_cast<double>(r * cols) * bytes_per_weight);
            }
    }
    const core::Weight whole = make(total_rows, buf.get());

    core::ThreadPool pool(threads);
    std::vector<float> x(cols), y(static_cast<size_t>(total_rows));
    for (int64_t c = 0; c < cols; ++c) x[c] = static_cast<float>((c * 7919) % 1000) * 1e-3f - 0.5f;
    auto args_of = [&](const core::Weight& w, float* out) {
        kernels::MatmulArgs a = kernels::linear_args(x.data(), 1, w, out);
        a.pool = &pool;
        a.numerics = num;
        return a;
    };
    auto run_calls = [&] {
        float* out = y.data();
        for (const core::Weight& w : weights) {
            kernels::cpu::matmul(args_of(w, out));
            out += w.rows;
        }
    };
    auto run_multi = [&] {
        float* out = y.data();
        const size_t per = layer_rows.size();
        std::vector<kernels::MatmulArgs> set(per);
        for (size_t k = 0; k < weights.size(); k += per) {
            for (size_t i = 0; i < per; ++i) {
                set[i] = args_of(weights[k + i], out);
                out += weights[k + i].rows;
            }
            kernels::cpu::matmul_multi(set);
        }
    };
    auto run_one = [&] { kernels::cpu::matmul(args_of(whole, y.data())); };

    std::vector<double> t_read, t_calls, t_multi, t_one;
    for (int rep = 0; rep < reps + 1; ++rep) { // rep 0 warms up
        auto t0 = Clock::now();
        const double rd = bench::stream_read_seconds(&pool, buf.get(), bytes);
        t0 = Clock::now();
        run_calls();
        const double tc = seconds_since(t0);
        t0 = Clock::now();
        run_multi();
        const double tm = seconds_since(t0);
        t0 = Clock::now();
        run_one();
        const double to = seconds_since(t0);
        if (rep == 0) continue;
        t_read.push_back(rd);
        t_calls.push_back(tc);
        t_multi.push_back(tm);
        t_one.push_back(to);
    }
    const double gb = static_cast<double>(bytes) * 1e-9, rd = bench::median(t_read);
    std::printf("preset %s (%s, %lld columns), %lld layer sets of %zu weights, %.1f MB, %d threads, %s, "
                "median of %d reps\n",
                preset.c_str(), small ? "bf16" : "fp8 128x128", static_cast<long long>(cols),
                static_cast<long long>(sets), layer_rows.size(), static_cast<double>(bytes) * 1e-6, threads,
                kernels::cpu::numerics_name(num), reps);
    std::printf("%-28s %9s %8s %7s %12s\n", "mode", "ms", "GB/s", "%read", "us per set");
    auto row = [&](const char* name, double t) {
        std::printf("%-28s %9.3f %8.1f %7.1f %12.1f\n", name, t * 1e3, gb / t, 100.0 * rd / t,
                    t * 1e6 / static_cast<double>(sets));
    };
    row("read (same bytes)", rd);
    row("one matmul per weight", bench::median(t_calls));
    row("matmul_multi per layer", bench::median(t_multi));
    row("one matmul over all rows", bench::median(t_one));
    return 0;
}
