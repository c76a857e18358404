#include "model/deepseek_v4/context_parallel.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <span>

namespace deepinfer::model::deepseek_v4 {

namespace {

// One token's merge: rank r's partials [H * d o, H max, H sum] at base + r * stride, r in [0, n), into
// ot [H, d] (rank order: the same bits whichever collective brought them). w: [n] scratch.
void merge_token(const float* base, int64_t stride, int64_t n, int64_t H, int64_t d, float* ot, float* w) {
    for (int64_t h = 0; h < H; ++h) {
        float M = -INFINITY;
        for (int64_t r = 0; r < n; ++r) M = std::max(M, base[r * stride + H * d + h]);
        float L = 0.0f;
        for (int64_t r = 0; r < n; ++r) {
            const float* p = base + r * stride;
            const float l = p[H * d + H + h];
            w[r] = l == 0.0f ? 0.0f : std::exp(p[H * d + h] - M) * l;
            L += w[r];
        }
        float* oh = ot + h * d;
        std::fill_n(oh, d, 0.0f);
        if (L == 0.0f) continue; // padding rows: no rank attended
        for (int64_t r = 0; r < n; ++r) {
            if (w[r] == 0.0f) continue;
            const float a = w[r] / L;
            const float* orh = base + r * stride + h * d;
            for (int64_t c = 0; c < d; ++c) oh[c] += a * orh[c];
        }
    }
}

// Token t's partials [H * d o, H max, H sum] packed into dst.
void pack_token(const float* o, int64_t o_ld, const float* mx, const float* sum, int64_t t, int64_t H,
                int64_t d, float* dst) {
    std::copy_n(o + t * o_ld, H * d, dst);
    std::copy_n(mx + t * H, H, dst + H * d);
    std::copy_n(sum + t * H, H, dst + H * d + H);
}

} // namespace

void cp_merge_partials(kernels::Backend& be, const CpShard& cp, float* o, int64_t o_ld, const float* mx,
                       const float* sum, int64_t T, int64_t H, int64_t d) {
    const int64_t n = cp.size(), row = H * (d + 2); // per token: o [H, d], then max [H], sum [H]
    kernels::Workspace& ws = be.workspace();
    const kernels::Workspace::Mark mark = ws.mark();
    float* send = ws.take<float>(T * row);     // [T, H * (d + 2)]
    float* recv = ws.take<float>(n * T * row); // [n, T, H * (d + 2)]
    for (int64_t t = 0; t < T; ++t) pack_token(o, o_ld, mx, sum, t, H, d, send + t * row);
    core::Status st = cp.group->all_gather_f32(std::span<const float>(send, static_cast<size_t>(T * row)),
                                               std::span<float>(recv, static_cast<size_t>(n * T * row)));
    if (!st.ok()) {
        if (cp.status && cp.status->ok()) *cp.status = st.with_context("context parallel merge");
        ws.release(mark);
        return;
    }
    float* w = ws.take<float>(n); // [n] each rank's weight w_r of one (token, head)
    for (int64_t t = 0; t < T; ++t) merge_token(recv + t * row, T * row, n, H, d, o + t * o_ld, w);
    ws.release(mark);
}

void cp_merge_partials(kernels::Backend& be, const CpShard& cp, const CpRows& rows, float* o, int64_t o_ld,
                       const float* mx, const float* sum, int64_t H, int64_t d) {
    if (!rows.split) {
        cp_merge_partials(be, cp, o, o_ld, mx, sum, rows.T, H, d);
        return;
    }
    const int64_t n = cp.size(), row = H * (d + 2), per = rows.per, T = rows.T;
    kernels::Workspace& ws = be.workspace();
    const kernels::Workspace::Mark mark = ws.mark();
    float* send = ws.take<float>(n * per * row); // [n, per, row] part k's rows for rank k, zero past T
    float* recv = ws.take<float>(n * per * row); // [n, per, row] every rank's partials of this rank's rows
    size_t* counts = ws.take<size_t>(n);         // [n] floats to and from each rank
    for (int64_t k = 0; k < n; ++k) {
        counts[k] = static_cast<size_t>(per * row);
        for (int64_t i = 0; i < per; ++i) {
            const int64_t t = k * per + i;
            float* dst = send + (k * per + i) * row;
            if (t < T)
                pack_token(o, o_ld, mx, sum, t, H, d, dst);
            else
                std::fill_n(dst, row, 0.0f);
        }
    }
    const std::span<const size_t> c(counts, static_cast<size_t>(n));
    core::Status st =
        cp.group->all_to_all_v_f32(std::span<const float>(send, static_cast<size_t>(n * per * row)), c,
                                   std::span<float>(recv, static_cast<size_t>(n * per * row)), c);
    if (!st.ok()) {
        if (cp.status && cp.status->ok()) *cp.status = st.with_context("context parallel merge");
        ws.release(mark);
        return;
    }
    float* w = ws.take<float>(n); // [n]
    for (int64_t t = rows.begin; t < rows.end; ++t)
        merge_token(recv + (t - rows.begin) * row, per * row, n, H, d, o + t * o_ld, w);
    ws.release(mark);
}

CpRows cp_rows(const CpShard* cp, int64_t T) {
    CpRows r;
    r.T = T;
    r.per = T;
    r.end = T;
    if (cp == nullptr || !cp->active() || T < kCpSplitMinRows) return r;
    r.split = true;
    r.per = (T + cp->size() - 1) / cp->size();
    r.begin = std::min(T, cp->rank() * r.per);
    r.end = std::min(T, r.begin + r.per);
    return r;
}

void cp_gather_rows(kernels::Backend& be, const CpShard& cp, const CpRows& rows, float* x, int64_t width,
                    int64_t ld) {
    const CpRowField field{x, width, ld};
    cp_gather_rows(be, cp, rows, std::span<const CpRowField>(&field, 1));
}

void cp_gather_rows(kernels::Backend& be, const CpShard& cp, const CpRows& rows,
                    std::span<const CpRowField> fields) {
    if (!rows.split) return;
    int64_t width = 0; // floats per packed row
    for (const CpRowField& f : fields) width += f.width;
    const int64_t n = cp.size(), per = rows.per;
    kernels::Workspace& ws = be.workspace();
    const kernels::Workspace::Mark mark = ws.mark();
    float* send = ws.take<float>(per * width);     // [per, width] this rank's rows, zero past T
    float* recv = ws.take<float>(n * per * width); // [n, per, width]
    for (int64_t i = 0; i < per; ++i) {
        const int64_t t = rows.begin + i;
        float* s = send + i * width;
        for (const CpRowField& f : fields) {
            if (t < rows.end)
                std::copy_n(f.x + t * f.ld, f.width, s);
            else
                std::fill_n(s, f.width, 0.0f);
            s += f.width;
        }
    }
    core::Status st = cp.group->all_gather_f32(std::span<const float>(send, static_cast<size_t>(per * width)),
                                               std::span<float>(recv, static_cast<size_t>(n * per * width)));
    if (!st.ok()) {
        if (cp.status && cp.status->ok()) *cp.status = st.with_context("context parallel row gather");
        ws.release(mark);
        return;
    }
    for (int64_t t = 0; t < rows.T; ++t) { // rank t / per wrote row t at its slot t % per
        if (t >= rows.begin && t < rows.end) continue;
        const float* r = recv + t * width;
        for (const CpRowField& f : fields) {
            std::copy_n(r, f.width, f.x + t * f.ld);
            r += f.width;
        }
    }
    ws.release(mark);
}

void cp_indexer(kernels::Backend& be, const CpShard& cp, const kernels::IndexerParams& ip) {
    using Phase = kernels::IndexerParams::Phase;
    const int64_t n_total = ip.n_total, topk = ip.topk;
    if (n_total <= 0 || ip.n <= 0) return; // nothing visible on any rank (the chunk is the same everywhere)
    const bool split = ip.n >= kCpSplitMinRows; // the chunk's length: the same decision on every rank
    const int64_t size = cp.size(), me = cp.rank();
    kernels::Workspace& ws = be.workspace();
    const kernels::Workspace::Mark mark = ws.mark();
    const int64_t rows = cp_indexer_rows(n_total);
    const int64_t group = std::min(rows, ip.n), per_max = (group + size - 1) / size;
    // [rows, n_total] summed in place, or (split) [size * per, n_total] sent and [per, n_total] received.
    float* scores = ws.take<float>((split ? size * per_max : group) * n_total);
    float* mine = split ? ws.take<float>(per_max * n_total) : nullptr;              // [per, n_total]
    int32_t* my_picks = split ? ws.take<int32_t>(per_max * topk) : nullptr;         // [per, topk]
    int32_t* all_picks = split ? ws.take<int32_t>(size * per_max * topk) : nullptr; // [size, per, topk]
    for (int64_t r0 = 0; r0 < ip.n; r0 += rows) {
        const int64_t nr = std::min(rows, ip.n - r0);
        kernels::IndexerParams p = ip;
        p.q = ip.q + r0 * ip.q_ld;
        p.weights = ip.weights + r0 * ip.w_ld;
        p.n = nr;
        p.start_pos = ip.start_pos + r0;
        p.picks = ip.picks + r0 * topk;
        p.scores = scores;
        p.phase = Phase::kScore;
        be.indexer(p);
        if (!split) {
            core::Status st =
                cp.group->all_reduce_sum(std::span<float>(scores, static_cast<size_t>(nr * n_total)));
            if (!st.ok()) {
                if (cp.status && cp.status->ok())
                    *cp.status = st.with_context("context parallel indexer scores");
                break;
            }
            p.phase = Phase::kSelect;
            p.owned_blocks = nullptr;
            be.indexer(p);
            continue;
        }
        // Part k of the group: rows [k * per, min(nr, (k + 1) * per)), its sums on rank k.
        const int64_t per = (nr + size - 1) / size;
        std::fill(scores + nr * n_total, scores + size * per * n_total, 0.0f); // rows past nr: nobody's
        core::Status st = cp.group->reduce_scatter_sum(
            std::span<const float>(scores, static_cast<size_t>(size * per * n_total)),
            std::span<float>(mine, static_cast<size_t>(per * n_total)));
        if (!st.ok()) {
            if (cp.status && cp.status->ok()) *cp.status = st.with_context("context parallel indexer scores");
            break;
        }
        const int64_t b = std::min(nr, me * per), e = std::min(nr, b + per);
        std::fill_n(my_picks, per * topk, -1);
        if (e > b) {
            p.phase = Phase::kSelect;
            p.owned_blocks = nullptr;
            p.n = e - b;
            p.start_pos = ip.start_pos + r0 + b;
            p.scores = mine;
            p.picks = my_picks;
            be.indexer(p);
        }
        st = cp.group->all_gather(
            std::as_bytes(std::span<const int32_t>(my_picks, static_cast<size_t>(per * topk))),
            std::as_writable_bytes(std::span<int32_t>(all_picks, static_cast<size_t>(size * per * topk))));
        if (!st.ok()) {
            if (cp.status && cp.status->ok()) *cp.status = st.with_context("context parallel indexer picks");
            break;
        }
        std::copy_n(all_picks, nr * topk, ip.picks + r0 * topk); // rank t / per's row t at slot t % per
    }
    ws.release(mark);
}

} // namespace deepinfer::model::deepseek_v4
