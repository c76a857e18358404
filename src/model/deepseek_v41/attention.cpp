// V4.1 attention of one chunk: window KV (FP8 fake-quant) + the group's shared compressed KV (FP4), the
// KV source's compressor (ratio 2 pooled without ape / overlap, ratio 1 per token), and the indexer over
// the source's keys with re-index and the candidate two-level top-k. transformers' deepseek_v41
// (DeepseekV41Attention, DeepseekV41Compressor, DeepseekV41Indexer, select_candidate_blocks) is the spec.

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <numeric>
#include <span>

#include "core/check.h"
#include "kernels/ops.h"
#include "kernels/ref/cache_quant.h"
#include "model/deepseek_v41/model.h"

namespace deepinfer::model::deepseek_v41 {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

kernels::RopeParams rope_params(const deepseek_v4::RopeTable& rope, float* x, int64_t n, int64_t n_vec,
                                int64_t dim, const int64_t* pos) {
    kernels::RopeParams p;
    p.x = x;
    p.n_tokens = n;
    p.token_stride = n_vec * dim;
    p.n_vec = n_vec;
    p.ld = dim;
    p.dim = dim;
    p.rope_dim = rope.rope_dim();
    p.inv_freq = rope.inv_freq().data();
    p.positions = pos;
    return p;
}

kernels::PagedEntries paged(std::vector<float>& pool, int64_t width, int64_t ratio, int64_t block_size,
                            const int32_t* block_table) {
    kernels::PagedEntries e;
    e.base = pool.data();
    e.width = width;
    e.ratio = ratio;
    e.block_size = block_size;
    e.block_table = block_table;
    return e;
}

} // namespace

// x and out: this rank's rows of the chunk (ch.rows). Split rows (CP, a prompt chunk): the row-wise
// projections (q, kv, the compressor's kv and gate, the indexer's query and head weights) run on this
// rank's rows and are gathered in one all-gather, so the window store, the compressor's group state, the
// indexer and each rank's partial attention see every row as before; after the merge every rank has every
// row's output and runs the inverse RoPE, wo_a and wo_b on its rows only.
void DeepseekV41Model::attention(int64_t l, const Chunk& ch, const float* x, float* out, Shared& sh) {
    const ModelConfig& c = config_;
    const AttentionWeights& w = weights_.layers[l].attn;
    kernels::Backend& be = *backend_;
    const int64_t n = ch.n, H_all = c.num_attention_heads, d = c.head_dim, m = c.compress_ratios[l];
    const int64_t b = ch.rows.begin, nr = ch.rows.count(); // this rank's rows [b, b + nr) of the chunk's n
    row_work_.attention += nr;
    // Tensor parallelism: this rank's heads [h0, h0 + H) (all of them without TP), as V4 splits them
    // (deepseek_v4/attention.cpp): q rows, attention and the sink per head; the grouped output projection
    // by groups and wo_b by output rows, gathered (bits, never partial sums). The TP group shares this
    // rank's CP rank, hence its rows.
    const deepseek_v4::TpShard* tp = tp_.active() ? &tp_ : nullptr;
    const int64_t H = tp ? H_all / tp->size() : H_all, h0 = tp ? tp->rank() * H : 0;
    const float eps = static_cast<float>(c.rms_norm_eps);
    const deepseek_v4::RopeTable& rope = m > 0 ? compress_rope_ : main_rope_;
    const int64_t* pos = ch.pos.data();
    const int64_t* my_pos = pos + b;
    const bool has_compressor = m > 0 && w.has_compressor;
    // The indexer runs when entries exist (the same on every rank: it depends on the chunk only).
    const bool has_indexer = m > 0 && w.has_indexer && (ch.start + n) / m > 0;
    const int64_t HI = c.index_n_heads, dI = c.index_head_dim;

    // Every row's projections [n, ...]; this rank writes its rows, the gather the others'.
    std::vector<float> q(n * H * d); // [n, H, d] this rank's heads (no per-head q norm in V4.1), rotated
    std::vector<float> kv(n * d); // [n, d]: K = V, rotated, FP8 fake-quantized as the window cache holds it
    std::vector<float> ckv(has_compressor ? n * d : 0);         // [n, d] compressor kv
    std::vector<float> cg(has_compressor && m > 1 ? n * d : 0); // [n, d] compressor gate
    std::vector<float> iq(has_indexer ? n * HI * dI : 0);       // [n, H_I, d_I] indexer query
    std::vector<float> ihw(has_indexer ? n * HI : 0);           // [n, H_I] indexer head weights
    if (nr > 0) {
        std::vector<float> qr(nr * c.q_lora_rank); // [nr, q_lora]
        float* my_kv = kv.data() + b * d;
        // The projections of x as one linear_multi (one loop of the pool over their weights).
        std::array<kernels::MatmulArgs, 4> px;
        size_t npx = 0;
        px[npx++] = kernels::linear_args(x, nr, w.wq_a, qr.data());
        px[npx++] = kernels::linear_args(x, nr, w.wkv, my_kv);
        if (has_compressor) {
            px[npx++] = kernels::linear_args(x, nr, w.compressor.wkv, ckv.data() + b * d);
            if (m > 1) px[npx++] = kernels::linear_args(x, nr, w.compressor.wgate, cg.data() + b * d);
        }
        be.linear_multi(std::span<const kernels::MatmulArgs>(px.data(), npx));
        be.rms_norm({qr.data(), w.q_norm.data(), nr, c.q_lora_rank, eps, qr.data()});
        kernels::MatmulArgs qa = kernels::linear_args(qr.data(), nr, w.wq_b, q.data() + b * H * d);
        qa.row_begin = h0 * d;
        qa.row_end = (h0 + H) * d;
        qa.ldy = H * d;
        be.linear(qa);
        be.rope(rope_params(rope, q.data() + b * H * d, nr, H, d, my_pos));

        be.rms_norm({my_kv, w.kv_norm.data(), nr, d, eps, my_kv});
        be.rope(rope_params(rope, my_kv, nr, 1, d, my_pos));
        if (ties_)
            fake_quant_with_ties(my_kv, nr, d, QuantTieOverride::kWindowKv, l, my_pos, *ties_);
        else
            kernels::ref::fake_quant_fp8_block(my_kv, nr, d, 32);
        if (has_indexer) indexer_project(l, ch, x, qr.data(), iq.data() + b * HI * dI, ihw.data() + b * HI);
    }
    // One all-gather of this layer's row-wise projections (the fields present are the chunk's, so the same
    // on every rank).
    {
        RowField f[6];
        int nf = 0;
        f[nf++] = {q.data(), H * d};
        f[nf++] = {kv.data(), d};
        if (!ckv.empty()) f[nf++] = {ckv.data(), d};
        if (!cg.empty()) f[nf++] = {cg.data(), d};
        if (!iq.empty()) f[nf++] = {iq.data(), HI * dI};
        if (!ihw.empty()) f[nf++] = {ihw.data(), HI};
        gather_rows(ch.rows, std::span<const RowField>(f, nf));
    }
    // CP: window rows and compressed entries go through the local block table (context_parallel.cpp).
    std::vector<int32_t> local_table;
    if (cp_.active()) local_block_table(ch, (ch.start + n - 1) / spec_.block_size + 1, local_table);
    const int32_t* split_table = cp_.active() ? local_table.data() : ch.block_table;
    kernels::KvStoreParams ks;
    ks.kv = kv.data();
    ks.n = n;
    ks.d = d;
    ks.start_pos = ch.start;
    ks.raw = pools_.raw[l].data();
    ks.block_size = spec_.block_size;
    ks.block_table = split_table;
    be.kv_store(ks);

    kernels::PagedEntries comp{};
    const int32_t* picks = nullptr;
    if (m > 0) {
        const int64_t src = c.kv_source_of(l);
        DI_CHECK(src >= 0);
        // 1. The source's compressor: pre-RoPE latents of the groups completing in this chunk.
        std::vector<float> latent; // [g, d]
        int64_t g = 0, w0 = 0;     // groups, index of the first
        if (has_compressor) {
            if (m == 1) {
                latent = std::move(ckv);
                g = n;
                w0 = ch.start;
            } else {
                float* buf = ch.slot->group[l].data(); // [m, 2, d]
                int64_t filled = ch.start % m;
                w0 = ch.start / m;
                for (int64_t t = 0; t < n; ++t) {
                    std::copy_n(ckv.data() + t * d, d, buf + filled * 2 * d);
                    std::copy_n(cg.data() + t * d, d, buf + filled * 2 * d + d);
                    if (++filled < m) continue;
                    filled = 0;
                    latent.resize((g + 1) * d);
                    float* o = latent.data() + g * d;
                    for (int64_t i = 0; i < d; ++i) { // softmax of the gate over the group's tokens
                        float mx = kNegInf;
                        for (int64_t s = 0; s < m; ++s) mx = std::max(mx, buf[s * 2 * d + d + i]);
                        float den = 0, num = 0;
                        for (int64_t s = 0; s < m; ++s) {
                            const float e = std::exp(buf[s * 2 * d + d + i] - mx);
                            den += e;
                            num += buf[s * 2 * d + i] * e;
                        }
                        o[i] = num / den;
                    }
                    ++g;
                }
            }
            if (g > 0) be.rms_norm({latent.data(), w.compressor.norm.data(), g, d, eps, latent.data()});
        }
        // 2. The indexer (it reads the pre-RoPE latents for the shared keys).
        if (w.has_indexer) {
            if (w.indexer.owns_k && g > 0) {
                std::vector<float> k(g * dI);
                be.linear(kernels::linear_args(latent.data(), g, w.indexer.wk, k.data()));
                be.rms_norm({k.data(), w.indexer.k_norm.data(), g, dI, eps, k.data()});
                std::vector<int64_t> gpos(g);
                for (int64_t j = 0; j < g; ++j) gpos[j] = (w0 + j) * m;
                be.rope(rope_params(compress_rope_, k.data(), g, 1, dI, gpos.data()));
                if (ties_) {
                    std::vector<int64_t> rows(g);
                    std::iota(rows.begin(), rows.end(), w0);
                    fake_quant_with_ties(k.data(), g, dI, QuantTieOverride::kIndexerK, l, rows.data(),
                                         *ties_);
                } else {
                    kernels::ref::fake_quant_fp4_block(k.data(), g, dI, 32, /*e4m3_scales=*/false);
                }
                // CP: stored on the block's owner, like the compressed entries.
                kernels::PagedEntries keys = paged(pools_.keys[l], dI, m, spec_.block_size, split_table);
                for (int64_t j = 0; j < g; ++j) std::copy_n(k.data() + j * dI, dI, keys.entry(w0 + j));
            }
            indexer(l, ch, iq.data(), ihw.data(), sh);
        }
        // 3. The compressed cache: latents rotated at their group positions, FP4 (e4m3 scales, block 16).
        if (g > 0) {
            std::vector<int64_t> gpos(g);
            for (int64_t j = 0; j < g; ++j) gpos[j] = (w0 + j) * m;
            be.rope(rope_params(compress_rope_, latent.data(), g, 1, d, gpos.data()));
            if (ties_) {
                std::vector<int64_t> rows(g);
                std::iota(rows.begin(), rows.end(), w0);
                fake_quant_with_ties(latent.data(), g, d, QuantTieOverride::kCompressedKv, l, rows.data(),
                                     *ties_);
            } else {
                kernels::ref::fake_quant_fp4_block(latent.data(), g, d, 16, /*e4m3_scales=*/true);
            }
            kernels::PagedEntries e = paged(pools_.comp[l], d, m, spec_.block_size, split_table);
            for (int64_t j = 0; j < g; ++j) std::copy_n(latent.data() + j * d, d, e.entry(w0 + j));
        }
        // Without picks (no index source ran in this forward) every compressed entry is masked off.
        if (sh.has_picks) {
            comp = paged(pools_.comp[src], d, m, spec_.block_size, split_table);
            picks = sh.picks.data();
        }
    }

    std::vector<float> o(n * H * d); // [n, H, d]
    kernels::SparseAttentionParams ap;
    ap.q = q.data();
    ap.q_ld = H * d;
    ap.n = n;
    ap.start_pos = ch.start;
    ap.n_heads = H;
    ap.head_dim = d;
    ap.window = c.sliding_window;
    ap.scale = 1.0f / std::sqrt(static_cast<float>(d));
    ap.sink = w.sink.data() + h0;
    ap.raw = pools_.raw[l].data();
    ap.block_size = spec_.block_size;
    ap.block_table = split_table;
    ap.compressed = comp;
    ap.picks = picks;
    ap.topk = c.index_topk;
    ap.o = o.data();
    ap.o_ld = H * d;
    // Context parallelism: this rank's partial over the blocks it owns (block g on CP rank g % cp; the
    // sink on rank 0 only), merged over the CP group by log-sum-exp in rank order (V4's
    // context_parallel.h). The picks are the same on every rank (selected from the summed indexer scores).
    std::vector<uint8_t> owned;          // [chunk's block-table entries]
    std::vector<float> lse_max, lse_sum; // [n, H]
    if (cp_.active()) {
        const int64_t nb = (ch.start + n - 1) / spec_.block_size + 1;
        owned.resize(nb);
        for (int64_t j = 0; j < nb; ++j) owned[j] = ch.block_table[j] % cp_.size() == cp_.rank() ? 1 : 0;
        lse_max.assign(n * H, kNegInf);
        lse_sum.assign(n * H, 0.0f);
        ap.owned_blocks = owned.data();
        if (cp_.rank() != 0) ap.sink = nullptr;
        ap.lse_max = lse_max.data();
        ap.lse_sum = lse_sum.data();
    }
    be.sparse_attention(ap);
    if (cp_.active())
        deepseek_v4::cp_merge_partials(be, cp_, o.data(), H * d, lse_max.data(), lse_sum.data(), n, H, d);
    // Every rank holds every row's output now; the rest is row-wise: this rank's rows only.
    if (nr == 0) return;
    float* my_o = o.data() + b * H * d; // [nr, H, d]
    kernels::RopeParams inv = rope_params(rope, my_o, nr, H, d, my_pos);
    inv.inverse = true;
    be.rope(inv);

    // Grouped low-rank output: group g (heads [g H / G, (g + 1) H / G)) through rows [g R, (g + 1) R) of
    // wo_a. TP: this rank's groups when the groups split evenly over the ranks (its heads are exactly
    // theirs), then z gathered; otherwise the heads' outputs gathered first and every group computed here.
    const int64_t G = c.o_groups, R = c.o_lora_rank, gw = H_all * d / G;
    const bool groups_split = tp && G % tp->size() == 0;
    const int64_t Gl = groups_split ? G / tp->size() : G, g0 = groups_split ? tp->rank() * Gl : 0;
    std::vector<float> o_all; // [nr, H_all, d] the gathered heads (TP, groups not split)
    const float* o_in = my_o; // [nr, heads, d] the heads the groups below read
    int64_t o_ld = H * d;
    if (tp && !groups_split) {
        o_all.resize(nr * H_all * d);
        deepseek_v4::tp_gather_columns(be, *tp, my_o, nr, H * d, H * d, o_all.data(), H_all * d);
        o_in = o_all.data();
        o_ld = H_all * d;
    }
    std::vector<float> z(nr * G * R);                      // [nr, G R]
    std::vector<float> zl(groups_split ? nr * Gl * R : 0); // [nr, Gl R] this rank's groups
    float* zo = groups_split ? zl.data() : z.data();
    for (int64_t gi = 0; gi < Gl; ++gi) {
        kernels::MatmulArgs a;
        a.x = o_in + gi * gw;
        a.n = nr;
        a.ldx = o_ld;
        a.w = &w.wo_a;
        a.row_begin = (g0 + gi) * R;
        a.row_end = (g0 + gi + 1) * R;
        a.y = zo + gi * R;
        a.ldy = Gl * R;
        be.linear(a);
    }
    if (groups_split) deepseek_v4::tp_gather_columns(be, *tp, zl.data(), nr, Gl * R, Gl * R, z.data(), G * R);
    deepseek_v4::tp_linear(be, tp_, z.data(), nr, w.wo_b, out); // whole without TP
}

// The indexer's query and head weights of this rank's rows (x, qr [nr, ...]; q [nr, H_I, d_I], hw [nr, H_I]).
void DeepseekV41Model::indexer_project(int64_t l, const Chunk& ch, const float* x, const float* qr, float* q,
                                       float* hw) {
    const ModelConfig& c = config_;
    const IndexerWeights& w = weights_.layers[l].attn.indexer;
    kernels::Backend& be = *backend_;
    const int64_t n = ch.rows.count(), HI = c.index_n_heads, dI = c.index_head_dim;
    const int64_t* pos = ch.pos.data() + ch.rows.begin;
    // TP: each rank's rows of wq_b, gathered.
    deepseek_v4::tp_linear(be, tp_, qr, n, w.wq_b, q);
    be.rope(rope_params(compress_rope_, q, n, HI, dI, pos));
    // With the test-only tie table: one row per query token (head * d_I + channel), blocks of 32 within a
    // head.
    if (ties_ && dI % 32 == 0)
        fake_quant_with_ties(q, n, HI * dI, QuantTieOverride::kIndexerQ, l, pos, *ties_);
    else
        kernels::ref::fake_quant_fp4_block(q, n * HI, dI, 32, /*e4m3_scales=*/false);
    be.linear(kernels::linear_args(x, n, w.weights_proj, hw));
    const float heads_scaling = 1.0f / std::sqrt(static_cast<float>(HI));
    for (int64_t i = 0; i < n * HI; ++i) hw[i] *= heads_scaling;
}

// Scores every query against the source's keys visible to it, applies (or, at the candidate source,
// publishes) the candidate blocks, and publishes the top-k picks for this and the following layers.
void DeepseekV41Model::indexer(int64_t l, const Chunk& ch, const float* q, const float* hw, Shared& sh) {
    const ModelConfig& c = config_;
    const int64_t n = ch.n, HI = c.index_n_heads, dI = c.index_head_dim, m = c.compress_ratios[l];
    const int64_t src = c.kv_source_of(l);
    const int64_t N = (ch.start + n) / m; // entries emitted so far (the reference's compressed_len)
    sh.has_picks = true;
    sh.picks.assign(n * c.index_topk, -1);
    const bool is_candidate_source = l == c.candidate_source_layer_id;
    if (N == 0) {
        if (is_candidate_source) {
            sh.has_candidates = true;
            sh.candidates.assign(0, 0);
        }
        return;
    }
    kernels::Backend& be = *backend_;
    const float softmax_scale = 1.0f / std::sqrt(static_cast<float>(dI));

    // CP: the keys are stored on their block's owner (context_parallel.cpp). Each rank scores the visible
    // entries of its blocks (+0 elsewhere) and the [n, N] scores are summed over the group: each entry has
    // one owner, so the fixed-order sum is the owner's score bit for bit, and every rank selects from the
    // same scores as one process would (one all-reduce per indexer layer and chunk, entered by every rank).
    std::vector<int32_t> local_table;
    std::vector<uint8_t> owned;
    if (cp_.active()) {
        const int64_t n_blocks = (ch.start + n - 1) / spec_.block_size + 1;
        local_block_table(ch, n_blocks, local_table);
        owned.resize(n_blocks);
        for (int64_t j = 0; j < n_blocks; ++j)
            owned[j] = ch.block_table[j] % cp_.size() == cp_.rank() ? 1 : 0;
    }
    kernels::PagedEntries keys =
        paged(pools_.keys[src], dI, m, spec_.block_size, cp_.active() ? local_table.data() : ch.block_table);
    const int64_t bs = c.candidate_block_size;
    const int64_t nb = (N + bs - 1) / bs;
    if (is_candidate_source) {
        sh.has_candidates = true;
        sh.candidates.assign(n * N, 0);
    }
    const bool masked = c.uses_candidates(l) && sh.has_candidates && !is_candidate_source;
    // Every query's score of every entry, [n, N] (row stride ld). TP: rank r scores the entries
    // [r P, (r + 1) P) (P = ceil(N / tp), the last rank's range padded), each score whole (its sum over
    // heads in the one-process order), and the scores are gathered, so every rank selects from the
    // one-process bits with the same top-k below. Under CP (the CP group shares this rank's TP range) the
    // range is first summed over the CP group as above. Invisible, unowned and padded entries are +0 until
    // the sums are done, then the invisible ones are -inf.
    const int64_t parts = tp_.active() ? tp_.size() : 1, P = (N + parts - 1) / parts, e0 = tp_.rank() * P;
    const int64_t ld = parts * P;
    std::vector<float> local(n * P), gathered(parts > 1 ? n * ld : 0); // [n, P], [n, tp P]
    for (int64_t t = 0; t < n; ++t) {
        const int64_t vis = (ch.pos[t] + 1) / m;
        for (int64_t j = 0; j < P; ++j) {
            const int64_t e = e0 + j;
            float& out = local[t * P + j];
            if (e >= vis || e >= N || (cp_.active() && !owned[e * m / spec_.block_size])) {
                out = 0.0f;
                continue;
            }
            const float* k = keys.entry(e);
            float s = 0;
            for (int64_t h = 0; h < HI; ++h) {
                const float* qh = q + (t * HI + h) * dI;
                float dot = 0;
                for (int64_t i = 0; i < dI; ++i) dot += qh[i] * k[i];
                s += std::max(dot, 0.0f) * softmax_scale * hw[t * HI + h];
            }
            out = s;
        }
    }
    if (cp_.active()) {
        core::Status st = cp_.group->all_reduce_sum(std::span<float>(local));
        if (!st.ok()) {
            if (ep_status_.ok()) ep_status_ = st.with_context("context parallel indexer scores");
            return; // picks stay -1; the forward reports the error
        }
    }
    if (parts > 1) deepseek_v4::tp_gather_columns(be, tp_, local.data(), n, P, P, gathered.data(), ld);
    const float* all_scores = parts > 1 ? gathered.data() : local.data();
    std::vector<float> scores(N), bscore(nb);
    std::vector<int32_t> sel;
    for (int64_t t = 0; t < n; ++t) {
        const int64_t vis = (ch.pos[t] + 1) / m;
        std::copy_n(all_scores + t * ld, N, scores.begin());
        for (int64_t e = vis; e < N; ++e) scores[e] = kNegInf;
        if (is_candidate_source) {
            // Level one: the best candidate_topk_blocks blocks (block score = max); the newest visible block
            // is always kept; unreachable blocks (all -inf) never are.
            for (int64_t b = 0; b < nb; ++b) {
                float mx = kNegInf;
                for (int64_t e = b * bs; e < std::min(N, (b + 1) * bs); ++e) mx = std::max(mx, scores[e]);
                bscore[b] = mx;
            }
            if (vis > 0) bscore[(vis - 1) / bs] = std::numeric_limits<float>::infinity();
            const int64_t kb = std::min(c.candidate_topk_blocks, nb);
            sel.assign(kb, 0);
            kernels::topk_torch(bscore.data(), nb, kb, sel.data());
            std::vector<int32_t> kept;
            for (int32_t b : sel)
                if (bscore[b] > kNegInf) {
                    kept.push_back(b);
                    for (int64_t e = b * bs; e < std::min(N, (b + 1) * bs); ++e) sh.candidates[t * N + e] = 1;
                }
            if (probes_) {
                std::sort(kept.begin(), kept.end());
                for (size_t i = 0; i < kept.size() && static_cast<int64_t>(i) < c.candidate_topk_blocks; ++i)
                    probes_->candidate_blocks[(ch.row0 + t) * c.candidate_topk_blocks + i] = kept[i];
            }
        } else if (masked) {
            for (int64_t e = 0; e < N; ++e)
                if (!sh.candidates[t * N + e]) scores[e] = kNegInf;
        }
        const int64_t k = std::min(c.index_topk, N);
        sel.assign(k, 0);
        kernels::topk_torch(scores.data(), N, k, sel.data());
        std::vector<int32_t> valid;
        for (int32_t e : sel)
            if (scores[e] > kNegInf) valid.push_back(e);
        std::sort(valid.begin(), valid.end());
        std::copy(valid.begin(), valid.end(), sh.picks.begin() + t * c.index_topk);
    }
    if (probes_)
        std::copy(sh.picks.begin(), sh.picks.end(), probes_->picks[l].begin() + ch.row0 * c.index_topk);
}

} // namespace deepinfer::model::deepseek_v41
