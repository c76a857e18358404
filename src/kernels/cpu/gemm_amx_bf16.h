#pragma once
// Internal: the fast GEMM of FP8-block and BF16 weights on AMX-BF16 tiles (tdpbf16ps), Numerics::kFast
// where amx_bf16_supported() (linear.h). Weights decoded to BF16 with their block scale in the exponent
// (exact: an e4m3 value times a power of two is a BF16 value, subnormals included), activations rounded
// to BF16 once per call, products summed in the tiles' F32 over all columns: one store per output tile,
// none per 128-column block (the int8 GEMM's epilogue). Nothing here allocates. See docs/kernels.md,
// "fast: FP8 and BF16 weights on AMX-BF16 tiles".

#include <cstdint>

#include "kernels/cpu/linear_kernels.h"

namespace deepinfer::kernels::cpu::detail {

// Output rows per panel (two 16-row A tiles) and the columns decoded per panel pass.
constexpr int64_t kAmxBf16RowTile = 32;
constexpr int64_t kAmxBf16Kc = 256;
// Tokens per call: one group of 16 or 32 (the C tiles stay in the tile unit over all columns).
constexpr int64_t kAmxBf16MaxTokens = 32;

// The activations: xb [cols / 2, n_pad, 2] BF16 (AMX's B layout: a pair row holds two columns of 16
// tokens per 64 bytes), n_pad a multiple of 16, tokens past a.n zero. Column order within each 64-column
// group is the weight format's panel order (FP8 panels come out of their byte tables interleaved into words
// per 128-bit lane, so a 64-column group's first 32 positions hold columns 0-7, 16-23, 32-39, 48-55 and the
// next 32 the others; BF16 weights keep column order). Prepare: tokens [t0, t1), multiples of 16.
using AmxBf16PrepareFn = void (*)(const MatmulArgs& a, int64_t t0, int64_t t1, int64_t n_pad, uint16_t* xb);
// Output rows [r0, r1) (relative to a.row_begin) for all a.n tokens, scratch of
// amx_bf16_scratch_floats(n_pad) floats.
using AmxBf16GemmFn = void (*)(const MatmulArgs& a, int64_t r0, int64_t r1, const uint16_t* xb, int64_t n_pad,
                               float* scratch);
inline int64_t amx_bf16_scratch_floats(int64_t n_pad) {
    return kAmxBf16RowTile * n_pad + kAmxBf16RowTile * 16 + kAmxBf16RowTile * kAmxBf16Kc + 16;
}
struct AmxBf16Table {
    AmxBf16PrepareFn prepare_fp8 = nullptr;  // FP8 panel order
    AmxBf16PrepareFn prepare_bf16 = nullptr; // column order
    AmxBf16GemmFn fp8 = nullptr;
    AmxBf16GemmFn bf16 = nullptr;
};
AmxBf16Table avx512_amx_bf16_table();

// FP8 block scales (ue8m0) whose every e4m3 value, subnormals included, is a normal BF16 once scaled.
constexpr int kAmxBf16Fp8ScaleMin = 10, kAmxBf16Fp8ScaleMax = 246;
constexpr bool amx_bf16_fp8_scale_ok(uint8_t s) {
    return s >= kAmxBf16Fp8ScaleMin && s <= kAmxBf16Fp8ScaleMax;
}

} // namespace deepinfer::kernels::cpu::detail
