#pragma once
// A bounded multi-producer queue: HTTP threads push, the fake backend's engine loop drains (test tree only:
// the engine backend queues in engine::AsyncEngine). try_push fails when full.

#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <vector>

namespace deepinfer::server {

template <typename T> class BoundedQueue {
public:
    explicit BoundedQueue(size_t capacity) : capacity_(capacity) {}

    bool try_push(T item) {
        {
            std::lock_guard<std::mutex> lock(mu_);
            if (closed_ || items_.size() >= capacity_) return false;
            items_.push_back(std::move(item));
        }
        cv_.notify_one();
        return true;
    }

    // Takes everything queued, waiting up to `timeout` for the first item.
    std::vector<T> drain(std::chrono::microseconds timeout) {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait_for(lock, timeout, [&] { return !items_.empty() || closed_; });
        std::vector<T> out;
        out.reserve(items_.size());
        for (auto& i : items_) out.push_back(std::move(i));
        items_.clear();
        return out;
    }

    void close() {
        {
            std::lock_guard<std::mutex> lock(mu_);
            closed_ = true;
        }
        cv_.notify_all();
    }

    size_t size() const {
        std::lock_guard<std::mutex> lock(mu_);
        return items_.size();
    }

private:
    size_t capacity_;
    mutable std::mutex mu_;
    std::condition_variable cv_;
    std::deque<T> items_;
    bool closed_ = false;
};

} // namespace deepinfer::server
