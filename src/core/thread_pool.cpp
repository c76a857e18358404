#include "core/thread_pool.h"

#include <algorithm>
#include <atomic>

#include "core/check.h"

namespace deepinfer::core {

namespace {
std::atomic<int> g_default_threads{0};
}

ThreadPool::ThreadPool(int num_threads) : num_threads_(std::max(1, num_threads)) {
    for (int i = 1; i < num_threads_; ++i) workers_.emplace_back([this, i] { worker(i); });
}

ThreadPool::~ThreadPool() {
    {
        std::lock_guard<std::mutex> lock(mu_);
        stop_ = true;
    }
    cv_work_.notify_all();
    for (auto& t : workers_) t.join();
}

static void chunk_bounds(int64_t n, int parts, int index, int64_t* b, int64_t* e) {
    int64_t base = n / parts, rem = n % parts;
    *b = index * base + std::min<int64_t>(index, rem);
    *e = *b + base + (index < rem ? 1 : 0);
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn) {
    if (n <= 0) return;
    if (num_threads_ == 1 || n == 1) {
        fn(0, n);
        return;
    }
    {
        std::lock_guard<std::mutex> lock(mu_);
        DI_CHECK(fn_ == nullptr) << "ThreadPool::parallel_for is not reentrant";
        fn_ = &fn;
        n_ = n;
        pending_ = num_threads_ - 1;
        ++generation_;
    }
    cv_work_.notify_all();
    int64_t b, e;
    chunk_bounds(n, num_threads_, 0, &b, &e);
    if (b < e) fn(b, e);
    std::unique_lock<std::mutex> lock(mu_);
    cv_done_.wait(lock, [this] { return pending_ == 0; });
    fn_ = nullptr;
}

void ThreadPool::worker(int index) {
    uint64_t seen = 0;
    for (;;) {
        const std::function<void(int64_t, int64_t)>* fn;
        int64_t n;
        {
            std::unique_lock<std::mutex> lock(mu_);
            cv_work_.wait(lock, [&] { return stop_ || generation_ != seen; });
            if (stop_) return;
            seen = generation_;
            fn = fn_;
            n = n_;
        }
        int64_t b, e;
        chunk_bounds(n, num_threads_, index, &b, &e);
        if (b < e) (*fn)(b, e);
        {
            std::lock_guard<std::mutex> lock(mu_);
            if (--pending_ == 0) cv_done_.notify_one();
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
