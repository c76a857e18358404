#include "core/weight.h"

#include "core/check.h"

namespace deepinfer::core {

float Weight::at(int64_t r, int64_t c) const {
    DI_CHECK(r >= 0 && r < rows && c >= 0 && c < cols)
        << "(" << r << "," << c << ") of [" << rows << "," << cols << "]";
    switch (format) {
    case WeightFormat::kF32:
        return static_cast<const float*>(data)[r * cols + c];
    case WeightFormat::kBF16:
        return bf16_to_f32(static_cast<const uint16_t*>(data)[r * cols + c]);
    case WeightFormat::kF16:
        return f16_to_f32(static_cast<const uint16_t*>(data)[r * cols + c]);
    case WeightFormat::kFp8Block: {
        float v = fp8_e4m3_table()[static_cast<const uint8_t*>(data)[r * cols + c]];
        return v * e8m0_to_f32(scale[(r / block_rows) * scale_cols() + c / block_cols]);
    }
    case WeightFormat::kFp4Group: {
        uint8_t byte = static_cast<const uint8_t*>(data)[r * (cols / 2) + c / 2];
        uint8_t code = (c & 1) ? (byte >> 4) : (byte & 0xf);
        return fp4_e2m1_table()[code] * e8m0_to_f32(scale[r * scale_cols() + c / block_cols]);
    }
    }
    return 0.0f;
}

int64_t Weight::stored_bytes() const {
    switch (format) {
    case WeightFormat::kF32:
        return rows * cols * 4;
    case WeightFormat::kBF16:
        return rows * cols * 2;
    case WeightFormat::kF16:
        return rows * cols * 2;
    case WeightFormat::kFp8Block:
        return rows * cols + scale_rows() * scale_cols();
    case WeightFormat::kFp4Group:
        return rows * cols / 2 + rows * scale_cols();
    }
    return 0;
}

} // namespace deepinfer::core
