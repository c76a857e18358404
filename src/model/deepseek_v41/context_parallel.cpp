// V4.1 under context parallelism (docs/parallelism.md "CP on V4.1"): which blocks of the split stores
// (every layer's window rows, the KV sources' compressed entries and indexer keys) this CP rank holds,
// block copies between owners, and the packed row gather of distributed prompt chunks. Block g lives on CP
// rank g % cp at local index g / cp; the last local block is the trash block where the (replicated) writes
// meant for other ranks' blocks land. The Engram n-gram snapshots stay whole on every rank.

#include <algorithm>
#include <span>

#include "model/deepseek_v41/model.h"

namespace deepinfer::model::deepseek_v41 {

int64_t DeepseekV41Model::split_blocks() const {
    if (!cp_.active()) return spec_.num_blocks + 1; // + scratch
    const int64_t cp = cp_.size(), me = cp_.rank();
    return (spec_.num_blocks - me + cp - 1) / cp + 1; // own blocks + trash
}

void DeepseekV41Model::local_block_table(const Chunk& ch, int64_t n_blocks, std::vector<int32_t>& out) const {
    out.resize(n_blocks);
    const int64_t cp = cp_.size(), me = cp_.rank(), trash = split_blocks() - 1;
    for (int64_t j = 0; j < n_blocks; ++j) {
        const int32_t g = ch.block_table[j];
        out[j] = g % cp == me ? static_cast<int32_t>(g / cp) : static_cast<int32_t>(trash);
    }
}

// The split stores of one block: [L window rows, KV sources' compressed entries and indexer keys] in layer
// order.
int64_t DeepseekV41Model::split_block_floats() const {
    const ModelConfig& c = config_;
    int64_t f = 0;
    for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
        f += spec_.block_size * c.head_dim;
        if (c.is_kv_source(l)) f += spec_.block_size / c.compress_ratios[l] * (c.head_dim + c.index_head_dim);
    }
    return f;
}

void DeepseekV41Model::copy_split_block(int32_t src, int32_t dst, bool pack, float* buf) {
    const ModelConfig& c = config_;
    // pack: local block src -> buf; else buf -> local block dst (src unused).
    // One store's n floats per block: to or from buf, which moves past them.
    auto move = [&](std::vector<float>& store, int64_t n) {
        if (pack)
            std::copy_n(store.data() + src * n, n, buf);
        else
            std::copy_n(buf, n, store.data() + dst * n);
        buf += n;
    };
    for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
        move(pools_.raw[l], spec_.block_size * c.head_dim);
        if (!c.is_kv_source(l)) continue;
        const int64_t entries = spec_.block_size / c.compress_ratios[l];
        move(pools_.comp[l], entries * c.head_dim);
        move(pools_.keys[l], entries * c.index_head_dim);
    }
}

// Every rank, at the start of a forward, in call order: the leader's LeaderLm applies a copy at once while
// followers replay it with the next step, so the copies between owners (a broadcast each) wait for here.
void DeepseekV41Model::run_pending_copies() {
    const int64_t cp = cp_.size(), me = cp_.rank();
    std::vector<float> buf(split_block_floats());
    for (const auto& [src, dst] : pending_copies_) {
        const int64_t owner_src = src % cp, owner_dst = dst % cp;
        if (owner_src == owner_dst) {
            if (me == owner_src) {
                copy_split_block(static_cast<int32_t>(src / cp), 0, true, buf.data());
                copy_split_block(0, static_cast<int32_t>(dst / cp), false, buf.data());
            }
            continue;
        }
        if (!ep_status_.ok()) continue;
        if (me == owner_src) copy_split_block(static_cast<int32_t>(src / cp), 0, true, buf.data());
        core::Status s = cp_.group->broadcast_f32(std::span<float>(buf), static_cast<int>(owner_src));
        if (!s.ok()) {
            ep_status_ = s.with_context("context parallel copy_block");
            continue;
        }
        if (me == owner_dst) copy_split_block(0, static_cast<int32_t>(dst / cp), false, buf.data());
    }
    pending_copies_.clear();
}

// The fields' rows of this rank packed side by side into one [n, W] buffer (W = the widths' sum), one
// cp_gather_rows, and the other ranks' rows unpacked: one collective however many fields a layer has.
void DeepseekV41Model::gather_rows(const deepseek_v4::CpRows& rows, std::span<const RowField> fields) {
    if (!rows.split) return;
    int64_t W = 0;
    for (const RowField& f : fields) W += f.width;
    kernels::Workspace& ws = backend_->workspace();
    const kernels::Workspace::Mark mark = ws.mark();
    float* packed = ws.take<float>(rows.T * W); // [n, W]
    auto move = [&](int64_t t, bool pack) {
        float* p = packed + t * W;
        for (const RowField& f : fields) {
            float* row = f.data + t * f.width;
            if (pack)
                std::copy_n(row, f.width, p);
            else
                std::copy_n(p, f.width, row);
            p += f.width;
        }
    };
    for (int64_t t = rows.begin; t < rows.end; ++t) move(t, true);
    deepseek_v4::cp_gather_rows(*backend_, cp_, rows, packed, W);
    for (int64_t t = 0; t < rows.T; ++t)
        if (t < rows.begin || t >= rows.end) move(t, false);
    ws.release(mark);
}

} // namespace deepinfer::model::deepseek_v41
