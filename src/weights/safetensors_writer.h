#pragma once
// Writes safetensors files: synthetic checkpoints shaped like the real models (`deepinfer make-synthetic`),
// probe dumps, and test fixtures. Tensors are written in insertion order, 8-byte aligned header.

#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"
#include "core/tensor.h"

namespace deepinfer::weights {

class SafetensorsWriter {
public:
    // Copies `bytes` (must be shape.numel() * dtype_size(dtype) bytes; packed fp4 is I8 [rows, cols/2]).
    void add(const std::string& name, core::DType dtype, const core::Shape& shape, const void* bytes);
    void add_f32(const std::string& name, const core::Shape& shape, const std::vector<float>& values);
    void add_i64(const std::string& name, const core::Shape& shape, const std::vector<int64_t>& values);
    void set_metadata(const std::string& key, const std::string& value);

    size_t num_tensors() const { return entries_.size(); }
    core::Status write(const std::string& path) const;

private:
    struct Entry {
        std::string name;
        core::DType dtype;
        core::Shape shape;
        std::vector<uint8_t> bytes;
    };
    std::vector<Entry> entries_;
    std::vector<std::pair<std::string, std::string>> metadata_;
};

} // namespace deepinfer::weights
