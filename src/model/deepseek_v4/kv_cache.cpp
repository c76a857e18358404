#include "model/deepseek_v4/kv_cache.h"

#include <algorithm>
#include <string>

namespace deepinfer::model::deepseek_v4 {

int64_t KvCache::Comp::slot_floats() const {
    if (!geom.present) return 0;
    return 2 * geom.ratio * geom.coff * geom.width + (geom.coff == 2 ? 2 * geom.ratio * geom.width : 0);
}

std::vector<KvCache::Layer> KvCache::layout(const ModelConfig& c) {
    std::vector<Layer> layers(c.num_hidden_layers);
    for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
        const AttentionType t = c.layer_types[l];
        if (t == AttentionType::kSliding) continue;
        CompressorGeom& a = layers[l].comp[0].geom;
        a = {true, c.compress_ratios[l], c.head_dim, t == AttentionType::kCompressedSparse ? 2 : 1};
        if (t == AttentionType::kCompressedSparse)
            layers[l].comp[1].geom = {true, c.compress_ratios[l], c.index_head_dim, 2};
    }
    return layers;
}

core::Result<KvGeometry> KvCache::geometry(const ModelConfig& c, int64_t block_size, int64_t cp_size) {
    if (block_size <= 0) return core::invalid_argument("kv cache: block_size must be positive");
    if (cp_size < 1) return core::invalid_argument("kv cache: context parallel size must be positive");
    KvGeometry g;
    g.block_size = block_size;
    g.max_position = c.max_position_embeddings;
    int64_t block_floats = 0, slot_floats = 0, split_floats = 0;
    for (const Layer& layer : layout(c)) {
        block_floats += block_size * c.head_dim;
        split_floats += block_size * c.head_dim;
        for (int k = 0; k < 2; ++k) {
            const Comp& comp = layer.comp[k];
            if (!comp.geom.present) continue;
            if (block_size % comp.geom.ratio != 0)
                return core::invalid_argument("kv cache: block_size " + std::to_string(block_size) +
                                              " is not a multiple of compression ratio " +
                                              std::to_string(comp.geom.ratio));
            block_floats += block_size / comp.geom.ratio * comp.geom.width;
            if (splits_kind(k)) split_floats += block_size / comp.geom.ratio * comp.geom.width;
            if (comp.geom.coff == 2) block_floats += 2 * comp.geom.ratio * comp.geom.width;
            slot_floats += comp.slot_floats();
        }
    }
    g.bytes_per_block = block_floats * static_cast<int64_t>(sizeof(float));
    g.bytes_per_slot = slot_floats * static_cast<int64_t>(sizeof(float));
    if (cp_size > 1) {
        g.split_bytes_per_block = split_floats * static_cast<int64_t>(sizeof(float));
        g.cp_size = cp_size;
    }
    return g;
}

core::Status KvCache::init(const ModelConfig& c, const KvCacheSpec& spec, kernels::Backend& backend,
                           int cp_rank, int cp_size) {
    DI_ASSIGN_OR_RETURN(KvGeometry g, geometry(c, spec.block_size));
    (void)g;
    if (spec.num_blocks < 0 || spec.num_slots < 0) return core::invalid_argument("kv cache: negative size");
    block_size_ = spec.block_size;
    head_dim_ = c.head_dim;
    num_blocks_ = static_cast<int32_t>(spec.num_blocks + 1);
    num_slots_ = spec.num_slots + 1;
    if (cp_size < 1 || cp_rank < 0 || cp_rank >= cp_size)
        return core::invalid_argument("kv cache: context parallel rank " + std::to_string(cp_rank) + " of " +
                                      std::to_string(cp_size));
    cp_rank_ = cp_rank;
    cp_size_ = cp_size;
    // Split: this rank's blocks g = cp_rank + i * cp_size, plus the trash block.
    local_blocks_ = split() ? (num_blocks_ - cp_rank_ + cp_size_ - 1) / cp_size_ + 1 : num_blocks_;
    layers_ = layout(c);
    for (Layer& layer : layers_) {
        layer.raw.buf = backend.alloc_floats(int64_t{local_blocks_} * block_size_ * head_dim_);
        layer.raw.floats = int64_t{local_blocks_} * block_size_ * head_dim_;
        for (int k = 0; k < 2; ++k) {
            Comp& comp = layer.comp[k];
            if (!comp.geom.present) continue;
            const int64_t blocks = split_entries(k) ? local_blocks_ : num_blocks_;
            comp.entries.floats = blocks * (block_size_ / comp.geom.ratio) * comp.geom.width;
            comp.entries.buf = backend.alloc_floats(comp.entries.floats);
            if (comp.geom.coff == 2) {
                comp.snapshot.floats = num_blocks_ * 2 * comp.geom.ratio * comp.geom.width;
                comp.snapshot.buf = backend.alloc_floats(comp.snapshot.floats);
            }
            comp.slots.floats = num_slots_ * comp.slot_floats();
            comp.slots.buf = backend.alloc_floats(comp.slots.floats);
        }
    }
    return core::Status();
}

float* KvCache::raw_row(int64_t layer, int32_t block, int64_t row) {
    DI_CHECK(block >= 0 && block < num_blocks_ && row >= 0 && row < block_size_);
    return layers_[layer].raw.data() + (int64_t{local_block(block)} * block_size_ + row) * head_dim_;
}

float* KvCache::entry(int64_t layer, CompressorKind k, int32_t block, int64_t index) {
    Comp& comp = layers_[layer].comp[int(k)];
    const int64_t per_block = block_size_ / comp.geom.ratio;
    DI_CHECK(comp.geom.present && block >= 0 && block < num_blocks_ && index >= 0 && index < per_block);
    return comp.entries.data() + (int64_t{entry_block(int(k), block)} * per_block + index) * comp.geom.width;
}

float* KvCache::snapshot(int64_t layer, CompressorKind k, int32_t block) {
    Comp& comp = layers_[layer].comp[int(k)];
    DI_CHECK(comp.geom.coff == 2 && block >= 0 && block < num_blocks_);
    return comp.snapshot.data() + block * 2 * comp.geom.ratio * comp.geom.width;
}

CompressorSlotView KvCache::slot(int64_t layer, CompressorKind k, int32_t s) {
    Comp& comp = layers_[layer].comp[int(k)];
    DI_CHECK(comp.geom.present && s >= 0 && s < num_slots_);
    float* base = comp.slots.data() + s * comp.slot_floats();
    const int64_t buf = comp.geom.ratio * comp.geom.coff * comp.geom.width;
    const int64_t ov = comp.geom.ratio * comp.geom.width;
    CompressorSlotView v;
    v.buf_kv = base;
    v.buf_gate = base + buf;
    v.ov_kv = comp.geom.coff == 2 ? base + 2 * buf : nullptr;
    v.ov_gate = comp.geom.coff == 2 ? base + 2 * buf + ov : nullptr;
    return v;
}

void KvCache::reset_slot(int32_t s) {
    DI_CHECK(s >= 0 && s < num_slots_);
    for (Layer& layer : layers_)
        for (Comp& comp : layer.comp)
            std::fill_n(comp.slots.data() + s * comp.slot_floats(), comp.slot_floats(), 0.0f);
}

void KvCache::restore_slot_from_block(int32_t s, int32_t block) {
    reset_slot(s);
    for (int64_t l = 0; l < static_cast<int64_t>(layers_.size()); ++l) {
        for (int k = 0; k < 2; ++k) {
            const Comp& comp = layers_[l].comp[k];
            if (!comp.geom.present || comp.geom.coff != 2) continue;
            const int64_t ov = comp.geom.ratio * comp.geom.width;
            CompressorSlotView v = slot(l, CompressorKind(k), s);
            const float* snap = snapshot(l, CompressorKind(k), block);
            std::copy_n(snap, ov, v.ov_kv);
            std::copy_n(snap + ov, ov, v.ov_gate);
        }
    }
}

void KvCache::copy_block(int32_t src, int32_t dst) {
    DI_CHECK(src >= 0 && src < num_blocks_ && dst >= 0 && dst < num_blocks_);
    // Split stores: only where this rank holds both blocks (a copy between owners is the caller's).
    const bool both = !split() || (owns(src) && owns(dst));
    for (Layer& layer : layers_) {
        const int64_t n = block_size_ * head_dim_;
        if (both)
            std::copy_n(layer.raw.data() + local_block(src) * n, n, layer.raw.data() + local_block(dst) * n);
        for (int k = 0; k < 2; ++k) {
            Comp& comp = layer.comp[k];
            if (!comp.geom.present) continue;
            const int64_t e = block_size_ / comp.geom.ratio * comp.geom.width;
            if (!split_entries(k) || both)
                std::copy_n(comp.entries.data() + entry_block(k, src) * e, e,
                            comp.entries.data() + entry_block(k, dst) * e);
            if (comp.geom.coff == 2) {
                const int64_t sn = 2 * comp.geom.ratio * comp.geom.width;
                std::copy_n(comp.snapshot.data() + src * sn, sn, comp.snapshot.data() + dst * sn);
            }
        }
    }
}

int64_t KvCache::bytes() const {
    int64_t n = 0;
    for (const Layer& layer : layers_) {
        n += layer.raw.floats;
        for (const Comp& comp : layer.comp)
            n += comp.entries.floats + comp.snapshot.floats + comp.slots.floats;
    }
    return n * static_cast<int64_t>(sizeof(float));
}

int64_t KvCache::split_block_floats() const {
    int64_t n = 0;
    for (const Layer& layer : layers_) {
        n += block_size_ * head_dim_;
        for (int k = 0; k < 2; ++k) {
            const CompressorGeom& g = layer.comp[k].geom;
            if (g.present && splits_kind(k)) n += block_size_ / g.ratio * g.width;
        }
    }
    return n;
}

void KvCache::pack_split_block(int32_t g, float* out) {
    DI_CHECK(g >= 0 && g < num_blocks_ && owns(g));
    for (Layer& layer : layers_) {
        const int64_t n = block_size_ * head_dim_;
        out = std::copy_n(layer.raw.data() + local_block(g) * n, n, out);
        for (int k = 0; k < 2; ++k) {
            Comp& comp = layer.comp[k];
            if (!comp.geom.present || !splits_kind(k)) continue;
            const int64_t e = block_size_ / comp.geom.ratio * comp.geom.width;
            out = std::copy_n(comp.entries.data() + local_block(g) * e, e, out);
        }
    }
}

void KvCache::unpack_split_block(int32_t g, const float* in) {
    DI_CHECK(g >= 0 && g < num_blocks_ && owns(g));
    for (Layer& layer : layers_) {
        const int64_t n = block_size_ * head_dim_;
        std::copy_n(in, n, layer.raw.data() + local_block(g) * n);
        in += n;
        for (int k = 0; k < 2; ++k) {
            Comp& comp = layer.comp[k];
            if (!comp.geom.present || !splits_kind(k)) continue;
            const int64_t e = block_size_ / comp.geom.ratio * comp.geom.width;
            std::copy_n(in, e, comp.entries.data() + local_block(g) * e);
            in += e;
        }
    }
}

void KvCache::copy_slot(int32_t src, int32_t dst) {
    DI_CHECK(src >= 0 && src < num_slots_ && dst >= 0 && dst < num_slots_);
    for (Layer& layer : layers_)
        for (Comp& comp : layer.comp) {
            const int64_t n = comp.slot_floats();
            std::copy_n(comp.slots.data() + src * n, n, comp.slots.data() + dst * n);
        }
}

} // namespace deepinfer::model::deepseek_v4
