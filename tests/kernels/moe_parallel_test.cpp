// The grouped experts' element-wise parts (gather, SwiGLU, weighted scatter) on a 2-thread pool: sizes large
// enough that they really split (moe.cpp runs them serially below 2^15 elements of work), bit-identical to a
// 1-thread run and within the harness tolerance of ref::moe_experts, including a token that lists the same
// expert twice (its scatter stays serial).

#include <cstdint>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "core/thread_pool.h"
#include "core/weight.h"
#include "kernels/cpu/backend.h"
#include "kernels/ref/ops_ref.h"

namespace deepinfer::kernels {
namespace {

TEST(MoeParallel, PoolSplitIsBitIdenticalAndMatchesRef) {
    const int64_t D = 512, I = 128, E = 4, K = 2, T = 96;
    std::mt19937 rng(31);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<std::vector<float>> stores;
    std::vector<core::Weight> ws;
    stores.reserve(3 * (E + 1));
    ws.reserve(3 * (E + 1));
    auto make = [&](int64_t rows, int64_t cols) {
        stores.emplace_back(rows * cols);
        for (float& v : stores.back()) v = 0.05f * nd(rng);
        core::Weight w;
        w.format = core::WeightFormat::kF32;
        w.rows = rows;
        w.cols = cols;
        w.data = stores.back().data();
        ws.push_back(w);
        return &ws.back();
    };
    std::vector<ExpertRef> experts(E);
    for (int64_t e = 0; e < E; ++e) experts[e] = {make(I, D), make(D, I), make(I, D)};
    const ExpertRef shared{make(2 * I, D), make(D, 2 * I), make(2 * I, D)};
    std::vector<float> x(T * D);
    for (float& v : x) v = nd(rng);
    std::vector<int32_t> idx(T * K);
    std::vector<float> wts(T * K);
    for (int64_t t = 0; t < T; ++t) {
        idx[t * K] = static_cast<int32_t>(t % E);
        idx[t * K + 1] = static_cast<int32_t>((t / 3) % E);
        wts[t * K] = 0.6f;
        wts[t * K + 1] = 0.3f;
    }
    // Token 0 lists expert 0 twice ((0 / 3) % 4 == 0 as well): rows[] repeats it.
    ASSERT_EQ(idx[0], idx[1]);
    MoeExpertsParams p;
    p.x = x.data();
    p.T = T;
    p.D = D;
    p.E = E;
    p.K = K;
    p.idx = idx.data();
    p.weights = wts.data();
    p.experts = experts.data();
    p.shared = &shared;
    p.swiglu_limit = 2.0f;
    std::vector<float> want(T * D), one(T * D, -1.0f), two(T * D, -2.0f);
    p.out = want.data();
    ref::moe_experts(p);
    for (int threads : {1, 2}) {
        core::ThreadPool pool(threads);
        cpu::CpuBackend be(&pool);
        p.out = threads == 1 ? one.data() : two.data();
        be.moe_experts(p);
    }
    EXPECT_EQ(one, two);
    double num = 0, den = 0;
    for (size_t i = 0; i < want.size(); ++i) {
        num += (two[i] - want[i]) * double(two[i] - want[i]);
        den += want[i] * double(want[i]);
    }
    EXPECT_LT(num / den, 1e-10);
}

} // namespace
} // namespace deepinfer::kernels
