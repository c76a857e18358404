#include "core/logging.h"

#include <atomic>
#include <cstdio>
#include <mutex>
#include <string>

namespace deepinfer::core {

namespace {
std::atomic<int> g_level{static_cast<int>(LogLevel::kInfo)};
std::mutex g_mu;
} // namespace

void set_log_level(LogLevel level) {
    g_level.store(static_cast<int>(level));
}
LogLevel log_level() {
    return static_cast<LogLevel>(g_level.load());
}

void log_message(LogLevel level, std::string_view msg) {
    static constexpr const char* kNames[] = {"DEBUG", "INFO", "WARN", "ERROR"};
    std::lock_guard<std::mutex> lock(g_mu);
    std::fprintf(stderr, "[deepinfer %s] %.*s\n", kNames[static_cast<int>(level)],
                 static_cast<int>(msg.size()), msg.data());
}

} // namespace deepinfer::core
