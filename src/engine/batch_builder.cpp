#include "engine/batch_builder.h"

#include "core/check.h"
#include "engine/admission.h"
#include "engine/request_state.h"

namespace deepinfer::engine {

int32_t bucket_for(int32_t num_tokens, const std::vector<int32_t>& buckets) {
    for (int32_t b : buckets)
        if (b >= num_tokens) return b;
    return num_tokens;
}

BuiltBatch build_forward_batch(const SchedulerOutput& sched, const BlockManager& blocks,
                               const std::vector<int32_t>& token_buckets) {
    BuiltBatch out;
    model::ForwardBatch& fb = out.batch;
    for (const ScheduledChunk& sc : sched.chunks) {
        Sequence* seq = sc.seq;
        model::SequenceChunk c;
        c.seq_id = seq->seq_id;
        c.slot = seq->slot;
        c.start_pos = seq->num_computed;
        c.num_tokens = sc.num_tokens;
        c.token_offset = static_cast<int32_t>(fb.token_ids.size());
        int64_t end = c.start_pos + c.num_tokens;
        DI_CHECK_LE(end, seq->num_tokens());
        int64_t nblocks = blocks_for_tokens(end, blocks.block_size());
        DI_CHECK_LE(nblocks, static_cast<int64_t>(seq->block_table.size()));
        c.block_table.assign(seq->block_table.begin(), seq->block_table.begin() + nblocks);
        for (int64_t b = c.start_pos / blocks.block_size(); b < nblocks; ++b) // written blocks are private
            DI_CHECK(blocks.refcount(c.block_table[b]) == 1 && !blocks.is_hashed(c.block_table[b]))
                << "seq " << seq->seq_id << " writes shared or cached block " << c.block_table[b];
        c.reset_slot = seq->slot_fresh;
        c.restore_slot_from_block = seq->slot_fresh && seq->restore_from_block;
        for (int64_t p = c.start_pos; p < end; ++p) {
            int32_t row = static_cast<int32_t>(fb.token_ids.size());
            fb.token_ids.push_back(seq->tokens[p]);
            fb.positions.push_back(p);
            bool sample = p == seq->num_tokens() - 1;
            if (sample || seq->request->needs_prompt_row(*seq, p)) {
                fb.logits_rows.push_back(row);
                out.rows.push_back({seq, p, sample});
            }
        }
        fb.chunks.push_back(std::move(c));
    }
    int32_t real = static_cast<int32_t>(fb.token_ids.size());
    int32_t padded = bucket_for(real, token_buckets);
    if (padded > real) {
        model::SequenceChunk pad;
        pad.seq_id = -1;
        pad.slot = blocks.scratch_slot();
        pad.start_pos = 0;
        pad.num_tokens = padded - real;
        pad.token_offset = real;
        pad.block_table.assign(blocks_for_tokens(pad.num_tokens, blocks.block_size()),
                               blocks.scratch_block());
        pad.reset_slot = true;
        pad.is_padding = true;
        for (int32_t i = 0; i < pad.num_tokens; ++i) {
            fb.token_ids.push_back(0);
            fb.positions.push_back(i);
        }
        fb.chunks.push_back(std::move(pad));
        out.num_padding = padded - real;
    }
    return out;
}

} // namespace deepinfer::engine
