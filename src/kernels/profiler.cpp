#include "kernels/profiler.h"

#include <algorithm>

namespace deepinfer::kernels {

const char* op_name(OpKind k) {
    switch (k) {
    case OpKind::kEmbedding:
        return "embedding";
    case OpKind::kLinear:
        return "linear";
    case OpKind::kRmsNorm:
        return "rms_norm";
    case OpKind::kRope:
        return "rope";
    case OpKind::kHcPre:
        return "hc_pre";
    case OpKind::kHcPost:
        return "hc_post";
    case OpKind::kHcHead:
        return "hc_head";
    case OpKind::kKvStore:
        return "kv_store";
    case OpKind::kCompressor:
        return "compressor";
    case OpKind::kIndexer:
        return "indexer";
    case OpKind::kSparseAttention:
        return "sparse_attention";
    case OpKind::kMoeRouting:
        return "moe_routing";
    case OpKind::kMoeExperts:
        return "moe_experts";
    case OpKind::kLmHead:
        return "lm_head";
    case OpKind::kEngramGather:
        return "engram_gather";
    case OpKind::kEngramWait:
        return "engram_wait";
    case OpKind::kCount:
        return "?";
    }
    return "?";
}

ProfileSnapshot& ProfileSnapshot::operator+=(const ProfileSnapshot& o) {
    for (size_t i = 0; i < ops.size(); ++i) ops[i] += o.ops[i];
    steps += o.steps;
    step_seconds += o.step_seconds;
    return *this;
}

OpStats ProfileSnapshot::total() const {
    OpStats t;
    for (size_t i = 0; i < ops.size(); ++i) {
        if (static_cast<OpKind>(i) == OpKind::kEngramGather) continue; // overlapped, on another thread
        t += ops[i];
    }
    return t;
}

void print_profile(std::FILE* out, const ProfileSnapshot& s, const Roofline& roof, const char* title) {
    const OpStats tot = s.total();
    const double step = s.step_seconds > 0 ? s.step_seconds : tot.seconds;
    std::fprintf(out, "profile: %s: %lld forward(s), %.3f ms per forward, ops cover %.1f%% of it\n", title,
                 static_cast<long long>(s.steps), s.steps ? 1e3 * step / static_cast<double>(s.steps) : 0.0,
                 step > 0 ? 100.0 * tot.seconds / step : 0.0);
    std::fprintf(out, "  %-17s %9s %11s %7s %10s %10s %9s\n", "op", "calls", "ms", "share", "GB/s", "GFLOP/s",
                 "roofline");
    for (size_t i = 0; i < s.ops.size(); ++i) {
        const OpStats& o = s.ops[i];
        if (o.calls == 0) continue;
        const double gbs = o.seconds > 0 ? o.bytes / o.seconds / 1e9 : 0.0;
        const double gfs = o.seconds > 0 ? o.flops / o.seconds / 1e9 : 0.0;
        double frac = 0;
        if (roof.read_gb_s > 0) frac = std::max(frac, gbs / roof.read_gb_s);
        if (roof.gflop_s > 0) frac = std::max(frac, gfs / roof.gflop_s);
        char fr[16] = "-";
        if (roof.read_gb_s > 0 || roof.gflop_s > 0) std::snprintf(fr, sizeof(fr), "%.1f%%", 100.0 * frac);
        const bool worker = static_cast<OpKind>(i) == OpKind::kEngramGather;
        std::fprintf(out, "  %-17s %9lld %11.3f %6.1f%% %10.2f %10.2f %9s\n",
                     worker ? "engram_gather*" : op_name(static_cast<OpKind>(i)),
                     static_cast<long long>(o.calls), 1e3 * o.seconds,
                     step > 0 ? 100.0 * o.seconds / step : 0.0, gbs, gfs, fr);
    }
    // The weight matmuls together (issue 9's prefill acceptance: their flops / their time against the FP32
    // FMA and int8 VNNI peaks of the same run). moe_experts' time includes its gather / SwiGLU / scatter.
    OpStats mm;
    for (OpKind k : {OpKind::kLinear, OpKind::kMoeExperts, OpKind::kLmHead})
        mm += s.ops[static_cast<size_t>(k)];
    if (mm.calls > 0 && mm.seconds > 0) {
        const double gfs = mm.flops / mm.seconds / 1e9;
        std::fprintf(
            out,
            "  weight matmuls (linear + moe_experts + lm_head): %.3f ms, %.1f%% of the forward, %.2f "
            "GFLOP/s",
            1e3 * mm.seconds, step > 0 ? 100.0 * mm.seconds / step : 0.0, gfs);
        if (roof.gflop_s > 0) std::fprintf(out, " = %.1f%% of FP32 FMA", 100.0 * gfs / roof.gflop_s);
        if (roof.int8_gop_s > 0) std::fprintf(out, ", %.1f%% of int8 VNNI", 100.0 * gfs / roof.int8_gop_s);
        std::fprintf(out, "\n");
    }
    if (s.ops[static_cast<size_t>(OpKind::kEngramGather)].calls > 0)
        std::fprintf(out, "  * on the Engram prefetch worker, overlapped with the layers before each Engram "
                          "layer (not in the ops total); engram_wait is the forward's wait for it\n");
}

} // namespace deepinfer::kernels
