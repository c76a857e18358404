#pragma once
// How the LM head is bound (docs/kernels.md, "fast: the LM head as FP8 blocks"). DeepSeek ships the head in
// BF16 while every other linear weight is FP8 128x128 blocks or FP4; decode reads the whole head for every
// token (70% of the bytes a token reads on the 2-layer V4-Flash-shaped checkpoint, ~12% on the full
// V4-Flash). Under `fast` numerics a head stored F32 / BF16 / F16 is quantized at load into FP8 e4m3
// 128x128 blocks with ue8m0 scales (DeepSeek's own weight format, which the kernels already run: half the
// bytes of BF16), unless turned off.

#include <cstdint>
#include <string>
#include <string_view>

#include "core/status.h"
#include "core/weight.h"
#include "weights/checkpoint.h"

namespace deepinfer::model {

enum class HeadFp8 : uint8_t {
    kAuto, // FP8 blocks when the process numerics are fast (kernels::cpu::default_numerics()), else stored
    kOff,  // always as stored
    kOn,   // always FP8 blocks, under exact numerics too (to measure the weight rounding on its own)
};

const char* head_fp8_name(HeadFp8 mode); // "auto", "off", "on"
// Parses "auto" / "off" / "on"; false otherwise.
bool parse_head_fp8(std::string_view name, HeadFp8* mode);
// Process default for every later model load (kAuto until set; the cli sets it once from --head-fp8 /
// DEEPINFER_HEAD_FP8).
void set_head_fp8(HeadFp8 mode);
HeadFp8 head_fp8();
// Whether a head stored in F32 / BF16 / F16 is bound as FP8 blocks now (head_fp8() and the numerics).
bool head_as_fp8();

// Whether a head bound as FP8 blocks from BF16 also gets int8 panels (kernels/cpu/gemm_int8.h): the int8
// GEMM's panels of the BF16 head, pre-decoded at load, which the fast int8 GEMM then reads at batch token
// counts instead of decoding the FP8 copy per call (that decode was ~30% of its time; docs/kernels.md,
// "fast: the LM head's int8 panels"). The FP8 copy still serves the decode GEMV. Where head_as_fp8(), the
// CPU has the int8 GEMM (VNNI + VBMI) without AMX (whose machines run FP8 through AMX-BF16 tiles), and
// DEEPINFER_HEAD_PANELS is not 0. Together the two copies hold about the BF16 head's bytes (1 + 1 + 1/32
// per element, against 2).
bool head_int8_panels();

// FP8 block size of a head quantized at load: DeepSeek's 128 x 128 (the int8 GEMM and the BF16 GEMV
// need 128-column blocks).
constexpr int kHeadFp8Block = 128;

// The LM head [vocab = rows, D = cols] stored as `prefix` ("head", or "embed" for tied embeddings): as
// stored, or, when head_as_fp8() and it is stored F32 / BF16 / F16, quantized at load to FP8 128x128
// blocks (Checkpoint::fp8_block_weight; its stored pages released). Only the vocabulary rows
// [row_begin, row_end) are computed when a tensor-parallel rank uses no others (row_end < 0: all).
core::Result<core::Weight> bind_lm_head(const weights::Checkpoint& ckpt, const std::string& prefix,
                                        int64_t rows, int64_t cols, const weights::QuantizationConfig& q,
                                        int64_t row_begin = 0, int64_t row_end = -1);

// The vocabulary rows a tensor-parallel rank's LM head reads: tp_linear (deepseek_v4/tensor_parallel.h)
// splits them evenly over the ranks, or computes them all on every rank when they do not split. {0, -1}:
// all rows.
struct HeadRows {
    int64_t begin = 0;
    int64_t end = -1;
};
HeadRows tp_head_rows(int64_t vocab, int64_t tp_rank, int64_t tp_size);

} // namespace deepinfer::model
