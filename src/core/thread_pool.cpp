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

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
    _mm_pause();
#else
    std::this_thread::yield();
#endif
}

// Pure spinning (pause only) for this long, then spinning with a yield between checks.
constexpr int kPureSpinUs = 20;

// Spins until done() or spin_us have passed; true when done() became true.
template <class Done> bool spin_until(int spin_us, const Done& done) {
    if (done()) return true;
    if (spin_us <= 0) return false;
    const auto start = std::chrono::steady_clock::now();
    const auto deadline = start + std::chrono::microseconds(spin_us);
    const auto yield_from = start + std::chrono::microseconds(kPureSpinUs);
    for (;;) {
        for (int i = 0; i < 64; ++i) {
            cpu_relax();
            if (done()) return true;
        }
        const auto now = std::chrono::steady_clock::now();
        if (now >= deadline) return false;
        // Past the first few microseconds, give the core away between checks: on an oversubscribed
        // machine the thread being waited for may need this very core.
        if (now >= yield_from) std::this_thread::yield();
    }
}

// The spin actually used adapts between kMinSpinUs and the pool's spin_us: doubled after a wait the
// spin caught, halved after one it missed. On a quiet machine the next loop (or the worker's last chunk)
// comes within microseconds, so the budget stays at the top; on an oversubscribed one the other thread is
// often descheduled, spins miss, and the pool degrades to the sleeping hand-off instead of burning its
// time slices (measured: a fixed 100 us spin at load average 23 on 2 vCPUs decoded ~30% slower).
constexpr int kMinSpinUs = 4;
int adapt_spin(int budget, bool caught, int max_us) {
    if (max_us <= 0) return 0;
    budget = caught ? budget * 2 : budget / 2;
    return std::clamp(budget, std::min(kMinSpinUs, max_us), max_us);
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
} // namespace

ThreadPool::ThreadPool(int num_threads) : num_threads_(std::max(1, num_threads)) {
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
    pending_.store(num_threads_ - 1, std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_seq_cst); // publishes fn_, n_, pending_
    // A worker increments sleeping_workers_ (seq_cst) before it re-checks generation_ under mu_, so either
    // it sees the bump above or this load sees it asleep.
    if (sleeping_workers_.load(std::memory_order_seq_cst) > 0) {
        { std::lock_guard<std::mutex> lock(mu_); }
        cv_work_.notify_all();
    }
    run_chunk(0);
    auto done = [this] { return pending_.load(std::memory_order_seq_cst) == 0; };
    const bool caught = spin_until(caller_spin_us_, done);
    caller_spin_us_ = adapt_spin(caller_spin_us_, caught, spin_us());
    if (!caught) {
        std::unique_lock<std::mutex> lock(mu_);
        caller_sleeping_.store(true, std::memory_order_seq_cst);
        cv_done_.wait(lock, done);
        caller_sleeping_.store(false, std::memory_order_relaxed);
    }
    fn_ = nullptr;
    busy_.store(false, std::memory_order_release);
}

void ThreadPool::worker(int index) {
    uint64_t seen = 0;
    int budget = spin_us();
    for (;;) {
        auto ready = [&] {
            // seq_cst: the re-check under mu_ pairs with the caller's bump-then-load of sleeping_workers_.
            return generation_.load(std::memory_order_seq_cst) != seen ||
                   stop_.load(std::memory_order_seq_cst);
        };
        const bool caught = spin_until(budget, ready);
        budget = adapt_spin(budget, caught, spin_us());
        if (!caught) {
            std::unique_lock<std::mutex> lock(mu_);
            sleeping_workers_.fetch_add(1, std::memory_order_seq_cst);
            cv_work_.wait(lock, ready);
            sleeping_workers_.fetch_sub(1, std::memory_order_relaxed);
        }
        if (stop_.load(std::memory_order_acquire)) return;
        // The caller waits for every worker before it publishes the next loop, so this is seen + 1.
        seen = generation_.load(std::memory_order_acquire);
        run_chunk(index);
        if (pending_.fetch_sub(1, std::memory_order_seq_cst) == 1 &&
            caller_sleeping_.load(std::memory_order_seq_cst)) {
            { std::lock_guard<std::mutex> lock(mu_); }
            cv_done_.notify_one();
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
