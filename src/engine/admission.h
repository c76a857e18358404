#pragma once
// Admission: does a sequence's next chunk fit in the KV pool? Pure arithmetic over a Sequence and the
// BlockManager's counts, kept apart from step packing (step_budget.h) so each is tested on its own.

#include <cstdint>
#include <optional>

#include "core/status.h"
#include "engine/block_manager.h"
#include "engine/engine_config.h"
#include "engine/sequence.h"
#include "model/forward_batch.h"

namespace deepinfer::engine {

inline int64_t blocks_for_tokens(int64_t num_tokens, int32_t block_size) {
    return (num_tokens + block_size - 1) / block_size;
}

// Blocks a sequence holding KV for its first num_computed tokens needs to store `num_new` more: the blocks
// past its table, plus one copy-on-write block when the first written block is shared (n > 1 forks).
int32_t blocks_to_extend(const Sequence& seq, int64_t num_new, const BlockManager& bm);

// Whether a waiting sequence can start with a prefix match of `match_blocks` blocks (`match_evictable` of
// them cached with refcount 0, so taking them removes them from the available count) and a first chunk
// ending at `chunk_end` tokens, keeping `reserve_blocks` for the running sequences' growth.
bool can_admit(int64_t chunk_end, int32_t match_blocks, int32_t match_evictable, int32_t reserve_blocks,
               const BlockManager& bm);

// The longest prefix hit allowed for a sequence of num_tokens tokens: whole blocks, and at least one token
// left to compute (its logits give the next token).
inline int32_t max_prefix_blocks(int64_t num_tokens, int32_t block_size) {
    return num_tokens <= 0 ? 0 : static_cast<int32_t>((num_tokens - 1) / block_size);
}

// A request whose prompt plus max_tokens cannot be held even by an empty pool is rejected up front
// (ResourceExhausted), with the numbers, rather than preempting forever.
core::Status check_fits_in_empty_pool(int64_t prompt_len, int64_t max_tokens, int64_t num_blocks,
                                      int32_t block_size);

// The most usable KV blocks a pool of num_slots slots can have within `budget` bytes on every rank
// (model::kv_pool_bytes: under context parallelism a rank stores about 1/cp of each block, so the same
// budget holds about cp times more blocks); 0 when not even one fits. Block ids are global (one id space
// for the CP group), so admission counts them as for one process.
int64_t kv_blocks_for_memory(const model::KvGeometry& geo, int64_t budget, int64_t num_slots);

// The max_tokens a request of prompt_len tokens runs with under a resolved config (num_kv_blocks and
// max_model_len filled in): the one it asked for, or unset, as many as the model length and the pool allow
// (the last token needs no KV). Errors, with the numbers: OutOfRange (the prompt, or prompt + max_tokens,
// exceeds max_model_len), ResourceExhausted (it cannot fit even in an empty pool). add_request applies it;
// the server calls it too, so that such a request is refused before its response starts.
core::Result<int64_t> resolve_max_tokens(int64_t prompt_len, std::optional<int64_t> max_tokens,
                                         const EngineConfig& config);

} // namespace deepinfer::engine
