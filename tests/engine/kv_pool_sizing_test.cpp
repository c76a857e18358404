// Sizing the KV pool from a memory budget (engine/admission.h kv_blocks_for_memory over
// model::kv_pool_bytes), one process and context parallel: under CP a rank stores the split part of a block
// only for the blocks it owns (block g on rank g % cp) plus one trash block, so the same per-rank budget
// holds about cp times more blocks, and a sequence about cp times longer is admitted.

#include <gtest/gtest.h>

#include "engine/admission.h"
#include "model/forward_batch.h"

using namespace deepinfer;
using namespace deepinfer::engine;

namespace {

model::KvGeometry geometry(int64_t per_block, int64_t split, int64_t per_slot, int64_t cp) {
    model::KvGeometry g;
    g.block_size = 16;
    g.bytes_per_block = per_block;
    g.bytes_per_slot = per_slot;
    g.split_bytes_per_block = cp > 1 ? split : 0;
    g.cp_size = cp;
    return g;
}

// One process: the closed form the engine used before CP, (budget - slots) / block - 1 (one scratch block
// and one scratch slot).
TEST(KvPoolSizing, OneProcessIsTheClosedForm) {
    const model::KvGeometry g = geometry(1000, 0, 64, 1);
    for (int64_t budget :
         {int64_t{0}, int64_t{1000}, int64_t{2000 + 5 * 64}, int64_t{123457}, int64_t{1} << 30}) {
        const int64_t slots = 4;
        const int64_t closed = std::max<int64_t>(0, (budget - (slots + 1) * 64) / 1000 - 1);
        EXPECT_EQ(kv_blocks_for_memory(g, budget, slots), closed) << budget;
    }
}

// CP: rank 0 stores ceil((N + 1) / cp) + 1 blocks of the split part and N + 1 of the rest. Worked by hand:
// 100 bytes a block of which 90 split, cp 2, 1 slot of 10 bytes (+ scratch: 20), budget 1000:
//   N = 15: 16 * 10 + (8 + 1) * 90 + 20 = 990 <= 1000;  N = 16: 17 * 10 + (9 + 1) * 90 + 20 = 1090.
TEST(KvPoolSizing, ContextParallelRankHoldsItsShare) {
    const model::KvGeometry g = geometry(100, 90, 10, 2);
    EXPECT_EQ(model::kv_pool_bytes(g, 15, 1), 990);
    EXPECT_EQ(model::kv_pool_bytes(g, 16, 1), 1090);
    EXPECT_EQ(kv_blocks_for_memory(g, 1000, 1), 15);
    // One process with the same budget: (1000 - 20) / 100 - 1 = 8 blocks.
    EXPECT_EQ(kv_blocks_for_memory(geometry(100, 0, 10, 1), 1000, 1), 8);
    // The largest count that fits, at every budget and degree.
    for (int64_t cp : {2, 3, 4, 8})
        for (int64_t budget = 0; budget < 5000; budget += 37) {
            const model::KvGeometry gc = geometry(100, 90, 10, cp);
            const int64_t n = kv_blocks_for_memory(gc, budget, 1);
            if (n > 0) {
                EXPECT_LE(model::kv_pool_bytes(gc, n, 1), budget);
            }
            EXPECT_GT(model::kv_pool_bytes(gc, n + 1, 1), budget) << "cp " << cp << " budget " << budget;
        }
}

// The admission arithmetic counts global blocks: with a budget sized for one process's longest sequence,
// a sequence cp times longer is refused by one process and admitted under CP (the split part dominates
// real blocks: window rows and compressed entries; the snapshots are a few percent at 256 positions).
TEST(KvPoolSizing, ContextParallelAdmitsASequenceCpTimesLonger) {
    const int64_t per_block = 4096, split = 4000, per_slot = 512, slots = 2, bs = 16;
    const int64_t one_blocks = 100;
    const int64_t budget = model::kv_pool_bytes(geometry(per_block, 0, per_slot, 1), one_blocks, slots);
    ASSERT_EQ(kv_blocks_for_memory(geometry(per_block, 0, per_slot, 1), budget, slots), one_blocks);
    for (int64_t cp : {2, 4}) {
        const int64_t n = kv_blocks_for_memory(geometry(per_block, split, per_slot, cp), budget, slots);
        const int64_t prompt = cp * one_blocks * bs * 9 / 10; // cp times 90% of one process's pool
        EXPECT_FALSE(check_fits_in_empty_pool(prompt, 1, one_blocks, bs).ok());
        EXPECT_TRUE(check_fits_in_empty_pool(prompt, 1, n, bs).ok()) << "cp " << cp << ": " << n << " blocks";
    }
}

} // namespace
