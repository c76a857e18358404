#pragma once
// Workspace planning for the moe_experts op (a model adds this to its plan from max_num_batched_tokens).

#include <cstdint>

namespace deepinfer::kernels {

// Floats of workspace moe_experts may take for a batch of up to T rows on `threads` threads, beyond the
// T * (2D + 2I) of its per-row buffers: the CPU backend's expert split for decode batches (cpu/moe.cpp).
// Bounded: it stops growing past the split's row limit.
int64_t moe_experts_batch_floats(int64_t T, int64_t D, int64_t I, int64_t K, int64_t E, int64_t threads);

} // namespace deepinfer::kernels
