#include "core/dtype.h"

#include <array>
#include <cmath>
#include <limits>

namespace deepinfer::core {

size_t dtype_size(DType t) {
    switch (t) {
    case DType::kF32:
        return 4;
    case DType::kBF16:
        return 2;
    case DType::kF16:
        return 2;
    case DType::kF8E4M3:
        return 1;
    case DType::kF8E8M0:
        return 1;
    case DType::kI8:
        return 1;
    case DType::kU8:
        return 1;
    case DType::kI32:
        return 4;
    case DType::kI64:
        return 8;
    case DType::kBool:
        return 1;
    }
    return 0;
}

std::string_view dtype_name(DType t) {
    switch (t) {
    case DType::kF32:
        return "F32";
    case DType::kBF16:
        return "BF16";
    case DType::kF16:
        return "F16";
    case DType::kF8E4M3:
        return "F8_E4M3";
    case DType::kF8E8M0:
        return "F8_E8M0";
    case DType::kI8:
        return "I8";
    case DType::kU8:
        return "U8";
    case DType::kI32:
        return "I32";
    case DType::kI64:
        return "I64";
    case DType::kBool:
        return "BOOL";
    }
    return "?";
}

std::optional<DType> dtype_from_safetensors(std::string_view s) {
    if (s == "F32") return DType::kF32;
    if (s == "BF16") return DType::kBF16;
    if (s == "F16") return DType::kF16;
    if (s == "F8_E4M3") return DType::kF8E4M3;
    if (s == "F8_E8M0") return DType::kF8E8M0;
    if (s == "I8") return DType::kI8;
    if (s == "U8") return DType::kU8;
    if (s == "I32") return DType::kI32;
    if (s == "I64") return DType::kI64;
    if (s == "BOOL") return DType::kBool;
    return std::nullopt;
}

uint16_t f32_to_bf16(float f) {
    uint32_t u = f32_to_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40); // quiet NaN
    uint32_t lsb = (u >> 16) & 1u;
    u += 0x7fffu + lsb;
    return static_cast<uint16_t>(u >> 16);
}

float f16_to_f32(uint16_t h) {
    uint32_t sign = (h >> 15) & 1u, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
    float v;
    if (exp == 0) {
        v = std::ldexp(static_cast<float>(man), -24);
    } else if (exp == 31) {
        v = man ? std::numeric_limits<float>::quiet_NaN() : std::numeric_limits<float>::infinity();
    } else {
        v = std::ldexp(static_cast<float>(man | 0x400u), static_cast<int>(exp) - 25);
    }
    return sign ? -v : v;
}

uint16_t f32_to_f16(float f) {
    uint32_t u = f32_to_bits(f);
    uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return sign | 0x7e00u;
    if (a >= 0x477ff000u) return sign | 0x7c00u; // rounds to >= 65520 -> inf
    if (a < 0x38800000u) {                       // subnormal or zero in f16
        // value = a_float; f16 subnormal unit = 2^-24; round to nearest even
        float af = bits_to_f32(a);
        float q = af * 16777216.0f;  // / 2^-24
        float r = std::nearbyint(q); // default rounding mode is RNE
        return sign | static_cast<uint16_t>(r);
    }
    uint32_t lsb = (a >> 13) & 1u;
    a += 0xfffu + lsb;
    uint32_t exp = ((a >> 23) & 0xffu) - 112u;
    uint32_t man = (a >> 13) & 0x3ffu;
    return sign | static_cast<uint16_t>((exp << 10) | man);
}

float fp8_e4m3_to_f32(uint8_t b) {
    uint32_t sign = b >> 7, exp = (b >> 3) & 0xfu, man = b & 0x7u;
    if (exp == 0xf && man == 0x7) return std::numeric_limits<float>::quiet_NaN();
    float v = exp == 0 ? std::ldexp(static_cast<float>(man), -9)
                       : std::ldexp(static_cast<float>(man | 8u), static_cast<int>(exp) - 10);
    return sign ? -v : v;
}

uint8_t f32_to_fp8_e4m3(float f) {
    if (std::isnan(f)) return 0x7f;
    uint8_t sign = std::signbit(f) ? 0x80 : 0;
    float a = std::fabs(f);
    if (a >= 448.0f) return sign | 0x7e;
    // Find the nearest representable value by scanning the 127 non-negative finite codes with RNE ties.
    const float* t = fp8_e4m3_table();
    uint8_t best = 0;
    for (uint8_t c = 0; c < 0x7f; ++c) {
        float lo = t[c], hi = t[c + 1];
        if (c + 1 == 0x7f) break;
        if (a >= lo && a <= hi) {
            float dl = a - lo, dh = hi - a;
            if (dl < dh)
                best = c;
            else if (dh < dl)
                best = static_cast<uint8_t>(c + 1);
            else
                best = (c & 1) ? static_cast<uint8_t>(c + 1) : c; // tie: even mantissa
            return sign | best;
        }
    }
    return sign | 0x7e;
}

float e8m0_to_f32(uint8_t b) {
    if (b == 255) return std::numeric_limits<float>::quiet_NaN();
    if (b == 0) return bits_to_f32(0x00400000u); // 2^-127 is an f32 subnormal
    return bits_to_f32(static_cast<uint32_t>(b) << 23);
}

float fp4_e2m1_to_f32(uint8_t code) {
    static constexpr float kMag[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
    float v = kMag[code & 7];
    return (code & 8) ? -v : v;
}

uint8_t f32_to_fp4_e2m1(float f) {
    uint8_t sign = std::signbit(f) ? 8 : 0;
    float a = std::fabs(f);
    if (std::isnan(f)) return 0;
    // Midpoints between grid values; ties go to the even code (codes 0,2,4,6 have even mantissa).
    static constexpr float kMid[7] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};
    // The count of midpoints below a, without a loop-carried branch (make-synthetic encodes billions).
    uint8_t c = static_cast<uint8_t>((a > kMid[0]) + (a > kMid[1]) + (a > kMid[2]) + (a > kMid[3]) +
                                     (a > kMid[4]) + (a > kMid[5]) + (a > kMid[6]));
    if (c < 7 && a == kMid[c] && (c & 1)) ++c; // tie at midpoint below odd code c: round up to even c+1
    return sign | c;
}

namespace {
struct Tables {
    std::array<float, 256> fp8{};
    std::array<float, 16> fp4{};
    Tables() {
        for (int b = 0; b < 256; ++b) fp8[b] = fp8_e4m3_to_f32(static_cast<uint8_t>(b));
        for (int c = 0; c < 16; ++c) fp4[c] = fp4_e2m1_to_f32(static_cast<uint8_t>(c));
    }
};
const Tables& tables() {
    static const Tables t;
    return t;
}
} // namespace

const float* fp8_e4m3_table() {
    return tables().fp8.data();
}
const float* fp4_e2m1_table() {
    return tables().fp4.data();
}

} // namespace deepinfer::core
