// The Backend's entry points: count the op in the census (bytes and flops are only estimated when the
// profiler is on), then run the implementation's hook.

#include "kernels/backend.h"

#include <algorithm>

#include "kernels/ref/ops_ref.h"

namespace deepinfer::kernels {
namespace {

constexpr double kF = sizeof(float);

double weight_bytes(const core::Weight& w, int64_t rows) {
    return w.rows > 0 ? static_cast<double>(w.stored_bytes()) * static_cast<double>(rows) / w.rows : 0.0;
}

} // namespace

void Backend::embedding(const EmbeddingParams& p) {
    OpTimer t(prof_, OpKind::kEmbedding, p.n * (weight_bytes(*p.table, 1) + kF * p.table->cols), 0);
    run_embedding(p);
}

void Backend::linear(const MatmulArgs& a, OpKind kind) {
    const int64_t rows = a.row_end - a.row_begin, cols = a.w->cols;
    OpTimer t(prof_, kind, weight_bytes(*a.w, rows) + kF * a.n * (cols + rows),
              2.0 * static_cast<double>(a.n) * rows * cols);
    run_linear(a);
}

void Backend::linear_multi(std::span<const MatmulArgs> args, OpKind kind) {
    double bytes = 0, flops = 0;
    for (size_t i = 0; i < args.size(); ++i) {
        const MatmulArgs& a = args[i];
        const int64_t rows = a.row_end - a.row_begin, cols = a.w->cols;
        const bool shared_x = i > 0 && a.x == args[i - 1].x; // activations read once for the set
        bytes += weight_bytes(*a.w, rows) + kF * a.n * ((shared_x ? 0 : cols) + rows);
        flops += 2.0 * static_cast<double>(a.n) * rows * cols;
    }
    OpTimer t(prof_, kind, bytes, flops);
    run_linear_multi(args);
}

void Backend::rms_norm(const RmsNormParams& p) {
    OpTimer t(prof_, OpKind::kRmsNorm, 2 * kF * p.n * p.d, 4.0 * p.n * p.d);
    run_rms_norm(p);
}

void Backend::rope(const RopeParams& p) {
    OpTimer t(prof_, OpKind::kRope, 2 * kF * p.n_tokens * p.n_vec * p.rope_dim,
              3.0 * p.n_tokens * p.n_vec * p.rope_dim);
    run_rope(p);
}

void Backend::hc_pre(const HcPreParams& p) {
    OpTimer t(prof_, OpKind::kHcPre, kF * p.T * (p.hc * p.D + p.D),
              2.0 * p.T * (p.hc * p.D + 4.0 * p.sinkhorn_iters * p.hc * p.hc));
    run_hc_pre(p);
}

void Backend::hc_post(const HcPostParams& p) {
    OpTimer t(prof_, OpKind::kHcPost, kF * p.T * (2 * p.hc * p.D + p.D), 2.0 * p.T * p.hc * (p.hc + 1) * p.D);
    run_hc_post(p);
}

void Backend::hc_head(const HcHeadParams& p) {
    OpTimer t(prof_, OpKind::kHcHead, kF * p.T * (p.hc * p.D + p.D), 2.0 * p.T * p.hc * p.D);
    run_hc_head(p);
}

void Backend::kv_store(const KvStoreParams& p) {
    OpTimer t(prof_, OpKind::kKvStore, 2 * kF * p.n * p.d, 0);
    run_kv_store(p);
}

void Backend::compressor(const CompressorParams& p) {
    const double row = static_cast<double>(p.coff * p.out.width);
    OpTimer t(prof_, OpKind::kCompressor, kF * p.n * 4 * row, 6.0 * p.n * row);
    run_compressor(p);
}

void Backend::indexer(const IndexerParams& p) {
    double bytes = 0, flops = 0;
    if (prof_.enabled()) {
        for (int64_t i = 0; i < p.n; ++i) {
            const double nv = static_cast<double>((p.start_pos + i + 1) / p.keys.ratio);
            bytes += kF * nv * p.head_dim;
            flops += 2.0 * nv * p.n_heads * (p.head_dim + 1);
        }
    }
    OpTimer t(prof_, OpKind::kIndexer, bytes, flops);
    run_indexer(p);
}

void Backend::sparse_attention(const SparseAttentionParams& p) {
    double bytes = 0, flops = 0;
    if (prof_.enabled()) {
        for (int64_t i = 0; i < p.n; ++i) {
            const int64_t pos = p.start_pos + i;
            double keys = static_cast<double>(std::min<int64_t>(p.window, pos + 1));
            if (p.compressed.base) {
                if (p.picks) {
                    for (int64_t j = 0; j < p.topk && p.picks[i * p.topk + j] >= 0; ++j) keys += 1;
                } else {
                    keys += static_cast<double>((pos + 1) / p.compressed.ratio);
                }
            }
            bytes += kF * keys * p.head_dim;
            flops += 4.0 * keys * p.n_heads * p.head_dim;
        }
    }
    OpTimer t(prof_, OpKind::kSparseAttention, bytes, flops);
    run_sparse_attention(p);
}

void Backend::moe_routing(const MoeRoutingParams& p) {
    OpTimer t(prof_, OpKind::kMoeRouting, kF * p.T * p.E, 4.0 * p.T * p.E);
    run_moe_routing(p);
}

void Backend::moe_experts(const MoeExpertsParams& p) {
    double bytes = 0, flops = 0;
    if (prof_.enabled()) {
        // Weights of every expert some row selected (each read once), plus the shared expert.
        auto expert_cost = [&](const ExpertRef& e, int64_t rows) {
            for (const core::Weight* w : {e.w1, e.w2, e.w3}) {
                bytes += static_cast<double>(w->stored_bytes());
                flops += 2.0 * static_cast<double>(rows) * w->rows * w->cols;
            }
        };
        for (int64_t e = 0; e < p.E; ++e) {
            int64_t rows = 0;
            for (int64_t i = 0; i < p.T * p.K; ++i) rows += p.idx[i] == e;
            if (rows) expert_cost(p.experts[e], rows);
        }
        if (p.shared) {
            int64_t live = 0;
            for (int64_t t = 0; t < p.T; ++t) live += !(p.skip && p.skip[t]);
            if (live) expert_cost(*p.shared, live);
        }
    }
    OpTimer t(prof_, OpKind::kMoeExperts, bytes, flops);
    run_moe_experts(p);
}

} // namespace deepinfer::kernels
