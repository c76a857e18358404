// The scalar definition of the fast FP8 GEMM's weight requantization (gemm_int8.h); compiled without ISA
// flags so the harness can call it on any CPU.

#include "kernels/cpu/gemm_int8.h"

#include <cmath>
#include <cstring>

namespace deepinfer::kernels::cpu::detail {

int fp8_requant_step_log2(uint8_t max_code) {
    const int ef = (max_code & 0x7f) >> 3;
    return (ef > 1 ? ef : 1) - 4;
}

int8_t fp8_requant_code(uint8_t code, uint8_t max_code) {
    const int c = code & 0x7f, ef = c >> 3, mant = c & 7;
    const int32_t v9 = ef == 0 ? mant : (8 + mant) << (ef - 1); // |value| in units of 2^-9
    const int s = fp8_requant_step_log2(max_code);
    int32_t q;
    if (s <= 0) {
        q = v9 << -s;
    } else {
        q = v9 >> s;
        const int32_t rem = v9 & ((1 << s) - 1), half = 1 << (s - 1);
        if (rem > half || (rem == half && (q & 1) != 0)) ++q; // round half to even
    }
    if (q > 127) q = 127; // only a code above max_code (a caller's bug) or NaN's 0x7f could get here
    return static_cast<int8_t>((code & 0x80) != 0 ? -q : q);
}

float bf16_requant_block(const uint16_t* w, int8_t* q) {
    auto value = [](uint16_t b) {
        const uint32_t bits = static_cast<uint32_t>(b) << 16;
        float f;
        std::memcpy(&f, &bits, 4);
        return f;
    };
    float amax = 0.0f;
    for (int c = 0; c < kQBlock; ++c) amax = std::fmax(amax, std::fabs(value(w[c])));
    const float inv = amax >= kBf16RequantMin ? 127.0f / amax : 0.0f;
    for (int c = 0; c < kQBlock; ++c) q[c] = static_cast<int8_t>(std::nearbyint(value(w[c]) * inv));
    return amax / 127.0f;
}

} // namespace deepinfer::kernels::cpu::detail
