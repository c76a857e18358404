#include "model/deepseek_v4/attention.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <span>

namespace deepinfer::model::deepseek_v4 {
namespace {

// RoPE (or its inverse) on n_vec vectors [ld] per token of rows [t0, t0 + n) of x [T, n_vec * ld].
kernels::RopeParams rope_params(const RopeTable& table, float* x, int64_t n, int64_t n_vec, int64_t ld,
                                const int64_t* positions, bool inverse) {
    kernels::RopeParams p;
    p.x = x;
    p.n_tokens = n;
    p.token_stride = n_vec * ld;
    p.n_vec = n_vec;
    p.ld = ld;
    p.dim = ld;
    p.rope_dim = table.rope_dim();
    p.inv_freq = table.inv_freq().data();
    p.positions = positions;
    p.inverse = inverse;
    return p;
}

// table: the chunk's block table as the store is addressed (CP: local blocks for the split stores).
kernels::PagedEntries paged(KvCache& cache, int64_t layer, CompressorKind k, const int32_t* table) {
    const CompressorGeom& g = cache.geom(layer, k);
    return {cache.entries_base(layer, k), g.width, g.ratio, cache.block_size(), table};
}

// Feeds the chunk's rows [coff * width] of kv / gate (row stride ld) through one compressor; entries go
// through `table`, snapshots through the chunk's own block table.
void run_compressor(const AttentionContext& ctx, CompressorKind kind, const CompressorWeights& w,
                    const SequenceChunk& ch, const int32_t* table, const float* kv, const float* gate) {
    KvCache& cache = *ctx.cache;
    const CompressorSlotView s = cache.slot(ctx.layer, kind, ch.slot);
    kernels::CompressorParams p;
    p.ld = w.coff * w.width;
    p.kv = kv + ch.token_offset * p.ld;
    p.gate = gate + ch.token_offset * p.ld;
    p.n = ch.num_tokens;
    p.start_pos = ch.start_pos;
    p.coff = w.coff;
    p.ape = w.ape.data();
    p.norm = w.norm.data();
    p.eps = static_cast<float>(ctx.config->rms_norm_eps);
    p.inv_freq = ctx.compress_rope->inv_freq().data();
    p.rope_dim = ctx.compress_rope->rope_dim();
    p.buf_kv = s.buf_kv;
    p.buf_gate = s.buf_gate;
    p.ov_kv = s.ov_kv;
    p.ov_gate = s.ov_gate;
    p.out = paged(cache, ctx.layer, kind, table);
    p.snapshots = w.coff == 2 ? cache.snapshots_base(ctx.layer, kind) : nullptr;
    p.snapshot_block_table = ch.block_table.data();
    ctx.backend->compressor(p);
}

} // namespace

void attention_forward(const AttentionContext& ctx, const ForwardBatch& batch, const float* x, float* out,
                       int32_t* indexer_topk) {
    const ModelConfig& c = *ctx.config;
    const AttentionWeights& w = *ctx.w;
    KvCache& cache = *ctx.cache;
    kernels::Backend& be = *ctx.backend;
    kernels::Workspace& ws = be.workspace();
    const kernels::Workspace::Mark mark = ws.mark();
    const int64_t T = batch.num_tokens(), H_all = c.num_attention_heads, d = c.head_dim;
    // This rank's heads [h0, h0 + H): all of them without TP.
    const TpShard* tp = ctx.tp && ctx.tp->active() ? ctx.tp : nullptr;
    const int64_t H = tp ? H_all / tp->size() : H_all, h0 = tp ? tp->rank() * H : 0;
    const int64_t ql = c.q_lora_rank;
    const float eps = static_cast<float>(c.rms_norm_eps);
    const int64_t* pos = batch.positions.data();
    using kernels::linear_args;

    // CP with split rows (context_parallel.h): the projections run on this rank's rows [r0, r0 + nr) only
    // (x holds just those) and the results are gathered in one packed all-gather below: the KV stores,
    // compressors, indexer and every rank's partial attention need every row.
    const CpShard* cp = ctx.cp && ctx.cp->active() ? ctx.cp : nullptr;
    const CpRows rows = cp_rows(cp, T);
    const int64_t r0 = rows.begin, nr = rows.count(), D = c.hidden_size;
    const float* xr = x + r0 * D; // [nr, D] this rank's rows
    const int64_t* pr = pos + r0; // [nr]
    std::array<CpRowField, 8> gathered;
    size_t n_gathered = 0;
    // A [T, width] buffer whose rows [r0, r0 + nr) this rank computes; the others arrive in the gather.
    auto take_rows = [&](int64_t width) {
        float* p = ws.take<float>(T * width);
        gathered[n_gathered++] = {p, width, width};
        return p;
    };

    float* qr = ws.take<float>(T * ql); // [T, q_lora] (own rows only)
    float* q = take_rows(H * d);        // [T, H, d] this rank's heads
    float* kv = take_rows(d);           // [T, d]
    // Compressor projections [T, coff * width] (gate without position bias).
    float *ckv = nullptr, *cgate = nullptr, *ikv = nullptr, *igate = nullptr, *iq = nullptr, *iw = nullptr;
    if (w.has_compressor) {
        const int64_t cwidth = w.compressor.coff * w.compressor.width;
        ckv = take_rows(cwidth);
        cgate = take_rows(cwidth);
    }
    const int64_t HI = c.index_n_heads, dI = c.index_head_dim, topk = c.index_topk;
    int32_t* picks = nullptr;
    if (w.has_indexer) {
        ikv = take_rows(2 * dI);
        igate = take_rows(2 * dI);
        iq = take_rows(HI * dI);            // [T, H_I, d_I]
        iw = take_rows(HI);                 // [T, H_I]
        picks = ws.take<int32_t>(T * topk); // [T, topk]
        std::fill_n(picks, T * topk, -1);
    }
    if (nr > 0) {
        // Every projection that reads x, then the two that read the normalized q_lora rows, each set as one
        // linear_multi: one loop of the pool over all their weights instead of one per weight (decode streams
        // 2-7 weights of 16 KiB-4 MiB here; docs/kernels.md "Several weights in one loop").
        std::array<kernels::MatmulArgs, 7> px;
        size_t npx = 0;
        px[npx++] = linear_args(xr, nr, w.wq_a, qr + r0 * ql);
        px[npx++] = linear_args(xr, nr, w.wkv, kv + r0 * d);
        if (w.has_compressor) {
            const CompressorWeights& cw = w.compressor;
            const int64_t cwidth = cw.coff * cw.width;
            px[npx++] = linear_args(xr, nr, cw.wkv, ckv + r0 * cwidth);
            px[npx++] = linear_args(xr, nr, cw.wgate, cgate + r0 * cwidth);
        }
        if (w.has_indexer) {
            const CompressorWeights& cw = w.indexer.compressor;
            px[npx++] = linear_args(xr, nr, cw.wkv, ikv + r0 * 2 * dI);
            px[npx++] = linear_args(xr, nr, cw.wgate, igate + r0 * 2 * dI);
            px[npx++] = linear_args(xr, nr, w.indexer.weights_proj, iw + r0 * HI);
        }
        be.linear_multi(std::span<const kernels::MatmulArgs>(px.data(), npx));
        be.rms_norm({qr + r0 * ql, w.q_norm.data(), nr, ql, eps, qr + r0 * ql});
        kernels::MatmulArgs qa = linear_args(qr + r0 * ql, nr, w.wq_b, q + r0 * H * d);
        qa.row_begin = h0 * d;
        qa.row_end = (h0 + H) * d;
        qa.ldy = H * d;
        if (w.has_indexer) {
            const std::array<kernels::MatmulArgs, 2> qb = {
                qa, linear_args(qr + r0 * ql, nr, w.indexer.wq_b, iq + r0 * HI * dI)};
            be.linear_multi(qb);
        } else {
            be.linear(qa);
        }
        be.rms_norm({q + r0 * H * d, nullptr, nr * H, d, eps, q + r0 * H * d});
        be.rms_norm({kv + r0 * d, w.kv_norm.data(), nr, d, eps, kv + r0 * d});
        be.rope(rope_params(*ctx.rope, q + r0 * H * d, nr, H, d, pr, false));
        be.rope(rope_params(*ctx.rope, kv + r0 * d, nr, 1, d, pr, false));
        if (w.has_indexer) {
            be.rope(rope_params(*ctx.compress_rope, iq + r0 * HI * dI, nr, HI, dI, pr, false));
            const float wscale = 1.0f / std::sqrt(static_cast<float>(HI));
            for (int64_t i = r0 * HI; i < (r0 + nr) * HI; ++i) iw[i] *= wscale;
        }
    }
    // Every rank whenever the rows are split (a collective; the same fields on every rank of the group).
    if (cp) cp_gather_rows(be, *cp, rows, std::span<const CpRowField>(gathered.data(), n_gathered));

    float* o = ws.take<float>(T * H * d); // [T, H, d]
    std::fill_n(o, T * H * d, 0.0f);
    // CP: this rank's partials over its blocks, merged after the loop (context_parallel.h).
    float *lse_max = nullptr, *lse_sum = nullptr;
    if (cp) {
        lse_max = ws.take<float>(T * H); // [T, H]
        lse_sum = ws.take<float>(T * H); // [T, H]
        std::fill_n(lse_max, T * H, -INFINITY);
        std::fill_n(lse_sum, T * H, 0.0f);
    }
    const float scale = 1.0f / std::sqrt(static_cast<float>(d));
    for (const SequenceChunk& ch : batch.chunks) {
        if (ch.is_padding || ch.num_tokens == 0) continue;
        const int64_t t0 = ch.token_offset, n = ch.num_tokens;
        DI_CHECK_LT((ch.start_pos + n - 1) / cache.block_size(), static_cast<int64_t>(ch.block_table.size()));
        // CP: the raw rows and attention entries are stored per owner (kv_cache.h): the chunk's blocks as
        // this rank's local blocks (other ranks' blocks -> the trash block), and which of them it owns.
        const int64_t n_blocks = static_cast<int64_t>(ch.block_table.size());
        const int32_t* table = ch.block_table.data(); // [n_blocks] global blocks
        const int32_t* local = table;                 // [n_blocks] as the split stores are addressed
        uint8_t* owned = nullptr;                     // [n_blocks]
        if (cp) {
            int32_t* l = ws.take<int32_t>(n_blocks);
            owned = ws.take<uint8_t>(n_blocks);
            for (int64_t j = 0; j < n_blocks; ++j) {
                l[j] = cache.local_block(table[j]);
                owned[j] = cache.owns(table[j]) ? 1 : 0;
            }
            local = l;
        }
        be.kv_store({kv + t0 * d, n, d, ch.start_pos, cache.raw_base(ctx.layer), cache.block_size(), local});
        if (w.has_compressor)
            run_compressor(ctx, CompressorKind::kAttention, w.compressor, ch, local, ckv, cgate);

        // Compressed entries each query sees: HCA all closed windows before it, CSA the indexer's picks.
        if (w.has_indexer) {
            // CP: the keys, like the attention entries, stored per owner and scored by their owner.
            run_compressor(ctx, CompressorKind::kIndexer, w.indexer.compressor, ch, local, ikv, igate);
            kernels::IndexerParams ip;
            ip.q = iq + t0 * HI * dI;
            ip.q_ld = HI * dI;
            ip.weights = iw + t0 * HI;
            ip.w_ld = HI;
            ip.n = n;
            ip.start_pos = ch.start_pos;
            ip.n_total = (ch.start_pos + n) / w.compressor.ratio;
            ip.n_heads = HI;
            ip.head_dim = dI;
            ip.topk = topk;
            ip.keys = paged(cache, ctx.layer, CompressorKind::kIndexer, local);
            ip.picks = picks + t0 * topk;
            if (cp) {
                ip.owned_blocks = owned;
                cp_indexer(be, *cp, ip); // every rank, every chunk: the score sums are collectives
            } else {
                be.indexer(ip);
            }
        }

        kernels::SparseAttentionParams ap;
        ap.q = q + t0 * H * d;
        ap.q_ld = H * d;
        ap.n = n;
        ap.start_pos = ch.start_pos;
        ap.n_heads = H;
        ap.head_dim = d;
        ap.window = c.sliding_window;
        ap.scale = scale;
        ap.sink = w.sink.data() + h0;
        ap.raw = cache.raw_base(ctx.layer);
        ap.block_size = cache.block_size();
        ap.block_table = local;
        if (w.has_compressor) ap.compressed = paged(cache, ctx.layer, CompressorKind::kAttention, local);
        ap.picks = w.has_indexer ? picks + t0 * topk : nullptr;
        ap.topk = topk;
        ap.o = o + t0 * H * d;
        ap.o_ld = H * d;
        if (cp) {
            ap.owned_blocks = owned;
            if (cp->rank() != 0) ap.sink = nullptr; // the sink joins one partial only
            ap.lse_max = lse_max + t0 * H;
            ap.lse_sum = lse_sum + t0 * H;
        }
        be.sparse_attention(ap);
        if (!cp) be.rope(rope_params(*ctx.rope, o + t0 * H * d, n, H, d, pos + t0, /*inverse=*/true));
    }
    if (cp) { // every rank, every layer, whatever its chunks: the merge is a collective
        // Split rows: each rank merges (and projects below) its own rows only.
        cp_merge_partials(be, *cp, rows, o, H * d, lse_max, lse_sum, H, d);
        for (const SequenceChunk& ch : batch.chunks) { // this rank's rows of the chunk only
            if (ch.is_padding || ch.num_tokens == 0) continue;
            const int64_t lo = std::max<int64_t>(ch.token_offset, r0),
                          hi = std::min<int64_t>(ch.token_offset + ch.num_tokens, r0 + nr);
            if (lo < hi)
                be.rope(rope_params(*ctx.rope, o + lo * H * d, hi - lo, H, d, pos + lo, /*inverse=*/true));
        }
    }
    if (indexer_topk && w.has_indexer) std::copy_n(picks, T * topk, indexer_topk);

    // Grouped low-rank output: group g (heads [g*H/G, (g+1)*H/G)) through rows [g*R, (g+1)*R) of wo_a.
    // TP: this rank's groups when the groups split evenly over the ranks (its heads are exactly theirs),
    // then z gathered; otherwise the heads' outputs gathered first and every group computed here.
    // Split CP rows: this rank's rows only (its TP peers have the same CP rank, so the same rows: the TP
    // gathers below, skipped together when there are none, match on every peer).
    if (nr > 0) {
        const int64_t G = c.o_groups, R = c.o_lora_rank, gw = H_all * d / G;
        const bool groups_split = tp && G % tp->size() == 0;
        const int64_t Gl = groups_split ? G / tp->size() : G, g0 = groups_split ? tp->rank() * Gl : 0;
        const float* o_in = o + r0 * H * d; // [nr, heads, d] the heads the groups below read
        int64_t o_ld = H * d;
        if (tp && !groups_split) {
            float* o_all = ws.take<float>(nr * H_all * d); // [nr, H_all, d]
            tp_gather_columns(be, *tp, o + r0 * H * d, nr, H * d, H * d, o_all, H_all * d);
            o_in = o_all;
            o_ld = H_all * d;
        }
        float* z = ws.take<float>(nr * G * R);                      // [nr, G * R]
        float* zl = groups_split ? ws.take<float>(nr * Gl * R) : z; // [nr, Gl * R] this rank's groups
        // The groups' matmuls (each its own heads through its own rows of wo_a) as one linear_multi per up
        // to kMaxMultiMatmuls groups.
        std::array<kernels::MatmulArgs, kernels::kMaxMultiMatmuls> ga;
        for (int64_t g0b = 0; g0b < Gl; g0b += kernels::kMaxMultiMatmuls) {
            const int64_t gn = std::min<int64_t>(Gl - g0b, kernels::kMaxMultiMatmuls);
            for (int64_t j = 0; j < gn; ++j) {
                const int64_t g = g0b + j;
                kernels::MatmulArgs& a = ga[static_cast<size_t>(j)];
                a = kernels::MatmulArgs{};
                a.x = o_in + g * gw;
                a.n = nr;
                a.ldx = o_ld;
                a.w = &w.wo_a;
                a.row_begin = (g0 + g) * R;
                a.row_end = (g0 + g + 1) * R;
                a.y = zl + g * R;
                a.ldy = Gl * R;
            }
            be.linear_multi(std::span<const kernels::MatmulArgs>(ga.data(), static_cast<size_t>(gn)));
        }
        if (groups_split) tp_gather_columns(be, *tp, zl, nr, Gl * R, Gl * R, z, G * R);
        if (tp)
            tp_linear(be, *tp, z, nr, w.wo_b, out + r0 * D);
        else
            be.linear(linear_args(z, nr, w.wo_b, out + r0 * D));
    }
    ws.release(mark);
}

} // namespace deepinfer::model::deepseek_v4
