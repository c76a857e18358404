#include <gtest/gtest.h>

#include "cli/engine_flags.h"

using namespace deepinfer;
using namespace deepinfer::cli;

namespace {

TEST(EngineFlags, ParseIntoEngineConfig) {
    auto args = Args::parse({"--kv-cache-memory", "2GiB", "--max-num-seqs=8", "--no-prefix-caching",
                             "--max-num-batched-tokens", "64", "--block-size", "128"},
                            engine_value_flags(), engine_bool_flags());
    ASSERT_TRUE(args.ok()) << args.status().to_string();
    auto c = engine_config_from_args(*args);
    ASSERT_TRUE(c.ok()) << c.status().to_string();
    EXPECT_EQ(c->kv_cache_memory_bytes, 2LL << 30);
    EXPECT_EQ(c->max_num_seqs, 8);
    EXPECT_EQ(c->max_num_batched_tokens, 64);
    EXPECT_EQ(c->block_size, 128);
    EXPECT_FALSE(c->enable_prefix_caching);
    EXPECT_EQ(c->num_kv_blocks, 0);
}

TEST(EngineFlags, BadValuesNameTheFlag) {
    auto args = Args::parse({"--kv-cache-memory", "3 parsecs"}, engine_value_flags(), engine_bool_flags());
    ASSERT_TRUE(args.ok());
    auto c = engine_config_from_args(*args);
    EXPECT_NE(c.status().message().find("kv-cache-memory"), std::string::npos);
    args = Args::parse({"--max-num-seqs", "0"}, engine_value_flags(), engine_bool_flags());
    ASSERT_TRUE(args.ok());
    EXPECT_NE(engine_config_from_args(*args).status().message().find("max-num-seqs"), std::string::npos);
    EXPECT_EQ(*parse_byte_size("x", "1.5G"), static_cast<long long>(1.5 * (1LL << 30)));
    EXPECT_EQ(*parse_byte_size("x", "4096"), 4096);
}

} // namespace
