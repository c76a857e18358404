#pragma once
// Cooperative cancellation of a long encode. While a CancelScope is alive on a thread, the encoder's loops
// on that thread (pre-tokenizer splits, BPE) look at its flag every kCancelCheckBytes of input and stop
// early once it is set; the ids returned are then partial, and the caller, which owns the flag, discards
// them. Used by the server, whose tokenizing threads stop when the client goes away or the request's
// deadline passes.

#include <atomic>
#include <cstddef>

namespace deepinfer::tokenizer {

inline constexpr std::size_t kCancelCheckBytes = 64 * 1024;

namespace detail {
inline thread_local const std::atomic<bool>* t_cancel_flag = nullptr;
} // namespace detail

class CancelScope {
public:
    explicit CancelScope(const std::atomic<bool>* flag) : prev_(detail::t_cancel_flag) {
        detail::t_cancel_flag = flag;
    }
    ~CancelScope() { detail::t_cancel_flag = prev_; }
    CancelScope(const CancelScope&) = delete;
    CancelScope& operator=(const CancelScope&) = delete;

private:
    const std::atomic<bool>* prev_;
};

// True when this thread's CancelScope flag is set (false without a scope).
inline bool encode_cancelled() {
    const std::atomic<bool>* f = detail::t_cancel_flag;
    return f != nullptr && f->load(std::memory_order_relaxed);
}

} // namespace deepinfer::tokenizer
