#pragma once
// The primitive ops (matmul, norms, RoPE, softmax, top-k, embedding). Every op has an obvious scalar
// version in ref/ (the executable spec, tested against independent computations); the unqualified
// kernels:: entry points may route to a faster version in cpu/. Model code does not call these directly:
// it calls the named V4 ops of a kernels::Backend (backend.h, params.h), whose implementations build on
// these. All activations are F32; weights are core::Weight in their stored format and are dequantized
// inside the op, never expanded ahead of time.

#include <cstdint>
#include <span>

#include "core/weight.h"

namespace deepinfer::core {
class ThreadPool;
}

namespace deepinfer::kernels {

// How a matmul may round (docs/kernels.md). kExact: F32 activations, F32 accumulation (the goldens hold).
// kFast: activations quantized to int8 per 128 columns where an int8 kernel exists (VNNI; FP4 weights),
// exact elsewhere; the process default kFast also gives the experts' SwiGLU a vector exp (AVX-512,
// cpu/elementwise_avx512.cpp). kDefault: the process default, kernels::cpu::set_default_numerics (exact
// unless set).
enum class Numerics : uint8_t { kDefault, kExact, kFast };

// y[i, r - row_begin] = sum_c x[i, c] * W[r, c] for i < n, r in [row_begin, row_end): Linear(x) = x W^T
// over a row range of W (a grouped projection uses one range per group). Rows of x and y are strided.
struct MatmulArgs {
    const float* x = nullptr; // [n, ldx], first W.cols columns used
    int64_t n = 0;
    int64_t ldx = 0;
    const core::Weight* w = nullptr;
    int64_t row_begin = 0;
    int64_t row_end = 0; // exclusive
    float* y = nullptr;  // [n, ldy], columns [0, row_end - row_begin) written
    int64_t ldy = 0;
    core::ThreadPool* pool = nullptr; // threads to split output rows over; nullptr: ThreadPool::global()
    Numerics numerics = Numerics::kDefault;
};

// Plain Linear: y [n, w.rows] = x [n, w.cols] W^T.
MatmulArgs linear_args(const float* x, int64_t n, const core::Weight& w, float* y);

// matmul_multi: up to kMaxMultiMatmuls matmuls with the same token count, pool and numerics (activations,
// weights, row ranges and outputs free; no output may overlap another entry's input). The result is
// exactly that of matmul on each entry in turn; the CPU version runs them as one parallel loop, preparing
// each distinct activation matrix once (docs/kernels.md, "Several weights in one loop").
constexpr int kMaxMultiMatmuls = 8;

namespace ref {
void matmul(const MatmulArgs& a);
// out [w.cols] = W[r, :] in F32.
void dequantize_row(const core::Weight& w, int64_t r, float* out);
// y [n, d] = x * rsqrt(mean(x^2) + eps) (* weight when weight != nullptr). In place allowed. The sum of
// squares is in double, over 16 interleaved partial sums in a fixed order (elementwise.cpp).
void rms_norm(const float* x, const float* weight, int64_t n, int64_t d, float eps, float* y);
// Interleaved RoPE on the trailing rope_dim channels of n vectors x [n, ld] (first `dim` used):
// pair i = (x[dim - rope_dim + 2i], x[... + 1]) rotated by angle with cos[i], sin[i]; inverse uses -sin.
void rope(float* x, int64_t n, int64_t ld, int64_t dim, int64_t rope_dim, const float* cos, const float* sin,
          bool inverse);
// In place, numerically stable; -inf entries get weight 0 (at least one entry must be finite).
void softmax(float* x, int64_t n);
// Indices of the k largest entries, by descending value; ties go to the lower index.
void topk(const float* x, int64_t n, int64_t k, int32_t* idx);
// Greedy decoding's pick: the lowest index of the largest non-NaN entry (0 when all n are NaN; n >= 1).
int32_t argmax(const float* x, int64_t n);
// The set torch.topk(largest=True) selects on CPU, ties included: its algorithm run on (value, index)
// pairs — std::partial_sort when k * 64 <= n, else std::nth_element at k - 1 — with "larger first"
// (NaN largest). idx gets the k selected indices in that algorithm's order (unsorted).
void topk_torch(const float* x, int64_t n, int64_t k, int32_t* idx);
// out [n, table.cols] = rows ids[i] of the table.
void embedding(const core::Weight& table, const int32_t* ids, int64_t n, float* out);
} // namespace ref

namespace cpu {
// Same contract as ref::matmul, FP32 accumulation, on the ISA picked at run time (kernels/cpu/linear.h:
// AVX-512, AVX2 or portable C++; DEEPINFER_ISA forces one). Output rows are split over a.pool.
void matmul(const MatmulArgs& a);
void matmul_multi(std::span<const MatmulArgs> args);
// ref::argmax's index (elementwise_avx512.cpp where the active ISA is avx512: a max pass, then a scan for
// its first occurrence).
int32_t argmax(const float* x, int64_t n);
} // namespace cpu

// Scalar activations, as torch defines them.
float sigmoid(float x);
float softplus(float x); // beta 1, threshold 20 (x > 20 -> x)
float silu(float x);     // x / (1 + exp_ref(-x))
// e^x as every backend computes it where bits must agree (SwiGLU's silu, attention's softmax): x clamped to
// [-104, 89] (where e^x is already 0 / inf in F32), k = round(x log2 e), r = x - k ln 2 in two steps
// (Cody-Waite: ln 2's high part has 9 significant bits, so k * hi is exact), e^r by Cephes' expf polynomial
// (degree 6 beyond 1 + r), then exactly rounded scaling by 2^k; every operation a separately rounded F32 one
// (no FMA), so SIMD versions (cpu/exp_avx512.h) give the same bits and the result does not depend on the C
// library. NaN returns x. Within 2 ulp of std::exp (ops_test).
float exp_ref(float x);

inline void matmul(const MatmulArgs& a) {
    cpu::matmul(a);
}
inline void matmul_multi(std::span<const MatmulArgs> args) {
    cpu::matmul_multi(args);
}
inline void linear(const float* x, int64_t n, const core::Weight& w, float* y) {
    cpu::matmul(linear_args(x, n, w, y));
}
inline void rms_norm(const float* x, const float* weight, int64_t n, int64_t d, float eps, float* y) {
    ref::rms_norm(x, weight, n, d, eps, y);
}
inline void rope(float* x, int64_t n, int64_t ld, int64_t dim, int64_t rope_dim, const float* cos,
                 const float* sin, bool inverse) {
    ref::rope(x, n, ld, dim, rope_dim, cos, sin, inverse);
}
inline void softmax(float* x, int64_t n) {
    ref::softmax(x, n);
}
inline void topk(const float* x, int64_t n, int64_t k, int32_t* idx) {
    ref::topk(x, n, k, idx);
}
inline void topk_torch(const float* x, int64_t n, int64_t k, int32_t* idx) {
    ref::topk_torch(x, n, k, idx);
}
inline int32_t argmax(const float* x, int64_t n) {
    return cpu::argmax(x, n);
}
inline void embedding(const core::Weight& table, const int32_t* ids, int64_t n, float* out) {
    ref::embedding(table, ids, n, out);
}

} // namespace deepinfer::kernels
