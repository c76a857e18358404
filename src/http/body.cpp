#include "http/body.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <malloc.h>
#include <vector>

namespace deepinfer::http {

std::optional<BodyError> read_body(const BodyLimits& limits, const httplib::Request& req,
                                   const httplib::ContentReader& reader, std::string& body) {
    auto too_large = [&limits] {
        return BodyError{413, "request body too large (limit " + std::to_string(limits.max_bytes) + " bytes)",
                         "body_too_large"};
    };
    if (req.has_header("Content-Length")) { // refused unread
        const std::string len = req.get_header_value("Content-Length");
        char* end = nullptr;
        unsigned long long n = std::strtoull(len.c_str(), &end, 10);
        if (len.empty() || *end != '\0' || n > limits.max_bytes) return too_large();
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(limits.timeout_ms);
    bool over = false, too_slow = false;
    bool ok = reader([&](const char* data, size_t len) {
        if (body.size() + len > limits.max_bytes) {
            over = true;
            return false;
        }
        if (std::chrono::steady_clock::now() > deadline) {
            too_slow = true;
            return false;
        }
        body.append(data, len);
        return true;
    });
    if (over) {
        body.clear();
        body.shrink_to_fit();
        return too_large();
    }
    // The transport's reads also stop at the body deadline (a client sending nothing more): a read that
    // failed that late is the same timeout.
    if (!ok && std::chrono::steady_clock::now() + std::chrono::milliseconds(100) >= deadline) too_slow = true;
    if (too_slow) {
        return BodyError{408, "request body not received within " + std::to_string(limits.timeout_ms) + " ms",
                         "request_timeout"};
    }
    if (!ok) return BodyError{400, "could not read the request body", "bad_body"};
    return std::nullopt;
}

TrimAfterLargeBody::~TrimAfterLargeBody() {
    if (body_.capacity() <= (1u << 20)) return;
    std::string().swap(body_);
    malloc_trim(0);
}

size_t longest_json_string(std::string_view body) {
    size_t longest = 0;
    const char* p = body.data();
    const char* const end = p + body.size();
    auto find = [&end](const char* from, const char* to, char c) {
        const void* hit = std::memchr(from, c, static_cast<size_t>(to - from));
        return hit ? static_cast<const char*>(hit) : to;
    };
    while ((p = find(p, end, '"')) < end) {
        ++p; // inside a string, up to its closing quote
        size_t n = 0;
        for (;;) {
            const char* quote = find(p, end, '"');
            const char* escape = find(p, quote, '\\');
            n += static_cast<size_t>(escape - p);
            p = escape;
            if (escape == quote) break;
            // a \u escape (backslash, u, four hex digits) is 6 bytes for at least one decoded byte; any other
            // escape is 2 bytes for 1
            p += p + 1 < end && p[1] == 'u' ? std::min<ptrdiff_t>(6, end - p)
                                            : std::min<ptrdiff_t>(2, end - p);
            ++n;
        }
        longest = std::max(longest, n);
        if (p < end) ++p; // the closing quote
    }
    return longest;
}

std::string json_shape_problem(std::string_view body, const JsonShapeLimits& limits) {
    std::vector<int> members; // per open container: -1 for arrays, member count for objects
    long long total = 0;
    bool in_string = false;
    for (size_t i = 0; i < body.size(); ++i) {
        char c = body[i];
        if (in_string) {
            if (c == '\\')
                ++i;
            else if (c == '"')
                in_string = false;
            continue;
        }
        if (c == '"') {
            in_string = true;
        } else if (c == '[' || c == '{') {
            members.push_back(c == '[' ? -1 : 0);
            if (static_cast<int>(members.size()) > limits.max_depth) {
                return "request body is nested deeper than " + std::to_string(limits.max_depth) + " levels";
            }
        } else if (c == ']' || c == '}') {
            if (!members.empty()) members.pop_back();
        } else if (c == ':' && !members.empty() && members.back() >= 0) {
            if (++members.back() > limits.max_object_members || ++total > limits.max_total_members) {
                return "request body has objects with too many members";
            }
        }
    }
    return {};
}

} // namespace deepinfer::http
