#include "model/deepseek_v4/tensor_parallel.h"

#include <algorithm>
#include <cstddef>
#include <span>

namespace deepinfer::model::deepseek_v4 {

void tp_gather_columns(kernels::Backend& be, const TpShard& tp, const float* local, int64_t T, int64_t w,
                       int64_t ldl, float* out, int64_t ldo) {
    const int64_t n = tp.size();
    kernels::Workspace& ws = be.workspace();
    const kernels::Workspace::Mark mark = ws.mark();
    float* send = ws.take<float>(T * w);     // [T, w] packed
    float* recv = ws.take<float>(n * T * w); // [n, T, w]
    for (int64_t t = 0; t < T; ++t) std::copy_n(local + t * ldl, w, send + t * w);
    core::Status s = tp.group->all_gather_f32(std::span<const float>(send, static_cast<size_t>(T * w)),
                                              std::span<float>(recv, static_cast<size_t>(n * T * w)));
    if (!s.ok() && tp.status && tp.status->ok()) *tp.status = s.with_context("tensor parallel gather");
    for (int64_t r = 0; r < n; ++r)
        for (int64_t t = 0; t < T; ++t) std::copy_n(recv + (r * T + t) * w, w, out + t * ldo + r * w);
    ws.release(mark);
}

void tp_linear(kernels::Backend& be, const TpShard& tp, const float* x, int64_t T, const core::Weight& w,
               float* y, kernels::OpKind kind) {
    if (!tp.active() || w.rows % tp.size() != 0) {
        be.linear(kernels::linear_args(x, T, w, y), kind);
        return;
    }
    const int64_t part = w.rows / tp.size();
    kernels::Workspace& ws = be.workspace();
    const kernels::Workspace::Mark mark = ws.mark();
    float* local = ws.take<float>(T * part); // [T, rows / tp]
    kernels::MatmulArgs a = kernels::linear_args(x, T, w, local);
    a.row_begin = tp.rank() * part;
    a.row_end = a.row_begin + part;
    a.ldy = part;
    be.linear(a, kind);
    tp_gather_columns(be, tp, local, T, part, part, y, w.rows);
    ws.release(mark);
}

} // namespace deepinfer::model::deepseek_v4
