#include "http/access.h"

#include <algorithm>
#include <cctype>
#include <string_view>

namespace deepinfer::http {

std::vector<std::string> default_allowed_hosts(const std::string& host, const std::string& api_key) {
    if (!api_key.empty()) return {};
    std::string h = host_name_of(host);
    bool loopback = h == "localhost" || h == "::1" || h.rfind("127.", 0) == 0;
    if (!loopback) return {};
    std::vector<std::string> names = {"localhost", "127.0.0.1", "::1"};
    if (std::find(names.begin(), names.end(), h) == names.end()) names.push_back(h);
    return names;
}

bool authorization_matches(const std::string& header, const std::string& api_key) {
    constexpr std::string_view kScheme = "bearer";
    if (api_key.empty() || header.size() <= kScheme.size()) return false;
    for (size_t i = 0; i < kScheme.size(); ++i) {
        if (std::tolower(static_cast<unsigned char>(header[i])) != kScheme[i]) return false;
    }
    size_t i = kScheme.size();
    if (header[i] != ' ' && header[i] != '\t') return false;
    while (i < header.size() && (header[i] == ' ' || header[i] == '\t')) ++i;
    std::string_view key = std::string_view(header).substr(i);
    // Constant time in the key's contents: the whole of both strings is always compared.
    unsigned diff = key.size() == api_key.size() ? 0u : 1u;
    for (size_t k = 0; k < key.size(); ++k) {
        diff |= static_cast<unsigned>(static_cast<unsigned char>(key[k]) ^
                                      static_cast<unsigned char>(api_key[k % api_key.size()]));
    }
    return diff == 0;
}

std::string host_name_of(const std::string& host_header) {
    std::string h = host_header;
    if (!h.empty() && h.front() == '[') { // [v6]:port
        size_t close = h.find(']');
        h = close == std::string::npos ? h.substr(1) : h.substr(1, close - 1);
    } else if (std::count(h.begin(), h.end(), ':') == 1) {
        h = h.substr(0, h.find(':'));
    }
    for (char& c : h) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return h;
}

bool host_allowed(const std::vector<std::string>& allowed, const std::string& host_header) {
    return allowed.empty() ||
           std::find(allowed.begin(), allowed.end(), host_name_of(host_header)) != allowed.end();
}

bool key_presented(const std::string& authorization, const std::string* x_api_key,
                   const std::string& api_key) {
    return authorization_matches(authorization, api_key) ||
           (x_api_key && authorization_matches("Bearer " + *x_api_key, api_key));
}

} // namespace deepinfer::http
