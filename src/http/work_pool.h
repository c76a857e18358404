#pragma once
// Long work a request needs before its response starts (for a server of prompts: rendering and
// tokenizing), run off the connection's worker thread: a few threads with a bounded queue run it while the
// request's worker waits and watches its client and deadline. A client that disconnects, a deadline that
// passes or the pool stopping sets the job's cancel flag, which the work polls (a huge input then stops
// costing CPU at once); the queue's bound turns a flood into immediate refusals instead of a backlog.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace deepinfer::http {

class WorkPool {
public:
    enum class Outcome { kDone, kQueueFull, kClientGone, kDeadline, kStopping };
    using Work = std::function<void(const std::atomic<bool>& cancel)>;

    // threads <= 0: one per hardware thread.
    WorkPool(int threads, int max_queue);
    ~WorkPool(); // stop(), then joins
    WorkPool(const WorkPool&) = delete;
    WorkPool& operator=(const WorkPool&) = delete;

    // Runs `work` on a pool thread and returns once it has finished or, cancelled, stopped (a job cancelled
    // while queued is dropped at once): kDone, or why it was cut (results are then partial: drop them).
    // `gone` (may be empty) is asked every 20 ms while the work waits or runs: true when the client has
    // disconnected.
    Outcome run(const Work& work, std::chrono::steady_clock::time_point deadline,
                const std::function<bool()>& gone);
    // Cancels every job, running or queued; later run() calls answer kStopping.
    void stop();

    int max_queue() const { return max_queue_; }
    uint64_t cancelled() const { return cancelled_.load(); } // jobs cut by a client, a deadline or stop()

private:
    struct Job {
        const Work* work = nullptr;
        std::atomic<bool> cancel{false};
        bool done = false; // guarded by mu_
    };
    void loop();

    const int max_queue_;
    std::mutex mu_;
    std::condition_variable work_cv_, done_cv_;
    std::deque<std::shared_ptr<Job>> queue_;
    std::vector<std::shared_ptr<Job>> running_;
    bool stopping_ = false;
    std::atomic<uint64_t> cancelled_{0};
    std::vector<std::thread> threads_;
};

} // namespace deepinfer::http
