#pragma once
// DeepSeek V4.1's cache fake-quantization (spec §3.5): part of the model's numerics, applied in F32 to
// what the caches hold. Each quantizes every `block` consecutive values of a row with one scale and writes
// back the dequantized values, exactly as transformers' deepseek_v41 (`_fake_quant_fp8_block`,
// `_fake_quant_fp4_block`). A row whose width is not a multiple of `block` is left as is (the reference
// skips shapes it cannot block). x: [rows, n], in place.
//
//  * fp8_block (window KV, block 32): scale = 2^ceil(log2(max(amax, 1e-4) · (1/448))) (ue8m0), values
//    clamped to ±448 and rounded to e4m3 (RNE).
//  * fp4_block, ue8m0 scales (indexer q and k, block 32): scale = 2^ceil(log2(max(amax, 6·2^-126) · (1/6))).
//  * fp4_block, e4m3 scales (compressed KV, block 16): scale = e4m3(max(amax, 6·2^-9) / 6).
//    FP4 values: clamped to ±6 and rounded to the e2m1 grid (RNE: ties at 0.25, 1.25, 2.5, 5 go down,
//    at 0.75, 1.75, 3.5 up).

#include <cstdint>

namespace deepinfer::kernels::ref {

// 2^ceil(log2(t)) for F32 t > 0 by the exponent/mantissa bits (the reference kernel's ue8m0 rounding).
float pow2_ceil_scale(float t);

void fake_quant_fp8_block(float* x, int64_t rows, int64_t n, int64_t block);
void fake_quant_fp4_block(float* x, int64_t rows, int64_t n, int64_t block, bool e4m3_scales);

} // namespace deepinfer::kernels::ref
