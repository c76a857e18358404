#include <gtest/gtest.h>

#include "engine/philox.h"

using namespace deepinfer::engine;

// Known-answer vectors of Random123 (kat_vectors, philox4x32_10).
TEST(Philox, KnownAnswers) {
    EXPECT_EQ(philox4x32_10({0, 0, 0, 0}, {0, 0}),
              (PhiloxCounter{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
    EXPECT_EQ(philox4x32_10({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff}),
              (PhiloxCounter{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}));
    EXPECT_EQ(philox4x32_10({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0}),
              (PhiloxCounter{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}));
}

TEST(Philox, UniformIsInRangeAndDependsOnEveryInput) {
    double a = philox_uniform(1, 10, 0, 0);
    EXPECT_GE(a, 0.0);
    EXPECT_LT(a, 1.0);
    EXPECT_EQ(a, philox_uniform(1, 10, 0, 0));
    EXPECT_NE(a, philox_uniform(2, 10, 0, 0));
    EXPECT_NE(a, philox_uniform(1, 11, 0, 0));
    EXPECT_NE(a, philox_uniform(1, 10, 1, 0));
    EXPECT_NE(a, philox_uniform(1, 10, 0, 1));
    // Mean and variance of 100k draws are those of U(0, 1).
    double sum = 0, sum2 = 0;
    const int n = 100000;
    for (int i = 0; i < n; ++i) {
        double u = philox_uniform(7, i, 0, 0);
        sum += u;
        sum2 += u * u;
    }
    EXPECT_NEAR(sum / n, 0.5, 0.005);
    EXPECT_NEAR(sum2 / n - (sum / n) * (sum / n), 1.0 / 12, 0.002);
}
