#pragma once
// Checkpoint binding helpers both families (deepseek_v4, deepseek_v41) use for their small tensors: a
// per-channel vector copied to F32, an F32 matrix bound in place. Errors name the checkpoint, file and
// tensor. And the byte counts both families' resident_weight_bytes sum over the parts they share.

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

// Bytes of a per-channel vector as held (F32).
inline int64_t vec_bytes(const std::vector<float>& v) {
    return static_cast<int64_t>(v.size() * sizeof(float));
}
// Resident bytes (core::Weight::resident_bytes: stored + int8 panels) of parts both families name alike:
// an mHC block (fn, base, scale), an expert (w1, w2, w3), and the attention projections with their norms and
// sinks (wq_a, q_norm, wq_b, wkv, kv_norm, wo_a, wo_b, sink).
template <class Hc> int64_t hc_bytes(const Hc& h) {
    return h.fn.resident_bytes() + vec_bytes(h.base) + vec_bytes(h.scale);
}
template <class Expert> int64_t expert_bytes(const Expert& e) {
    return e.w1.resident_bytes() + e.w2.resident_bytes() + e.w3.resident_bytes();
}
template <class Attention> int64_t attention_bytes(const Attention& a) {
    return a.wq_a.resident_bytes() + vec_bytes(a.q_norm) + a.wq_b.resident_bytes() + a.wkv.resident_bytes() +
           vec_bytes(a.kv_norm) + a.wo_a.resident_bytes() + a.wo_b.resident_bytes() + vec_bytes(a.sink);
}

} // namespace deepinfer::model
