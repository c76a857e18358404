#include "model/deepseek_v4/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/ops.h"
#include "model/deepseek_v4/compressor.h"
#include "model/deepseek_v4/indexer.h"

namespace deepinfer::model::deepseek_v4 {
namespace {

float dot(const float* a, const float* b, int64_t n) {
    float s = 0.0f;
    for (int64_t i = 0; i < n; ++i) s += a[i] * b[i];
    return s;
}

// Where entry `w` of a compressor with ratio m lives: block of its first position, index inside the block.
float* entry_ptr(KvCache& cache, int64_t layer, CompressorKind k, const SequenceChunk& ch, int64_t w,
                 int64_t m) {
    const int64_t pos = w * m, bs = cache.block_size();
    return cache.entry(layer, k, ch.block_table[pos / bs], (pos % bs) / m);
}

// Feeds the chunk's tokens through one compressor, storing closed entries and block-boundary snapshots.
void run_compressor(const AttentionContext& ctx, CompressorKind kind, const CompressorWeights& w,
                    const SequenceChunk& ch, const float* kv, const float* gate) {
    KvCache& cache = *ctx.cache;
    const CompressorSlotView s = cache.slot(ctx.layer, kind, ch.slot);
    const int64_t row = w.coff * w.width, bs = cache.block_size();
    for (int32_t i = 0; i < ch.num_tokens; ++i) {
        const int64_t p = ch.start_pos + i;
        const int64_t t = ch.token_offset + i;
        float* dst = entry_ptr(cache, ctx.layer, kind, ch, p / w.ratio, w.ratio);
        compressor_push(w, *ctx.compress_rope, static_cast<float>(ctx.config->rms_norm_eps), s, p,
                        kv + t * row, gate + t * row, dst);
        if (w.coff == 2 && (p + 1) % bs == 0) {
            float* snap = cache.snapshot(ctx.layer, kind, ch.block_table[p / bs]);
            const int64_t ov = w.ratio * w.width;
            std::copy_n(s.ov_kv, ov, snap);
            std::copy_n(s.ov_gate, ov, snap + ov);
        }
    }
}

} // namespace

void attention_forward(const AttentionContext& ctx, const ForwardBatch& batch, const float* x, float* out,
                       int32_t* indexer_topk) {
    const ModelConfig& c = *ctx.config;
    const AttentionWeights& w = *ctx.w;
    KvCache& cache = *ctx.cache;
    const int64_t T = batch.num_tokens(), H = c.num_attention_heads, d = c.head_dim;
    const int64_t ql = c.q_lora_rank, bs = cache.block_size(), window = c.sliding_window;
    const float eps = static_cast<float>(c.rms_norm_eps);

    std::vector<float> qr(T * ql); // [T, q_lora]
    kernels::linear(x, T, w.wq_a, qr.data());
    kernels::rms_norm(qr.data(), w.q_norm.data(), T, ql, eps, qr.data());
    std::vector<float> q(T * H * d); // [T, H, d]
    kernels::linear(qr.data(), T, w.wq_b, q.data());
    kernels::rms_norm(q.data(), nullptr, T * H, d, eps, q.data());
    std::vector<float> kv(T * d); // [T, d]
    kernels::linear(x, T, w.wkv, kv.data());
    kernels::rms_norm(kv.data(), w.kv_norm.data(), T, d, eps, kv.data());
    for (int64_t t = 0; t < T; ++t) {
        ctx.rope->apply(q.data() + t * H * d, H, d, d, batch.positions[t], false);
        ctx.rope->apply(kv.data() + t * d, 1, d, d, batch.positions[t], false);
    }

    // Compressor projections [T, coff * width] (gate without position bias).
    std::vector<float> ckv, cgate, ikv, igate, iq, iw;
    if (w.has_compressor) {
        const CompressorWeights& cw = w.compressor;
        ckv.resize(T * cw.coff * cw.width);
        cgate.resize(T * cw.coff * cw.width);
        kernels::linear(x, T, cw.wkv, ckv.data());
        kernels::linear(x, T, cw.wgate, cgate.data());
    }
    const int64_t HI = c.index_n_heads, dI = c.index_head_dim;
    if (w.has_indexer) {
        const CompressorWeights& cw = w.indexer.compressor;
        ikv.resize(T * 2 * dI);
        igate.resize(T * 2 * dI);
        kernels::linear(x, T, cw.wkv, ikv.data());
        kernels::linear(x, T, cw.wgate, igate.data());
        iq.resize(T * HI * dI); // [T, H_I, d_I]
        kernels::linear(qr.data(), T, w.indexer.wq_b, iq.data());
        for (int64_t t = 0; t < T; ++t)
            ctx.compress_rope->apply(iq.data() + t * HI * dI, HI, dI, dI, batch.positions[t], false);
        iw.resize(T * HI); // [T, H_I]
        kernels::linear(x, T, w.indexer.weights_proj, iw.data());
        const float ws = 1.0f / std::sqrt(static_cast<float>(HI));
        for (float& v : iw) v *= ws;
    }

    std::vector<float> o(T * H * d, 0.0f); // [T, H, d]
    const int64_t m = w.has_compressor ? w.compressor.ratio : 0;
    const int64_t topk = c.index_topk;
    if (indexer_topk && w.has_indexer) std::fill_n(indexer_topk, T * topk, -1);
    for (const SequenceChunk& ch : batch.chunks) {
        if (ch.is_padding || ch.num_tokens == 0) continue;
        for (int32_t i = 0; i < ch.num_tokens; ++i) {
            const int64_t p = ch.start_pos + i;
            DI_CHECK_EQ(batch.positions[ch.token_offset + i], p);
            DI_CHECK_LT(p / bs, static_cast<int64_t>(ch.block_table.size()));
            std::copy_n(kv.data() + (ch.token_offset + i) * d, d,
                        cache.raw_row(ctx.layer, ch.block_table[p / bs], p % bs));
        }
        if (w.has_compressor)
            run_compressor(ctx, CompressorKind::kAttention, w.compressor, ch, ckv.data(), cgate.data());

        // Compressed entries each query sees: HCA all closed windows before it, CSA the indexer's picks.
        std::vector<std::vector<int32_t>> picks(ch.num_tokens);
        if (w.has_indexer) {
            run_compressor(ctx, CompressorKind::kIndexer, w.indexer.compressor, ch, ikv.data(), igate.data());
            for (int32_t i = 0; i < ch.num_tokens; ++i) {
                const int64_t p = ch.start_pos + i, t = ch.token_offset + i;
                auto key = [&](int64_t e) {
                    return entry_ptr(cache, ctx.layer, CompressorKind::kIndexer, ch, e, m);
                };
                const int64_t n_total = (ch.start_pos + ch.num_tokens) / m;
                picks[i] = indexer_select(iq.data() + t * HI * dI, iw.data() + t * HI, HI, dI, (p + 1) / m,
                                          n_total, topk, key);
                if (indexer_topk)
                    for (size_t j = 0; j < picks[i].size(); ++j) indexer_topk[t * topk + j] = picks[i][j];
            }
        } else if (w.has_compressor) {
            for (int32_t i = 0; i < ch.num_tokens; ++i) {
                const int64_t n_visible = (ch.start_pos + i + 1) / m;
                for (int64_t e = 0; e < n_visible; ++e) picks[i].push_back(static_cast<int32_t>(e));
            }
        }

        const float scale = 1.0f / std::sqrt(static_cast<float>(d));
        core::ThreadPool::global().parallel_for(ch.num_tokens, [&](int64_t b, int64_t e) {
            std::vector<const float*> keys;
            std::vector<float> logits;
            for (int64_t i = b; i < e; ++i) {
                const int64_t p = ch.start_pos + i, t = ch.token_offset + i;
                keys.clear();
                for (int64_t k = std::max<int64_t>(0, p - window + 1); k <= p; ++k)
                    keys.push_back(cache.raw_row(ctx.layer, ch.block_table[k / bs], k % bs));
                for (int32_t pe : picks[i])
                    keys.push_back(entry_ptr(cache, ctx.layer, CompressorKind::kAttention, ch, pe, m));
                const int64_t n = static_cast<int64_t>(keys.size());
                logits.resize(n);
                for (int64_t h = 0; h < H; ++h) {
                    const float* qh = q.data() + (t * H + h) * d;
                    const float sink = w.sink[h];
                    float mx = sink;
                    for (int64_t j = 0; j < n; ++j) {
                        logits[j] = dot(qh, keys[j], d) * scale;
                        mx = std::max(mx, logits[j]);
                    }
                    float denom = std::exp(sink - mx);
                    for (int64_t j = 0; j < n; ++j) {
                        logits[j] = std::exp(logits[j] - mx);
                        denom += logits[j];
                    }
                    float* oh = o.data() + (t * H + h) * d;
                    for (int64_t j = 0; j < n; ++j) {
                        const float pj = logits[j] / denom;
                        for (int64_t k = 0; k < d; ++k) oh[k] += pj * keys[j][k];
                    }
                }
                ctx.rope->apply(o.data() + t * H * d, H, d, d, p, /*inverse=*/true);
            }
        });
    }

    // Grouped low-rank output: group g (heads [g*H/G, (g+1)*H/G)) through rows [g*R, (g+1)*R) of wo_a.
    const int64_t G = c.o_groups, R = c.o_lora_rank, gw = H * d / G;
    std::vector<float> z(T * G * R); // [T, G * R]
    for (int64_t g = 0; g < G; ++g) {
        kernels::MatmulArgs a;
        a.x = o.data() + g * gw;
        a.n = T;
        a.ldx = H * d;
        a.w = &w.wo_a;
        a.row_begin = g * R;
        a.row_end = (g + 1) * R;
        a.y = z.data() + g * R;
        a.ldy = G * R;
        kernels::matmul(a);
    }
    kernels::linear(z.data(), T, w.wo_b, out);
}

} // namespace deepinfer::model::deepseek_v4
