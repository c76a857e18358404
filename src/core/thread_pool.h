#pragma once
// A fixed pool of worker threads for data-parallel loops in kernels. parallel_for splits [0, n) into
// contiguous chunks, one per thread (the caller runs chunk 0), and returns when all are done.

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

    // Process-wide pool sized by set_default_threads (cli) or the hardware concurrency.
    static ThreadPool& global();
    static void set_default_threads(int n);

private:
    void worker(int index);

    int num_threads_;
    std::vector<std::thread> workers_;
    std::mutex mu_;
    std::condition_variable cv_work_, cv_done_;
    const std::function<void(int64_t, int64_t)>* fn_ = nullptr;
    int64_t n_ = 0;
    uint64_t generation_ = 0;
    int pending_ = 0;
    bool stop_ = false;
};

} // namespace deepinfer::core
