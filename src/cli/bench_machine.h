#pragma once
// Machine limits measured inside a benchmark's own run (shared machines drift): streaming read bandwidth
// and FP32 FMA rate over `threads` threads, each the median of a few passes.

#include <cstddef>
#include <string>

namespace deepinfer::cli {

struct MachineLimits {
    double read_gb_s = 0.0;   // GB/s (1e9 bytes), streaming read of a buffer >> last-level cache
    double fma_gflop_s = 0.0; // GFLOP/s (FMA = 2 flops), register-resident FMAs
    size_t buffer_bytes = 0;
    std::string isa; // "avx512", "avx2", or "scalar"
};

MachineLimits measure_machine(int threads, size_t buffer_bytes, int passes);

} // namespace deepinfer::cli
