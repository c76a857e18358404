#include "server/stop_matcher.h"

#include <algorithm>
#include <utility>

namespace deepinfer::server {

StopMatcher::StopMatcher(std::vector<std::string> stops, bool include_stop)
    : stops_(std::move(stops)), include_stop_(include_stop) {
    stops_.erase(std::remove_if(stops_.begin(), stops_.end(), [](const auto& s) { return s.empty(); }),
                 stops_.end());
}

std::string StopMatcher::push(std::string_view text) {
    if (stopped_) return {};
    pending_.append(text);
    if (stops_.empty()) return std::exchange(pending_, {});
    // Earliest complete match wins.
    size_t first = std::string::npos, end = 0;
    for (const auto& s : stops_) {
        const size_t at = pending_.find(s);
        if (at < first) {
            first = at;
            end = at + s.size();
            matched_ = s;
        }
    }
    if (first != std::string::npos) {
        stopped_ = true;
        std::string out = pending_.substr(0, include_stop_ ? end : first);
        pending_.clear();
        return out;
    }
    // Hold back the longest suffix of pending_ that is a proper prefix of some stop string.
    size_t hold = 0;
    for (const auto& s : stops_) {
        size_t max_len = std::min(s.size() - 1, pending_.size());
        for (size_t len = max_len; len > hold; --len) {
            if (std::string_view(pending_).substr(pending_.size() - len) ==
                std::string_view(s).substr(0, len)) {
                hold = len;
                break;
            }
        }
    }
    std::string out = pending_.substr(0, pending_.size() - hold);
    pending_.erase(0, pending_.size() - hold);
    return out;
}

std::string StopMatcher::flush() {
    if (stopped_) return {};
    return std::exchange(pending_, {});
}

} // namespace deepinfer::server
