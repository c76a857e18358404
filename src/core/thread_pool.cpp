#include "core/thread_pool.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>

#include "core/check.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace deepinfer::core {

namespace {
std::atomic<int> g_default_threads{0};
std::atomic<uint64_t> g_next_pool_id{1};

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
    _mm_pause();
#else
    std::this_thread::yield();
#endif
}

// Spins (pause only, never yielding: a waiter that has to yield is sharing a core with the thread it waits
// for, and should sleep instead) until done() or spin_us have passed; true when done() became true.
// On a miss, *start is when the wait began (unset when done() held at once), and *preempted whether
// the spinning thread lost its CPU meanwhile (two clock readings one round of pauses apart lie
// kPreemptedUs or more apart): the machine has more runnable threads than cores.
constexpr int kPreemptedUs = 30;
using Clock = std::chrono::steady_clock;
template <class Done>
bool spin_until(int spin_us, const Done& done, Clock::time_point* start, bool* preempted) {
    *preempted = false;
    if (done()) return true;
    auto last = Clock::now();
    *start = last;
    if (spin_us <= 0) return false;
    const auto deadline = last + std::chrono::microseconds(spin_us);
    for (;;) {
        for (int i = 0; i < 64; ++i) {
            cpu_relax();
            if (done()) return true;
        }
        const auto now = Clock::now();
        if (now - last >= std::chrono::microseconds(kPreemptedUs)) *preempted = true;
        if (now >= deadline) return false;
        last = now;
    }
}

// Whether a wait the spin missed ended within spin_us of the spin's start and the spinner was not preempted
// (adapted_spin_us's full_spin_would_catch). Asked only after a miss: a caught wait reads the clock at most
// once (none when the work was already done).
bool full_spin_would_catch(Clock::time_point start, bool preempted, int spin_us) {
    return !preempted && Clock::now() - start < std::chrono::microseconds(spin_us);
}

int initial_spin_us() {
    const char* env = std::getenv("DEEPINFER_POOL_SPIN_US");
    if (env == nullptr || *env == '\0') return ThreadPool::kDefaultSpinUs;
    char* end = nullptr;
    const long v = std::strtol(env, &end, 10);
    if (end == env || *end != '\0' || v < 0 || v > 1000000) return ThreadPool::kDefaultSpinUs;
    return static_cast<int>(v);
}

void chunk_bounds(int64_t n, int parts, int index, int64_t* b, int64_t* e) {
    int64_t base = n / parts, rem = n % parts;
    *b = index * base + std::min<int64_t>(index, rem);
    *e = *b + base + (index < rem ? 1 : 0);
}

// generation_ holds the loop's generation (high 32 bits) and the next unclaimed chunk (low 32 bits): a
// claim is a CAS that fails once the chunks of `gen` are all taken or a newer loop has been published, so
// a late thread never runs a chunk of a loop other than the one it read fn_ / n_ for.
int claim(std::atomic<uint64_t>& generation, uint64_t gen, int chunks) {
    uint64_t v = generation.load(std::memory_order_acquire);
    for (;;) {
        if ((v >> 32) != gen || static_cast<int>(v & 0xffffffffu) >= chunks) return -1;
        if (generation.compare_exchange_weak(v, v + 1, std::memory_order_acq_rel, std::memory_order_acquire))
            return static_cast<int>(v & 0xffffffffu);
    }
}
} // namespace

int ThreadPool::adapted_spin_us(int budget, bool caught, bool full_spin_would_catch, int max_us) {
    if (max_us <= 0) return 0;
    budget = caught ? budget * 2 : full_spin_would_catch ? max_us : budget / 4;
    return std::clamp(budget, std::min(kMinSpinUs, max_us), max_us);
}

ThreadPool::ThreadPool(int num_threads)
    : num_threads_(std::max(1, num_threads)), id_(g_next_pool_id.fetch_add(1, std::memory_order_relaxed)) {
    spin_us_.store(initial_spin_us(), std::memory_order_relaxed);
    caller_spin_us_ = spin_us();
    for (int i = 1; i < num_threads_; ++i) workers_.emplace_back([this, i] { worker(i); });
}

ThreadPool::~ThreadPool() {
    {
        std::lock_guard<std::mutex> lock(mu_);
        stop_.store(true);
    }
    cv_work_.notify_all();
    for (auto& t : workers_) t.join();
}

void ThreadPool::run_chunk(int index) {
    int64_t b, e;
    chunk_bounds(n_, num_threads_, index, &b, &e);
    if (b < e) (*fn_)(b, e);
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn) {
    if (n <= 0) return;
    if (num_threads_ == 1 || n == 1) {
        fn(0, n);
        return;
    }
    DI_CHECK(!busy_.exchange(true, std::memory_order_acquire)) << "ThreadPool::parallel_for is not reentrant";
    fn_ = &fn;
    n_ = n;
    pending_.store(num_threads_, std::memory_order_relaxed);
    const uint64_t gen = (generation_.load(std::memory_order_relaxed) >> 32) + 1;
    generation_.store(gen << 32, std::memory_order_seq_cst); // publishes fn_, n_, pending_; chunk 0 next
    // A worker increments sleeping_workers_ (seq_cst) before it re-checks generation_ under mu_, so either
    // it sees the store above or this load sees it asleep.
    if (sleeping_workers_.load(std::memory_order_seq_cst) > 0) {
        { std::lock_guard<std::mutex> lock(mu_); }
        cv_work_.notify_all();
    }
    // The caller claims chunks too, until none is left: a worker that is asleep or descheduled (an
    // oversubscribed machine) costs the loop nothing but its chunks running here; the caller waits only
    // for chunks a worker has actually started.
    for (int idx = claim(generation_, gen, num_threads_); idx >= 0;
         idx = claim(generation_, gen, num_threads_)) {
        run_chunk(idx);
        pending_.fetch_sub(1, std::memory_order_seq_cst);
    }
    auto done = [this] { return pending_.load(std::memory_order_seq_cst) == 0; };
    Clock::time_point start;
    bool preempted = false;
    const bool caught = spin_until(caller_spin_us_, done, &start, &preempted);
    if (!caught) {
        std::unique_lock<std::mutex> lock(mu_);
        caller_sleeping_.store(true, std::memory_order_seq_cst);
        cv_done_.wait(lock, done);
        caller_sleeping_.store(false, std::memory_order_relaxed);
    }
    caller_spin_us_ = ThreadPool::adapted_spin_us(
        caller_spin_us_, caught, !caught && full_spin_would_catch(start, preempted, spin_us()), spin_us());
    fn_ = nullptr;
    busy_.store(false, std::memory_order_release);
}

void ThreadPool::run_on_each_thread(const std::function<void()>& fn) {
    if (num_threads_ == 1) {
        fn();
        return;
    }
    // One chunk per thread, and no chunk returns before all num_threads_ have started: a thread can claim
    // a second chunk only after leaving its first, so each chunk runs on a different thread. The caller
    // wakes sleeping workers when it publishes the loop, so the barrier always fills.
    std::atomic<int> arrived{0};
    auto body = [&](int64_t, int64_t) {
        fn();
        arrived.fetch_add(1, std::memory_order_acq_rel);
        while (arrived.load(std::memory_order_acquire) < num_threads_) std::this_thread::yield();
    };
    parallel_for(num_threads_, std::ref(body));
}

void ThreadPool::worker(int) {
    uint64_t seen = 0; // the last generation this worker looked at
    int budget = spin_us();
    for (;;) {
        auto ready = [&] {
            // seq_cst: the re-check under mu_ pairs with the caller's store-then-load of sleeping_workers_.
            return (generation_.load(std::memory_order_seq_cst) >> 32) != seen ||
                   stop_.load(std::memory_order_seq_cst);
        };
        Clock::time_point start;
        bool preempted = false;
        const bool caught = spin_until(budget, ready, &start, &preempted);
        if (!caught) {
            std::unique_lock<std::mutex> lock(mu_);
            sleeping_workers_.fetch_add(1, std::memory_order_seq_cst);
            cv_work_.wait(lock, ready);
            sleeping_workers_.fetch_sub(1, std::memory_order_relaxed);
        }
        budget = ThreadPool::adapted_spin_us(
            budget, caught, !caught && full_spin_would_catch(start, preempted, spin_us()), spin_us());
        if (stop_.load(std::memory_order_acquire)) return;
        seen = generation_.load(std::memory_order_acquire) >> 32;
        for (int idx = claim(generation_, seen, num_threads_); idx >= 0;
             idx = claim(generation_, seen, num_threads_)) {
            run_chunk(idx);
            if (pending_.fetch_sub(1, std::memory_order_seq_cst) == 1 &&
                caller_sleeping_.load(std::memory_order_seq_cst)) {
                { std::lock_guard<std::mutex> lock(mu_); }
                cv_done_.notify_one();
            }
        }
    }
}

ThreadPool& ThreadPool::global() {
    static ThreadPool pool([] {
        int n = g_default_threads.load();
        if (n <= 0) n = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
        return n;
    }());
    return pool;
}

void ThreadPool::set_default_threads(int n) {
    g_default_threads.store(n);
}

} // namespace deepinfer::core
