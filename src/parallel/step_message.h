#pragma once
// StepMessage: what the leader (rank 0) tells every follower about one engine step, and its wire format.
// Followers run the same forward on their shard and skip the sampler; only the leader samples.
//
// It mirrors model::ForwardBatch field for field (this module sits below model/, so the engine converts
// one into the other): a follower rebuilds exactly the batch the leader runs.
//
// Wire format, version 2 (all integers little-endian; the encoder and decoder are the spec):
//   u32 magic 'DIS1' (0x31534944)   u16 version   u8 kind   u8 reserved (0)
//   u64 step
//   u32 n_tokens   u32 n_sequences   u32 n_logits_rows
//   i32 token_ids[n_tokens]   i64 positions[n_tokens]
//   n_sequences x { i64 seq_id  i32 slot  i64 start_pos  i32 num_tokens  i32 token_offset
//                   u8 flags (bit 0 restore_slot_from_block, bit 1 reset_slot, bit 2 is_padding; others 0)
//                   u32 n_blocks  i32 blocks[n_blocks] }
//   i32 logits_rows[n_logits_rows]
//   u32 n_ops   n_ops x { u8 kind  i64 a  i64 b  i64 c }          (version 2: KV/runtime operations)
//   u64 FNV-1a 64 of every byte before it
// A decoder rejects (DataLoss naming the field and byte offset) anything truncated, oversized, with
// trailing bytes, a bad checksum, or contents that contradict each other; an unknown version is
// FailedPrecondition naming both versions (ranks built from different sources).

#include "core/status.h"

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace deepinfer::parallel {

using core::Result;
using core::Status;

inline constexpr std::uint16_t kStepMessageVersion = 2;

enum class StepKind : std::uint8_t {
    kForward = 0,  // run the forward described
    kIdle = 1,     // keep-alive while the leader has no work (followers' receive has a deadline too)
    kShutdown = 2, // leave the follower loop cleanly
    kControl = 3,  // apply the ops only (KV cache set-up), no forward
};

// What the engine asks of the model outside a forward, replayed on every follower in the leader's order
// before the step's forward (a follower's KV state must stay the leader's, block for block).
enum class StepOpKind : std::uint8_t {
    kCopyBlock = 0,        // a = src block, b = dst block
    kCopySlot = 1,         // a = src slot, b = dst slot
    kInitKvCache = 2,      // a = block_size, b = num_blocks, c = num_slots
    kConfigureRuntime = 3, // a = max_num_batched_tokens, b = max_num_seqs
};

struct StepOp {
    StepOpKind kind = StepOpKind::kCopyBlock;
    std::int64_t a = 0, b = 0, c = 0; // non-negative
    bool operator==(const StepOp&) const = default;
};

struct StepSequence {
    std::int64_t seq_id = 0;
    std::int32_t slot = 0;         // the sequence's state slot
    std::int64_t start_pos = 0;    // tokens of this sequence already in the KV state
    std::int32_t num_tokens = 0;   // new tokens this step
    std::int32_t token_offset = 0; // first row in token_ids: chunks are contiguous, in order
    std::vector<std::int32_t> block_table;
    bool restore_slot_from_block = false;
    bool reset_slot = false;
    bool is_padding = false;
    bool operator==(const StepSequence&) const = default;
};

struct StepMessage {
    std::uint64_t step = 0; // leader's step counter: followers check it advances by one
    StepKind kind = StepKind::kForward;
    std::vector<std::int32_t> token_ids;   // [n_tokens]
    std::vector<std::int64_t> positions;   // [n_tokens] absolute positions
    std::vector<StepSequence> sequences;   // token_offset = sum of the previous num_tokens; total = n_tokens
    std::vector<std::int32_t> logits_rows; // rows of token_ids whose logits are wanted, each < n_tokens
    std::vector<StepOp> ops;               // applied in order before the forward (kForward, kControl)
    bool operator==(const StepMessage&) const = default;
};

// Validates the message (the same content checks as decode) and serializes it.
Result<std::vector<std::byte>> encode_step_message(const StepMessage& m);
Result<StepMessage> decode_step_message(std::span<const std::byte> bytes);

// FNV-1a 64: checksums here and the handshake's fingerprints.
std::uint64_t fnv1a64(std::span<const std::byte> bytes, std::uint64_t seed = 0xcbf29ce484222325ull);

} // namespace deepinfer::parallel
