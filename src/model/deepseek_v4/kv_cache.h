#pragma once
// V4's paged KV state (docs/kv-cache.md). Blocks hold `block_size` positions; per layer a block holds
//  * raw kv rows [block_size, d] (post kv_norm + RoPE; attention's window reads the last `window` of them
//    through the block table) — kept in their own array so blocks that left every window can be freed;
//  * for each compressor (attention CSA/HCA, CSA indexer): the entries whose windows start inside the block
//    [block_size / m, width], and, for overlapping (CSA) compressors, a boundary snapshot of the overlap
//    state (Ca / gate of the block's last window, [m, width] each) taken when the block's last position is
//    processed, so a prefix-cache hit restored from it continues exactly.
// Slots hold the bounded per-sequence state: each compressor's buffer of the incomplete window
// ([m, coff * width] kv and gate, gate with the position bias already added) and its live overlap state.
// The last block and the last slot are scratch for padding rows.
// Context parallelism (docs/parallelism.md): with cp_size > 1 the raw rows and both compressors' entries
// (attention CSA/HCA and the indexer's keys) of block g live only on CP rank g % cp_size, at local index
// g / cp_size (one more local block takes the writes meant for other ranks' blocks); the snapshots and the
// slots stay whole on every rank. Callers address the split stores through local_block() (raw_base and
// entries_base are local; the block tables the ops get must be mapped).

#include <cstdint>
#include <vector>

#include "core/status.h"
#include "kernels/backend.h"
#include "model/causal_lm.h"
#include "model/deepseek_v4/config.h"

namespace deepinfer::model::deepseek_v4 {

enum class CompressorKind : int { kAttention = 0, kIndexer = 1 };

struct CompressorGeom {
    bool present = false;
    int64_t ratio = 0; // m
    int64_t width = 0; // entry width (d or d_I)
    int64_t coff = 1;  // 2 = overlapping windows (CSA)
};

// A compressor's per-sequence state inside a slot.
struct CompressorSlotView {
    float* buf_kv;   // [m, coff * width]
    float* buf_gate; // [m, coff * width]
    float* ov_kv;    // [m, width] (coff == 2 only)
    float* ov_gate;  // [m, width]
};

class KvCache {
public:
    // Per-block / per-slot bytes; rejects block sizes that are not a multiple of every compression ratio.
    // cp_size > 1: the geometry of one CP rank's pool (split_bytes_per_block: the stores kept per owner).
    static core::Result<KvGeometry> geometry(const ModelConfig& config, int64_t block_size,
                                             int64_t cp_size = 1);
    // Storage comes from the backend (host memory on CPU, device memory on an accelerator).
    core::Status init(const ModelConfig& config, const KvCacheSpec& spec, kernels::Backend& backend,
                      int cp_rank = 0, int cp_size = 1);
    bool initialized() const { return block_size_ > 0; }

    int64_t block_size() const { return block_size_; }
    int32_t num_blocks() const { return num_blocks_; } // including scratch
    int32_t num_slots() const { return num_slots_; }   // including scratch
    int32_t scratch_block() const { return num_blocks_ - 1; }
    int32_t scratch_slot() const { return num_slots_ - 1; }
    // Context parallelism: whether this rank stores block g's raw rows and attention entries, and where.
    bool split() const { return cp_size_ > 1; }
    bool owns(int32_t g) const { return g % cp_size_ == cp_rank_; }
    int32_t local_block(int32_t g) const { return !split() ? g : owns(g) ? g / cp_size_ : local_blocks_ - 1; }
    int32_t local_blocks() const { return local_blocks_; } // blocks of the split stores (incl. the trash one)
    // Bytes of KV state this rank holds (every store, every layer).
    int64_t bytes() const;
    // The split stores of block g (raw rows, then each compressor's entries, every layer): the floats, and a
    // copy out of / into them (g must be owned). A copy_block between two owners moves these.
    int64_t split_block_floats() const;
    void pack_split_block(int32_t g, float* out);
    void unpack_split_block(int32_t g, const float* in);
    const CompressorGeom& geom(int64_t layer, CompressorKind k) const {
        return layers_[layer].comp[int(k)].geom;
    }

    float* raw_row(int64_t layer, int32_t block, int64_t row);                   // [d]
    float* entry(int64_t layer, CompressorKind k, int32_t block, int64_t index); // [width]
    float* snapshot(int64_t layer, CompressorKind k, int32_t block);             // [2, m, width]: kv, gate
    CompressorSlotView slot(int64_t layer, CompressorKind k, int32_t slot);
    // Per-layer bases for the ops' paged addressing (kernels/params.h).
    float* raw_base(int64_t layer) { return layers_[layer].raw.data(); } // [blocks, block_size, d]
    float* entries_base(int64_t layer, CompressorKind k) {               // [blocks, bs / m, width]
        return layers_[layer].comp[int(k)].entries.data();
    }
    float* snapshots_base(int64_t layer, CompressorKind k) { // [blocks, 2, m, width]
        return layers_[layer].comp[int(k)].snapshot.data();
    }

    void reset_slot(int32_t slot);
    void restore_slot_from_block(int32_t slot, int32_t block);
    // Copies block src to dst. Split: the whole stores, and the split ones where this rank owns both.
    void copy_block(int32_t src, int32_t dst);
    void copy_slot(int32_t src, int32_t dst);

private:
    // A zero-filled backend buffer.
    struct Store {
        kernels::BufferPtr buf{nullptr, [](float*) {}};
        int64_t floats = 0;
        float* data() { return buf.get(); }
        const float* data() const { return buf.get(); }
    };
    struct Comp {
        CompressorGeom geom;
        Store entries;  // [blocks, block_size / m, width]
        Store snapshot; // [blocks, 2, m, width] (coff == 2)
        Store slots;    // [slots, slot_floats()]
        int64_t entry_floats() const { return geom.width; }
        int64_t slot_floats() const;
    };
    struct Layer {
        Store raw; // [blocks, block_size, d]
        Comp comp[2];
    };
    static std::vector<Layer> layout(const ModelConfig& config);
    // Whether compressor k's entries are split over the CP ranks (the attention compressor's).
    static bool splits_kind(int /*k*/) { return true; } // attention entries and indexer keys alike
    bool split_entries(int k) const { return split() && splits_kind(k); }
    int32_t entry_block(int k, int32_t g) const { return split_entries(k) ? local_block(g) : g; }

    int64_t block_size_ = 0;
    int64_t head_dim_ = 0;
    int32_t num_blocks_ = 0;
    int32_t num_slots_ = 0;
    int cp_rank_ = 0, cp_size_ = 1;
    int32_t local_blocks_ = 0; // blocks of the split stores
    std::vector<Layer> layers_;
};

} // namespace deepinfer::model::deepseek_v4
