#pragma once
// Context parallelism (CP, docs/parallelism.md "Context parallelism"). Tokens and queries are replicated over
// the CP group; KV blocks are owned round-robin (block g's raw rows and attention entries live on CP rank
// g % cp, kv_cache.h), each rank's sparse attention reads only its blocks (and rank 0 alone adds the sink),
// and the per-head partials (max logit, sum of exp, normalised output) are all-gathered and merged by
// log-sum-exp in rank order, so every rank of the group ends with the same bits.

#include <algorithm>
#include <cstdint>
#include <span>

#include "core/status.h"
#include "kernels/backend.h"
#include "parallel/communicator.h"

namespace deepinfer::model::deepseek_v4 {

struct CpShard {
    parallel::Communicator* group = nullptr; // nullptr or one rank: no CP
    core::Status* status = nullptr;          // the first collective failure lands here

    bool active() const { return group != nullptr && group->size() > 1; }
    int64_t rank() const { return group ? group->rank() : 0; }
    int64_t size() const { return group ? group->size() : 1; }
};

// Merges this rank's partials with the group's, in place on every rank:
//   o [T, H, d] (row stride o_ld) normalised by its own sum, mx / sum [T, H] (from SparseAttentionParams'
//   lse_max / lse_sum; rows no chunk wrote must hold -inf / 0 and o = 0).
// After the call o[t, h] = sum_r (w_r / L) o_r with w_r = exp(m_r - M) l_r, M = max_r m_r, L = sum_r w_r,
// added in rank order; rows where every rank's sum is 0 stay 0. One all-gather of [T, H, d + 2] floats.
void cp_merge_partials(kernels::Backend& be, const CpShard& cp, float* o, int64_t o_ld, const float* mx,
                       const float* sum, int64_t T, int64_t H, int64_t d);

// The lightning indexer with its keys split over the CP group (kv_cache.h stores an indexer entry on its
// block's owner): every rank scores only the entries of its blocks (ip.owned_blocks, IndexerParams kScore),
// the [rows, n_total] scores are summed over the group — each entry is scored by exactly one rank and the
// others add +0, so the fixed-order sum is the owner's score bit for bit — and the top-k is selected from
// the summed scores with the single-process rule (kSelect): the picks equal one process's.
// Rows go in groups of at most cp_indexer_rows(n_total) queries (how many depends only on the chunk, which
// every rank has). A chunk of fewer than kCpSplitMinRows rows (decode): one all-reduce per group and every
// rank selects every row. A longer one (a prompt chunk): the group's rows are divided into `size` parts of
// ceil(rows / size), one reduce-scatter hands each rank the sums of its part only (the same bits as the
// all-reduce: both add in rank order), each rank selects its part, and one all-gather of the picks gives
// every rank every row's — half the bytes of the all-reduce, and the selection divided.
// ip.picks must be -1 filled: a failed collective leaves them so and sets *cp.status.
void cp_indexer(kernels::Backend& be, const CpShard& cp, const kernels::IndexerParams& ip);

// Query rows per group of cp_indexer for n_total entries (scores of ~2^18 floats per group).
inline int64_t cp_indexer_rows(int64_t n_total) {
    return std::max<int64_t>(1, std::max<int64_t>(int64_t{1} << 18, n_total) / std::max<int64_t>(1, n_total));
}

// Workspace floats cp_indexer takes for n_total entries over `size` ranks with `topk` picks per row.
inline int64_t cp_indexer_floats(int64_t n_total, int64_t size = 1, int64_t topk = 0) {
    const int64_t rows = cp_indexer_rows(n_total), per = (rows + size - 1) / size;
    return std::max(rows, (size + 1) * per) * n_total + (size + 1) * per * topk + 64;
}

// Distributed prompt rows (docs/parallelism.md "Context parallelism"): the rows [0, T) of a forward split
// into `size` contiguous parts of `per` = ceil(T / size) rows, rank r's part [r * per, min(T, (r + 1) * per))
// (the last parts shorter or empty). A rank runs the per-row work (projections, output projection, MoE) on
// its part only and cp_gather_rows hands every rank every row, so the state machines that need all rows
// (KV stores, compressors, indexer, the attention merge) run on every rank as before. split is false (every
// rank runs every row) without CP or below kCpSplitMinRows rows: a decode step has too few rows to divide,
// and T is the batch's, the same on every rank, so every rank takes the same decision and enters the same
// gathers.
struct CpRows {
    bool split = false;
    int64_t T = 0, per = 0;     // per: rows of each part (T when not split)
    int64_t begin = 0, end = 0; // this rank's rows (0, T when not split)
    int64_t count() const { return end - begin; }
};
constexpr int64_t kCpSplitMinRows = 16;
CpRows cp_rows(const CpShard* cp, int64_t T);

// After each rank wrote rows [rows.begin, rows.end) of x [T, width] (row stride ld >= width), every rank
// holds all T rows, bit for bit what their owners computed. One all-gather of size * per * width floats
// (cp_gather_rows_floats of workspace). Not split: nothing (and no collective). Every rank must call it
// whenever rows.split. A failed collective sets *cp.status and leaves the other ranks' rows as they were.
void cp_gather_rows(kernels::Backend& be, const CpShard& cp, const CpRows& rows, float* x, int64_t width,
                    int64_t ld);
inline void cp_gather_rows(kernels::Backend& be, const CpShard& cp, const CpRows& rows, float* x,
                           int64_t width) {
    cp_gather_rows(be, cp, rows, x, width, width);
}

// One matrix of a packed row gather: x [T, width], row stride ld (>= width).
struct CpRowField {
    float* x = nullptr;
    int64_t width = 0, ld = 0;
};
// cp_gather_rows of several [T, width_i] matrices at once: this rank's rows of every field are packed side by
// side into one [per, sum of widths] send buffer, so the whole set costs one all-gather (of
// cp_gather_rows_floats(size, T, sum of widths) workspace floats). Same contract as the one-matrix form.
void cp_gather_rows(kernels::Backend& be, const CpShard& cp, const CpRows& rows,
                    std::span<const CpRowField> fields);

// Workspace floats cp_gather_rows takes for `width` floats per row of a T-row forward over `size` ranks.
inline int64_t cp_gather_rows_floats(int64_t size, int64_t T, int64_t width) {
    if (size <= 1) return 0;
    const int64_t per = (T + size - 1) / size;
    return (size + 1) * per * width;
}

// cp_merge_partials for a forward whose rows are split (cp_rows): each rank needs the merged output of its
// own rows only, so one all-to-all hands rank k the partials of its part [k * per, (k + 1) * per) from
// every rank (1/cp of the all-gather's bytes) and each rank merges its rows, with the same bits the
// all-gather form gives them. Rows of other parts of o are left as they were. Not split: the form above
// over all T rows. Every rank must call it.
void cp_merge_partials(kernels::Backend& be, const CpShard& cp, const CpRows& rows, float* o, int64_t o_ld,
                       const float* mx, const float* sum, int64_t H, int64_t d);

// Workspace floats per token cp_merge_partials takes for a group of `size` ranks (0 without CP).
inline int64_t cp_merge_floats(int64_t size, int64_t H, int64_t d) {
    return size > 1 ? (size + 1) * H * (d + 2) + 2 * H : 0;
}

} // namespace deepinfer::model::deepseek_v4
