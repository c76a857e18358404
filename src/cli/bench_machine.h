#pragma once
// Machine limits measured inside a benchmark's own run (shared machines drift): streaming read bandwidth,
// FP32 FMA rate and int8 VNNI rate over `threads` threads, each the median of a few passes. The read
// roofline is the best of several streaming patterns (1, 4 and, with AVX-512, 8 sequential streams per
// thread over a buffer in transparent huge pages where the kernel grants them), so it is what the best
// streaming kernel can reach; the single-stream figure and 4 streams over 4 KiB pages (the previous
// probe, like a mapped checkpoint) are kept for comparison.

#include <cstddef>
#include <string>

namespace deepinfer::cli {

struct MachineLimits {
    double read_gb_s = 0.0;         // GB/s (1e9 bytes), streaming read of a buffer >> last-level cache
    double read_1stream_gb_s = 0.0; // the same with one stream per thread
    double read_4k_gb_s = 0.0;      // 4 streams per thread over 4 KiB pages (huge pages advised off)
    double fma_gflop_s = 0.0;       // GFLOP/s (FMA = 2 flops), register-resident FMAs
    double vnni_gop_s = 0.0;        // int8 GOP/s (vpdpbusd, multiply-add = 2 ops); 0 without AVX512-VNNI
    size_t buffer_bytes = 0;
    std::string isa; // "avx512", "avx2", or "scalar"
};

MachineLimits measure_machine(int threads, size_t buffer_bytes, int passes);

} // namespace deepinfer::cli
