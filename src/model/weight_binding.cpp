#include "model/weight_binding.h"

#include <cstring>

#include "core/dtype.h"

namespace deepinfer::model {

using core::Result;

Result<std::vector<float>> load_vector(const weights::Checkpoint& ckpt, const std::string& name,
                                       int64_t numel) {
    const weights::TensorInfo* t = ckpt.find(name);
    if (!t) return core::not_found(ckpt.dir() + ": tensor '" + name + "' is missing");
    if (t->shape.numel() != numel)
        return core::invalid_argument(ckpt.dir() + "/" + t->file + ": tensor '" + name + "' has shape " +
                                      t->shape.to_string() + ", expected " + std::to_string(numel) +
                                      " elements");
    std::vector<float> out(numel);
    switch (t->dtype) {
    case core::DType::kF32:
        std::memcpy(out.data(), t->data, numel * sizeof(float));
        return out;
    case core::DType::kBF16:
        for (int64_t i = 0; i < numel; ++i)
            out[i] = core::bf16_to_f32(static_cast<const uint16_t*>(t->data)[i]);
        return out;
    case core::DType::kF16:
        for (int64_t i = 0; i < numel; ++i)
            out[i] = core::f16_to_f32(static_cast<const uint16_t*>(t->data)[i]);
        return out;
    default:
        return core::invalid_argument(ckpt.dir() + "/" + t->file + ": tensor '" + name + "' has dtype " +
                                      std::string(core::dtype_name(t->dtype)) + ", expected F32/BF16/F16");
    }
}

Result<core::Weight> load_f32_matrix(const weights::Checkpoint& ckpt, const std::string& name, int64_t rows,
                                     int64_t cols) {
    DI_ASSIGN_OR_RETURN(core::TensorView v, ckpt.tensor(name, core::DType::kF32, core::Shape{rows, cols}));
    core::Weight w;
    w.format = core::WeightFormat::kF32;
    w.data = v.data;
    w.rows = rows;
    w.cols = cols;
    return w;
}

} // namespace deepinfer::model
