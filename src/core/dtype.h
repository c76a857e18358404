#pragma once
// Element types of checkpoints and tensors, and exact codecs for the low-precision formats DeepSeek
// ships: bf16, f16, fp8 e4m3fn, e8m0 (ue8m0 block scales) and fp4 e2m1 (two codes per byte, element 2k
// in the low nibble). Decoders are exact over all codes; encoders round to nearest even.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

namespace deepinfer::core {

enum class DType : uint8_t {
    kF32,
    kBF16,
    kF16,
    kF8E4M3, // e4m3fn: bias 7, no inf, 0x7F/0xFF NaN, max 448
    kF8E8M0, // unsigned exponent only: byte b -> 2^(b-127), 255 = NaN
    kI8,     // also packed fp4 e2m1 (two codes per byte)
    kU8,
    kI32,
    kI64,
    kBool,
};

// Bytes per element (packed fp4 is stored as kI8: one byte per two values).
size_t dtype_size(DType t);
// Safetensors spelling: "F32", "BF16", "F8_E4M3", ...
std::string_view dtype_name(DType t);
std::optional<DType> dtype_from_safetensors(std::string_view s);

inline float bits_to_f32(uint32_t u) {
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}
inline uint32_t f32_to_bits(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
}

inline float bf16_to_f32(uint16_t h) {
    return bits_to_f32(static_cast<uint32_t>(h) << 16);
}
uint16_t f32_to_bf16(float f); // round to nearest even; NaN stays NaN

float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f); // round to nearest even

float fp8_e4m3_to_f32(uint8_t b);
uint8_t f32_to_fp8_e4m3(float f); // RNE, saturates to +-448; NaN -> 0x7F

// e8m0: 2^(b-127); b == 255 is NaN.
float e8m0_to_f32(uint8_t b);

// fp4 e2m1 code (4 bits): [0,.5,1,1.5,2,3,4,6] with sign in bit 3.
float fp4_e2m1_to_f32(uint8_t code);
uint8_t f32_to_fp4_e2m1(float f); // RNE on the e2m1 grid, saturates to +-6

// Lookup tables for hot loops: fp8_e4m3_table()[b] == fp8_e4m3_to_f32(b) for all 256 bytes;
// fp4_e2m1_table()[c] for all 16 codes.
const float* fp8_e4m3_table();
const float* fp4_e2m1_table();

} // namespace deepinfer::core
