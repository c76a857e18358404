// weights::Placement: Checkpoint::weight with kHugePages hands out copies of exactly the stored bytes (weight
// and scales), once per weight, page-aligned, in the huge-page arena; the token embedding and everything
// read through tensor() stay mapped; a file cut short after open is an IoError naming file and tensor.

#include "weights/placement.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "test_files.h"
#include "weights/checkpoint.h"

namespace deepinfer::weights {
namespace {

using testing::make_file;
using testing::StTensor;
using testing::TempDir;
using testing::write_text;

// Deterministic bytes of n (no NaN concerns: only compared, never decoded).
std::string pattern(size_t n, uint32_t seed) {
    std::string s(n, '\0');
    for (size_t i = 0; i < n; ++i) {
        seed = seed * 1664525u + 1013904223u;
        s[i] = static_cast<char>(seed >> 24);
    }
    return s;
}

// A checkpoint with one weight of each linear format, an `embed` table and a norm vector. The FP4 expert is
// 4 MiB, so on a kernel with THP its copy can take a whole 2 MiB page.
struct Fixture {
    TempDir dir;
    QuantizationConfig q{true, 128, 128, 32};
    Fixture() {
        write_text(dir.path() / "model.safetensors",
                   make_file({{"embed.weight", "BF16", {64, 128}, pattern(64 * 128 * 2, 1)},
                              {"head.weight", "BF16", {64, 128}, pattern(64 * 128 * 2, 2)},
                              {"attn.wq.weight", "F8_E4M3", {256, 256}, pattern(256 * 256, 3)},
                              {"attn.wq.scale", "F8_E8M0", {2, 2}, pattern(4, 4)},
                              {"expert.w1.weight", "I8", {2048, 2048}, pattern(2048 * 2048, 5)},
                              {"expert.w1.scale", "F8_E8M0", {2048, 128}, pattern(2048 * 128, 6)},
                              {"norm.weight", "F32", {128}, pattern(128 * 4, 7)}}));
    }
};

struct Case {
    const char* prefix;
    int64_t rows, cols;
};
constexpr Case kCases[] = {{"head", 64, 128}, {"attn.wq", 256, 256}, {"expert.w1", 2048, 4096}};

TEST(Placement, ParsesNames) {
    Placement p = Placement::kHugePages;
    EXPECT_TRUE(parse_placement("mmap", &p));
    EXPECT_EQ(p, Placement::kMmap);
    EXPECT_TRUE(parse_placement("hugepages", &p));
    EXPECT_EQ(p, Placement::kHugePages);
    EXPECT_TRUE(parse_placement("auto", &p));
    EXPECT_EQ(p, huge_pages_available() ? Placement::kHugePages : Placement::kMmap);
    EXPECT_FALSE(parse_placement("huge", &p));
    EXPECT_FALSE(parse_placement("", &p));
    EXPECT_STREQ(placement_name(Placement::kMmap), "mmap");
    EXPECT_STREQ(placement_name(Placement::kHugePages), "hugepages");
}

TEST(Placement, HugePagesCopiesExactlyTheStoredBytesOnce) {
    Fixture f;
    auto mapped = Checkpoint::open(f.dir.str(), Placement::kMmap);
    auto placed = Checkpoint::open(f.dir.str(), Placement::kHugePages);
    ASSERT_TRUE(mapped.ok()) << mapped.status().to_string();
    ASSERT_TRUE(placed.ok()) << placed.status().to_string();
    EXPECT_EQ((*placed)->placement(), Placement::kHugePages);
    size_t expect_placed = 0;
    for (const Case& c : kCases) {
        SCOPED_TRACE(c.prefix);
        auto m = (*mapped)->weight(c.prefix, c.rows, c.cols, f.q);
        auto p = (*placed)->weight(c.prefix, c.rows, c.cols, f.q);
        ASSERT_TRUE(m.ok()) << m.status().to_string();
        ASSERT_TRUE(p.ok()) << p.status().to_string();
        const TensorInfo* t = (*placed)->find(std::string(c.prefix) + ".weight");
        ASSERT_NE(t, nullptr);
        EXPECT_EQ(m->data, (*mapped)->find(t->name)->data); // kMmap: views into the map
        EXPECT_NE(p->data, t->data);                        // kHugePages: a copy
        EXPECT_EQ(reinterpret_cast<uintptr_t>(p->data) % 4096, 0u);
        EXPECT_EQ(p->format, m->format);
        EXPECT_EQ(p->stored_bytes(), m->stored_bytes());
        EXPECT_EQ(std::memcmp(p->data, m->data, t->nbytes), 0);
        expect_placed += t->nbytes;
        if (m->scale != nullptr) {
            const TensorInfo* s = (*placed)->find(std::string(c.prefix) + ".scale");
            ASSERT_NE(s, nullptr);
            EXPECT_NE(p->scale, s->data);
            EXPECT_EQ(std::memcmp(p->scale, m->scale, s->nbytes), 0);
            expect_placed += s->nbytes;
        }
        // A second bind of the same weight gets the same copy, and copies nothing more.
        auto again = (*placed)->weight(c.prefix, c.rows, c.cols, f.q);
        ASSERT_TRUE(again.ok());
        EXPECT_EQ(again->data, p->data);
        EXPECT_EQ(again->scale, p->scale);
    }
    EXPECT_EQ((*placed)->placed_bytes(), expect_placed);
    EXPECT_EQ((*mapped)->placed_bytes(), 0u);
    EXPECT_EQ((*mapped)->placed_huge_bytes(), 0);
    // Huge pages are the kernel's to grant (fragmentation, THP off): reported, not asserted.
    std::printf("placed %zu bytes; AnonHugePages of the arena: %lld bytes (THP %s)\n",
                (*placed)->placed_bytes(), static_cast<long long>((*placed)->placed_huge_bytes()),
                huge_pages_available() ? "available" : "unavailable");
    EXPECT_GE((*placed)->placed_huge_bytes(), 0);
}

TEST(Placement, EmbeddingAndPlainTensorsStayMapped) {
    Fixture f;
    auto ck = Checkpoint::open(f.dir.str(), Placement::kHugePages);
    ASSERT_TRUE(ck.ok()) << ck.status().to_string();
    auto e = (*ck)->weight("embed", 64, 128, f.q);
    ASSERT_TRUE(e.ok()) << e.status().to_string();
    EXPECT_EQ(e->data, (*ck)->find("embed.weight")->data);
    auto n = (*ck)->tensor("norm.weight", core::DType::kF32, {128});
    ASSERT_TRUE(n.ok());
    EXPECT_EQ(n->data, (*ck)->find("norm.weight")->data);
    EXPECT_EQ((*ck)->placed_bytes(), 0u);
}

TEST(Placement, FileCutShortAfterOpenIsAnIoErrorNamingTheTensor) {
    Fixture f;
    auto ck = Checkpoint::open(f.dir.str(), Placement::kHugePages);
    ASSERT_TRUE(ck.ok()) << ck.status().to_string();
    const TensorInfo* t = (*ck)->find("expert.w1.weight");
    ASSERT_NE(t, nullptr);
    // The map is never read past the new end: the copy reads with pread and must notice.
    std::filesystem::resize_file(f.dir.path() / "model.safetensors", t->offset + 100);
    auto w = (*ck)->weight("expert.w1", 2048, 4096, f.q);
    ASSERT_FALSE(w.ok());
    EXPECT_EQ(w.status().code(), core::StatusCode::kIoError) << w.status().to_string();
    EXPECT_NE(w.status().message().find("model.safetensors"), std::string::npos) << w.status().message();
    EXPECT_NE(w.status().message().find("expert.w1.weight"), std::string::npos) << w.status().message();
}

TEST(Placement, DefaultIsSettable) {
    const Placement before = default_placement();
    set_default_placement(Placement::kMmap);
    EXPECT_EQ(default_placement(), Placement::kMmap);
    Fixture f;
    auto ck = Checkpoint::open(f.dir.str());
    ASSERT_TRUE(ck.ok());
    EXPECT_EQ((*ck)->placement(), Placement::kMmap);
    set_default_placement(Placement::kHugePages);
    EXPECT_EQ(default_placement(), Placement::kHugePages);
    set_default_placement(before);
}

} // namespace
} // namespace deepinfer::weights
