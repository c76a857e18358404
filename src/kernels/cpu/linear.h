#pragma once
// The CPU linear kernels' public face: run-time ISA dispatch for kernels::cpu::matmul (declared in
// kernels/ops.h). AVX-512 (F/BW/VL/DQ), AVX2 + FMA + F16C and portable C++ are compiled into every
// binary; the best the CPU supports is used unless DEEPINFER_ISA=avx512|avx2|ref (read once, at first
// use) or set_active_isa() picks another. See docs/kernels.md.

#include <cstdint>
#include <span>
#include <string_view>

#include "kernels/ops.h"

namespace deepinfer::core {
class ThreadPool;
}

namespace deepinfer::kernels::cpu {

enum class Isa : uint8_t {
    kRef,    // portable C++: one weight row dequantized at a time (no SIMD intrinsics)
    kAvx2,   // AVX2 + FMA + F16C, 8 floats per vector
    kAvx512, // AVX-512 F/BW/VL/DQ, 16 floats per vector
};

const char* isa_name(Isa isa); // "ref", "avx2", "avx512"
// Parses a DEEPINFER_ISA value; false when `name` is none of the names above.
bool parse_isa(std::string_view name, Isa* isa);
bool isa_supported(Isa isa); // by this CPU (kRef always)
Isa best_isa();              // the widest supported
// The ISA matmul dispatches to: set_active_isa's, else DEEPINFER_ISA's (an unknown or unsupported value
// is logged and ignored), else best_isa().
Isa active_isa();
void set_active_isa(Isa isa); // must be supported (checked)

// matmul on one given ISA, whatever is active (the kernel harness compares every ISA compiled in).
void matmul_isa(const MatmulArgs& a, Isa isa);
// matmul_multi (ops.h) on one given ISA.
void matmul_multi_isa(std::span<const MatmulArgs> args, Isa isa);

// Process default for MatmulArgs::numerics == kDefault (kExact until set; the cli sets it once at
// start-up, e.g. from DEEPINFER_NUMERICS=exact|fast). Setting kDefault restores kExact.
void set_default_numerics(Numerics numerics);
Numerics default_numerics();
const char* numerics_name(Numerics numerics); // "default", "exact", "fast"
// Parses "exact" / "fast"; false otherwise.
bool parse_numerics(std::string_view name, Numerics* numerics);
// Whether this CPU has the int8 kernels kFast uses (AVX-512 VNNI); without them kFast computes exactly.
bool int8_supported();
bool bf16_supported(); // AVX-512 BF16 (vdpbf16ps): Numerics::kFast for BF16 weights
// AVX-512 VNNI + VBMI: Numerics::kFast runs FP8-block weights (128-column blocks) and FP4 weights through the
// int8 GEMMs of gemm_int8.h at GEMM token counts (FP4 without VBMI: linear_avx512_vnni.cpp's GEMM).
bool fp8_int8_supported();
// AMX-TILE + AMX-INT8, granted by the kernel, and not switched off by DEEPINFER_AMX=0: those int8 GEMMs run
// FP8-block, BF16 and FP4 weights through AMX tiles (bit-identical to VNNI); FP4 takes them from
// kAmxFp4MinTokens tokens, FP8-block and BF16 from kAmxMinTokens (where amx_bf16_supported() is false;
// where it is true, only those whose FP8 scales the AMX-BF16 GEMM does not take).
bool amx_supported();
// amx_supported(), AVX-512 BF16 and AMX-BF16, and not switched off by DEEPINFER_AMX_BF16=0: Numerics::kFast
// runs FP8-block and BF16 weights from kAmxBf16MinTokens tokens through gemm_amx_bf16.h (tdpbf16ps, F32
// sums over all columns; past 32 tokens its one-piece multi-group variant in gemm_amx_bf16x3.cpp) instead of
// the BF16 GEMV or the int8 tile GEMM; Numerics::kExact runs FP8-block,
// BF16 and FP4-group weights above kGemvMaxTokens through its exact GEMM (each activation as three BF16
// pieces that sum to it) instead of the F32 GEMM.
bool amx_bf16_supported();

// Grows the calling thread's matmul scratch (kept per thread, grown on first use) to what any matmul of up
// to n tokens and `cols` columns needs, so that later calls on this thread allocate nothing. For threads
// that run whole matmuls picked dynamically (cpu/moe.cpp's expert split): without it, the first time a
// thread draws a larger matmul than before would allocate, in a steady-state step.
void reserve_thread_scratch(int64_t n, int64_t cols);
// reserve_thread_scratch on every thread of `pool` (nullptr: the calling thread), once per growth: a call
// within what this pool already reserved only compares two numbers. Run before a loop whose threads draw
// matmuls dynamically, so that which thread draws which never decides whether a step allocates.
void reserve_pool_scratch(core::ThreadPool* pool, int64_t n, int64_t cols);

// Token counts up to this use the GEMV kernels (weights decoded in registers, streamed once per 4 tokens);
// larger ones the blocked GEMM (weights dequantized once per panel, reused by every token).
constexpr int64_t kGemvMaxTokens = 8;
// Numerics::kFast, FP8-block and BF16 weights, CPUs with AVX-512 BF16: from this many tokens the int8 GEMM,
// below it the BF16 GEMV (linear.cpp, fast_fp8_int8_fits, fast_bf16_int8_fits). For BF16 the two are within
// noise of each other from 12 to 24 tokens (one core, 2048 x 4096, bench/gemm_bench).
constexpr int64_t kInt8OverBf16Tokens = 28;
// The same threshold where amx_supported(): the tile GEMM leaves the BF16 GEMV behind from fewer tokens.
constexpr int64_t kAmxMinTokens = 9;
// Where amx_supported(): FP4 weights take the int8 tile GEMM from this many tokens instead of the int8 GEMV
// (one core, 2048 x 4096, gemm_bench, ms per matrix, GEMV / tiles: 4 tokens 0.30-0.34 / 0.43, 5 0.42-0.47 /
// 0.45, 6 0.52 / 0.44-0.46, 8 0.60-0.73 / 0.46-0.52; since the scratch is 64-byte aligned, session 22, 3
// alternating rounds: 3 tokens 0.35-0.38 / 0.57-0.58, 4 0.44-0.48 / 0.56-0.58, 5 0.63-0.65 / 0.56-0.57).
constexpr int64_t kAmxFp4MinTokens = 5;
// The most tokens Numerics::kFast runs FP4 weights through the int8 GEMV on this CPU (kAmxFp4MinTokens - 1
// where amx_supported(), else kGemvMaxTokens).
int64_t fast_fp4_gemv_max_tokens();
// Numerics::kFast, weights carrying int8 panels (fast's LM head off AMX, model/lm_head.h): the int8 GEMM on
// the panels from this many tokens (no panel decode left, so it passes the BF16 GEMV from far fewer tokens
// than kInt8OverBf16Tokens). flash2's head (129280 x 4096) in the engine, Zen 4, ms per 16 forwards, GEMV /
// panels: 2 tokens 265 / 385, 4 324 / 471, 6 408 / 553, 8 507 / 416, 16 1098 / 557, 24 1255 / 694.
constexpr int64_t kPanelsMinTokens = 8;
// Where amx_bf16_supported(): FP8-block and BF16 weights take the AMX-BF16 GEMM (gemm_amx_bf16.h) from this
// many tokens, instead of the BF16 GEMV (FP8 GEMV / tiles: 3 tokens 0.65-0.69 / 0.66-0.73, 4
// 0.83-0.85 / 0.64-0.76, 6 1.29-1.31 / 0.70; BF16 4 1.17 / 1.06-1.08) or the int8 tile GEMM (FP8 at 16:
// 0.86-0.90 / 0.81; BF16 1.80-1.87 / 1.17-1.40).
constexpr int64_t kAmxBf16MinTokens = 4;

} // namespace deepinfer::kernels::cpu
