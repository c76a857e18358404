#pragma once
// Test helpers for the transformers goldens (tools/oracle/make_tiny_v4.py): loading tensors by name and
// the comparison metrics every model test states.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "model/deepseek_v4/model.h"
#include "weights/safetensors.h"

namespace deepinfer::testing {

inline std::string source_path(const std::string& rel) {
    return std::string(DEEPINFER_SOURCE_DIR) + "/" + rel;
}

class Goldens {
public:
    explicit Goldens(const std::string& model_name) {
        auto f = weights::SafetensorsFile::open(
            source_path("tests/fixtures/" + model_name + "/goldens.safetensors"), "goldens.safetensors");
        EXPECT_TRUE(f.ok()) << f.status().to_string();
        if (!f.ok()) return;
        file_ = std::move(*f);
        for (const auto& e : file_->header().tensors) index_[e.name] = &e;
    }
    bool has(const std::string& name) const { return index_.count(name) > 0; }
    std::vector<int64_t> shape(const std::string& name) const { return entry(name).shape.to_vector(); }
    std::vector<float> f32(const std::string& name) const {
        const auto& e = entry(name);
        EXPECT_EQ(e.dtype, core::DType::kF32) << name;
        std::vector<float> v(e.shape.numel());
        std::memcpy(v.data(), file_->data(e), v.size() * sizeof(float));
        return v;
    }
    std::vector<int32_t> ids(const std::string& name) const {
        const auto& e = entry(name);
        EXPECT_EQ(e.dtype, core::DType::kI64) << name;
        std::vector<int32_t> v(e.shape.numel());
        const int64_t* p = static_cast<const int64_t*>(file_->data(e));
        for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int32_t>(p[i]);
        return v;
    }
    int num_prompts() const {
        int n = 0;
        while (has("prompt." + std::to_string(n) + ".ids")) ++n;
        return n;
    }

private:
    const weights::HeaderEntry& entry(const std::string& name) const {
        auto it = index_.find(name);
        if (it == index_.end()) {
            ADD_FAILURE() << "golden tensor '" << name << "' missing";
            static weights::HeaderEntry empty;
            return empty;
        }
        return *it->second;
    }
    std::unique_ptr<weights::SafetensorsFile> file_;
    std::map<std::string, const weights::HeaderEntry*> index_;
};

// The logit metric of the acceptance criteria: max|got - ref| / max|ref| over the compared values.
inline double max_rel_error(const float* got, const float* ref, size_t n) {
    double diff = 0.0, scale = 0.0;
    for (size_t i = 0; i < n; ++i) {
        diff = std::max(diff, std::fabs(static_cast<double>(got[i]) - ref[i]));
        scale = std::max(scale, std::fabs(static_cast<double>(ref[i])));
    }
    return scale > 0 ? diff / scale : diff;
}
inline double max_rel_error(const std::vector<float>& got, const std::vector<float>& ref) {
    EXPECT_EQ(got.size(), ref.size());
    return max_rel_error(got.data(), ref.data(), std::min(got.size(), ref.size()));
}

constexpr double kLogitTol = 1e-4;  // max|Δ| <= 1e-4 * max|ref logit|
constexpr double kHiddenTol = 1e-4; // same metric on hidden streams / final hidden

// Sets of the non-negative entries of each row of a [rows, k] index matrix.
inline std::vector<std::set<int32_t>> row_sets(const std::vector<int32_t>& m, int64_t rows, int64_t k) {
    std::vector<std::set<int32_t>> out(rows);
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t j = 0; j < k; ++j)
            if (m[r * k + j] >= 0) out[r].insert(m[r * k + j]);
    return out;
}

// A model with a cache of `blocks` blocks of `block_size` and `slots` slots.
inline std::unique_ptr<model::deepseek_v4::DeepseekV4Model>
load_model(const std::string& name, int64_t block_size, int64_t blocks, int32_t slots) {
    auto m = model::deepseek_v4::DeepseekV4Model::load(source_path("models/" + name));
    EXPECT_TRUE(m.ok()) << m.status().to_string();
    if (!m.ok()) return nullptr;
    model::KvCacheSpec spec;
    spec.block_size = block_size;
    spec.num_blocks = blocks;
    spec.num_slots = slots;
    core::Status s = (*m)->init_kv_cache(spec);
    EXPECT_TRUE(s.ok()) << s.to_string();
    return std::move(*m);
}

inline std::vector<int32_t> iota_blocks(int32_t first, int32_t n) {
    std::vector<int32_t> b(n);
    for (int32_t i = 0; i < n; ++i) b[i] = first + i;
    return b;
}

} // namespace deepinfer::testing
