// Grouped experts: tokens grouped per expert (only experts some row selected run, each once over all of
// its rows, so its weights are read once per step whatever the batch), the shared expert as one more group
// over the live rows. Buffers come from the workspace; matmuls run through the backend's linear.

#include <algorithm>
#include <functional>

#include "core/thread_pool.h"
#include "kernels/cpu/backend.h"

namespace deepinfer::kernels::cpu {
namespace {

// fn(b, e) over rows [0, n) of `work_per_row` elements each: on the pool when it is worth waking.
template <typename Fn> void over_rows(core::ThreadPool* pool, int64_t n, int64_t work_per_row, Fn&& fn) {
    if (pool == nullptr || pool->num_threads() == 1 || n < 2 || n * work_per_row < (1 << 15)) {
        fn(int64_t{0}, n);
        return;
    }
    pool->parallel_for(n, std::ref(fn));
}

} // namespace

void moe_experts(const MoeExpertsParams& p, const LinearHook& linear, Workspace& ws, core::ThreadPool* pool) {
    const int64_t T = p.T, D = p.D, K = p.K;
    int64_t I = p.shared ? p.shared->w1->rows : 0;
    for (int64_t e = 0; e < p.E; ++e) I = std::max(I, p.experts[e].w1->rows);
    const Workspace::Mark mark = ws.mark();
    int64_t* rows = ws.take<int64_t>(T); // [T] rows of the current group
    float* rw = ws.take<float>(T);       // [T] their routing weights
    float* xe = ws.take<float>(T * D);   // [T, D] gathered inputs
    float* ye = ws.take<float>(T * D);   // [T, D] expert outputs
    float* g = ws.take<float>(T * I);    // [T, I]
    float* u = ws.take<float>(T * I);    // [T, I]
    // Counting pass: which experts run (per-expert row counts), so unselected experts cost nothing.
    int32_t* count = ws.take<int32_t>(p.E + 1);
    std::fill_n(count, p.E + 1, 0);
    for (int64_t i = 0; i < T * K; ++i)
        if (p.idx[i] >= 0) ++count[p.idx[i]];

    std::fill_n(p.out, T * D, 0.0f);
    for (int64_t e = 0; e <= p.E; ++e) {
        const bool shared = e == p.E;
        if (shared && !p.shared) break;
        if (!shared && count[e] == 0) continue;
        int64_t n = 0;
        bool repeated = false; // a token listing this expert twice (rows[] adjacent): scatter serially
        for (int64_t t = 0; t < T; ++t) {
            if (shared) {
                if (!(p.skip && p.skip[t])) {
                    rows[n] = t;
                    rw[n++] = 1.0f;
                }
                continue;
            }
            for (int64_t k = 0; k < K; ++k)
                if (p.idx[t * K + k] == e) {
                    repeated = repeated || (n > 0 && rows[n - 1] == t);
                    rows[n] = t;
                    rw[n++] = p.weights[t * K + k];
                }
        }
        if (n == 0) continue;
        const ExpertRef& ex = shared ? *p.shared : p.experts[e];
        const int64_t Ie = ex.w1->rows;
        over_rows(pool, n, D, [&](int64_t b, int64_t end) {
            for (int64_t i = b; i < end; ++i) std::copy_n(p.x + rows[i] * D, D, xe + i * D);
        });
        linear(linear_args(xe, n, *ex.w1, g));
        linear(linear_args(xe, n, *ex.w3, u));
        const float limit = p.swiglu_limit;
        over_rows(pool, n, Ie * 8, [&](int64_t b, int64_t end) { // silu's exp: ~8x a copy per element
            for (int64_t i = b * Ie; i < end * Ie; ++i) {
                float gi = g[i], ui = u[i];
                if (limit > 0.0f) {
                    gi = std::min(gi, limit);
                    ui = std::clamp(ui, -limit, limit);
                }
                g[i] = silu(gi) * ui;
            }
        });
        linear(linear_args(g, n, *ex.w2, ye));
        // rows[i] are distinct unless `repeated`, so threads never share an output row.
        over_rows(repeated ? nullptr : pool, n, D, [&](int64_t b, int64_t end) {
            for (int64_t i = b; i < end; ++i) {
                float* o = p.out + rows[i] * D;
                const float* y = ye + i * D;
                if (shared) {
                    for (int64_t j = 0; j < D; ++j) o[j] += y[j];
                } else {
                    for (int64_t j = 0; j < D; ++j) o[j] += y[j] * rw[i];
                }
            }
        });
    }
    ws.release(mark);
}

} // namespace deepinfer::kernels::cpu
