// Numerics::kFast int8 GEMV for FP4 e2m1 weights on AVX-512 CPUs without VNNI (Skylake-SP / -X): the
// kernel of gemv_int8_impl.h with each vpdpbusd done as vpmaddubsw + vpmaddwd (same integer sums, same
// bits). Decode token counts only (a.n <= kGemvMaxTokens); larger calls under kFast compute exactly on
// these CPUs. Compiled with AVX-512 F/BW/VL/DQ (no VNNI); reached only when the CPU reports AVX-512.

#include <immintrin.h>

#include <cstdint>

#include "core/weight.h"
#include "kernels/cpu/block_amax_avx512.h"
#include "kernels/cpu/linear_kernels.h"

namespace deepinfer::kernels::cpu::detail::avx512int8 {
namespace {

inline int64_t min64(int64_t a, int64_t b) {
    return a < b ? a : b;
}

#include "kernels/cpu/gemv_int8_impl.h" // quantize_gemv, gemv_q (vpmaddubsw + vpmaddwd here)

} // namespace
} // namespace deepinfer::kernels::cpu::detail::avx512int8

namespace deepinfer::kernels::cpu::detail {
Int8Table avx512_int8_gemv_table() {
    Int8Table t;
    t.quantize_gemv = &avx512int8::quantize_gemv;
    t.gemv = &avx512int8::gemv_q;
    return t;
}
} // namespace deepinfer::kernels::cpu::detail
