#pragma once
// One completion being generated: its tokens (prompt + output), how many of them are in the KV cache, its
// blocks and slot. A request with n > 1 owns n sequences. Internal to the engine.

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "engine/logits_constraint.h"
#include "engine/request.h"

namespace deepinfer::engine {

struct RequestState;

enum class SequenceStatus : uint8_t {
    kWaiting,   // never scheduled yet
    kRunning,   // holds a slot and blocks
    kPreempted, // blocks and slot freed; recomputes prompt + outputs when readmitted
    kFinished,
};

struct Sequence {
    int64_t seq_id = 0; // engine-wide, increasing
    RequestState* request = nullptr;
    int32_t sample_index = 0;    // which of the request's n completions
    std::vector<int32_t> tokens; // prompt followed by outputs
    int32_t prompt_len = 0;
    SequenceStatus status = SequenceStatus::kWaiting;

    // KV state.
    int64_t num_computed = 0;           // leading tokens whose KV is stored
    std::vector<int32_t> block_table;   // logical block -> physical block
    std::vector<uint64_t> block_hashes; // content hashes of the leading full, computed blocks
    int32_t slot = -1;
    bool slot_fresh = false;         // next chunk must reset (or restore) the slot first
    bool restore_from_block = false; // ... from the snapshot of block_table[num_computed / B - 1]

    std::optional<FinishReason> finish_reason;
    std::optional<int32_t> stop_token_id;
    int32_t num_preemptions = 0;
    int32_t num_emitted = 0; // output tokens already returned to the caller
    bool finish_reported = false;
    std::unique_ptr<LogitsConstraint> constraint; // this sequence's structured-output state, if any

    int32_t num_tokens() const { return static_cast<int32_t>(tokens.size()); }
    int32_t num_output() const { return num_tokens() - prompt_len; }
    int64_t num_uncomputed() const { return num_tokens() - num_computed; }
    // A decode: one token left to feed, which the last step sampled.
    bool is_decode() const { return num_uncomputed() == 1 && num_output() > 0; }
    bool is_finished() const { return status == SequenceStatus::kFinished; }
};

} // namespace deepinfer::engine
