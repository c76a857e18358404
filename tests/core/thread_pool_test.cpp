#include <atomic>
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
