// SafetensorsWriter output must load through the validating loader: tensors of mixed widths written in
// any order come back aligned, with their values, names, shapes and metadata-free header intact.

#include <cstdint>
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "test_files.h"
#include "weights/checkpoint.h"
#include "weights/safetensors_writer.h"

using namespace deepinfer;

TEST(SafetensorsWriter, MixedWidthsRoundTripThroughTheLoader) {
    weights::testing::TempDir dir;
    weights::SafetensorsWriter w;
    std::vector<uint8_t> odd = {1, 2, 3}; // 3 bytes: would misalign what follows
    std::vector<float> f = {1.5f, -2.0f, 3.25f};
    std::vector<int64_t> i = {7, -8};
    std::vector<uint16_t> h = {0x3f80, 0x4000, 0xbf80}; // bf16 1, 2, -1
    w.add("a.scale", core::DType::kF8E8M0, core::Shape{3}, odd.data());
    w.add_f32("b.weight", core::Shape{3}, f);
    w.add("c.norm", core::DType::kBF16, core::Shape{3}, h.data());
    w.add_i64("d.tid2eid", core::Shape{2, 1}, i);
    ASSERT_TRUE(w.write((dir.path() / "model.safetensors").string()).ok());

    auto ck = weights::Checkpoint::open(dir.str());
    ASSERT_TRUE(ck.ok()) << ck.status().to_string();
    ASSERT_EQ((*ck)->tensors().size(), 4u);
    auto tf = (*ck)->tensor("b.weight", core::DType::kF32, core::Shape{3});
    auto ti = (*ck)->tensor("d.tid2eid", core::DType::kI64, core::Shape{2, 1});
    auto th = (*ck)->tensor("c.norm", core::DType::kBF16, core::Shape{3});
    auto to = (*ck)->tensor("a.scale", core::DType::kF8E8M0, core::Shape{3});
    ASSERT_TRUE(tf.ok() && ti.ok() && th.ok() && to.ok());
    EXPECT_EQ(std::memcmp(tf->data, f.data(), 12), 0);
    EXPECT_EQ(std::memcmp(ti->data, i.data(), 16), 0);
    EXPECT_EQ(std::memcmp(th->data, h.data(), 6), 0);
    EXPECT_EQ(std::memcmp(to->data, odd.data(), 3), 0);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(ti->data) % 8, 0u);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(tf->data) % 4, 0u);
}
