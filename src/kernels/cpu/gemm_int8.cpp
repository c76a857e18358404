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

void pack_bf16_int8_panels(const core::Weight& w, int64_t row0, int64_t row_end, int64_t t0, int64_t t1,
                           uint8_t* codes, float* scales) {
    const int64_t nkb = w.cols / kQBlock;
    const auto* data = static_cast<const uint16_t*>(w.data);
    int8_t q[kQBlock];
    for (int64_t t = t0; t < t1; ++t)
        for (int64_t kb = 0; kb < nkb; ++kb) {
            const int64_t p = (t * nkb + kb) * kQRowTile;
            for (int64_t m = 0; m < kQRowTile; ++m) {
                const int64_t r = row0 + t * kQRowTile + m;
                uint8_t* dst = codes + (p + m) * kQBlock;
                if (r >= row_end) { // the last tile's rows past the range: zero (u8 128)
                    std::memset(dst, 0x80, kQBlock);
                    scales[p + m] = 0.0f;
                    continue;
                }
                scales[p + m] = bf16_requant_block(data + r * w.cols + kb * kQBlock, q);
                for (int64_t c = 0; c < kQBlock; ++c) dst[c] = static_cast<uint8_t>(q[c] + 128);
            }
        }
}

} // namespace deepinfer::kernels::cpu::detail
