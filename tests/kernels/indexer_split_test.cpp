// The lightning indexer split for context parallelism (IndexerParams kScore / kSelect, docs/parallelism.md):
// each of cp ranks scores only the entries of the blocks it owns (block g of the table on rank j % cp),
// the per-rank score rows are summed in rank order as the communicator's all-reduce does, and kSelect on
// the sum must give exactly the picks of the whole indexer (kBoth), for ref/ and cpu/ (both ISAs), with
// exact ties included. Each rank's score row must hold +0 for every entry it does not own.

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "core/thread_pool.h"
#include "kernels/cpu/backend.h"
#include "kernels/ref/ops_ref.h"

namespace deepinfer::kernels {
namespace {

struct SplitCase {
    int64_t heads, dim, ratio, block_size, start_pos, n, topk, cp;
};

TEST(IndexerSplit, OwnersScoresSummedSelectTheWholePicks) {
    const SplitCase cases[] = {
        {8, 32, 4, 8, 0, 70, 3, 2},      {8, 32, 4, 16, 37, 1, 3, 2},    {4, 20, 8, 32, 100, 45, 64, 3},
        {3, 17, 4, 8, 1000, 33, 512, 4}, {2, 16, 4, 64, 600, 40, 16, 2}, {8, 32, 4, 256, 3000, 2, 64, 4},
    };
    std::mt19937 rng(23);
    for (int threads : {1, 2}) {
        for (bool avx512 : {true, false}) {
            cpu::allow_avx512(avx512);
            core::ThreadPool pool(threads);
            Workspace ws;
            for (const SplitCase& c : cases) {
                const int64_t n_total = (c.start_pos + c.n) / c.ratio, per_block = c.block_size / c.ratio;
                const int64_t blocks = (n_total + per_block - 1) / per_block + 1;
                std::vector<int32_t> table(blocks);
                std::iota(table.begin(), table.end(), 0);
                std::shuffle(table.begin(), table.end(), rng);
                std::normal_distribution<float> nd(0.0f, 1.0f);
                std::vector<float> store(blocks * per_block * c.dim), q(c.n * c.heads * c.dim),
                    w(c.n * c.heads);
                for (float& x : store) x = nd(rng);
                for (float& x : q) x = nd(rng);
                for (float& x : w) x = 0.3f * nd(rng);
                if (c.n > 2) // exact ties: an all-negative query scores 0 everywhere
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
                p.keys = {store.data(), c.dim, c.ratio, c.block_size, table.data()};
                std::vector<int32_t> whole(c.n * c.topk, -7);
                p.picks = whole.data();
                ref::indexer(p);

                for (bool use_cpu : {false, true}) {
                    std::vector<std::vector<float>> per_rank(c.cp);
                    for (int64_t r = 0; r < c.cp; ++r) {
                        std::vector<uint8_t> owned(blocks);
                        for (int64_t j = 0; j < blocks; ++j) owned[j] = j % c.cp == r ? 1 : 0;
                        per_rank[r].assign(c.n * n_total, 123.0f); // overwritten entirely
                        IndexerParams s = p;
                        s.phase = IndexerParams::Phase::kScore;
                        s.scores = per_rank[r].data();
                        s.owned_blocks = owned.data();
                        s.picks = nullptr;
                        if (use_cpu)
                            cpu::indexer(s, pool, ws);
                        else
                            ref::indexer(s);
                        for (int64_t i = 0; i < c.n; ++i)
                            for (int64_t e = 0; e < n_total; ++e) {
                                const float v = per_rank[r][i * n_total + e];
                                const bool mine = owned[e * c.ratio / c.block_size] != 0;
                                const bool visible = e < (c.start_pos + i + 1) / c.ratio;
                                if (!mine || !visible) {
                                    ASSERT_EQ(v, 0.0f) << "row " << i << " entry " << e;
                                    ASSERT_FALSE(std::signbit(v));
                                }
                            }
                    }
                    std::vector<float> sum(c.n * n_total);
                    for (size_t k = 0; k < sum.size(); ++k) { // ((x_0 + x_1) + x_2) + ...: the all-reduce
                        float acc = per_rank[0][k];
                        for (int64_t r = 1; r < c.cp; ++r) acc += per_rank[r][k];
                        sum[k] = acc;
                    }
                    std::vector<int32_t> got(c.n * c.topk, -7);
                    IndexerParams sel = p;
                    sel.phase = IndexerParams::Phase::kSelect;
                    sel.scores = sum.data();
                    sel.picks = got.data();
                    if (use_cpu)
                        cpu::indexer(sel, pool, ws);
                    else
                        ref::indexer(sel);
                    EXPECT_EQ(got, whole) << (use_cpu ? "cpu" : "ref") << " threads " << threads << " cp "
                                          << c.cp << " start " << c.start_pos << " n " << c.n;
                }
            }
        }
    }
    cpu::allow_avx512(true);
}

} // namespace
} // namespace deepinfer::kernels
