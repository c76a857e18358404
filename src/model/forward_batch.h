#pragma once
// The contract between the engine and a model family's forward pass: what runs this step, where its KV
// state lives, and which rows need logits. Everything shape-like here is explicit so a static-shape
// backend can pad it to buckets (padding rows carry is_padding and point at the scratch block and slot).
//
// KV model (docs/kv-cache.md): state is split in two kinds of storage.
//  * Blocks: a fixed pool of logical blocks of `block_size` positions (a multiple of every compression
//    ratio, so a block boundary is a window boundary for every compressor). Block b of a sequence holds,
//    for every layer, the raw kv rows of its positions, the compressed entries / indexer keys whose
//    windows start inside it, and a boundary snapshot (CSA overlap state at the block's end) that makes a
//    prefix-cache hit exact. Blocks are shareable (prefix caching) and refcounted by the engine.
//  * Slots: one per running sequence, holding the bounded per-sequence state that is not shareable: the
//    compressors' buffers of the incomplete window and the live overlap state.
// Physical block `kScratchBlock`-style ids are never handed out: the model reserves the last block and the
// last slot as scratch for padding rows.

#include <cstdint>
#include <vector>

namespace deepinfer::model {

struct KvGeometry {
    int64_t block_size = 0;      // positions per logical block
    int64_t bytes_per_block = 0; // all layers
    int64_t bytes_per_slot = 0;  // bounded per-sequence state, all layers
    int64_t max_position = 0;    // longest supported sequence
    // Context parallelism (docs/parallelism.md): of bytes_per_block, the bytes only block g's owner (CP
    // rank g % cp_size) stores; a CP rank also keeps one trash block of them. 0 / 1 without CP.
    int64_t split_bytes_per_block = 0;
    int64_t cp_size = 1;
};

// Bytes of KV state the most loaded rank holds for a pool of num_blocks usable blocks and num_slots slots
// (the model adds one scratch block and one scratch slot): under CP, rank 0 stores the split part of
// ceil((num_blocks + 1) / cp) blocks plus its trash block, and the rest of every block.
inline int64_t kv_pool_bytes(const KvGeometry& g, int64_t num_blocks, int64_t num_slots) {
    const int64_t blocks = num_blocks + 1, whole = g.bytes_per_block - g.split_bytes_per_block;
    const int64_t split_blocks = g.cp_size > 1 ? (blocks + g.cp_size - 1) / g.cp_size + 1 : blocks;
    return blocks * whole + split_blocks * g.split_bytes_per_block + (num_slots + 1) * g.bytes_per_slot;
}

struct SequenceChunk {
    int64_t seq_id = 0;               // stable id, for probes and debugging only
    int32_t slot = 0;                 // per-sequence state slot
    int64_t start_pos = 0;            // tokens of this sequence already in the KV state
    int32_t num_tokens = 0;           // new tokens this step (a prompt chunk, or 1 for decode)
    int32_t token_offset = 0;         // first row of this chunk in ForwardBatch::token_ids
    std::vector<int32_t> block_table; // logical block i -> physical block; covers start_pos + num_tokens
    // Prefix-cache hit: the slot is fresh and start_pos == k * block_size > 0; before running, restore the
    // slot's carried state from the boundary snapshot of block_table[k - 1].
    bool restore_slot_from_block = false;
    // A fresh sequence (start_pos == 0, or a prefix hit): clear the slot first.
    bool reset_slot = false;
    bool is_padding = false; // padding rows: KV written to scratch, masked, never routed to experts
};

struct ForwardBatch {
    std::vector<int32_t> token_ids; // [T] all chunks' new tokens, concatenated in `chunks` order
    std::vector<int64_t> positions; // [T] absolute positions
    std::vector<SequenceChunk> chunks;
    std::vector<int32_t> logits_rows; // rows of [T] whose logits are wanted, in output order

    int64_t num_tokens() const { return static_cast<int64_t>(token_ids.size()); }
};

} // namespace deepinfer::model
