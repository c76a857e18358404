#include "model/sha256.h"

#include <gtest/gtest.h>

#include <string>

namespace deepinfer::model {
namespace {

TEST(Sha256, KnownVectors) {
    EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    // 56 bytes: the length no longer fits the first padding block
    EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
              "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    EXPECT_EQ(sha256_hex(std::string(1000, 'a')),
              "41edece42d63e8d9bf515a9ba6932e1c20cbc9f5a5d134645adb5db1b9737ea3");
}

TEST(Sha256, FileMatchesTheOracleManifest) {
    // tests/fixtures/tiny-v41/manifest.json "files": models/tiny-v41/tokenizer.json
    auto h = sha256_file_hex(std::string(DEEPINFER_SOURCE_DIR) + "/models/tiny-v41/tokenizer.json");
    ASSERT_TRUE(h.ok());
    EXPECT_EQ(*h, "8301133dbdf0c160bb23b2d160e81c1301d8b677f4dade88e67a09d8cca3a720");
    auto missing = sha256_file_hex("/nonexistent/tokenizer.json");
    ASSERT_FALSE(missing.ok());
    EXPECT_NE(missing.status().message().find("/nonexistent/tokenizer.json"), std::string::npos);
}

} // namespace
} // namespace deepinfer::model
