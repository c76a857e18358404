#include "parallel/local_communicator.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

namespace deepinfer::parallel {
namespace {

TEST(LocalCommunicator, IsAGroupOfOne) {
    LocalCommunicator c;
    EXPECT_EQ(c.rank(), 0);
    EXPECT_EQ(c.size(), 1);
    EXPECT_EQ(c.deadline(), kDefaultCollectiveDeadline);
    c.set_deadline(std::chrono::milliseconds(5));
    EXPECT_EQ(c.deadline(), std::chrono::milliseconds(5));
}

TEST(LocalCommunicator, CollectivesAreIdentities) {
    LocalCommunicator c;
    std::vector<float> x = {1.5f, -2.25f, 3.0f};
    const auto orig = x;
    ASSERT_TRUE(c.all_reduce_sum(x).ok());
    EXPECT_EQ(x, orig);

    std::vector<float> g(3);
    ASSERT_TRUE(c.all_gather_f32(x, g).ok());
    EXPECT_EQ(g, orig);

    std::vector<float> rs(3);
    ASSERT_TRUE(c.reduce_scatter_sum(x, rs).ok());
    EXPECT_EQ(rs, orig);

    ASSERT_TRUE(c.broadcast_f32(x, 0).ok());
    EXPECT_EQ(x, orig);
    ASSERT_TRUE(c.barrier().ok());

    std::vector<float> a2a(3);
    const std::size_t counts[1] = {3};
    ASSERT_TRUE(c.all_to_all_v_f32(x, counts, a2a, counts).ok());
    EXPECT_EQ(a2a, orig);

    std::vector<std::byte> bytes = {std::byte{7}, std::byte{9}};
    ASSERT_TRUE(c.broadcast_bytes(bytes, 0).ok());
    EXPECT_EQ(bytes.size(), 2u);
}

TEST(LocalCommunicator, SizeMismatchesAreErrorsNamingTheCollective) {
    LocalCommunicator c("world");
    std::vector<float> x(3), small(2);
    Status s = c.all_gather_f32(x, small);
    EXPECT_EQ(s.code(), core::StatusCode::kInvalidArgument);
    EXPECT_NE(s.message().find("all_gather"), std::string::npos) << s.to_string();
    EXPECT_NE(s.message().find("'world'"), std::string::npos) << s.to_string();

    s = c.reduce_scatter_sum(x, small);
    EXPECT_EQ(s.code(), core::StatusCode::kInvalidArgument);
    EXPECT_NE(s.message().find("reduce_scatter_sum"), std::string::npos);

    s = c.broadcast_f32(x, 1);
    EXPECT_EQ(s.code(), core::StatusCode::kInvalidArgument);
    EXPECT_NE(s.message().find("root 1"), std::string::npos);

    const std::size_t two[2] = {3, 0};
    std::vector<float> out(3);
    s = c.all_to_all_v_f32(x, two, out, two);
    EXPECT_EQ(s.code(), core::StatusCode::kInvalidArgument);
    const std::size_t c3[1] = {3}, c2[1] = {2};
    s = c.all_to_all_v_f32(x, c3, small, c2);
    EXPECT_EQ(s.code(), core::StatusCode::kInvalidArgument) << s.to_string();
}

TEST(LocalCommunicator, SplitMakesAChildWithTheDeadline) {
    LocalCommunicator c("world");
    c.set_deadline(std::chrono::milliseconds(1234));
    auto child = c.split(3, 0);
    ASSERT_TRUE(child.ok());
    EXPECT_EQ((*child)->size(), 1);
    EXPECT_EQ((*child)->name(), "world/c3");
    EXPECT_EQ((*child)->deadline(), std::chrono::milliseconds(1234));
    EXPECT_FALSE(c.split(-1, 0).ok());
}

TEST(SumInRankOrder, IsLeftToRightAndOrderMatters) {
    // 1e8 + 1 - 1e8 in float: left to right loses the 1, another order keeps it. The reference must be the
    // left-to-right one, or the MPI tests comparing against it could not catch a reordered sum.
    const float a[1] = {1e8f}, b[1] = {1.0f}, c[1] = {-1e8f};
    std::span<const float> parts[3] = {a, b, c};
    float out[1];
    sum_in_rank_order(parts, out);
    EXPECT_EQ(out[0], (1e8f + 1.0f) + -1e8f);
    std::span<const float> reordered[3] = {a, c, b};
    float out2[1];
    sum_in_rank_order(reordered, out2);
    EXPECT_NE(out[0], out2[0]);
}

} // namespace
} // namespace deepinfer::parallel
