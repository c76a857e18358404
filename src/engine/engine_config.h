#pragma once
// Engine configuration; cli/ fills it from flags (--block-size, --num-kv-blocks, --kv-cache-memory,
// --max-num-seqs, --max-num-batched-tokens, --no-prefix-caching, --max-model-len).

#include <cstdint>
#include <vector>

namespace deepinfer::engine {

struct EngineConfig {
    int32_t block_size = 256;              // positions per logical KV block
    int64_t num_kv_blocks = 0;             // usable blocks; 0 = size the pool from kv_cache_memory_bytes
    int64_t kv_cache_memory_bytes = 0;     // budget for blocks + slots (scratch included)
    int32_t max_num_seqs = 64;             // running sequences (= per-sequence state slots)
    int32_t max_num_batched_tokens = 2048; // tokens per step (decodes + prefill chunks)
    bool enable_prefix_caching = true;
    int64_t max_model_len = 0; // 0 = the model's max position
    // Static shapes: when non-empty (ascending), every step's token count is padded up to the smallest
    // bucket that holds it. Padding rows go to the scratch block and slot and are never real tokens.
    std::vector<int32_t> token_buckets;
    uint64_t default_seed = 0x5eedULL; // keys the random streams of requests without a seed
    int32_t max_logprobs = 20;         // cap on logprobs / prompt_logprobs
    int32_t num_threads = 0;           // the engine's compute pool (0 = the hardware's concurrency)
};

} // namespace deepinfer::engine
