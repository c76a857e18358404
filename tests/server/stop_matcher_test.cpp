#include "server/stop_matcher.h"

#include <gtest/gtest.h>

namespace deepinfer::server {
namespace {

// Feeds text one piece at a time and returns everything emitted.
std::string feed(StopMatcher& m, const std::vector<std::string>& pieces, bool flush = true) {
    std::string out;
    for (const auto& p : pieces) out += m.push(p);
    if (flush) out += m.flush();
    return out;
}

TEST(StopMatcher, NoStopsPassesEverything) {
    StopMatcher m({});
    EXPECT_EQ(m.push("abc"), "abc");
    EXPECT_FALSE(m.stopped());
}

TEST(StopMatcher, StopsAndDropsTheStopString) {
    StopMatcher m({"END"});
    EXPECT_EQ(feed(m, {"hello E", "N", "D world"}), "hello ");
    EXPECT_TRUE(m.stopped());
    EXPECT_EQ(m.push("more"), "");
}

TEST(StopMatcher, IncludeStopKeepsTheEarliestMatchedStopString) {
    StopMatcher m({"xyz", "END", "N"}, /*include_stop=*/true);
    EXPECT_EQ(feed(m, {"hello E", "N", "D world"}), "hello EN"); // "N" completes first
    StopMatcher k({"END", "lo E"}, /*include_stop=*/true);
    EXPECT_EQ(feed(k, {"hello E", "N", "D world"}), "hello E");
}

TEST(StopMatcher, HoldsBackAPartialStopString) {
    StopMatcher m({"</stop>"});
    EXPECT_EQ(m.push("abc</st"), "abc"); // "</st" could still become the stop string
    EXPECT_EQ(m.push("x"), "</stx");     // ... and now cannot
    EXPECT_FALSE(m.stopped());
}

TEST(StopMatcher, FlushReleasesHeldTextWhenNoStopCompleted) {
    StopMatcher m({"STOP"});
    EXPECT_EQ(m.push("abcST"), "abc");
    EXPECT_EQ(m.flush(), "ST");
}

TEST(StopMatcher, EarliestOfSeveralStopsWins) {
    StopMatcher m({"world", "lo"});
    EXPECT_EQ(feed(m, {"hello world"}), "hel");
}

TEST(StopMatcher, StopSpanningManySingleCharacterPieces) {
    StopMatcher m({"\n\n"});
    EXPECT_EQ(feed(m, {"a", "\n", "b", "\n", "\n", "c"}), "a\nb");
}

TEST(StopMatcher, NeverEmitsAPrefixOfAStopAtAnyCut) {
    // Property: for every way of cutting the text in two, what is emitted early is a prefix of the
    // text before the stop, and the total output is exactly that text.
    const std::string text = "xxabcabdabcdyy";
    for (size_t cut = 0; cut <= text.size(); ++cut) {
        StopMatcher m({"abcd"});
        std::string a = m.push(text.substr(0, cut));
        EXPECT_EQ(std::string("xxabcabd").rfind(a, 0), 0u) << cut; // only ever a prefix of the answer
        std::string all = a + m.push(text.substr(cut));
        all += m.flush();
        EXPECT_EQ(all, "xxabcabd") << cut;
        EXPECT_TRUE(m.stopped());
    }
}

} // namespace
} // namespace deepinfer::server
