#pragma once
// Tensor parallelism (TP) with exact results. Every output element is computed whole by one rank and the
// pieces are all-gathered ("column parallel + gather"), never summed from partial products: a partial-sum
// all-reduce adds in another order than one process does, a gather moves bits. So a TP run gives the
// single-process logits bit for bit, at the price of gathering activations where a textbook TP layer
// would all-reduce them (docs/parallelism.md).
//
// Used by attention (heads split; the grouped output projection by groups, or after gathering the heads
// when the groups do not split evenly; wo_b by output rows) and by the LM head (by vocabulary).

#include <cstdint>

#include "core/weight.h"
#include "kernels/backend.h"
#include "parallel/communicator.h"

namespace deepinfer::model::deepseek_v4 {

struct TpShard {
    parallel::Communicator* group = nullptr; // nullptr or one rank: no TP
    core::Status* status = nullptr;          // the first collective failure lands here

    bool active() const { return group != nullptr && group->size() > 1; }
    int64_t rank() const { return group ? group->rank() : 0; }
    int64_t size() const { return group ? group->size() : 1; }
};

// local [T, w] (row stride ldl) on every rank -> out [T, size * w] (row stride ldo): rank r's columns land
// at [r * w, (r + 1) * w). Scratch from the backend's workspace.
void tp_gather_columns(kernels::Backend& be, const TpShard& tp, const float* local, int64_t T, int64_t w,
                       int64_t ldl, float* out, int64_t ldo);

// y [T, W.rows] = x [T, W.cols] W^T with W's rows split evenly over the TP ranks and gathered; computed
// whole on every rank when W.rows does not split evenly (still exact).
void tp_linear(kernels::Backend& be, const TpShard& tp, const float* x, int64_t T, const core::Weight& w,
               float* y, kernels::OpKind kind = kernels::OpKind::kLinear);

// Workspace floats per token the TP gathers add (0 without TP), for a layer of `width` gathered columns.
inline int64_t tp_gather_floats(int64_t width) {
    return 2 * width;
}

} // namespace deepinfer::model::deepseek_v4
