#pragma once
// DeepSeek V4.1 as a model::CausalLm (reference numerics first): embedding -> hc_mult streams -> per layer
// [Engram] + delayed-pre mHC + attention (window KV fake-quantized FP8; ratio-2 / ratio-1 compressed KV from
// the KV sources, FP4; indexer with re-index and the candidate two-level top-k) + delayed-pre mHC + MoE ->
// final collapse with the last `pre` -> norm -> head. Spec: shared/spec/deepseek-v4-architecture.md §3.
//
// Ops run on a kernels::Backend (linear, rms_norm, rope, hc_pre, hc_post, kv_store, sparse_attention,
// moe_routing, moe_experts are V4's); the V4.1-only steps (pooling without ape, the indexer over shared
// keys with candidate blocks, cache fake-quant, Engram gather + gate, delayed pre) are plain host loops here
// and in kernels/ref. Each ForwardBatch chunk runs through all layers in turn.
//
// KV: paged; every layer stores its window rows [blocks, block_size, d]; only KV sources own compressed
// entries [blocks, block_size / m, d] and indexer keys [blocks, block_size / m, d_I]; a slot carries the
// open ratio-2 group and the Engram n-gram history. Prefix-cache hits (restore_slot_from_block) are not
// supported yet: the n-gram history and the open group are not snapshotted into blocks.

#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "model/causal_lm.h"
#include "model/deepseek_v4/context_parallel.h"
#include "model/deepseek_v4/model.h"
#include "model/deepseek_v4/moe.h"
#include "model/deepseek_v4/rope.h"
#include "model/deepseek_v4/tensor_parallel.h"
#include "model/deepseek_v41/config.h"
#include "model/deepseek_v41/engram_hash.h"
#include "model/deepseek_v41/engram_prefetch.h"
#include "model/deepseek_v41/model_weights.h"
#include "model/deepseek_v41/quant_ties.h"
#include "model/sharded_lm.h"
#include "weights/checkpoint.h"

namespace deepinfer::model::deepseek_v41 {

// What one forward computed, per layer, for comparison with the reference (rows follow token_ids). Under CP
// with a chunk's rows divided over the group, hidden and router hold this rank's rows only (the others 0 and
// -1); picks, candidate_blocks and hash_ids are whole.
struct V41Probes {
    std::vector<std::vector<float>> hidden;   // [L][T, hc, D] streams after layer l
    std::vector<std::vector<int32_t>> router; // [L][T, K] expert indices, ascending
    std::vector<std::vector<int32_t>> picks;  // [L][T, index_topk] index sources' picks, -1 padded
    std::vector<int32_t> candidate_blocks;    // [T, candidate_topk_blocks] ascending, -1 padded
    std::vector<int64_t> hash_ids;            // [T, engram layers, cols]
};

class DeepseekV41Model : public ShardedLm {
public:
    // Opens DIR (config.json, safetensors, engram_hash.safetensors) and binds every weight. With a shard
    // (V4's ShardSpec, docs/parallelism.md): only this rank's routed experts, split over `shard.moe`
    // exactly as V4 splits them (bit-identical slot all-reduce), and the LM head's vocabulary over
    // `shard.tp` (gathered). With `shard.cp` (context parallelism) the attention reads only this rank's KV
    // blocks, partials merged by LSE, and a prompt chunk's rows (>= kCpSplitMinRows) are divided over the
    // CP group: each rank runs the row-wise work (mHC, Engram, projections, MoE) on its rows, gathering
    // what the KV state machines and the attention need (docs/parallelism.md "CP on V4.1").
    static core::Result<std::unique_ptr<DeepseekV41Model>> load(const std::string& dir,
                                                                const deepseek_v4::ShardSpec& shard = {});

    int64_t vocab_size() const override { return config_.vocab_size; }
    int64_t eos_token_id() const override { return config_.eos_token_id; }
    ModelInfo info() const override;
    DecodeCost decode_cost() const override;
    core::Result<KvGeometry> kv_geometry(int64_t block_size) const override;
    core::Status init_kv_cache(const KvCacheSpec& spec) override;
    // Plans the Engram row buffers for the largest step; spec.engram_gather = false (bench only) feeds the
    // Engram layers zeros instead of table rows.
    core::Status configure_runtime(const RuntimeSpec& spec) override;
    void set_thread_pool(core::ThreadPool* pool) override;
    kernels::Profiler* profiler() override { return &backend_->profiler(); }
    core::Status forward(const ForwardBatch& batch, float* logits) override;
    void copy_block(int32_t src, int32_t dst) override;
    void copy_slot(int32_t src, int32_t dst) override;
    core::Status on_step(uint64_t step) override;
    const parallel::ExpertLoadSnapshot* expert_load() const override;
    // The routed experts this rank holds: [first, last).
    std::pair<int64_t, int64_t> expert_range() const { return {moe_shard_.first, moe_shard_.last}; }

    // generate --dump-probes (probes.cpp): the golden key names of tools/oracle/goldens_v41.py.
    std::unique_ptr<ProbeRecorder> attach_probe_recorder() override;
    void set_probes(V41Probes* p) { probes_ = p; }
    // Test only (quant_ties.h): the reference's rounding at its near-ties in the cache fake-quant; null
    // (the default) runs the plain quantizers.
    void set_quant_ties(QuantTieOverride* t) { ties_ = t; }
    const ModelConfig& config() const { return config_; }
    const ModelWeights& weights() const { return weights_; }
    // Token rows this rank ran through the row-wise work since load (tests: distributed prompt chunks,
    // docs/parallelism.md "CP on V4.1"). attention: rows through a layer's attention projections (q, kv,
    // compressor, indexer q / weights, wo_a / wo_b), summed over layers; moe: rows through a layer's router
    // and experts; split_chunks: chunks whose rows were divided over the CP group.
    struct RowWork {
        int64_t attention = 0, moe = 0, split_chunks = 0;
    };
    const RowWork& row_work() const { return row_work_; }
    // Floats held in the window-row, compressed-entry and indexer-key pools (tests: CP stores about 1/cp).
    int64_t split_pool_floats() const {
        int64_t f = 0;
        for (size_t l = 0; l < pools_.raw.size(); ++l)
            f += pools_.raw[l].size() + pools_.comp[l].size() + pools_.keys[l].size();
        return f;
    }

    // The per-layer KV sizes (floats), for kv_geometry and the docs.
    struct Pools {
        std::vector<std::vector<float>> raw;  // [L] [blocks, block_size, d]
        std::vector<std::vector<float>> comp; // [L] (KV sources) [blocks, block_size / m, d]
        std::vector<std::vector<float>> keys; // [L] (KV sources) [blocks, block_size / m, d_I]
        // [blocks, N]: the Engram n-gram history at the block's end (count, then up to N - 1 compressed
        // ids), so a prefix-cache hit restores it. The compressors need nothing: a block ends on a group
        // boundary of every ratio.
        std::vector<int64_t> ngram;
    };
    struct Slot {
        NgramHistory history;
        std::vector<std::vector<float>> group; // [L] (ratio-2 sources) [m, 2, d] open group: kv, gate
    };
    // Per chunk, what one layer publishes to the next ones (the reference's per-forward `shared`).
    struct Shared {
        std::vector<int32_t> picks; // [n, index_topk] -1 padded
        bool has_picks = false;
        std::vector<uint8_t> candidates; // [n, entries]
        bool has_candidates = false;
    };
    struct Chunk {
        int64_t n = 0, start = 0; // tokens, first position
        std::vector<int64_t> pos; // [n]
        const int32_t* block_table = nullptr;
        Slot* slot = nullptr;
        int64_t row0 = 0;  // first row in the batch
        int64_t job0 = -1; // the Engram gather job of its first Engram layer (EngramPrefetcher)
        // CP: the chunk's rows [0, n) this rank runs the row-wise work on (all of them unless split).
        deepseek_v4::CpRows rows;
    };

private:
    DeepseekV41Model(std::unique_ptr<weights::Checkpoint> ckpt, ModelConfig config, ModelWeights w,
                     EngramHasher hasher, deepseek_v4::RopeTable main_rope,
                     deepseek_v4::RopeTable compress_rope, const deepseek_v4::ShardSpec& shard,
                     std::pair<int64_t, int64_t> experts);
    core::Status validate(const ForwardBatch& batch) const;
    void hash_chunk(const ForwardBatch& batch, const Chunk& ch);
    void reserve_engram(int64_t tokens);
    void reserve_kernel_scratch();
    void run_chunk(const ForwardBatch& batch, const Chunk& ch, std::vector<float>& final_hidden);
    // The sublayers take and return this rank's rows of the chunk (ch.rows: all of them unless split):
    // h [rows, hc, D], x and out [rows, D].
    void engram(int64_t l, const Chunk& ch, float* h);
    void attention(int64_t l, const Chunk& ch, const float* x, float* out, Shared& sh);
    // The indexer's query [rows, H_I, d_I] (rotated, fake-quantized) and head weights [rows, H_I] of this
    // rank's rows; then the scoring and top-k over all the chunk's rows (q, hw [n, ...]).
    void indexer_project(int64_t l, const Chunk& ch, const float* x, const float* qr, float* q, float* hw);
    void indexer(int64_t l, const Chunk& ch, const float* q, const float* hw, Shared& sh);
    void moe(int64_t l, const Chunk& ch, const float* x, float* out);
    // CP, split rows: every field [n, width] (rows of this rank written) gets every rank's rows, in one
    // all-gather (context_parallel.cpp). Not split: nothing. Every rank calls it with the same fields.
    struct RowField {
        float* data;
        int64_t width;
    };
    void gather_rows(const deepseek_v4::CpRows& rows, std::span<const RowField> fields);
    void gather_rows(const deepseek_v4::CpRows& rows, std::initializer_list<RowField> fields) {
        gather_rows(rows, std::span<const RowField>(fields.begin(), fields.size()));
    }

    std::unique_ptr<weights::Checkpoint> ckpt_;
    ModelConfig config_;
    ModelWeights weights_;
    int64_t max_tokens_ = 0; // configure_runtime's max_num_batched_tokens
    EngramHasher hasher_;
    deepseek_v4::RopeTable main_rope_, compress_rope_;
    std::unique_ptr<kernels::Backend> backend_;
    KvCacheSpec spec_;
    Pools pools_;
    std::vector<Slot> slots_;
    V41Probes* probes_ = nullptr;
    QuantTieOverride* ties_ = nullptr;
    deepseek_v4::ShardSpec shard_;
    deepseek_v4::MoeShard moe_shard_;
    deepseek_v4::TpShard tp_;
    // Context parallelism: attention over this rank's blocks, merged over the group (attention.cpp); the
    // window rows and compressed entries stored per owner (context_parallel.cpp).
    deepseek_v4::CpShard cp_;
    std::vector<std::pair<int32_t, int32_t>> pending_copies_; // CP: block copies for the next forward
    // CP with split rows: the MoE still runs every row when its group spans CP ranks (EP on CP: the slot
    // all-reduce sums every rank's experts over the same tokens), its input gathered first.
    bool moe_whole_rows_ = false;
    RowWork row_work_;
    int64_t split_blocks() const; // blocks of pools_.raw / comp / keys
    void local_block_table(const Chunk& ch, int64_t n_blocks, std::vector<int32_t>& out) const;
    int64_t split_block_floats() const;
    void copy_split_block(int32_t src, int32_t dst, bool pack, float* buf);
    void run_pending_copies();
    core::Status ep_status_; // the first collective failure of a forward
    std::unique_ptr<parallel::ExpertLoadStats> expert_load_;
    // Engram (engram_moe.cpp): the step's hash ids [T, E, cols], the gathered rows per Engram layer
    // [T, cols, head_dim] (filled by prefetch_ ahead of the layer), wkv's output; grown, never shrunk.
    EngramPrefetcher prefetch_;
    std::vector<int64_t> hash_ids_, hash_scratch_;
    std::vector<std::vector<float>> engram_rows_;
    std::vector<float> engram_kv_;
    bool engram_gather_ = true;
};

} // namespace deepinfer::model::deepseek_v41
