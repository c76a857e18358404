#pragma once
// A fixed pool of worker threads for data-parallel loops in kernels. parallel_for splits [0, n) into
// contiguous chunks, one per thread, and returns when all are done. Chunks are claimed, not assigned: the
// caller runs every chunk no worker has picked up by the time it finished its own, so a descheduled
// worker never stalls a loop.
//
// A decode step is hundreds of small parallel loops (one per matmul, ~30 us of weights each on a small
// model), so the hand-off is a spin, not a condition-variable round trip: a worker that finished a loop
// watches an atomic generation counter for a while (up to spin_us, 100 us) before it sleeps, and the
// caller watches the pending count the same way. Only a worker that has gone to sleep costs the caller a
// notify (a futex wake); a caller that waits longer than the spin sleeps too. The spin adapts
// (adapted_spin_us; pause-only: no yield), so on an oversubscribed machine, where the other thread is
// often descheduled or queued on the same core, the pool falls back to sleeping instead of burning its
// time slices, while on a quiet one it stays at spin_us. DEEPINFER_POOL_SPIN_US=0 restores the plain
// sleeping hand-off.

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace deepinfer::core {

class ThreadPool {
public:
    explicit ThreadPool(int num_threads); // total threads including the caller; >= 1
    ~ThreadPool();
    ThreadPool(const ThreadPool&) = delete;
    ThreadPool& operator=(const ThreadPool&) = delete;

    int num_threads() const { return num_threads_; }
    // fn(begin, end) over contiguous chunks of [0, n).
    void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn);
    // fn() exactly once on every thread of the pool (the caller included), for per-thread setup such as
    // sizing thread-local scratch; returns when all have run. Each thread waits in it until every other has
    // arrived (that is what pins one call to each thread), so it is for setup and growth, never a step.
    void run_on_each_thread(const std::function<void()>& fn);
    // Distinct for every pool the process creates (never reused, unlike an address).
    uint64_t id() const { return id_; }

    // How long an idle worker (and a waiting caller) spins before it sleeps; 0 = sleep at once (the
    // condition-variable pool). Default kDefaultSpinUs, or DEEPINFER_POOL_SPIN_US at construction.
    static constexpr int kDefaultSpinUs = 100;
    static constexpr int kMinSpinUs = 2;
    // The spin a thread uses for its next wait, between kMinSpinUs and max_us (the pool's spin_us). A wait
    // the spin caught doubles it. A wait it missed keeps it at max_us when the awaited event came within
    // max_us of the wait's start anyway and the spinner was not preempted meanwhile
    // (full_spin_would_catch: a decode step's serial work between two loops, tens of microseconds, is
    // longer than a shrunken budget but not than spin_us); any other miss (a long idle gap, or an
    // oversubscribed machine, where the awaited thread is often descheduled or queued on the same core)
    // quarters it, so the pool degrades to the sleeping hand-off instead of burning its time slices.
    static int adapted_spin_us(int budget, bool caught, bool full_spin_would_catch, int max_us);
    void set_spin_us(int us) { spin_us_.store(us < 0 ? 0 : us, std::memory_order_relaxed); }
    int spin_us() const { return spin_us_.load(std::memory_order_relaxed); }

    // Process-wide pool sized by set_default_threads (cli) or the hardware concurrency.
    static ThreadPool& global();
    static void set_default_threads(int n);

private:
    void worker(int index);
    void run_chunk(int index);

    int num_threads_;
    uint64_t id_;
    std::atomic<int> spin_us_{kDefaultSpinUs};
    int caller_spin_us_ = kDefaultSpinUs; // the caller's adaptive spin (thread_pool.cpp); touched under busy_
    std::vector<std::thread> workers_;
    // The loop being run: written by the caller before generation_ is bumped (release), read by the
    // workers after they see the bump (acquire).
    const std::function<void(int64_t, int64_t)>* fn_ = nullptr;
    int64_t n_ = 0;
    std::atomic<uint64_t> generation_{0}; // [generation : 32 | next chunk to claim : 32]
    std::atomic<int> pending_{0};         // chunks of the current loop not finished yet
    std::atomic<bool> busy_{false};
    std::atomic<bool> stop_{false};
    // Slow path: sleepers on cv_work_ (workers) and cv_done_ (the caller), counted so the fast path can
    // skip the notify. Updated under mu_; read by the other side after its own seq_cst store.
    std::mutex mu_;
    std::condition_variable cv_work_, cv_done_;
    std::atomic<int> sleeping_workers_{0};
    std::atomic<bool> caller_sleeping_{false};
};

} // namespace deepinfer::core
