#include "tokenizer/utf8.h"

namespace deepinfer::tokenizer::utf8 {

namespace {

// Per lead byte: total sequence length and the allowed range of the second byte (Unicode Table 3-7).
struct LeadInfo {
    int len;
    unsigned char lo, hi;
};

LeadInfo lead_info(unsigned char b) {
    if (b < 0x80) return {1, 0, 0};
    if (b >= 0xC2 && b <= 0xDF) return {2, 0x80, 0xBF};
    if (b == 0xE0) return {3, 0xA0, 0xBF};
    if ((b >= 0xE1 && b <= 0xEC) || b == 0xEE || b == 0xEF) return {3, 0x80, 0xBF};
    if (b == 0xED) return {3, 0x80, 0x9F};
    if (b == 0xF0) return {4, 0x90, 0xBF};
    if (b >= 0xF1 && b <= 0xF3) return {4, 0x80, 0xBF};
    if (b == 0xF4) return {4, 0x80, 0x8F};
    return {0, 0, 0};
}

bool is_cont(unsigned char b) {
    return (b & 0xC0) == 0x80;
}

} // namespace

std::size_t valid_sequence_length(std::string_view s, std::size_t i) {
    const auto b0 = static_cast<unsigned char>(s[i]);
    const LeadInfo li = lead_info(b0);
    if (li.len == 0) return 0;
    if (li.len == 1) return 1;
    if (i + li.len > s.size()) return 0;
    const auto b1 = static_cast<unsigned char>(s[i + 1]);
    if (b1 < li.lo || b1 > li.hi) return 0;
    for (int k = 2; k < li.len; ++k) {
        if (!is_cont(static_cast<unsigned char>(s[i + k]))) return 0;
    }
    return static_cast<std::size_t>(li.len);
}

std::size_t maximal_subpart_length(std::string_view s, std::size_t i) {
    const auto b0 = static_cast<unsigned char>(s[i]);
    const LeadInfo li = lead_info(b0);
    if (li.len <= 1) return 1;
    std::size_t n = 1;
    if (i + 1 >= s.size()) return n;
    const auto b1 = static_cast<unsigned char>(s[i + 1]);
    if (b1 < li.lo || b1 > li.hi) return n;
    ++n;
    for (int k = 2; k < li.len; ++k) {
        if (i + k >= s.size() || !is_cont(static_cast<unsigned char>(s[i + k]))) return n;
        ++n;
    }
    return n; // unreachable for a truly ill-formed sequence, kept for safety
}

bool is_valid(std::string_view s) {
    std::size_t i = 0;
    while (i < s.size()) {
        if (static_cast<unsigned char>(s[i]) < 0x80) {
            ++i;
            continue;
        }
        const std::size_t n = valid_sequence_length(s, i);
        if (n == 0) return false;
        i += n;
    }
    return true;
}

std::string sanitize(std::string_view s) {
    std::string out;
    out.reserve(s.size() + 8);
    std::size_t i = 0;
    while (i < s.size()) {
        if (static_cast<unsigned char>(s[i]) < 0x80) {
            out.push_back(s[i++]);
            continue;
        }
        const std::size_t n = valid_sequence_length(s, i);
        if (n != 0) {
            out.append(s.substr(i, n));
            i += n;
        } else {
            out.append("\xEF\xBF\xBD");
            i += maximal_subpart_length(s, i);
        }
    }
    return out;
}

std::size_t incomplete_tail_length(std::string_view s) {
    // A valid-so-far prefix of a sequence is at most 3 bytes long.
    for (std::size_t back = 1; back <= 3 && back <= s.size(); ++back) {
        const std::size_t i = s.size() - back;
        const auto b = static_cast<unsigned char>(s[i]);
        if (is_cont(b)) continue;
        const LeadInfo li = lead_info(b);
        if (li.len <= 1 || static_cast<std::size_t>(li.len) <= back) return 0;
        // The bytes present must be a valid prefix.
        return maximal_subpart_length(s, i) == back ? back : 0;
    }
    return 0;
}

void append_codepoint(std::string& out, char32_t cp) {
    if (cp < 0x80) {
        out.push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
        out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
        out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
        out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
}

char32_t decode_at(std::string_view s, std::size_t i, std::size_t* len) {
    const auto b0 = static_cast<unsigned char>(s[i]);
    if (b0 < 0x80) {
        *len = 1;
        return b0;
    }
    const int n = lead_info(b0).len;
    char32_t cp = b0 & (n == 2 ? 0x1F : n == 3 ? 0x0F : 0x07);
    for (int k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
    *len = static_cast<std::size_t>(n);
    return cp;
}

std::string StreamRepair::push(std::string_view bytes) {
    pending_.append(bytes);
    return drain(false);
}

std::string StreamRepair::finish() {
    return drain(true);
}

std::string StreamRepair::drain(bool final) {
    std::string out;
    const std::string_view p = pending_;
    std::size_t i = 0;
    while (i < p.size()) {
        if (static_cast<unsigned char>(p[i]) < 0x80) {
            out.push_back(p[i++]);
            continue;
        }
        const std::size_t n = valid_sequence_length(p, i);
        if (n != 0) {
            out.append(p.substr(i, n));
            i += n;
            continue;
        }
        // An ill-formed run that reaches the end may still be a character whose rest has not arrived.
        const std::size_t sub = maximal_subpart_length(p, i);
        if (!final && i + sub == p.size() && incomplete_tail_length(p.substr(i)) == sub) break;
        out.append("\xEF\xBF\xBD");
        i += sub;
    }
    pending_.erase(0, i);
    return out;
}

} // namespace deepinfer::tokenizer::utf8
