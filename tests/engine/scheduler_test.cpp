// The scheduling pieces on their own: block manager (refcounts, LRU, hashes, slots), admission
// arithmetic, step packing, and the scheduler's policy (decodes first, chunking, caps, preemption order,
// prefix hits) without a model.

#include <gtest/gtest.h>

#include <memory>

#include "engine/admission.h"
#include "engine/block_manager.h"
#include "engine/request_state.h"
#include "engine/scheduler.h"
#include "engine/step_budget.h"

using namespace deepinfer;
using namespace deepinfer::engine;

namespace {

struct Seqs {
    RequestState req;
    std::vector<std::unique_ptr<Sequence>> all;
    Sequence* make(int32_t prompt_len, int32_t first_token = 1) {
        auto s = std::make_unique<Sequence>();
        s->seq_id = static_cast<int64_t>(all.size());
        s->request = &req;
        for (int32_t i = 0; i < prompt_len; ++i) s->tokens.push_back(first_token + i);
        s->prompt_len = prompt_len;
        all.push_back(std::move(s));
        return all.back().get();
    }
};

// What the engine does after a forward: the chunk is computed; a sequence at its end gets a token.
void complete(Scheduler& sched, const SchedulerOutput& out) {
    for (const auto& c : out.chunks) {
        sched.on_computed(c.seq, c.num_tokens);
        if (c.seq->num_uncomputed() == 0) c.seq->tokens.push_back(7);
    }
}

std::vector<int32_t> refs_of(const Seqs& s, int32_t num_blocks) {
    std::vector<int32_t> refs(num_blocks, 0);
    for (const auto& q : s.all)
        for (int32_t b : q->block_table) ++refs[b];
    return refs;
}

TEST(BlockManager, RefcountsFreeListAndLruEviction) {
    BlockManager bm(4, 4, 2, true);
    EXPECT_EQ(bm.num_available_blocks(), 4);
    int32_t a = *bm.allocate(), b = *bm.allocate();
    EXPECT_EQ(bm.num_used_blocks(), 2);
    std::vector<int32_t> t1 = {1, 2, 3, 4}, t2 = {5, 6, 7, 8};
    uint64_t h1 = hash_block(0, t1), h2 = hash_block(h1, t2);
    EXPECT_NE(h2, hash_block(0, t2)); // chained: same tokens, different parent
    bm.register_block(a, h1);
    bm.register_block(b, h2);
    bm.acquire(a); // shared
    EXPECT_EQ(bm.refcount(a), 2);
    bm.release(a);
    bm.release(a); // now cached, evictable
    bm.release(b);
    EXPECT_EQ(bm.num_cached_blocks(), 2);
    EXPECT_EQ(bm.num_available_blocks(), 4);
    std::vector<int32_t> tokens = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    PrefixMatch m = bm.match_prefix(tokens, 2);
    ASSERT_EQ(m.blocks, (std::vector<int32_t>{a, b}));
    EXPECT_EQ(m.num_evictable, 2);
    EXPECT_EQ(bm.match_prefix(tokens, 1).blocks.size(), 1u);
    // Free blocks are used before cached ones; then the least recently used cached block (a) goes.
    int32_t c = *bm.allocate(), d = *bm.allocate();
    EXPECT_TRUE(c != a && c != b && d != a && d != b);
    EXPECT_EQ(*bm.allocate(), a);
    EXPECT_FALSE(bm.is_hashed(a));
    EXPECT_EQ(bm.match_prefix(tokens, 2).blocks.size(), 0u); // chain broken at the first block
    EXPECT_EQ(*bm.allocate(), b);
    EXPECT_FALSE(bm.allocate().has_value());
    EXPECT_EQ(bm.check_invariants({1, 1, 1, 1}, 0), "");
    EXPECT_NE(bm.check_invariants({1, 1, 1, 0}, 0), ""); // a miscount is reported
    EXPECT_NE(bm.check_invariants({1, 1, 1, 1}, 1), ""); // slots too
}

TEST(BlockManager, SlotsAndDisabledCaching) {
    BlockManager bm(2, 4, 2, false);
    auto s0 = bm.allocate_slot(), s1 = bm.allocate_slot();
    ASSERT_TRUE(s0 && s1);
    EXPECT_FALSE(bm.allocate_slot().has_value());
    bm.free_slot(*s0);
    EXPECT_EQ(bm.num_free_slots(), 1);
    EXPECT_EQ(bm.scratch_slot(), 2);
    EXPECT_EQ(bm.scratch_block(), 2);
    int32_t a = *bm.allocate();
    bm.register_block(a, 123); // ignored without prefix caching
    EXPECT_FALSE(bm.is_hashed(a));
    bm.release(a);
    EXPECT_EQ(bm.num_cached_blocks(), 0);
}

TEST(Admission, BlocksToExtendCountsNewBlocksAndCopyOnWrite) {
    BlockManager bm(8, 4, 2, true);
    Seqs s;
    Sequence* q = s.make(6);
    EXPECT_EQ(blocks_to_extend(*q, 6, bm), 2);
    q->block_table = {*bm.allocate(), *bm.allocate()};
    q->num_computed = 6;
    q->tokens.push_back(9);
    EXPECT_EQ(blocks_to_extend(*q, 1, bm), 0); // position 6 is in block 1
    EXPECT_EQ(blocks_to_extend(*q, 3, bm), 1); // positions 6..8
    bm.acquire(q->block_table[1]);             // a fork shares the partial block
    EXPECT_EQ(blocks_to_extend(*q, 1, bm), 1); // copy-on-write
    EXPECT_EQ(max_prefix_blocks(8, 4), 1);     // one token must stay to compute
    EXPECT_EQ(max_prefix_blocks(9, 4), 2);
    EXPECT_EQ(max_prefix_blocks(1, 4), 0);
    EXPECT_TRUE(check_fits_in_empty_pool(30, 3, 8, 4).ok()); // 32 KV tokens
    EXPECT_EQ(check_fits_in_empty_pool(30, 4, 8, 4).code(), core::StatusCode::kResourceExhausted);
}

TEST(Admission, CanAdmitCountsEvictableHitsAndTheReserve) {
    BlockManager bm(4, 4, 1, true);
    EXPECT_TRUE(can_admit(16, 0, 0, 0, bm));
    EXPECT_FALSE(can_admit(17, 0, 0, 0, bm));
    EXPECT_FALSE(can_admit(16, 0, 0, 1, bm));
    EXPECT_TRUE(can_admit(16, 1, 1, 0, bm));  // one block is a hit: 3 new, 3 available after taking it
    EXPECT_FALSE(can_admit(20, 1, 1, 0, bm)); // 4 new but only 3
    bm.allocate_slot();
    EXPECT_FALSE(can_admit(4, 0, 0, 0, bm)); // no slot
}

TEST(StepBudget, TokenAndSequenceCaps) {
    StepBudget b(10, 3);
    EXPECT_EQ(b.peek(4), 4);
    b.commit(4);
    EXPECT_EQ(b.peek(100), 6); // a chunk
    b.commit(6);
    EXPECT_EQ(b.peek(1), 0); // tokens spent
    StepBudget c(100, 1);
    c.commit(1);
    EXPECT_EQ(c.peek(1), 0); // sequences spent
    Seqs s;
    Sequence* prefill = s.make(5);
    Sequence* decode = s.make(3);
    decode->num_computed = 3;
    decode->tokens.push_back(4);
    auto order = packing_order({prefill, decode});
    EXPECT_EQ(order, (std::vector<Sequence*>{decode, prefill}));
}

TEST(Scheduler, DecodesFirstThenAChunkedPrefill) {
    BlockManager bm(64, 4, 8, false);
    Scheduler sched({8, 10, 1}, &bm);
    Seqs s;
    Sequence* a = s.make(3);
    Sequence* b = s.make(2);
    sched.add_waiting(a);
    sched.add_waiting(b);
    complete(sched, sched.schedule()); // both prefill fully, each gets a token
    Sequence* c = s.make(20);
    sched.add_waiting(c);
    SchedulerOutput out = sched.schedule();
    ASSERT_EQ(out.chunks.size(), 3u);
    EXPECT_EQ(out.chunks[0].seq, a);
    EXPECT_EQ(out.chunks[0].num_tokens, 1);
    EXPECT_EQ(out.chunks[1].seq, b);
    EXPECT_EQ(out.chunks[2].seq, c);
    EXPECT_EQ(out.chunks[2].num_tokens, 8); // the rest of the budget
    EXPECT_EQ(out.num_decode_tokens, 2);
    EXPECT_EQ(out.num_prefill_tokens, 8);
    complete(sched, out);
    out = sched.schedule(); // c continues after the decodes
    ASSERT_EQ(out.chunks.size(), 3u);
    EXPECT_EQ(out.chunks[2].seq, c);
    EXPECT_EQ(c->num_computed, 8);
    EXPECT_EQ(bm.check_invariants(refs_of(s, 64), 3), "");
}

TEST(Scheduler, SequenceCapAndFifoAdmission) {
    BlockManager bm(5, 4, 2, false);
    Scheduler sched({2, 100, 0}, &bm);
    Seqs s;
    Sequence* a = s.make(4);
    Sequence* big = s.make(20); // needs 5 blocks: does not fit next to a
    Sequence* small = s.make(2);
    for (Sequence* q : {a, big, small}) sched.add_waiting(q);
    SchedulerOutput out = sched.schedule();
    ASSERT_EQ(out.chunks.size(), 1u); // big blocks the queue: small does not overtake it
    EXPECT_EQ(out.chunks[0].seq, a);
    EXPECT_EQ(sched.waiting().front(), big);
    sched.remove(a);
    out = sched.schedule();
    ASSERT_EQ(out.chunks.size(), 1u);
    EXPECT_EQ(out.chunks[0].seq, big);
}

TEST(Scheduler, PreemptsTheYoungestAndRequeuesItAtTheFront) {
    BlockManager bm(4, 4, 4, true);
    Scheduler sched({4, 100, 0}, &bm);
    Seqs s;
    Sequence* a = s.make(8, 1);
    Sequence* b = s.make(8, 100);
    sched.add_waiting(a);
    sched.add_waiting(b);
    complete(sched, sched.schedule()); // 4 blocks used; both need a fifth block for their decode
    EXPECT_EQ(bm.num_available_blocks(), 0);
    SchedulerOutput out = sched.schedule();
    ASSERT_EQ(out.preempted.size(), 1u);
    EXPECT_EQ(out.preempted[0], b);
    EXPECT_EQ(b->status, SequenceStatus::kPreempted);
    EXPECT_TRUE(b->block_table.empty());
    EXPECT_EQ(b->slot, -1);
    ASSERT_EQ(out.chunks.size(), 1u);
    EXPECT_EQ(out.chunks[0].seq, a);
    EXPECT_EQ(sched.waiting().front(), b);
    EXPECT_EQ(bm.check_invariants(refs_of(s, 4), 1), "");
    // b's full blocks went to the prefix cache, tail first in the LRU: a's decode evicted b's second
    // block, so b readmitted hits its first block and recomputes from position 4.
    complete(sched, out);
    sched.remove(a);
    out = sched.schedule();
    ASSERT_EQ(out.chunks.size(), 1u);
    EXPECT_EQ(out.chunks[0].seq, b);
    EXPECT_EQ(b->num_computed, 4);
    EXPECT_TRUE(b->slot_fresh && b->restore_from_block);
    EXPECT_EQ(out.chunks[0].num_tokens, 5);
    EXPECT_EQ(out.prefix_hit_tokens, 4);
}

TEST(Scheduler, ForkSharesBlocksAndTakesASlot) {
    BlockManager bm(8, 4, 2, false);
    Scheduler sched({2, 100, 0}, &bm);
    Seqs s;
    Sequence* p = s.make(6);
    Sequence* c = s.make(6);
    sched.add_waiting(p);
    complete(sched, sched.schedule());
    c->tokens.push_back(8);
    ASSERT_TRUE(sched.fork(*p, c));
    EXPECT_EQ(c->block_table, p->block_table);
    EXPECT_EQ(bm.refcount(p->block_table[1]), 2);
    Sequence* d = s.make(6);
    EXPECT_FALSE(sched.fork(*p, d)); // cap of 2 running
    SchedulerOutput out = sched.schedule();
    ASSERT_EQ(out.block_copies.size(), 1u); // p writes position 6 into the shared block: copy it
    EXPECT_NE(p->block_table[1], c->block_table[1]);
    EXPECT_EQ(bm.refcount(c->block_table[1]), 1);
    EXPECT_EQ(bm.check_invariants(refs_of(s, 8), 2), "");
}

} // namespace
