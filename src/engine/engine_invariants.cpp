#include <sstream>

#include "engine/engine_impl.h"

namespace deepinfer::engine {

std::string LLMEngine::check_invariants() const {
    const Impl& e = *impl_;
    std::ostringstream err;
    std::vector<int32_t> refs(e.blocks_.num_blocks(), 0);
    int32_t slots = 0;
    std::vector<bool> slot_used(e.config_.max_num_seqs, false);
    for (const auto& [id, r] : e.requests_) {
        for (const auto& seq : r->seqs) {
            for (int32_t b : seq->block_table) ++refs[b];
            bool running = seq->status == SequenceStatus::kRunning;
            if (running != (seq->slot >= 0)) err << "seq " << seq->seq_id << " slot/status mismatch; ";
            if (seq->slot >= 0) {
                ++slots;
                if (slot_used[seq->slot]) err << "slot " << seq->slot << " shared; ";
                slot_used[seq->slot] = true;
            }
            if (!running && !seq->block_table.empty()) err << "seq " << seq->seq_id << " holds blocks idle; ";
            if (running && int64_t(seq->block_table.size()) * e.config_.block_size < seq->num_computed)
                err << "seq " << seq->seq_id << " computed past its blocks; ";
        }
    }
    err << e.blocks_.check_invariants(refs, slots);
    int64_t live_running = e.scheduler_.running().size();
    if (live_running > e.scheduler_.max_running()) err << "running " << live_running << " over the cap; ";
    const StepMetrics& m = e.metrics_;
    if (m.num_prefill_tokens + m.num_decode_tokens > e.config_.max_num_batched_tokens)
        err << "step used " << m.num_prefill_tokens + m.num_decode_tokens << " tokens over the budget; ";
    if (m.batch_size > e.config_.max_num_seqs) err << "batch of " << m.batch_size << " over max_num_seqs; ";
    return err.str();
}

} // namespace deepinfer::engine
