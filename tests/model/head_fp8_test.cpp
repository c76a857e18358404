// The LM head held as FP8 128x128 blocks under fast numerics (model/lm_head.h, docs/kernels.md "fast: the
// LM head as FP8 blocks"): the quantized codes and scales are quantize_fp8_block's, the model binds them
// under fast (and only then, unless --head-fp8 says otherwise), and the logits of every golden prompt of the
// tiny models stay within a stated bound of the transformers goldens (the exact numerics' reference).

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <numeric>

#include "golden_util.h"
#include "kernels/cpu/gemm_int8.h"
#include "kernels/cpu/linear.h"
#include "model/deepseek_v41/model.h"
#include "model/int8_panels.h"
#include "model/lm_head.h"
#include "model/sequence_runner.h"
#include "weights/quantize.h"
#include "weights/safetensors_writer.h"

namespace deepinfer::testing {
namespace {

using kernels::Numerics;
using model::HeadFp8;

// Sets the process numerics and head mode for one test; restores the defaults (exact, auto) after.
class ScopedHeadMode {
public:
    ScopedHeadMode(Numerics num, HeadFp8 mode) {
        kernels::cpu::set_default_numerics(num);
        model::set_head_fp8(mode);
    }
    ~ScopedHeadMode() {
        kernels::cpu::set_default_numerics(Numerics::kExact);
        model::set_head_fp8(HeadFp8::kAuto);
    }
};

// Logits of every golden prompt with the FP8 head (exact kernels elsewhere) against the goldens: max|Δ| /
// max|ref| over each prompt's positions. The bound: e4m3 keeps 3 mantissa bits (relative rounding <= 2^-4
// per weight, ~2^-6 RMS), which over a 64-wide dot product of O(1) activations moves a logit by a few
// percent of the largest one. A head quantized with a wrong scale or layout moves them by ~100%.
constexpr double kFp8HeadLogitTol = 0.05;
// Under `fast` the other kernels also change numerics, by how much depends on the CPU: with VNNI / BF16
// the activations are quantized to int8 / BF16 everywhere (max|Δ|/max|ref| 0.38 on these random models,
// whose logits are full of near ties), without them only the head changes. So `fast` + auto is held to
// the argmax: at least this share of the prefill positions agrees with the goldens (on a Zen 4 with VNNI:
// 0.92 for V4, 0.76-0.87 for V4.1's short prompts; a head in a wrong layout agrees at chance, ~1/vocab).
// The exact-numerics runs are held to it too.
constexpr double kMinArgmaxAgreement = 0.6;

TEST(HeadFp8, ParseAndNames) {
    HeadFp8 m = HeadFp8::kAuto;
    for (HeadFp8 want : {HeadFp8::kAuto, HeadFp8::kOff, HeadFp8::kOn}) {
        ASSERT_TRUE(model::parse_head_fp8(model::head_fp8_name(want), &m));
        EXPECT_EQ(m, want);
    }
    EXPECT_FALSE(model::parse_head_fp8("fp8", &m));
    EXPECT_EQ(model::head_fp8(), HeadFp8::kAuto);
    EXPECT_FALSE(model::head_as_fp8()); // exact numerics by default
}

TEST(HeadFp8, TpRowsMirrorTpLinear) {
    EXPECT_EQ(model::tp_head_rows(512, 0, 1).end, -1);
    EXPECT_EQ(model::tp_head_rows(512, 1, 2).begin, 256);
    EXPECT_EQ(model::tp_head_rows(512, 1, 2).end, 512);
    EXPECT_EQ(model::tp_head_rows(513, 1, 2).end, -1); // does not split: every rank computes every row
}

// The checkpoint's quantized head is quantize_fp8_block of the stored BF16 values, code for code; a row
// range computes only its row blocks.
TEST(HeadFp8, CheckpointQuantizesLikeQuantizeFp8Block) {
    const std::string dir = source_path("models/tiny-v4");
    auto ck = weights::Checkpoint::open(dir);
    ASSERT_TRUE(ck.ok()) << ck.status().to_string();
    const weights::QuantizationConfig q;
    auto stored = (*ck)->weight("head", 512, 64, q);
    ASSERT_TRUE(stored.ok()) << stored.status().to_string();
    ASSERT_EQ(stored->format, core::WeightFormat::kBF16);
    const std::vector<float> f = weights::dequantize(*stored); // [512, 64]
    std::vector<uint8_t> want_q(512 * 64), want_s(4);
    weights::quantize_fp8_block(f.data(), 512, 64, 128, 128, want_q.data(), want_s.data());

    auto ck2 = weights::Checkpoint::open(dir);
    ASSERT_TRUE(ck2.ok());
    auto w = (*ck2)->fp8_block_weight("head", 512, 64, 128, 128, q);
    ASSERT_TRUE(w.ok()) << w.status().to_string();
    ASSERT_EQ(w->format, core::WeightFormat::kFp8Block);
    EXPECT_EQ(w->block_rows, 128);
    EXPECT_EQ(w->block_cols, 128);
    ASSERT_EQ(w->scale_rows() * w->scale_cols(), 4);
    const auto* codes = static_cast<const uint8_t*>(w->data);
    EXPECT_TRUE(std::equal(want_q.begin(), want_q.end(), codes));
    EXPECT_TRUE(std::equal(want_s.begin(), want_s.end(), w->scale));
    EXPECT_EQ((*ck2)->requantized_bytes(), 512u * 64u + 4u);
    auto again = (*ck2)->fp8_block_weight("head", 512, 64, 128, 128, q);
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(again->data, w->data); // one copy per prefix
    // Dequantized, within e4m3's rounding (half a step: 2^-4 relative, or 2^-10 of the scale near zero).
    const std::vector<float> back = weights::dequantize(*w);
    for (int64_t i = 0; i < 512 * 64; ++i) {
        const float s = core::e8m0_to_f32(want_s[i / 64 / 128]);
        ASSERT_LE(std::fabs(back[i] - f[i]), std::max(std::fabs(f[i]) / 16.0f, s / 1024.0f)) << i;
    }

    // Rows [200, 300): row blocks 1 and 2 computed, 0 and 3 left zero.
    auto ck3 = weights::Checkpoint::open(dir);
    ASSERT_TRUE(ck3.ok());
    auto part = (*ck3)->fp8_block_weight("head", 512, 64, 128, 128, q, 200, 300);
    ASSERT_TRUE(part.ok());
    const auto* pc = static_cast<const uint8_t*>(part->data);
    for (int64_t b = 0; b < 4; ++b) {
        const bool computed = b == 1 || b == 2;
        EXPECT_EQ(part->scale[b], computed ? want_s[b] : 0) << b;
        const int64_t lo = b * 128 * 64, hi = (b + 1) * 128 * 64;
        if (computed) {
            EXPECT_TRUE(std::equal(want_q.begin() + lo, want_q.begin() + hi, pc + lo)) << b;
        } else {
            EXPECT_TRUE(std::all_of(pc + lo, pc + hi, [](uint8_t c) { return c == 0; })) << b;
        }
    }
}

// An FP8-stored weight is returned as stored (nothing to quantize).
TEST(HeadFp8, StoredFp8IsReturnedAsIs) {
    auto ck = weights::Checkpoint::open(source_path("models/tiny-v4-fp8"));
    ASSERT_TRUE(ck.ok()) << ck.status().to_string();
    const weights::TensorInfo* t = (*ck)->find("layers.0.attn.wq_a.weight");
    ASSERT_NE(t, nullptr);
    ASSERT_EQ(t->dtype, core::DType::kF8E4M3);
    weights::QuantizationConfig q;
    q.fp8 = true;
    q.block_rows = q.block_cols = 32;
    auto w = (*ck)->fp8_block_weight("layers.0.attn.wq_a", t->shape[0], t->shape[1], 128, 128, q);
    ASSERT_TRUE(w.ok()) << w.status().to_string();
    EXPECT_EQ(w->block_rows, 32); // the stored blocks, not requantized
    EXPECT_EQ((*ck)->requantized_bytes(), 0u);
}

// Under fast, where the CPU takes them (head_int8_panels), a BF16 head bound as FP8 blocks also carries its
// int8 panels: pack_bf16_int8_panels' bytes for the rows it computes (a tensor-parallel rank's, tiles from
// its first row), counted in resident_bytes. An F32 head, and any head elsewhere, carries none.
TEST(HeadFp8, Int8PanelsBesideABf16Head) {
    namespace kd = kernels::cpu::detail;
    const std::string dir =
        (std::filesystem::temp_directory_path() / ("di_head_panels_" + std::to_string(::getpid()))).string();
    std::filesystem::create_directories(dir);
    constexpr int64_t kRows = 2 * kd::kQRowTile + 7, kCols = 256;
    std::vector<uint16_t> bf(kRows * kCols);
    std::vector<float> f32(kRows * kCols);
    for (size_t i = 0; i < bf.size(); ++i) {
        f32[i] = std::sin(0.37f * static_cast<float>(i)) * (1.0f + static_cast<float>(i % 97));
        bf[i] = core::f32_to_bf16(f32[i]);
    }
    weights::SafetensorsWriter sw;
    sw.add("head.weight", core::DType::kBF16, core::Shape{kRows, kCols}, bf.data());
    sw.add_f32("f32head.weight", core::Shape{kRows, kCols}, f32);
    ASSERT_TRUE(sw.write(dir + "/model.safetensors").ok());
    const weights::QuantizationConfig q;
    core::Weight src; // the stored BF16 weight

    src.format = core::WeightFormat::kBF16;
    src.data = bf.data();
    src.rows = kRows;
    src.cols = kCols;
    for (const int64_t row_begin : {int64_t{0}, int64_t{50}}) { // 50: a rank's rows off the tile grid
        SCOPED_TRACE("row_begin " + std::to_string(row_begin));
        // The expected panels of rows [row_begin, kRows), from the stored BF16 weight.
        const int64_t held = kRows - row_begin;
        const int64_t code_bytes = kd::int8_panel_code_bytes(held, kCols);
        std::vector<uint8_t> want(code_bytes);
        std::vector<float> want_s(kd::int8_panel_scale_floats(held, kCols));
        kd::pack_bf16_int8_panels(src, row_begin, kRows, 0, kd::int8_panel_tiles(held), want.data(),
                                  want_s.data());
        ScopedHeadMode mode(Numerics::kFast, HeadFp8::kAuto);
        auto ck = weights::Checkpoint::open(dir);
        ASSERT_TRUE(ck.ok()) << ck.status().to_string();
        auto w = model::bind_lm_head(**ck, "head", kRows, kCols, q, row_begin, kRows);
        ASSERT_TRUE(w.ok()) << w.status().to_string();
        EXPECT_EQ(w->format, core::WeightFormat::kFp8Block);
        auto wf = model::bind_lm_head(**ck, "f32head", kRows, kCols, q);
        ASSERT_TRUE(wf.ok()) << wf.status().to_string();
        EXPECT_EQ(wf->panel_codes, nullptr);
        if (!model::head_int8_panels()) {
            EXPECT_EQ(w->panel_codes, nullptr);
            EXPECT_EQ(w->resident_bytes(), w->stored_bytes());
            continue;
        }
        ASSERT_NE(w->panel_codes, nullptr);
        EXPECT_EQ(w->panel_row0, row_begin);
        EXPECT_EQ(w->panel_rows, held);
        EXPECT_EQ(w->panel_bytes, code_bytes + 4 * static_cast<int64_t>(want_s.size()));
        EXPECT_EQ(w->resident_bytes(), w->stored_bytes() + w->panel_bytes);
        EXPECT_TRUE(std::equal(want.begin(), want.end(), w->panel_codes));
        EXPECT_TRUE(std::equal(want_s.begin(), want_s.end(), w->panel_scales));
    }
    std::filesystem::remove_all(dir);
}

// The dense FP8 weights' int8 panels (model/int8_panels.h): an FP8-block weight gets the `fp8` GEMM's
// panels of all its rows (the VNNI table's pack_fp8, tile 0 at row 0), counted in resident_bytes, packed
// once per tensor; a BF16 weight, and FP8 blocks that are not whole 128-column blocks, get none.
TEST(DensePanels, AttachedToFp8BlockWeightsOnly) {
    namespace kd = kernels::cpu::detail;
    if (!kernels::cpu::fp8_int8_supported()) GTEST_SKIP() << "no VNNI + VBMI: the pack needs the int8 GEMM";
    const std::string dir =
        (std::filesystem::temp_directory_path() / ("di_dense_panels_" + std::to_string(::getpid()))).string();
    std::filesystem::create_directories(dir);
    constexpr int64_t kRows = 2 * kd::kQRowTile + 7, kCols = 256, kNarrow = 96;
    std::vector<uint16_t> a(kRows * kCols), b(40 * kNarrow);
    for (size_t i = 0; i < a.size(); ++i)
        a[i] =
            core::f32_to_bf16(std::sin(0.37f * static_cast<float>(i)) * (1.0f + static_cast<float>(i % 97)));
    for (size_t i = 0; i < b.size(); ++i) b[i] = core::f32_to_bf16(std::cos(0.11f * static_cast<float>(i)));
    weights::SafetensorsWriter sw;
    sw.add("a.weight", core::DType::kBF16, core::Shape{kRows, kCols}, a.data());
    sw.add("b.weight", core::DType::kBF16, core::Shape{40, kNarrow}, b.data());
    ASSERT_TRUE(sw.write(dir + "/model.safetensors").ok());
    const weights::QuantizationConfig q;
    auto ck = weights::Checkpoint::open(dir);
    ASSERT_TRUE(ck.ok()) << ck.status().to_string();
    auto wa = (*ck)->fp8_block_weight("a", kRows, kCols, 128, 128, q);
    ASSERT_TRUE(wa.ok()) << wa.status().to_string();
    ASSERT_EQ(wa->format, core::WeightFormat::kFp8Block);
    core::Weight w = *wa;
    model::attach_fp8_int8_panels(**ck, "a", &w);
    ASSERT_NE(w.panel_codes, nullptr);
    const int64_t tiles = kd::int8_panel_tiles(kRows), code_bytes = kd::int8_panel_code_bytes(kRows, kCols);
    std::vector<uint8_t> want(code_bytes);
    std::vector<float> want_s(kd::int8_panel_scale_floats(kRows, kCols));
    kd::avx512_vnni_gemm_table().pack_fp8(*wa, 0, kRows, 0, tiles, want.data(), want_s.data());
    EXPECT_EQ(w.panel_row0, 0);
    EXPECT_EQ(w.panel_rows, kRows);
    EXPECT_TRUE(w.panels_are_decode);
    EXPECT_EQ(w.panel_bytes, code_bytes + 4 * static_cast<int64_t>(want_s.size()));
    EXPECT_EQ(w.resident_bytes(), w.stored_bytes() + w.panel_bytes);
    EXPECT_TRUE(std::equal(want.begin(), want.end(), w.panel_codes));
    EXPECT_EQ(std::memcmp(want_s.data(), w.panel_scales, want_s.size() * sizeof(float)), 0);
    core::Weight again = *wa; // the same tensor again: the same memory, not a second pack
    model::attach_fp8_int8_panels(**ck, "a", &again);
    EXPECT_EQ(again.panel_codes, w.panel_codes);

    auto stored = (*ck)->weight("a", kRows, kCols, q); // BF16 as stored
    ASSERT_TRUE(stored.ok()) << stored.status().to_string();
    core::Weight ws = *stored;
    model::attach_fp8_int8_panels(**ck, "a.bf16", &ws);
    EXPECT_EQ(ws.panel_codes, nullptr);
    auto wb = (*ck)->fp8_block_weight("b", 40, kNarrow, 128, 128, q); // 96 columns: no whole 128-block
    ASSERT_TRUE(wb.ok()) << wb.status().to_string();
    core::Weight nb = *wb;
    model::attach_fp8_int8_panels(**ck, "b", &nb);
    EXPECT_EQ(nb.panel_codes, nullptr);
    EXPECT_EQ(nb.resident_bytes(), nb.stored_bytes());
    std::filesystem::remove_all(dir);
}

core::WeightFormat v4_head_format(const std::string& name) {
    auto m = model::deepseek_v4::DeepseekV4Model::load(source_path("models/" + name));
    EXPECT_TRUE(m.ok()) << m.status().to_string();
    return m.ok() ? (*m)->weights().head.format : core::WeightFormat::kF32;
}

// Which modes bind the FP8 head: fast (auto), or on; never exact (auto) or off.
TEST(HeadFp8, BoundUnderFastOnly) {
    for (const char* name : {"tiny-v4", "tiny-v4-fp8"}) {
        SCOPED_TRACE(name);
        {
            ScopedHeadMode mode(Numerics::kExact, HeadFp8::kAuto);
            EXPECT_EQ(v4_head_format(name), core::WeightFormat::kBF16);
        }
        {
            ScopedHeadMode mode(Numerics::kFast, HeadFp8::kAuto);
            EXPECT_EQ(v4_head_format(name), core::WeightFormat::kFp8Block);
        }
        {
            ScopedHeadMode mode(Numerics::kFast, HeadFp8::kOff);
            EXPECT_EQ(v4_head_format(name), core::WeightFormat::kBF16);
        }
        {
            ScopedHeadMode mode(Numerics::kExact, HeadFp8::kOn);
            EXPECT_EQ(v4_head_format(name), core::WeightFormat::kFp8Block);
        }
    }
    ScopedHeadMode mode(Numerics::kFast, HeadFp8::kAuto);
    auto m = model::deepseek_v41::DeepseekV41Model::load(source_path("models/tiny-v41"));
    ASSERT_TRUE(m.ok()) << m.status().to_string();
    EXPECT_EQ((*m)->weights().head.format, core::WeightFormat::kFp8Block);
}

// Every golden prompt's prefill logits (all positions) with the FP8 head: within `tol` of the goldens
// (tol < 0: not bounded) and agreeing on the argmax at `min_agree` of the positions; reports the worst
// deviation and the argmax agreement with the goldens.
template <typename Model>
void check_goldens(const std::string& name, Numerics num, HeadFp8 head, double tol, double min_agree,
                   size_t bound_len = 0) {
    ScopedHeadMode mode(num, head);
    auto loaded = Model::load(source_path("models/" + name));
    ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
    auto& m = *loaded;
    model::KvCacheSpec spec;
    spec.block_size = 64;
    spec.num_blocks = 6;
    spec.num_slots = 1;
    ASSERT_TRUE(m->init_kv_cache(spec).ok());
    const Goldens g(name);
    const int64_t V = m->vocab_size();
    double worst = 0.0;
    int64_t positions = 0, agree = 0;
    for (int i = 0; i < g.num_prompts(); ++i) {
        const std::string pfx = "prompt." + std::to_string(i) + ".";
        const auto ids = g.ids(pfx + "ids");
        model::SequenceRunner run(m.get(), 0, iota_blocks(0, 6));
        std::vector<float> logits;
        ASSERT_TRUE(run.feed(ids, 0, true, &logits).ok());
        const auto ref = g.f32(pfx + "prefill_logits");
        ASSERT_EQ(logits.size(), ref.size());
        const double e = max_rel_error(logits, ref);
        if (bound_len != 0 && ids.size() > bound_len) continue;
        worst = std::max(worst, e);
        if (tol >= 0) {
            EXPECT_LE(e, tol) << "prompt " << i;
        }
        for (size_t t = 0; t < ids.size(); ++t, ++positions)
            agree += model::argmax(logits.data() + t * V, V) == model::argmax(ref.data() + t * V, V);
    }
    std::printf("[%s, %s numerics, head %s] prefill logits vs goldens: max|Δ|/max|ref| = %.3g (prompts of %s "
                "tokens), argmax agreement %lld/%lld positions (the same prompts)\n",
                name.c_str(), kernels::cpu::numerics_name(num), model::head_fp8_name(head), worst,
                bound_len == 0 ? "any number of" : ("<= " + std::to_string(bound_len)).c_str(),
                static_cast<long long>(agree), static_cast<long long>(positions));
    ASSERT_GT(positions, 0);
    EXPECT_GE(static_cast<double>(agree), min_agree * static_cast<double>(positions)) << name;
}

TEST(HeadFp8, V4GoldenLogitsWithinBound) {
    for (const char* name : {"tiny-v4", "tiny-v4-fp8"}) {
        check_goldens<model::deepseek_v4::DeepseekV4Model>(name, Numerics::kFast, HeadFp8::kAuto, -1.0,
                                                           kMinArgmaxAgreement);
        // The head's rounding alone (exact kernels elsewhere) stays within the logit bound.
        check_goldens<model::deepseek_v4::DeepseekV4Model>(name, Numerics::kExact, HeadFp8::kOn,
                                                           kFp8HeadLogitTol, kMinArgmaxAgreement);
    }
}

// V4.1 fake-quantizes its caches to FP8 / FP4 grids, which turns a small change upstream into a grid step
// on the long prompts (64 and 300 tokens; v41_goldens_test.cpp compares only their tokens, for the same
// reason even under exact numerics): the bound holds on the prompts of up to 17 tokens, as there.
TEST(HeadFp8, V41GoldenLogitsWithinBound) {
    for (const char* name : {"tiny-v41", "tiny-v41-fp8"}) {
        check_goldens<model::deepseek_v41::DeepseekV41Model>(name, Numerics::kFast, HeadFp8::kAuto, -1.0,
                                                             kMinArgmaxAgreement, 17);
        check_goldens<model::deepseek_v41::DeepseekV41Model>(name, Numerics::kExact, HeadFp8::kOn,
                                                             kFp8HeadLogitTol, kMinArgmaxAgreement, 17);
    }
}

} // namespace
} // namespace deepinfer::testing
