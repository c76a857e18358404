#include <gtest/gtest.h>

#include "core/status.h"

using namespace deepinfer::core;

namespace {
Result<int> parse_positive(int x) {
    if (x <= 0) return invalid_argument("x must be positive, got " + std::to_string(x));
    return x;
}
Result<int> doubled(int x) {
    DI_ASSIGN_OR_RETURN(int v, parse_positive(x));
    return 2 * v;
}
Status check_all(int a, int b) {
    DI_RETURN_IF_ERROR(parse_positive(a).status());
    DI_RETURN_IF_ERROR(parse_positive(b).status());
    return Status();
}
} // namespace

TEST(Status, PropagatesErrorsAndValues) {
    EXPECT_EQ(*doubled(4), 8);
    auto bad = doubled(-1);
    ASSERT_FALSE(bad.ok());
    EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(bad.status().to_string(), "InvalidArgument: x must be positive, got -1");
    EXPECT_TRUE(check_all(1, 2).ok());
    EXPECT_EQ(check_all(1, 0).message(), "x must be positive, got 0");
    EXPECT_EQ(not_found("t").with_context("model.safetensors").to_string(), "NotFound: model.safetensors: t");
}
