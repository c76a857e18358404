#pragma once
// Synthetic DeepSeek V4.1 checkpoints in the released layout (`deepinfer make-synthetic`): config.json in the
// released composite form (text_config + quantization_config + vision_config), every tensor the model binds
// under its official name with random values scaled like a trained model's (deterministic from a seed),
// BF16 or fp8 (F8_E4M3 32x32-block linears + F8_E8M0 scales, FP4 routed experts, Engram tables F8_E4M3
// [rows, head_dim] + F8_E8M0 [rows, head_dim / 32]), and the Engram hash data computed offline by the
// reference for the preset (data/engram/<preset>/, tools/oracle/make_engram_hash.py).
//
// Large Engram tables are written SPARSE: each table (and its scale) lives in a shard of its own, sized with
// ftruncate; only its first `engram_seeded_rows` rows are written with random values and every other row
// is a hole that reads as zeros. The file is a valid safetensors file that the loader maps like any other,
// so a V4.1-Flash-sized table (~100 GB per layer) costs seconds and almost no disk.

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "model/deepseek_v41/config.h"

namespace deepinfer::model::deepseek_v41 {

// "tiny-text-v41": tiny-v41's dims with every V4.1 feature on and the real 129,280-token V4 vocabulary;
// "flash-v41-engram": V4.1-Flash's per-layer dims, 4 layers, 8 experts, and Flash's Engram tables
// (384,006,168 and 384,016,682 rows x 256, ~98 GB each) at layers 1 and 3.
std::vector<std::string> synthetic_preset_names();
// The preset's config.json text (released composite layout), fp8 storage or BF16.
core::Result<std::string> synthetic_preset_json(const std::string& name, bool fp8);
// The preset's hash data, relative to the repository / install data root ("engram/<preset>/...").
std::string synthetic_preset_hash_data(const std::string& name);

struct SyntheticOptions {
    uint64_t seed = 0;
    // Tables with more rows than this are written sparse (own shard, ftruncate, seeded rows only).
    int64_t engram_dense_rows = 1 << 20;
    int64_t engram_seeded_rows = 4096; // rows written with random values in a sparse table
    // Prompts (token ids) whose Engram rows are written too in a sparse table, so a benchmark of these
    // prompts reads real data from disk (their hash ids, from the hash data, each a fresh sequence).
    std::vector<std::vector<int64_t>> engram_fill_prompts;
};

// Writes dir/config.json (config_json as given), the weights (model.safetensors, or shards +
// model.safetensors.index.json when a table is sparse), and copies hash_data_path to
// dir/engram_hash.safetensors and tokenizer_path (if not empty) to dir/tokenizer.json.
core::Status write_synthetic_checkpoint(const std::string& config_json, const SyntheticOptions& options,
                                        const std::string& hash_data_path, const std::string& tokenizer_path,
                                        const std::string& dir);

} // namespace deepinfer::model::deepseek_v41
