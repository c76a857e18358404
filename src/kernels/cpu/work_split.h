#pragma once
// Internal: how the CPU kernels hand a loop's work items to the pool's threads when the items stream weights
// from memory (the GEMV's row chunks, the MoE expert split's decode jobs).

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>

#include "core/thread_pool.h"

namespace deepinfer::kernels::cpu {

// Work items [0, items), in memory order, over the pool: thread p owns the p-th contiguous share and takes
// its items front to back, so each thread streams one run of consecutive rows (the hardware prefetcher and
// the GEMV's next-tile prefetch, which reaches into the rows after an item's end, see one sequential stream
// per thread instead of a restart at every claim, and no line a thread prefetched is then read by the other
// core); a thread whose share is done takes the other shares' items from their back ends, one at a time, so
// a slower or descheduled vCPU (or a worker still waking) holds the loop up by at most one item. fn(k, slot)
// on the thread that took item k; slot in [0, threads) is that thread's for the whole call (no two threads
// run with the same slot at once: per-thread scratch can be indexed by it). Which rows go together never
// changes a result: every row is computed by the same tile code whatever the split.
//
// Before, one counter handed out chunks in turn (guided: shrinking, each thread's chunks interleaved with
// the other's). On the 2-vCPU Zen 4, a BF16 GEMV of 1024 columns called weight after weight (1 MiB each, 512
// rows) streamed 23.9, 26.3, 27.4 GB/s that way and 32.1, 27.7, 27.5 this way, interleaved; each thread
// taking a fixed half, the bound this split keeps while it can still rebalance, streamed 27.6-28.7 against
// the counter's 26.4-27.6, and 40.7 against 30.9 in the machine's faster state (docs/benchmarks.md, session
// 15).
constexpr int64_t kMaxShares = 64; // pools with more threads fall back to one shared counter

// Items [0, items) from one shared counter, in order, each to whichever thread asks next: fn(k, slot) as
// owner_first_items calls it. For compute-bound items handed out largest first (the MoE expert split's
// prefill jobs), where the order, not the memory streams, keeps the threads' finishing times together.
template <class Fn> void counter_items(core::ThreadPool* pool, int64_t items, const Fn& fn) {
    std::atomic<int64_t> next{0};
    auto run = [&](int64_t b, int64_t e) {
        for (int64_t slot = b; slot < e; ++slot) // one chunk of [0, threads) per thread: its slot
            for (int64_t k = next.fetch_add(1, std::memory_order_relaxed); k < items;
                 k = next.fetch_add(1, std::memory_order_relaxed))
                fn(k, slot);
    };
    pool->parallel_for(pool->num_threads(), std::ref(run));
}

template <class Fn> void owner_first_items(core::ThreadPool* pool, int64_t items, const Fn& fn) {
    const int64_t threads = pool->num_threads();
    if (threads > kMaxShares) {
        counter_items(pool, items, fn);
        return;
    }
    // share[p]: [front : 32 | back : 32], the items [front, back) of share p nobody has taken yet.
    std::array<std::atomic<uint64_t>, kMaxShares> share;
    for (int64_t p = 0; p < threads; ++p)
        share[p].store(static_cast<uint64_t>(p * items / threads) << 32 |
                           static_cast<uint64_t>((p + 1) * items / threads),
                       std::memory_order_relaxed);
    // The next item of share p from its front (owner) or back (others), -1 when it is empty.
    auto take = [&](int64_t p, bool front) -> int64_t {
        uint64_t v = share[p].load(std::memory_order_relaxed);
        for (;;) {
            const uint64_t f = v >> 32, b = v & 0xffffffffu;
            if (f >= b) return -1;
            const uint64_t next = front ? (f + 1) << 32 | b : f << 32 | (b - 1);
            if (share[p].compare_exchange_weak(v, next, std::memory_order_relaxed))
                return static_cast<int64_t>(front ? f : b - 1);
        }
    };
    auto run = [&](int64_t b, int64_t e) {
        for (int64_t p = b; p < e; ++p) { // one index per share: the thread that claims it owns it
            for (int64_t k = take(p, true); k >= 0; k = take(p, true)) fn(k, p);
            for (int64_t q = 1; q < threads; ++q) {
                const int64_t victim = (p + q) % threads;
                for (int64_t k = take(victim, false); k >= 0; k = take(victim, false)) fn(k, p);
            }
        }
    };
    pool->parallel_for(threads, std::ref(run));
}

} // namespace deepinfer::kernels::cpu
