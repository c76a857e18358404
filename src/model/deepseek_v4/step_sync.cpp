#include "model/deepseek_v4/step_sync.h"

#include <utility>

namespace deepinfer::model::deepseek_v4 {

parallel::StepMessage to_step_message(const ForwardBatch& b) {
    parallel::StepMessage m;
    m.kind = parallel::StepKind::kForward;
    m.token_ids = b.token_ids;
    m.positions = b.positions;
    m.logits_rows = b.logits_rows;
    m.sequences.reserve(b.chunks.size());
    for (const SequenceChunk& c : b.chunks)
        m.sequences.push_back({c.seq_id, c.slot, c.start_pos, c.num_tokens, c.token_offset, c.block_table,
                               c.restore_slot_from_block, c.reset_slot, c.is_padding});
    return m;
}

ForwardBatch to_forward_batch(const parallel::StepMessage& m) {
    ForwardBatch b;
    b.token_ids = m.token_ids;
    b.positions = m.positions;
    b.logits_rows = m.logits_rows;
    b.chunks.reserve(m.sequences.size());
    for (const parallel::StepSequence& s : m.sequences) {
        SequenceChunk c;
        c.seq_id = s.seq_id;
        c.slot = s.slot;
        c.start_pos = s.start_pos;
        c.num_tokens = s.num_tokens;
        c.token_offset = s.token_offset;
        c.block_table = s.block_table;
        c.restore_slot_from_block = s.restore_slot_from_block;
        c.reset_slot = s.reset_slot;
        c.is_padding = s.is_padding;
        b.chunks.push_back(std::move(c));
    }
    return b;
}

namespace {

core::Status apply_ops(ShardedLm& model, const std::vector<parallel::StepOp>& ops) {
    using parallel::StepOpKind;
    for (const parallel::StepOp& op : ops) {
        switch (op.kind) {
        case StepOpKind::kCopyBlock:
            model.copy_block(static_cast<int32_t>(op.a), static_cast<int32_t>(op.b));
            break;
        case StepOpKind::kCopySlot:
            model.copy_slot(static_cast<int32_t>(op.a), static_cast<int32_t>(op.b));
            break;
        case StepOpKind::kInitKvCache: {
            KvCacheSpec spec;
            spec.block_size = op.a;
            spec.num_blocks = op.b;
            spec.num_slots = static_cast<int32_t>(op.c);
            DI_RETURN_IF_ERROR(model.init_kv_cache(spec).with_context("follower init_kv_cache"));
            break;
        }
        case StepOpKind::kConfigureRuntime:
            DI_RETURN_IF_ERROR(model.configure_runtime({op.a, static_cast<int32_t>(op.b)})
                                   .with_context("follower configure_runtime"));
            break;
        }
    }
    return core::Status();
}

} // namespace

LeaderLm::~LeaderLm() {
    stop_keep_alive();
}

void LeaderLm::start_keep_alive() {
    if (keep_alive_thread_.joinable()) return;
    stop_ = false;
    keep_alive_thread_ = std::thread([this] {
        std::unique_lock<std::mutex> lock(mu_);
        while (!stop_) {
            cv_.wait_for(lock, channel_->deadline() / 6);
            if (stop_) break;
            core::Status s = channel_->keep_alive();
            if (!s.ok()) {
                keep_alive_status_ = failed(s.with_context("leader keep-alive"));
                break;
            }
        }
    });
}

void LeaderLm::stop_keep_alive() {
    if (!keep_alive_thread_.joinable()) return;
    {
        std::lock_guard<std::mutex> lock(mu_);
        stop_ = true;
    }
    cv_.notify_all();
    keep_alive_thread_.join();
}

core::Status LeaderLm::shutdown() {
    stop_keep_alive();
    return channel_->publish_shutdown();
}

core::Status LeaderLm::keep_alive() {
    std::lock_guard<std::mutex> lock(mu_);
    core::Status s = channel_->keep_alive();
    return s.ok() ? s : failed(std::move(s));
}

core::Status LeaderLm::failed(core::Status s) {
    if (!failure_reported_ && on_failure_) on_failure_(s);
    failure_reported_ = true;
    return s;
}

std::optional<parallel::ExpertLoadReport> LeaderLm::expert_load_report() const {
    std::lock_guard<std::mutex> lock(snapshot_mu_);
    return report_;
}

core::Status LeaderLm::publish(parallel::StepMessage m) {
    // Both broadcasts' payloads: the 8-byte length and the encoded message.
    auto bytes = parallel::encode_step_message(m);
    if (bytes.ok()) published_bytes_ += 8 + static_cast<int64_t>(bytes->size());
    return channel_->publish(std::move(m));
}

core::Status LeaderLm::init_kv_cache(const KvCacheSpec& spec) {
    std::lock_guard<std::mutex> lock(mu_);
    parallel::StepMessage m;
    m.kind = parallel::StepKind::kControl;
    m.ops = {{parallel::StepOpKind::kInitKvCache, spec.block_size, spec.num_blocks, spec.num_slots}};
    DI_RETURN_IF_ERROR(publish(std::move(m)));
    pending_.clear(); // copies into a dropped cache mean nothing
    return model_->init_kv_cache(spec);
}

core::Status LeaderLm::configure_runtime(const RuntimeSpec& spec) {
    std::lock_guard<std::mutex> lock(mu_);
    parallel::StepMessage m;
    m.kind = parallel::StepKind::kControl;
    m.ops = {{parallel::StepOpKind::kConfigureRuntime, spec.max_num_batched_tokens, spec.max_num_seqs, 0}};
    if (core::Status s = publish(std::move(m)); !s.ok()) return failed(std::move(s));
    core::Status s = model_->configure_runtime(spec);
    return s.ok() ? s : failed(std::move(s));
}

void LeaderLm::copy_block(int32_t src, int32_t dst) {
    std::lock_guard<std::mutex> lock(mu_);
    pending_.push_back({parallel::StepOpKind::kCopyBlock, src, dst, 0});
    model_->copy_block(src, dst);
}

void LeaderLm::copy_slot(int32_t src, int32_t dst) {
    std::lock_guard<std::mutex> lock(mu_);
    pending_.push_back({parallel::StepOpKind::kCopySlot, src, dst, 0});
    model_->copy_slot(src, dst);
}

core::Status LeaderLm::forward(const ForwardBatch& batch, float* logits) {
    std::lock_guard<std::mutex> lock(mu_);
    DI_RETURN_IF_ERROR(keep_alive_status_);
    parallel::StepMessage m = to_step_message(batch);
    m.ops = std::move(pending_);
    pending_.clear();
    // The followers run the same step: a failure here fails theirs too (or a rank is gone).
    if (core::Status s = publish(std::move(m)); !s.ok()) return failed(std::move(s));
    if (core::Status s = model_->forward(batch, logits); !s.ok()) return failed(std::move(s));
    if (core::Status s = model_->on_step(channel_->last_step()); !s.ok()) return failed(std::move(s));
    if (const parallel::ExpertLoadSnapshot* e = model_->expert_load(); e && e->step > 0) {
        std::lock_guard<std::mutex> snapshot_lock(snapshot_mu_);
        if (!report_) report_.emplace();
        report_->add(*e); // ignores a snapshot it has
    }
    return core::Status();
}

core::Status run_model_follower(ShardedLm& model, parallel::StepChannel& channel) {
    std::vector<float> logits;
    return parallel::run_follower(channel, [&](const parallel::StepMessage& m) -> core::Status {
        DI_RETURN_IF_ERROR(apply_ops(model, m.ops));
        if (m.kind != parallel::StepKind::kForward) return core::Status();
        const ForwardBatch batch = to_forward_batch(m);
        logits.resize(m.logits_rows.size() * static_cast<size_t>(model.vocab_size()));
        DI_RETURN_IF_ERROR(model.forward(batch, logits.data()));
        return model.on_step(m.step);
    });
}

} // namespace deepinfer::model::deepseek_v4
