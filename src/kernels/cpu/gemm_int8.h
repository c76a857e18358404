#pragma once
// Internal: int8 VNNI GEMMs for Numerics::kFast (docs/kernels.md, "fast, prefill"): the activations
// quantized once per call by the table's own quantize (below), then output rows [r0, r1) (relative to
// a.row_begin) for all a.n tokens, with scratch of int8_scratch_floats(n_pad) floats. Nothing here
// allocates.

#include <cstdint>

#include "core/weight.h"
#include "kernels/cpu/linear_kernels.h"

namespace deepinfer::kernels::cpu::detail {

// FP8 e4m3 block weights whose blocks are whole 128-column activation blocks (block_cols % 128 == 0,
// cols % 128 == 0). Each weight row's 128 columns are requantized to int8 in the panel with a power-of-two
// step chosen from the largest magnitude (the top four binades exact, smaller codes rounded to nearest
// even: the weights' only rounding), by a 128-entry byte table (vpermi2b, AVX-512 VBMI), then one int32 sum
// per (row, token, 128 columns) through vpdpbusd. Needs AVX-512 VNNI and VBMI.
// FP4 e2m1 weights in 32-column groups (cols % 128 == 0): 2 x e2m1 is an exact int8; where a row's four
// group scales in a 128-column block lie within 2^3 of each other they are folded into the int8 (shifts,
// still exact) and the block runs the same one-sum-per-128-columns microkernel as FP8, else one sum per
// group. A panel's rows are decoded together (scales 16 rows per vector, one vpshufb per 64 codes from a
// table per fold pattern, the nibbles left interleaved per 16 columns). Same int8 values, sums and float
// order as decoding one row at a time. Both keep the panel's weights as u8 = int8 + 128 and remove the
// offset through per-token seeds (-128 x the token's activation sum per block), so no weight row carries a
// correction.
// BF16 weights (cols % 128 == 0): each weight row's 128 columns requantized in the panel as the
// activations are (bf16_requant_block: scale amax / 127, nearest even), then the FP8 kernel's one sum per
// (row, token, 128 columns). Needs AVX-512 VNNI (the table comes with VBMI's, as the others).
// Token granularity of all three: n_pad (xq's and xs's token stride) is a multiple of 8 (tokens past a.n
// zero); a group of 8 that does not fill a vector of 16 runs as 8 (ymm), not padded to 16.
constexpr int64_t kGemmQPad = 8;
// Their activations (GemmQuantizeFn, tokens [t0, t1), both multiples of kGemmQPad, t1 <= n_pad): xq
// [cols / 4, n_pad, 4] int8 per token per 128 columns (scale amax / 127, nearest even; tokens past a.n
// zero), xs [cols / 128, n_pad] the scales, and seed [cols / 128, 5, n_pad] int32: per block, -128 x the
// token's sum of its int8 values over each 32-column group (4 rows), then over the block (the panel holds
// weights as u8 = int8 + 128; the seed removes the +128 once per token). Then GemmQ8Fn: output rows
// [r0, r1) (relative to a.row_begin) for all a.n tokens, with scratch of int8_scratch_floats(n_pad).
using GemmQuantizeFn = void (*)(const MatmulArgs& a, int64_t t0, int64_t t1, int64_t n_pad, int8_t* xq,
                                float* xs, int32_t* seed);
using GemmQ8Fn = void (*)(const MatmulArgs& a, int64_t r0, int64_t r1, const int8_t* xq, const float* xs,
                          const int32_t* seed, int64_t n_pad, float* scratch);
// Floats of the activation buffer GemmQuantizeFn fills (xq, then xs, then seed, each 64-byte aligned when
// the buffer is and n_pad is a multiple of 16).
inline int64_t gemm_q8_act_floats(int64_t n_pad, int64_t cols) {
    return cols * n_pad / 4 + cols / kQBlock * n_pad + 5 * (cols / kQBlock) * n_pad;
}
// Writes the int8 panels of row tiles [t0, t1) of rows [row0, row_end) of w into codes / scales ("Int8
// panels", below).
using PackPanelsFn = void (*)(const core::Weight& w, int64_t row0, int64_t row_end, int64_t t0, int64_t t1,
                              uint8_t* codes, float* scales);
struct GemmQTable {
    GemmQuantizeFn quantize = nullptr;
    GemmQ8Fn fp8 = nullptr;
    GemmQ8Fn fp4 = nullptr;
    GemmQ8Fn bf16 = nullptr;
    GemmQ8Fn panels = nullptr; // the weight's int8 panels (below) instead of decoding its data
    // Int8 panels (below) at load time, where the CPU runs this table. pack_bf16: pack_bf16_int8_panels,
    // vectorized (the same bytes: the `bf16` GEMM's panel decoder writes them). pack_fp8: an FP8-block
    // weight's (block_cols % 128 == 0) by the `fp8` GEMM's panel decoder, so the `panels` GEMM's results
    // are the `fp8` GEMM's, bit for bit.
    PackPanelsFn pack_bf16 = nullptr;
    PackPanelsFn pack_fp8 = nullptr;
};
GemmQTable avx512_vnni_gemm_table();
// The same with FP8, BF16 and FP4 (blocks whose group scales folded) through AMX tiles (tdpbusd) instead of
// vpdpbusd: bit-identical results (the same int32 sums, the same float epilogue); the quantization is the
// VNNI table's. Only where amx_supported() (linear.h): the CPU has AMX-TILE and AMX-INT8 and Linux granted
// the tile state. The tile loads of a last group of fewer than 16 tokens read up to 32 bytes past xq's end
// (never used): xq must be followed by readable memory, as matmul_int8's xs and seeds follow it.
GemmQTable avx512_amx_gemm_table();

// The int8 a FP8 e4m3 code becomes in the fast GEMM when its row's 128-column block has largest magnitude
// code `max_code` (both 0..255; sign in bit 7), and the step that int8 counts in units of 2^-9 (times the
// block scale): value ~= q * 2^(step_log2 - 9). Scalar; the harness checks the kernel against it.
int8_t fp8_requant_code(uint8_t code, uint8_t max_code);
int fp8_requant_step_log2(uint8_t max_code);

// The int8 values q[0..127] the fast GEMM holds for 128 BF16 weights w (bit patterns), and the scale they
// count in (the return value): amax / 127 over the block's magnitudes, q = w x (127 / amax) rounded to the
// nearest, ties to even, all in F32. A block whose amax is below kBf16RequantMin (all zero, or so small
// that 127 / amax would overflow) is all q = 0. Scalar; the harness checks the kernel against it.
constexpr float kBf16RequantMin = 0x1p-120f;
float bf16_requant_block(const uint16_t* w, int8_t* q);

// Int8 panels: a weight's rows [row0, row0 + rows) pre-decoded once (at load) into the panels these GEMMs
// otherwise decode per call (core::Weight::panel_codes / panel_scales / panel_row0 / panel_rows). Row tile t
// (rows row0 + [t kQRowTile, (t + 1) kQRowTile)) and 128-column block kb (nkb = cols / 128 of them) start
// at panel p = t nkb + kb: codes[p kQRowTile kQBlock + m kQBlock + c] = int8 + 128 of the tile's row m,
// column c of the block (u8, as in a decoded panel), scales[p kQRowTile + m] its scale. The last tile is
// whole (rows past the range are zero). A row's values depend on that row alone, so the origin row0 (a
// tensor-parallel rank's first vocabulary row) changes no result. From BF16 weights the values are
// bf16_requant_block's, so the `panels` GEMM's results are the `bf16` GEMM's on the BF16 weight, bit for
// bit: the same int8 values and scales, the same microkernel. From FP8-block weights (the table's
// pack_fp8; the dense weights under fast, model/int8_panels.h) they are the `fp8` GEMM's decode
// (fp8_requant_code against the row's largest code in the block, scale = block scale x 2^(step - 9)), so
// the results are that GEMM's. The GEMM takes a call whose rows lie in the range and whose first row is a
// tile's (linear.cpp).
inline int64_t int8_panel_tiles(int64_t rows) {
    return (rows + kQRowTile - 1) / kQRowTile;
}
inline int64_t int8_panel_code_bytes(int64_t rows, int64_t cols) {
    return int8_panel_tiles(rows) * kQRowTile * cols;
}
inline int64_t int8_panel_scale_floats(int64_t rows, int64_t cols) {
    return int8_panel_tiles(rows) * kQRowTile * (cols / kQBlock);
}
// Writes the panels of row tiles [t0, t1) of rows [row0, row_end) of the BF16 weight w (cols % 128 == 0)
// into codes / scales (laid out for all int8_panel_tiles(row_end - row0) tiles). Scalar
// (bf16_requant_block per row and block), on any CPU; the VNNI table's pack_bf16 writes the same bytes.
void pack_bf16_int8_panels(const core::Weight& w, int64_t row0, int64_t row_end, int64_t t0, int64_t t1,
                           uint8_t* codes, float* scales);

} // namespace deepinfer::kernels::cpu::detail
