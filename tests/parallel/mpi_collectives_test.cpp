// Runs under `mpirun -np N` (ctest registers N = 2 and 4, over shared memory and over TCP). Every rank
// runs every test; each test checks the MPI result against the single-process computation of the same
// inputs (all ranks' inputs are generated from (rank, seed) on every rank), bit for bit.

#include "parallel/expert_load.h"
#include "parallel/handshake.h"
#include "parallel/layout_groups.h"
#include "parallel/parallel_layout.h"
#include "parallel/step_channel.h"

#include "mpi_test_main.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>

namespace deepinfer::parallel {
namespace {

using mpi_test::g_world;

Communicator& world() {
    return *g_world;
}

// Values spanning many magnitudes and signs, so a different summation order gives different bits.
std::vector<float> make_input(int rank, std::size_t n, std::uint32_t seed) {
    std::mt19937 gen(seed * 7919u + static_cast<std::uint32_t>(rank) * 104729u +
                     static_cast<std::uint32_t>(n));
    std::uniform_real_distribution<float> mant(-1.0f, 1.0f);
    std::uniform_int_distribution<int> ex(-20, 20);
    std::vector<float> v(n);
    for (auto& x : v) x = std::ldexp(mant(gen), ex(gen));
    return v;
}

std::vector<float> expected_sum(std::size_t n, std::uint32_t seed, int size) {
    std::vector<std::vector<float>> all;
    for (int r = 0; r < size; ++r) all.push_back(make_input(r, n, seed));
    std::vector<std::span<const float>> parts(all.begin(), all.end());
    std::vector<float> out(n);
    sum_in_rank_order(parts, out);
    return out;
}

bool same_bits(std::span<const float> a, std::span<const float> b) {
    return a.size() == b.size() &&
           (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

TEST(MpiCommunicator, AllReduceEqualsTheRankOrderSumBitForBit) {
    const int p = world().size();
    for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{3}, std::size_t{7}, std::size_t{4096},
                          std::size_t{4096 * 8 + 5}}) {
        auto x = make_input(world().rank(), n, 1);
        ASSERT_TRUE(world().all_reduce_sum(x).ok()) << "n=" << n;
        EXPECT_TRUE(same_bits(x, expected_sum(n, 1, p))) << "n=" << n;
    }
}

TEST(MpiCommunicator, AllReduceDiffersFromAnotherOrder) {
    // Guards the test above: with these inputs a reversed order changes the bits, so order is observable.
    // (Two addends commute exactly; order shows from three ranks on.)
    const int p = world().size();
    if (p < 3) GTEST_SKIP() << "float addition of two terms is commutative";
    const std::size_t n = 4096;
    std::vector<std::vector<float>> all;
    for (int r = p - 1; r >= 0; --r) all.push_back(make_input(r, n, 1));
    std::vector<std::span<const float>> parts(all.begin(), all.end());
    std::vector<float> reversed(n);
    sum_in_rank_order(parts, reversed);
    EXPECT_FALSE(same_bits(reversed, expected_sum(n, 1, p)));
}

TEST(MpiCommunicator, ReduceScatterEqualsTheRankOrderSumOfTheOwnChunk) {
    const int p = world().size();
    const std::size_t m = 1000;
    auto x = make_input(world().rank(), m * p, 2);
    std::vector<float> out(m);
    ASSERT_TRUE(world().reduce_scatter_sum(x, out).ok());
    auto full = expected_sum(m * p, 2, p);
    EXPECT_TRUE(same_bits(out, std::span<const float>(full).subspan(m * world().rank(), m)));
}

TEST(MpiCommunicator, AllGatherPlacesRanksInOrder) {
    const int p = world().size();
    for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{4097}}) {
        auto mine = make_input(world().rank(), n, 3);
        std::vector<float> all(n * p);
        ASSERT_TRUE(world().all_gather_f32(mine, all).ok());
        for (int r = 0; r < p; ++r) {
            EXPECT_TRUE(same_bits(std::span<const float>(all).subspan(n * r, n), make_input(r, n, 3)))
                << "rank " << r << " n=" << n;
        }
    }
}

TEST(MpiCommunicator, BroadcastFromEveryRoot) {
    const int p = world().size();
    for (int root = 0; root < p; ++root) {
        for (std::size_t n : {std::size_t{0}, std::size_t{5}, std::size_t{100000}}) {
            auto x = world().rank() == root ? make_input(root, n, 4) : std::vector<float>(n, -1.0f);
            ASSERT_TRUE(world().broadcast_f32(x, root).ok());
            EXPECT_TRUE(same_bits(x, make_input(root, n, 4))) << "root " << root << " n=" << n;
        }
    }
    std::vector<std::byte> var;
    if (world().rank() == p - 1) var.assign(12345, std::byte{0x5a});
    ASSERT_TRUE(world().broadcast_bytes(var, p - 1).ok());
    EXPECT_EQ(var.size(), 12345u);
    EXPECT_EQ(var.back(), std::byte{0x5a});
    EXPECT_FALSE(world().broadcast_f32(std::span<float>(), p).ok()); // no such root, checked locally
}

TEST(MpiCommunicator, AllToAllVDeliversEveryRowToItsRank) {
    const int p = world().size();
    const int me = world().rank();
    auto count = [](int from, int to) { return static_cast<std::size_t>((from + 1) * (to + 2) % 5); };
    auto value = [](int from, int to, std::size_t i) {
        return static_cast<float>(from * 1000 + to * 100 + i);
    };
    std::vector<std::size_t> sc(p), rc(p);
    std::vector<float> send, expect;
    for (int q = 0; q < p; ++q) {
        sc[q] = count(me, q);
        rc[q] = count(q, me);
        for (std::size_t i = 0; i < sc[q]; ++i) send.push_back(value(me, q, i));
        for (std::size_t i = 0; i < rc[q]; ++i) expect.push_back(value(q, me, i));
    }
    std::vector<float> recv(expect.size(), -1.0f);
    ASSERT_TRUE(world().all_to_all_v_f32(send, sc, recv, rc).ok());
    EXPECT_EQ(recv, expect);
}

TEST(MpiCommunicator, BarrierAndArgumentErrorsDoNotBreakTheGroup) {
    ASSERT_TRUE(world().barrier().ok());
    std::vector<float> a(3), b(2);
    EXPECT_EQ(world().all_gather_f32(a, b).code(), core::StatusCode::kInvalidArgument);
    ASSERT_TRUE(world().barrier().ok());
}

TEST(MpiCommunicator, SplitGroupsReduceOverTheirMembersOnly) {
    const int p = world().size();
    const int me = world().rank();
    auto child = world().split(me % 2, -me); // reversed key: group rank order is descending world rank
    ASSERT_TRUE(child.ok()) << child.status().to_string();
    Communicator& c = **child;
    std::vector<int> members;
    for (int r = p - 1; r >= 0; --r) {
        if (r % 2 == me % 2) members.push_back(r);
    }
    ASSERT_EQ(c.size(), static_cast<int>(members.size()));
    EXPECT_EQ(members[c.rank()], me);
    const std::size_t n = 777;
    auto x = make_input(me, n, 5);
    ASSERT_TRUE(c.all_reduce_sum(x).ok());
    std::vector<std::vector<float>> ins;
    for (int r : members) ins.push_back(make_input(r, n, 5));
    std::vector<std::span<const float>> parts(ins.begin(), ins.end());
    std::vector<float> want(n);
    sum_in_rank_order(parts, want);
    EXPECT_TRUE(same_bits(x, want));
}

TEST(MpiCommunicator, LayoutGroupsMatchTheLayout) {
    const int p = world().size();
    // 4 ranks: EP on the CP ranks with TP pairs; 2 ranks: TP only.
    auto layout = p == 4 ? make_parallel_layout(2, 2, 2, 4) : make_parallel_layout(2, 1, 1, p);
    ASSERT_TRUE(layout.ok()) << layout.status().to_string();
    auto groups = make_layout_groups(world(), *layout);
    ASSERT_TRUE(groups.ok()) << groups.status().to_string();
    const int me = world().rank();
    using G = ParallelLayout::Group;
    const std::pair<G, Communicator*> kinds[] = {{G::kTp, groups->tp.get()},
                                                 {G::kEp, groups->ep.get()},
                                                 {G::kCp, groups->cp.get()},
                                                 {G::kMoe, groups->moe.get()}};
    for (auto [g, c] : kinds) {
        std::vector<int> members;
        for (int r = 0; r < p; ++r) {
            if (layout->color(g, r) == layout->color(g, me)) members.push_back(r);
        }
        std::sort(members.begin(), members.end(),
                  [&](int a, int b) { return layout->key(g, a) < layout->key(g, b); });
        ASSERT_EQ(c->size(), static_cast<int>(members.size()));
        std::vector<std::int64_t> mine = {me}, all(members.size());
        ASSERT_TRUE(c->all_gather_i64(mine, all).ok());
        EXPECT_EQ(all, std::vector<std::int64_t>(members.begin(), members.end()));
    }
    auto wrong = make_parallel_layout(1, 1, 1, 1);
    EXPECT_EQ(make_layout_groups(world(), *wrong).status().code(), core::StatusCode::kInvalidArgument);
}

StepMessage random_step(std::uint32_t i) {
    std::mt19937 gen(i);
    StepMessage m;
    const int n_seqs = static_cast<int>(gen() % 4);
    for (int s = 0; s < n_seqs; ++s) {
        StepSequence seq;
        seq.seq_id = 100 + s;
        seq.num_tokens = static_cast<std::int32_t>(gen() % 40);
        seq.start_pos = static_cast<std::int32_t>(gen() % 1000);
        seq.slot = s;
        seq.token_offset = static_cast<std::int32_t>(m.token_ids.size());
        seq.reset_slot = gen() % 2;
        seq.is_padding = gen() % 5 == 0;
        for (int b = 0; b < static_cast<int>(gen() % 6); ++b)
            seq.block_table.push_back(static_cast<int>(gen() % 50));
        for (int t = 0; t < seq.num_tokens; ++t) {
            m.token_ids.push_back(static_cast<std::int32_t>(gen() % 129280));
            m.positions.push_back(seq.start_pos + t);
        }
        if (seq.num_tokens > 0) m.logits_rows.push_back(static_cast<std::int32_t>(m.token_ids.size()) - 1);
        m.sequences.push_back(std::move(seq));
    }
    return m;
}

TEST(StepProtocol, FollowersReceiveEveryStepThenShutDown) {
    StepChannel ch(world());
    const std::uint32_t kSteps = 30;
    if (ch.is_leader()) {
        for (std::uint32_t i = 1; i <= kSteps; ++i) {
            ASSERT_TRUE(ch.publish(random_step(i)).ok());
            if (i % 10 == 0) {
                ASSERT_TRUE(ch.publish_idle().ok());
            }
        }
        ASSERT_TRUE(ch.publish_shutdown().ok());
    } else {
        std::uint32_t seen = 0;
        Status s = run_follower(ch, [&](const StepMessage& m) {
            ++seen;
            StepMessage want = random_step(seen);
            want.step = m.step;
            EXPECT_EQ(m, want) << "step " << m.step;
            return Status();
        });
        ASSERT_TRUE(s.ok()) << s.to_string();
        EXPECT_EQ(seen, kSteps);
    }
    // Steps: 30 forwards + 3 idles + shutdown, counted the same on every rank.
    std::vector<std::int64_t> mine = {static_cast<std::int64_t>(ch.last_step())}, all(world().size());
    ASSERT_TRUE(world().all_gather_i64(mine, all).ok());
    for (auto v : all) EXPECT_EQ(v, kSteps + 3 + 1);
}

TEST(StepProtocol, ForwardErrorsStopTheFollowerWithTheStep) {
    StepChannel ch(world());
    if (ch.is_leader()) {
        ASSERT_TRUE(ch.publish(random_step(1)).ok());
    } else {
        Status s =
            run_follower(ch, [](const StepMessage&) { return core::internal_error("shard exploded"); });
        EXPECT_EQ(s.code(), core::StatusCode::kInternal);
        EXPECT_NE(s.message().find("step 1: shard exploded"), std::string::npos) << s.to_string();
    }
}

RankIdentity identity() {
    RankIdentity id;
    id.checkpoint_hash = 0x1234;
    id.config_hash = 0x99;
    id.checkpoint_label = "/models/tiny-v4";
    id.layout = *make_parallel_layout(1, world().size(), 1, world().size());
    return id;
}

TEST(Handshake, AcceptsIdenticalRanks) {
    EXPECT_TRUE(handshake(world(), identity()).ok());
}

TEST(Handshake, EveryRankRefusesADifferentCheckpointNamingTheRank) {
    const int odd = world().size() - 1;
    RankIdentity id = identity();
    if (world().rank() == odd) {
        id.checkpoint_hash = 0x5678;
        id.checkpoint_label = "/models/other";
    }
    Status s = handshake(world(), id);
    ASSERT_EQ(s.code(), core::StatusCode::kFailedPrecondition) << s.to_string();
    EXPECT_NE(s.message().find("rank " + std::to_string(odd) + " differs from rank 0"), std::string::npos)
        << s.to_string();
    EXPECT_NE(s.message().find("/models/other"), std::string::npos) << s.to_string();
    EXPECT_EQ(s.message().find("config 0x"), std::string::npos)
        << "only the checkpoint differs: " << s.to_string();
}

TEST(Handshake, RefusesADifferentLayout) {
    RankIdentity id = identity();
    if (world().rank() == 1) id.layout = *make_parallel_layout(world().size(), 1, 1, world().size());
    Status s = handshake(world(), id);
    ASSERT_EQ(s.code(), core::StatusCode::kFailedPrecondition);
    EXPECT_NE(s.message().find("rank 1 differs from rank 0: layout"), std::string::npos) << s.to_string();
}

TEST(ExpertLoad, CountsAreSummedOverRanks) {
    const int p = world().size();
    const int n_experts = 8;
    ExpertLoadStats stats(n_experts, p, 2);
    auto count = [](int rank, int e) { return static_cast<std::int64_t>((rank + 1) * (e % 3)); };
    for (int e = 0; e < n_experts; ++e) stats.record(e, count(world().rank(), e));
    ASSERT_TRUE(stats.on_step(world(), 1).ok()); // not an exchange step: must not communicate
    ASSERT_TRUE(stats.on_step(world(), 2).ok());
    std::vector<std::int64_t> want(n_experts, 0), per_rank(p, 0);
    for (int r = 0; r < p; ++r) {
        for (int e = 0; e < n_experts; ++e) want[e] += count(r, e);
    }
    for (int e = 0; e < n_experts; ++e) per_rank[stats.expert_rank(e)] += want[e];
    EXPECT_EQ(stats.latest().expert_tokens, want);
    EXPECT_EQ(stats.latest().ep_rank_tokens, per_rank);
    EXPECT_DOUBLE_EQ(stats.latest().expert_imbalance, imbalance(want));
}

} // namespace
} // namespace deepinfer::parallel
