#pragma once
// Machine limits measured inside a benchmark's own run (shared machines drift): streaming read bandwidth,
// FP32 FMA rate and int8 VNNI rate over `threads` threads, each the median of a few passes. The read
// roofline is the best of several streaming patterns (1, 4 and, with AVX-512, 8 sequential streams per
// thread over a buffer in transparent huge pages where the kernel grants them), so it is what the best
// streaming kernel can reach; the single-stream figure and 4 streams over 4 KiB pages (the previous
// probe, like a mapped checkpoint) are kept for comparison.

#include <cstddef>
#include <memory>
#include <string>

namespace deepinfer::cli {

struct MachineLimits {
    double read_gb_s = 0.0;         // GB/s (1e9 bytes), streaming read of buffer_bytes (see ReadProbe)
    double read_1stream_gb_s = 0.0; // the same with one stream per thread
    double read_4k_gb_s = 0.0;      // 4 streams per thread over 4 KiB pages (huge pages advised off)
    double fma_gflop_s = 0.0;       // GFLOP/s (FMA = 2 flops), register-resident FMAs
    double vnni_gop_s = 0.0;        // int8 GOP/s (vpdpbusd, multiply-add = 2 ops); 0 without AVX512-VNNI
    size_t buffer_bytes = 0;        // streamed by each read measurement (the huge-page half)
    std::string isa;                // "avx512", "avx2", or "scalar"
};

MachineLimits measure_machine(int threads, size_t buffer_bytes, int passes);

// The size of the last-level data cache this process's CPU reports (sysconf: L3, else L2), 0 if unknown. A
// read probe over a buffer that fits in it measures the cache, not DRAM: on a 2-vCPU Xeon reporting a 480 MiB
// L3, a 256 MiB buffer read 39-70 GB/s where 1-4 GiB read 32-35.
size_t last_level_cache_bytes();

// The read probe's buffer, allocated and first touched once, so that a benchmark can take the read figure
// beside each measured repeat: on a shared machine the bandwidth a process gets drifts by a third within a
// minute, so a figure taken at the end of the run can belong to another state of the machine than the
// repeats it judges. measure() streams the huge-page half with 1, 4 and (AVX-512) 8 streams per thread and
// returns the best median, the figure measure_machine calls read_gb_s.
class ReadProbe {
public:
    ReadProbe(int threads, size_t buffer_bytes);
    ~ReadProbe();
    ReadProbe(const ReadProbe&) = delete;
    ReadProbe& operator=(const ReadProbe&) = delete;
    struct Reading {
        double best = 0.0, one_stream = 0.0, four_k = 0.0; // GB/s; four_k only from measure_all
    };
    Reading measure(int passes);
    Reading measure_all(int passes); // also 4 streams over the 4 KiB-page half
    size_t buffer_bytes() const;     // streamed by each measurement

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

// measure_machine over an existing probe's buffer (no second buffer while the first is alive).
MachineLimits measure_machine(ReadProbe& probe, int threads, int passes);

// The FP32 FMA and int8 VNNI peaks alone (GFLOP/s, GOP/s; VNNI 0 without AVX512-VNNI), `iters` chain steps
// per thread and pass (the scalar fallback a quarter of them), each the median of `passes` after one
// warm-up pass.
struct ComputePeaks {
    double fma_gflop_s = 0.0, vnni_gop_s = 0.0;
};
ComputePeaks measure_compute(int threads, int passes, int64_t iters);

} // namespace deepinfer::cli
