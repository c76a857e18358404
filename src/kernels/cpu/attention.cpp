// Threaded lightning indexer and sparse attention. The indexer scores a block of queries against tiles of
// 16 transposed keys (AVX-512 when the CPU has it, the same mul-then-add order as ref/ so the selected sets
// are identical), tiles split over the pool, then every query's top-k in parallel. Attention gathers and
// transposes each query's keys once (MQA: shared by every head) and computes 16 logits per AVX-512 vector
// in the same per-key order; work items are queries (prefill) or head ranges (decode).

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <functional>
#include <limits>

#include "core/check.h"
#include "core/thread_pool.h"
#include "kernels/cpu/backend.h"
#include "kernels/cpu/exp_avx512.h"
#include "kernels/cpu/transpose_avx512.h"
#include "kernels/ref/ops_ref.h"

namespace deepinfer::kernels::cpu {
namespace {

constexpr int64_t kTile = 16;    // keys per tile (one zmm of scores)
constexpr int64_t kQBlock = 32;  // queries scored together (keys are transposed once per block)
constexpr int64_t kMaxDim = 512; // index_head_dim bound for the on-stack key tile
// Work (multiply-adds) below which a loop runs on the caller: waking the pool costs ~10 us when the machine
// is quiet (far more when it is oversubscribed), so only loops of tens of microseconds are split.
constexpr int64_t kParallelMacs = int64_t{1} << 18;

// fn(thread_index, num_threads) once on every thread of the pool (only on the caller, as thread 0 of 1,
// when the work is too small to pay for waking the pool).
template <typename Fn> void per_thread(core::ThreadPool& pool, Fn&& fn, bool worth_it = true) {
    if (!worth_it) {
        fn(int64_t{0}, int64_t{1});
        return;
    }
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

// Q queries' scores against the tile (query k: q[k], w[k] -> s + k * kTile), each query's operations in
// ref's order: per head a chain of multiply-then-add over the channels, std::max(acc, 0) (keeps -0 and NaN
// as it does), * scale, * w_h, then added. Q = 4 loads each key vector once for the four queries and runs
// four independent add chains, where one query's chain was bound by the add latency; the same bits.
constexpr int64_t kScoreQueries = 4;
template <int Q>
__attribute__((target("avx512f"), optimize("fp-contract=off"))) void
tile_scores_avx512(const TileJob& j, const float* const* q, const float* const* w, float* s) {
    const int64_t HI = j.p->n_heads, dI = j.p->head_dim;
    __m512 sv[Q];
    for (int k = 0; k < Q; ++k) sv[k] = _mm512_setzero_ps();
    const __m512 zero = _mm512_setzero_ps(), scale = _mm512_set1_ps(j.scale);
    for (int64_t h = 0; h < HI; ++h) {
        __m512 acc[Q];
        for (int k = 0; k < Q; ++k) acc[k] = _mm512_setzero_ps();
        for (int64_t c = 0; c < dI; ++c) {
            const __m512 kv = _mm512_loadu_ps(j.kt + c * kTile);
            for (int k = 0; k < Q; ++k)
                acc[k] = _mm512_add_ps(acc[k], _mm512_mul_ps(_mm512_set1_ps(q[k][h * dI + c]), kv));
        }
        for (int k = 0; k < Q; ++k) {
            const __m512 relu = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(acc[k], zero, _CMP_NLT_UQ), acc[k]);
            const __m512 t = _mm512_mul_ps(_mm512_mul_ps(relu, scale), _mm512_set1_ps(w[k][h]));
            sv[k] = _mm512_add_ps(sv[k], t);
        }
    }
    for (int k = 0; k < Q; ++k) _mm512_storeu_ps(s + k * kTile, sv[k]);
}

std::atomic<bool> g_allow_avx512{true};

bool has_avx512() {
    static const bool yes = __builtin_cpu_supports("avx512f");
    return yes && g_allow_avx512.load(std::memory_order_relaxed);
}

} // namespace

void indexer(const IndexerParams& p, core::ThreadPool& pool, Workspace& ws) {
    using Phase = IndexerParams::Phase;
    const int64_t dI = p.head_dim, m = p.keys.ratio, n_total = p.n_total;
    DI_CHECK(dI <= kMaxDim);
    DI_CHECK(p.phase == Phase::kBoth || p.scores != nullptr);
    DI_CHECK(p.phase == Phase::kScore || p.owned_blocks == nullptr);
    const float scale = 1.0f / std::sqrt(static_cast<float>(dI));
    const int64_t nth = pool.num_threads();
    const Workspace::Mark mark = ws.mark();
    // kBoth: one block's scores in scratch; kScore / kSelect: the caller's [n, n_total].
    float* block_scores =
        p.phase == Phase::kBoth ? ws.take<float>(kQBlock * std::max<int64_t>(n_total, 1)) : nullptr;
    auto* elems = ws.take<ref::TopkElem>(nth * std::max<int64_t>(n_total, 1)); // [threads, n_total]
    int32_t* sel = ws.take<int32_t>(nth * std::max<int64_t>(n_total, 1));      // [threads, n_total]
    const bool avx512 = has_avx512();
    // CP: whether entry e is in one of this rank's blocks (every entry without owned_blocks).
    auto owned = [&](int64_t e) { return !p.owned_blocks || p.owned_blocks[e * m / p.keys.block_size]; };

    for (int64_t q0 = 0; q0 < p.n; q0 += kQBlock) {
        const int64_t nq = std::min(kQBlock, p.n - q0);
        const int64_t max_vis = (p.start_pos + q0 + nq) / m; // visible entries of the block's last query
        // kSelect scores nothing: no tiles.
        const int64_t n_tiles = p.phase == Phase::kSelect ? 0 : (max_vis + kTile - 1) / kTile;
        float* scores = block_scores ? block_scores : p.scores + q0 * n_total; // [nq, n_total]
        if (p.phase == Phase::kScore) std::fill_n(scores, nq * n_total, 0.0f);
        // Phase 1: scores, tiles of keys split over the threads (a tile with no owned entry is skipped).
        const bool big = n_tiles * kTile * nq * p.n_heads * dI >= kParallelMacs;
        per_thread(
            pool,
            [&](int64_t ti, int64_t nt) {
                alignas(64) float kt[kMaxDim * kTile];
                alignas(64) float s[kScoreQueries * kTile];
                const int64_t tb = n_tiles * ti / nt, te = n_tiles * (ti + 1) / nt;
                for (int64_t tile = tb; tile < te; ++tile) {
                    const int64_t e0 = tile * kTile, ne = std::min(kTile, max_vis - e0);
                    bool any = false;
                    for (int64_t u = 0; u < ne; ++u) any = any || owned(e0 + u);
                    if (!any) continue;
                    for (int64_t u = 0; u < kTile; ++u) {
                        if (u < ne && owned(e0 + u)) {
                            const float* k = p.keys.entry(e0 + u);
                            for (int64_t c = 0; c < dI; ++c) kt[c * kTile + u] = k[c];
                        } else {
                            for (int64_t c = 0; c < dI; ++c) kt[c * kTile + u] = 0.0f;
                        }
                    }
                    const TileJob job{&p, kt, e0, scale};
                    // Query qi's scores of this tile (in s + k * kTile) into its row.
                    auto put = [&](int64_t qi, const float* sq) {
                        const int64_t nv = (p.start_pos + q0 + qi + 1) / m;
                        const int64_t nw = std::min(kTile, nv - e0);
                        if (!p.owned_blocks) {
                            std::copy_n(sq, nw, scores + qi * n_total + e0);
                            return;
                        }
                        for (int64_t u = 0; u < nw; ++u)
                            if (owned(e0 + u)) scores[qi * n_total + e0 + u] = sq[u]; // the rest stays +0
                    };
                    // The queries that see this tile: from the first whose visible entries reach it (nv
                    // grows with the position) to the block's end; four at a time on AVX-512.
                    int64_t qi = 0;
                    while (qi < nq && e0 >= (p.start_pos + q0 + qi + 1) / m) ++qi;
                    if (avx512) {
                        for (; qi + kScoreQueries <= nq; qi += kScoreQueries) {
                            const float* qs[kScoreQueries];
                            const float* wq[kScoreQueries];
                            for (int64_t k = 0; k < kScoreQueries; ++k) {
                                qs[k] = p.q + (q0 + qi + k) * p.q_ld;
                                wq[k] = p.weights + (q0 + qi + k) * p.w_ld;
                            }
                            tile_scores_avx512<kScoreQueries>(job, qs, wq, s);
                            for (int64_t k = 0; k < kScoreQueries; ++k) put(qi + k, s + k * kTile);
                        }
                    }
                    for (; qi < nq; ++qi) {
                        const float* q = p.q + (q0 + qi) * p.q_ld;
                        const float* w = p.weights + (q0 + qi) * p.w_ld;
                        if (avx512)
                            tile_scores_avx512<1>(job, &q, &w, s);
                        else
                            tile_scores_generic(job, q, w, s);
                        put(qi, s);
                    }
                }
            },
            big);
        if (p.phase == Phase::kScore) continue;
        // Phase 2: -inf past each query's visible entries, then its top-k; queries split over threads.
        per_thread(
            pool,
            [&](int64_t ti, int64_t nt) {
                for (int64_t qi = ti; qi < nq; qi += nt) {
                    const int64_t i = q0 + qi, nv = (p.start_pos + i + 1) / m;
                    float* row = scores + qi * n_total;
                    std::fill(row + nv, row + n_total, -std::numeric_limits<float>::infinity());
                    ref::indexer_select(row, nv, n_total, p.topk, p.picks + i * p.topk, elems + ti * n_total,
                                        sel + ti * n_total);
                }
            },
            nq > 1 && nq * n_total >= (1 << 12));
    }
    ws.release(mark);
}

namespace {

// The keys query i reads (window rows, then compressed entries), as ref::sparse_attention_head orders them.
int64_t gather_keys(const SparseAttentionParams& p, int64_t i, const float** keys) {
    const int64_t pos = p.start_pos + i, bs = p.block_size, d = p.head_dim;
    // Context parallelism: only the keys in this rank's blocks (raw row k in block k / bs, entry e in the
    // block its window starts in), in the same order.
    const uint8_t* own = p.owned_blocks;
    int64_t n = 0;
    for (int64_t k = std::max<int64_t>(0, pos - p.window + 1); k <= pos; ++k)
        if (!own || own[k / bs]) keys[n++] = p.raw + (p.block_table[k / bs] * bs + k % bs) * d;
    if (p.compressed.base) {
        const int64_t m = p.compressed.ratio;
        if (p.picks) {
            const int32_t* picks = p.picks + i * p.topk;
            for (int64_t j = 0; j < p.topk && picks[j] >= 0; ++j)
                if (!own || own[picks[j] * m / bs]) keys[n++] = p.compressed.entry(picks[j]);
        } else {
            for (int64_t e = 0; e < (pos + 1) / m; ++e)
                if (!own || own[e * m / bs]) keys[n++] = p.compressed.entry(e);
        }
    }
    return n;
}

// ref::softmax_sink 16 keys per vector: the maximum (order-free), exp_ref's lanes (exp16), partial sum l
// of ref's in lane l, the lanes folded in ref's halves, and the division; the same bits.
#pragma GCC diagnostic push // the undefined pass-through operands, as for transpose_keys_avx512 below
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
__attribute__((target("avx512f"))) ref::SoftmaxStats softmax_sink_avx512(float* x, int64_t n,
                                                                         const float* sink) {
    static_assert(ref::kSoftmaxLanes == 16);
    constexpr int kRn = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
    const float neg_inf = -std::numeric_limits<float>::infinity();
    auto mask = [&](int64_t j) {
        return n - j >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << (n - j)) - 1);
    };
    __m512 m = _mm512_set1_ps(sink ? *sink : neg_inf);
    for (int64_t j = 0; j < n; j += 16)
        m = _mm512_max_ps(_mm512_mask_loadu_ps(_mm512_set1_ps(neg_inf), mask(j), x + j), m);
    const float mx = _mm512_reduce_max_ps(m);
    const __m512 mxv = _mm512_set1_ps(mx);
    __m512 acc = _mm512_setzero_ps();
    for (int64_t j = 0; j < n; j += 16) {
        const __mmask16 k = mask(j);
        const __m512 e = detail::exp16(_mm512_sub_round_ps(_mm512_maskz_loadu_ps(k, x + j), mxv, kRn));
        _mm512_mask_storeu_ps(x + j, k, e);
        acc = _mm512_mask_add_ps(acc, k, acc, e);
    }
    const __m256 a8 = _mm256_add_ps(_mm512_castps512_ps256(acc),
                                    _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc), 1)));
    const __m128 a4 = _mm_add_ps(_mm256_castps256_ps128(a8), _mm256_extractf128_ps(a8, 1));
    const __m128 a2 = _mm_add_ps(a4, _mm_movehl_ps(a4, a4));
    const float sum = _mm_cvtss_f32(_mm_add_ss(a2, _mm_shuffle_ps(a2, a2, 1)));
    const float denom = (sink ? exp_ref(*sink - mx) : 0.0f) + sum;
    const __m512 dv = _mm512_set1_ps(denom);
    for (int64_t j = 0; j < n; j += 16) {
        const __mmask16 k = mask(j);
        _mm512_mask_storeu_ps(x + j, k, _mm512_div_ps(_mm512_maskz_loadu_ps(k, x + j), dv));
    }
    return {mx, denom};
}
#pragma GCC diagnostic pop

// kt [tiles, d, kTile]: key j's channel c at kt[(j / kTile) * d * kTile + c * kTile + j % kTile], zeros
// past n (the scalar copy below in 16 x 16 blocks through registers: the copy wrote one float per store,
// kTile floats apart, and ran ~8 us per query at V4's 128-wide heads, ~2/3 of a small model's decode
// attention). Channels past the last multiple of 16 element by element.
// GCC 12 warns that the shuffles' undefined pass-through operands (_mm512_undefined_ps) may be used
// uninitialized once inlined into a target("avx512f") function; they are not read.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
__attribute__((target("avx512f"))) void transpose_keys_avx512(const float* const* keys, int64_t n,
                                                              int64_t tiles, int64_t d, float* kt) {
    const int64_t d16 = d / 16 * 16;
    for (int64_t t = 0; t < tiles; ++t) {
        float* tile = kt + t * d * kTile;
        const int64_t cnt = std::min<int64_t>(kTile, n - t * kTile);
        for (int64_t c = 0; c < d16; c += 16) {
            __m512 r[kTile];
            for (int64_t u = 0; u < kTile; ++u)
                r[u] = u < cnt ? _mm512_loadu_ps(keys[t * kTile + u] + c) : _mm512_setzero_ps();
            detail::transpose16(r);
            for (int64_t i = 0; i < 16; ++i) _mm512_storeu_ps(tile + (c + i) * kTile, r[i]);
        }
        for (int64_t u = 0; u < kTile; ++u)
            for (int64_t c = d16; c < d; ++c) tile[c * kTile + u] = u < cnt ? keys[t * kTile + u][c] : 0.0f;
    }
}
#pragma GCC diagnostic pop

// logits[j] = (q . k_j) * scale for one tile of kTile transposed keys kt [d, kTile], ref's order per key.
void tile_logits_generic(const float* q, const float* kt, int64_t d, float scale, float* out) {
    float acc[kTile] = {};
    for (int64_t c = 0; c < d; ++c)
        for (int64_t u = 0; u < kTile; ++u) acc[u] += q[c] * kt[c * kTile + u];
    for (int64_t u = 0; u < kTile; ++u) out[u] = acc[u] * scale;
}

__attribute__((target("avx512f"), optimize("fp-contract=off"))) void
tile_logits_avx512(const float* q, const float* kt, int64_t d, float scale, float* out) {
    __m512 acc = _mm512_setzero_ps();
    for (int64_t c = 0; c < d; ++c)
        acc = _mm512_add_ps(acc, _mm512_mul_ps(_mm512_set1_ps(q[c]), _mm512_loadu_ps(kt + c * kTile)));
    _mm512_storeu_ps(out, _mm512_mul_ps(acc, _mm512_set1_ps(scale)));
}

// tile_logits_avx512 over `tiles` tiles, four at a time: four independent chains (one chain of d dependent
// adds per tile was bound by the add latency), each tile's sum in the same order as tile_logits_avx512's.
__attribute__((target("avx512f"), optimize("fp-contract=off"))) void
tiles_logits_avx512(const float* q, const float* kt, int64_t tiles, int64_t d, float scale, float* out) {
    const int64_t ts = d * kTile; // floats per transposed tile
    int64_t t = 0;
    for (; t + 4 <= tiles; t += 4) {
        const float* k0 = kt + t * ts;
        __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        for (int64_t c = 0; c < d; ++c) {
            const __m512 qc = _mm512_set1_ps(q[c]);
            a0 = _mm512_add_ps(a0, _mm512_mul_ps(qc, _mm512_loadu_ps(k0 + c * kTile)));
            a1 = _mm512_add_ps(a1, _mm512_mul_ps(qc, _mm512_loadu_ps(k0 + ts + c * kTile)));
            a2 = _mm512_add_ps(a2, _mm512_mul_ps(qc, _mm512_loadu_ps(k0 + 2 * ts + c * kTile)));
            a3 = _mm512_add_ps(a3, _mm512_mul_ps(qc, _mm512_loadu_ps(k0 + 3 * ts + c * kTile)));
        }
        const __m512 sc = _mm512_set1_ps(scale);
        _mm512_storeu_ps(out + t * kTile, _mm512_mul_ps(a0, sc));
        _mm512_storeu_ps(out + (t + 1) * kTile, _mm512_mul_ps(a1, sc));
        _mm512_storeu_ps(out + (t + 2) * kTile, _mm512_mul_ps(a2, sc));
        _mm512_storeu_ps(out + (t + 3) * kTile, _mm512_mul_ps(a3, sc));
    }
    for (; t < tiles; ++t) tile_logits_avx512(q, kt + t * ts, d, scale, out + t * kTile);
}

// Heads [h, h + kHeads) against the same tiles at once (MQA: every head reads the same keys): each key
// vector is loaded once for the kHeads heads (one head at a time re-read every tile from L2 per head, ~2
// L2 loads per multiply-add pair). q: head 0's query, the others qs apart; out: head 0's logits, the others
// ls apart. Each (head, key) sum in tile_logits_avx512's order.
constexpr int64_t kHeads = 4;
__attribute__((target("avx512f"), optimize("fp-contract=off"))) void
heads_logits_avx512(const float* q, int64_t qs, const float* kt, int64_t tiles, int64_t d, float scale,
                    float* out, int64_t ls) {
    const int64_t ts = d * kTile; // floats per transposed tile
    const __m512 sc = _mm512_set1_ps(scale);
    int64_t t = 0;
    for (; t + 2 <= tiles; t += 2) {
        const float* k0 = kt + t * ts;
        __m512 a[kHeads][2];
        for (int h = 0; h < kHeads; ++h) a[h][0] = a[h][1] = _mm512_setzero_ps();
        for (int64_t c = 0; c < d; ++c) {
            const __m512 x0 = _mm512_loadu_ps(k0 + c * kTile), x1 = _mm512_loadu_ps(k0 + ts + c * kTile);
            for (int h = 0; h < kHeads; ++h) {
                const __m512 qc = _mm512_set1_ps(q[h * qs + c]);
                a[h][0] = _mm512_add_ps(a[h][0], _mm512_mul_ps(qc, x0));
                a[h][1] = _mm512_add_ps(a[h][1], _mm512_mul_ps(qc, x1));
            }
        }
        for (int h = 0; h < kHeads; ++h) {
            _mm512_storeu_ps(out + h * ls + t * kTile, _mm512_mul_ps(a[h][0], sc));
            _mm512_storeu_ps(out + h * ls + (t + 1) * kTile, _mm512_mul_ps(a[h][1], sc));
        }
    }
    for (; t < tiles; ++t) {
        const float* k0 = kt + t * ts;
        __m512 a[kHeads];
        for (int h = 0; h < kHeads; ++h) a[h] = _mm512_setzero_ps();
        for (int64_t c = 0; c < d; ++c) {
            const __m512 x0 = _mm512_loadu_ps(k0 + c * kTile);
            for (int h = 0; h < kHeads; ++h)
                a[h] = _mm512_add_ps(a[h], _mm512_mul_ps(_mm512_set1_ps(q[h * qs + c]), x0));
        }
        for (int h = 0; h < kHeads; ++h) _mm512_storeu_ps(out + h * ls + t * kTile, _mm512_mul_ps(a[h], sc));
    }
}

// o[c] += w[j] * keys[j][c] for j = 0..n-1 in order, per channel c, for H heads at once (w: the softmax
// weights, already divided by their sum; head h's at w + h * ls, its output at o + h * os): ref's weighted
// sum, 64 channels at a time in registers, each key vector loaded once for the H heads (the same additions
// per element in the same order, none fused).
template <int H>
__attribute__((target("avx512f"), optimize("fp-contract=off"))) void
weighted_sum_avx512(const float* w, int64_t ls, const float* const* keys, int64_t n, int64_t d, float* o,
                    int64_t os) {
    const int64_t d64 = d / 64 * 64;
    for (int64_t c = 0; c < d64; c += 64) {
        __m512 a[H][4];
        for (int h = 0; h < H; ++h)
            for (int v = 0; v < 4; ++v) a[h][v] = _mm512_loadu_ps(o + h * os + c + v * 16);
        for (int64_t j = 0; j < n; ++j) {
            const float* k = keys[j] + c;
            const __m512 k0 = _mm512_loadu_ps(k), k1 = _mm512_loadu_ps(k + 16), k2 = _mm512_loadu_ps(k + 32),
                         k3 = _mm512_loadu_ps(k + 48);
            for (int h = 0; h < H; ++h) {
                const __m512 pj = _mm512_set1_ps(w[h * ls + j]);
                a[h][0] = _mm512_add_ps(a[h][0], _mm512_mul_ps(pj, k0));
                a[h][1] = _mm512_add_ps(a[h][1], _mm512_mul_ps(pj, k1));
                a[h][2] = _mm512_add_ps(a[h][2], _mm512_mul_ps(pj, k2));
                a[h][3] = _mm512_add_ps(a[h][3], _mm512_mul_ps(pj, k3));
            }
        }
        for (int h = 0; h < H; ++h)
            for (int v = 0; v < 4; ++v) _mm512_storeu_ps(o + h * os + c + v * 16, a[h][v]);
    }
    for (int h = 0; h < H; ++h)
        for (int64_t j = 0; j < n; ++j)
            for (int64_t c = d64; c < d; ++c) o[h * os + c] += w[h * ls + j] * keys[j][c];
}

struct AttnScratch {
    const float** keys; // [max_keys]
    float* kt;          // [tiles, d, kTile] transposed keys
    float* logits;      // [kHeads, ls] logits, then softmax weights
    int64_t ls;         // logits row stride (keys padded to whole tiles)
};

// Heads [h0, h1) of query i: keys gathered and transposed once, logits 16 keys at a time (kHeads heads at
// once on AVX-512), then per head ref's softmax with the sink (the weights divided by their sum, as ref's
// p_j) and the weighted sum (per output channel in key order, as ref).
void attend(const SparseAttentionParams& p, int64_t i, int64_t h0, int64_t h1, const AttnScratch& s,
            bool avx512) {
    const int64_t d = p.head_dim;
    const int64_t n = gather_keys(p, i, s.keys);
    const int64_t tiles = (n + kTile - 1) / kTile;
    const float neg_inf = -std::numeric_limits<float>::infinity();
    if (!p.sink && n == 0) { // a CP partial with no key: weight 0 in the merge
        for (int64_t h = h0; h < h1; ++h) {
            std::fill_n(p.o + i * p.o_ld + h * d, d, 0.0f);
            if (p.lse_max) p.lse_max[i * p.n_heads + h] = neg_inf;
            if (p.lse_sum) p.lse_sum[i * p.n_heads + h] = 0.0f;
        }
        return;
    }
    if (avx512) {
        transpose_keys_avx512(s.keys, n, tiles, d, s.kt);
    } else {
        for (int64_t t = 0; t < tiles; ++t) {
            float* kt = s.kt + t * d * kTile;
            for (int64_t u = 0; u < kTile; ++u) {
                const int64_t j = t * kTile + u;
                if (j < n)
                    for (int64_t c = 0; c < d; ++c) kt[c * kTile + u] = s.keys[j][c];
                else
                    for (int64_t c = 0; c < d; ++c) kt[c * kTile + u] = 0.0f;
            }
        }
    }
    for (int64_t h = h0; h < h1;) {
        const int64_t hb = avx512 && h1 - h >= kHeads ? kHeads : 1;
        const float* qh = p.q + i * p.q_ld + h * d;
        float* oh = p.o + i * p.o_ld + h * d;
        if (hb == kHeads)
            heads_logits_avx512(qh, d, s.kt, tiles, d, p.scale, s.logits, s.ls);
        else if (avx512)
            tiles_logits_avx512(qh, s.kt, tiles, d, p.scale, s.logits);
        else
            for (int64_t t = 0; t < tiles; ++t)
                tile_logits_generic(qh, s.kt + t * d * kTile, d, p.scale, s.logits + t * kTile);
        for (int64_t k = 0; k < hb; ++k) {
            float* logits = s.logits + k * s.ls;
            const float* sink = p.sink ? p.sink + h + k : nullptr;
            const ref::SoftmaxStats st =
                avx512 ? softmax_sink_avx512(logits, n, sink) : ref::softmax_sink(logits, n, sink);
            std::fill_n(oh + k * d, d, 0.0f);
            if (p.lse_max) p.lse_max[i * p.n_heads + h + k] = st.max;
            if (p.lse_sum) p.lse_sum[i * p.n_heads + h + k] = st.sum;
        }
        if (hb == kHeads) {
            weighted_sum_avx512<kHeads>(s.logits, s.ls, s.keys, n, d, oh, d);
        } else if (avx512) {
            weighted_sum_avx512<1>(s.logits, s.ls, s.keys, n, d, oh, d);
        } else {
            for (int64_t j = 0; j < n; ++j) {
                const float pj = s.logits[j];
                const float* kj = s.keys[j];
                for (int64_t c = 0; c < d; ++c) oh[c] += pj * kj[c];
            }
        }
        h += hb;
    }
}

} // namespace

void sparse_attention(const SparseAttentionParams& p, core::ThreadPool& pool, Workspace& ws) {
    const int64_t max_keys = std::max<int64_t>(ref::sparse_attention_max_keys(p), 1);
    const int64_t pad = (max_keys + kTile - 1) / kTile * kTile;
    const int64_t nth = pool.num_threads(), H = p.n_heads, d = p.head_dim;
    const Workspace::Mark mark = ws.mark();
    auto** keys = ws.take<const float*>(nth * pad);
    float* kt = ws.take<float>(nth * pad * d);
    float* logits = ws.take<float>(nth * kHeads * pad);
    auto scratch = [&](int64_t ti) {
        return AttnScratch{keys + ti * pad, kt + ti * pad * d, logits + ti * kHeads * pad, pad};
    };
    const bool avx512 = has_avx512();
    if (nth == 1 || p.n * H * max_keys * d < kParallelMacs) {
        for (int64_t i = 0; i < p.n; ++i) attend(p, i, 0, H, scratch(0), avx512);
    } else if (p.n >= 2 * nth) {
        // Whole queries (keys transposed once for all heads), interleaved: later queries see more keys.
        per_thread(pool, [&](int64_t ti, int64_t nt) {
            for (int64_t i = ti; i < p.n; i += nt) attend(p, i, 0, H, scratch(ti), avx512);
        });
    } else {
        // Few queries (decode): split every query's heads over the threads.
        per_thread(pool, [&](int64_t ti, int64_t nt) {
            for (int64_t i = 0; i < p.n; ++i)
                attend(p, i, H * ti / nt, H * (ti + 1) / nt, scratch(ti), avx512);
        });
    }
    ws.release(mark);
}

void allow_avx512(bool allow) {
    g_allow_avx512 = allow;
}

} // namespace deepinfer::kernels::cpu
