#pragma once
// Per-step metrics for the server to publish (Prometheus gauges/counters) and for logs.

#include <cstdint>

namespace deepinfer::engine {

struct StepMetrics {
    int64_t step = 0;                // step number, from 1
    int32_t batch_size = 0;          // sequences in this step's forward
    int32_t num_prefill_tokens = 0;  // prompt (or recompute) tokens this step
    int32_t num_decode_tokens = 0;   // one per decoding sequence
    int32_t num_padding_tokens = 0;  // rows added to reach a static-shape bucket
    int32_t num_logits_rows = 0;     // rows the model produced logits for
    int64_t kv_blocks_used = 0;      // referenced by some sequence
    int64_t kv_blocks_cached = 0;    // unreferenced but kept for prefix hits (evictable)
    int64_t kv_blocks_total = 0;     // usable blocks in the pool (excludes scratch)
    int32_t num_preemptions = 0;     // sequences preempted while scheduling this step
    int64_t prefix_query_tokens = 0; // prompt tokens looked up in the prefix cache this step
    int64_t prefix_hit_tokens = 0;   // of which served from cache
    int32_t num_running = 0;         // after scheduling
    int32_t num_waiting = 0;         // queue depth after scheduling (includes preempted)
    int32_t num_finished = 0;        // completions finished this step
    double step_time_s = 0.0;        // wall time of step(), for monitoring only
};

// Totals since the engine started.
struct EngineCounters {
    int64_t steps = 0;
    int64_t prefill_tokens = 0;
    int64_t decode_tokens = 0;
    int64_t preemptions = 0;
    int64_t prefix_query_tokens = 0;
    int64_t prefix_hit_tokens = 0;
    int64_t requests_finished = 0;
    double prefix_hit_rate() const {
        return prefix_query_tokens ? double(prefix_hit_tokens) / double(prefix_query_tokens) : 0.0;
    }
};

} // namespace deepinfer::engine
