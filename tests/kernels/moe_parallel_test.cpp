// The grouped experts' element-wise parts (gather, SwiGLU, weighted scatter) on a 2-thread pool: sizes large
// enough that they really split (moe.cpp runs them serially below 2^15 elements of work), bit-identical to a
// 1-thread run and within the harness tolerance of ref::moe_experts, including a token that lists the same
// expert twice (its scatter stays serial).

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/thread_pool.h"
#include "core/weight.h"
#include "kernels/cpu/backend.h"
#include "kernels/cpu/linear.h"
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

// The expert split (decode batches: (expert, row chunk) matmuls as the pool's work items, each on one
// thread) against the row split, on FP4 experts and an FP8 shared expert in both numerics: the same bits
// for batch 1 (few experts, split into 128-row chunks), a small batch and batch 32 (the GEMV and GEMM
// paths), including a token that lists one expert twice and a skipped row; a workspace without room falls
// back to the row split with the same bits.
struct SplitWeights {
    std::vector<std::vector<uint8_t>> bytes;
    std::vector<core::Weight> w;
};

TEST(MoeParallel, ExpertSplitIsBitIdenticalToRowSplit) {
    const int64_t D = 256, I = 256, E = 8, K = 3;
    std::mt19937 rng(7);
    SplitWeights sw;
    sw.bytes.reserve(6 * (E + 1));
    sw.w.reserve(3 * (E + 1));
    auto fp4 = [&](int64_t rows, int64_t cols) {
        std::uniform_int_distribution<int> byte(0, 255), sc(118, 124);
        sw.bytes.emplace_back(rows * cols / 2);
        for (uint8_t& b : sw.bytes.back()) b = static_cast<uint8_t>(byte(rng));
        const uint8_t* data = sw.bytes.back().data();
        sw.bytes.emplace_back(rows * cols / 32);
        for (uint8_t& b : sw.bytes.back()) b = static_cast<uint8_t>(sc(rng));
        core::Weight w;
        w.format = core::WeightFormat::kFp4Group;
        w.rows = rows;
        w.cols = cols;
        w.block_rows = 1;
        w.block_cols = 32;
        w.data = data;
        w.scale = sw.bytes.back().data();
        sw.w.push_back(w);
        return &sw.w.back();
    };
    auto fp8 = [&](int64_t rows, int64_t cols) {
        std::uniform_int_distribution<int> byte(0, 255), sc(115, 125);
        sw.bytes.emplace_back(rows * cols);
        for (uint8_t& b : sw.bytes.back()) {
            b = static_cast<uint8_t>(byte(rng));
            if ((b & 0x7f) == 0x7f) b ^= 1; // no NaN codes
        }
        const uint8_t* data = sw.bytes.back().data();
        core::Weight w;
        w.format = core::WeightFormat::kFp8Block;
        w.rows = rows;
        w.cols = cols;
        w.block_rows = 128;
        w.block_cols = 128;
        sw.bytes.emplace_back(w.scale_rows() * w.scale_cols());
        for (uint8_t& b : sw.bytes.back()) b = static_cast<uint8_t>(sc(rng));
        w.data = data;
        w.scale = sw.bytes.back().data();
        sw.w.push_back(w);
        return &sw.w.back();
    };
    std::vector<ExpertRef> experts(E);
    for (int64_t e = 0; e < E; ++e) experts[e] = {fp4(I, D), fp4(D, I), fp4(I, D)};
    const ExpertRef shared{fp8(I, D), fp8(D, I), fp8(I, D)};

    core::ThreadPool pool(2);
    struct HookState {
        core::ThreadPool* pool;
        std::atomic<int64_t> one_thread_calls{0};
    } hs{&pool};
    const cpu::LinearHook hook{[](void* ctx, const MatmulArgs& a) {
                                   auto* s = static_cast<HookState*>(ctx);
                                   if (a.pool != nullptr && a.pool->num_threads() == 1) ++s->one_thread_calls;
                                   cpu::linear_on(a, a.pool != nullptr ? a.pool : s->pool);
                               },
                               &hs};
    Workspace big, none;
    big.reserve(int64_t{64} << 20);

    std::normal_distribution<float> nd(0.0f, 1.0f);
    for (Numerics num : {Numerics::kExact, Numerics::kFast}) {
        cpu::set_default_numerics(num);
        for (int64_t T : {1, 5, 32}) {
            SCOPED_TRACE(std::string(cpu::numerics_name(num)) + " T=" + std::to_string(T));
            std::vector<float> x(T * D);
            for (float& v : x) v = nd(rng);
            std::vector<int32_t> idx(T * K);
            std::vector<float> wts(T * K);
            std::vector<uint8_t> skip(T, 0);
            for (int64_t t = 0; t < T; ++t) {
                for (int64_t k = 0; k < K; ++k) {
                    idx[t * K + k] = static_cast<int32_t>((t * 5 + k * 3 + (t % 3)) % E);
                    wts[t * K + k] = 0.2f + 0.1f * static_cast<float>(k);
                }
                std::sort(idx.begin() + t * K, idx.begin() + (t + 1) * K);
            }
            if (T > 1) {
                idx[1] = idx[0]; // token 0 lists one expert twice
                skip[T - 1] = 1; // the last row skips the experts
                for (int64_t k = 0; k < K; ++k) idx[(T - 1) * K + k] = -1;
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
            p.swiglu_limit = 3.0f;
            std::vector<float> row(T * D, -1.0f), split(T * D, -2.0f), fallback(T * D, -3.0f), want(T * D);
            p.out = want.data();
            ref::moe_experts(p);
            p.out = row.data();
            hs.one_thread_calls = 0;
            cpu::moe_experts(p, hook, big, &pool, cpu::MoeSchedule::kRowSplit);
            EXPECT_EQ(hs.one_thread_calls.load(), 0);
            p.out = split.data();
            cpu::moe_experts(p, hook, big, &pool, cpu::MoeSchedule::kExpertSplit);
            EXPECT_GT(hs.one_thread_calls.load(), 0) << "the expert split did not run";
            EXPECT_EQ(row, split);
            hs.one_thread_calls = 0;
            p.out = fallback.data();
            cpu::moe_experts(p, hook, none, &pool, cpu::MoeSchedule::kExpertSplit);
            EXPECT_EQ(hs.one_thread_calls.load(), 0);
            EXPECT_EQ(row, fallback);
            double num2 = 0, den = 0;
            for (size_t i = 0; i < want.size(); ++i) {
                num2 += (split[i] - want[i]) * double(split[i] - want[i]);
                den += want[i] * double(want[i]);
            }
            EXPECT_LT(num2 / den, num == Numerics::kExact ? 1e-10 : 5e-3);
        }
    }
    cpu::set_default_numerics(Numerics::kExact);
}

} // namespace
} // namespace deepinfer::kernels
