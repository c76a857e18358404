#pragma once
// What the engine needs from a model family: KV sizing, KV storage, and a batched forward over a ragged
// ForwardBatch. The engine speaks token ids and block ids only; the model owns what a block contains.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "kernels/profiler.h"
#include "model/forward_batch.h"

namespace deepinfer::core {
class ThreadPool;
}

namespace deepinfer::model {

// How a runner (the engine, bench, generate) will drive the model: the model plans its workspace once from
// the largest step.
struct RuntimeSpec {
    int64_t max_num_batched_tokens = 0; // tokens in one forward
    int32_t max_num_seqs = 0;           // chunks in one forward
    // Bench/debug only (`--engram-gather=off`): a model with Engram layers feeds them zeros instead of
    // gathering table rows, to measure what the gather costs. Changes the outputs; never for serving.
    bool engram_gather = true;
};

struct KvCacheSpec {
    int64_t block_size = 256; // positions per block; the model rejects sizes that are not multiples of its
                              // compression ratios
    int64_t num_blocks = 0;   // usable blocks (the model adds one scratch block)
    int32_t num_slots = 0;    // usable per-sequence slots (the model adds one scratch slot)
};

// What a runner prints and sizes from, whatever the family.
struct ModelInfo {
    std::string family; // "deepseek_v4", "deepseek_v41"
    int64_t num_layers = 0;
    int64_t hidden_size = 0;
    int64_t n_routed_experts = 0;
    int64_t experts_per_tok = 0;
    int64_t bos_token_id = 0;
    int64_t max_position_embeddings = 0;
    int64_t kv_block_unit = 1; // KV block sizes must be multiples of this (the compression ratios' lcm)
    double resident_weight_bytes = 0;
};

// Weight bytes and multiply-adds one decode token touches (bench's roofline): everything dense plus one
// routed expert in every MoE layer (expert_*), which the runner scales by the experts a step touches.
// head_macs: the LM head's share of dense_macs, which a prefill computes for one row per sequence only.
struct DecodeCost {
    double dense_bytes = 0, expert_bytes = 0;
    double dense_macs = 0, expert_macs = 0;
    double head_macs = 0;
};

// Per-stage dumps of a run (generate --dump-probes): record() after each forward of `tokens` (one
// sequence, in order), write() at the end. The recorder detaches itself from the model when destroyed.
class ProbeRecorder {
public:
    virtual ~ProbeRecorder() = default;
    virtual void record(const std::vector<int32_t>& tokens) = 0;
    virtual core::Status write(const std::string& path) const = 0;
};

class CausalLm {
public:
    virtual ~CausalLm() = default;

    virtual int64_t vocab_size() const = 0;
    virtual int64_t eos_token_id() const = 0;
    virtual ModelInfo info() const { return {}; }
    virtual DecodeCost decode_cost() const { return {}; }
    // Attach a probe recorder to every later forward; nullptr when the family records no probes.
    virtual std::unique_ptr<ProbeRecorder> attach_probe_recorder() { return nullptr; }
    // Bytes per block and per slot for a block size, so the engine can size the pool from a memory budget.
    virtual core::Result<KvGeometry> kv_geometry(int64_t block_size) const = 0;
    // Allocate (or reallocate) the block pool and the slots. Everything previously stored is dropped.
    virtual core::Status init_kv_cache(const KvCacheSpec& spec) = 0;

    // Plan the step workspace. Optional: without it the workspace grows on the first steps (allocating then).
    virtual core::Status configure_runtime(const RuntimeSpec& spec) { return core::Status(); }
    // Run every parallel loop on `pool`, owned by the runner, which keeps it alive until it sets another
    // (nullptr = core::ThreadPool::global(), the fallback for tools).
    virtual void set_thread_pool(core::ThreadPool* pool) {}
    // The op census of every forward (kernels/profiler.h), or nullptr when the model keeps none.
    virtual kernels::Profiler* profiler() { return nullptr; }

    // Runs one step. logits: [batch.logits_rows.size(), vocab_size()] row-major, written by the model.
    virtual core::Status forward(const ForwardBatch& batch, float* logits) = 0;

    // Copy-on-write support for sequences that share a partially filled block or fork a slot (n > 1).
    virtual void copy_block(int32_t src, int32_t dst) = 0;
    virtual void copy_slot(int32_t src, int32_t dst) = 0;
};

} // namespace deepinfer::model
