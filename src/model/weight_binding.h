#pragma once
// Checkpoint binding helpers both families (deepseek_v4, deepseek_v41) use for their small tensors: a
// per-channel vector copied to F32, an F32 matrix bound in place. Errors name the checkpoint, file and
// tensor.

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/weight.h"
#include "weights/checkpoint.h"

namespace deepinfer::model {

// A small F32/BF16/F16 tensor of `numel` elements copied to F32.
core::Result<std::vector<float>> load_vector(const weights::Checkpoint& ckpt, const std::string& name,
                                             int64_t numel);

// An F32 [rows, cols] tensor (mHC fn) bound as a Weight view into the mapped file.
core::Result<core::Weight> load_f32_matrix(const weights::Checkpoint& ckpt, const std::string& name,
                                           int64_t rows, int64_t cols);

} // namespace deepinfer::model
