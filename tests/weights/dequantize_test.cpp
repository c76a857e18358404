// dequantize() against values computed here from the format definitions (spec §4.2), not from core's
// codecs: e4m3fn = 1-4-3 bias 7, e8m0 = 2^(b-127), e2m1 from the literal code table.
#include <gtest/gtest.h>

#include <cmath>

#include "test_files.h"
#include "weights/checkpoint.h"

namespace deepinfer::weights {
namespace {

using testing::make_file;
using testing::TempDir;
using testing::to_bytes;
using testing::write_text;

double e4m3_expected(uint8_t b) {
    const int sign = b >> 7, exp = (b >> 3) & 0xf, man = b & 7;
    double v = exp == 0 ? std::ldexp(man / 8.0, -6) : std::ldexp(1.0 + man / 8.0, exp - 7);
    return sign ? -v : v;
}

double e8m0_expected(uint8_t b) {
    return std::ldexp(1.0, static_cast<int>(b) - 127);
}

constexpr double kFp4Table[16] = {0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6};

std::unique_ptr<Checkpoint> open_checkpoint(const TempDir& dir) {
    auto ck = Checkpoint::open(dir.str());
    EXPECT_TRUE(ck.ok()) << ck.status().to_string();
    return ck.ok() ? std::move(ck).value() : nullptr;
}

TEST(Dequantize, Fp8BlocksWithPartialEdges) {
    // [5, 7] with 2x3 blocks: scales [3, 3]; the last block row has 1 row, the last block column 1 col.
    const int64_t rows = 5, cols = 7;
    std::string data(rows * cols, '\0');
    for (int64_t i = 0; i < rows * cols; ++i) {
        uint8_t b = static_cast<uint8_t>((i * 37 + 11) & 0xff);
        if ((b & 0x7f) == 0x7f) b ^= 1; // keep clear of NaN codes
        data[i] = static_cast<char>(b);
    }
    const std::string scales = {'\x7f', '\x80', '\x7e', '\x70', '\x85', '\x79', '\x81', '\x7b', '\x90'};
    TempDir dir;
    write_text(dir.path() / "model.safetensors", make_file({{"w.weight", "F8_E4M3", {rows, cols}, data},
                                                            {"w.scale", "F8_E8M0", {3, 3}, scales}}));
    auto ck = open_checkpoint(dir);
    ASSERT_NE(ck, nullptr);
    auto w = ck->weight("w", rows, cols, QuantizationConfig{true, 2, 3, 32});
    ASSERT_TRUE(w.ok()) << w.status().to_string();
    std::vector<float> out = dequantize(*w);
    ASSERT_EQ(out.size(), static_cast<size_t>(rows * cols));
    for (int64_t r = 0; r < rows; ++r) {
        for (int64_t c = 0; c < cols; ++c) {
            const uint8_t b = static_cast<uint8_t>(data[r * cols + c]);
            const uint8_t s = static_cast<uint8_t>(scales[(r / 2) * 3 + c / 3]);
            const double want = e4m3_expected(b) * e8m0_expected(s);
            EXPECT_EQ(out[r * cols + c], static_cast<float>(want)) << "r=" << r << " c=" << c;
        }
    }
    // Spot values worked out by hand: byte 0x38 = 1.0, 0x40 = 2.0, 0xc4 = -3.0, 0x7e = 448.
    EXPECT_EQ(e4m3_expected(0x38), 1.0);
    EXPECT_EQ(e4m3_expected(0xc4), -3.0);
    EXPECT_EQ(e4m3_expected(0x7e), 448.0);
}

TEST(Dequantize, Fp8HandPickedValues) {
    // [2, 2] one block, scale 2^1: {1, 2, -3, 448} * 2.
    TempDir dir;
    write_text(dir.path() / "model.safetensors",
               make_file({{"w.weight", "F8_E4M3", {2, 2}, std::string("\x38\x40\xc4\x7e", 4)},
                          {"w.scale", "F8_E8M0", {1, 1}, "\x80"}}));
    auto ck = open_checkpoint(dir);
    ASSERT_NE(ck, nullptr);
    auto w = ck->weight("w", 2, 2, QuantizationConfig{});
    ASSERT_TRUE(w.ok()) << w.status().to_string();
    EXPECT_EQ(dequantize(*w), (std::vector<float>{2.0f, 4.0f, -6.0f, 896.0f}));
}

TEST(Dequantize, Fp4Groups) {
    // [3, 12] packed into [3, 6] bytes, groups of 4 columns: scales [3, 3].
    const int64_t rows = 3, cols = 12;
    std::string data(rows * cols / 2, '\0');
    for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>((i * 73 + 5) & 0xff);
    const std::string scales = {'\x7f', '\x80', '\x7d', '\x83', '\x7f', '\x76', '\x7c', '\x81', '\x7f'};
    TempDir dir;
    write_text(dir.path() / "model.safetensors", make_file({{"e.weight", "I8", {rows, cols / 2}, data},
                                                            {"e.scale", "F8_E8M0", {rows, 3}, scales}}));
    auto ck = open_checkpoint(dir);
    ASSERT_NE(ck, nullptr);
    auto w = ck->weight("e", rows, cols, QuantizationConfig{true, 128, 128, 4});
    ASSERT_TRUE(w.ok()) << w.status().to_string();
    std::vector<float> out = dequantize(*w);
    ASSERT_EQ(out.size(), static_cast<size_t>(rows * cols));
    for (int64_t r = 0; r < rows; ++r) {
        for (int64_t c = 0; c < cols; ++c) {
            const uint8_t byte = static_cast<uint8_t>(data[r * cols / 2 + c / 2]);
            const uint8_t code = c % 2 == 0 ? (byte & 0xf) : (byte >> 4); // element 2k in the low nibble
            const double want = kFp4Table[code] * e8m0_expected(static_cast<uint8_t>(scales[r * 3 + c / 4]));
            EXPECT_EQ(out[r * cols + c], static_cast<float>(want)) << "r=" << r << " c=" << c;
        }
    }
}

TEST(Dequantize, Fp4HandPickedValues) {
    // One row of 4: byte 0x72 = low 2 (1.0), high 7 (6.0); byte 0x9d = low 0xd (-3.0), high 9 (-0.5).
    TempDir dir;
    write_text(dir.path() / "model.safetensors",
               make_file({{"e.weight", "I8", {1, 2}, std::string("\x72\x9d", 2)},
                          {"e.scale", "F8_E8M0", {1, 1}, "\x7e"}}));
    auto ck = open_checkpoint(dir);
    ASSERT_NE(ck, nullptr);
    auto w = ck->weight("e", 1, 4, QuantizationConfig{true, 128, 128, 32});
    ASSERT_TRUE(w.ok()) << w.status().to_string();
    EXPECT_EQ(dequantize(*w), (std::vector<float>{0.5f, 3.0f, -1.5f, -0.25f}));
}

TEST(Dequantize, FloatFormats) {
    TempDir dir;
    // bf16 0x3f80 = 1, 0xc040 = -3; f16 0x3c00 = 1, 0xc200 = -3, 0x0001 = 2^-24, 0x7bff = 65504.
    write_text(
        dir.path() / "model.safetensors",
        make_file(
            {{"b.weight", "BF16", {1, 2}, to_bytes(std::vector<uint16_t>{0x3f80, 0xc040})},
             {"h.weight", "F16", {2, 2}, to_bytes(std::vector<uint16_t>{0x3c00, 0xc200, 0x0001, 0x7bff})},
             {"f.weight", "F32", {1, 3}, to_bytes(std::vector<float>{0.1f, -7.0f, 1e30f})}}));
    auto ck = open_checkpoint(dir);
    ASSERT_NE(ck, nullptr);
    QuantizationConfig q;
    auto b = ck->weight("b", 1, 2, q);
    ASSERT_TRUE(b.ok());
    EXPECT_EQ(dequantize(*b), (std::vector<float>{1.0f, -3.0f}));
    auto h = ck->weight("h", 2, 2, q);
    ASSERT_TRUE(h.ok());
    EXPECT_EQ(dequantize(*h), (std::vector<float>{1.0f, -3.0f, std::ldexp(1.0f, -24), 65504.0f}));
    auto f = ck->weight("f", 1, 3, q);
    ASSERT_TRUE(f.ok());
    EXPECT_EQ(dequantize(*f), (std::vector<float>{0.1f, -7.0f, 1e30f}));
}

} // namespace
} // namespace deepinfer::weights
