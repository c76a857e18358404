#pragma once
// The op census: every op a Backend runs is counted here (calls, wall time, bytes of weights/KV/activations
// it reads and writes, flops), per op kind. Recording is a few adds into a fixed table (no allocation); it
// is off unless enabled. snapshot() is the API a metrics exporter reads (a copy, safe from any thread while
// the engine thread records); print_profile() is `--profile`'s table.

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <mutex>

namespace deepinfer::kernels {

enum class OpKind : int {
    kEmbedding = 0,
    kLinear,
    kRmsNorm,
    kRope,
    kHcPre,
    kHcPost,
    kHcHead,
    kKvStore,
    kCompressor,
    kIndexer,
    kSparseAttention,
    kMoeRouting,
    kMoeExperts,
    kLmHead,
    // DeepSeek V4.1 Engram: the table-row gather, run on the model's prefetch worker while the layers
    // before the Engram layer run (off the critical path: left out of total()), and the time the forward
    // waited for it (on the critical path).
    kEngramGather,
    kEngramWait,
    kCount,
};

const char* op_name(OpKind k);

struct OpStats {
    int64_t calls = 0;
    double seconds = 0;
    double bytes = 0; // bytes read + written (weights as stored)
    double flops = 0;
    OpStats& operator+=(const OpStats& o) {
        calls += o.calls;
        seconds += o.seconds;
        bytes += o.bytes;
        flops += o.flops;
        return *this;
    }
};

struct ProfileSnapshot {
    std::array<OpStats, static_cast<size_t>(OpKind::kCount)> ops{};
    int64_t steps = 0;       // forward passes recorded
    double step_seconds = 0; // wall time of those forwards
    OpStats total() const;   // every op run on the forward's thread (all but kEngramGather)
    ProfileSnapshot& operator+=(const ProfileSnapshot& o); // op by op (several profiled runs summed)
};

// Ceilings to report each op against (0 = unknown: the fraction column is left out).
struct Roofline {
    double read_gb_s = 0;
    double gflop_s = 0;
    double int8_gop_s = 0; // int8 VNNI peak: the weight-matmul summary line also reports against it
};

class Profiler {
public:
    void set_enabled(bool on) { enabled_ = on; }
    bool enabled() const { return enabled_; }
    void clear() {
        std::lock_guard<std::mutex> lock(mu_);
        snap_ = ProfileSnapshot{};
    }
    void record(OpKind k, double seconds, double bytes, double flops) {
        std::lock_guard<std::mutex> lock(mu_);
        OpStats& s = snap_.ops[static_cast<size_t>(k)];
        ++s.calls;
        s.seconds += seconds;
        s.bytes += bytes;
        s.flops += flops;
    }
    void record_step(double seconds) {
        std::lock_guard<std::mutex> lock(mu_);
        ++snap_.steps;
        snap_.step_seconds += seconds;
    }
    ProfileSnapshot snapshot() const {
        std::lock_guard<std::mutex> lock(mu_);
        return snap_;
    }

private:
    std::atomic<bool> enabled_{false};
    mutable std::mutex mu_;
    ProfileSnapshot snap_;
};

// Per op kind: calls, ms, share of the step time, GB/s, GFLOP/s and, when a roofline is given, the fraction
// of it the op reached (the larger of its bandwidth and compute fractions).
void print_profile(std::FILE* out, const ProfileSnapshot& s, const Roofline& roof, const char* title);

// Times one op into a profiler when it is enabled.
class OpTimer {
public:
    OpTimer(Profiler& p, OpKind k, double bytes, double flops)
        : p_(p.enabled() ? &p : nullptr), k_(k), bytes_(bytes), flops_(flops) {
        if (p_) t0_ = std::chrono::steady_clock::now();
    }
    ~OpTimer() {
        if (p_)
            p_->record(k_, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count(),
                       bytes_, flops_);
    }
    OpTimer(const OpTimer&) = delete;
    OpTimer& operator=(const OpTimer&) = delete;

private:
    Profiler* p_;
    OpKind k_;
    double bytes_, flops_;
    std::chrono::steady_clock::time_point t0_;
};

} // namespace deepinfer::kernels
