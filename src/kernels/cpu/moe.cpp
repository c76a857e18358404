// Grouped experts: tokens grouped per expert (only experts some row selected run, each once over all of
// its rows, so its weights are read once per step whatever the batch), the shared expert as one more group
// over the live rows. Buffers come from the workspace; matmuls run through the backend's linear.
//
// Two schedules, bit-identical (each output element is computed by the same tile code with the same
// accumulation order, and every row adds its experts in ascending order, then the shared expert):
// - row split (prefill chunks past kExpertSplitMaxRows): experts one after another, each matmul's output
//   rows split over the pool (~6 pool dispatches per expert);
// - expert split (decode batches and prefill chunks, T <= kExpertSplitMaxRows): the (expert, row chunk)
//   matmuls themselves are
//   the pool's work items, each run on one thread (a serial matmul), so a batch-32 step's ~33 experts cost
//   four pool dispatches per layer (gather, W1/W3 + SwiGLU, W2, weighted sum) instead of ~200, and no
//   thread waits at the end of each small matmul.
//   In decode (T <= kGemvMaxTokens) the jobs go out owner first (work_split.h): each thread's jobs are a
//   contiguous run of rows, continuing its own streams.

#include <algorithm>
#include <atomic>
#include <functional>

#include "core/thread_pool.h"
#include "kernels/cpu/backend.h"
#include "kernels/cpu/linear.h"
#include "kernels/cpu/work_split.h"
#include "kernels/moe_plan.h"

namespace deepinfer::kernels::cpu {

void swiglu(float* g, const float* u, int64_t n, float limit) {
    for (int64_t i = 0; i < n; ++i) {
        float gi = g[i], ui = u[i];
        if (limit > 0.0f) {
            gi = std::min(gi, limit);
            ui = std::clamp(ui, -limit, limit);
        }
        g[i] = silu(gi) * ui;
    }
}

namespace {

using SwigluFn = void (*)(float* g, const float* u, int64_t n, float limit);
// The AVX-512 lanes where the matmuls' AVX-512 paths run, else element by element (the same bits).
SwigluFn swiglu_for_isa() {
    return active_isa() == Isa::kAvx512 ? &swiglu_avx512 : &swiglu;
}

// fn(b, e) over rows [0, n) of `work_per_row` elements each: on the pool when it is worth waking.
template <typename Fn> void over_rows(core::ThreadPool* pool, int64_t n, int64_t work_per_row, Fn&& fn) {
    if (pool == nullptr || pool->num_threads() == 1 || n < 2 || n * work_per_row < (1 << 15)) {
        fn(int64_t{0}, n);
        return;
    }
    pool->parallel_for(n, std::ref(fn));
}

// A pool of one thread: a matmul handed it runs serially on the calling thread (no shared state).
core::ThreadPool& serial_pool() {
    static core::ThreadPool one(1);
    return one;
}

int64_t max_intermediate(const MoeExpertsParams& p) {
    int64_t I = p.shared ? p.shared->w1->rows : 0;
    for (int64_t e = 0; e < p.E; ++e) I = std::max(I, p.experts[e].w1->rows);
    return I;
}

// Rows per work item of a matmul over `rows` output rows: about `parts` chunks, whole multiples of 128
// (FP8 row blocks and every kernel's row tile stay aligned, so a chunk computes its rows exactly as the
// whole matmul would).
int64_t chunk_rows(int64_t rows, int64_t parts) {
    const int64_t c = (rows + parts - 1) / parts;
    return std::min(rows, std::max<int64_t>(128, (c + 127) / 128 * 128));
}

bool row_chunks_exact(const core::Weight& w) {
    return w.format != core::WeightFormat::kFp8Block || 128 % w.block_rows == 0;
}

void moe_row_split(const MoeExpertsParams& p, const LinearHook& linear, Workspace& ws,
                   core::ThreadPool* pool) {
    const int64_t T = p.T, D = p.D, K = p.K;
    const int64_t I = max_intermediate(p);
    const SwigluFn act = swiglu_for_isa();
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
            act(g + b * Ie, u + b * Ie, (end - b) * Ie, limit);
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

// One matmul work item of the expert split: group `g` (expert, or E for the shared one), output rows
// [r0, r1).
struct Job {
    int32_t g;
    int32_t r0, r1;
};

// fn(job, thread) for jobs [0, n), handed out one at a time from a shared counter (a slower or descheduled
// vCPU takes fewer), each run by one thread. Which thread runs which matmul changes from step to step (and
// a thread may run none in one step and all in the next), so every thread of the pool first has its matmul
// scratch sized for any of them (up to `rows` tokens, `cols` columns): a steady-state step allocates
// nothing.
// With `streaming` (decode: every matmul a GEMV, bound by the weights' bytes) the jobs go out as
// owner_first_items hands them, each thread taking a contiguous share first: a job's matmuls continue the
// rows its previous job ended at, whose first lines the GEMV's next-tile prefetch has already fetched into
// this core's L2, where a job from the counter in turn went to the other core as often as not. Prefill
// (GEMMs, compute-bound) keeps the counter in the plan's order: groups with the most rows first.
template <typename Fn>
void run_jobs(core::ThreadPool* pool, int64_t n, int64_t rows, int64_t cols, bool streaming, const Fn& fn) {
    reserve_pool_scratch(pool, rows, cols);
    streaming ? owner_first_items(pool, n, fn) : counter_items(pool, n, fn);
}

constexpr int64_t kMaxJobsPerGroup = 32;

// Floats the expert split takes (with slack for the alignment of its 12 buffers).
int64_t expert_split_floats(int64_t T, int64_t D, int64_t I, int64_t K, int64_t E, int64_t threads) {
    const int64_t N = T * K + T; // grouped rows: every (row, k) pick and the shared expert's rows
    // xe, ye [N, D]; g [N, I]; per thread u [T, I]; the row lists, weights and maps; the jobs.
    return N * (2 * D + I) + threads * T * I + 3 * N + 2 * T * K + 2 * T + 4 * (E + 2) +
           3 * kMaxJobsPerGroup * (E + 1) + 12 * 16;
}

// The expert split (see the top of the file). Returns false, having done nothing, when the workspace has
// no room for its buffers or a weight's row blocks do not fit its 128-row chunks.
bool moe_expert_split(const MoeExpertsParams& p, const LinearHook& linear, Workspace& ws,
                      core::ThreadPool* pool) {
    const int64_t T = p.T, D = p.D, K = p.K, E = p.E;
    const int64_t I = max_intermediate(p);
    const int64_t nth = pool->num_threads();
    const int64_t need = static_cast<int64_t>(sizeof(float)) * expert_split_floats(T, D, I, K, E, nth);
    if (ws.capacity() - ws.used() < need) return false;
    const int64_t G = E + 1; // groups: the routed experts, then the shared expert
    auto expert = [&](int64_t g) -> const ExpertRef& { return g == E ? *p.shared : p.experts[g]; };
    for (int64_t g = 0; g < G; ++g) {
        if (g == E && !p.shared) continue;
        const ExpertRef& ex = expert(g);
        if (!row_chunks_exact(*ex.w1) || !row_chunks_exact(*ex.w2) || !row_chunks_exact(*ex.w3)) return false;
    }

    const Workspace::Mark mark = ws.mark();
    // Grouped rows in group order: expert ascending, within it row then k ascending (the row split's
    // order), then the shared expert's live rows.
    int64_t* off = ws.take<int64_t>(G + 1); // [G + 1] first grouped row of each group
    std::fill_n(off, G + 1, 0);
    for (int64_t i = 0; i < T * K; ++i)
        if (p.idx[i] >= 0) ++off[p.idx[i] + 1];
    if (p.shared)
        for (int64_t t = 0; t < T; ++t) off[E + 1] += p.skip && p.skip[t] ? 0 : 1;
    for (int64_t g = 0; g < G; ++g) off[g + 1] += off[g];
    const int64_t N = off[G];
    int64_t* rows = ws.take<int64_t>(N);     // [N] the token of each grouped row
    float* rw = ws.take<float>(N);           // [N] its routing weight
    int64_t* pick = ws.take<int64_t>(T * K); // [T, K] the grouped row of each pick, -1 for none
    int64_t* srow = ws.take<int64_t>(T);     // [T] the shared expert's grouped row, -1 for none
    int64_t* cursor = ws.take<int64_t>(G);   // [G]
    std::copy_n(off, G, cursor);
    for (int64_t t = 0; t < T; ++t)
        for (int64_t k = 0; k < K; ++k) {
            const int32_t e = p.idx[t * K + k];
            pick[t * K + k] = e < 0 ? -1 : cursor[e];
            if (e < 0) continue;
            rows[cursor[e]] = t;
            rw[cursor[e]++] = p.weights[t * K + k];
        }
    for (int64_t t = 0; t < T; ++t) {
        srow[t] = -1;
        if (!p.shared || (p.skip && p.skip[t])) continue;
        srow[t] = cursor[E];
        rows[cursor[E]] = t;
        rw[cursor[E]++] = 1.0f;
    }
    float* xe = ws.take<float>(N * D);              // [N, D] gathered inputs
    float* gb = ws.take<float>(N * I);              // [N, I] gate, then SwiGLU (group g: columns [0, Ie))
    float* ye = ws.take<float>(N * D);              // [N, D] expert outputs
    float* ub = ws.take<float>(nth * T * I);        // [threads, T, I] one work item's up projection
    Job* jobs = ws.take<Job>(kMaxJobsPerGroup * G); // [jobs] the current phase's work items

    auto live = [&](int64_t g) { return off[g + 1] > off[g]; };
    int64_t n_live = 0;
    for (int64_t g = 0; g < G; ++g) n_live += live(g) ? 1 : 0;
    // About 16 work items per thread per phase: few groups (batch 1: K + 1 of them) split into row chunks.
    const int64_t parts =
        std::clamp<int64_t>((16 * nth + n_live - 1) / std::max<int64_t>(n_live, 1), 1, kMaxJobsPerGroup);
    auto plan = [&](bool down) {
        int64_t n = 0;
        for (int64_t g = 0; g < G; ++g) {
            if (!live(g)) continue;
            const int64_t R = down ? expert(g).w2->rows : expert(g).w1->rows;
            const int64_t c = chunk_rows(R, parts);
            for (int64_t r = 0; r < R; r += c)
                jobs[n++] = {static_cast<int32_t>(g), static_cast<int32_t>(r),
                             static_cast<int32_t>(std::min(R, r + c))};
        }
        // Groups with more rows first (the shared expert sees every row): the last items handed out are
        // the short ones, so neither thread waits long for the other (insertion sort: no allocation).
        auto rows_of = [&](const Job& j) { return off[j.g + 1] - off[j.g]; };
        for (int64_t i = 1; i < n; ++i)
            for (int64_t k = i; k > 0 && rows_of(jobs[k]) > rows_of(jobs[k - 1]); --k)
                std::swap(jobs[k], jobs[k - 1]);
        return n;
    };
    // y [n, r1 - r0] (stride ldy) = rows [r0, r1) of x W^T, on the calling thread.
    auto matmul = [&](const float* x, int64_t n, int64_t ldx, const core::Weight& w, int64_t r0, int64_t r1,
                      float* y, int64_t ldy) {
        MatmulArgs a = linear_args(x, n, w, y);
        a.ldx = ldx;
        a.row_begin = r0;
        a.row_end = r1;
        a.ldy = ldy;
        a.pool = &serial_pool();
        linear(a);
    };

    over_rows(pool, N, D, [&](int64_t b, int64_t end) {
        for (int64_t i = b; i < end; ++i) std::copy_n(p.x + rows[i] * D, D, xe + i * D);
    });
    const float limit = p.swiglu_limit;
    const SwigluFn act = swiglu_for_isa();
    // Decode (every group a GEMV): each thread's jobs in a contiguous share (run_jobs).
    const bool streaming = T <= kGemvMaxTokens;
    run_jobs(pool, plan(false), T, std::max(D, I), streaming, [&](int64_t j, int64_t th) {
        const Job job = jobs[j];
        const ExpertRef& ex = expert(job.g);
        const int64_t n = off[job.g + 1] - off[job.g], c = job.r1 - job.r0;
        float* g = gb + off[job.g] * I + job.r0; // [n, c] stride I
        float* u = ub + th * T * I;              // [n, c]
        matmul(xe + off[job.g] * D, n, D, *ex.w1, job.r0, job.r1, g, I);
        matmul(xe + off[job.g] * D, n, D, *ex.w3, job.r0, job.r1, u, c);
        for (int64_t i = 0; i < n; ++i) act(g + i * I, u + i * c, c, limit);
    });
    run_jobs(pool, plan(true), T, std::max(D, I), streaming, [&](int64_t j, int64_t) {
        const Job job = jobs[j];
        const int64_t n = off[job.g + 1] - off[job.g];
        matmul(gb + off[job.g] * I, n, I, *expert(job.g).w2, job.r0, job.r1, ye + off[job.g] * D + job.r0, D);
    });
    // Per row: its experts in ascending order (grouped rows are ordered by expert, then k), then the shared
    // expert; each output row written by one thread.
    over_rows(pool, T, D * (K + 1), [&](int64_t b, int64_t end) {
        for (int64_t t = b; t < end; ++t) {
            float* o = p.out + t * D;
            std::fill_n(o, D, 0.0f);
            int64_t last = -1;
            for (;;) { // the next pick of row t in grouped-row order
                int64_t next = -1;
                for (int64_t k = 0; k < K; ++k) {
                    const int64_t r = pick[t * K + k];
                    if (r > last && (next < 0 || r < next)) next = r;
                }
                if (next < 0) break;
                last = next;
                const float* y = ye + next * D;
                const float w = rw[next];
                for (int64_t j = 0; j < D; ++j) o[j] += y[j] * w;
            }
            if (srow[t] >= 0) {
                const float* y = ye + srow[t] * D;
                for (int64_t j = 0; j < D; ++j) o[j] += y[j];
            }
        }
    });
    ws.release(mark);
    return true;
}

} // namespace

void moe_experts(const MoeExpertsParams& p, const LinearHook& linear, Workspace& ws, core::ThreadPool* pool,
                 MoeSchedule schedule) {
    const bool split = pool != nullptr && pool->num_threads() > 1 && p.T > 0 &&
                       (schedule == MoeSchedule::kExpertSplit ||
                        (schedule == MoeSchedule::kAuto && p.T <= kExpertSplitMaxRows));
    if (split && moe_expert_split(p, linear, ws, pool)) return;
    moe_row_split(p, linear, ws, pool);
}

} // namespace deepinfer::kernels::cpu

namespace deepinfer::kernels {
int64_t moe_experts_batch_floats(int64_t T, int64_t D, int64_t I, int64_t K, int64_t E, int64_t threads) {
    T = std::min(T, cpu::kExpertSplitMaxRows);
    return threads < 2 || T <= 0 ? 0 : cpu::expert_split_floats(T, D, I, K, E, threads);
}
} // namespace deepinfer::kernels
