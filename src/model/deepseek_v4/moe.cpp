#include "model/deepseek_v4/moe.h"

#include <algorithm>
#include <span>
#include <utility>

#include "kernels/ops.h"

namespace deepinfer::model::deepseek_v4 {

MoeRefs make_moe_refs(const MoeWeights& w) {
    MoeRefs r;
    for (const ExpertWeights& e : w.experts) r.experts.push_back({&e.w1, &e.w2, &e.w3});
    if (w.has_shared) r.shared = {&w.shared.w1, &w.shared.w2, &w.shared.w3};
    return r;
}

bool shared_expert_splits(const MoeShard& shard, const kernels::ExpertRef& shared, int64_t D) {
    const int64_t n = shard.group ? shard.group->size() : 1, I = shared.w1->rows;
    return n > 1 && I % n == 0 && D % n == 0 && shared.w3->rows == I && shared.w2->rows == D;
}

namespace {

// The shared expert split over the MoE group (shared_expert_splits): rank r of n computes intermediate
// columns [r I/n, (r+1) I/n) of w1 and w3 (rows of the weights) and their SwiGLU, the pieces are
// all-gathered (bits, no sums), and rank r computes output columns [r D/n, (r+1) D/n) of w2 over the whole
// intermediate. The live rows go through the same matmuls, in the same order and with the same inputs, as
// the op's shared group in one process, so every element is the single-process value; shared_out [T, D]
// gets this rank's output columns and zeros elsewhere (the slot all-reduce assembles them exactly).
// xe: scratch [T, D].
void shared_expert_split(kernels::Backend& be, const MoeShard& shard, const kernels::MoeExpertsParams& q,
                         float* xe, float* shared_out) {
    const int64_t T = q.T, D = q.D, I = q.shared->w1->rows, n = shard.group->size(), r = shard.group->rank();
    const int64_t Ip = I / n, Dp = D / n;
    kernels::Workspace& ws = be.workspace();
    const kernels::Workspace::Mark mark = ws.mark();
    int64_t* rows = ws.take<int64_t>(T); // [T] the live rows, ascending (the op's shared group)
    int64_t live = 0;
    for (int64_t t = 0; t < T; ++t)
        if (!(q.skip && q.skip[t])) rows[live++] = t;
    std::fill_n(shared_out, T * D, 0.0f);
    float* g = ws.take<float>(live * Ip);   // [live, I/n] gate, then SwiGLU
    float* u = ws.take<float>(live * Ip);   // [live, I/n] up
    float* recv = ws.take<float>(live * I); // [n, live, I/n] every rank's SwiGLU columns
    float* hid = ws.take<float>(live * I);  // [live, I]
    float* ye = ws.take<float>(live * Dp);  // [live, D/n] this rank's output columns
    for (int64_t i = 0; i < live; ++i) std::copy_n(q.x + rows[i] * D, D, xe + i * D);
    // Every rank enters the gather, with or without live rows (a collective).
    if (live > 0) {
        for (auto [w, y] : {std::pair{q.shared->w1, g}, std::pair{q.shared->w3, u}}) {
            kernels::MatmulArgs a = kernels::linear_args(xe, live, *w, y);
            a.row_begin = r * Ip;
            a.row_end = (r + 1) * Ip;
            a.ldy = Ip;
            be.linear(a);
        }
        const float limit = q.swiglu_limit; // the op's clamped SwiGLU (kernels/cpu/moe.cpp), element-wise
        for (int64_t i = 0; i < live * Ip; ++i) {
            float gi = g[i], ui = u[i];
            if (limit > 0.0f) {
                gi = std::min(gi, limit);
                ui = std::clamp(ui, -limit, limit);
            }
            g[i] = kernels::silu(gi) * ui;
        }
    }
    core::Status st = shard.group->all_gather_f32(std::span<const float>(g, static_cast<size_t>(live * Ip)),
                                                  std::span<float>(recv, static_cast<size_t>(live * I)));
    if (!st.ok() && shard.status && shard.status->ok())
        *shard.status = st.with_context("MoE shared expert gather");
    if (live > 0) {
        for (int64_t k = 0; k < n; ++k)
            for (int64_t i = 0; i < live; ++i)
                std::copy_n(recv + (k * live + i) * Ip, Ip, hid + i * I + k * Ip);
        kernels::MatmulArgs a = kernels::linear_args(hid, live, *q.shared->w2, ye);
        a.row_begin = r * Dp;
        a.row_end = (r + 1) * Dp;
        a.ldy = Dp;
        be.linear(a);
        for (int64_t i = 0; i < live; ++i) std::copy_n(ye + i * Dp, Dp, shared_out + rows[i] * D + r * Dp);
    }
    ws.release(mark);
}

} // namespace

// The EP path (MoeShard): slot outputs [T * K + T, D] = each (row, k)'s unweighted expert output, then
// each row's shared-expert output; the owner of a slot writes it, the others zeros.
void moe_experts_ep(kernels::Backend& be, const MoeShard& shard, const kernels::MoeExpertsParams& q) {
    const int64_t D = q.D, E = q.E, K = q.K, T = q.T, TK = T * K;
    const int32_t* idx = q.idx;
    const float* wts = q.weights;
    const float* x = q.x;
    const uint8_t* skip = q.skip;
    const bool has_shared = q.shared != nullptr;
    float* out = q.out;
    kernels::Workspace& ws = be.workspace();
    const kernels::Workspace::Mark mark = ws.mark();
    float* slots = ws.take<float>((TK + T) * D); // [T * K + T, D]
    float* xs = ws.take<float>(TK * D);          // [T * K, D] row t's input in each of its K slots
    int32_t* own = ws.take<int32_t>(TK);         // [T * K] the slot's expert when held here, else -1
    float* ones = ws.take<float>(TK);            // [T * K] unit weights: the op returns y * 1 = y
    for (int64_t t = 0; t < T; ++t)
        for (int64_t k = 0; k < K; ++k) {
            const int32_t e = idx[t * K + k];
            own[t * K + k] = e >= shard.first && e < shard.last && !(skip && skip[t]) ? e : -1;
            ones[t * K + k] = 1.0f;
            std::copy_n(x + t * D, D, xs + (t * K + k) * D);
        }
    // Grouped per expert as in one process: expert e sees the same rows in the same order, so its
    // matmuls produce the same bits.
    kernels::MoeExpertsParams p = q;
    p.x = xs;
    p.T = TK;
    p.D = D;
    p.E = E;
    p.K = 1;
    p.idx = own;
    p.weights = ones;
    p.skip = nullptr;
    p.shared = nullptr;
    p.out = slots;
    be.moe_experts(p);
    float* shared_out = slots + TK * D; // [T, D]
    if (has_shared && shared_expert_splits(shard, *q.shared, D)) {
        shared_expert_split(be, shard, q, xs, shared_out);
    } else if (has_shared && shard.has_shared) {
        kernels::MoeExpertsParams s = q;
        s.E = 0;
        s.K = 0;
        s.idx = nullptr;
        s.weights = nullptr;
        s.out = shared_out;
        be.moe_experts(s);
    } else {
        std::fill_n(shared_out, T * D, 0.0f);
    }
    core::Status st = shard.group->all_reduce_sum(std::span<float>(slots, (TK + T) * D));
    if (!st.ok() && shard.status && shard.status->ok())
        *shard.status = st.with_context("MoE expert parallel");
    // The single-process accumulation order: per row, experts ascending (idx is sorted per row), then the
    // shared expert.
    std::fill_n(out, T * D, 0.0f);
    for (int64_t t = 0; t < T; ++t) {
        float* o = out + t * D;
        for (int64_t k = 0; k < K; ++k) {
            if (idx[t * K + k] < 0) continue;
            const float* y = slots + (t * K + k) * D;
            const float rw = wts[t * K + k];
            for (int64_t j = 0; j < D; ++j) o[j] += y[j] * rw;
        }
        if (has_shared && !(skip && skip[t])) {
            const float* y = shared_out + t * D;
            for (int64_t j = 0; j < D; ++j) o[j] += y[j];
        }
    }
    ws.release(mark);
}

int64_t moe_shard_floats_per_token(const ModelConfig& c) {
    const int64_t K = c.num_experts_per_tok, D = c.hidden_size;
    const int64_t I = c.moe_intermediate_size * std::max<int64_t>(1, c.n_shared_experts);
    // Slots, replicated inputs, owners and unit weights, plus the experts op's scratch over T * K rows, plus
    // the split shared expert's (live rows, gate and up columns, the gathered intermediate twice, its
    // output columns; taken after the experts op released its own).
    return (K + 1) * D + K * D + 2 * K + K * (2 * D + 2 * I + 3) + 3 * I + D + 2;
}

void moe_forward(kernels::Backend& be, const ModelConfig& c, const MoeWeights& w, const MoeRefs& refs,
                 bool hash, const float* x, const int32_t* token_ids, const uint8_t* skip, int64_t T,
                 float* out, int32_t* router, float* router_weights, const MoeShard* shard) {
    const int64_t D = c.hidden_size, E = c.n_routed_experts, K = c.num_experts_per_tok;
    kernels::Workspace& ws = be.workspace();
    const kernels::Workspace::Mark mark = ws.mark();
    float* scores = ws.take<float>(T * E); // [T, E]
    // The router's logits in exact F32 in either numerics (kFast's int8 / BF16 paths would move near-tied
    // expert picks; the gate is [E, D], a few hundred KiB).
    kernels::MatmulArgs ga = kernels::linear_args(x, T, w.gate, scores);
    ga.numerics = kernels::Numerics::kExact;
    be.linear(ga);
    int32_t* idx = ws.take<int32_t>(T * K); // [T, K]
    float* wts = ws.take<float>(T * K);     // [T, K]
    kernels::MoeRoutingParams r;
    r.scores = scores;
    r.bias = hash ? nullptr : w.bias.data();
    r.tid2eid = hash ? w.tid2eid.data() : nullptr;
    r.token_ids = token_ids;
    r.skip = skip;
    r.T = T;
    r.E = E;
    r.K = K;
    r.routed_scale = static_cast<float>(c.routed_scaling_factor);
    r.idx = idx;
    r.weights = wts;
    be.moe_routing(r);
    if (router) std::copy_n(idx, T * K, router);
    if (router_weights) std::copy_n(wts, T * K, router_weights);
    if (shard && shard->load)
        for (int64_t i = 0; i < T * K; ++i)
            if (idx[i] >= shard->first && idx[i] < shard->last) shard->load->record(idx[i]);
    kernels::MoeExpertsParams p;
    p.x = x;
    p.T = T;
    p.D = D;
    p.E = E;
    p.K = K;
    p.idx = idx;
    p.weights = wts;
    p.skip = skip;
    p.experts = refs.experts.data();
    p.shared = w.has_shared ? &refs.shared : nullptr;
    p.swiglu_limit = static_cast<float>(c.swiglu_limit);
    p.out = out;
    if (shard && shard->group && shard->group->size() > 1)
        moe_experts_ep(be, *shard, p);
    else
        be.moe_experts(p);
    ws.release(mark);
}

} // namespace deepinfer::model::deepseek_v4
