// The V4 ops behind kernels::Backend: every threaded cpu/ version against its ref/ spec over a grid of
// shapes, positions and pool sizes (indexer picks and attention outputs must be identical: cpu/ keeps
// ref's arithmetic order per element; grouped experts within NMSE of ref's double-accumulated matmul),
// plus the Workspace arena and the op census.

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "core/thread_pool.h"
#include "kernels/backend.h"
#include "kernels/cpu/backend.h"
#include "kernels/ref/ops_ref.h"

namespace deepinfer::kernels {
namespace {

std::vector<float> randn(size_t n, std::mt19937* rng, float scale = 1.0f) {
    std::normal_distribution<float> d(0.0f, scale);
    std::vector<float> v(n);
    for (float& x : v) x = d(*rng);
    return v;
}

// A paged store of `n_entries` entries of `width`, blocks in a shuffled physical order.
struct Paged {
    std::vector<float> store;
    std::vector<int32_t> table;
    PagedEntries view;
    Paged(int64_t n_entries, int64_t width, int64_t ratio, int64_t block_size, std::mt19937* rng) {
        const int64_t per_block = block_size / ratio;
        const int64_t blocks = (n_entries + per_block - 1) / per_block + 1;
        table.resize(blocks);
        std::iota(table.begin(), table.end(), 0);
        std::shuffle(table.begin(), table.end(), *rng);
        store = randn(blocks * per_block * width, rng);
        view = {store.data(), width, ratio, block_size, table.data()};
    }
};

struct IndexerCase {
    int64_t heads, dim, ratio, block_size, start_pos, n, topk;
};

TEST(BackendOps, IndexerMatchesRefExactly) {
    const IndexerCase cases[] = {
        {8, 32, 4, 16, 0, 1, 3},     {8, 32, 4, 16, 37, 1, 3},     {8, 32, 4, 16, 0, 70, 3},
        {4, 20, 8, 32, 100, 45, 64}, {3, 17, 4, 8, 1000, 33, 512}, {64, 128, 4, 256, 5000, 3, 512},
        {2, 16, 4, 16, 60, 64, 2},
    };
    std::mt19937 rng(7);
    for (int threads : {1, 2, 3}) {
        cpu::allow_avx512(threads != 3); // the generic path on 3 threads
        core::ThreadPool pool(threads);
        Workspace ws;
        for (const IndexerCase& c : cases) {
            const int64_t n_total = (c.start_pos + c.n) / c.ratio;
            Paged keys(n_total + 1, c.dim, c.ratio, c.block_size, &rng);
            std::vector<float> q = randn(c.n * c.heads * c.dim, &rng);
            std::vector<float> w = randn(c.n * c.heads, &rng, 0.3f);
            // Exact ties: ReLU makes every score of an all-negative query 0.
            if (c.n > 2)
                for (int64_t j = 0; j < c.heads * c.dim; ++j) q[j] = -std::abs(q[j]) * 1e-3f;
            IndexerParams p;
            p.q = q.data();
            p.q_ld = c.heads * c.dim;
            p.weights = w.data();
            p.w_ld = c.heads;
            p.n = c.n;
            p.start_pos = c.start_pos;
            p.n_total = n_total;
            p.n_heads = c.heads;
            p.head_dim = c.dim;
            p.topk = c.topk;
            p.keys = keys.view;
            std::vector<int32_t> want(c.n * c.topk, -7), got(c.n * c.topk, -7);
            p.picks = want.data();
            ref::indexer(p);
            p.picks = got.data();
            cpu::indexer(p, pool, ws);
            EXPECT_EQ(got, want) << "threads " << threads << " dim " << c.dim << " start " << c.start_pos
                                 << " n " << c.n;
            for (int64_t i = 0; i < c.n; ++i) { // picks: visible, ascending, -1 padded
                const int64_t nv = (c.start_pos + i + 1) / c.ratio;
                const int32_t* row = want.data() + i * c.topk;
                int64_t k = 0;
                while (k < c.topk && row[k] >= 0) {
                    EXPECT_LT(row[k], nv);
                    if (k > 0) {
                        EXPECT_LT(row[k - 1], row[k]);
                    }
                    ++k;
                }
                EXPECT_EQ(k, std::min(c.topk, nv)) << "every visible entry is picked while there are few";
            }
        }
    }
    cpu::allow_avx512(true);
}

TEST(BackendOps, SparseAttentionMatchesRefExactly) {
    std::mt19937 rng(11);
    struct Case {
        int64_t heads, dim, window, ratio, block_size, start_pos, n, topk;
        int mode; // 0 sliding only, 1 all closed windows (HCA), 2 picks (CSA)
    };
    const Case cases[] = {
        {4, 32, 8, 4, 16, 0, 9, 3, 0},
        {4, 32, 8, 4, 16, 40, 1, 3, 1},
        {4, 32, 8, 4, 16, 20, 30, 3, 2},
        {3, 24, 128, 128, 256, 700, 5, 0, 1},
        {16, 64, 128, 4, 256, 300, 2, 64, 2},
        // Many queries: whole-query work items.
        {8, 64, 128, 8, 256, 400, 40, 0, 1},
        {8, 64, 16, 4, 64, 500, 24, 32, 2},
        // Widths past 64 channels with a tail, and V4's 512 (the weighted sum 64 channels at a time).
        {4, 100, 64, 4, 64, 200, 3, 16, 2},
        {2, 512, 128, 4, 256, 300, 3, 32, 2},
        // Head blocks of 4 (AVX-512) and a remainder: 13 heads, split 6 / 7 over two threads at decode.
        {13, 100, 32, 4, 64, 200, 1, 16, 2},
        {13, 64, 32, 4, 64, 200, 6, 16, 2},
        // V4-Flash's attention at decode (64 heads of 512, window 128, top-k 64 of ratio 4) and a short
        // chunk.
        {64, 512, 128, 4, 256, 400, 1, 64, 2},
        {64, 512, 128, 4, 256, 130, 5, 64, 2},
    };
    for (int threads : {1, 2, 3}) {
        cpu::allow_avx512(threads != 3); // the generic path on 3 threads
        core::ThreadPool pool(threads);
        Workspace ws;
        for (const Case& c : cases) {
            const int64_t last = c.start_pos + c.n;
            const int64_t blocks = last / c.block_size + 2;
            std::vector<int32_t> table(blocks);
            std::iota(table.begin(), table.end(), 0);
            std::shuffle(table.begin(), table.end(), rng);
            std::vector<float> raw = randn(blocks * c.block_size * c.dim, &rng);
            Paged comp(last / c.ratio + 1, c.dim, c.ratio, c.block_size, &rng);
            comp.table = table;
            comp.view.block_table = comp.table.data();
            std::vector<float> q = randn(c.n * c.heads * c.dim, &rng), sink = randn(c.heads, &rng);
            std::vector<int32_t> picks(c.n * std::max<int64_t>(c.topk, 1), -1);
            for (int64_t i = 0; i < c.n; ++i) {
                const int64_t nv = (c.start_pos + i + 1) / c.ratio;
                for (int64_t k = 0; k < std::min(c.topk, nv); ++k)
                    picks[i * c.topk + k] = static_cast<int32_t>(k * nv / std::max<int64_t>(c.topk, 1));
            }
            SparseAttentionParams p;
            p.q = q.data();
            p.q_ld = c.heads * c.dim;
            p.n = c.n;
            p.start_pos = c.start_pos;
            p.n_heads = c.heads;
            p.head_dim = c.dim;
            p.window = c.window;
            p.scale = 1.0f / std::sqrt(static_cast<float>(c.dim));
            p.sink = sink.data();
            p.raw = raw.data();
            p.block_size = c.block_size;
            p.block_table = table.data();
            if (c.mode > 0) p.compressed = comp.view;
            p.picks = c.mode == 2 ? picks.data() : nullptr;
            p.topk = c.topk;
            p.o_ld = c.heads * c.dim;
            std::vector<float> want(c.n * c.heads * c.dim, 9.0f), got(want.size(), -9.0f);
            p.o = want.data();
            ref::sparse_attention(p);
            p.o = got.data();
            cpu::sparse_attention(p, pool, ws);
            EXPECT_EQ(got, want) << "threads " << threads << " mode " << c.mode;
            for (float v : want) ASSERT_TRUE(std::isfinite(v));
        }
    }
    cpu::allow_avx512(true);
}

// Context-parallel partials (owned_blocks, no sink off rank 0, lse outputs): cpu equals ref bit for bit on
// every rank, and the partials merged by log-sum-exp in rank order give the whole attention (to rounding).
TEST(BackendOps, SparseAttentionPartialsMatchRefAndMergeToWhole) {
    std::mt19937 rng(12);
    struct Case {
        int64_t heads, dim, window, ratio, block_size, start_pos, n, topk;
        int mode; // 0 sliding only, 1 all closed windows (HCA), 2 picks (CSA)
    };
    const Case cases[] = {
        {4, 32, 8, 4, 16, 0, 9, 3, 0},     {4, 32, 24, 4, 16, 40, 1, 3, 1},
        {4, 32, 8, 4, 16, 20, 30, 6, 2},   {8, 64, 16, 4, 16, 200, 24, 32, 2},
        {8, 64, 32, 8, 16, 100, 40, 0, 1},
    };
    for (int threads : {1, 2}) {
        core::ThreadPool pool(threads);
        Workspace ws;
        for (const Case& c : cases) {
            const int64_t last = c.start_pos + c.n, blocks = last / c.block_size + 2, H = c.heads, d = c.dim;
            std::vector<int32_t> table(blocks);
            std::iota(table.begin(), table.end(), 0);
            std::shuffle(table.begin(), table.end(), rng);
            std::vector<float> raw = randn(blocks * c.block_size * d, &rng);
            Paged comp(last / c.ratio + 1, d, c.ratio, c.block_size, &rng);
            comp.table = table;
            comp.view.block_table = comp.table.data();
            std::vector<float> q = randn(c.n * H * d, &rng), sink = randn(H, &rng);
            std::vector<int32_t> picks(c.n * std::max<int64_t>(c.topk, 1), -1);
            for (int64_t i = 0; i < c.n; ++i) {
                const int64_t nv = (c.start_pos + i + 1) / c.ratio;
                for (int64_t k = 0; k < std::min(c.topk, nv); ++k)
                    picks[i * c.topk + k] = static_cast<int32_t>(k * nv / std::max<int64_t>(c.topk, 1));
            }
            SparseAttentionParams p;
            p.q = q.data();
            p.q_ld = H * d;
            p.n = c.n;
            p.start_pos = c.start_pos;
            p.n_heads = H;
            p.head_dim = d;
            p.window = c.window;
            p.scale = 1.0f / std::sqrt(static_cast<float>(d));
            p.sink = sink.data();
            p.raw = raw.data();
            p.block_size = c.block_size;
            p.block_table = table.data();
            if (c.mode > 0) p.compressed = comp.view;
            p.picks = c.mode == 2 ? picks.data() : nullptr;
            p.topk = c.topk;
            p.o_ld = H * d;
            std::vector<float> whole(c.n * H * d);
            p.o = whole.data();
            ref::sparse_attention(p);
            for (int cp : {2, 3}) {
                std::vector<std::vector<float>> o(cp), mx(cp), sum(cp);
                for (int r = 0; r < cp; ++r) {
                    std::vector<uint8_t> owned(blocks);
                    for (int64_t j = 0; j < blocks; ++j) owned[j] = j % cp == r;
                    SparseAttentionParams pr = p;
                    pr.owned_blocks = owned.data();
                    pr.sink = r == 0 ? sink.data() : nullptr;
                    std::vector<float> o_ref(c.n * H * d, 7.0f), m_ref(c.n * H, 7.0f), l_ref(c.n * H, 7.0f);
                    o[r].assign(o_ref.size(), -7.0f);
                    mx[r].assign(m_ref.size(), -7.0f);
                    sum[r].assign(l_ref.size(), -7.0f);
                    pr.o = o_ref.data();
                    pr.lse_max = m_ref.data();
                    pr.lse_sum = l_ref.data();
                    ref::sparse_attention(pr);
                    pr.o = o[r].data();
                    pr.lse_max = mx[r].data();
                    pr.lse_sum = sum[r].data();
                    cpu::sparse_attention(pr, pool, ws);
                    EXPECT_EQ(o[r], o_ref) << "cp " << cp << " rank " << r << " mode " << c.mode;
                    EXPECT_EQ(mx[r], m_ref);
                    EXPECT_EQ(sum[r], l_ref);
                }
                double max_err = 0;
                bool some_empty = false;
                for (int64_t t = 0; t < c.n * H; ++t) {
                    float M = -std::numeric_limits<float>::infinity();
                    for (int r = 0; r < cp; ++r) M = std::max(M, mx[r][t]);
                    float L = 0;
                    std::vector<float> w(cp);
                    for (int r = 0; r < cp; ++r) {
                        some_empty |= sum[r][t] == 0.0f;
                        w[r] = sum[r][t] == 0.0f ? 0.0f : std::exp(mx[r][t] - M) * sum[r][t];
                        L += w[r];
                    }
                    for (int64_t k = 0; k < d; ++k) {
                        float v = 0;
                        for (int r = 0; r < cp; ++r) v += w[r] / L * o[r][t * d + k];
                        max_err = std::max(max_err, static_cast<double>(std::fabs(v - whole[t * d + k])));
                    }
                }
                EXPECT_LT(max_err, 1e-5) << "cp " << cp << " mode " << c.mode;
                if (c.start_pos == 0) {
                    EXPECT_TRUE(some_empty) << "rank 1 owns no key of the first block";
                }
            }
        }
    }
}

// F32 weight [rows, cols] backed by `store`.
core::Weight f32_weight(std::vector<float>& store, int64_t rows, int64_t cols) {
    core::Weight w;
    w.format = core::WeightFormat::kF32;
    w.data = store.data();
    w.rows = rows;
    w.cols = cols;
    return w;
}

TEST(BackendOps, GroupedExpertsMatchRefAndTouchOnlySelectedExperts) {
    std::mt19937 rng(5);
    const int64_t D = 48, I = 24, E = 6, K = 2;
    std::vector<std::vector<float>> stores;
    std::vector<core::Weight> ws_;
    stores.reserve(3 * (E + 1));
    ws_.reserve(3 * (E + 1));
    std::vector<ExpertRef> experts(E);
    auto make = [&](int64_t rows, int64_t cols, bool valid) {
        stores.push_back(valid ? randn(rows * cols, &rng, 0.2f) : std::vector<float>());
        ws_.push_back(f32_weight(stores.back(), rows, cols));
        if (!valid) ws_.back().data = nullptr; // touching it would crash
        return &ws_.back();
    };
    const int64_t unused = 3; // no row selects expert 3: its weights must never be read
    for (int64_t e = 0; e < E; ++e)
        experts[e] = {make(I, D, e != unused), make(D, I, e != unused), make(I, D, e != unused)};
    ExpertRef shared{make(2 * I, D, true), make(D, 2 * I, true), make(2 * I, D, true)};
    for (int threads : {1, 2}) {
        core::ThreadPool pool(threads);
        cpu::CpuBackend be(&pool);
        for (int64_t T : {1, 5, 33}) {
            std::vector<float> x = randn(T * D, &rng);
            std::vector<int32_t> idx(T * K);
            std::vector<float> wts(T * K);
            std::vector<uint8_t> skip(T, 0);
            for (int64_t t = 0; t < T; ++t) {
                idx[t * K] = static_cast<int32_t>(t % 3);           // 0, 1, 2
                idx[t * K + 1] = static_cast<int32_t>(4 + (t % 2)); // 4, 5
                wts[t * K] = 0.7f;
                wts[t * K + 1] = 0.4f;
            }
            if (T > 1) {
                skip[T - 1] = 1;
                std::fill_n(idx.data() + (T - 1) * K, K, -1);
            }
            MoeExpertsParams p;
            p.x = x.data();
            p.T = T;
            p.D = D;
            p.E = E;
            p.K = K;
            p.idx = idx.data();
            p.weights = wts.data();
            p.skip = skip.data();
            p.experts = experts.data();
            p.shared = &shared;
            p.swiglu_limit = 0.5f;
            std::vector<float> want(T * D, 3.0f), got(T * D, -3.0f);
            p.out = want.data();
            ref::moe_experts(p);
            p.out = got.data();
            be.moe_experts(p);
            double num = 0, den = 0;
            for (size_t i = 0; i < want.size(); ++i) {
                num += (got[i] - want[i]) * double(got[i] - want[i]);
                den += want[i] * double(want[i]);
            }
            EXPECT_LT(num / den, 1e-10) << "T " << T;
            if (T > 1) {
                for (int64_t j = 0; j < D; ++j) EXPECT_EQ(got[(T - 1) * D + j], 0.0f) << "skipped row";
            }
        }
    }
}

// mHC post through the CPU backend (its AVX-512 version where the CPU has it, the reference elsewhere) is
// the reference bit for bit: same operations in the same order per element, no fused multiply-add; odd
// widths take the column tail, several tokens the token split over the pool.
// The AVX-512 SwiGLU is swiglu bit for bit (silu through exp_ref on 16 lanes): a dense sweep of the gate
// (the exp polynomial's whole range and both clamps), infinities / NaN / zeros / huge values at the edges,
// and every tail length of the 16-lane loop. A NaN matches any NaN (which NaN a product of two returns
// depends on the operand order the compiler picked for the scalar one).
TEST(BackendOps, SwigluAvx512MatchesRefExactly) {
    if (!__builtin_cpu_supports("avx512f")) GTEST_SKIP() << "no AVX-512";
    std::mt19937 rng(5);
    std::normal_distribution<float> nd(0.0f, 2.0f);
    for (float limit : {0.0f, 7.0f}) {
        std::vector<float> g, u;
        for (float x = -110.0f; x <= 110.0f; x += 0.00731f) {
            g.push_back(x);
            u.push_back(nd(rng));
        }
        const float inf = std::numeric_limits<float>::infinity(),
                    nan = std::numeric_limits<float>::quiet_NaN();
        for (float x : {0.0f, -0.0f, inf, -inf, nan, 1e30f, -1e30f, 88.7f, -88.7f, 89.5f, -89.5f, 104.5f,
                        -104.5f, 1e-30f, -1e-30f, 1e-42f}) {
            for (float y : {1.0f, -3.0f, 0.0f, inf, nan, 1e-20f}) {
                g.push_back(x);
                u.push_back(y);
            }
        }
        for (int64_t n :
             {int64_t{1}, int64_t{15}, int64_t{16}, int64_t{17}, static_cast<int64_t>(g.size())}) {
            std::vector<float> want(g.begin(), g.begin() + n), got = want;
            cpu::swiglu(want.data(), u.data(), n, limit);
            cpu::swiglu_avx512(got.data(), u.data(), n, limit);
            int64_t bad = 0;
            for (int64_t i = 0; i < n; ++i)
                if (std::memcmp(&got[i], &want[i], 4) != 0 && !(std::isnan(got[i]) && std::isnan(want[i])) &&
                    bad++ < 5)
                    ADD_FAILURE() << "n " << n << " g " << g[i] << " u " << u[i] << " limit " << limit << ": "
                                  << got[i] << " vs " << want[i];
            EXPECT_EQ(bad, 0) << "n=" << n;
        }
    }
}

// rms_norm_avx512 is ref::rms_norm bit for bit: widths with every tail length, the real ones (the mHC
// norm's 16384 plus a tail), with and without a weight, values over many magnitudes (the double sums'
// rounding shows where the lanes or the fold order differ).
TEST(BackendOps, RmsNormAvx512MatchesRefExactly) {
    if (!__builtin_cpu_supports("avx512f")) GTEST_SKIP() << "no AVX-512";
    std::mt19937 rng(29);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::uniform_int_distribution<int> ex(-30, 30);
    for (int64_t d : {1, 7, 15, 16, 17, 31, 33, 512, 1024, 4096, 4101, 16384, 16389}) {
        const int64_t n = 3;
        std::vector<float> x(n * d), w(d);
        for (float& v : x) v = std::ldexp(nd(rng), ex(rng));
        for (float& v : w) v = nd(rng);
        for (const float* weight :
             {static_cast<const float*>(nullptr), static_cast<const float*>(w.data())}) {
            std::vector<float> want(n * d, -1.0f), got(n * d, -2.0f);
            ref::rms_norm(x.data(), weight, n, d, 1e-6f, want.data());
            cpu::rms_norm_avx512(x.data(), weight, n, d, 1e-6f, got.data());
            EXPECT_EQ(std::memcmp(want.data(), got.data(), want.size() * sizeof(float)), 0)
                << "d " << d << (weight ? " weighted" : "");
        }
    }
}

// exp16 (cpu/exp_avx512.h) is exp_ref bit for bit: every 97th float bit pattern (both signs: NaNs,
// infinities, denormals, the overflow and underflow edges) and every tail length.
TEST(BackendOps, ExpAvx512MatchesExpRefExactly) {
    if (!__builtin_cpu_supports("avx512f")) GTEST_SKIP() << "no AVX-512";
    std::vector<float> x;
    for (uint64_t b = 0; b <= 0xffffffffull; b += 97) {
        const uint32_t bits = static_cast<uint32_t>(b);
        float f;
        std::memcpy(&f, &bits, 4);
        x.push_back(f);
    }
    for (float f : {88.7f, 88.72283f, 88.73f, 89.0f, -87.33655f, -103.97f, -104.0f, -104.1f, 0.0f, -0.0f})
        x.push_back(f);
    std::vector<float> got(x.size());
    cpu::exp_ref_avx512(x.data(), static_cast<int64_t>(x.size()), got.data());
    int64_t bad = 0;
    for (size_t i = 0; i < x.size(); ++i) {
        const float want = exp_ref(x[i]);
        if (std::memcmp(&got[i], &want, 4) != 0 && bad++ < 5)
            ADD_FAILURE() << "x " << x[i] << ": " << got[i] << " vs exp_ref " << want;
    }
    EXPECT_EQ(bad, 0);
    for (int64_t n = 1; n <= 17; ++n) {
        std::vector<float> y(n, -1.0f);
        cpu::exp_ref_avx512(x.data() + 1000, n, y.data());
        for (int64_t i = 0; i < n; ++i) EXPECT_EQ(std::memcmp(&y[i], &got[1000 + i], 4), 0) << n;
    }
}

// Greedy decoding's pick: the lowest index of the largest non-NaN entry (0 when all are NaN), by hand, then
// argmax_avx512 against it on random rows with planted ties, NaNs, infinities and every tail length.
TEST(BackendOps, ArgmaxLowestIndexOfLargestNonNan) {
    const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
    struct Case {
        std::vector<float> x;
        int32_t want;
    };
    const std::vector<Case> cases = {
        {{1.0f}, 0},
        {{1.0f, 3.0f, 2.0f, 3.0f}, 1},
        {{nan, 1.0f, 2.0f}, 2},
        {{nan, nan}, 0},
        {{-inf, -inf, -inf}, 0},
        {{nan, -inf, nan}, 1},
        {{1.0f, inf, nan, inf}, 1},
        {{-0.0f, 0.0f}, 0},
        {{-5.0f, nan, -1.0f, -1.0f}, 2},
    };
    for (const Case& c : cases) {
        const auto n = static_cast<int64_t>(c.x.size());
        EXPECT_EQ(ref::argmax(c.x.data(), n), c.want) << n;
        EXPECT_EQ(kernels::argmax(c.x.data(), n), c.want) << n;
        if (__builtin_cpu_supports("avx512f")) {
            EXPECT_EQ(cpu::argmax_avx512(c.x.data(), n), c.want) << n;
        }
    }
    if (!__builtin_cpu_supports("avx512f")) GTEST_SKIP() << "no AVX-512";
    std::mt19937 rng(5);
    std::normal_distribution<float> g(0.0f, 3.0f);
    for (int64_t n : {1, 2, 15, 16, 17, 63, 64, 65, 100, 129, 1000, 129280}) {
        for (int trial = 0; trial < 8; ++trial) {
            std::vector<float> x(n);
            for (float& v : x) v = g(rng);
            std::uniform_int_distribution<int64_t> pos(0, n - 1);
            if (trial % 2 == 1) { // a tie for the maximum, the later copy first planted
                const int64_t a = pos(rng), b = pos(rng);
                x[a] = x[b] = 100.0f + static_cast<float>(trial);
            }
            if (trial >= 4)
                for (int k = 0; k < 3; ++k) x[pos(rng)] = nan;
            if (trial == 6) x[pos(rng)] = inf;
            if (trial == 7)
                for (float& v : x) v = std::isnan(v) ? v : -inf;
            const int32_t want = ref::argmax(x.data(), n);
            EXPECT_EQ(cpu::argmax_avx512(x.data(), n), want) << "n " << n << " trial " << trial;
            EXPECT_FALSE(std::isnan(x[want]) && n > 3 && trial < 7) << n;
        }
    }
}

TEST(BackendOps, HcPostMatchesRefExactly) {
    std::mt19937 rng(21);
    struct Case {
        int64_t T, hc, D;
    };
    const Case cases[] = {{1, 4, 1024}, {3, 4, 4096}, {2, 1, 16}, {5, 7, 37}, {1, 4, 100}, {70, 4, 64}};
    for (const Case& c : cases) {
        const std::vector<float> post = randn(c.T * c.hc, &rng), comb = randn(c.T * c.hc * c.hc, &rng),
                                 y = randn(c.T * c.D, &rng), h0 = randn(c.T * c.hc * c.D, &rng);
        std::vector<float> want = h0;
        ref::hc_post({post.data(), comb.data(), y.data(), c.T, c.hc, c.D, want.data()});
        for (int threads : {1, 2}) {
            core::ThreadPool pool(threads);
            cpu::CpuBackend be(&pool);
            std::vector<float> got = h0;
            be.hc_post({post.data(), comb.data(), y.data(), c.T, c.hc, c.D, got.data()});
            EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0)
                << "T=" << c.T << " hc=" << c.hc << " D=" << c.D << " threads=" << threads;
        }
    }
}

// RMSNorm through the CPU backend (split over the pool, in place or not) is the reference bit for bit:
// row counts around the pool split, widths around the 16 partial sums, with and without a weight.
TEST(BackendOps, RmsNormMatchesRefExactly) {
    std::mt19937 rng(22);
    for (int64_t n : {1, 3, 4, 5, 9, 130}) {
        for (int64_t d : {7, 1024, 16384}) {
            const std::vector<float> x = randn(n * d, &rng, 3.0f), w = randn(d, &rng);
            for (bool weighted : {false, true}) {
                const float* wp = weighted ? w.data() : nullptr;
                std::vector<float> want(n * d);
                ref::rms_norm(x.data(), wp, n, d, 1e-6f, want.data());
                for (int threads : {1, 2}) {
                    core::ThreadPool pool(threads);
                    cpu::CpuBackend be(&pool);
                    std::vector<float> got(n * d), inplace = x;
                    be.rms_norm({x.data(), wp, n, d, 1e-6f, got.data()});
                    be.rms_norm({inplace.data(), wp, n, d, 1e-6f, inplace.data()});
                    EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0)
                        << "n=" << n << " d=" << d << " weighted=" << weighted << " threads=" << threads;
                    EXPECT_EQ(std::memcmp(inplace.data(), want.data(), got.size() * sizeof(float)), 0)
                        << "in place, n=" << n << " d=" << d;
                }
            }
        }
    }
}

TEST(BackendOps, WorkspaceIsAlignedScopedAndFoldsGrowth) {
    Workspace ws;
    ws.reserve(1024);
    float* a = ws.take<float>(3);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % 64, 0u);
    const Workspace::Mark m = ws.mark();
    float* b = ws.take<float>(10);
    ws.release(m);
    EXPECT_EQ(ws.take<float>(10), b) << "release() hands the same storage back";
    EXPECT_EQ(ws.growths(), 0);
    float* big = ws.take<float>(1000); // past the plan: a chained chunk
    big[999] = 1.0f;
    EXPECT_EQ(ws.growths(), 1);
    EXPECT_EQ(a[0] = 2.0f, 2.0f); // earlier buffers stay valid
    ws.reset();
    EXPECT_GE(ws.capacity(), ws.high_water()) << "reset folds the chunks into one of the high-water size";
    ws.take<float>(3);
    ws.take<float>(10);
    ws.take<float>(1000);
    EXPECT_EQ(ws.growths(), 1) << "the same step fits after the fold";
}

TEST(BackendOps, ProfilerCountsEveryOpThroughTheBackend) {
    std::mt19937 rng(3);
    cpu::CpuBackend be(nullptr);
    std::vector<float> wv = randn(16 * 32, &rng), x = randn(4 * 32, &rng), y(4 * 16);
    core::Weight w = f32_weight(wv, 16, 32);
    be.linear(linear_args(x.data(), 4, w, y.data())); // not counted: profiler off
    be.profiler().set_enabled(true);
    be.linear(linear_args(x.data(), 4, w, y.data()));
    be.linear(linear_args(x.data(), 4, w, y.data()), OpKind::kLmHead);
    be.rms_norm({x.data(), nullptr, 4, 32, 1e-6f, x.data()});
    const ProfileSnapshot& s = be.profiler().snapshot();
    const OpStats& lin = s.ops[static_cast<size_t>(OpKind::kLinear)];
    EXPECT_EQ(lin.calls, 1);
    EXPECT_EQ(s.ops[static_cast<size_t>(OpKind::kLmHead)].calls, 1);
    EXPECT_EQ(s.ops[static_cast<size_t>(OpKind::kRmsNorm)].calls, 1);
    EXPECT_EQ(s.ops[static_cast<size_t>(OpKind::kRope)].calls, 0);
    EXPECT_DOUBLE_EQ(lin.flops, 2.0 * 4 * 16 * 32);
    EXPECT_DOUBLE_EQ(lin.bytes, 16.0 * 32 * 4 + 4.0 * 4 * (32 + 16)); // weights + activations
    EXPECT_EQ(s.total().calls, 3);
    be.profiler().clear();
    EXPECT_EQ(be.profiler().snapshot().total().calls, 0);
}

// The weight-matmul line: linear + moe_experts + lm_head flops over their time, against both peaks; other
// ops (here rms_norm, with flops of its own) stay out of it.
TEST(BackendOps, ProfileSumsTheWeightMatmulsAgainstBothPeaks) {
    ProfileSnapshot s;
    s.steps = 1;
    s.step_seconds = 4.0;
    auto set = [&](OpKind k, double seconds, double flops) {
        s.ops[static_cast<size_t>(k)] = OpStats{1, seconds, 0.0, flops};
    };
    set(OpKind::kLinear, 1.0, 100e9);
    set(OpKind::kMoeExperts, 0.5, 50e9);
    set(OpKind::kLmHead, 0.5, 10e9);
    set(OpKind::kRmsNorm, 1.0, 1000e9);
    char* text = nullptr;
    size_t len = 0;
    std::FILE* out = open_memstream(&text, &len);
    ASSERT_NE(out, nullptr);
    print_profile(out, s, Roofline{10.0, 200.0, 800.0}, "t");
    std::fclose(out);
    const std::string printed(text, len);
    std::free(text);
    // 160 GFLOP in 2 s = 80 GFLOP/s: 40% of 200, 10% of 800; 2 s of a 4 s forward.
    EXPECT_NE(
        printed.find("weight matmuls (linear + moe_experts + lm_head): 2000.000 ms, 50.0% of the forward, "
                     "80.00 GFLOP/s = 40.0% of FP32 FMA, 10.0% of int8 VNNI"),
        std::string::npos)
        << printed;
}

TEST(BackendOps, ProfilerSnapshotsAreSafeWhileOpsRecord) {
    cpu::CpuBackend be(nullptr);
    be.profiler().set_enabled(true);
    std::vector<float> x(64, 1.0f);
    std::atomic<bool> done{false};
    int64_t last = 0;
    bool monotonic = true;
    std::thread reader([&] { // a metrics exporter polling from another thread
        while (!done) {
            const int64_t c = be.profiler().snapshot().ops[static_cast<size_t>(OpKind::kRmsNorm)].calls;
            monotonic = monotonic && c >= last;
            last = c;
        }
    });
    for (int i = 0; i < 2000; ++i) be.rms_norm({x.data(), nullptr, 1, 64, 1e-6f, x.data()});
    done = true;
    reader.join();
    EXPECT_TRUE(monotonic);
    EXPECT_EQ(be.profiler().snapshot().ops[static_cast<size_t>(OpKind::kRmsNorm)].calls, 2000);
}

} // namespace
} // namespace deepinfer::kernels
