#pragma once
// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11): a counter-based
// generator. The sampler keys it with the request's seed and counts with (position, completion index,
// draw), so a draw depends only on those values, never on what else shares the batch or on step order.

#include <array>
#include <cstdint>

namespace deepinfer::engine {

using PhiloxCounter = std::array<uint32_t, 4>;
using PhiloxKey = std::array<uint32_t, 2>;

inline PhiloxCounter philox4x32_10(PhiloxCounter c, PhiloxKey k) {
    constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u, kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
    for (int round = 0; round < 10; ++round) {
        if (round > 0) {
            k[0] += kW0;
            k[1] += kW1;
        }
        uint64_t p0 = uint64_t(kM0) * c[0];
        uint64_t p1 = uint64_t(kM1) * c[2];
        c = {uint32_t(p1 >> 32) ^ c[1] ^ k[0], uint32_t(p1), uint32_t(p0 >> 32) ^ c[3] ^ k[1], uint32_t(p0)};
    }
    return c;
}

// A uniform double in [0, 1) with 53 random bits, from (seed, position, stream, draw).
inline double philox_uniform(uint64_t seed, uint64_t position, uint32_t stream, uint32_t draw) {
    PhiloxCounter r = philox4x32_10({uint32_t(position), uint32_t(position >> 32), stream, draw},
                                    {uint32_t(seed), uint32_t(seed >> 32)});
    uint64_t bits = (uint64_t(r[0]) << 21) ^ (uint64_t(r[1]) >> 11);
    return double(bits & ((uint64_t(1) << 53) - 1)) * 0x1.0p-53;
}

} // namespace deepinfer::engine
