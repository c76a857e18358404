#pragma once
// Minimal leveled logging to stderr. The level comes from the CLI (--log-level) or DEEPINFER_LOG_LEVEL,
// parsed in cli/ only; libraries just log.

#include <sstream>
#include <string_view>

namespace deepinfer::core {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3 };

void set_log_level(LogLevel level);
LogLevel log_level();
void log_message(LogLevel level, std::string_view msg);

class LogLine {
public:
    explicit LogLine(LogLevel level) : level_(level) {}
    ~LogLine() { log_message(level_, stream_.str()); }
    template <typename T> LogLine& operator<<(const T& v) {
        stream_ << v;
        return *this;
    }

private:
    LogLevel level_;
    std::ostringstream stream_;
};

} // namespace deepinfer::core

#define DI_LOG(level)                                                                                        \
    if (::deepinfer::core::LogLevel::k##level < ::deepinfer::core::log_level()) {                            \
    } else                                                                                                   \
        ::deepinfer::core::LogLine(::deepinfer::core::LogLevel::k##level)
