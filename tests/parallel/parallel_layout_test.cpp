#include "parallel/parallel_layout.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

namespace deepinfer::parallel {
namespace {

using G = ParallelLayout::Group;

TEST(ParallelLayout, SeparateAxesCoordinatesRoundTrip) {
    auto l = make_parallel_layout(2, 2, 2, 8);
    ASSERT_TRUE(l.ok()) << l.status().to_string();
    EXPECT_FALSE(l->ep_on_cp);
    std::set<std::tuple<int, int, int>> seen;
    for (int r = 0; r < 8; ++r) {
        auto c = l->coords(r);
        EXPECT_EQ(l->rank_of(c), r);
        EXPECT_EQ(c.tp, r % 2);
        seen.insert({c.tp, c.ep, c.cp});
    }
    EXPECT_EQ(seen.size(), 8u);
}

// Groups of each kind partition the world, have the declared size, and vary only their own coordinate.
void check_groups(const ParallelLayout& l) {
    struct Spec {
        G g;
        int size;
    };
    const int moe = l.ep_on_cp ? l.world : l.tp * l.ep;
    for (Spec s : {Spec{G::kTp, l.tp}, Spec{G::kEp, l.ep}, Spec{G::kCp, l.cp}, Spec{G::kMoe, moe}}) {
        std::map<int, std::vector<int>> groups;
        for (int r = 0; r < l.world; ++r) groups[l.color(s.g, r)].push_back(r);
        int total = 0;
        for (auto& [color, ranks] : groups) {
            EXPECT_EQ(static_cast<int>(ranks.size()), s.size) << l.to_string() << " group " << int(s.g);
            std::set<int> keys;
            for (int r : ranks) keys.insert(l.key(s.g, r));
            EXPECT_EQ(keys.size(), ranks.size()) << "keys must order the group uniquely";
            total += static_cast<int>(ranks.size());
            for (int r : ranks) {
                auto a = l.coords(r), b = l.coords(ranks[0]);
                if (s.g == G::kTp) {
                    EXPECT_TRUE(a.ep == b.ep && a.cp == b.cp);
                }
                if (s.g == G::kEp || s.g == G::kCp) {
                    EXPECT_EQ(a.tp, b.tp);
                }
            }
        }
        EXPECT_EQ(total, l.world);
    }
}

TEST(ParallelLayout, GroupsPartitionTheWorld) {
    for (auto [tp, ep, cp, world] : std::vector<std::tuple<int, int, int, int>>{{1, 1, 1, 1},
                                                                                {2, 1, 1, 2},
                                                                                {1, 4, 1, 4},
                                                                                {1, 1, 4, 4},
                                                                                {2, 2, 1, 4},
                                                                                {2, 2, 2, 8},
                                                                                {1, 2, 2, 2},
                                                                                {2, 2, 2, 4},
                                                                                {1, 4, 4, 4}}) {
        auto l = make_parallel_layout(tp, ep, cp, world);
        ASSERT_TRUE(l.ok()) << l.status().to_string();
        check_groups(*l);
    }
}

TEST(ParallelLayout, EpOnCpWhenSizesSayEpIsTheCpGroup) {
    auto l = make_parallel_layout(1, 4, 4, 4);
    ASSERT_TRUE(l.ok());
    EXPECT_TRUE(l->ep_on_cp);
    for (int r = 0; r < 4; ++r) {
        EXPECT_EQ(l->coords(r).ep, l->coords(r).cp);
        EXPECT_EQ(l->color(G::kEp, r), l->color(G::kCp, r));
        EXPECT_EQ(l->color(G::kMoe, r), 0);
    }
    // Same sizes on 16 ranks are separate axes.
    auto sep = make_parallel_layout(1, 4, 4, 16);
    ASSERT_TRUE(sep.ok());
    EXPECT_FALSE(sep->ep_on_cp);
}

TEST(ParallelLayout, RejectsSizesThatDoNotFit) {
    auto l = make_parallel_layout(2, 1, 1, 4);
    ASSERT_FALSE(l.ok());
    EXPECT_EQ(l.status().code(), core::StatusCode::kInvalidArgument);
    EXPECT_NE(l.status().message().find("tp=2 ep=1 cp=1"), std::string::npos) << l.status().to_string();
    EXPECT_NE(l.status().message().find("4 ranks"), std::string::npos);
    EXPECT_FALSE(make_parallel_layout(0, 1, 1, 1).ok());
    EXPECT_FALSE(make_parallel_layout(1, 2, 4, 4).ok()); // ep != cp and product 8 != 4
}

TEST(ParallelLayout, ParsesShortAndVllmNames) {
    std::vector<LayoutFlag> flags = {{"--tensor-parallel-size", "2"}, {"--ep", "2"}};
    auto l = parse_parallel_layout(flags, 4);
    ASSERT_TRUE(l.ok()) << l.status().to_string();
    EXPECT_EQ(l->tp, 2);
    EXPECT_EQ(l->ep, 2);
    EXPECT_EQ(l->cp, 1);

    std::vector<LayoutFlag> cp = {{"context-parallel-size", "4"}, {"--cp", "4"}};
    auto l2 = parse_parallel_layout(cp, 4);
    ASSERT_TRUE(l2.ok()) << l2.status().to_string();
    EXPECT_EQ(l2->cp, 4);

    auto none = parse_parallel_layout({}, 1);
    ASSERT_TRUE(none.ok());
    EXPECT_EQ(none->tp * none->ep * none->cp, 1);
}

TEST(ParallelLayout, ParseErrorsNameTheFlag) {
    auto check = [](std::vector<LayoutFlag> flags, int world, const char* needle) {
        auto l = parse_parallel_layout(flags, world);
        ASSERT_FALSE(l.ok());
        EXPECT_EQ(l.status().code(), core::StatusCode::kInvalidArgument);
        EXPECT_NE(l.status().message().find(needle), std::string::npos) << l.status().to_string();
    };
    check({{"--tp", "two"}}, 2, "--tp");
    check({{"--tp", "0"}}, 2, "--tp");
    check({{"--tp", "2x"}}, 2, "--tp");
    check({{"--tp", ""}}, 2, "--tp");
    check({{"--pp", "2"}}, 2, "--pp");
    check({{"--tp", "2"}, {"--tensor-parallel-size", "4"}}, 4, "disagree");
    check({{"--expert-parallel-size", "3"}}, 4, "does not fit");
}

} // namespace
} // namespace deepinfer::parallel
