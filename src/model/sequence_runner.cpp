#include "model/sequence_runner.h"

#include <algorithm>

#include "kernels/ops.h"

namespace deepinfer::model {

ForwardBatch SequenceRunner::next_batch(const std::vector<int32_t>& ids, bool all_logits) const {
    ForwardBatch b;
    b.token_ids = ids;
    const int32_t n = static_cast<int32_t>(ids.size());
    for (int32_t i = 0; i < n; ++i) b.positions.push_back(pos_ + i);
    SequenceChunk ch;
    ch.seq_id = seq_id_;
    ch.slot = slot_;
    ch.start_pos = pos_;
    ch.num_tokens = n;
    ch.token_offset = 0;
    ch.block_table = blocks_;
    ch.reset_slot = pos_ == 0;
    b.chunks.push_back(ch);
    if (all_logits) {
        for (int32_t i = 0; i < n; ++i) b.logits_rows.push_back(i);
    } else if (n > 0) {
        b.logits_rows.push_back(n - 1);
    }
    return b;
}

core::Status SequenceRunner::feed(const std::vector<int32_t>& ids, int64_t chunk, bool all_logits,
                                  std::vector<float>* logits) {
    const int64_t V = lm_->vocab_size(), total = static_cast<int64_t>(ids.size());
    if (chunk <= 0) chunk = std::max<int64_t>(total, 1);
    logits->assign(all_logits ? total * V : V, 0.0f);
    for (int64_t s = 0; s < total; s += chunk) {
        const int64_t n = std::min(chunk, total - s);
        const std::vector<int32_t> part(ids.begin() + s, ids.begin() + s + n);
        ForwardBatch b = next_batch(part, all_logits);
        std::vector<float> out(b.logits_rows.size() * V);
        DI_RETURN_IF_ERROR(lm_->forward(b, out.data()));
        if (all_logits)
            std::copy(out.begin(), out.end(), logits->begin() + s * V);
        else if (s + n == total)
            std::copy(out.end() - V, out.end(), logits->begin());
        pos_ += n;
    }
    return core::Status();
}

int32_t argmax(const float* logits, int64_t n) {
    return kernels::argmax(logits, n);
}

} // namespace deepinfer::model
