#pragma once
// A checkpoint directory exactly as DeepSeek publishes it: config.json plus one model.safetensors or
// shards listed in model.safetensors.index.json. Files are mmapped; tensors are views into the maps.
// Every malformed input (truncated file, bad header, lying offsets, missing shard, unknown dtype)
// is a Status naming the file and tensor, never a crash or an out-of-bounds read.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"
#include "core/tensor.h"
#include "core/weight.h"
#include "weights/placement.h"

namespace deepinfer::weights {

struct TensorInfo {
    std::string name;
    core::DType dtype;
    core::Shape shape;
    std::string file; // shard file name (relative to the checkpoint dir)
    const void* data; // into the shard's mmap
    size_t nbytes;
    uint64_t offset = 0; // where the bytes start in the shard file
};

class SafetensorsFile; // one mmapped file (safetensors.h)

// How quantized linear weights are laid out, from config.json's quantization_config (absent = none).
struct QuantizationConfig {
    bool fp8 = false;     // linear weights may be F8_E4M3 with `.scale` e8m0 blocks
    int block_rows = 128; // weight_block_size[0]
    int block_cols = 128; // weight_block_size[1]
    int fp4_group = 32;   // routed experts: packed fp4 with e8m0 scales per fp4_group inputs
};

class Checkpoint {
public:
    // dir holds model.safetensors, or model.safetensors.index.json and its shards. `placement` says where
    // the linear weights that weight() hands out live (placement.h; kMmap where kHugePages cannot reserve
    // its address space).
    static core::Result<std::unique_ptr<Checkpoint>> open(const std::string& dir,
                                                          Placement placement = default_placement());
    ~Checkpoint();

    const std::string& dir() const { return dir_; }
    const std::vector<TensorInfo>& tensors() const { return tensors_; }
    const TensorInfo* find(std::string_view name) const; // nullptr when absent

    // The tensor `name` as a view, checked against the expected dtype and shape; the error names the
    // file and the tensor.
    core::Result<core::TensorView> tensor(std::string_view name, core::DType dtype,
                                          const core::Shape& shape) const;

    // A linear weight [rows = out, cols = in] named `<prefix>.weight`, in whatever format is stored:
    // F32/BF16/F16 as is; F8_E4M3 with `<prefix>.scale` e8m0 [ceil(rows/br), ceil(cols/bc)];
    // I8 packed fp4 [rows, cols/2] with `<prefix>.scale` e8m0 [rows, cols/group].
    // With Placement::kHugePages the weight and its scales are copied into the huge-page arena on the first
    // call for that prefix (later calls return the same copy), except `embed` (the token embedding: the
    // model gathers a few rows per step, so its pages stay mapped and only those rows become resident).
    // Only the weights asked for are copied (an expert-parallel rank copies its own experts).
    core::Result<core::Weight> weight(std::string_view prefix, int64_t rows, int64_t cols,
                                      const QuantizationConfig& q) const;

    // The linear weight `prefix` as FP8 e4m3 blocks of br x bc (core::WeightFormat::kFp8Block, DeepSeek's
    // release format). Stored F32 / BF16 / F16 weights are quantized at load (quantize_weight_fp8_block:
    // scale = pow2ceil(block amax / 448), round to nearest even) on every core, into memory the checkpoint
    // owns (its huge-page arena, whatever the placement), and the stored tensor's pages are released as the
    // quantization passes them (its map stays valid: `embed` rows read later fault back in). Only the row
    // blocks that overlap [row_begin, row_end) are computed (a tensor-parallel rank's vocabulary rows;
    // row_end < 0: all rows); the others read as zero. Nothing is ever copied in the stored format. Any other
    // stored format is returned as weight() returns it, as is the stored weight (with a warning) when the
    // arena's address space is refused. A second call for a prefix returns the first call's weight.
    core::Result<core::Weight> fp8_block_weight(std::string_view prefix, int64_t rows, int64_t cols, int br,
                                                int bc, const QuantizationConfig& q, int64_t row_begin = 0,
                                                int64_t row_end = -1) const;
    // Bytes (codes + scales) fp8_block_weight quantized at load so far.
    size_t requantized_bytes() const;

    // A side copy of the weight `prefix` when it is stored in `format` (F32 / BF16 / F16; e.g. fast's LM
    // head as int8 panels, model/lm_head.h): `bytes` of memory the checkpoint owns (its arena), written by
    // fill(src, dst) from the stored tensor as mapped (never placed: its pages are released afterwards, as
    // fp8_block_weight's are). A second call with the same prefix and tag returns the first's memory.
    // nullptr when the weight is stored in another format, or (with a warning) the arena has no room.
    using DeriveFn = std::function<void(const core::Weight& src, uint8_t* dst)>;
    uint8_t* derived_copy(std::string_view prefix, std::string_view tag, int64_t rows, int64_t cols,
                          const QuantizationConfig& q, core::WeightFormat format, size_t bytes,
                          const DeriveFn& fill) const;
    // `bytes` of the arena for data derived from the weight `prefix` however the caller likes (e.g. an FP8
    // weight's int8 panels, packed from its resident copy), written by fill(dst) once: a second call with the
    // same prefix and tag returns the first's memory. nullptr (with a warning) when the arena has no room.
    uint8_t* derived_bytes(std::string_view prefix, std::string_view tag, size_t bytes,
                           const std::function<void(uint8_t* dst)>& fill) const;

    // Sum of file bytes mapped (what resident weights cost when every page is touched).
    size_t mapped_bytes() const;
    Placement placement() const { return placement_; }
    // Bytes copied into huge-page memory so far (0 with kMmap), and how many of the arena's bytes the kernel
    // backs with 2 MiB pages (-1: unknown).
    size_t placed_bytes() const;
    int64_t placed_huge_bytes() const;

private:
    Checkpoint() = default;
    // weight() before placement: views into the maps.
    core::Result<core::Weight> mapped_weight(std::string_view prefix, int64_t rows, int64_t cols,
                                             const QuantizationConfig& q) const;
    // The mapped file t lies in.
    const SafetensorsFile& file_of(const TensorInfo& t) const;
    // t's bytes in the arena (copied on first use).
    core::Result<const void*> placed(const TensorInfo& t) const;
    // The arena, reserved on first use; nullptr once a reservation was refused. place_mu_ held.
    HugePageArena* arena_locked() const;

    std::string dir_;
    std::vector<std::unique_ptr<SafetensorsFile>> files_;
    std::vector<TensorInfo> tensors_; // sorted by name
    Placement placement_ = Placement::kMmap;
    mutable std::mutex place_mu_;                             // guards arena_ and placed_
    mutable std::unique_ptr<HugePageArena> arena_;            // reserved at the first copy
    mutable bool arena_refused_ = false;                      // reserve failed: weights stay mapped
    mutable std::map<const TensorInfo*, const void*> placed_; // tensor -> its copy
    mutable std::map<std::string, core::Weight, std::less<>> requantized_; // prefix -> its FP8 blocks
    mutable std::map<std::string, uint8_t*, std::less<>> derived_;         // prefix/tag -> derived_copy's
};

// Dequantize a whole weight to F32 (tests, tools; never the model's hot path). out: [rows, cols].
std::vector<float> dequantize(const core::Weight& w);

} // namespace deepinfer::weights
