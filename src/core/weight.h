#pragma once
// A matrix weight as stored in the checkpoint, bound for a matmul that dequantizes inside its inner loop.
// Weights stay at their stored precision: nothing here owns or expands data.

#include <cstdint>

#include "core/dtype.h"

namespace deepinfer::core {

enum class WeightFormat : uint8_t {
    kF32,
    kBF16,
    kF16,
    // e4m3 values [rows, cols] with e8m0 scales [ceil(rows/block_rows), ceil(cols/block_cols)]:
    // W[r,c] = e4m3(data[r,c]) * 2^(scale[r/block_rows, c/block_cols] - 127)
    kFp8Block,
    // packed e2m1 values [rows, cols/2] (element 2k in the low nibble of byte k) with e8m0 scales
    // [rows, cols/block_cols]: W[r,c] = e2m1(r,c) * 2^(scale[r, c/block_cols] - 127)
    kFp4Group,
};

// Linear(x) = x W^T with W [rows = out_features, cols = in_features].
struct Weight {
    WeightFormat format = WeightFormat::kF32;
    const void* data = nullptr;
    const uint8_t* scale = nullptr; // e8m0, only for kFp8Block / kFp4Group
    int64_t rows = 0;
    int64_t cols = 0;
    int block_rows = 1; // kFp8Block: rows per scale block; kFp4Group: 1
    int block_cols = 1; // kFp8Block: cols per scale block; kFp4Group: group size (32)
    // Optional: the same matrix pre-decoded at load into the fast int8 GEMM's panels (kernels/cpu/
    // gemm_int8.h, "int8 panels"), read instead of decoding `data` where that GEMM runs; nullptr: none.
    // Memory the owner of `data` (the checkpoint) owns; at() and every other kernel read `data`.
    const uint8_t* panel_codes = nullptr;
    const float* panel_scales = nullptr;
    int64_t panel_row0 = 0; // the rows the panels hold: [panel_row0, panel_row0 + panel_rows), tile 0 first
    int64_t panel_rows = 0;
    int64_t panel_bytes = 0; // codes + scales
    // true: the panels are this weight's own int8 GEMM decode (an FP8-block weight's, model/int8_panels.h),
    // so they serve exactly the calls that GEMM would take (the same bits, less work); false: decoded from
    // another source (fast's LM head: its BF16 weights), served from kernels::cpu::kPanelsMinTokens.
    bool panels_are_decode = false;

    int64_t scale_rows() const { return (rows + block_rows - 1) / block_rows; }
    int64_t scale_cols() const { return (cols + block_cols - 1) / block_cols; }
    // Exact value of element (r, c), for reference kernels and tests.
    float at(int64_t r, int64_t c) const;
    // Stored bytes of data + scales.
    int64_t stored_bytes() const;
    // Bytes it holds in memory: stored_bytes() plus its int8 panels'.
    int64_t resident_bytes() const { return stored_bytes() + panel_bytes; }
};

} // namespace deepinfer::core
