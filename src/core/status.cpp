#include "core/status.h"

namespace deepinfer::core {

std::string_view status_code_name(StatusCode code) {
    switch (code) {
    case StatusCode::kOk:
        return "OK";
    case StatusCode::kInvalidArgument:
        return "InvalidArgument";
    case StatusCode::kNotFound:
        return "NotFound";
    case StatusCode::kDataLoss:
        return "DataLoss";
    case StatusCode::kOutOfRange:
        return "OutOfRange";
    case StatusCode::kResourceExhausted:
        return "ResourceExhausted";
    case StatusCode::kFailedPrecondition:
        return "FailedPrecondition";
    case StatusCode::kUnimplemented:
        return "Unimplemented";
    case StatusCode::kUnavailable:
        return "Unavailable";
    case StatusCode::kCancelled:
        return "Cancelled";
    case StatusCode::kInternal:
        return "Internal";
    case StatusCode::kIoError:
        return "IoError";
    }
    return "Unknown";
}

std::string Status::to_string() const {
    if (ok()) return "OK";
    std::string s(status_code_name(code_));
    s += ": ";
    s += message_;
    return s;
}

Status Status::with_context(std::string_view context) const {
    if (ok()) return *this;
    std::string m(context);
    m += ": ";
    m += message_;
    return Status(code_, std::move(m));
}

} // namespace deepinfer::core
