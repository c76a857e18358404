#pragma once
// The compute seam. Model code is composition: it takes its activations from the backend's Workspace
// (planned once) and calls named ops with one params struct each; a Backend runs them. Every op goes
// through the non-virtual entry points here, which count it in the Profiler (the op census) and then call
// the implementation's run_* hook, so an implementation (CPU today; CUDA later, op by op) never times or
// counts anything itself. KV storage is allocated through the backend as well.
//
// Adding an op: its params struct in params.h, its scalar spec in ref/, an OpKind, an entry point + run_*
// hook here, the CPU version in cpu/ (or the ref one), a kernels test against ref (docs/architecture.md).

#include <cstdint>
#include <memory>
#include <span>

#include "kernels/ops.h"
#include "kernels/params.h"
#include "kernels/profiler.h"
#include "kernels/workspace.h"

namespace deepinfer::core {
class ThreadPool;
}

namespace deepinfer::kernels {

// Zero-filled storage owned by a backend (host memory on CPU, device memory on an accelerator).
using BufferPtr = std::unique_ptr<float, void (*)(float*)>;

class Backend {
public:
    virtual ~Backend() = default;
    virtual const char* name() const = 0;
    virtual BufferPtr alloc_floats(int64_t n) = 0;
    // The CPU pool parallel loops run on (nullptr = core::ThreadPool::global()); a device backend ignores it.
    virtual void set_thread_pool(core::ThreadPool* pool) {}
    // Threads its ops may run at once (per-thread scratch in a workspace plan).
    virtual int num_threads() const { return 1; }
    // Sizes the ops' own per-thread scratch (the CPU matmuls keep theirs per thread, grown on first use) for
    // every call of up to `max_tokens` tokens on weights of up to `max_cols` columns, on every thread the
    // backend runs on, so that no later step grows it: the model's configure_runtime, with its plan.
    virtual void reserve_scratch(int64_t max_tokens, int64_t max_cols) {}

    Workspace& workspace() { return ws_; }
    Profiler& profiler() { return prof_; }

    void embedding(const EmbeddingParams& p);
    // y = x W^T over a row range (kind = kLmHead for the vocabulary projection).
    void linear(const MatmulArgs& a, OpKind kind = OpKind::kLinear);
    // Several linears at once (kernels::matmul_multi's contract: same token count, pool and numerics; at
    // most kMaxMultiMatmuls), results as from linear() on each. Counted as one call of `kind`.
    void linear_multi(std::span<const MatmulArgs> args, OpKind kind = OpKind::kLinear);
    void rms_norm(const RmsNormParams& p);
    void rope(const RopeParams& p);
    void hc_pre(const HcPreParams& p);
    void hc_post(const HcPostParams& p);
    void hc_head(const HcHeadParams& p);
    void kv_store(const KvStoreParams& p);
    void compressor(const CompressorParams& p);
    void indexer(const IndexerParams& p);
    void sparse_attention(const SparseAttentionParams& p);
    void moe_routing(const MoeRoutingParams& p);
    void moe_experts(const MoeExpertsParams& p);

protected:
    virtual void run_embedding(const EmbeddingParams& p) = 0;
    virtual void run_linear(const MatmulArgs& a) = 0;
    // Default: run_linear on each (a backend that can do better overrides it).
    virtual void run_linear_multi(std::span<const MatmulArgs> args) {
        for (const MatmulArgs& a : args) run_linear(a);
    }
    virtual void run_rms_norm(const RmsNormParams& p) = 0;
    virtual void run_rope(const RopeParams& p) = 0;
    virtual void run_hc_pre(const HcPreParams& p) = 0;
    virtual void run_hc_post(const HcPostParams& p) = 0;
    virtual void run_hc_head(const HcHeadParams& p) = 0;
    virtual void run_kv_store(const KvStoreParams& p) = 0;
    virtual void run_compressor(const CompressorParams& p) = 0;
    virtual void run_indexer(const IndexerParams& p) = 0;
    virtual void run_sparse_attention(const SparseAttentionParams& p) = 0;
    virtual void run_moe_routing(const MoeRoutingParams& p) = 0;
    virtual void run_moe_experts(const MoeExpertsParams& p) = 0;

private:
    Workspace ws_;
    Profiler prof_;
};

// The CPU backend: ref/ for the cheap ops, cpu/ for the hot ones, all parallel loops on one persistent
// pool (the engine's; nullptr = core::ThreadPool::global(), for tools).
std::unique_ptr<Backend> make_cpu_backend(core::ThreadPool* pool = nullptr);

} // namespace deepinfer::kernels
