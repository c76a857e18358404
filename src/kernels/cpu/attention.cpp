// Threaded lightning indexer and sparse attention. The indexer scores a block of queries against tiles of
// 16 transposed keys (AVX-512 when the CPU has it, the same mul-then-add order as ref/ so the selected sets
// are identical), tiles split over the pool, then every query's top-k in parallel. Attention runs one
// (query, head) pair per work item.

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include "core/check.h"
#include "core/thread_pool.h"
#include "kernels/cpu/backend.h"
#include "kernels/ref/ops_ref.h"

namespace deepinfer::kernels::cpu {
namespace {

constexpr int64_t kTile = 16;    // keys per tile (one zmm of scores)
constexpr int64_t kQBlock = 32;  // queries scored together (keys are transposed once per block)
constexpr int64_t kMaxDim = 512; // index_head_dim bound for the on-stack key tile

// fn(thread_index, num_threads) once on every thread of the pool.
template <typename Fn> void per_thread(core::ThreadPool& pool, Fn&& fn) {
    const int64_t nth = pool.num_threads();
    auto body = [&](int64_t b, int64_t e) {
        for (int64_t t = b; t < e; ++t) fn(t, nth);
    };
    if (nth == 1)
        body(0, 1);
    else
        pool.parallel_for(nth, std::ref(body));
}

struct TileJob {
    const IndexerParams* p;
    const float* kt; // [d_I, kTile] transposed keys of the tile
    int64_t e0;      // first entry of the tile
    float scale;
};

// scores of query q_i (row `out`) against the tile: s[u] = sum_h w_h * max(q_h . k_u, 0) * scale.
void tile_scores_generic(const TileJob& j, const float* q, const float* w, float* s) {
    const int64_t HI = j.p->n_heads, dI = j.p->head_dim;
    for (int64_t u = 0; u < kTile; ++u) s[u] = 0.0f;
    for (int64_t h = 0; h < HI; ++h) {
        float acc[kTile] = {};
        for (int64_t c = 0; c < dI; ++c) {
            const float qv = q[h * dI + c];
            const float* kr = j.kt + c * kTile;
            for (int64_t u = 0; u < kTile; ++u) acc[u] += qv * kr[u];
        }
        const float wh = w[h];
        for (int64_t u = 0; u < kTile; ++u) s[u] += std::max(acc[u], 0.0f) * j.scale * wh;
    }
}

__attribute__((target("avx512f"), optimize("fp-contract=off"))) void
tile_scores_avx512(const TileJob& j, const float* q, const float* w, float* s) {
    const int64_t HI = j.p->n_heads, dI = j.p->head_dim;
    __m512 sv = _mm512_setzero_ps();
    const __m512 zero = _mm512_setzero_ps(), scale = _mm512_set1_ps(j.scale);
    for (int64_t h = 0; h < HI; ++h) {
        __m512 acc = _mm512_setzero_ps();
        for (int64_t c = 0; c < dI; ++c)
            acc = _mm512_add_ps(
                acc, _mm512_mul_ps(_mm512_set1_ps(q[h * dI + c]), _mm512_loadu_ps(j.kt + c * kTile)));
        // std::max(acc, 0) (keeps -0 and NaN as it does), * scale, * w_h, then added: ref's order.
        const __m512 relu = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(acc, zero, _CMP_NLT_UQ), acc);
        const __m512 t = _mm512_mul_ps(_mm512_mul_ps(relu, scale), _mm512_set1_ps(w[h]));
        sv = _mm512_add_ps(sv, t);
    }
    _mm512_storeu_ps(s, sv);
}

bool has_avx512() {
    static const bool yes = __builtin_cpu_supports("avx512f");
    return yes;
}

} // namespace

void indexer(const IndexerParams& p, core::ThreadPool& pool, Workspace& ws) {
    const int64_t dI = p.head_dim, m = p.keys.ratio, n_total = p.n_total;
    DI_CHECK(dI <= kMaxDim);
    const float scale = 1.0f / std::sqrt(static_cast<float>(dI));
    const int64_t nth = pool.num_threads();
    const Workspace::Mark mark = ws.mark();
    float* scores = ws.take<float>(kQBlock * std::max<int64_t>(n_total, 1));   // [kQBlock, n_total]
    auto* elems = ws.take<ref::TopkElem>(nth * std::max<int64_t>(n_total, 1)); // [threads, n_total]
    int32_t* sel = ws.take<int32_t>(nth * std::max<int64_t>(n_total, 1));      // [threads, n_total]
    const bool avx512 = has_avx512();

    for (int64_t q0 = 0; q0 < p.n; q0 += kQBlock) {
        const int64_t nq = std::min(kQBlock, p.n - q0);
        const int64_t max_vis = (p.start_pos + q0 + nq) / m; // visible entries of the block's last query
        const int64_t n_tiles = (max_vis + kTile - 1) / kTile;
        // Phase 1: scores, tiles of keys split over the threads.
        per_thread(pool, [&](int64_t ti, int64_t nt) {
            alignas(64) float kt[kMaxDim * kTile];
            alignas(64) float s[kTile];
            const int64_t tb = n_tiles * ti / nt, te = n_tiles * (ti + 1) / nt;
            for (int64_t tile = tb; tile < te; ++tile) {
                const int64_t e0 = tile * kTile, ne = std::min(kTile, max_vis - e0);
                for (int64_t u = 0; u < kTile; ++u) {
                    if (u < ne) {
                        const float* k = p.keys.entry(e0 + u);
                        for (int64_t c = 0; c < dI; ++c) kt[c * kTile + u] = k[c];
                    } else {
                        for (int64_t c = 0; c < dI; ++c) kt[c * kTile + u] = 0.0f;
                    }
                }
                const TileJob job{&p, kt, e0, scale};
                for (int64_t qi = 0; qi < nq; ++qi) {
                    const int64_t i = q0 + qi, nv = (p.start_pos + i + 1) / m;
                    if (e0 >= nv) continue;
                    const float* q = p.q + i * p.q_ld;
                    const float* w = p.weights + i * p.w_ld;
                    if (avx512)
                        tile_scores_avx512(job, q, w, s);
                    else
                        tile_scores_generic(job, q, w, s);
                    std::copy_n(s, std::min(kTile, nv - e0), scores + qi * n_total + e0);
                }
            }
        });
        // Phase 2: -inf past each query's visible entries, then its top-k; queries split over threads.
        per_thread(pool, [&](int64_t ti, int64_t nt) {
            for (int64_t qi = ti; qi < nq; qi += nt) {
                const int64_t i = q0 + qi, nv = (p.start_pos + i + 1) / m;
                float* row = scores + qi * n_total;
                std::fill(row + nv, row + n_total, -std::numeric_limits<float>::infinity());
                ref::indexer_select(row, nv, n_total, p.topk, p.picks + i * p.topk, elems + ti * n_total,
                                    sel + ti * n_total);
            }
        });
    }
    ws.release(mark);
}

void sparse_attention(const SparseAttentionParams& p, core::ThreadPool& pool, Workspace& ws) {
    const int64_t max_keys = std::max<int64_t>(ref::sparse_attention_max_keys(p), 1);
    const int64_t nth = pool.num_threads(), items = p.n * p.n_heads;
    const Workspace::Mark mark = ws.mark();
    float* logits = ws.take<float>(nth * max_keys); // [threads, max_keys]
    if (items * max_keys * p.head_dim < (1 << 13)) {
        for (int64_t it = 0; it < items; ++it)
            ref::sparse_attention_head(p, it / p.n_heads, it % p.n_heads, logits);
    } else {
        // Interleaved (query, head) pairs: later queries see more keys.
        per_thread(pool, [&](int64_t ti, int64_t nt) {
            for (int64_t it = ti; it < items; it += nt)
                ref::sparse_attention_head(p, it / p.n_heads, it % p.n_heads, logits + ti * max_keys);
        });
    }
    ws.release(mark);
}

} // namespace deepinfer::kernels::cpu
