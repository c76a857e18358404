// Reference matmul and row dequantization: element by element through core::Weight::at, the exact
// definition of every stored format.

#include "core/check.h"
#include "kernels/ops.h"

namespace deepinfer::kernels {

MatmulArgs linear_args(const float* x, int64_t n, const core::Weight& w, float* y) {
    MatmulArgs a;
    a.x = x;
    a.n = n;
    a.ldx = w.cols;
    a.w = &w;
    a.row_begin = 0;
    a.row_end = w.rows;
    a.y = y;
    a.ldy = w.rows;
    return a;
}

namespace ref {

void matmul(const MatmulArgs& a) {
    const core::Weight& w = *a.w;
    DI_CHECK(a.row_begin >= 0 && a.row_begin <= a.row_end && a.row_end <= w.rows);
    DI_CHECK(a.ldx >= w.cols && a.ldy >= a.row_end - a.row_begin);
    for (int64_t i = 0; i < a.n; ++i) {
        for (int64_t r = a.row_begin; r < a.row_end; ++r) {
            double acc = 0.0;
            for (int64_t c = 0; c < w.cols; ++c) acc += static_cast<double>(a.x[i * a.ldx + c]) * w.at(r, c);
            a.y[i * a.ldy + (r - a.row_begin)] = static_cast<float>(acc);
        }
    }
}

void dequantize_row(const core::Weight& w, int64_t r, float* out) {
    for (int64_t c = 0; c < w.cols; ++c) out[c] = w.at(r, c);
}

void embedding(const core::Weight& table, const int32_t* ids, int64_t n, float* out) {
    for (int64_t i = 0; i < n; ++i) {
        DI_CHECK(ids[i] >= 0 && ids[i] < table.rows) << "token id " << ids[i] << " of " << table.rows;
        dequantize_row(table, ids[i], out + i * table.cols);
    }
}

} // namespace ref
} // namespace deepinfer::kernels
