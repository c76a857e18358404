#include "model/deepseek_v41/quant_ties.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/dtype.h"
#include "kernels/ref/cache_quant.h"

namespace deepinfer::model::deepseek_v41 {

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kFp4Bounds[7] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};

struct Nearest {
    float boundary, distance;
};

// Nearest e4m3 rounding boundary of a magnitude a that rounds to the grid magnitude r (no boundary above
// `top`, the clamp).
Nearest e4m3_boundary(float a, float r, float top) {
    const float rn = std::max(r, 0x1p-6f);
    const int e = std::ilogb(rn);
    const float sp_up = std::ldexp(1.0f, e - 3);
    const bool pow2 = r > 0x1p-6f && std::ldexp(1.0f, e) == r;
    const float sp_dn = pow2 ? sp_up / 2 : sp_up;
    const float hi = r >= top ? kInf : r + sp_up / 2;
    const float lo = r == 0 ? -kInf : r - sp_dn / 2;
    const float b = (hi - a) <= (a - lo) ? hi : lo;
    return {b, std::fabs(a - b)};
}

Nearest fp4_boundary(float a) {
    Nearest n{kFp4Bounds[0], kInf};
    for (float b : kFp4Bounds)
        if (std::fabs(a - b) < n.distance) n = {b, std::fabs(a - b)};
    return n;
}

Nearest pow2_boundary(float t) {
    const float lo = std::ldexp(1.0f, std::ilogb(t));
    const float b = t / lo - 1 <= 2 - t / lo ? lo : 2 * lo;
    return {b, std::fabs(t - b) / t};
}

std::string where(const QuantTieOverride::Key& k) {
    return "layer " + std::to_string(k.layer) + " kind " + std::to_string(k.kind) + " row " +
           std::to_string(k.row) + " element " + std::to_string(k.element);
}

} // namespace

std::vector<QuantTieOverride::Key> QuantTieOverride::unused() const {
    std::vector<Key> out;
    for (const auto& [k, t] : ties)
        if (!t.used) out.push_back(k);
    return out;
}

void fake_quant_with_ties(float* x, int64_t rows, int64_t n, QuantTieOverride::Kind kind, int64_t layer,
                          const int64_t* row_ids, QuantTieOverride& ov) {
    const bool fp8 = kind == QuantTieOverride::kWindowKv, e4m3 = kind == QuantTieOverride::kCompressedKv;
    const int64_t block = e4m3 ? 16 : 32;
    const float kMax = fp8 ? 448.0f : 6.0f;
    const float M = static_cast<float>(ov.margin);
    if (n % block != 0) return;
    const float* lut = core::fp4_e2m1_table();
    // Looks the decision up when ours is within 2 margin of a boundary: a listed one is taken from the
    // reference when ours is within 2 margin of the reference's boundary; an unlisted one within margin / 2
    // is a failure.
    auto decide = [&](const QuantTieOverride::Key& key, float a, float rel, float norm, float& out) {
        if (rel >= 2 * M) return;
        auto it = ov.ties.find(key);
        if (it == ov.ties.end()) {
            if (rel < M / 2)
                ov.failures.push_back(where(key) + ": within " + std::to_string(rel) +
                                      " of a boundary, not listed");
            return;
        }
        QuantTieOverride::Tie& t = it->second;
        t.used = true;
        const float d = std::fabs(a - t.boundary) / norm;
        t.distance = d;
        if (!(d < 2 * M)) {
            ov.failures.push_back(where(key) + ": listed, but ours is " + std::to_string(d) +
                                  " from the reference's boundary");
            return;
        }
        ++ov.applied;
        if (std::fabs(std::fabs(out) - std::fabs(t.value)) > 0) ++ov.flipped;
        out = t.value;
    };
    for (int64_t r = 0; r < rows; ++r) {
        for (int64_t b = 0; b < n; b += block) {
            float* v = x + r * n + b; // [block]
            float amax = 0;
            for (int64_t i = 0; i < block; ++i) amax = std::max(amax, std::fabs(v[i]));
            float t, scale;
            Nearest sb;
            if (fp8) {
                amax = std::max(amax, 1e-4f);
                t = amax * (1.0f / kMax);
                scale = kernels::ref::pow2_ceil_scale(t);
                sb = pow2_boundary(t);
            } else if (e4m3) {
                t = std::max(amax, 6.0f * 0x1p-9f) / kMax;
                scale = core::fp8_e4m3_to_f32(core::f32_to_fp8_e4m3(t));
                sb = e4m3_boundary(t, scale, 448.0f);
                sb.distance /= t;
            } else {
                t = std::max(amax, 6.0f * 0x1p-126f) * (1.0f / kMax);
                scale = kernels::ref::pow2_ceil_scale(t);
                sb = pow2_boundary(t);
            }
            decide({layer, kind, row_ids[r], -1 - b / block}, t, sb.distance, t, scale);
            const float amax_q = amax / scale;
            for (int64_t i = 0; i < block; ++i) {
                const float q = std::clamp(v[i] / scale, -kMax, kMax);
                float g; // our grid value of q (signed)
                Nearest nb;
                if (fp8) {
                    g = core::fp8_e4m3_to_f32(core::f32_to_fp8_e4m3(q));
                    nb = e4m3_boundary(std::fabs(q), std::fabs(g), kMax);
                } else {
                    const uint8_t code = core::f32_to_fp4_e2m1(q);
                    g = code == 8 ? 0.0f : lut[code]; // the reference's table maps code 8 (-0) to +0
                    nb = fp4_boundary(std::fabs(q));
                }
                float chosen = g;
                decide({layer, kind, row_ids[r], b + i}, std::fabs(q), nb.distance / amax_q, amax_q, chosen);
                v[i] = chosen * scale;
            }
        }
    }
}

} // namespace deepinfer::model::deepseek_v41
