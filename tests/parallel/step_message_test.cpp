#include "parallel/step_message.h"

#include "parallel/expert_load.h"
#include "parallel/fingerprint.h"
#include "parallel/handshake.h"
#include "parallel/local_communicator.h"
#include "parallel/step_channel.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <thread>

namespace deepinfer::parallel {
namespace {

StepMessage sample_step() {
    StepMessage m;
    m.step = 42;
    m.token_ids = {5, 6, 7, 8, 9};
    m.positions = {0, 1, 2, 17, 3000000000ll};
    // {seq_id, slot, start_pos, num_tokens, token_offset, block_table, restore, reset, padding}
    m.sequences = {{1001, 0, 0, 3, 0, {4, 5}, false, true, false},
                   {-7, 2, 17, 1, 3, {9}, true, false, false},
                   {1003, 1, 3000000000ll, 1, 4, {}, false, false, true}};
    m.logits_rows = {2, 3, 4};
    m.ops = {{StepOpKind::kCopyBlock, 4, 9, 0}, {StepOpKind::kCopySlot, 2, 1, 0}};
    return m;
}

TEST(StepMessage, RoundTrips) {
    const StepMessage m = sample_step();
    auto bytes = encode_step_message(m);
    ASSERT_TRUE(bytes.ok()) << bytes.status().to_string();
    auto back = decode_step_message(*bytes);
    ASSERT_TRUE(back.ok()) << back.status().to_string();
    EXPECT_EQ(*back, m);

    StepMessage idle;
    idle.kind = StepKind::kIdle;
    idle.step = 1ull << 40;
    auto ib = encode_step_message(idle);
    ASSERT_TRUE(ib.ok());
    auto iback = decode_step_message(*ib);
    ASSERT_TRUE(iback.ok());
    EXPECT_EQ(*iback, idle);
}

TEST(StepMessage, HeaderIsLittleEndianVersioned) {
    auto bytes = encode_step_message(sample_step());
    ASSERT_TRUE(bytes.ok());
    const auto& b = *bytes;
    EXPECT_EQ(char(b[0]), 'D');
    EXPECT_EQ(char(b[1]), 'I');
    EXPECT_EQ(char(b[2]), 'S');
    EXPECT_EQ(char(b[3]), '1');
    EXPECT_EQ(std::to_integer<int>(b[4]) | std::to_integer<int>(b[5]) << 8, kStepMessageVersion);
    EXPECT_EQ(std::to_integer<int>(b[8]), 42); // step, low byte first
}

TEST(StepMessage, EveryTruncationIsAnError) {
    auto bytes = encode_step_message(sample_step());
    ASSERT_TRUE(bytes.ok());
    for (std::size_t n = 0; n < bytes->size(); ++n) {
        auto r = decode_step_message(std::span<const std::byte>(bytes->data(), n));
        EXPECT_FALSE(r.ok()) << "accepted a message cut to " << n << " bytes";
    }
}

TEST(StepMessage, EveryFlippedByteIsAnError) {
    auto bytes = encode_step_message(sample_step());
    ASSERT_TRUE(bytes.ok());
    for (std::size_t i = 0; i < bytes->size(); ++i) {
        auto copy = *bytes;
        copy[i] ^= std::byte{0x10};
        EXPECT_FALSE(decode_step_message(copy).ok()) << "accepted a flip at byte " << i;
    }
}

TEST(StepMessage, ErrorsNameTheProblem) {
    auto bytes = encode_step_message(sample_step());
    ASSERT_TRUE(bytes.ok());
    auto other_version = *bytes;
    other_version[4] = std::byte{kStepMessageVersion + 1};
    auto r = decode_step_message(other_version);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), core::StatusCode::kFailedPrecondition);
    EXPECT_NE(r.status().message().find("version " + std::to_string(kStepMessageVersion + 1)),
              std::string::npos)
        << r.status().to_string();

    auto longer = *bytes;
    longer.push_back(std::byte{0});
    EXPECT_FALSE(decode_step_message(longer).ok());
}

TEST(StepMessage, EncoderRejectsInconsistentContent) {
    StepMessage m = sample_step();
    m.positions.pop_back();
    EXPECT_EQ(encode_step_message(m).status().code(), core::StatusCode::kDataLoss);
    m = sample_step();
    m.sequences[2].num_tokens = 2;
    auto r = encode_step_message(m);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("cover 6 token rows"), std::string::npos) << r.status().to_string();
    m = sample_step();
    m.sequences[2].token_offset = 3;
    r = encode_step_message(m);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("sequences[2].token_offset"), std::string::npos)
        << r.status().to_string();
    m = sample_step();
    m.logits_rows.push_back(5);
    r = encode_step_message(m);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("logits_rows[3]"), std::string::npos) << r.status().to_string();
    m = sample_step();
    m.kind = StepKind::kShutdown;
    EXPECT_FALSE(encode_step_message(m).ok());
    m = sample_step();
    m.ops[1].b = -1;
    r = encode_step_message(m);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("ops[1]"), std::string::npos) << r.status().to_string();
    m = sample_step();
    m.ops[0].kind = static_cast<StepOpKind>(9);
    EXPECT_FALSE(encode_step_message(m).ok());
    StepMessage idle;
    idle.kind = StepKind::kIdle;
    idle.ops = {{StepOpKind::kCopySlot, 0, 1, 0}};
    EXPECT_FALSE(encode_step_message(idle).ok()); // ops travel in forward or control steps only
}

TEST(StepMessage, ControlStepCarriesOpsOnly) {
    StepMessage m;
    m.kind = StepKind::kControl;
    m.ops = {{StepOpKind::kConfigureRuntime, 64, 4, 0}, {StepOpKind::kInitKvCache, 256, 12, 4}};
    auto bytes = encode_step_message(m);
    ASSERT_TRUE(bytes.ok()) << bytes.status().to_string();
    auto back = decode_step_message(*bytes);
    ASSERT_TRUE(back.ok()) << back.status().to_string();
    EXPECT_EQ(*back, m);
    m.token_ids = {1};
    m.positions = {0};
    m.sequences = {{1, 0, 0, 1, 0, {0}, false, false, false}};
    EXPECT_FALSE(encode_step_message(m).ok());
}

TEST(StepChannel, LeaderStampsConsecutiveSteps) {
    LocalCommunicator c;
    StepChannel ch(c);
    EXPECT_TRUE(ch.is_leader());
    StepMessage m = sample_step();
    m.step = 999; // overwritten by the channel
    ASSERT_TRUE(ch.publish(m).ok());
    EXPECT_EQ(ch.last_step(), 1u);
    ASSERT_TRUE(ch.publish_idle().ok());
    ASSERT_TRUE(ch.publish_shutdown().ok());
    EXPECT_EQ(ch.last_step(), 3u);
    m.positions.clear();
    EXPECT_FALSE(ch.publish(m).ok());
    EXPECT_EQ(ch.last_step(), 3u);
}

TEST(StepChannel, KeepAlivePublishesOnlyAfterAThirdOfTheDeadline) {
    LocalCommunicator c;
    StepChannel ch(c);
    c.set_deadline(std::chrono::hours(1));
    ASSERT_TRUE(ch.publish(sample_step()).ok());
    ASSERT_TRUE(ch.keep_alive().ok());
    EXPECT_EQ(ch.last_step(), 1u); // published just now: nothing to do
    c.set_deadline(std::chrono::milliseconds(3));
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    ASSERT_TRUE(ch.keep_alive().ok());
    EXPECT_EQ(ch.last_step(), 2u); // quiet for 2 ms > 3 ms / 3: an idle step went out
}

TEST(Fingerprint, CoversConfigAndSafetensorsHeadersButNotTensorData) {
    const std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) / "di_fingerprint_test";
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    auto write = [&](const char* name, const std::string& bytes) {
        std::ofstream(dir / name, std::ios::binary) << bytes;
    };
    auto safetensors = [](const std::string& header, const std::string& data) {
        std::string s(8, '\0');
        for (int i = 0; i < 8; ++i) s[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
        return s + header + data;
    };
    write("config.json", R"({"hidden_size": 64})");
    write("model.safetensors",
          safetensors(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", "abcdefgh"));
    auto base = fingerprint_checkpoint_dir(dir.string());
    ASSERT_TRUE(base.ok()) << base.status().to_string();
    auto again = fingerprint_checkpoint_dir(dir.string());
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(*base, *again);

    write("model.safetensors",
          safetensors(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", "zzzzzzzz"));
    auto data_changed = fingerprint_checkpoint_dir(dir.string());
    ASSERT_TRUE(data_changed.ok());
    EXPECT_EQ(*data_changed, *base) << "tensor data is not read (a real checkpoint is hundreds of GB)";

    write("model.safetensors",
          safetensors(R"({"w":{"dtype":"BF16","shape":[4],"data_offsets":[0,8]}})", "abcdefgh"));
    auto header_changed = fingerprint_checkpoint_dir(dir.string());
    ASSERT_TRUE(header_changed.ok());
    EXPECT_NE(*header_changed, *base);

    write("config.json", R"({"hidden_size": 65})");
    auto config_changed = fingerprint_checkpoint_dir(dir.string());
    ASSERT_TRUE(config_changed.ok());
    EXPECT_NE(*config_changed, *header_changed);

    write("model.safetensors", std::string("\xff\xff\x00\x00\x00\x00\x00\x00{}", 10));
    auto bad = fingerprint_checkpoint_dir(dir.string());
    ASSERT_FALSE(bad.ok());
    EXPECT_EQ(bad.status().code(), core::StatusCode::kDataLoss);
    EXPECT_NE(bad.status().message().find("model.safetensors"), std::string::npos)
        << bad.status().to_string();

    auto missing = fingerprint_checkpoint_dir((dir / "nope").string());
    EXPECT_EQ(missing.status().code(), core::StatusCode::kNotFound);
    std::filesystem::remove_all(dir);
}

TEST(Fingerprint, TellsTheShippedTinyModelsApart) {
    auto a = fingerprint_checkpoint_dir(std::string(DEEPINFER_SOURCE_DIR) + "/models/tiny-v4");
    auto b = fingerprint_checkpoint_dir(std::string(DEEPINFER_SOURCE_DIR) + "/models/tiny-v4-fp8");
    ASSERT_TRUE(a.ok()) << a.status().to_string();
    ASSERT_TRUE(b.ok()) << b.status().to_string();
    EXPECT_NE(*a, *b);
}

TEST(Handshake, SingleProcessChecksTheLayoutSize) {
    LocalCommunicator c;
    RankIdentity id;
    id.checkpoint_hash = 1;
    id.layout = *make_parallel_layout(1, 1, 1, 1);
    EXPECT_TRUE(handshake(c, id).ok());
    id.layout = *make_parallel_layout(2, 1, 1, 2);
    Status s = handshake(c, id);
    EXPECT_EQ(s.code(), core::StatusCode::kFailedPrecondition);
    EXPECT_NE(s.message().find("layout is for 2 ranks, the job has 1"), std::string::npos) << s.to_string();
}

TEST(ExpertLoad, ImbalanceIsMaxOverMean) {
    const std::int64_t even[4] = {5, 5, 5, 5};
    const std::int64_t skew[4] = {8, 0, 0, 0};
    const std::int64_t none[2] = {0, 0};
    EXPECT_DOUBLE_EQ(imbalance(even), 1.0);
    EXPECT_DOUBLE_EQ(imbalance(skew), 4.0);
    EXPECT_DOUBLE_EQ(imbalance(none), 0.0);
}

TEST(ExpertLoad, ExpertsMapToContiguousEpRanks) {
    ExpertLoadStats s(10, 4, 1); // ranges [0,2) [2,5) [5,7) [7,10)
    const int want[10] = {0, 0, 1, 1, 1, 2, 2, 3, 3, 3};
    for (int e = 0; e < 10; ++e) EXPECT_EQ(s.expert_rank(e), want[e]) << "expert " << e;
}

TEST(ExpertLoad, ExchangesOnlyOnIntervalStepsAndResets) {
    LocalCommunicator c;
    ExpertLoadStats s(4, 2, 3);
    s.record(0, 6);
    s.record(3);
    s.record(3);
    ASSERT_TRUE(s.on_step(c, 1).ok());
    ASSERT_TRUE(s.on_step(c, 2).ok());
    EXPECT_TRUE(s.latest().expert_tokens.empty());
    ASSERT_TRUE(s.on_step(c, 3).ok());
    EXPECT_EQ(s.latest().step, 3u);
    EXPECT_EQ(s.latest().expert_tokens, (std::vector<std::int64_t>{6, 0, 0, 2}));
    EXPECT_EQ(s.latest().ep_rank_tokens, (std::vector<std::int64_t>{6, 2}));
    EXPECT_DOUBLE_EQ(s.latest().expert_imbalance, 3.0);
    EXPECT_DOUBLE_EQ(s.latest().ep_rank_imbalance, 1.5);
    ASSERT_TRUE(s.on_step(c, 6).ok());
    EXPECT_EQ(s.latest().expert_tokens, (std::vector<std::int64_t>{0, 0, 0, 0}));
}

// /metrics: the report accumulates each new exchange once, and its text has one series per expert and per
// EP rank with the values of the latest window and the totals.
TEST(ExpertLoad, ReportAccumulatesExchangesAndRendersPrometheus) {
    LocalCommunicator one;
    ExpertLoadStats s(4, 2, 2);
    ExpertLoadReport r;
    s.record(0, 3);
    s.record(3, 1);
    ASSERT_TRUE(s.on_step(one, 2).ok());
    r.add(s.latest());
    r.add(s.latest()); // the same exchange again: ignored
    s.record(1, 2);
    ASSERT_TRUE(s.on_step(one, 4).ok());
    r.add(s.latest());
    EXPECT_EQ(r.exchanges, 2u);
    EXPECT_EQ(r.expert_tokens_total, (std::vector<std::int64_t>{3, 2, 0, 1}));
    EXPECT_EQ(r.latest.expert_tokens, (std::vector<std::int64_t>{0, 2, 0, 0}));
    const std::string text = expert_load_prometheus(r);
    for (const char* line :
         {"deepinfer_ep_load_exchanges_total 2\n", "deepinfer_ep_load_step 4\n",
          "deepinfer_ep_expert_tokens{expert=\"1\"} 2\n", "deepinfer_ep_expert_tokens{expert=\"0\"} 0\n",
          "deepinfer_ep_expert_tokens_total{expert=\"0\"} 3\n",
          "deepinfer_ep_expert_tokens_total{expert=\"3\"} 1\n", "deepinfer_ep_rank_tokens{ep_rank=\"0\"} 2\n",
          "deepinfer_ep_rank_tokens{ep_rank=\"1\"} 0\n", "deepinfer_ep_rank_imbalance 2\n",
          "# TYPE deepinfer_ep_expert_tokens_total counter\n"})
        EXPECT_NE(text.find(line), std::string::npos) << line << " missing from\n" << text;
    EXPECT_EQ(text.find("expert=\"4\""), std::string::npos);
}

} // namespace
} // namespace deepinfer::parallel
