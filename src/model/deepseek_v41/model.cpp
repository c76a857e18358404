#include "model/deepseek_v41/model.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <numeric>
#include <span>

#include "core/check.h"
#include "kernels/ops.h"
#include "model/int8_panels.h"
#include "model/sha256.h"

namespace deepinfer::model::deepseek_v41 {

using core::Result;
using core::Status;

namespace {

// V4's RoPE tables (same two-table scheme, YaRN on the compress table only, attention_factor 1).
deepseek_v4::ModelConfig rope_config(const ModelConfig& c) {
    deepseek_v4::ModelConfig r;
    r.qk_rope_head_dim = c.qk_rope_head_dim;
    r.rope_theta = c.rope_theta;
    r.compress_rope_theta = c.compress_rope_theta;
    r.yarn.enabled = c.yarn.enabled;
    r.yarn.factor = c.yarn.factor;
    r.yarn.original_max_position_embeddings = c.yarn.original_max_position_embeddings;
    r.yarn.beta_fast = c.yarn.beta_fast;
    r.yarn.beta_slow = c.yarn.beta_slow;
    return r;
}

int64_t entries_per_block(int64_t block_size, int64_t ratio) {
    return block_size / ratio;
}

} // namespace

DeepseekV41Model::DeepseekV41Model(std::unique_ptr<weights::Checkpoint> ckpt, ModelConfig config,
                                   ModelWeights w, EngramHasher hasher, deepseek_v4::RopeTable main_rope,
                                   deepseek_v4::RopeTable compress_rope, const deepseek_v4::ShardSpec& shard,
                                   std::pair<int64_t, int64_t> experts)
    : ckpt_(std::move(ckpt)), config_(std::move(config)), weights_(std::move(w)), hasher_(std::move(hasher)),
      main_rope_(std::move(main_rope)), compress_rope_(std::move(compress_rope)),
      backend_(kernels::make_cpu_backend()), shard_(shard) {
    // The same expert, tensor and context parallelism as V4 (model/deepseek_v4/model.h bind_shard).
    deepseek_v4::bind_shard(shard_, config_.n_routed_experts, experts.first, experts.second, &ep_status_,
                            moe_shard_, tp_, cp_, expert_load_);
    // The MoE group either has one CP rank (it is the ranks with this rank's CP coordinate: tp x ep of
    // them, the same rows) or spans the CP group (EP on CP: tp x cp ranks, parallel/parallel_layout.cpp).
    // A group of tp x cp ranks is taken as spanning: that is always so under EP on CP, and a layout with
    // ep == cp that is not EP on CP then merely keeps its MoE on every row (exact, slower).
    const int64_t tp_size = tp_.active() ? tp_.group->size() : 1;
    moe_whole_rows_ = cp_.active() && moe_shard_.group && moe_shard_.group->size() > 1 &&
                      moe_shard_.group->size() == tp_size * cp_.size();
}

Result<std::unique_ptr<DeepseekV41Model>> DeepseekV41Model::load(const std::string& dir,
                                                                 const deepseek_v4::ShardSpec& shard) {
    DI_ASSIGN_OR_RETURN(ModelConfig config, ModelConfig::from_json_file(dir + "/config.json"));
    DI_ASSIGN_OR_RETURN(auto ckpt, weights::Checkpoint::open(dir));
    std::pair<int64_t, int64_t> range{0, config.n_routed_experts};
    if (shard.tp && config.num_attention_heads % shard.tp->size() != 0)
        return core::invalid_argument(
            dir + "/config.json: num_attention_heads " + std::to_string(config.num_attention_heads) +
            " does not split over tensor parallel size " + std::to_string(shard.tp->size()));
    if (shard.moe && shard.moe->size() > 1) {
        const int64_t E = config.n_routed_experts, n = shard.moe->size(), r = shard.moe->rank();
        if (n > E)
            return core::invalid_argument(dir + "/config.json: " + std::to_string(n) +
                                          " expert-parallel ranks exceeds n_routed_experts " +
                                          std::to_string(E));
        range = {r * E / n, (r + 1) * E / n};
    }
    const model::HeadRows head_rows =
        shard.tp ? model::tp_head_rows(config.vocab_size, shard.tp->rank(), shard.tp->size())
                 : model::HeadRows{};
    DI_ASSIGN_OR_RETURN(ModelWeights w,
                        ModelWeights::bind(*ckpt, config, range.first, range.second, head_rows));
    if (model::dense_int8_panels() && !(shard.tp && shard.tp->size() > 1)) w.attach_dense_int8_panels(*ckpt);
    EngramHasher hasher;
    if (config.engram.enabled()) {
        const std::string hash_path = dir + "/engram_hash.safetensors";
        std::error_code ec;
        if (!std::filesystem::exists(hash_path, ec))
            return core::not_found(hash_path + ": missing (the Engram hash data of config.json field "
                                               "'engram_layer_ids'; tools/oracle/README.md \"V4.1\")");
        // Hash data is computed from one tokenizer: when the checkpoint ships its tokenizer.json, the hash
        // data must name that file's sha256.
        std::string tokenizer_sha;
        if (std::filesystem::exists(dir + "/tokenizer.json", ec)) {
            DI_ASSIGN_OR_RETURN(tokenizer_sha, sha256_file_hex(dir + "/tokenizer.json"));
        }
        DI_ASSIGN_OR_RETURN(hasher, EngramHasher::load(hash_path, config, tokenizer_sha));
    }
    const deepseek_v4::ModelConfig rc = rope_config(config);
    auto main_rope = deepseek_v4::make_main_rope(rc);
    auto compress_rope = deepseek_v4::make_compress_rope(rc);
    return std::unique_ptr<DeepseekV41Model>(
        new DeepseekV41Model(std::move(ckpt), std::move(config), std::move(w), std::move(hasher),
                             std::move(main_rope), std::move(compress_rope), shard, range));
}

Status DeepseekV41Model::on_step(uint64_t step) {
    if (!expert_load_) return {};
    return expert_load_->on_step(*shard_.moe, step);
}

const parallel::ExpertLoadSnapshot* DeepseekV41Model::expert_load() const {
    return expert_load_ ? &expert_load_->latest() : nullptr;
}

ModelInfo DeepseekV41Model::info() const {
    ModelInfo i;
    i.family = "deepseek_v41";
    i.num_layers = config_.num_hidden_layers;
    i.hidden_size = config_.hidden_size;
    i.n_routed_experts = config_.n_routed_experts;
    i.experts_per_tok = config_.num_experts_per_tok;
    i.bos_token_id = config_.bos_token_id;
    i.max_position_embeddings = config_.max_position_embeddings;
    for (int64_t r : config_.compress_ratios)
        if (r > 0) i.kv_block_unit = std::lcm(i.kv_block_unit, r);
    i.resident_weight_bytes = static_cast<double>(weights_.resident_weight_bytes());
    return i;
}

DecodeCost DeepseekV41Model::decode_cost() const {
    DecodeCost c;
    auto add = [&](const core::Weight& x) {
        if (x.data == nullptr) return;
        c.dense_bytes += static_cast<double>(x.stored_bytes());
        c.dense_macs += static_cast<double>(x.rows) * x.cols;
    };
    for (const LayerWeights& l : weights_.layers) {
        add(l.hc_attn.fn);
        add(l.hc_ffn.fn);
        const AttentionWeights& a = l.attn;
        for (const core::Weight* x : {&a.wq_a, &a.wq_b, &a.wkv, &a.wo_a, &a.wo_b}) add(*x);
        if (a.has_compressor) {
            add(a.compressor.wkv);
            add(a.compressor.wgate);
        }
        if (a.has_indexer) {
            add(a.indexer.wq_b);
            add(a.indexer.weights_proj);
            add(a.indexer.wk);
        }
        if (l.has_engram) {
            add(l.engram.wkv);
            c.dense_bytes += static_cast<double>(config_.engram.n_hash_cols() * config_.engram.head_dim);
        }
        add(l.ffn.gate);
        for (const core::Weight* x : {&l.ffn.shared.w1, &l.ffn.shared.w2, &l.ffn.shared.w3}) add(*x);
        const ExpertWeights& e = l.ffn.experts.front();
        for (const core::Weight* x : {&e.w1, &e.w2, &e.w3}) {
            c.expert_bytes += static_cast<double>(x->stored_bytes());
            c.expert_macs += static_cast<double>(x->rows) * x->cols;
        }
    }
    add(weights_.head);
    c.head_macs =
        weights_.head.data == nullptr ? 0.0 : static_cast<double>(weights_.head.rows) * weights_.head.cols;
    c.dense_bytes += static_cast<double>(weights_.embed.stored_bytes()) / weights_.embed.rows;
    return c;
}

Result<KvGeometry> DeepseekV41Model::kv_geometry(int64_t block_size) const {
    const ModelConfig& c = config_;
    int64_t unit = 1;
    for (int64_t r : c.compress_ratios)
        if (r > 0) unit = std::lcm(unit, r);
    if (block_size <= 0 || block_size % unit != 0)
        return core::invalid_argument("block_size " + std::to_string(block_size) +
                                      " must be a positive multiple of every compression ratio (" +
                                      std::to_string(unit) + ")");
    KvGeometry g;
    g.block_size = block_size;
    int64_t floats = 0, slot_floats = 0, split_floats = 0;
    for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
        floats += block_size * c.head_dim;
        split_floats += block_size * c.head_dim;
        if (c.is_kv_source(l)) {
            const int64_t m = c.compress_ratios[l];
            floats += entries_per_block(block_size, m) * (c.head_dim + c.index_head_dim);
            split_floats += entries_per_block(block_size, m) * (c.head_dim + c.index_head_dim);
            if (m > 1) slot_floats += m * 2 * c.head_dim;
        }
    }
    if (cp_.active()) { // a CP rank's share: window rows and compressed entries per owner
                        // (context_parallel.cpp)
        g.split_bytes_per_block = split_floats * 4;
        g.cp_size = cp_.size();
    }
    g.bytes_per_block = floats * 4 + c.engram.max_ngram_size * 8;
    g.bytes_per_slot = slot_floats * 4 + c.engram.max_ngram_size * 8;
    g.max_position = c.max_position_embeddings;
    return g;
}

Status DeepseekV41Model::init_kv_cache(const KvCacheSpec& spec) {
    DI_ASSIGN_OR_RETURN(KvGeometry g, kv_geometry(spec.block_size));
    (void)g;
    const ModelConfig& c = config_;
    spec_ = spec;
    const int64_t blocks = spec.num_blocks + 1; // + scratch
    const int64_t L = c.num_hidden_layers;
    pools_ = Pools{};
    pools_.raw.resize(L);
    pools_.comp.resize(L);
    pools_.keys.resize(L);
    pending_copies_.clear();
    const int64_t split = split_blocks(); // CP: this rank's blocks + trash (context_parallel.cpp)
    for (int64_t l = 0; l < L; ++l) {
        pools_.raw[l].assign(split * spec.block_size * c.head_dim, 0.0f);
        if (c.is_kv_source(l)) {
            const int64_t e = entries_per_block(spec.block_size, c.compress_ratios[l]);
            pools_.comp[l].assign(split * e * c.head_dim, 0.0f);
            pools_.keys[l].assign(split * e * c.index_head_dim, 0.0f);
        }
    }
    pools_.ngram.assign(blocks * c.engram.max_ngram_size, 0);
    slots_.assign(spec.num_slots + 1, Slot{});
    for (Slot& s : slots_) {
        s.group.resize(L);
        for (int64_t l = 0; l < L; ++l)
            if (c.is_kv_source(l) && c.compress_ratios[l] > 1)
                s.group[l].assign(c.compress_ratios[l] * 2 * c.head_dim, 0.0f);
    }
    return {};
}

void DeepseekV41Model::set_thread_pool(core::ThreadPool* pool) {
    backend_->set_thread_pool(pool);
    reserve_kernel_scratch();
}

// The kernels' per-thread scratch sized by the largest matmul a step can make, not by the largest step seen
// so far (setup time).
void DeepseekV41Model::reserve_kernel_scratch() {
    if (max_tokens_ > 0) backend_->reserve_scratch(max_tokens_, weights_.max_linear_cols());
}

void DeepseekV41Model::copy_block(int32_t src, int32_t dst) {
    const ModelConfig& c = config_;
    const int64_t N = c.engram.max_ngram_size;
    std::copy_n(pools_.ngram.data() + src * N, N, pools_.ngram.data() + dst * N);
    if (cp_.active()) { // the split stores (window rows, entries, indexer keys) at the next forward
        pending_copies_.emplace_back(src, dst);
        return;
    }
    for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
        const int64_t n = spec_.block_size * c.head_dim;
        std::copy_n(pools_.raw[l].data() + src * n, n, pools_.raw[l].data() + dst * n);
        if (!c.is_kv_source(l)) continue;
        const int64_t e = entries_per_block(spec_.block_size, c.compress_ratios[l]);
        std::copy_n(pools_.comp[l].data() + src * e * c.head_dim, e * c.head_dim,
                    pools_.comp[l].data() + dst * e * c.head_dim);
        std::copy_n(pools_.keys[l].data() + src * e * c.index_head_dim, e * c.index_head_dim,
                    pools_.keys[l].data() + dst * e * c.index_head_dim);
    }
}

void DeepseekV41Model::copy_slot(int32_t src, int32_t dst) {
    slots_[dst] = slots_[src];
}

Status DeepseekV41Model::validate(const ForwardBatch& b) const {
    if (pools_.raw.empty()) return core::failed_precondition("deepseek_v41: forward before init_kv_cache");
    if (b.positions.size() != b.token_ids.size())
        return core::invalid_argument("ForwardBatch: positions and token_ids differ in length");
    for (const SequenceChunk& ch : b.chunks) {
        if (ch.is_padding) continue;
        if (ch.slot < 0 || ch.slot >= spec_.num_slots)
            return core::invalid_argument("ForwardBatch: bad slot");
        if (ch.restore_slot_from_block && (ch.start_pos <= 0 || ch.start_pos % spec_.block_size != 0))
            return core::invalid_argument(
                "ForwardBatch: a prefix-cache hit must start at a block boundary > 0, "
                "got start_pos " +
                std::to_string(ch.start_pos));
        const int64_t need = (ch.start_pos + ch.num_tokens + spec_.block_size - 1) / spec_.block_size;
        if (static_cast<int64_t>(ch.block_table.size()) < need)
            return core::invalid_argument("ForwardBatch: block table too short for the chunk");
        for (int32_t blk : ch.block_table)
            if (blk < 0 || blk >= spec_.num_blocks)
                return core::invalid_argument("ForwardBatch: bad block id");
        if (ch.token_offset < 0 || ch.token_offset + ch.num_tokens > b.num_tokens())
            return core::invalid_argument("ForwardBatch: chunk rows out of range");
        for (int32_t i = 0; i < ch.num_tokens; ++i) {
            if (b.positions[ch.token_offset + i] != ch.start_pos + i)
                return core::invalid_argument("ForwardBatch: positions of a chunk must be start_pos + i");
            const int32_t t = b.token_ids[ch.token_offset + i];
            if (t < 0 || t >= config_.vocab_size)
                return core::invalid_argument("ForwardBatch: token id " + std::to_string(t) +
                                              " outside the vocabulary");
        }
    }
    for (int32_t r : b.logits_rows)
        if (r < 0 || r >= b.num_tokens()) return core::invalid_argument("ForwardBatch: bad logits row");
    return {};
}

Status DeepseekV41Model::forward(const ForwardBatch& batch, float* logits) {
    DI_RETURN_IF_ERROR(validate(batch));
    const auto t0 = std::chrono::steady_clock::now();
    // The ops' scratch (and the EP slots) come from the workspace, which nothing else resets here.
    backend_->workspace().reset();
    ep_status_ = Status();
    if (!pending_copies_.empty()) run_pending_copies();
    const ModelConfig& c = config_;
    const int64_t T = batch.num_tokens(), D = c.hidden_size, L = c.num_hidden_layers;
    if (probes_) {
        probes_->hidden.assign(L, std::vector<float>(T * c.hc_mult * D, 0.0f));
        probes_->router.assign(L, std::vector<int32_t>(T * c.num_experts_per_tok, -1));
        probes_->picks.assign(L, std::vector<int32_t>(T * c.index_topk, -1));
        probes_->candidate_blocks.assign(T * c.candidate_topk_blocks, -1);
        probes_->hash_ids.assign(T * static_cast<int64_t>(c.engram.layer_ids.size()) * c.engram.n_hash_cols(),
                                 0);
    }
    std::vector<float> final_hidden(T * D, 0.0f); // [T, D]
    // Pass 1: every chunk's slot state and Engram hash ids (they depend on the tokens only), and one gather
    // job per (chunk, Engram layer) handed to the prefetch worker before any layer runs.
    const int64_t E = static_cast<int64_t>(c.engram.layer_ids.size()), cols = c.engram.n_hash_cols();
    if (E > 0) {
        hash_ids_.assign(T * E * cols, 0);
        reserve_engram(T);
        prefetch_.begin();
    }
    std::vector<Chunk> chunks;
    chunks.reserve(batch.chunks.size());
    for (const SequenceChunk& sc : batch.chunks) {
        if (sc.is_padding || sc.num_tokens == 0) continue;
        Slot& slot = slots_[sc.slot];
        if (sc.reset_slot || sc.restore_slot_from_block) {
            slot.history = NgramHistory{};
            for (auto& g : slot.group) std::fill(g.begin(), g.end(), 0.0f);
        }
        if (sc.restore_slot_from_block) {
            const int64_t N = c.engram.max_ngram_size;
            const int64_t* snap =
                pools_.ngram.data() + sc.block_table[sc.start_pos / spec_.block_size - 1] * N;
            slot.history.recent.assign(snap + 1, snap + 1 + snap[0]);
        }
        Chunk ch;
        ch.n = sc.num_tokens;
        ch.start = sc.start_pos;
        ch.block_table = sc.block_table.data();
        ch.slot = &slot;
        ch.row0 = sc.token_offset;
        // CP: a prompt chunk's rows divided over the group (the same decision on every rank: the chunk is
        // the batch's); the row-wise work of run_chunk runs on this rank's rows only.
        ch.rows = deepseek_v4::cp_rows(&cp_, ch.n);
        if (ch.rows.split) ++row_work_.split_chunks;
        for (int64_t i = 0; i < ch.n; ++i) ch.pos.push_back(sc.start_pos + i);
        if (E > 0) {
            hash_chunk(batch, ch); // every row: the n-gram history runs through the whole chunk
            const int64_t hd = c.engram.head_dim, r0 = ch.row0 + ch.rows.begin; // this rank's table rows
            for (int64_t e = 0; e < E; ++e) {
                const int64_t job = prefetch_.add(
                    weights_.engram_tables[e], hash_ids_.data() + (r0 * E + e) * cols, ch.rows.count(), cols,
                    E * cols, engram_rows_[e].data() + r0 * cols * hd, !engram_gather_);
                if (e == 0) ch.job0 = job;
            }
        }
        chunks.push_back(std::move(ch));
    }
    if (E > 0) {
        if (probes_) std::copy(hash_ids_.begin(), hash_ids_.end(), probes_->hash_ids.begin());
        prefetch_.start(&backend_->profiler());
    }
    // Pass 2: each chunk through all layers; an Engram layer waits only for its own gather job.
    for (const Chunk& ch : chunks) run_chunk(batch, ch, final_hidden);
    if (E > 0) prefetch_.finish();
    const int64_t R = static_cast<int64_t>(batch.logits_rows.size());
    std::vector<float> rows(R * D);
    for (int64_t r = 0; r < R; ++r)
        std::copy_n(final_hidden.data() + batch.logits_rows[r] * D, D, rows.data() + r * D);
    // Under TP the vocabulary is split and gathered (exact); every rank enters the gather, R being the
    // leader's.
    if (R > 0 && tp_.active())
        deepseek_v4::tp_linear(*backend_, tp_, rows.data(), R, weights_.head, logits,
                               kernels::OpKind::kLmHead);
    else if (R > 0)
        backend_->linear(kernels::linear_args(rows.data(), R, weights_.head, logits),
                         kernels::OpKind::kLmHead);
    if (backend_->profiler().enabled())
        backend_->profiler().record_step(
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    return ep_status_;
}

// Engram hash ids of the chunk into hash_ids_ rows [row0, row0 + n) x [E, cols], carrying the slot's n-gram
// history; split at block ends, where the history is snapshotted into the block (prefix-cache hits).
void DeepseekV41Model::hash_chunk(const ForwardBatch& batch, const Chunk& ch) {
    const ModelConfig& c = config_;
    const int64_t n = ch.n, bs = spec_.block_size, N = c.engram.max_ngram_size;
    const int64_t per_token = static_cast<int64_t>(c.engram.layer_ids.size()) * c.engram.n_hash_cols();
    hash_scratch_.clear();
    std::vector<int64_t> toks(n);
    for (int64_t i = 0; i < n; ++i) toks[i] = batch.token_ids[ch.row0 + i];
    for (int64_t done = 0; done < n;) {
        const int64_t len = std::min(n - done, bs - (ch.start + done) % bs);
        hasher_.hash(std::span<const int64_t>(toks).subspan(done, len), {}, ch.slot->history, hash_scratch_);
        done += len;
        if ((ch.start + done) % bs == 0) {
            const auto& recent = ch.slot->history.recent;
            DI_CHECK(static_cast<int64_t>(recent.size()) < N);
            int64_t* snap = pools_.ngram.data() + ch.block_table[(ch.start + done) / bs - 1] * N;
            snap[0] = static_cast<int64_t>(recent.size());
            std::copy(recent.begin(), recent.end(), snap + 1);
        }
    }
    DI_CHECK(static_cast<int64_t>(hash_scratch_.size()) == n * per_token);
    std::copy(hash_scratch_.begin(), hash_scratch_.end(), hash_ids_.begin() + ch.row0 * per_token);
}

void DeepseekV41Model::reserve_engram(int64_t tokens) {
    const EngramConfig& e = config_.engram;
    const int64_t rows = tokens * e.n_hash_cols() * e.head_dim;
    engram_rows_.resize(e.layer_ids.size());
    for (auto& r : engram_rows_)
        if (static_cast<int64_t>(r.size()) < rows) r.resize(rows);
    const int64_t kv = tokens * (config_.hc_mult + 1) * config_.hidden_size;
    if (static_cast<int64_t>(engram_kv_.size()) < kv) engram_kv_.resize(kv);
}

Status DeepseekV41Model::configure_runtime(const RuntimeSpec& spec) {
    if (spec.max_num_batched_tokens <= 0)
        return core::invalid_argument("configure_runtime: max_num_batched_tokens must be positive");
    engram_gather_ = spec.engram_gather;
    if (config_.engram.enabled()) reserve_engram(spec.max_num_batched_tokens);
    max_tokens_ = spec.max_num_batched_tokens;
    reserve_kernel_scratch();
    return {};
}

// The chunk's rows through every layer. With split rows (CP, a prompt chunk) this rank keeps the residual
// streams of its rows only: the embedding, the mHC sites, Engram, the attention's row-wise projections and
// output, and the MoE run on them, and the attention gathers what needs every row (attention.cpp); the
// final hidden states are gathered at the end, so every rank holds the chunk's logits rows.
void DeepseekV41Model::run_chunk(const ForwardBatch& batch, const Chunk& ch,
                                 std::vector<float>& final_hidden) {
    const ModelConfig& c = config_;
    const int64_t n = ch.rows.count(), D = c.hidden_size, hc = c.hc_mult, L = c.num_hidden_layers;
    const int64_t r0 = ch.row0 + ch.rows.begin; // this rank's first row in the batch
    const int64_t mix_n = (2 + hc) * hc;
    const float eps = static_cast<float>(c.rms_norm_eps);
    kernels::Backend& be = *backend_;

    std::vector<float> x(n * D); // [n, D] (n: this rank's rows)
    kernels::EmbeddingParams ep;
    ep.table = &weights_.embed;
    ep.ids = batch.token_ids.data() + r0;
    ep.n = n;
    ep.out = x.data();
    if (n > 0) be.embedding(ep);
    std::vector<float> h(n * hc * D); // [n, hc, D]
    for (int64_t t = 0; t < n; ++t)
        for (int64_t k = 0; k < hc; ++k) std::copy_n(x.data() + t * D, D, h.data() + (t * hc + k) * D);

    std::vector<float> pre_mix(n * hc, 0.0f); // [n, hc]: the first site collapses stream 0
    for (int64_t t = 0; t < n; ++t) pre_mix[t * hc] = 1.0f;
    std::vector<float> flat(n * hc * D), mix(n * mix_n), post(n * hc), comb(n * hc * hc), scratch(n * D);
    std::vector<float> next_pre(n * hc), y(n * D);
    Shared sh;

    // One mHC site: mixes of the current streams (post, comb, and the pre the NEXT site collapses with),
    // then the sublayer on the streams collapsed with the previous site's pre. The sublayer is entered
    // even without rows of this rank (its collectives).
    auto site = [&](const HcWeights& hw, const std::vector<float>& norm_w, auto&& sublayer) {
        if (n > 0) {
            be.rms_norm({h.data(), nullptr, n, hc * D, eps, flat.data()});
            be.linear(kernels::linear_args(flat.data(), n, hw.fn, mix.data()));
            kernels::HcPreParams pp;
            pp.mix = mix.data();
            pp.base = hw.base.data();
            pp.scale = hw.scale.data();
            pp.h = h.data();
            pp.T = n;
            pp.hc = hc;
            pp.D = D;
            pp.hc_eps = static_cast<float>(c.hc_eps);
            pp.sinkhorn_iters = c.hc_sinkhorn_iters;
            pp.post = post.data();
            pp.comb = comb.data();
            pp.x = scratch.data(); // collapsed with this site's own pre: unused in V4.1
            be.hc_pre(pp);
        }
        for (int64_t t = 0; t < n; ++t)
            for (int64_t k = 0; k < hc; ++k) {
                const float z = mix[t * mix_n + k] * hw.scale[0] + hw.base[k];
                next_pre[t * hc + k] = 1.0f / (1.0f + std::exp(-z)) + static_cast<float>(c.hc_eps);
            }
        for (int64_t t = 0; t < n; ++t)
            for (int64_t i = 0; i < D; ++i) {
                float s = 0;
                for (int64_t k = 0; k < hc; ++k) s += pre_mix[t * hc + k] * h[(t * hc + k) * D + i];
                x[t * D + i] = s;
            }
        if (n > 0) be.rms_norm({x.data(), norm_w.data(), n, D, eps, x.data()});
        sublayer(x.data(), y.data());
        if (n > 0) {
            kernels::HcPostParams hp;
            hp.post = post.data();
            hp.comb = comb.data();
            hp.y = y.data();
            hp.T = n;
            hp.hc = hc;
            hp.D = D;
            hp.h = h.data();
            be.hc_post(hp);
        }
        pre_mix = next_pre;
    };

    for (int64_t l = 0; l < L; ++l) {
        const LayerWeights& lw = weights_.layers[l];
        if (lw.has_engram) engram(l, ch, h.data());
        site(lw.hc_attn, lw.attn_norm, [&](const float* in, float* out) { attention(l, ch, in, out, sh); });
        site(lw.hc_ffn, lw.ffn_norm, [&](const float* in, float* out) { moe(l, ch, in, out); });
        // Split rows: this rank's rows only (the others stay 0).
        if (probes_) std::copy(h.begin(), h.end(), probes_->hidden[l].begin() + r0 * hc * D);
    }
    // Final collapse with the last site's pre, then the norm.
    for (int64_t t = 0; t < n; ++t)
        for (int64_t i = 0; i < D; ++i) {
            float s = 0;
            for (int64_t k = 0; k < hc; ++k) s += pre_mix[t * hc + k] * h[(t * hc + k) * D + i];
            x[t * D + i] = s;
        }
    if (n > 0) be.rms_norm({x.data(), weights_.norm.data(), n, D, eps, final_hidden.data() + r0 * D});
    gather_rows(ch.rows, {{final_hidden.data() + ch.row0 * D, D}});
}

} // namespace deepinfer::model::deepseek_v41
