// The CPU backend: cheap ops run their ref/ version (split over tokens on the pool when there are many),
// the hot ones their threaded cpu/ version; matmul is kernels::matmul.

#include "kernels/cpu/backend.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <new>

#include "core/check.h"
#include "core/thread_pool.h"
#include "kernels/cpu/linear.h"
#include "kernels/ref/ops_ref.h"

namespace deepinfer::kernels::cpu {
namespace {

// Runs fn(begin, end) over token ranges: on the pool when the work is worth waking it.
template <typename Fn> void over_tokens(core::ThreadPool& pool, int64_t T, int64_t work_per_token, Fn&& fn) {
    if (T < 2 || T * work_per_token < (1 << 14) || pool.num_threads() == 1) {
        fn(int64_t{0}, T);
        return;
    }
    pool.parallel_for(T, std::ref(fn));
}

} // namespace

int32_t argmax(const float* x, int64_t n) {
    return active_isa() == Isa::kAvx512 ? argmax_avx512(x, n) : ref::argmax(x, n);
}

void linear_on(const MatmulArgs& args, core::ThreadPool* pool) {
    MatmulArgs a = args;
    a.pool = pool;
    kernels::matmul(a);
}

CpuBackend::CpuBackend(core::ThreadPool* pool) {
    set_thread_pool(pool);
}

void CpuBackend::set_thread_pool(core::ThreadPool* pool) {
    pool_ = pool ? pool : &core::ThreadPool::global();
    own_pool_ = pool != nullptr;
}

int CpuBackend::num_threads() const {
    return pool_->num_threads();
}

void CpuBackend::reserve_scratch(int64_t max_tokens, int64_t max_cols) {
    // Not on the global fallback pool (tools, tests): its threads serve every caller in the process.
    if (own_pool_ && max_tokens > 0 && max_cols > 0) reserve_pool_scratch(pool_, max_tokens, max_cols);
}

// 64-byte aligned (a KV row of whole cache lines starts on one; new float[] gave 16 bytes), zero-filled.
BufferPtr CpuBackend::alloc_floats(int64_t n) {
    const auto count = static_cast<size_t>(std::max<int64_t>(n, 1));
    auto* p = static_cast<float*>(::operator new[](count * sizeof(float), std::align_val_t{64}));
    std::fill_n(p, count, 0.0f);
    return BufferPtr(p, [](float* q) { ::operator delete[](q, std::align_val_t{64}); });
}

void CpuBackend::run_embedding(const EmbeddingParams& p) {
    ref::embedding(*p.table, p.ids, p.n, p.out);
}

void CpuBackend::run_linear(const MatmulArgs& a) {
    // A pool in the arguments wins: moe_experts runs some matmuls on one thread (a 1-thread pool).
    linear_on(a, a.pool != nullptr ? a.pool : pool_);
}

void CpuBackend::run_linear_multi(std::span<const MatmulArgs> args) {
    DI_CHECK(args.size() <= static_cast<size_t>(kMaxMultiMatmuls));
    std::array<MatmulArgs, kMaxMultiMatmuls> on; // the backend's pool where the arguments name none
    for (size_t i = 0; i < args.size(); ++i) {
        on[i] = args[i];
        if (on[i].pool == nullptr) on[i].pool = pool_;
    }
    kernels::matmul_multi(std::span<const MatmulArgs>(on.data(), args.size()));
}

void CpuBackend::run_rms_norm(const RmsNormParams& p) {
    const bool avx512 = active_isa() == Isa::kAvx512;
    over_tokens(*pool_, p.n, p.d, [&](int64_t b, int64_t e) {
        (avx512 ? rms_norm_avx512 : ref::rms_norm)(p.x + b * p.d, p.weight, e - b, p.d, p.eps, p.y + b * p.d);
    });
}

void CpuBackend::run_rope(const RopeParams& p) {
    over_tokens(*pool_, p.n_tokens, p.n_vec * p.rope_dim * 8, [&](int64_t b, int64_t e) {
        RopeParams q = p;
        q.x = p.x + b * p.token_stride;
        q.positions = p.positions + b;
        q.n_tokens = e - b;
        ref::rope(q);
    });
}

void CpuBackend::run_hc_pre(const HcPreParams& p) {
    const int64_t n_mix = (2 + p.hc) * p.hc;
    over_tokens(*pool_, p.T, p.hc * p.D + p.sinkhorn_iters * p.hc * p.hc * 4, [&](int64_t b, int64_t e) {
        HcPreParams q = p;
        q.T = e - b;
        q.mix = p.mix + b * n_mix;
        q.h = p.h + b * p.hc * p.D;
        q.post = p.post + b * p.hc;
        q.comb = p.comb + b * p.hc * p.hc;
        q.x = p.x + b * p.D;
        ref::hc_pre(q);
    });
}

void CpuBackend::run_hc_post(const HcPostParams& p) {
    const bool avx512 = active_isa() == Isa::kAvx512 && p.hc >= 1 && p.hc <= 64; // bit-identical to ref
    over_tokens(*pool_, p.T, p.hc * p.hc * p.D, [&](int64_t b, int64_t e) {
        HcPostParams q = p;
        q.T = e - b;
        q.post = p.post + b * p.hc;
        q.comb = p.comb + b * p.hc * p.hc;
        q.y = p.y + b * p.D;
        q.h = p.h + b * p.hc * p.D;
        if (avx512)
            detail::hc_post_avx512(q);
        else
            ref::hc_post(q);
    });
}

void CpuBackend::run_hc_head(const HcHeadParams& p) {
    over_tokens(*pool_, p.T, p.hc * p.D, [&](int64_t b, int64_t e) {
        HcHeadParams q = p;
        q.T = e - b;
        q.mix = p.mix + b * p.hc;
        q.h = p.h + b * p.hc * p.D;
        q.x = p.x + b * p.D;
        ref::hc_head(q);
    });
}

void CpuBackend::run_kv_store(const KvStoreParams& p) {
    ref::kv_store(p);
}

void CpuBackend::run_compressor(const CompressorParams& p) {
    ref::compressor(p); // a state machine over the sequence's positions: serial by nature
}

void CpuBackend::run_indexer(const IndexerParams& p) {
    cpu::indexer(p, *pool_, workspace());
}

void CpuBackend::run_sparse_attention(const SparseAttentionParams& p) {
    cpu::sparse_attention(p, *pool_, workspace());
}

void CpuBackend::run_moe_routing(const MoeRoutingParams& p) {
    ref::moe_routing(p);
}

void CpuBackend::run_moe_experts(const MoeExpertsParams& p) {
    const LinearHook hook{
        [](void* self, const MatmulArgs& a) { static_cast<CpuBackend*>(self)->run_linear(a); }, this};
    cpu::moe_experts(p, hook, workspace(), pool_);
}

} // namespace deepinfer::kernels::cpu

namespace deepinfer::kernels {
std::unique_ptr<Backend> make_cpu_backend(core::ThreadPool* pool) {
    return std::make_unique<cpu::CpuBackend>(pool);
}
} // namespace deepinfer::kernels
