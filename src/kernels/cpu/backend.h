#pragma once
// The CPU backend (see kernels/backend.h): every parallel loop runs on one persistent pool, handed in by
// whoever owns it (the engine / model runner); nullptr falls back to core::ThreadPool::global() for tools.

#include "kernels/backend.h"

namespace deepinfer::kernels::cpu {

class CpuBackend : public Backend {
public:
    explicit CpuBackend(core::ThreadPool* pool);
    const char* name() const override { return "cpu"; }
    BufferPtr alloc_floats(int64_t n) override;
    void set_thread_pool(core::ThreadPool* pool) override;
    int num_threads() const override;
    void reserve_scratch(int64_t max_tokens, int64_t max_cols) override;
    core::ThreadPool& pool() { return *pool_; }

protected:
    void run_embedding(const EmbeddingParams& p) override;
    void run_linear(const MatmulArgs& a) override;
    void run_linear_multi(std::span<const MatmulArgs> args) override;
    void run_rms_norm(const RmsNormParams& p) override;
    void run_rope(const RopeParams& p) override;
    void run_hc_pre(const HcPreParams& p) override;
    void run_hc_post(const HcPostParams& p) override;
    void run_hc_head(const HcHeadParams& p) override;
    void run_kv_store(const KvStoreParams& p) override;
    void run_compressor(const CompressorParams& p) override;
    void run_indexer(const IndexerParams& p) override;
    void run_sparse_attention(const SparseAttentionParams& p) override;
    void run_moe_routing(const MoeRoutingParams& p) override;
    void run_moe_experts(const MoeExpertsParams& p) override;

private:
    core::ThreadPool* pool_;
    bool own_pool_ = false; // given a pool (not the global fallback, whose threads reserve_scratch leaves be)
};

// The threaded versions (tested against ref/ in tests/kernels). Scratch comes from ws (released on return).
void indexer(const IndexerParams& p, core::ThreadPool& pool, Workspace& ws);
void sparse_attention(const SparseAttentionParams& p, core::ThreadPool& pool, Workspace& ws);
// Lets the indexer / attention use their AVX-512 paths when the CPU has them (default); false forces the
// generic paths (tests run both).
void allow_avx512(bool allow);
// The experts' matmuls go through `linear` (the backend's run_linear, so a decorator sees them).
struct LinearHook {
    void (*fn)(void* ctx, const MatmulArgs& a);
    void* ctx;
    void operator()(const MatmulArgs& a) const { fn(ctx, a); }
};
// How moe_experts uses the pool (moe.cpp): kRowSplit runs the experts one after another, each matmul's rows
// split over the pool; kExpertSplit makes (expert, row chunk) matmuls the pool's work items, each on one
// thread (falls back to kRowSplit when the workspace has no room for its buffers); kAuto picks kExpertSplit
// up to kExpertSplitMaxRows rows: decode batches and prefill chunks up to 512 tokens (flash2-shaped, fast,
// alternating runs: moe_experts -4% at 128 tokens, -9% at 512, where the row split's ~10 pool dispatches
// per expert, each ending in a wait for the slower thread, were the cost; docs/benchmarks.md, session 14).
// Its buffers grow with the rows (kernels::moe_experts_batch_floats: ~155 MB at 512 rows of V4-Flash's
// dims, taken only while the op runs). Every schedule gives the same bits.
enum class MoeSchedule { kAuto, kRowSplit, kExpertSplit };
constexpr int64_t kExpertSplitMaxRows = 512;
// The element-wise parts (gather, SwiGLU, weighted scatter) run over `pool` when there is enough work; the
// results are bit-identical to a serial run (each element computed the same way, each output row by one
// thread). `linear` must honour MatmulArgs::pool when set (the expert split's 1-thread pool; nullptr: the
// backend's pool).
void moe_experts(const MoeExpertsParams& p, const LinearHook& linear, Workspace& ws, core::ThreadPool* pool,
                 MoeSchedule schedule = MoeSchedule::kAuto);
// The experts' clamped SwiGLU in place, g = silu(min(g, L)) * clamp(u, -L, L) over n elements (no clamp
// when limit <= 0), silu through exp_ref (ops.h). swiglu: element by element. swiglu_avx512
// (elementwise_avx512.cpp; moe_experts picks it when the active ISA is avx512): 16 lanes at once, the same
// bits (the same clamps, NaN, infinities and zeros).
void swiglu(float* g, const float* u, int64_t n, float limit);
void swiglu_avx512(float* g, const float* u, int64_t n, float limit);
// y [n] = exp_ref(x) on AVX-512 (the lanes of exp_avx512.h's exp16), for the tests.
void exp_ref_avx512(const float* x, int64_t n, float* y);
// ref::argmax on AVX-512 (cpu::argmax, ops.h, picks it when the active ISA is avx512).
int32_t argmax_avx512(const float* x, int64_t n);
// ref::rms_norm on AVX-512, bit-identical (the backend's rms_norm picks it when the active ISA is avx512).
void rms_norm_avx512(const float* x, const float* weight, int64_t n, int64_t d, float eps, float* y);
// y = x W^T on `pool` (the matmul entry point, with the pool when MatmulArgs carries one).
void linear_on(const MatmulArgs& a, core::ThreadPool* pool);

} // namespace deepinfer::kernels::cpu

namespace deepinfer::kernels::cpu::detail {
// ref::hc_post vectorized over columns, bit-identical to it (hyper_connection_avx512.cpp); AVX-512 CPUs
// only, hc <= 64.
void hc_post_avx512(const HcPostParams& p);
} // namespace deepinfer::kernels::cpu::detail
