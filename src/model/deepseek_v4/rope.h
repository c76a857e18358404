#pragma once
// The two RoPE tables of V4: "main" (plain, rope_theta; sliding-only layers) and "compress"
// (compress_rope_theta with YaRN-scaled frequencies and no magnitude scaling; CSA/HCA layers, their
// compressors and the indexer). Angles are float32(p) * inv_freq in F32, as the reference computes them.

#include <cstdint>
#include <vector>

#include "model/deepseek_v4/config.h"

namespace deepinfer::model::deepseek_v4 {

class RopeTable {
public:
    // inv_freq [rope_dim / 2].
    RopeTable(std::vector<float> inv_freq, int64_t rope_dim);
    int64_t rope_dim() const { return rope_dim_; }
    const std::vector<float>& inv_freq() const { return inv_freq_; }
    // cos, sin [rope_dim / 2] for absolute position p.
    void angles(int64_t p, float* cos, float* sin) const;
    // Rotate (or un-rotate) the trailing rope_dim channels of n vectors x [n, ld] of width dim at position p.
    void apply(float* x, int64_t n, int64_t ld, int64_t dim, int64_t p, bool inverse) const;

private:
    std::vector<float> inv_freq_;
    int64_t rope_dim_;
};

// inv_freq_i = 1 / theta^(2i / rope_dim).
RopeTable make_main_rope(const ModelConfig& config);
// compress_rope_theta, with YaRN's frequency ramp when config.yarn.enabled.
RopeTable make_compress_rope(const ModelConfig& config);

} // namespace deepinfer::model::deepseek_v4
