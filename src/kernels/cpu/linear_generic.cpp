// The portable linear kernel (DEEPINFER_ISA=ref, or a CPU without AVX2): each worker dequantizes one
// weight row into an F32 scratch (so FP8/FP4 weights are never expanded beyond one row) and dots it with
// every activation row. Plain C++, compiled without ISA flags.

#include <functional>
#include <vector>

#include "core/check.h"
#include "core/dtype.h"
#include "core/thread_pool.h"
#include "kernels/cpu/linear_kernels.h"

namespace deepinfer::kernels::cpu::detail {
namespace {

void dequantize_row(const core::Weight& w, int64_t r, float* out) {
    const int64_t cols = w.cols;
    switch (w.format) {
    case core::WeightFormat::kF32: {
        const float* src = static_cast<const float*>(w.data) + r * cols;
        for (int64_t c = 0; c < cols; ++c) out[c] = src[c];
        return;
    }
    case core::WeightFormat::kBF16: {
        const uint16_t* src = static_cast<const uint16_t*>(w.data) + r * cols;
        for (int64_t c = 0; c < cols; ++c) out[c] = core::bf16_to_f32(src[c]);
        return;
    }
    case core::WeightFormat::kF16: {
        const uint16_t* src = static_cast<const uint16_t*>(w.data) + r * cols;
        for (int64_t c = 0; c < cols; ++c) out[c] = core::f16_to_f32(src[c]);
        return;
    }
    case core::WeightFormat::kFp8Block: {
        const float* lut = core::fp8_e4m3_table();
        const uint8_t* src = static_cast<const uint8_t*>(w.data) + r * cols;
        const uint8_t* srow = w.scale + (r / w.block_rows) * w.scale_cols();
        for (int64_t c0 = 0; c0 < cols; c0 += w.block_cols) {
            const float s = core::e8m0_to_f32(srow[c0 / w.block_cols]);
            const int64_t c1 = std::min<int64_t>(cols, c0 + w.block_cols);
            for (int64_t c = c0; c < c1; ++c) out[c] = lut[src[c]] * s;
        }
        return;
    }
    case core::WeightFormat::kFp4Group: {
        const float* lut = core::fp4_e2m1_table();
        const uint8_t* src = static_cast<const uint8_t*>(w.data) + r * (cols / 2);
        const uint8_t* srow = w.scale + r * w.scale_cols();
        for (int64_t c0 = 0; c0 < cols; c0 += w.block_cols) {
            const float s = core::e8m0_to_f32(srow[c0 / w.block_cols]);
            const int64_t c1 = std::min<int64_t>(cols, c0 + w.block_cols);
            for (int64_t c = c0; c < c1; ++c) {
                const uint8_t byte = src[c / 2];
                out[c] = lut[(c & 1) ? (byte >> 4) : (byte & 0xf)] * s;
            }
        }
        return;
    }
    }
    DI_CHECK(false) << "unknown weight format";
}

float dot(const float* a, const float* b, int64_t n) {
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; ++k) acc[k] += a[i + k] * b[i + k];
    float s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
    for (; i < n; ++i) s += a[i] * b[i];
    return s;
}

} // namespace

void matmul_generic(const MatmulArgs& a, core::ThreadPool* pool) {
    const core::Weight& w = *a.w;
    DI_CHECK(a.row_begin >= 0 && a.row_begin <= a.row_end && a.row_end <= w.rows);
    DI_CHECK(a.ldx >= w.cols && a.ldy >= a.row_end - a.row_begin);
    const int64_t rows = a.row_end - a.row_begin;
    if (rows == 0 || a.n == 0) return;
    auto body = [&](int64_t b, int64_t e) {
        thread_local std::vector<float> row; // [cols] one dequantized weight row, kept across calls
        row.resize(w.cols);
        for (int64_t r = b; r < e; ++r) {
            dequantize_row(w, a.row_begin + r, row.data());
            for (int64_t i = 0; i < a.n; ++i) a.y[i * a.ldy + r] = dot(a.x + i * a.ldx, row.data(), w.cols);
        }
    };
    // Small problems are not worth waking the pool.
    if (rows * a.n * w.cols < (1 << 15)) {
        body(0, rows);
    } else {
        pool->parallel_for(rows, std::ref(body));
    }
}

} // namespace deepinfer::kernels::cpu::detail
