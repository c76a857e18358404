#pragma once
// Quantizers that write DeepSeek's release formats (the inverse of Checkpoint::weight's decoders), for
// synthetic checkpoints and tests. Scales are powers of two (ue8m0): s = pow2ceil(amax / format_max), the
// recipe of DeepSeek's conversion and of tools/oracle/make_tiny_v4.py.

#include <cstdint>
#include <functional>

#include "core/weight.h"

namespace deepinfer::weights {

// Smallest power of two >= x (x > 0, finite), exact from the f32 bits.
float pow2_ceil(float x);
// e8m0 byte of a power of two 2^e, e in [-127, 127].
uint8_t e8m0_of_pow2(float s);

// e4m3fn code of f, round to nearest even, saturating to +-448 (same result as core::f32_to_fp8_e4m3,
// computed from the f32 bits instead of a table scan: synthetic checkpoints quantize billions of values).
uint8_t fp8_e4m3_encode(float f);

// w [rows, cols] -> q e4m3 [rows, cols] and scale e8m0 [ceil(rows/br), ceil(cols/bc)], per block
// s = pow2ceil(max(amax, 1e-4) / 448), q = e4m3(w / s).
void quantize_fp8_block(const float* w, int64_t rows, int64_t cols, int br, int bc, uint8_t* q,
                        uint8_t* scale);

// A stored F32 / BF16 / F16 weight `w` -> FP8 e4m3 blocks of br x bc exactly as quantize_fp8_block would
// quantize its F32 values (finite ones: Inf / NaN saturate to +-448 of the largest finite's scale): q
// [w.rows, w.cols] and scale [ceil(rows/br), ceil(cols/bc)] (the caller's memory). Only the row blocks
// overlapping [row_begin, row_end) are written (the others' bytes are not touched), split in contiguous
// ranges over `threads` threads (each converts one band of br rows to F32 at a time: br * cols floats of
// scratch per thread). `after_band(r0, r1)` (may be empty) runs on the worker thread once band [r0, r1) is
// written, e.g. to release the source's pages.
void quantize_weight_fp8_block(const core::Weight& w, int br, int bc, int64_t row_begin, int64_t row_end,
                               int threads, uint8_t* q, uint8_t* scale,
                               const std::function<void(int64_t r0, int64_t r1)>& after_band = {});

// w [rows, cols] (cols % group == 0, cols even) -> packed e2m1 [rows, cols/2] (element 2k in the low nibble
// of byte k) and scale e8m0 [rows, cols/group], per group s = pow2ceil(max(amax, 6 * 2^-126) / 6).
void quantize_fp4_group(const float* w, int64_t rows, int64_t cols, int group, uint8_t* packed,
                        uint8_t* scale);

} // namespace deepinfer::weights
