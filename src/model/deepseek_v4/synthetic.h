#pragma once
// Synthetic DeepSeek V4 checkpoints in the real release format: config.json in DeepSeek's official field
// names and every tensor of required_tensors() under its official name, with random values scaled like a
// trained model's (so activations stay finite), deterministic from a seed. Stored BF16 (F32 for mHC, sinks,
// ape, gate bias; I64 tid2eid), or with fp8: linear weights F8_E4M3 + F8_E8M0 block scales and routed
// experts packed FP4 (I8) + F8_E8M0 scales per group, like the released V4 checkpoints.

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "model/deepseek_v4/config.h"

namespace deepinfer::model::deepseek_v4 {

// Named architectures: "tiny-text" (tiny-v4 with the real 129280-token vocabulary), "flash-mini"
// (V4-Flash shapes, 4 layers), "bench-small" (a mid-size model transformers can load).
core::Result<ModelConfig> synthetic_preset(const std::string& name);
std::vector<std::string> synthetic_preset_names();

// config.json text in DeepSeek's official names; quantization_config present iff config.quant.fp8.
// Fails for configs official names cannot express (hash layers not a prefix, CSA ratio other than 4).
core::Result<std::string> official_config_json(const ModelConfig& config);

struct SyntheticOptions {
    uint64_t seed = 0;
    int64_t shard_bytes = 4LL << 30; // larger checkpoints are split into shards of at most this size
};

// Writes dir/config.json and model.safetensors (or shards + model.safetensors.index.json). Quantized
// storage iff config.quant.fp8. dir is created if missing.
core::Status write_synthetic_checkpoint(const ModelConfig& config, const SyntheticOptions& options,
                                        const std::string& dir);

// The values the generator draws for a floating-point tensor (before storage rounding), in its logical
// shape (a linear weight [rows, cols]); the same for every storage format. Each tensor has its own stream,
// seeded from (seed, name), so it can be redrawn alone.
std::vector<float> synthetic_values(const TensorSpec& spec, uint64_t seed);
// tid2eid [vocab, K]: K distinct experts per row.
std::vector<int64_t> synthetic_tid2eid(const ModelConfig& config, const std::string& name, uint64_t seed);

} // namespace deepinfer::model::deepseek_v4
