// Reference RoPE over tokens, KV store and the compressor state machine (CSA / HCA / indexer).

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/check.h"
#include "kernels/ops.h"
#include "kernels/ref/ops_ref.h"

namespace deepinfer::kernels::ref {
namespace {
constexpr int64_t kMaxRopeHalf = 256;
constexpr int64_t kMaxSlots = 1024; // coff * m
} // namespace

void rope_angles(const float* inv_freq, int64_t rope_dim, int64_t pos, float* cos, float* sin) {
    const float fp = static_cast<float>(pos);
    for (int64_t i = 0; i < rope_dim / 2; ++i) {
        const float theta = fp * inv_freq[i];
        cos[i] = std::cos(theta);
        sin[i] = std::sin(theta);
    }
}

void rope(const RopeParams& p) {
    DI_CHECK(p.rope_dim / 2 <= kMaxRopeHalf);
    float cos[kMaxRopeHalf], sin[kMaxRopeHalf];
    for (int64_t t = 0; t < p.n_tokens; ++t) {
        rope_angles(p.inv_freq, p.rope_dim, p.positions[t] + p.position_offset, cos, sin);
        rope(p.x + t * p.token_stride, p.n_vec, p.ld, p.dim, p.rope_dim, cos, sin, p.inverse);
    }
}

void kv_store(const KvStoreParams& p) {
    for (int64_t i = 0; i < p.n; ++i) {
        const int64_t pos = p.start_pos + i;
        float* dst = p.raw + (p.block_table[pos / p.block_size] * p.block_size + pos % p.block_size) * p.d;
        std::copy_n(p.kv + i * p.d, p.d, dst);
    }
}

void compressor(const CompressorParams& p) {
    const int64_t m = p.out.ratio, width = p.out.width, row = p.coff * width, bs = p.out.block_size;
    const int64_t n_slots = p.coff * m;
    DI_CHECK(n_slots <= kMaxSlots && p.rope_dim / 2 <= kMaxRopeHalf);
    float g[kMaxSlots]; // gate logits of one channel over the window's slots
    float cos[kMaxRopeHalf], sin[kMaxRopeHalf];
    for (int64_t i = 0; i < p.n; ++i) {
        const int64_t pos = p.start_pos + i;
        const float* kv = p.kv + i * p.ld;
        const float* gate = p.gate + i * p.ld;
        const int64_t r = pos % m;
        // Buffer row r of the open window: kv, and gate with the position bias of row r.
        std::copy_n(kv, row, p.buf_kv + r * row);
        for (int64_t c = 0; c < row; ++c) p.buf_gate[r * row + c] = gate[c] + p.ape[r * row + c];
        if (r == m - 1) {
            const int64_t window = pos / m;
            float* entry = p.out.entry(window);
            for (int64_t c = 0; c < width; ++c) {
                for (int64_t j = 0; j < n_slots; ++j) {
                    if (p.coff == 1)
                        g[j] = p.buf_gate[j * row + c];
                    else if (j < m)
                        g[j] =
                            window > 0 ? p.ov_gate[j * width + c] : -std::numeric_limits<float>::infinity();
                    else
                        g[j] = p.buf_gate[(j - m) * row + width + c];
                }
                softmax(g, n_slots);
                float acc = 0.0f;
                for (int64_t j = 0; j < n_slots; ++j) {
                    float v;
                    if (p.coff == 1)
                        v = p.buf_kv[j * row + c];
                    else if (j < m)
                        v = window > 0 ? p.ov_kv[j * width + c] : 0.0f;
                    else
                        v = p.buf_kv[(j - m) * row + width + c];
                    acc += v * g[j];
                }
                entry[c] = acc;
            }
            if (p.coff == 2) {
                for (int64_t j = 0; j < m; ++j) {
                    std::copy_n(p.buf_kv + j * row, width, p.ov_kv + j * width);
                    std::copy_n(p.buf_gate + j * row, width, p.ov_gate + j * width);
                }
            }
            rms_norm(entry, p.norm, 1, width, p.eps, entry);
            rope_angles(p.inv_freq, p.rope_dim, window * m, cos, sin);
            kernels::ref::rope(entry, 1, width, width, p.rope_dim, cos, sin, /*inverse=*/false);
        }
        // The block's last position: snapshot the overlap state for prefix-cache restores.
        if (p.coff == 2 && (pos + 1) % bs == 0) {
            const int32_t* table = p.snapshot_block_table ? p.snapshot_block_table : p.out.block_table;
            float* snap = p.snapshots + table[pos / bs] * 2 * m * width;
            std::copy_n(p.ov_kv, m * width, snap);
            std::copy_n(p.ov_gate, m * width, snap + m * width);
        }
    }
}

} // namespace deepinfer::kernels::ref
