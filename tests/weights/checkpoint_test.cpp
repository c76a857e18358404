#include "weights/checkpoint.h"

#include <gtest/gtest.h>

#include "test_files.h"

namespace deepinfer::weights {
namespace {

using core::StatusCode;
using testing::make_file;
using testing::StTensor;
using testing::TempDir;
using testing::to_bytes;
using testing::write_text;

std::string f32_bytes(std::vector<float> v) {
    return to_bytes(v);
}

void expect_error(const core::Status& s, StatusCode code, const std::vector<std::string>& names) {
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.code(), code) << s.to_string();
    for (const auto& n : names) EXPECT_NE(s.message().find(n), std::string::npos) << s.message();
}

// Two shards plus an index: a in shard 1, b and c in shard 2.
void write_sharded(const TempDir& dir, const std::string& index_json) {
    write_text(dir.path() / "model-00001-of-00002.safetensors",
               make_file({{"a", "F32", {2}, f32_bytes({1.0f, 2.0f})}}));
    write_text(
        dir.path() / "model-00002-of-00002.safetensors",
        make_file({{"b", "BF16", {1, 2}, std::string("\x80\x3f\x00\x40", 4)}, {"c", "U8", {3}, "xyz"}}));
    write_text(dir.path() / "model.safetensors.index.json", index_json);
}

const std::string kGoodIndex = R"({"metadata": {"total_size": 15}, "weight_map": {
  "a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors",
  "c": "model-00002-of-00002.safetensors"}})";

TEST(Checkpoint, OpensSingleFile) {
    TempDir dir;
    write_text(dir.path() / "model.safetensors",
               make_file({{"z", "F32", {2, 2}, f32_bytes({1, 2, 3, 4})},
                          {"a", "I64", {1}, to_bytes(std::vector<int64_t>{-7})}}));
    auto ck = Checkpoint::open(dir.str());
    ASSERT_TRUE(ck.ok()) << ck.status().to_string();
    ASSERT_EQ((*ck)->tensors().size(), 2u);
    EXPECT_EQ((*ck)->tensors()[0].name, "a"); // sorted by name
    EXPECT_EQ((*ck)->tensors()[0].file, "model.safetensors");
    EXPECT_EQ((*ck)->mapped_bytes(), std::filesystem::file_size(dir.path() / "model.safetensors"));
    auto z = (*ck)->tensor("z", core::DType::kF32, {2, 2});
    ASSERT_TRUE(z.ok()) << z.status().to_string();
    EXPECT_EQ(z->as<float>()[3], 4.0f);
    auto a = (*ck)->tensor("a", core::DType::kI64, {1});
    ASSERT_TRUE(a.ok());
    EXPECT_EQ(a->as<int64_t>()[0], -7);
    EXPECT_EQ((*ck)->find("nope"), nullptr);
}

TEST(Checkpoint, OpensShards) {
    TempDir dir;
    write_sharded(dir, kGoodIndex);
    auto ck = Checkpoint::open(dir.str());
    ASSERT_TRUE(ck.ok()) << ck.status().to_string();
    ASSERT_EQ((*ck)->tensors().size(), 3u);
    EXPECT_EQ((*ck)->find("a")->file, "model-00001-of-00002.safetensors");
    EXPECT_EQ((*ck)->find("c")->file, "model-00002-of-00002.safetensors");
    auto b = (*ck)->tensor("b", core::DType::kBF16, {1, 2});
    ASSERT_TRUE(b.ok());
    EXPECT_EQ(core::bf16_to_f32(b->as<uint16_t>()[0]), 1.0f);
    EXPECT_EQ(core::bf16_to_f32(b->as<uint16_t>()[1]), 2.0f);
    EXPECT_EQ((*ck)->mapped_bytes(),
              std::filesystem::file_size(dir.path() / "model-00001-of-00002.safetensors") +
                  std::filesystem::file_size(dir.path() / "model-00002-of-00002.safetensors"));
}

TEST(Checkpoint, MissingShard) {
    TempDir dir;
    write_sharded(
        dir, R"({"weight_map": {"a": "model-00001-of-00002.safetensors", "q": "model-00003.safetensors"}})");
    auto ck = Checkpoint::open(dir.str());
    expect_error(ck.status(), StatusCode::kNotFound,
                 {"model.safetensors.index.json", "model-00003.safetensors"});
}

TEST(Checkpoint, TensorMissingFromItsShard) {
    TempDir dir;
    write_sharded(dir, R"({"weight_map": {"a": "model-00001-of-00002.safetensors",
                                          "ghost": "model-00002-of-00002.safetensors"}})");
    expect_error(Checkpoint::open(dir.str()).status(), StatusCode::kDataLoss,
                 {"'ghost'", "model-00002-of-00002.safetensors"});
    // Listed under the wrong shard.
    write_text(dir.path() / "model.safetensors.index.json",
               R"({"weight_map": {"a": "model-00002-of-00002.safetensors"}})");
    expect_error(Checkpoint::open(dir.str()).status(), StatusCode::kDataLoss,
                 {"'a'", "model-00002-of-00002.safetensors"});
}

TEST(Checkpoint, TensorInTwoShards) {
    TempDir dir;
    write_sharded(dir, kGoodIndex);
    write_text(dir.path() / "model-00002-of-00002.safetensors",
               make_file({{"a", "F32", {1}, f32_bytes({9.0f})},
                          {"b", "BF16", {1, 2}, std::string(4, '\0')},
                          {"c", "U8", {3}, "xyz"}}));
    expect_error(Checkpoint::open(dir.str()).status(), StatusCode::kDataLoss,
                 {"'a'", "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"});
}

TEST(Checkpoint, BadIndexAndBadShard) {
    TempDir dir;
    write_sharded(dir, "{\"weight_map\": [");
    expect_error(Checkpoint::open(dir.str()).status(), StatusCode::kDataLoss,
                 {"model.safetensors.index.json"});
    write_text(dir.path() / "model.safetensors.index.json", R"({"weight_map": {"a": 3}})");
    expect_error(Checkpoint::open(dir.str()).status(), StatusCode::kDataLoss,
                 {"model.safetensors.index.json", "'a'"});
    write_text(dir.path() / "model.safetensors.index.json", R"({"weight_map": {"a": "../etc/passwd"}})");
    expect_error(Checkpoint::open(dir.str()).status(), StatusCode::kDataLoss, {"'a'", "../etc/passwd"});
    write_text(dir.path() / "model.safetensors.index.json", R"({"metadata": {}})");
    expect_error(Checkpoint::open(dir.str()).status(), StatusCode::kDataLoss, {"weight_map"});
    // A shard whose header lies: the error names the shard and the tensor.
    write_text(dir.path() / "model.safetensors.index.json", kGoodIndex);
    std::string shard = make_file({{"b", "BF16", {1, 2}, std::string(4, '\0')}, {"c", "U8", {3}, "xyz"}});
    write_text(dir.path() / "model-00002-of-00002.safetensors", shard.substr(0, shard.size() - 2));
    expect_error(Checkpoint::open(dir.str()).status(), StatusCode::kDataLoss,
                 {"model-00002-of-00002.safetensors", "'c'"});
}

TEST(Checkpoint, MisalignedTensor) {
    TempDir dir;
    // Header of 61 bytes: the data area starts at byte 69, so an F32 tensor there is misaligned.
    std::string header = R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})";
    header.resize(61, ' ');
    write_text(dir.path() / "model.safetensors", testing::raw_file(header, std::string(4, '\0')));
    expect_error(Checkpoint::open(dir.str()).status(), StatusCode::kUnimplemented,
                 {"model.safetensors", "'w'", "aligned"});
}

TEST(Checkpoint, NoCheckpoint) {
    TempDir dir;
    expect_error(Checkpoint::open(dir.str()).status(), StatusCode::kNotFound, {dir.str()});
    expect_error(Checkpoint::open(dir.str() + "/nonexistent").status(), StatusCode::kNotFound,
                 {"nonexistent"});
}

TEST(Checkpoint, TensorChecksDtypeAndShape) {
    TempDir dir;
    write_text(dir.path() / "model.safetensors", make_file({{"w", "F32", {2, 3}, std::string(24, '\0')}}));
    auto ck = Checkpoint::open(dir.str());
    ASSERT_TRUE(ck.ok());
    expect_error((*ck)->tensor("w", core::DType::kBF16, {2, 3}).status(), StatusCode::kInvalidArgument,
                 {"model.safetensors", "'w'", "BF16", "F32"});
    expect_error((*ck)->tensor("w", core::DType::kF32, {3, 2}).status(), StatusCode::kInvalidArgument,
                 {"model.safetensors", "'w'", "[2, 3]", "[3, 2]"});
    expect_error((*ck)->tensor("w", core::DType::kF32, {6}).status(), StatusCode::kInvalidArgument, {"'w'"});
    expect_error((*ck)->tensor("v", core::DType::kF32, {6}).status(), StatusCode::kNotFound, {"'v'"});
}

TEST(Checkpoint, WeightBindsEachFormat) {
    TempDir dir;
    write_text(dir.path() / "model.safetensors",
               make_file({{"f.weight", "F32", {2, 3}, std::string(24, '\0')},
                          {"h.weight", "F16", {2, 3}, std::string(12, '\0')},
                          {"q8.weight", "F8_E4M3", {3, 5}, std::string(15, '\0')},
                          {"q8.scale", "F8_E8M0", {2, 3}, std::string(6, '\x7f')},
                          {"q4.weight", "I8", {3, 4}, std::string(12, '\0')},
                          {"q4.scale", "F8_E8M0", {3, 2}, std::string(6, '\x7f')},
                          {"noscale.weight", "F8_E4M3", {2, 2}, std::string(4, '\0')},
                          {"idx.weight", "I64", {1, 1}, std::string(8, '\0')}}));
    auto ck = Checkpoint::open(dir.str());
    ASSERT_TRUE(ck.ok()) << ck.status().to_string();
    QuantizationConfig q{true, 2, 2, 4};
    auto f = (*ck)->weight("f", 2, 3, q);
    ASSERT_TRUE(f.ok());
    EXPECT_EQ(f->format, core::WeightFormat::kF32);
    auto h = (*ck)->weight("h", 2, 3, q);
    ASSERT_TRUE(h.ok());
    EXPECT_EQ(h->format, core::WeightFormat::kF16);
    auto q8 = (*ck)->weight("q8", 3, 5, q);
    ASSERT_TRUE(q8.ok()) << q8.status().to_string();
    EXPECT_EQ(q8->format, core::WeightFormat::kFp8Block);
    EXPECT_EQ(q8->block_rows, 2);
    EXPECT_NE(q8->scale, nullptr);
    auto q4 = (*ck)->weight("q4", 3, 8, q);
    ASSERT_TRUE(q4.ok()) << q4.status().to_string();
    EXPECT_EQ(q4->format, core::WeightFormat::kFp4Group);
    EXPECT_EQ(q4->block_cols, 4);
    // Errors: wrong logical shape, missing scale, wrong scale shape, non-linear dtype, absent weight.
    expect_error((*ck)->weight("f", 3, 2, q).status(), StatusCode::kInvalidArgument,
                 {"'f.weight'", "[3, 2]"});
    expect_error((*ck)->weight("q4", 3, 6, q).status(), StatusCode::kInvalidArgument,
                 {"'q4.weight'", "[3, 3]"});
    expect_error((*ck)->weight("noscale", 2, 2, q).status(), StatusCode::kNotFound, {"'noscale.scale'"});
    expect_error((*ck)->weight("q8", 3, 5, QuantizationConfig{true, 128, 128, 32}).status(),
                 StatusCode::kInvalidArgument, {"'q8.scale'", "[1, 1]"});
    expect_error((*ck)->weight("q4", 3, 8, QuantizationConfig{true, 128, 128, 2}).status(),
                 StatusCode::kInvalidArgument, {"'q4.scale'", "[3, 4]"});
    expect_error((*ck)->weight("idx", 1, 1, q).status(), StatusCode::kInvalidArgument,
                 {"'idx.weight'", "I64"});
    expect_error((*ck)->weight("none", 1, 1, q).status(), StatusCode::kNotFound, {"'none.weight'"});
}

} // namespace
} // namespace deepinfer::weights
