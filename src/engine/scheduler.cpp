#include "engine/scheduler.h"

#include <algorithm>

#include "core/check.h"
#include "engine/admission.h"
#include "engine/request_state.h"
#include "engine/step_budget.h"

namespace deepinfer::engine {

Scheduler::Scheduler(const SchedulerConfig& config, BlockManager* blocks)
    : config_(config), blocks_(blocks),
      // Every running sequence must be able to decode in the same step, with one token left for prefills.
      max_running_(std::min(config.max_num_seqs, config.max_num_batched_tokens)) {
    DI_CHECK(config.max_num_seqs > 0 && config.max_num_batched_tokens > 0);
}

void Scheduler::add_waiting(Sequence* seq, bool front) {
    if (front) {
        waiting_.push_front(seq);
    } else {
        waiting_.push_back(seq);
    }
}

void Scheduler::release_kv(Sequence* seq) {
    // Tail blocks first: they become the least recently used cached blocks, evicted before the prefix.
    for (auto it = seq->block_table.rbegin(); it != seq->block_table.rend(); ++it) blocks_->release(*it);
    seq->block_table.clear();
    seq->block_hashes.clear();
    seq->num_computed = 0;
    if (seq->slot >= 0) blocks_->free_slot(seq->slot);
    seq->slot = -1;
    seq->slot_fresh = false;
    seq->restore_from_block = false;
}

void Scheduler::preempt(Sequence* seq, SchedulerOutput* out) {
    release_kv(seq);
    seq->status = SequenceStatus::kPreempted;
    ++seq->num_preemptions;
    running_.erase(std::find(running_.begin(), running_.end(), seq));
    waiting_.push_front(seq);
    out->preempted.push_back(seq);
}

void Scheduler::extend(Sequence* seq, int32_t num_new, SchedulerOutput* out) {
    const int32_t bs = blocks_->block_size();
    size_t first = static_cast<size_t>(seq->num_computed / bs);
    if (first < seq->block_table.size() && blocks_->refcount(seq->block_table[first]) > 1) {
        int32_t src = seq->block_table[first];
        DI_CHECK(!blocks_->is_hashed(src)) << "writing into a full cached block " << src;
        auto dst = blocks_->allocate();
        DI_CHECK(dst.has_value());
        out->block_copies.emplace_back(src, *dst);
        blocks_->release(src);
        seq->block_table[first] = *dst;
    }
    int64_t need = blocks_for_tokens(seq->num_computed + num_new, bs);
    while (static_cast<int64_t>(seq->block_table.size()) < need) {
        auto b = blocks_->allocate();
        DI_CHECK(b.has_value());
        seq->block_table.push_back(*b);
    }
}

bool Scheduler::try_admit(Sequence* seq, StepBudget* budget, SchedulerOutput* out) {
    const int32_t bs = blocks_->block_size();
    PrefixMatch match;
    if (!seq->request->wants_prompt_logprobs()) // prompt logprobs need every prompt row computed
        match = blocks_->match_prefix(seq->tokens, max_prefix_blocks(seq->num_tokens(), bs));
    int32_t hit_blocks = static_cast<int32_t>(match.blocks.size());
    int64_t start = int64_t(hit_blocks) * bs;
    int32_t n = budget->peek(seq->num_tokens() - start);
    if (n == 0) return false;
    int32_t reserve = running_.empty() ? 0 : config_.watermark_blocks;
    if (!can_admit(start + n, hit_blocks, match.num_evictable, reserve, *blocks_)) return false;

    auto slot = blocks_->allocate_slot();
    DI_CHECK(slot.has_value());
    seq->slot = *slot;
    seq->slot_fresh = true;
    seq->restore_from_block = start > 0;
    for (int32_t b : match.blocks) blocks_->acquire(b);
    seq->block_table = match.blocks;
    seq->block_hashes = match.hashes;
    seq->num_computed = start;
    extend(seq, n, out);
    if (blocks_->prefix_caching()) {
        blocks_->count_query(seq->num_tokens(), start);
        out->prefix_query_tokens += seq->num_tokens();
        out->prefix_hit_tokens += start;
    }
    seq->request->on_admitted(*seq, start);
    seq->status = SequenceStatus::kRunning;
    running_.push_back(seq);
    budget->commit(n);
    out->chunks.push_back({seq, n});
    out->num_prefill_tokens += n;
    return true;
}

SchedulerOutput Scheduler::schedule() {
    SchedulerOutput out;
    StepBudget budget(config_.max_num_batched_tokens, max_running_);
    std::vector<Sequence*> scheduled;
    for (Sequence* seq : packing_order(running_)) {
        if (seq->status != SequenceStatus::kRunning) continue; // preempted earlier in this loop
        bool decode = seq->is_decode();
        int32_t n = budget.peek(seq->num_uncomputed());
        if (n == 0) continue;
        while (blocks_to_extend(*seq, n, *blocks_) > blocks_->num_available_blocks()) {
            Sequence* victim = nullptr;
            for (auto it = running_.rbegin(); it != running_.rend(); ++it) {
                if (*it != seq && std::find(scheduled.begin(), scheduled.end(), *it) == scheduled.end()) {
                    victim = *it;
                    break;
                }
            }
            if (!victim) break;
            preempt(victim, &out);
        }
        if (blocks_to_extend(*seq, n, *blocks_) > blocks_->num_available_blocks()) {
            preempt(seq, &out);
            continue;
        }
        extend(seq, n, &out);
        budget.commit(n);
        scheduled.push_back(seq);
        out.chunks.push_back({seq, n});
        (decode ? out.num_decode_tokens : out.num_prefill_tokens) += n;
    }
    if (out.preempted.empty()) {
        while (!waiting_.empty() && static_cast<int32_t>(running_.size()) < max_running_) {
            Sequence* seq = waiting_.front();
            if (!try_admit(seq, &budget, &out)) break;
            waiting_.pop_front();
        }
    }
    return out;
}

void Scheduler::on_computed(Sequence* seq, int32_t num_tokens) {
    const int32_t bs = blocks_->block_size();
    seq->num_computed += num_tokens;
    DI_CHECK_LE(seq->num_computed, seq->num_tokens());
    seq->slot_fresh = false;
    seq->restore_from_block = false;
    while (static_cast<int64_t>(seq->block_hashes.size() + 1) * bs <= seq->num_computed) {
        size_t i = seq->block_hashes.size();
        uint64_t parent = i == 0 ? 0 : seq->block_hashes.back();
        uint64_t h = hash_block(parent, std::span<const int32_t>(seq->tokens).subspan(i * bs, bs));
        blocks_->register_block(seq->block_table[i], h);
        seq->block_hashes.push_back(h);
    }
}

void Scheduler::remove(Sequence* seq) {
    release_kv(seq);
    if (auto it = std::find(running_.begin(), running_.end(), seq); it != running_.end()) running_.erase(it);
    if (auto it = std::find(waiting_.begin(), waiting_.end(), seq); it != waiting_.end()) waiting_.erase(it);
}

bool Scheduler::fork(const Sequence& parent, Sequence* child) {
    if (static_cast<int32_t>(running_.size()) >= max_running_) return false;
    auto slot = blocks_->allocate_slot();
    if (!slot) return false;
    child->slot = *slot;
    child->slot_fresh = false;
    child->restore_from_block = false;
    child->block_table = parent.block_table;
    child->block_hashes = parent.block_hashes;
    for (int32_t b : child->block_table) blocks_->acquire(b);
    child->num_computed = parent.num_computed;
    child->status = SequenceStatus::kRunning;
    running_.push_back(child);
    return true;
}

} // namespace deepinfer::engine
