#include "engine/admission.h"

#include <algorithm>
#include <climits>
#include <string>

namespace deepinfer::engine {

int32_t blocks_to_extend(const Sequence& seq, int64_t num_new, const BlockManager& bm) {
    const int32_t bs = bm.block_size();
    int64_t have = static_cast<int64_t>(seq.block_table.size());
    int64_t need = blocks_for_tokens(seq.num_computed + num_new, bs) - have;
    if (need < 0) need = 0;
    int64_t first = seq.num_computed / bs; // block receiving the first new position
    if (num_new > 0 && first < have && bm.refcount(seq.block_table[first]) > 1) ++need;
    return static_cast<int32_t>(need);
}

bool can_admit(int64_t chunk_end, int32_t match_blocks, int32_t match_evictable, int32_t reserve_blocks,
               const BlockManager& bm) {
    int64_t new_blocks = blocks_for_tokens(chunk_end, bm.block_size()) - match_blocks;
    int64_t available = bm.num_available_blocks() - match_evictable;
    return bm.num_free_slots() > 0 && available - reserve_blocks >= new_blocks;
}

int64_t kv_blocks_for_memory(const model::KvGeometry& geo, int64_t budget, int64_t num_slots) {
    if (geo.bytes_per_block <= 0 || budget <= 0) return 0;
    // kv_pool_bytes grows with the block count: the largest count within the budget, by bisection.
    if (model::kv_pool_bytes(geo, 1, num_slots) > budget) return 0;
    const int64_t cp = std::max<int64_t>(1, geo.cp_size); // a block costs a rank at least 1/cp byte
    int64_t lo = 1, hi = budget >= INT32_MAX / cp ? int64_t{INT32_MAX} : budget * cp;
    while (lo < hi) {
        const int64_t mid = lo + (hi - lo + 1) / 2;
        if (model::kv_pool_bytes(geo, mid, num_slots) <= budget)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

core::Status check_fits_in_empty_pool(int64_t prompt_len, int64_t max_tokens, int64_t num_blocks,
                                      int32_t block_size) {
    // The last sampled token never enters the KV cache.
    int64_t kv_tokens = prompt_len + max_tokens - 1;
    int64_t need = blocks_for_tokens(kv_tokens, block_size);
    if (need <= num_blocks) return {};
    return core::resource_exhausted(
        "request needs " + std::to_string(need) + " KV blocks of " + std::to_string(block_size) +
        " positions (prompt " + std::to_string(prompt_len) + " + max_tokens " + std::to_string(max_tokens) +
        "), but the whole pool has " + std::to_string(num_blocks) +
        "; lower max_tokens or raise --kv-cache-memory / --num-kv-blocks");
}

core::Result<int64_t> resolve_max_tokens(int64_t prompt_len, std::optional<int64_t> max_tokens,
                                         const EngineConfig& config) {
    if (prompt_len >= config.max_model_len)
        return core::out_of_range("prompt of " + std::to_string(prompt_len) +
                                  " tokens leaves no room under the max model length " +
                                  std::to_string(config.max_model_len));
    const int64_t pool_len = config.num_kv_blocks * config.block_size + 1;
    int64_t resolved =
        max_tokens.value_or(std::max<int64_t>(1, std::min(config.max_model_len, pool_len) - prompt_len));
    if (prompt_len + resolved > config.max_model_len)
        return core::out_of_range("prompt " + std::to_string(prompt_len) + " + max_tokens " +
                                  std::to_string(resolved) + " exceeds the max model length " +
                                  std::to_string(config.max_model_len));
    DI_RETURN_IF_ERROR(
        check_fits_in_empty_pool(prompt_len, resolved, config.num_kv_blocks, config.block_size));
    return resolved;
}

} // namespace deepinfer::engine
