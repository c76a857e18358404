#pragma once
// Internal: the per-ISA kernel table behind kernels::cpu::matmul. Each ISA's translation unit is compiled
// with its own target flags and exports one table; the dispatcher (linear.cpp, generic flags) owns
// threading and scratch memory and calls these on plain pointers. Nothing here allocates.

#include <cstdint>

#include "kernels/ops.h"

namespace deepinfer::kernels::cpu {
// Whether Numerics::kFast runs FP4 e2m1 decode (a.n <= kGemvMaxTokens) through the int8 GEMV: AVX-512 F/BW
// is enough (vpmaddubsw + vpmaddwd where the CPU has no VNNI: the same results as vpdpbusd). The int8 GEMMs
// need VNNI (int8_supported, linear.h).
bool int8_gemv_supported();
} // namespace deepinfer::kernels::cpu

namespace deepinfer::kernels::cpu::detail {

// The row whose bytes row `row` of a GEMV tile of R rows (`row_bytes` each, `rows` in the weight)
// prefetches into L2 (the next-tile prefetch: NextTile in linear_impl.h, the fast BF16 and int8 GEMVs):
// the same row of the next tile, or of a tile further on where a tile holds less than kPrefetchAheadBytes,
// so a tile of short rows, streamed in few steps, still prefetches far enough ahead for the lines to land.
// A row past the weight's end prefetches itself, so no address outside the weight is touched.
constexpr int64_t kPrefetchAheadBytes = 8192;

// How the fast one-token BF16-dot GEMV tile (decode at batch 1: 4 FP8 or BF16 rows x 1 token,
// linear_avx512_bf16.cpp) holds its rows' sums. true: in an L1 array, the rows in a loop that is not unrolled
// (each visit loads, adds, stores), which issues the weight loads less far ahead; false: in registers, the
// rows unrolled. The chains and their order are the same (bit-identical results); only the speed differs,
// and by CPU:
// - AMD (2-vCPU Zen 4): the L1 loop streamed ~95% of a plain read where registers reached 70-80%;
// - Intel (2-vCPU Xeon with AMX): registers ahead, flash2 fast decode +2% (5 of 6 pairs; docs/kernels.md,
//   "The one-token GEMV's accumulators by CPU"). The exact GEMV's L1 loops (linear_impl.h) were a tie or
//   behind there and keep the L1 array on every CPU.
// true on AMD CPUs, false elsewhere; DEEPINFER_GEMV_ACC=l1|registers overrides (read once).
bool gemv_rows_in_l1();
// Whether the CPU is AMD's (cached): the loop shapes measured to differ by vendor key on it (this tile's
// sums, the fast FP8 one-token GEMV's row order, the exact GEMV at prefill counts; docs/kernels.md).
bool amd_cpu();
// Tests: 1 / 0 forces gemv_rows_in_l1's answer, -1 restores the default (not for use beside running matmuls).
void force_gemv_rows_in_l1(int mode);
// Whether Numerics::kFast takes the AMX-BF16 GEMM (gemm_amx_bf16.h) where it fits: amx_bf16_supported(),
// unless a test forced it off. Tests: 0 forces it off (the int8 GEMMs run instead), -1 restores the
// default (not for use beside running matmuls).
bool amx_bf16_enabled();
void force_amx_bf16_off(int mode);
constexpr int64_t prefetch_row(int64_t row, int64_t R, int64_t row_bytes, int64_t rows) {
    const int64_t tile = R * row_bytes;
    const int64_t ahead = tile >= kPrefetchAheadBytes || tile <= 0 ? R : R * (kPrefetchAheadBytes / tile);
    return row + ahead < rows ? row + ahead : row;
}

// Row streams (decode GEMVs, few tokens): a run of 4q rows is read as 4 streams of q consecutive rows, each
// tile taking one row of each (rows j, j + q, j + 2q, j + 3q), where a tile of 4 consecutive rows read 4
// streams a row apart that jump ahead by 4 rows at every tile. Each stream prefetches its own bytes ahead
// into L2 (next_rows_offset). Which rows share a tile never changes a row's sums (each row has its own
// accumulators, in the same order), so the results are bit-identical either way. FP8 one-token tile, 2
// threads, 2 x 512 MiB from DRAM, the 2-vCPU Xeon with AMX, 6 alternating rounds, median GB/s consecutive
// -> streams (runs of 128 rows): 4096 columns 27.3-27.8 -> 30.6-30.7; 2048 columns 21.6 -> 31.4; 1024
// columns 28.8-29.1 -> 30.6 (docs/kernels.md, "Session 23"). true by default; DEEPINFER_GEMV_ROWS=tile
// restores consecutive rows (read once).
bool row_streams();
// Tests: 1 / 0 forces row_streams' answer, -1 restores the default (not for use beside running matmuls).
void force_row_streams(int mode);

// The 4-stream tiles of rows [r, end): tile4(j, q) for j = r .. r + q - 1 (rows j, j + q, j + 2q, j + 3q,
// q = (end - r) / 4). Returns the first row no tile took (fewer than 4 are left from there).
template <class Tile4> int64_t for_row_streams(int64_t r, int64_t end, const Tile4& tile4) {
    const int64_t q = (end - r) / 4;
    for (int64_t j = r; j < r + q; ++j) tile4(j, q);
    return r + 4 * q;
}

// Where a GEMV tile's row `row` prefetches from (bytes from the weight's start; the tile adds the offset of
// the line it reads): with rs > 1 (row streams) kStreamAheadBytes further along its own stream (a stream's
// rows are consecutive, so past the row's end this reaches into the stream's next row); with rs = 1 the
// same byte of prefetch_row's row. Rows near the weight's end prefetch their own bytes, so no address
// outside the weight is touched. Stream read, FP8 one-token tile, 2 threads, 2 x 512 MiB, alternating,
// median GB/s, one row ahead -> 2 KiB ahead: 4096 columns 30.6 -> 32.0, 8192 columns 28.2 -> 34.1, 1024
// columns 30.6 -> 30.2 (docs/kernels.md, "Session 23").
constexpr int64_t kStreamAheadBytes = 2048;
constexpr int64_t next_rows_offset(int64_t row, int64_t rs, int64_t R, int64_t row_bytes, int64_t rows) {
    if (rs == 1) return prefetch_row(row, R, row_bytes, rows) * row_bytes;
    const int64_t reach = (kStreamAheadBytes + row_bytes - 1) / row_bytes; // rows the distance reaches into
    return row * row_bytes + (row + reach < rows ? kStreamAheadBytes : 0);
}

// GEMV (few tokens): output rows [r0, r1) (relative to a.row_begin) for all a.n tokens, weights decoded in
// registers. `xprep` holds the activations as PrepFn wrote them (nullptr where PrepFn returned false);
// `scratch` has room for [a.n, cols] floats (FP8 folds its scales into a copy of the activations there).
// Returns false when the weight's layout has no fast path here (block size not a multiple of the vector
// width, an FP8 scale outside [2^-67, 2^7]); the caller then uses the GEMM path.
using GemvFn = bool (*)(const MatmulArgs& a, int64_t r0, int64_t r1, const float* xprep, float* scratch);

// GEMM (many tokens): output rows [r0, r1) for all tokens from the transposed activations
// xt [cols, n_pad] (n_pad a multiple of 8, padding columns zero; on AVX-512 a last 8 that does not fill
// a vector of 16 runs in a 256-bit half vector). Scratch: panel [kGemmRowTile, kGemmKc]
// and ct [kGemmRowTile, n_pad] floats, 64-byte aligned. Works for every format and block size.
using GemmFn = void (*)(const MatmulArgs& a, int64_t r0, int64_t r1, const float* xt, int64_t n_pad,
                        float* panel, float* ct);

constexpr int64_t kGemmRowTile = 48; // weight rows dequantized per panel (a multiple of the 6-row microtile)
constexpr int64_t kGemmKc = 128;     // columns per panel

struct KernelTable {
    GemvFn gemv = nullptr;
    GemmFn gemm = nullptr;
    // Whether the whole call (rows [row_begin, row_end)) has a GEMV on this ISA.
    bool (*fits)(const MatmulArgs& a) = nullptr;
    // Writes xprep [n, cols] (the activations in the layout the ISA's GEMV reads for this weight format,
    // linear_impl.h) and returns true, or returns false (the GEMV reads a.x as it is).
    bool (*prep)(const MatmulArgs& a, float* xprep) = nullptr;
};

KernelTable avx512_table();

// Numerics::kFast (int8 VNNI) GEMMs: scratch of int8_scratch_floats(n_pad) floats per thread (the output
// tile [kQRowTile, n_pad], a panel's scales and corrections, its int8 weights). The older FP4 e2m1 GEMM
// (group 32, cols % kQBlock == 0; CPUs with VNNI but not VBMI, gemm_int8.h's otherwise): quantize tokens
// [t0, t1) of the activations into xq [cols / 4, n_pad, 4] (int8 + 128 per token per kQBlock columns, 4
// consecutive columns together for vpdpbusd) and xs [cols / kQBlock, n_pad] (scales); then the GEMM over
// output rows [r0, r1).
constexpr int64_t kQBlock = 128;
constexpr int64_t kQRowTile = 48;
inline int64_t int8_scratch_floats(int64_t n_pad) {
    return kQRowTile * n_pad + kQRowTile * 8 + kQRowTile * kQBlock / 4;
}
using QuantizeFn = void (*)(const MatmulArgs& a, int64_t t0, int64_t t1, int64_t n_pad, uint8_t* xq,
                            float* xs);
using GemmQFn = void (*)(const MatmulArgs& a, int64_t r0, int64_t r1, const uint8_t* xq, const float* xs,
                         int64_t n_pad, float* scratch);
// Numerics::kFast GEMV (a.n <= kGemvMaxTokens: decode), same weights: each token's activations quantized once
// per call into xq [n, cols] int8 (per 128-column block the 64 even columns, then the 64 odd ones: the low
// and high nibbles of the block's 64 weight bytes), xs [n, cols / kQBlock] (amax / 127 / 2: the table holds
// 2 x e2m1) and corr [n, cols / kQBlock, 16] int32 (-12 x the sum of the 8 codes each int32 lane covers: the
// weights go through vpdpbusd as u8 = 2 x e2m1 + 12). Then output rows [r0, r1) (relative to a.row_begin).
using QuantizeGemvFn = void (*)(const MatmulArgs& a, int8_t* xq, int32_t* corr, float* xs);
using GemvQFn = void (*)(const MatmulArgs& a, int64_t r0, int64_t r1, const int8_t* xq, const int32_t* corr,
                         const float* xs);
// Floats of scratch for QuantizeGemvFn's three outputs (xq, then corr, then xs), each 64-byte aligned when
// the scratch is.
inline int64_t gemv_q_scratch_floats(int64_t n, int64_t cols) {
    return n * cols / 4 + n * (cols / kQBlock) * 16 + n * (cols / kQBlock) + 32;
}
struct Int8Table {
    QuantizeFn quantize = nullptr;
    GemmQFn gemm = nullptr;
    QuantizeGemvFn quantize_gemv = nullptr;
    GemvQFn gemv = nullptr;
};
Int8Table avx512_vnni_table();
// The GEMV half (quantize_gemv, gemv) on AVX-512 F/BW without VNNI: vpmaddubsw + vpmaddwd, the same bits.
Int8Table avx512_int8_gemv_table();

// Numerics::kFast for BF16 and FP8-block weights on AVX-512 BF16 (cols % 32 == 0, FP8 blocks a multiple of
// 32 columns with scales in the exact GEMV's range), a.n <= kBf16MaxTokens per call (the dispatcher runs
// more tokens in chunks of that many): convert the activations to BF16 once into xb [n, cols] (uint16),
// then output rows [r0, r1) with vdpbf16ps; FP8 also needs `fold`, per-thread room for [max(n, 4), cols]
// uint16 (the activations times each row block's scales; one token: one fold per row stream):
// bf16_fold_floats floats.
constexpr int64_t kBf16MaxTokens = 64;
constexpr int64_t bf16_fold_floats(int64_t n, int64_t cols) {
    return ((n > 4 ? n : 4) * cols + 1) / 2;
}
using ConvertBf16Fn = void (*)(const MatmulArgs& a, uint16_t* xb);
using GemvBf16Fn = void (*)(const MatmulArgs& a, int64_t r0, int64_t r1, const uint16_t* xb, uint16_t* fold);
struct Bf16Table {
    ConvertBf16Fn convert = nullptr;
    GemvBf16Fn gemv = nullptr;
};
Bf16Table avx512_bf16_table();
// Portable C++ (no ISA flags): one weight row dequantized at a time, dotted with every token.
void matmul_generic(const MatmulArgs& a, core::ThreadPool* pool);
KernelTable avx2_table();

} // namespace deepinfer::kernels::cpu::detail
