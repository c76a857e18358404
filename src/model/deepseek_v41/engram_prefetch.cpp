#include "model/deepseek_v41/engram_prefetch.h"

#include <chrono>
#include <cstring>

#include "core/check.h"

namespace deepinfer::model::deepseek_v41 {

EngramPrefetcher::~EngramPrefetcher() {
    {
        std::lock_guard<std::mutex> lock(mu_);
        stop_ = true;
    }
    work_cv_.notify_all();
    if (worker_.joinable()) worker_.join();
}

void EngramPrefetcher::begin() {
    std::lock_guard<std::mutex> lock(mu_);
    DI_CHECK(done_ == queued_) << "EngramPrefetcher::begin with jobs in flight";
    jobs_.clear(); // capacity kept
    queued_ = done_ = 0;
}

int64_t EngramPrefetcher::add(const EngramTable& table, const int64_t* ids, int64_t n, int64_t cols,
                              int64_t stride, float* out, bool zeros) {
    // Only the forward's thread touches jobs_ past queued_, and the worker reads only [0, queued_): but a
    // push_back may move the array, so jobs are added only before start().
    DI_CHECK(queued_ == 0) << "EngramPrefetcher::add after start";
    jobs_.push_back({&table, ids, n, cols, stride, out, zeros});
    return static_cast<int64_t>(jobs_.size()) - 1;
}

void EngramPrefetcher::start(kernels::Profiler* profiler) {
    if (jobs_.empty()) return;
    {
        std::lock_guard<std::mutex> lock(mu_);
        profiler_ = profiler != nullptr && profiler->enabled() ? profiler : nullptr;
        queued_ = static_cast<int64_t>(jobs_.size());
        if (!worker_.joinable()) worker_ = std::thread([this] { run(); });
    }
    work_cv_.notify_one();
}

void EngramPrefetcher::wait(int64_t job) {
    std::unique_lock<std::mutex> lock(mu_);
    DI_CHECK(job >= 0 && job < queued_);
    // Recorded when the job was already done too (0 s), so the census counts every Engram layer's wait.
    const auto t0 = std::chrono::steady_clock::now();
    done_cv_.wait(lock, [&] { return done_ > job; });
    if (profiler_ != nullptr)
        profiler_->record(kernels::OpKind::kEngramWait,
                          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 0, 0);
}

void EngramPrefetcher::finish() {
    std::unique_lock<std::mutex> lock(mu_);
    done_cv_.wait(lock, [&] { return done_ == queued_; });
}

void EngramPrefetcher::run() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
        work_cv_.wait(lock, [&] { return stop_ || done_ < queued_; });
        if (stop_) return;
        const int64_t first = done_, end = queued_;
        kernels::Profiler* prof = profiler_;
        lock.unlock();
        // Every job's rows are requested first, so their reads overlap each other and the forward.
        for (int64_t j = first; j < end; ++j) {
            const Job& job = jobs_[j];
            if (job.zeros) continue;
            for (int64_t t = 0; t < job.n; ++t)
                job.table->prefetch({job.ids + t * job.stride, static_cast<size_t>(job.cols)});
        }
        for (int64_t j = first; j < end; ++j) {
            const Job& job = jobs_[j];
            const auto t0 = std::chrono::steady_clock::now();
            const int64_t dim = job.table->dim();
            double bytes = 0;
            if (job.zeros) {
                std::memset(job.out, 0, static_cast<size_t>(job.n * job.cols * dim) * sizeof(float));
            } else {
                for (int64_t t = 0; t < job.n; ++t)
                    job.table->gather({job.ids + t * job.stride, static_cast<size_t>(job.cols)},
                                      job.out + t * job.cols * dim);
                bytes = static_cast<double>(job.n * job.cols) * static_cast<double>(job.table->row_bytes());
            }
            if (prof != nullptr)
                prof->record(kernels::OpKind::kEngramGather,
                             std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
                             bytes, 0);
            lock.lock();
            ++done_;
            lock.unlock();
            done_cv_.notify_all();
        }
        lock.lock();
    }
}

} // namespace deepinfer::model::deepseek_v41
