#include "http/work_pool.h"

#include <algorithm>

namespace deepinfer::http {

WorkPool::WorkPool(int threads, int max_queue) : max_queue_(std::max(1, max_queue)) {
    if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { loop(); });
}

WorkPool::~WorkPool() {
    stop();
    for (auto& t : threads_) t.join();
}

void WorkPool::stop() {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    for (auto& j : queue_) j->cancel = true;
    for (auto& j : running_) j->cancel = true;
    work_cv_.notify_all();
}

void WorkPool::loop() {
    for (;;) {
        std::shared_ptr<Job> job;
        {
            std::unique_lock<std::mutex> lock(mu_);
            work_cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
            if (queue_.empty()) return; // stopping
            job = std::move(queue_.front());
            queue_.pop_front();
            running_.push_back(job);
        }
        if (!job->cancel) (*job->work)(job->cancel); // a job cancelled while queued is not started
        {
            std::lock_guard<std::mutex> lock(mu_);
            running_.erase(std::find(running_.begin(), running_.end(), job));
            job->done = true;
        }
        done_cv_.notify_all();
    }
}

WorkPool::Outcome WorkPool::run(const Work& work, std::chrono::steady_clock::time_point deadline,
                                const std::function<bool()>& gone) {
    auto job = std::make_shared<Job>();
    job->work = &work;
    std::unique_lock<std::mutex> lock(mu_);
    if (stopping_) return Outcome::kStopping;
    if (static_cast<int>(queue_.size()) >= max_queue_) return Outcome::kQueueFull;
    queue_.push_back(job);
    work_cv_.notify_one();
    Outcome why = Outcome::kDone;
    // The job's `work` lives in the caller's frame: wait for the job to finish even once it is cancelled
    // (the work then stops at its next look at the flag).
    while (!job->done) {
        done_cv_.wait_for(lock, std::chrono::milliseconds(20));
        if (job->done || why != Outcome::kDone) continue;
        if (stopping_) {
            why = Outcome::kStopping;
        } else if (std::chrono::steady_clock::now() >= deadline) {
            why = Outcome::kDeadline;
        } else {
            lock.unlock();
            const bool left = gone && gone();
            lock.lock();
            if (left) why = Outcome::kClientGone;
        }
        if (why != Outcome::kDone) {
            job->cancel = true;
            ++cancelled_;
            // Still queued: it never starts, and the caller need not wait for a thread to free up.
            if (auto it = std::find(queue_.begin(), queue_.end(), job); it != queue_.end()) {
                queue_.erase(it);
                job->done = true;
            }
        }
    }
    return why;
}

} // namespace deepinfer::http
