#include "structured/regex.h"

#include <cstdio>

#include "structured/grammar.h"

namespace deepinfer::structured {

namespace {

void append_utf8(uint32_t cp, std::string& out) {
    if (cp <= 0x7F) {
        out += static_cast<char>(cp);
    } else if (cp <= 0x7FF) {
        out += static_cast<char>(0xC0 | (cp >> 6));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp <= 0xFFFF) {
        out += static_cast<char>(0xE0 | (cp >> 12));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
        out += static_cast<char>(0xF0 | (cp >> 18));
        out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    }
}

std::string hex_escape(uint32_t cp) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "\\U%08X", cp);
    return buf;
}

// \d \w \s differ between ECMAScript (what JSON Schema names) and Python's re (what the `jsonschema`
// package, like most validators, runs): Python's are Unicode-aware, ECMAScript's \s has U+FEFF. So a class
// escape generates only what both agree on: the "small" set (in both dialects' class) for \d \w \s, and
// the complement of the "big" set (in either dialect's class) for \D \W \S. Inside a negated class the
// roles swap. "Big" \d and \w include every non-ASCII code point (a superset of Unicode digits and
// letters), so \D and \W generate ASCII only.
const CodepointRanges kDigitSmall = {{'0', '9'}};
const CodepointRanges kDigitBig = {{'0', '9'}, {0x80, kMaxCodepoint}};
const CodepointRanges kWordSmall = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
const CodepointRanges kWordBig = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}, {0x80, kMaxCodepoint}};
// ECMAScript's \s without U+FEFF (Python's str.isspace() lacks it).
const CodepointRanges kSpaceSmall = {{0x09, 0x0D},     {0x20, 0x20},     {0xA0, 0xA0},
                                     {0x1680, 0x1680}, {0x2000, 0x200A}, {0x2028, 0x2029},
                                     {0x202F, 0x202F}, {0x205F, 0x205F}, {0x3000, 0x3000}};
// ... plus U+FEFF (ECMAScript) and U+001C-U+001F, U+0085 (Python).
const CodepointRanges kSpaceBig = {{0x09, 0x0D},     {0x1C, 0x20},     {0x85, 0x85},     {0xA0, 0xA0},
                                   {0x1680, 0x1680}, {0x2000, 0x200A}, {0x2028, 0x2029}, {0x202F, 0x202F},
                                   {0x205F, 0x205F}, {0x3000, 0x3000}, {0xFEFF, 0xFEFF}};
const CodepointRanges kDot = complement_ranges({{'\n', '\n'}, {'\r', '\r'}, {0x2028, 0x2029}});

class RegexParser {
public:
    RegexParser(std::string_view p, RegexOptions o) : s_(p), opt_(o) {}

    core::Result<std::string> parse() {
        std::vector<std::string> alts;
        while (true) {
            bool start_anchor = false, end_anchor = false;
            if (pos_ < s_.size() && s_[pos_] == '^') start_anchor = true, ++pos_;
            DI_ASSIGN_OR_RETURN(std::string seq, parse_sequence(/*top=*/true));
            if (pos_ < s_.size() && s_[pos_] == '$') end_anchor = true, ++pos_;
            std::string alt;
            if (opt_.search && !start_anchor) alt += any_text() + " ";
            alt += seq;
            if (opt_.search && !end_anchor) alt += " " + any_text();
            alts.push_back(alt.empty() ? "\"\"" : alt);
            if (pos_ >= s_.size()) break;
            if (s_[pos_] == '|') {
                ++pos_;
                continue;
            }
            if (s_[pos_] == ')') return error("unbalanced ')'");
            return error("'^' or '$' inside the pattern is not supported (only at its ends)");
        }
        std::string out = "(";
        for (std::size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
        return out + ")";
    }

private:
    core::Status error(const std::string& what) const {
        return core::invalid_argument("regex: " + what + " (at offset " + std::to_string(pos_) + " of /" +
                                      std::string(s_) + "/)");
    }

    std::string any_text() const { return "(" + class_expr(opt_.json_string ? kDot : kDot) + ")*"; }

    // A set of code points as a GBNF expression (JSON-escaped in json_string mode).
    std::string class_expr(const CodepointRanges& ranges) const {
        CodepointRanges set = normalize_ranges(ranges);
        if (opt_.no_angle) {
            CodepointRanges cut;
            for (auto [lo, hi] : set) {
                if (lo < '<') cut.emplace_back(lo, std::min<uint32_t>(hi, '<' - 1));
                if (hi > '<') cut.emplace_back(std::max<uint32_t>(lo, '<' + 1), hi);
            }
            set = cut;
        }
        std::vector<std::string> alts;
        if (opt_.json_string) {
            CodepointRanges plain, special;
            for (auto [lo, hi] : set) {
                for (uint32_t c = lo; c <= std::min<uint32_t>(hi, 0x5C); ++c)
                    if (c < 0x20 || c == '"' || c == '\\') special.emplace_back(c, c);
            }
            set = normalize_ranges([&] {
                CodepointRanges keep;
                const CodepointRanges banned = {{0, 0x1F}, {'"', '"'}, {'\\', '\\'}};
                const CodepointRanges allowed = complement_ranges(banned);
                for (auto [a, b] : set)
                    for (auto [c, d] : allowed) {
                        const uint32_t lo = std::max(a, c), hi = std::min(b, d);
                        if (lo <= hi) keep.emplace_back(lo, hi);
                    }
                return keep;
            }());
            for (auto [c, unused] : special) alts.push_back(gbnf_literal(json_escape_codepoint(c)));
        }
        if (!set.empty()) {
            std::string cls = "[";
            for (auto [lo, hi] : set) {
                cls += hex_escape(lo);
                if (hi != lo) cls += "-" + hex_escape(hi);
            }
            alts.insert(alts.begin(), cls + "]");
        }
        if (alts.empty()) return "[^\\U00000000-\\U0010FFFF]"; // matches nothing
        if (alts.size() == 1) return alts[0];
        std::string out = "(";
        for (std::size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
        return out + ")";
    }

    core::Result<std::string> literal_expr(uint32_t cp) const {
        if (opt_.no_angle && cp == '<') return error("'<' cannot appear in a raw DSML parameter value");
        if (opt_.json_string) return gbnf_literal(json_escape_codepoint(cp));
        std::string b;
        append_utf8(cp, b);
        return gbnf_literal(b);
    }

    core::Result<uint32_t> parse_hex(std::size_t n) {
        uint32_t v = 0;
        for (std::size_t i = 0; i < n; ++i) {
            if (pos_ >= s_.size() || !std::isxdigit(static_cast<unsigned char>(s_[pos_])))
                return error("bad hex escape");
            const char c = s_[pos_++];
            v = v * 16 + static_cast<uint32_t>(c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10);
        }
        return v;
    }

    // One UTF-8 code point of the pattern.
    core::Result<uint32_t> next_codepoint() {
        const unsigned char c = static_cast<unsigned char>(s_[pos_]);
        const int n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        if (n == 0 || pos_ + n > s_.size()) return error("invalid UTF-8");
        uint32_t cp = n == 1 ? c : n == 2 ? c & 0x1F : n == 3 ? c & 0x0F : c & 0x07;
        for (int i = 1; i < n; ++i) cp = (cp << 6) | (static_cast<unsigned char>(s_[pos_ + i]) & 0x3F);
        pos_ += n;
        return cp;
    }

    // After a backslash: a class escape (sets *cls) or one code point.
    // `big`: the escape sits in a negated class, so it must cover what either dialect would match.
    core::Status parse_escape(CodepointRanges* cls, uint32_t* cp, bool* is_class, bool big = false) {
        if (pos_ >= s_.size()) return error("pattern ends with '\\'");
        const char e = s_[pos_++];
        *is_class = true;
        switch (e) {
        case 'd':
            *cls = big ? kDigitBig : kDigitSmall;
            return {};
        case 'D':
            *cls = complement_ranges(big ? kDigitSmall : kDigitBig);
            return {};
        case 'w':
            *cls = big ? kWordBig : kWordSmall;
            return {};
        case 'W':
            *cls = complement_ranges(big ? kWordSmall : kWordBig);
            return {};
        case 's':
            *cls = big ? kSpaceBig : kSpaceSmall;
            return {};
        case 'S':
            *cls = complement_ranges(big ? kSpaceSmall : kSpaceBig);
            return {};
        default:
            break;
        }
        *is_class = false;
        switch (e) {
        case 'n':
            *cp = '\n';
            return {};
        case 'r':
            *cp = '\r';
            return {};
        case 't':
            *cp = '\t';
            return {};
        case 'f':
            *cp = '\f';
            return {};
        case 'v':
            *cp = '\v';
            return {};
        case '0':
            *cp = 0;
            return {};
        case 'x': {
            auto v = parse_hex(2);
            if (!v.ok()) return v.status();
            *cp = *v;
            return {};
        }
        case 'u': {
            if (pos_ < s_.size() && s_[pos_] == '{') {
                ++pos_;
                uint32_t v = 0;
                std::size_t digits = 0;
                while (pos_ < s_.size() && s_[pos_] != '}') {
                    auto d = parse_hex(1);
                    if (!d.ok()) return d.status();
                    v = v * 16 + *d;
                    if (++digits > 6 || v > kMaxCodepoint) return error("\\u{...} out of range");
                }
                if (pos_ >= s_.size()) return error("unterminated \\u{");
                ++pos_;
                *cp = v;
                return {};
            }
            auto v = parse_hex(4);
            if (!v.ok()) return v.status();
            *cp = *v;
            return {};
        }
        case 'b':
        case 'B':
            return error("word boundaries (\\b, \\B) are not supported");
        default:
            break;
        }
        if (e >= '1' && e <= '9') return error("backreferences are not supported");
        if (std::isalnum(static_cast<unsigned char>(e))) return error(std::string("unknown escape \\") + e);
        --pos_;
        auto v = next_codepoint();
        if (!v.ok()) return v.status();
        *cp = *v;
        return {};
    }

    core::Result<CodepointRanges> parse_class() {
        // s_[pos_ - 1] == '['
        bool negate = false;
        if (pos_ < s_.size() && s_[pos_] == '^') negate = true, ++pos_;
        CodepointRanges set;
        bool first = true;
        while (true) {
            if (pos_ >= s_.size()) return error("unterminated character class");
            if (s_[pos_] == ']' && !first) break;
            if (s_[pos_] == ']' && first) { // ECMAScript: [] matches nothing, [^] anything
                break;
            }
            first = false;
            CodepointRanges sub;
            uint32_t lo = 0;
            bool is_class = false;
            if (s_[pos_] == '\\') {
                ++pos_;
                if (pos_ < s_.size() && s_[pos_] == 'b') { // [\b] is backspace
                    ++pos_;
                    lo = 8;
                } else {
                    DI_RETURN_IF_ERROR(parse_escape(&sub, &lo, &is_class, /*big=*/negate));
                }
            } else {
                DI_ASSIGN_OR_RETURN(lo, next_codepoint());
            }
            if (is_class) {
                set.insert(set.end(), sub.begin(), sub.end());
                continue;
            }
            uint32_t hi = lo;
            if (pos_ + 1 < s_.size() && s_[pos_] == '-' && s_[pos_ + 1] != ']') {
                ++pos_;
                bool hi_class = false;
                if (s_[pos_] == '\\') {
                    ++pos_;
                    DI_RETURN_IF_ERROR(parse_escape(&sub, &hi, &hi_class));
                    if (hi_class) return error("a class escape cannot end a range");
                } else {
                    DI_ASSIGN_OR_RETURN(hi, next_codepoint());
                }
                if (hi < lo) return error("range out of order in character class");
            }
            set.emplace_back(lo, hi);
        }
        ++pos_; // ']'
        return negate ? complement_ranges(set) : normalize_ranges(set);
    }

    core::Result<std::string> parse_atom() {
        const char c = s_[pos_];
        if (c == '(') {
            ++pos_;
            if (s_.substr(pos_, 2) == "?:") {
                pos_ += 2;
            } else if (s_.substr(pos_, 2) == "?<" && s_.substr(pos_, 3) != "?<=" &&
                       s_.substr(pos_, 3) != "?<!") {
                const std::size_t end = s_.find('>', pos_);
                if (end == std::string_view::npos) return error("unterminated group name");
                pos_ = end + 1;
            } else if (pos_ < s_.size() && s_[pos_] == '?') {
                return error("lookaround and other (?...) groups are not supported");
            }
            std::vector<std::string> alts;
            while (true) {
                DI_ASSIGN_OR_RETURN(std::string seq, parse_sequence(false));
                alts.push_back(seq.empty() ? "\"\"" : seq);
                if (pos_ >= s_.size()) return error("missing ')'");
                if (s_[pos_] == '|') {
                    ++pos_;
                    continue;
                }
                if (s_[pos_] == ')') {
                    ++pos_;
                    break;
                }
                return error("'^' or '$' inside the pattern is not supported (only at its ends)");
            }
            std::string out = "(";
            for (std::size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
            return out + ")";
        }
        if (c == '[') {
            ++pos_;
            DI_ASSIGN_OR_RETURN(CodepointRanges set, parse_class());
            return class_expr(set);
        }
        if (c == '.') {
            ++pos_;
            return class_expr(kDot);
        }
        if (c == '\\') {
            ++pos_;
            CodepointRanges set;
            uint32_t cp = 0;
            bool is_class = false;
            DI_RETURN_IF_ERROR(parse_escape(&set, &cp, &is_class));
            if (is_class) return class_expr(set);
            return literal_expr(cp);
        }
        if (c == '*' || c == '+' || c == '?') return error("nothing to repeat");
        DI_ASSIGN_OR_RETURN(uint32_t cp, next_codepoint());
        return literal_expr(cp);
    }

    core::Result<std::string> parse_sequence(bool top) {
        std::string out;
        while (pos_ < s_.size()) {
            const char c = s_[pos_];
            if (c == '|' || c == ')') break;
            if (c == '$') {
                if (top && pos_ + 1 == s_.size()) break;
                if (top && s_[pos_ + 1] == '|') break;
                return error("'$' inside the pattern is not supported (only at its end)");
            }
            if (c == '^') return error("'^' inside the pattern is not supported (only at its start)");
            DI_ASSIGN_OR_RETURN(std::string atom, parse_atom());
            // Quantifiers.
            while (pos_ < s_.size()) {
                const char q = s_[pos_];
                int64_t lo = 0, hi = 0;
                if (q == '*')
                    lo = 0, hi = -1, ++pos_;
                else if (q == '+')
                    lo = 1, hi = -1, ++pos_;
                else if (q == '?')
                    lo = 0, hi = 1, ++pos_;
                else if (q == '{') {
                    std::size_t p = pos_ + 1;
                    auto num = [&](int64_t* v) {
                        const std::size_t b = p;
                        *v = 0;
                        while (p < s_.size() && std::isdigit(static_cast<unsigned char>(s_[p])) &&
                               *v <= kMaxRepeat)
                            *v = *v * 10 + (s_[p++] - '0');
                        return p > b;
                    };
                    if (!num(&lo)) break; // a literal '{' (ECMAScript Annex B)
                    hi = lo;
                    if (p < s_.size() && s_[p] == ',') {
                        ++p;
                        if (!num(&hi)) hi = -1;
                    }
                    if (p >= s_.size() || s_[p] != '}') break;
                    pos_ = p + 1;
                    if (lo > kMaxRepeat || hi > kMaxRepeat)
                        return error("repetition bound over " + std::to_string(kMaxRepeat));
                    if (hi >= 0 && hi < lo) return error("numbers out of order in {m,n}");
                } else {
                    break;
                }
                if (pos_ < s_.size() && s_[pos_] == '?') ++pos_; // lazy: same language
                std::string rep = hi < 0               ? (lo == 0   ? "*"
                                                          : lo == 1 ? "+"
                                                                    : "{" + std::to_string(lo) + ",}")
                                  : lo == 0 && hi == 1 ? "?"
                                  : lo == hi           ? "{" + std::to_string(lo) + "}"
                                             : "{" + std::to_string(lo) + "," + std::to_string(hi) + "}";
                atom = "(" + atom + ")" + rep;
            }
            out += (out.empty() ? "" : " ") + atom;
        }
        return out;
    }

    std::string_view s_;
    RegexOptions opt_;
    std::size_t pos_ = 0;
};

} // namespace

std::string gbnf_literal(std::string_view bytes) {
    std::string out = "\"";
    for (unsigned char c : bytes) {
        if (c == '"' || c == '\\') {
            out += '\\';
            out += static_cast<char>(c);
        } else if (c < 0x20 || c == 0x7F) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\x%02X", c);
            out += buf;
        } else {
            out += static_cast<char>(c);
        }
    }
    return out + "\"";
}

std::string json_escape_codepoint(uint32_t cp) {
    switch (cp) {
    case '"':
        return "\\\"";
    case '\\':
        return "\\\\";
    case '\n':
        return "\\n";
    case '\r':
        return "\\r";
    case '\t':
        return "\\t";
    case '\b':
        return "\\b";
    case '\f':
        return "\\f";
    default:
        break;
    }
    if (cp < 0x20) {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\u%04x", cp);
        return buf;
    }
    std::string out;
    append_utf8(cp, out);
    return out;
}

core::Result<std::string> regex_to_gbnf_expr(std::string_view pattern, RegexOptions options) {
    return RegexParser(pattern, options).parse();
}

core::Result<std::string> regex_to_gbnf(std::string_view pattern, RegexOptions options) {
    DI_ASSIGN_OR_RETURN(std::string expr, regex_to_gbnf_expr(pattern, options));
    return "root ::= " + expr + "\n";
}

} // namespace deepinfer::structured
