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
// Tokens per call: one group of 16 or 32 (the C tiles stay in the tile unit over all columns). Larger calls
// take the one-piece variant of the multi-group GEMM (AmxBf16x3Table::fp8_1 / bf16_1).
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
// FP4 group scales (ue8m0) whose every e2m1 value (0.5 .. 6) is a normal BF16 once scaled.
constexpr int kAmxBf16Fp4ScaleMin = 2, kAmxBf16Fp4ScaleMax = 252;
constexpr bool amx_bf16_fp4_scale_ok(uint8_t s) {
    return s >= kAmxBf16Fp4ScaleMin && s <= kAmxBf16Fp4ScaleMax;
}

// The exact GEMM on AMX-BF16 tiles (gemm_amx_bf16x3.cpp; Numerics::kExact where amx_bf16_enabled()): each F32
// activation is split into three BF16 pieces whose sum is the activation (the top 8 significant bits by
// truncation, then the next 8, then the last 8: the pieces are exact, none rounded), the weights are decoded
// exactly to BF16 (FP8-block, BF16, FP4-group: panel_format), and the tile unit sums the exact products in
// F32: the first piece's in one accumulator, the two smaller pieces' in another, added at the end. What
// differs from the F32 GEMM is the order and grouping of the F32 additions, and that AMX reads BF16
// subnormals as zero and flushes F32 subnormal sums (activation pieces below 2^-126: |x| < 2^-110 loses its
// lowest bits). Tokens go in groups of 16, all three pieces of a group's tokens in one tile sequence per 32
// columns, so a token's result does not depend on the other tokens of the call.
//
// xb3: per group of 16 tokens g and piece p, a [cols / 2, 16, 2] BF16 block (AMX's B layout) at
// xb3 + (3 g + p) x 16 cols, in the weight format's panel order (see AmxBf16PrepareFn). Prepare: groups
// [g0, g1). Gemm: output rows [r0, r1) (relative to a.row_begin) for all a.n tokens, scratch of
// amx_bf16x3_scratch_floats(groups) floats.
using AmxBf16x3PrepareFn = void (*)(const MatmulArgs& a, int64_t g0, int64_t g1, uint16_t* xb3);
using AmxBf16x3GemmFn = void (*)(const MatmulArgs& a, int64_t r0, int64_t r1, const uint16_t* xb3,
                                 int64_t groups, float* scratch);
inline int64_t amx_bf16x3_scratch_floats(int64_t groups) {
    return groups * 4 * 256 + kAmxBf16RowTile * kAmxBf16Kc + 16;
}
// The most tokens one prepared block holds (a call runs in balanced chunks of at most this many): three
// pieces, and the one-piece variant (gemm_bench, ms per 2048 x 4096 FP8 matrix at 128 / 512 tokens, chunks of
// 64 / 128 / 192: 3.67 / 3.00 / 3.03 and 14.8 / 12.2 / 11.8, BF16 at 64 tokens 1.88 / 1.92 / 2.81).
constexpr int64_t kAmxBf16x3Tokens = 64, kAmxBf16x1Tokens = 128;
struct AmxBf16x3Table {
    AmxBf16x3PrepareFn prepare_fp8 = nullptr;  // FP8 panel order
    AmxBf16x3PrepareFn prepare_cols = nullptr; // column order (BF16, FP4)
    AmxBf16x3GemmFn fp8 = nullptr;
    AmxBf16x3GemmFn bf16 = nullptr;
    AmxBf16x3GemmFn fp4 = nullptr;
    // The one-piece variant (Numerics::kFast past kAmxBf16MaxTokens): the activations rounded to BF16 (one
    // [cols / 2, 16, 2] block per group), the same passes, groups in pairs.
    AmxBf16x3PrepareFn prepare1_fp8 = nullptr, prepare1_cols = nullptr;
    AmxBf16x3GemmFn fp8_1 = nullptr, bf16_1 = nullptr;
};
AmxBf16x3Table avx512_amx_bf16x3_table();

} // namespace deepinfer::kernels::cpu::detail
