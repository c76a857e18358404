#include "weights/safetensors.h"

#include <gtest/gtest.h>

#include "test_files.h"

namespace deepinfer::weights {
namespace {

using core::StatusCode;
using testing::make_file;
using testing::raw_file;
using testing::StTensor;
using testing::to_bytes;

constexpr const char* kFile = "shard-7.safetensors";

core::Result<SafetensorsHeader> parse(const std::string& image) {
    return parse_header(reinterpret_cast<const uint8_t*>(image.data()), image.size(), kFile);
}

// Asserts the parse fails with `code` and that the message names the file and every string in `names`.
void expect_error(const std::string& image, StatusCode code, std::vector<std::string> names) {
    auto r = parse(image);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), code) << r.status().to_string();
    EXPECT_NE(r.status().message().find(kFile), std::string::npos) << r.status().message();
    for (const auto& n : names)
        EXPECT_NE(r.status().message().find(n), std::string::npos) << r.status().message();
}

std::string entry(const std::string& name, const std::string& body) {
    return "\"" + name + "\":{" + body + "}";
}

TEST(SafetensorsHeader, ParsesGoodHeader) {
    std::string image = make_file({{"a", "F32", {2, 3}, to_bytes(std::vector<float>{1, 2, 3, 4, 5, 6})},
                                   {"b", "BF16", {4}, std::string(8, '\1')},
                                   {"c", "F8_E4M3", {}, "\x38"},
                                   {"d", "I64", {0, 5}, ""}});
    auto r = parse(image);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    ASSERT_EQ(r->tensors.size(), 4u);
    EXPECT_EQ(r->metadata.at("format"), "pt");
    const HeaderEntry& a = r->tensors[0];
    EXPECT_EQ(a.name, "a");
    EXPECT_EQ(a.dtype, core::DType::kF32);
    EXPECT_EQ(a.shape, (core::Shape{2, 3}));
    EXPECT_EQ(a.begin, 0u);
    EXPECT_EQ(a.end, 24u);
    EXPECT_EQ(r->tensors[1].begin, 24u);
    EXPECT_EQ(r->tensors[2].shape.ndim(), 0);
    EXPECT_EQ(r->tensors[2].end - r->tensors[2].begin, 1u);
    EXPECT_EQ(r->tensors[3].shape, (core::Shape{0, 5}));
    EXPECT_EQ(r->tensors[2].begin, 32u);
    EXPECT_EQ(r->tensors[3].begin, 40u); // the writer aligns every tensor to 8 bytes
    EXPECT_EQ(r->data_size, 40u);
    EXPECT_EQ(r->data_offset % 8, 0u);
    EXPECT_EQ(r->data_offset, image.size() - r->data_size);
}

TEST(SafetensorsHeader, AcceptsEveryDtype) {
    const std::vector<std::pair<std::string, size_t>> dtypes = {
        {"F32", 4}, {"BF16", 2}, {"F16", 2}, {"F8_E4M3", 1}, {"F8_E8M0", 1},
        {"I8", 1},  {"U8", 1},   {"I32", 4}, {"I64", 8},     {"BOOL", 1}};
    std::vector<StTensor> ts;
    for (const auto& [d, size] : dtypes) ts.push_back({"t_" + d, d, {3}, std::string(3 * size, '\0')});
    auto r = parse(make_file(ts));
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    ASSERT_EQ(r->tensors.size(), dtypes.size());
    for (const HeaderEntry& e : r->tensors) {
        EXPECT_EQ("t_" + std::string(core::dtype_name(e.dtype)), e.name);
        EXPECT_EQ(e.shape, core::Shape{3});
    }
}

TEST(SafetensorsHeader, TruncatedBeforeLength) {
    expect_error(std::string("\x10\x00\x00", 3), StatusCode::kDataLoss, {"truncated"});
    expect_error("", StatusCode::kDataLoss, {"truncated"});
}

TEST(SafetensorsHeader, HeaderLengthBeyondFile) {
    std::string good = make_file({{"w", "F32", {1}, std::string(4, '\0')}});
    expect_error(good.substr(0, good.size() - 4 - 10), StatusCode::kDataLoss, {"header length"});
    expect_error(testing::length_prefix(~0ull) + "{}", StatusCode::kDataLoss, {"header length"});
}

TEST(SafetensorsHeader, TruncatedDataArea) {
    std::string good = make_file({{"w", "F32", {4}, std::string(16, '\0')}});
    expect_error(good.substr(0, good.size() - 1), StatusCode::kDataLoss, {"'w'", "data_offsets"});
}

TEST(SafetensorsHeader, HeaderNotJson) {
    expect_error(raw_file("{\"w\": {\"dtype\": ", ""), StatusCode::kDataLoss, {"JSON"});
    expect_error(raw_file("[1, 2, 3]", ""), StatusCode::kDataLoss, {"JSON object"});
    expect_error(raw_file(std::string(200, '[') + std::string(200, ']'), ""), StatusCode::kDataLoss,
                 {"nested"});
}

TEST(SafetensorsHeader, MissingOrMistypedFields) {
    const std::string d4(4, '\0');
    expect_error(raw_file("{" + entry("w", "\"shape\":[1],\"data_offsets\":[0,4]") + "}", d4),
                 StatusCode::kDataLoss, {"'w'", "'dtype'"});
    expect_error(raw_file("{" + entry("w", "\"dtype\":\"F32\",\"data_offsets\":[0,4]") + "}", d4),
                 StatusCode::kDataLoss, {"'w'", "'shape'"});
    expect_error(raw_file("{" + entry("w", "\"dtype\":\"F32\",\"shape\":[1]") + "}", d4),
                 StatusCode::kDataLoss, {"'w'", "'data_offsets'"});
    expect_error(raw_file("{" + entry("w", "\"dtype\":7,\"shape\":[1],\"data_offsets\":[0,4]") + "}", d4),
                 StatusCode::kDataLoss, {"'w'", "'dtype'"});
    expect_error(raw_file("{" + entry("w", "\"dtype\":\"F32\",\"shape\":1,\"data_offsets\":[0,4]") + "}", d4),
                 StatusCode::kDataLoss, {"'w'", "'shape'"});
    expect_error(
        raw_file("{" + entry("w", "\"dtype\":\"F32\",\"shape\":[1.5],\"data_offsets\":[0,4]") + "}", d4),
        StatusCode::kDataLoss, {"'w'", "'shape'"});
    expect_error(raw_file("{" + entry("w", "\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0]") + "}", d4),
                 StatusCode::kDataLoss, {"'w'", "'data_offsets'"});
    expect_error(
        raw_file("{" + entry("w", "\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,\"4\"]") + "}", d4),
        StatusCode::kDataLoss, {"'w'", "'data_offsets'"});
    expect_error(raw_file("{\"w\":[1]}", d4), StatusCode::kDataLoss, {"'w'", "not an object"});
    expect_error(raw_file("{\"__metadata__\":{\"k\":3}}", ""), StatusCode::kDataLoss, {"__metadata__.k"});
}

TEST(SafetensorsHeader, NegativeAndHugeDims) {
    const std::string d4(4, '\0');
    expect_error(
        raw_file("{" + entry("w", "\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]") + "}", d4),
        StatusCode::kDataLoss, {"'w'", "negative"});
    // 2^32 x 2^32 elements: numel overflows 64 bits.
    expect_error(
        raw_file(
            "{" + entry("w", "\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,4]") +
                "}",
            d4),
        StatusCode::kDataLoss, {"'w'", "overflow"});
    // numel fits, numel x 8 bytes does not.
    expect_error(
        raw_file("{" +
                     entry("w", "\"dtype\":\"I64\",\"shape\":[4611686018427387904],\"data_offsets\":[0,4]") +
                     "}",
                 d4),
        StatusCode::kDataLoss, {"'w'", "overflow"});
    expect_error(
        raw_file("{" + entry("w", "\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1],\"data_offsets\":[0,4]") + "}",
                 d4),
        StatusCode::kDataLoss, {"'w'", "dims"});
}

TEST(SafetensorsHeader, LyingOffsets) {
    const std::string d8(8, '\0');
    auto f = [&](const std::string& offsets, const std::string& shape) {
        return raw_file(
            "{" + entry("w", "\"dtype\":\"F32\",\"shape\":" + shape + ",\"data_offsets\":" + offsets) + "}",
            d8);
    };
    expect_error(f("[4,12]", "[2]"), StatusCode::kDataLoss, {"'w'", "beyond the data area"});
    expect_error(f("[8,4]", "[1]"), StatusCode::kDataLoss, {"'w'", "end before begin"});
    expect_error(f("[0,8]", "[3]"), StatusCode::kDataLoss, {"'w'", "needs 12"});
    expect_error(f("[0,4]", "[2]"), StatusCode::kDataLoss, {"'w'", "needs 8"});
    expect_error(f("[18446744073709551615,4]", "[1]"), StatusCode::kDataLoss, {"'w'"});
}

TEST(SafetensorsHeader, UnknownDtype) {
    expect_error(raw_file("{" + entry("w", "\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8]") + "}",
                          std::string(8, '\0')),
                 StatusCode::kUnimplemented, {"'w'", "F64"});
}

TEST(SafetensorsHeader, DuplicateNames) {
    std::string e = entry("w", "\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]");
    expect_error(raw_file("{" + e + "," + e + "}", "x"), StatusCode::kDataLoss, {"'w'", "twice"});
}

TEST(SafetensorsFile, MapsAndReads) {
    testing::TempDir dir;
    const std::vector<float> values = {0.5f, -2.0f, 3.25f};
    testing::write_text(dir.path() / "x.safetensors", make_file({{"v", "F32", {3}, to_bytes(values)}}));
    auto f = SafetensorsFile::open((dir.path() / "x.safetensors").string(), "x.safetensors");
    ASSERT_TRUE(f.ok()) << f.status().to_string();
    const auto& h = (*f)->header();
    ASSERT_EQ(h.tensors.size(), 1u);
    const float* p = static_cast<const float*>((*f)->data(h.tensors[0]));
    EXPECT_EQ(p[0], 0.5f);
    EXPECT_EQ(p[1], -2.0f);
    EXPECT_EQ(p[2], 3.25f);
    EXPECT_EQ((*f)->file_size(), std::filesystem::file_size(dir.path() / "x.safetensors"));
}

TEST(SafetensorsFile, MissingAndEmptyFiles) {
    testing::TempDir dir;
    auto missing = SafetensorsFile::open((dir.path() / "nope.safetensors").string(), "nope.safetensors");
    ASSERT_FALSE(missing.ok());
    EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
    EXPECT_NE(missing.status().message().find("nope.safetensors"), std::string::npos);
    testing::write_text(dir.path() / "empty.safetensors", "");
    auto empty = SafetensorsFile::open((dir.path() / "empty.safetensors").string(), "empty.safetensors");
    ASSERT_FALSE(empty.ok());
    EXPECT_EQ(empty.status().code(), StatusCode::kDataLoss);
    EXPECT_NE(empty.status().message().find("empty.safetensors"), std::string::npos);
}

} // namespace
} // namespace deepinfer::weights
