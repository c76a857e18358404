#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "core/thread_pool.h"

using deepinfer::core::ThreadPool;

TEST(ThreadPool, CoversEveryIndexExactlyOnce) {
    for (int threads : {1, 2, 3, 8}) {
        ThreadPool pool(threads);
        for (int64_t n : {0, 1, 2, 7, 1000}) {
            std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
            for (int rep = 0; rep < 3; ++rep) {
                pool.parallel_for(n, [&](int64_t b, int64_t e) {
                    for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)]++;
                });
            }
            for (int64_t i = 0; i < n; ++i)
                EXPECT_EQ(hits[static_cast<size_t>(i)].load(), 3) << threads << " " << i;
        }
    }
}

// The hand-off has a spinning fast path and a sleeping slow path (spin 0: every loop wakes the worker
// through the condition variable; a long spin: the worker never sleeps between loops; a short one mixes
// both, with pauses longer than the spin so the workers do fall asleep). Each must run every chunk of
// every loop exactly once and return only after all of them.
TEST(ThreadPool, SpinAndSleepHandOffsRunEveryLoopCompletely) {
    for (int spin_us : {0, 5, 50000}) {
        for (int threads : {2, 3}) {
            ThreadPool pool(threads);
            pool.set_spin_us(spin_us);
            EXPECT_EQ(pool.spin_us(), spin_us);
            int64_t expected = 0;
            for (int rep = 0; rep < 600; ++rep) {
                const int64_t n = threads + rep % 5;
                std::atomic<int64_t> total{0};
                pool.parallel_for(n, [&](int64_t b, int64_t e) {
                    for (int64_t i = b; i < e; ++i) total.fetch_add(i + rep, std::memory_order_relaxed);
                });
                // Every chunk finished before parallel_for returned.
                ASSERT_EQ(total.load(), n * (n - 1) / 2 + n * rep) << spin_us << " " << threads << " " << rep;
                expected += total.load();
                if (rep % 200 == 199) std::this_thread::sleep_for(std::chrono::milliseconds(2));
            }
            EXPECT_GT(expected, 0);
        }
    }
}

TEST(ThreadPool, NegativeSpinMeansSleepAtOnce) {
    ThreadPool pool(2);
    pool.set_spin_us(-3);
    EXPECT_EQ(pool.spin_us(), 0);
}

// run_on_each_thread runs its function once on every distinct thread (the caller and each worker), whether
// the workers are spinning, asleep, or were just woken; parallel_for alone gives no such guarantee (the
// caller may claim every chunk). Pool ids are distinct.
TEST(ThreadPool, RunOnEachThreadReachesEveryThreadOnce) {
    for (int spin_us : {0, 100}) {
        for (int threads : {1, 2, 4}) {
            ThreadPool pool(threads);
            pool.set_spin_us(spin_us);
            for (int rep = 0; rep < 50; ++rep) {
                std::mutex mu;
                std::vector<std::thread::id> seen;
                pool.run_on_each_thread([&] {
                    std::lock_guard<std::mutex> lock(mu);
                    seen.push_back(std::this_thread::get_id());
                });
                ASSERT_EQ(static_cast<int>(seen.size()), threads) << spin_us << " " << rep;
                std::sort(seen.begin(), seen.end());
                EXPECT_EQ(std::unique(seen.begin(), seen.end()), seen.end()) << "a thread ran it twice";
                EXPECT_NE(std::find(seen.begin(), seen.end(), std::this_thread::get_id()), seen.end())
                    << "the caller is one of the threads";
                if (rep % 10 == 9) std::this_thread::sleep_for(std::chrono::milliseconds(1));
            }
        }
    }
    ThreadPool a(2), b(2);
    EXPECT_NE(a.id(), b.id());
}

// The spin budget's rule: a caught wait doubles it; a missed wait that a full spin would have caught (the
// event came within spin_us, the spinner was not preempted) restores spin_us, so the 20-60 us gaps of a
// decode step cannot pin it at the floor (before, every miss quartered it and ~55% of a bench-small decode
// step's loops found the worker asleep); any other miss quarters it, never below kMinSpinUs nor above
// spin_us; spin_us 0 is the sleeping pool.
TEST(ThreadPool, SpinBudgetAdaptsToTheGapsItCouldCatch) {
    constexpr int kMin = ThreadPool::kMinSpinUs;
    EXPECT_EQ(ThreadPool::adapted_spin_us(8, true, false, 100), 16);
    EXPECT_EQ(ThreadPool::adapted_spin_us(80, true, false, 100), 100);
    EXPECT_EQ(ThreadPool::adapted_spin_us(kMin, false, true, 100), 100);
    EXPECT_EQ(ThreadPool::adapted_spin_us(100, false, false, 100), 25);
    EXPECT_EQ(ThreadPool::adapted_spin_us(4, false, false, 100), kMin);
    EXPECT_EQ(ThreadPool::adapted_spin_us(100, true, true, 0), 0);
    EXPECT_EQ(ThreadPool::adapted_spin_us(100, false, true, 0), 0);
    EXPECT_EQ(ThreadPool::adapted_spin_us(1, true, false, 1), 1);
    // A sequence of misses the full spin would not have caught walks the budget down to the floor; one it
    // would have caught brings it straight back.
    int b = 100;
    for (int i = 0; i < 10; ++i) b = ThreadPool::adapted_spin_us(b, false, false, 100);
    EXPECT_EQ(b, kMin);
    EXPECT_EQ(ThreadPool::adapted_spin_us(b, false, true, 100), 100);
}
