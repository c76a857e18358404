// The flag parser's suggestions and the vLLM / SGLang launch-flag translation of `serve`.

#include "cli/args.h"

#include <gtest/gtest.h>

#include "cli/serve_compat.h"

namespace deepinfer::cli {
namespace {

TEST(Args, EditDistance) {
    EXPECT_EQ(edit_distance("", ""), 0u);
    EXPECT_EQ(edit_distance("port", "port"), 0u);
    EXPECT_EQ(edit_distance("prot", "port"), 2u);
    EXPECT_EQ(edit_distance("max-model-len", "max-model-length"), 3u);
    EXPECT_EQ(edit_distance("abc", ""), 3u);
}

TEST(Args, UnknownFlagSuggestsTheClosestKnownOne) {
    const std::set<std::string> values = {"model", "max-model-len", "served-model-name", "port"};
    const std::set<std::string> bools = {"help", "plain-content"};
    auto a = Args::parse({"--max-model-length", "10"}, values, bools);
    ASSERT_FALSE(a.ok());
    EXPECT_NE(a.status().message().find("unknown flag --max-model-length"), std::string::npos);
    EXPECT_NE(a.status().message().find("did you mean --max-model-len?"), std::string::npos);
    a = Args::parse({"--plain-contnet"}, values, bools);
    ASSERT_FALSE(a.ok());
    EXPECT_NE(a.status().message().find("did you mean --plain-content?"), std::string::npos);
    a = Args::parse({"--served-model"}, values, bools);
    ASSERT_FALSE(a.ok());
    EXPECT_NE(a.status().message().find("did you mean --served-model-name?"), std::string::npos);
    // Nothing close: no suggestion.
    a = Args::parse({"--zzzzzzzzzz"}, values, bools);
    ASSERT_FALSE(a.ok());
    EXPECT_EQ(a.status().message().find("did you mean"), std::string::npos);
}

std::vector<std::string> typical_vllm_line() {
    return {"deepseek-ai/DeepSeek-V4-Flash",
            "--tensor-parallel-size",
            "1",
            "--max-model-len",
            "65536",
            "--reasoning-parser",
            "deepseek_v4",
            "--tool-call-parser",
            "deepseek_v4",
            "--enable-auto-tool-choice",
            "--trust-remote-code",
            "--gpu-memory-utilization",
            "0.9",
            "--served-model-name",
            "ds"};
}

TEST(ServeCompat, TypicalVllmLineKeepsOnlyDeepinferFlags) {
    auto c =
        translate_serve_compat_flags(typical_vllm_line(), {"model", "max-model-len", "served-model-name"});
    ASSERT_TRUE(c.ok()) << c.status().message();
    EXPECT_EQ(c->argv, (std::vector<std::string>{"deepseek-ai/DeepSeek-V4-Flash", "--max-model-len", "65536",
                                                 "--served-model-name", "ds"}));
    // One note per translated flag: tensor-parallel-size, two parsers, two no-op bools, gpu memory.
    EXPECT_EQ(c->notes.size(), 6u);
    bool gpu_note = false;
    for (const auto& n : c->notes) gpu_note = gpu_note || n.find("--kv-cache-memory") != std::string::npos;
    EXPECT_TRUE(gpu_note);
}

TEST(ServeCompat, AliasesAndShortForms) {
    auto c = translate_serve_compat_flags(
        {"--model-path", "/m", "--context-length=4096", "-tp", "1", "--no-enable-prefix-caching"}, {"model"});
    ASSERT_TRUE(c.ok()) << c.status().message();
    EXPECT_EQ(c->argv,
              (std::vector<std::string>{"--model", "/m", "--max-model-len", "4096", "--no-prefix-caching"}));
}

TEST(ServeCompat, RefusalsNameTheFlagAndWhatToDo) {
    auto c = translate_serve_compat_flags({"--tensor-parallel-size", "8"}, {});
    ASSERT_FALSE(c.ok());
    EXPECT_NE(c.status().message().find("--tensor-parallel-size 8"), std::string::npos);
    EXPECT_NE(c.status().message().find("--tensor-parallel-size 1"), std::string::npos);
    c = translate_serve_compat_flags({"--reasoning-parser", "qwen3"}, {});
    ASSERT_FALSE(c.ok());
    EXPECT_NE(c.status().message().find("deepseek_v4"), std::string::npos);
    c = translate_serve_compat_flags({"--gpu-memory-utilization", "1.5"}, {});
    ASSERT_FALSE(c.ok());
    EXPECT_NE(c.status().message().find("(0, 1]"), std::string::npos);
    c = translate_serve_compat_flags({"--swap-space", "4"}, {});
    ASSERT_FALSE(c.ok());
    EXPECT_NE(c.status().message().find("--swap-space"), std::string::npos);
    c = translate_serve_compat_flags({"--kv-cache-dtype", "fp8"}, {});
    ASSERT_FALSE(c.ok());
    EXPECT_NE(c.status().message().find("accepted: auto"), std::string::npos);
    c = translate_serve_compat_flags({"--trust-remote-code=yes"}, {});
    ASSERT_FALSE(c.ok());
    c = translate_serve_compat_flags({"--max-model-len"}, {});
    ASSERT_TRUE(c.ok()); // not a compat flag: left to the parser
}

TEST(ServeCompat, NativeFlagsAreLeftAlone) {
    // A deepinfer flag that shares a compat name is not translated.
    auto c = translate_serve_compat_flags({"--dtype", "bf16"}, {"dtype"});
    ASSERT_TRUE(c.ok());
    EXPECT_EQ(c->argv, (std::vector<std::string>{"--dtype", "bf16"}));
}

} // namespace
} // namespace deepinfer::cli
