#include "structured/gbnf.h"

#include <unordered_map>

namespace deepinfer::structured {

namespace {

bool is_name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

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

class Parser {
public:
    explicit Parser(std::string_view text) : s_(text) {}

    core::Result<GrammarAst> parse(std::string_view root) {
        skip_space(true);
        while (pos_ < s_.size()) {
            const std::size_t name_pos = pos_;
            std::string name = parse_name();
            if (name.empty()) return error("expected a rule name");
            skip_space(false);
            if (s_.substr(pos_, 3) != "::=") return error("expected '::=' after rule name '" + name + "'");
            pos_ += 3;
            skip_space(true);
            DI_ASSIGN_OR_RETURN(Expr body, parse_alternates(false));
            const int32_t id = rule_id(name);
            if (defined_[id]) {
                pos_ = name_pos;
                return error("rule '" + name + "' is defined twice");
            }
            defined_[id] = true;
            ast_.bodies[id] = std::move(body);
            skip_space(true);
        }
        for (std::size_t i = 0; i < ast_.names.size(); ++i)
            if (!defined_[i])
                return core::invalid_argument("grammar: rule '" + ast_.names[i] +
                                              "' is used but not defined");
        auto it = ids_.find(std::string(root));
        if (it == ids_.end()) return core::invalid_argument("grammar: no '" + std::string(root) + "' rule");
        ast_.root = it->second;
        return std::move(ast_);
    }

private:
    core::Status error(const std::string& what) const {
        int line = 1, col = 1;
        for (std::size_t i = 0; i < pos_ && i < s_.size(); ++i) {
            if (s_[i] == '\n')
                ++line, col = 1;
            else
                ++col;
        }
        return core::invalid_argument("grammar line " + std::to_string(line) + " column " +
                                      std::to_string(col) + ": " + what);
    }

    int32_t rule_id(const std::string& name) {
        auto [it, fresh] = ids_.try_emplace(name, static_cast<int32_t>(ast_.names.size()));
        if (fresh) {
            ast_.names.push_back(name);
            ast_.bodies.emplace_back();
            defined_.push_back(false);
        }
        return it->second;
    }

    void skip_space(bool newlines) {
        while (pos_ < s_.size()) {
            const char c = s_[pos_];
            if (c == '#') {
                while (pos_ < s_.size() && s_[pos_] != '\n') ++pos_;
            } else if (c == ' ' || c == '\t' || c == '\r' || (newlines && c == '\n')) {
                ++pos_;
            } else {
                break;
            }
        }
    }

    std::string parse_name() {
        const std::size_t b = pos_;
        while (pos_ < s_.size() && is_name_char(s_[pos_])) ++pos_;
        return std::string(s_.substr(b, pos_ - b));
    }

    // At top level a line break ends the rule, unless the next line continues with '|'.
    core::Result<Expr> parse_alternates(bool nested) {
        std::vector<Expr> alts;
        while (true) {
            DI_ASSIGN_OR_RETURN(Expr seq, parse_sequence(nested));
            alts.push_back(std::move(seq));
            const std::size_t save = pos_;
            skip_space(true);
            if (pos_ < s_.size() && s_[pos_] == '|') {
                ++pos_;
                skip_space(true);
                continue;
            }
            if (!nested) pos_ = save;
            break;
        }
        return alts.size() == 1 ? std::move(alts[0]) : Expr::alt(std::move(alts));
    }

    core::Result<uint32_t> parse_hex(int n) {
        uint32_t v = 0;
        for (int i = 0; i < n; ++i, ++pos_) {
            if (pos_ >= s_.size()) return error("truncated escape");
            const char c = s_[pos_];
            int d = c >= '0' && c <= '9'   ? c - '0'
                    : c >= 'a' && c <= 'f' ? c - 'a' + 10
                    : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                           : -1;
            if (d < 0) return error("bad hex digit in escape");
            v = v * 16 + static_cast<uint32_t>(d);
        }
        if (v > kMaxCodepoint) return error("code point out of range");
        return v;
    }

    // One (possibly escaped) code point of a literal or class.
    core::Result<uint32_t> parse_char() {
        if (pos_ >= s_.size()) return error("unexpected end of grammar");
        unsigned char c = static_cast<unsigned char>(s_[pos_]);
        if (c == '\\') {
            ++pos_;
            if (pos_ >= s_.size()) return error("truncated escape");
            const char e = s_[pos_++];
            switch (e) {
            case 'n':
                return uint32_t{'\n'};
            case 'r':
                return uint32_t{'\r'};
            case 't':
                return uint32_t{'\t'};
            case '0':
                return uint32_t{0};
            case 'x':
                return parse_hex(2);
            case 'u':
                return parse_hex(4);
            case 'U':
                return parse_hex(8);
            case '\\':
            case '"':
            case '[':
            case ']':
            case '-':
            case '^':
            case '\'':
            case '/':
            case '.':
                return static_cast<uint32_t>(static_cast<unsigned char>(e));
            default:
                --pos_;
                return error(std::string("unknown escape '\\") + e + "'");
            }
        }
        // A UTF-8 sequence.
        int n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        if (n == 0 || pos_ + n > s_.size()) return error("invalid UTF-8 in grammar");
        uint32_t cp = n == 1 ? c : n == 2 ? c & 0x1F : n == 3 ? c & 0x0F : c & 0x07;
        for (int i = 1; i < n; ++i) {
            const unsigned char d = static_cast<unsigned char>(s_[pos_ + i]);
            if ((d & 0xC0) != 0x80) return error("invalid UTF-8 in grammar");
            cp = (cp << 6) | (d & 0x3F);
        }
        pos_ += n;
        return cp;
    }

    core::Result<int32_t> parse_int() {
        const std::size_t b = pos_;
        int64_t v = 0;
        while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') {
            v = v * 10 + (s_[pos_++] - '0');
            if (v > kMaxRepeat) return error("repetition bound over " + std::to_string(kMaxRepeat));
        }
        if (pos_ == b) return error("expected a number");
        return static_cast<int32_t>(v);
    }

    core::Result<Expr> parse_sequence(bool nested) {
        std::vector<Expr> items;
        while (pos_ < s_.size()) {
            const char c = s_[pos_];
            Expr item;
            if (c == '"') {
                ++pos_;
                std::string bytes;
                while (true) {
                    if (pos_ >= s_.size()) return error("unterminated string literal");
                    if (s_[pos_] == '"') break;
                    DI_ASSIGN_OR_RETURN(uint32_t cp, parse_char());
                    append_utf8(cp, bytes);
                }
                ++pos_;
                item = Expr::literal(std::move(bytes));
            } else if (c == '[') {
                ++pos_;
                bool negate = false;
                if (pos_ < s_.size() && s_[pos_] == '^') negate = true, ++pos_;
                CodepointRanges ranges;
                while (true) {
                    if (pos_ >= s_.size()) return error("unterminated character class");
                    if (s_[pos_] == ']') break;
                    DI_ASSIGN_OR_RETURN(uint32_t lo, parse_char());
                    uint32_t hi = lo;
                    if (pos_ + 1 < s_.size() && s_[pos_] == '-' && s_[pos_ + 1] != ']') {
                        ++pos_;
                        DI_ASSIGN_OR_RETURN(hi, parse_char());
                        if (hi < lo) return error("character class range is reversed");
                    }
                    ranges.emplace_back(lo, hi);
                }
                ++pos_;
                item = Expr::cls(negate ? complement_ranges(ranges) : std::move(ranges));
            } else if (c == '.') {
                ++pos_;
                item = Expr::cls({{0, kMaxCodepoint}});
            } else if (c == '(') {
                ++pos_;
                skip_space(true);
                DI_ASSIGN_OR_RETURN(item, parse_alternates(true));
                skip_space(true);
                if (pos_ >= s_.size() || s_[pos_] != ')') return error("expected ')'");
                ++pos_;
            } else if (is_name_char(c)) {
                const std::size_t save = pos_;
                std::string name = parse_name();
                skip_space(false);
                if (s_.substr(pos_, 3) == "::=") { // the next rule starts here
                    pos_ = save;
                    break;
                }
                pos_ = save + name.size();
                item = Expr::ref(rule_id(name));
            } else {
                break;
            }
            // Postfix operators.
            while (pos_ < s_.size()) {
                const char op = s_[pos_];
                if (op == '*')
                    item = Expr::repeat(std::move(item), 0, -1), ++pos_;
                else if (op == '+')
                    item = Expr::repeat(std::move(item), 1, -1), ++pos_;
                else if (op == '?')
                    item = Expr::repeat(std::move(item), 0, 1), ++pos_;
                else if (op == '{') {
                    ++pos_;
                    skip_space(false);
                    DI_ASSIGN_OR_RETURN(int32_t lo, parse_int());
                    int32_t hi = lo;
                    skip_space(false);
                    if (pos_ < s_.size() && s_[pos_] == ',') {
                        ++pos_;
                        skip_space(false);
                        hi = -1;
                        if (pos_ < s_.size() && s_[pos_] != '}') {
                            DI_ASSIGN_OR_RETURN(hi, parse_int());
                            if (hi < lo) return error("repetition {m,n} with n < m");
                        }
                        skip_space(false);
                    }
                    if (pos_ >= s_.size() || s_[pos_] != '}') return error("expected '}'");
                    ++pos_;
                    item = Expr::repeat(std::move(item), lo, hi);
                } else
                    break;
            }
            items.push_back(std::move(item));
            skip_space(nested);
        }
        return items.size() == 1 ? std::move(items[0]) : Expr::seq(std::move(items));
    }

    std::string_view s_;
    std::size_t pos_ = 0;
    GrammarAst ast_;
    std::unordered_map<std::string, int32_t> ids_;
    std::vector<bool> defined_;
};

} // namespace

core::Result<GrammarAst> parse_gbnf(std::string_view text, std::string_view root) {
    return Parser(text).parse(root);
}

} // namespace deepinfer::structured
