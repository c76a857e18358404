// owner_first_items (kernels/cpu/work_split.h): every item runs exactly once, on a slot no other running
// thread holds, and each share's items taken by its owner are a prefix of the share (front to back), the rest
// a suffix taken by the other threads from the back; pools of 1 to 5 threads, item counts around the pool's.

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

#include "core/thread_pool.h"
#include "kernels/cpu/work_split.h"

namespace deepinfer::kernels::cpu {
namespace {

TEST(WorkSplit, OwnerFirstRunsEveryItemOnceWithOwnersTakingPrefixes) {
    for (int threads : {1, 2, 3, 5}) {
        core::ThreadPool pool(threads);
        for (int64_t items : {0, 1, 2, 3, 7, 64, 1000}) {
            for (int round = 0; round < 20; ++round) {
                std::vector<std::atomic<int>> runs(static_cast<size_t>(items));
                std::vector<int64_t> slot_of(static_cast<size_t>(items), -1);
                std::vector<std::atomic<int>> busy(static_cast<size_t>(threads));
                std::atomic<int> bad_slot{0}, shared_slot{0}, work{0};
                owner_first_items(&pool, items, [&](int64_t k, int64_t slot) {
                    if (slot < 0 || slot >= threads) {
                        bad_slot.fetch_add(1);
                        return;
                    }
                    if (busy[slot].fetch_add(1) != 0) shared_slot.fetch_add(1);
                    runs[k].fetch_add(1);
                    slot_of[k] = slot;
                    if (k % 3 == 0) // uneven item costs, so stealing happens in some rounds
                        for (int i = 0; i < 2000; ++i) work.fetch_add(1, std::memory_order_relaxed);
                    busy[slot].fetch_sub(1);
                });
                ASSERT_EQ(bad_slot.load(), 0) << threads << " threads, " << items << " items";
                ASSERT_EQ(shared_slot.load(), 0) << "two threads ran with one slot at once";
                for (int64_t k = 0; k < items; ++k) ASSERT_EQ(runs[k].load(), 1) << "item " << k;
                for (int64_t p = 0; p < threads; ++p) {
                    const int64_t lo = p * items / threads, hi = (p + 1) * items / threads;
                    int64_t k = lo;
                    while (k < hi && slot_of[k] == p) ++k; // the owner's prefix
                    for (; k < hi; ++k)
                        ASSERT_NE(slot_of[k], p) << "share " << p << " of " << threads << " x " << items
                                                 << ": its owner took item " << k << " after another thread";
                }
            }
        }
    }
}

} // namespace
} // namespace deepinfer::kernels::cpu
