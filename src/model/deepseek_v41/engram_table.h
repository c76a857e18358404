#pragma once
// An Engram table (spec §3.3): `layers.{L}.engram.embed.weight` [rows, head_dim], bound in place in the
// checkpoint's memory map (the released tables are ~100 GB each: never copied, pages come in as rows are
// gathered) and gathered on the host. Stored as F8_E4M3 with `.scale` F8_E8M0 [rows, head_dim / 32] (the
// released layout: one power-of-two scale per 32 columns of a row), or as BF16 / F32 (no scale).

#include <cstdint>
#include <span>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"
#include "model/deepseek_v41/config.h"
#include "weights/checkpoint.h"

namespace deepinfer::model::deepseek_v41 {

class EngramTable {
public:
    static constexpr int64_t kScaleBlock = 32; // columns per e8m0 scale

    // The table of Engram layer `engram_index` (an index into config.engram.layer_ids), checked against the
    // config: rows = engram_num_embeddings[engram_index], columns = engram_head_dim, a supported dtype, the
    // scale's dtype and shape. Errors name the file, the tensor and the config field.
    static core::Result<EngramTable> bind(const weights::Checkpoint& ckpt, const ModelConfig& config,
                                          int64_t engram_index);
    // Every Engram layer's table, in config.engram.layer_ids order.
    static core::Result<std::vector<EngramTable>> bind_all(const weights::Checkpoint& ckpt,
                                                           const ModelConfig& config);

    int64_t rows() const { return rows_; }
    int64_t dim() const { return dim_; }
    core::DType dtype() const { return dtype_; }

    // out [ids.size(), dim] = the rows `ids` dequantized to F32. Every id must be in [0, rows) (DI_CHECK:
    // hash ids come from EngramHasher, whose primes the config checked against the rows).
    void gather(std::span<const int64_t> ids, float* out) const;
    // Asks the kernel to start reading the pages of the rows `ids` (and their scales) into the page cache
    // (madvise MADV_WILLNEED; asynchronous, a hint: errors are ignored). Ids must be in range (DI_CHECK).
    void prefetch(std::span<const int64_t> ids) const;
    // Bytes stored per row (the row and its scales).
    int64_t row_bytes() const;

private:
    const uint8_t* data_ = nullptr;  // [rows, dim] in dtype_
    const uint8_t* scale_ = nullptr; // e8m0 [rows, dim / kScaleBlock], F8_E4M3 only
    core::DType dtype_ = core::DType::kF32;
    int64_t rows_ = 0, dim_ = 0;
};

} // namespace deepinfer::model::deepseek_v41
