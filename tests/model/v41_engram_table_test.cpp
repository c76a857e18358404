// Engram tables bound in the checkpoint's memory map and gathered on the host: both tiny-v41 storage
// formats (BF16; F8_E4M3 rows + F8_E8M0 scales per 32 columns), the golden hash ids all land inside the
// tables, and bad tables (shorter than the config says, wrong dtype, missing or malformed scale) are
// rejected at load naming the file, the tensor and the config field.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "model/deepseek_v41/config.h"
#include "model/deepseek_v41/engram_table.h"
#include "weights/checkpoint.h"
#include "weights/safetensors.h"
#include "weights/safetensors_writer.h"

namespace {

using deepinfer::model::deepseek_v41::EngramTable;
using deepinfer::model::deepseek_v41::ModelConfig;
namespace core = deepinfer::core;
namespace weights = deepinfer::weights;

std::string src(const std::string& rel) {
    return std::string(DEEPINFER_SOURCE_DIR) + "/" + rel;
}

struct Loaded {
    ModelConfig config;
    std::unique_ptr<weights::Checkpoint> ckpt;
};

Loaded load(const std::string& dir) {
    Loaded l;
    auto c = ModelConfig::from_json_file(dir + "/config.json");
    EXPECT_TRUE(c.ok()) << c.status().message();
    if (c.ok()) l.config = *c;
    auto k = weights::Checkpoint::open(dir);
    EXPECT_TRUE(k.ok()) << k.status().message();
    if (k.ok()) l.ckpt = std::move(*k);
    return l;
}

std::vector<int64_t> golden_ids(const std::string& model, int prompt, int64_t layer) {
    auto f = weights::SafetensorsFile::open(src("tests/fixtures/" + model + "/goldens.safetensors"), model);
    EXPECT_TRUE(f.ok());
    if (!f.ok()) return {};
    const std::string name = "prompt." + std::to_string(prompt) + ".engram_hash." + std::to_string(layer);
    for (const auto& e : (*f)->header().tensors) {
        if (e.name != name) continue;
        std::vector<int64_t> v(static_cast<size_t>(e.shape.numel()));
        std::memcpy(v.data(), (*f)->data(e), v.size() * sizeof(int64_t));
        return v;
    }
    ADD_FAILURE() << name << " missing";
    return {};
}

TEST(V41EngramTable, BindsBothFormatsAndCoversEveryGoldenHashId) {
    for (const char* model : {"tiny-v41", "tiny-v41-fp8"}) {
        SCOPED_TRACE(model);
        Loaded l = load(src(std::string("models/") + model));
        ASSERT_TRUE(l.ckpt);
        auto tables = EngramTable::bind_all(*l.ckpt, l.config);
        ASSERT_TRUE(tables.ok()) << tables.status().message();
        ASSERT_EQ(tables->size(), l.config.engram.layer_ids.size());
        for (size_t e = 0; e < tables->size(); ++e) {
            const EngramTable& t = (*tables)[e];
            EXPECT_EQ(t.rows(), l.config.engram.num_embeddings[e]);
            EXPECT_EQ(t.dim(), l.config.engram.head_dim);
            EXPECT_EQ(t.dtype(),
                      std::string(model) == "tiny-v41" ? core::DType::kBF16 : core::DType::kF8E4M3);
            for (int p = 0; p < 9; ++p) {
                const std::vector<int64_t> ids = golden_ids(model, p, l.config.engram.layer_ids[e]);
                ASSERT_FALSE(ids.empty());
                for (int64_t id : ids) ASSERT_TRUE(id >= 0 && id < t.rows()) << "id " << id;
                std::vector<float> rows(ids.size() * static_cast<size_t>(t.dim()));
                t.gather(ids, rows.data());
                for (float v : rows) ASSERT_TRUE(std::isfinite(v));
            }
        }
    }
}

// The FP8 checkpoint quantizes the same tables as the BF16 one (e4m3, power-of-two scale per 32 columns):
// every dequantized element is within e4m3's half-ulp (2^-4 relative, plus the subnormal step) of the BF16
// value. A misapplied scale (wrong block, wrong exponent bias) or a row off by one breaks this.
TEST(V41EngramTable, Fp8RowsDequantizeToTheBf16Rows) {
    Loaded a = load(src("models/tiny-v41")), b = load(src("models/tiny-v41-fp8"));
    ASSERT_TRUE(a.ckpt && b.ckpt);
    auto ta = EngramTable::bind_all(*a.ckpt, a.config);
    auto tb = EngramTable::bind_all(*b.ckpt, b.config);
    ASSERT_TRUE(ta.ok() && tb.ok());
    for (size_t e = 0; e < ta->size(); ++e) {
        const EngramTable &x = (*ta)[e], &y = (*tb)[e];
        ASSERT_EQ(x.rows(), y.rows());
        std::vector<int64_t> ids(static_cast<size_t>(x.rows()));
        for (int64_t r = 0; r < x.rows(); ++r) ids[r] = x.rows() - 1 - r; // reversed: order matters
        std::vector<float> vx(ids.size() * x.dim()), vy(ids.size() * y.dim());
        x.gather(ids, vx.data());
        y.gather(ids, vy.data());
        double err = 0, mag = 0;
        for (size_t i = 0; i < vx.size(); ++i) {
            ASSERT_LE(std::fabs(vx[i] - vy[i]), std::fabs(vx[i]) / 16 + 1.0 / 512) << "element " << i;
            err += std::fabs(vx[i] - vy[i]);
            mag += std::fabs(vx[i]);
        }
        EXPECT_LT(err, 0.05 * mag); // on average far inside the bound
        EXPECT_GT(mag, 0);
    }
}

// A copy of tiny-v41 with layer 1's table replaced; returns the directory.
std::string
write_variant(const std::string& name,
              const std::function<void(weights::SafetensorsWriter&, const weights::TensorInfo&)>& fn) {
    namespace fs = std::filesystem;
    const fs::path dir = fs::temp_directory_path() / ("v41_engram_table_" + name);
    fs::create_directories(dir);
    fs::copy_file(src("models/tiny-v41/config.json"), dir / "config.json",
                  fs::copy_options::overwrite_existing);
    auto ckpt = weights::Checkpoint::open(src("models/tiny-v41"));
    EXPECT_TRUE(ckpt.ok());
    weights::SafetensorsWriter w;
    for (const auto& t : (*ckpt)->tensors()) {
        if (t.name == "layers.1.engram.embed.weight")
            fn(w, t);
        else
            w.add(t.name, t.dtype, t.shape, t.data);
    }
    EXPECT_TRUE(w.write((dir / "model.safetensors").string()).ok());
    return dir.string();
}

std::string bind_error(const std::string& dir) {
    Loaded l = load(dir);
    if (!l.ckpt) return "checkpoint did not open";
    auto t = EngramTable::bind_all(*l.ckpt, l.config);
    return t.ok() ? "" : t.status().message();
}

TEST(V41EngramTable, RejectsBadTablesNamingFileTensorAndField) {
    const std::string tensor = "model.safetensors: tensor 'layers.1.engram.embed.weight'";
    // shorter than engram_num_embeddings says
    std::string msg = bind_error(write_variant("short", [](auto& w, const weights::TensorInfo& t) {
        w.add(t.name, t.dtype, core::Shape{t.shape[0] - 1, t.shape[1]}, t.data);
    }));
    EXPECT_NE(msg.find(tensor + " has 419 rows"), std::string::npos) << msg;
    EXPECT_NE(msg.find("'engram_num_embeddings[0]' is 420"), std::string::npos) << msg;
    EXPECT_NE(msg.find("shorter"), std::string::npos) << msg;
    // wrong width
    msg = bind_error(write_variant("narrow", [](auto& w, const weights::TensorInfo& t) {
        w.add(t.name, t.dtype, core::Shape{t.shape[0] * 2, t.shape[1] / 2}, t.data);
    }));
    EXPECT_NE(msg.find(tensor), std::string::npos) << msg;
    // wrong dtype (F16 has BF16's size, so only the dtype is wrong)
    msg = bind_error(write_variant("f16", [](auto& w, const weights::TensorInfo& t) {
        w.add(t.name, core::DType::kF16, t.shape, t.data);
    }));
    EXPECT_NE(msg.find(tensor + " has dtype F16"), std::string::npos) << msg;
    // F8_E4M3 without its scale, and with a scale of the wrong dtype / shape
    std::vector<uint8_t> fp8(420 * 32, 0x38), scale(420, 127);
    msg = bind_error(write_variant("noscale", [&](auto& w, const weights::TensorInfo& t) {
        w.add(t.name, core::DType::kF8E4M3, t.shape, fp8.data());
    }));
    EXPECT_NE(msg.find("'layers.1.engram.embed.scale'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("missing"), std::string::npos) << msg;
    msg = bind_error(write_variant("scaledtype", [&](auto& w, const weights::TensorInfo& t) {
        w.add(t.name, core::DType::kF8E4M3, t.shape, fp8.data());
        w.add("layers.1.engram.embed.scale", core::DType::kU8, core::Shape{420, 1}, scale.data());
    }));
    EXPECT_NE(msg.find("tensor 'layers.1.engram.embed.scale' has dtype U8, expected F8_E8M0"),
              std::string::npos)
        << msg;
    msg = bind_error(write_variant("scaleshape", [&](auto& w, const weights::TensorInfo& t) {
        w.add(t.name, core::DType::kF8E4M3, t.shape, fp8.data());
        w.add("layers.1.engram.embed.scale", core::DType::kF8E8M0, core::Shape{210, 2}, scale.data());
    }));
    EXPECT_NE(msg.find("has shape [210, 2], expected [420, 1]"), std::string::npos) << msg;
    // and a well-formed F8 table (1.0 * 2^0 everywhere) binds and gathers exactly
    const std::string ok_dir = write_variant("fp8ok", [&](auto& w, const weights::TensorInfo& t) {
        w.add(t.name, core::DType::kF8E4M3, t.shape, fp8.data());
        w.add("layers.1.engram.embed.scale", core::DType::kF8E8M0, core::Shape{420, 1}, scale.data());
    });
    EXPECT_EQ(bind_error(ok_dir), "");
    Loaded l = load(ok_dir);
    ASSERT_TRUE(l.ckpt);
    auto t = EngramTable::bind(*l.ckpt, l.config, 0);
    ASSERT_TRUE(t.ok());
    std::vector<float> row(32);
    const int64_t id = 419;
    t->gather(std::span(&id, 1), row.data());
    for (float v : row) EXPECT_EQ(v, 1.0f); // e4m3 0x38 = 1.0, e8m0 127 = 2^0
}

} // namespace
