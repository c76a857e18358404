#include "model/deepseek_v41/engram_table.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "core/check.h"

namespace deepinfer::model::deepseek_v41 {

namespace {

std::string where(const weights::Checkpoint& ckpt, const weights::TensorInfo& t) {
    return ckpt.dir() + "/" + t.file + ": tensor '" + t.name + "'";
}

} // namespace

core::Result<EngramTable> EngramTable::bind(const weights::Checkpoint& ckpt, const ModelConfig& config,
                                            int64_t engram_index) {
    const EngramConfig& e = config.engram;
    DI_CHECK(engram_index >= 0 && engram_index < static_cast<int64_t>(e.layer_ids.size()));
    const std::string base = "layers." + std::to_string(e.layer_ids[engram_index]) + ".engram.embed";
    const std::string field_rows =
        "config.json field 'engram_num_embeddings[" + std::to_string(engram_index) + "]'";
    const weights::TensorInfo* w = ckpt.find(base + ".weight");
    if (w == nullptr)
        return core::not_found(ckpt.dir() + ": tensor '" + base + ".weight' (the Engram table of layer " +
                               std::to_string(e.layer_ids[engram_index]) +
                               ", config.json field 'engram_layer_ids') is missing");
    if (w->shape.ndim() != 2)
        return core::invalid_argument(where(ckpt, *w) + " has shape " + w->shape.to_string() +
                                      ", expected [rows, engram_head_dim]");
    const int64_t rows = w->shape[0], dim = w->shape[1];
    if (rows != e.num_embeddings[engram_index])
        return core::invalid_argument(where(ckpt, *w) + " has " + std::to_string(rows) + " rows, but " +
                                      field_rows + " is " + std::to_string(e.num_embeddings[engram_index]) +
                                      (rows < e.num_embeddings[engram_index]
                                           ? " (the table is shorter than the hash ids can reach)"
                                           : ""));
    if (dim != e.head_dim)
        return core::invalid_argument(where(ckpt, *w) + " has " + std::to_string(dim) +
                                      " columns, but config.json field 'engram_head_dim' is " +
                                      std::to_string(e.head_dim));
    EngramTable t;
    t.rows_ = rows;
    t.dim_ = dim;
    t.dtype_ = w->dtype;
    t.data_ = static_cast<const uint8_t*>(w->data);
    switch (w->dtype) {
    case core::DType::kF32:
    case core::DType::kBF16:
        break;
    case core::DType::kF8E4M3: {
        if (dim % kScaleBlock != 0)
            return core::invalid_argument(where(ckpt, *w) + ": an F8_E4M3 table needs engram_head_dim (" +
                                          std::to_string(dim) + ") to be a multiple of " +
                                          std::to_string(kScaleBlock));
        const weights::TensorInfo* s = ckpt.find(base + ".scale");
        if (s == nullptr)
            return core::not_found(where(ckpt, *w) + " is F8_E4M3 but its scale '" + base +
                                   ".scale' (F8_E8M0 [rows, head_dim/32]) is missing");
        if (s->dtype != core::DType::kF8E8M0)
            return core::invalid_argument(where(ckpt, *s) + " has dtype " +
                                          std::string(core::dtype_name(s->dtype)) + ", expected F8_E8M0");
        const core::Shape want{rows, dim / kScaleBlock};
        if (s->shape != want)
            return core::invalid_argument(where(ckpt, *s) + " has shape " + s->shape.to_string() +
                                          ", expected " + want.to_string());
        t.scale_ = static_cast<const uint8_t*>(s->data);
        break;
    }
    case core::DType::kF16:
    case core::DType::kF8E8M0:
    case core::DType::kI8:
    case core::DType::kU8:
    case core::DType::kI32:
    case core::DType::kI64:
    case core::DType::kBool:
        return core::invalid_argument(where(ckpt, *w) + " has dtype " +
                                      std::string(core::dtype_name(w->dtype)) +
                                      "; an Engram table is F8_E4M3 (+ F8_E8M0 .scale), BF16 or F32");
    }
    return t;
}

core::Result<std::vector<EngramTable>> EngramTable::bind_all(const weights::Checkpoint& ckpt,
                                                             const ModelConfig& config) {
    std::vector<EngramTable> out;
    for (int64_t i = 0; i < static_cast<int64_t>(config.engram.layer_ids.size()); ++i) {
        DI_ASSIGN_OR_RETURN(EngramTable t, bind(ckpt, config, i));
        out.push_back(t);
    }
    return out;
}

int64_t EngramTable::row_bytes() const {
    return dim_ * static_cast<int64_t>(core::dtype_size(dtype_)) + (scale_ ? dim_ / kScaleBlock : 0);
}

void EngramTable::prefetch(std::span<const int64_t> ids) const {
    static const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
    const int64_t width = dim_ * static_cast<int64_t>(core::dtype_size(dtype_));
    auto advise = [](const uint8_t* p, int64_t len) {
        const uintptr_t b = reinterpret_cast<uintptr_t>(p) & ~(page - 1);
        const uintptr_t e = reinterpret_cast<uintptr_t>(p + len);
        ::madvise(reinterpret_cast<void*>(b), e - b, MADV_WILLNEED); // a hint: failure only costs speed
    };
    for (const int64_t r : ids) {
        DI_CHECK(r >= 0 && r < rows_);
        advise(data_ + r * width, width);
        if (scale_) advise(scale_ + r * (dim_ / kScaleBlock), dim_ / kScaleBlock);
    }
}

void EngramTable::gather(std::span<const int64_t> ids, float* out) const {
    for (size_t i = 0; i < ids.size(); ++i) {
        const int64_t r = ids[i];
        DI_CHECK(r >= 0 && r < rows_);
        float* o = out + static_cast<int64_t>(i) * dim_; // [dim]
        switch (dtype_) {
        case core::DType::kF32:
            std::memcpy(o, data_ + r * dim_ * 4, static_cast<size_t>(dim_) * 4);
            break;
        case core::DType::kBF16: {
            const uint8_t* row = data_ + r * dim_ * 2;
            for (int64_t c = 0; c < dim_; ++c) {
                uint16_t h;
                std::memcpy(&h, row + c * 2, 2);
                o[c] = core::bf16_to_f32(h);
            }
            break;
        }
        case core::DType::kF8E4M3: {
            const float* lut = core::fp8_e4m3_table();
            const uint8_t* row = data_ + r * dim_;
            const uint8_t* sc = scale_ + r * (dim_ / kScaleBlock);
            for (int64_t c = 0; c < dim_; ++c) o[c] = lut[row[c]] * core::e8m0_to_f32(sc[c / kScaleBlock]);
            break;
        }
        case core::DType::kF16:
        case core::DType::kF8E8M0:
        case core::DType::kI8:
        case core::DType::kU8:
        case core::DType::kI32:
        case core::DType::kI64:
        case core::DType::kBool:
            DI_CHECK(false && "unreachable: bind() rejects other dtypes");
        }
    }
}

} // namespace deepinfer::model::deepseek_v41
