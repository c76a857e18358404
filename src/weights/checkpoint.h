#pragma once
// A checkpoint directory exactly as DeepSeek publishes it: config.json plus one model.safetensors or
// shards listed in model.safetensors.index.json. Files are mmapped; tensors are views into the maps.
// Every malformed input (truncated file, bad header, lying offsets, missing shard, unknown dtype)
// is a Status naming the file and tensor, never a crash or an out-of-bounds read.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"
#include "core/tensor.h"
#include "core/weight.h"

namespace deepinfer::weights {

struct TensorInfo {
    std::string name;
    core::DType dtype;
    core::Shape shape;
    std::string file; // shard file name (relative to the checkpoint dir)
    const void* data; // into the shard's mmap
    size_t nbytes;
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
    // dir holds model.safetensors, or model.safetensors.index.json and its shards.
    static core::Result<std::unique_ptr<Checkpoint>> open(const std::string& dir);
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
    core::Result<core::Weight> weight(std::string_view prefix, int64_t rows, int64_t cols,
                                      const QuantizationConfig& q) const;

    // Sum of file bytes mapped (what resident weights cost when every page is touched).
    size_t mapped_bytes() const;

private:
    Checkpoint() = default;
    std::string dir_;
    std::vector<std::unique_ptr<SafetensorsFile>> files_;
    std::vector<TensorInfo> tensors_; // sorted by name
};

// Dequantize a whole weight to F32 (tests, tools; never the model's hot path). out: [rows, cols].
std::vector<float> dequantize(const core::Weight& w);

} // namespace deepinfer::weights
