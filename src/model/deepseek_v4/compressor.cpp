#include "model/deepseek_v4/compressor.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/ops.h"

namespace deepinfer::model::deepseek_v4 {

bool compressor_push(const CompressorWeights& w, const RopeTable& rope, float eps,
                     const CompressorSlotView& s, int64_t p, const float* kv, const float* gate,
                     float* entry_out) {
    const int64_t m = w.ratio, width = w.width, row = w.coff * width;
    const int64_t r = p % m;
    // Buffer row r of the open window: [coff * width] kv, and gate with the position bias of row r.
    std::copy_n(kv, row, s.buf_kv + r * row);
    for (int64_t c = 0; c < row; ++c) s.buf_gate[r * row + c] = gate[c] + w.ape[r * row + c];
    if (r != m - 1) return false;

    const int64_t window = p / m;
    const int64_t n_slots = w.coff * m;
    std::vector<float> g(n_slots); // [slots] gate logits of one channel
    for (int64_t c = 0; c < width; ++c) {
        // Slot j's (kv, gate) for channel c.
        auto slot_kv = [&](int64_t j) -> float {
            if (w.coff == 1) return s.buf_kv[j * row + c];
            if (j < m) return window > 0 ? s.ov_kv[j * width + c] : 0.0f;
            return s.buf_kv[(j - m) * row + width + c];
        };
        for (int64_t j = 0; j < n_slots; ++j) {
            if (w.coff == 1)
                g[j] = s.buf_gate[j * row + c];
            else if (j < m)
                g[j] = window > 0 ? s.ov_gate[j * width + c] : -std::numeric_limits<float>::infinity();
            else
                g[j] = s.buf_gate[(j - m) * row + width + c];
        }
        kernels::softmax(g.data(), n_slots);
        float acc = 0.0f;
        for (int64_t j = 0; j < n_slots; ++j) acc += slot_kv(j) * g[j];
        entry_out[c] = acc;
    }
    if (w.coff == 2) {
        for (int64_t j = 0; j < m; ++j) {
            std::copy_n(s.buf_kv + j * row, width, s.ov_kv + j * width);
            std::copy_n(s.buf_gate + j * row, width, s.ov_gate + j * width);
        }
    }
    kernels::rms_norm(entry_out, w.norm.data(), 1, width, eps, entry_out);
    rope.apply(entry_out, 1, width, width, window * m, /*inverse=*/false);
    return true;
}

} // namespace deepinfer::model::deepseek_v4
