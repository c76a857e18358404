#pragma once
// Status and Result<T>: how expected failures travel (bad config, missing tensor, malformed request,
// out of KV blocks, a peer rank gone). Bugs use DI_CHECK (check.h) instead.

#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace deepinfer::core {

enum class StatusCode {
    kOk,
    kInvalidArgument,   // malformed input: config field, request field, flag
    kNotFound,          // file, tensor, model
    kDataLoss,          // corrupt or truncated file
    kOutOfRange,        // index/offset beyond a limit (e.g. prompt over context)
    kResourceExhausted, // out of KV blocks, queue full
    kFailedPrecondition,
    kUnimplemented,
    kUnavailable, // peer rank gone, server shutting down
    kCancelled,   // client went away
    kInternal,
    kIoError,
};

std::string_view status_code_name(StatusCode code);

class [[nodiscard]] Status {
public:
    Status() = default;
    Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

    static Status ok_status() { return Status(); }

    bool ok() const { return code_ == StatusCode::kOk; }
    StatusCode code() const { return code_; }
    const std::string& message() const { return message_; }
    // "InvalidArgument: config.json: field 'hidden_size' must be positive"
    std::string to_string() const;

    // Prefix context ("while loading shard x: ...") without losing the code.
    Status with_context(std::string_view context) const;

private:
    StatusCode code_ = StatusCode::kOk;
    std::string message_;
};

inline Status invalid_argument(std::string m) {
    return {StatusCode::kInvalidArgument, std::move(m)};
}
inline Status not_found(std::string m) {
    return {StatusCode::kNotFound, std::move(m)};
}
inline Status data_loss(std::string m) {
    return {StatusCode::kDataLoss, std::move(m)};
}
inline Status out_of_range(std::string m) {
    return {StatusCode::kOutOfRange, std::move(m)};
}
inline Status resource_exhausted(std::string m) {
    return {StatusCode::kResourceExhausted, std::move(m)};
}
inline Status failed_precondition(std::string m) {
    return {StatusCode::kFailedPrecondition, std::move(m)};
}
inline Status unimplemented(std::string m) {
    return {StatusCode::kUnimplemented, std::move(m)};
}
inline Status unavailable(std::string m) {
    return {StatusCode::kUnavailable, std::move(m)};
}
inline Status cancelled(std::string m) {
    return {StatusCode::kCancelled, std::move(m)};
}
inline Status internal_error(std::string m) {
    return {StatusCode::kInternal, std::move(m)};
}
inline Status io_error(std::string m) {
    return {StatusCode::kIoError, std::move(m)};
}

// Result<T>: a value or a non-ok Status.
template <typename T> class [[nodiscard]] Result {
public:
    Result(T value) : v_(std::move(value)) {}        // NOLINT(google-explicit-constructor)
    Result(Status status) : v_(std::move(status)) {} // NOLINT(google-explicit-constructor)

    bool ok() const { return std::holds_alternative<T>(v_); }
    const Status& status() const {
        static const Status kOk;
        return ok() ? kOk : std::get<Status>(v_);
    }
    T& value() & { return std::get<T>(v_); }
    const T& value() const& { return std::get<T>(v_); }
    T&& value() && { return std::get<T>(std::move(v_)); }
    T& operator*() & { return value(); }
    const T& operator*() const& { return value(); }
    T* operator->() { return &value(); }
    const T* operator->() const { return &value(); }

private:
    std::variant<T, Status> v_;
};

} // namespace deepinfer::core

#define DI_STATUS_CONCAT_INNER(a, b) a##b
#define DI_STATUS_CONCAT(a, b) DI_STATUS_CONCAT_INNER(a, b)

// Returns the Status from the enclosing function if `expr` is not ok.
#define DI_RETURN_IF_ERROR(expr)                                                                             \
    do {                                                                                                     \
        ::deepinfer::core::Status di_status_ = (expr);                                                       \
        if (!di_status_.ok()) return di_status_;                                                             \
    } while (0)

// `DI_ASSIGN_OR_RETURN(auto x, make_x());`
#define DI_ASSIGN_OR_RETURN(lhs, expr)                                                                       \
    DI_ASSIGN_OR_RETURN_IMPL(DI_STATUS_CONCAT(di_result_, __LINE__), lhs, expr)
#define DI_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr)                                                             \
    auto tmp = (expr);                                                                                       \
    if (!tmp.ok()) return tmp.status();                                                                      \
    lhs = std::move(tmp).value()
