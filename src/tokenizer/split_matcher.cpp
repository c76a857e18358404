#include "tokenizer/split_matcher.h"

#include <string>

#include "tokenizer/cancel.h"
#include "tokenizer/utf8.h"

namespace deepinfer::tokenizer {

namespace {

using core::Result;
using core::Status;

struct Node {
    enum Kind { kClass, kConcat, kAlt, kRepeat, kLook } kind = kConcat;
    std::uint32_t cls = 0;
    std::vector<Node> kids;
    int min = 0, max = 0; // kRepeat; max < 0 is unbounded
    bool negate = false;  // kLook
};

constexpr int kMaxRepeat = 1000;

// Recursive-descent parser for the subset in split_matcher.h.
class Parser {
public:
    Parser(std::string_view p, std::vector<SplitMatcher::CharClass>& classes) : p_(p), classes_(classes) {}

    Result<Node> parse() {
        auto n = alternation();
        if (!n.ok()) return n;
        if (i_ != p_.size()) return error("unbalanced ')'");
        return n;
    }

private:
    Status error(const std::string& what) const {
        return core::unimplemented("split pattern '" + std::string(p_) + "' at offset " + std::to_string(i_) +
                                   ": " + what);
    }
    bool at_end() const { return i_ >= p_.size(); }
    char peek() const { return p_[i_]; }

    // Next code point of the pattern (the pattern is UTF-8).
    Result<char32_t> next_cp() {
        const std::size_t len = utf8::valid_sequence_length(p_, i_);
        if (len == 0) return error("invalid UTF-8");
        std::size_t n = 0;
        const char32_t cp = utf8::decode_at(p_, i_, &n);
        i_ += len;
        return cp;
    }

    Result<Node> alternation() {
        Node alt;
        alt.kind = Node::kAlt;
        for (;;) {
            auto c = concatenation();
            if (!c.ok()) return c;
            alt.kids.push_back(std::move(c).value());
            if (at_end() || peek() != '|') break;
            ++i_;
        }
        if (alt.kids.size() == 1) return std::move(alt.kids[0]);
        return alt;
    }

    Result<Node> concatenation() {
        Node cat;
        cat.kind = Node::kConcat;
        while (!at_end() && peek() != '|' && peek() != ')') {
            auto a = atom();
            if (!a.ok()) return a;
            Node n = std::move(a).value();
            for (;;) {
                auto q = quantifier(n);
                if (!q.ok()) return q.status();
                if (!q.value()) break;
            }
            cat.kids.push_back(std::move(n));
        }
        return cat;
    }

    // Wraps n in a repeat when a quantifier follows; returns whether one did.
    Result<bool> quantifier(Node& n) {
        if (at_end()) return false;
        int mn = 0, mx = 0;
        const char c = peek();
        if (c == '?') {
            mn = 0, mx = 1;
            ++i_;
        } else if (c == '*') {
            mn = 0, mx = -1;
            ++i_;
        } else if (c == '+') {
            mn = 1, mx = -1;
            ++i_;
        } else if (c == '{') {
            std::size_t j = i_ + 1;
            auto number = [&](int& v) {
                const std::size_t s = j;
                v = 0;
                while (j < p_.size() && p_[j] >= '0' && p_[j] <= '9' && v <= kMaxRepeat)
                    v = v * 10 + (p_[j++] - '0');
                return j > s;
            };
            bool has_min = number(mn);
            if (j < p_.size() && p_[j] == ',') {
                ++j;
                if (!number(mx)) mx = -1;
            } else {
                mx = mn;
            }
            if (!has_min || j >= p_.size() || p_[j] != '}') return error("'{' that is not an interval");
            i_ = j + 1;
            if (mn > kMaxRepeat || mx > kMaxRepeat || (mx >= 0 && mx < mn))
                return error("interval out of range");
        } else {
            return false;
        }
        if (!at_end() && (peek() == '?' || peek() == '+')) return error("lazy or possessive quantifier");
        Node r;
        r.kind = Node::kRepeat;
        r.min = mn;
        r.max = mx;
        r.kids.push_back(std::move(n));
        n = std::move(r);
        return true;
    }

    Result<Node> atom() {
        const char c = peek();
        if (c == '(') {
            ++i_;
            Node look;
            bool is_look = false;
            if (p_.substr(i_, 2) == "?:") {
                i_ += 2;
            } else if (p_.substr(i_, 2) == "?=" || p_.substr(i_, 2) == "?!") {
                is_look = true;
                look.kind = Node::kLook;
                look.negate = p_[i_ + 1] == '!';
                i_ += 2;
            } else if (!at_end() && peek() == '?') {
                return error("group syntax '(?" + std::string(p_.substr(i_ + 1, 1)) + "'");
            }
            auto inner = alternation();
            if (!inner.ok()) return inner;
            if (at_end() || peek() != ')') return error("missing ')'");
            ++i_;
            if (!is_look) return inner;
            look.kids.push_back(std::move(inner).value());
            return look;
        }
        if (c == '[') return bracket();
        if (c == '.' || c == '^' || c == '$') return error(std::string("'") + c + "'");
        if (c == '*' || c == '+' || c == '?') return error("quantifier without operand");
        SplitMatcher::CharClass cc;
        if (c == '\\') {
            auto st = escape(cc);
            if (!st.ok()) return st.status();
        } else {
            auto cp = next_cp();
            if (!cp.ok()) return cp.status();
            cc.ranges.push_back({cp.value(), cp.value()});
        }
        return class_node(std::move(cc));
    }

    Node class_node(SplitMatcher::CharClass cc) {
        for (char32_t cp = 0; cp < 128; ++cp)
            if (cc.contains_slow(cp)) cc.ascii[cp >> 6] |= std::uint64_t{1} << (cp & 63);
        Node n;
        n.kind = Node::kClass;
        n.cls = static_cast<std::uint32_t>(classes_.size());
        classes_.push_back(std::move(cc));
        return n;
    }

    // After '\\' (i_ at the backslash): a single character into *single, or a class item into cc.
    // Returns whether it was a single character (usable as a range end).
    Result<bool> escape(SplitMatcher::CharClass& cc, char32_t* single = nullptr) {
        ++i_;
        if (at_end()) return error("trailing '\\'");
        const char e = p_[i_++];
        char32_t cp = 0;
        switch (e) {
        case 'r':
            cp = '\r';
            break;
        case 'n':
            cp = '\n';
            break;
        case 't':
            cp = '\t';
            break;
        case 'f':
            cp = '\f';
            break;
        case 'v':
            cp = '\v';
            break;
        case 'a':
            cp = 0x07;
            break;
        case 'e':
            cp = 0x1B;
            break;
        case 's':
            cc.space = true;
            return false;
        case 'S':
            cc.not_space = true;
            return false;
        case 'p':
        case 'P': {
            bool neg = e == 'P';
            if (at_end() || peek() != '{') return error("\\p without '{'");
            const std::size_t close = p_.find('}', i_);
            if (close == std::string_view::npos) return error("\\p{ without '}'");
            std::string_view name = p_.substr(i_ + 1, close - i_ - 1);
            if (!name.empty() && name[0] == '^') {
                neg = !neg;
                name.remove_prefix(1);
            }
            auto mask = unicode::gc_mask_for_name(name);
            if (!mask) return error("property \\p{" + std::string(name) + "} is not a general category");
            i_ = close + 1;
            if (neg) {
                cc.has_not_gc = true;
                cc.not_gc &= *mask;
            } else {
                cc.gc |= *mask;
            }
            return false;
        }
        default:
            if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z') || (e >= '0' && e <= '9'))
                return error(std::string("escape '\\") + e + "'");
            --i_; // escaped punctuation or non-ASCII: the character itself
            {
                auto c = next_cp();
                if (!c.ok()) return c.status();
                cp = c.value();
            }
        }
        if (single)
            *single = cp;
        else
            cc.ranges.push_back({cp, cp});
        return true;
    }

    Result<Node> bracket() {
        ++i_; // '['
        SplitMatcher::CharClass cc;
        if (!at_end() && peek() == '^') {
            cc.negated = true;
            ++i_;
        }
        bool first = true;
        for (;;) {
            if (at_end()) return error("missing ']'");
            char c = peek();
            if (c == ']' && !first) {
                ++i_;
                break;
            }
            first = false;
            if (c == '[') return error("nested class");
            if (c == '&' && p_.substr(i_, 2) == "&&") return error("class intersection");
            char32_t lo = 0;
            if (c == '\\') {
                auto r = escape(cc, &lo);
                if (!r.ok()) return r.status();
                if (!r.value()) continue; // a class item (\s, \p{..})
            } else {
                auto cp = next_cp();
                if (!cp.ok()) return cp.status();
                lo = cp.value();
            }
            char32_t hi = lo;
            if (i_ + 1 < p_.size() && peek() == '-' && p_[i_ + 1] != ']') {
                ++i_;
                if (peek() == '\\') {
                    auto r = escape(cc, &hi);
                    if (!r.ok()) return r.status();
                    if (!r.value()) return error("range ending in a class");
                } else if (peek() == '[') {
                    return error("nested class");
                } else {
                    auto cp = next_cp();
                    if (!cp.ok()) return cp.status();
                    hi = cp.value();
                }
                if (hi < lo) return error("empty range");
            }
            cc.ranges.push_back({lo, hi});
        }
        return class_node(std::move(cc));
    }

    std::string_view p_;
    std::size_t i_ = 0;
    std::vector<SplitMatcher::CharClass>& classes_;
};

bool nullable(const Node& n) {
    switch (n.kind) {
    case Node::kClass:
        return false;
    case Node::kConcat:
        for (const Node& k : n.kids)
            if (!nullable(k)) return false;
        return true;
    case Node::kAlt:
        for (const Node& k : n.kids)
            if (nullable(k)) return true;
        return false;
    case Node::kRepeat:
        return n.min == 0 || nullable(n.kids[0]);
    case Node::kLook:
        return true;
    }
    return true;
}

class Compiler {
public:
    explicit Compiler(std::vector<SplitMatcher::Inst>& prog) : prog_(prog) {}

    Status emit(const Node& n) {
        using Inst = SplitMatcher::Inst;
        switch (n.kind) {
        case Node::kClass:
            push({Inst::kClass, false, n.cls, 0});
            break;
        case Node::kConcat:
            for (const Node& k : n.kids) DI_RETURN_IF_ERROR(emit(k));
            break;
        case Node::kAlt: {
            std::vector<std::uint32_t> jumps;
            for (std::size_t i = 0; i + 1 < n.kids.size(); ++i) {
                const std::uint32_t split = push({Inst::kSplit, false, 0, 0});
                prog_[split].x = pc();
                DI_RETURN_IF_ERROR(emit(n.kids[i]));
                jumps.push_back(push({Inst::kJmp, false, 0, 0}));
                prog_[split].y = pc();
            }
            DI_RETURN_IF_ERROR(emit(n.kids.back()));
            for (std::uint32_t j : jumps) prog_[j].x = pc();
            break;
        }
        case Node::kRepeat: {
            const Node& body = n.kids[0];
            if (body.kind == Node::kClass) {
                Inst r{Inst::kRepeatClass, false, body.cls, static_cast<std::uint32_t>(n.min)};
                r.max = n.max < 0 ? SplitMatcher::kUnbounded : static_cast<std::uint32_t>(n.max);
                push(r);
                break;
            }
            for (int i = 0; i < n.min; ++i) DI_RETURN_IF_ERROR(emit(body));
            if (n.max < 0) {
                if (nullable(body))
                    return core::unimplemented("unbounded repeat of an expression that can match empty");
                const std::uint32_t loop = push({Inst::kSplit, false, 0, 0});
                prog_[loop].x = pc();
                DI_RETURN_IF_ERROR(emit(body));
                push({Inst::kJmp, false, loop, 0});
                prog_[loop].y = pc();
            } else {
                std::vector<std::uint32_t> splits;
                for (int i = n.min; i < n.max; ++i) {
                    splits.push_back(push({Inst::kSplit, false, 0, 0}));
                    prog_[splits.back()].x = pc();
                    DI_RETURN_IF_ERROR(emit(body));
                }
                for (std::uint32_t s : splits) prog_[s].y = pc();
            }
            break;
        }
        case Node::kLook: {
            const std::uint32_t look = push({Inst::kLookahead, n.negate, 0, 0});
            prog_[look].x = pc();
            DI_RETURN_IF_ERROR(emit(n.kids[0]));
            push({Inst::kMatch, false, 0, 0});
            prog_[look].y = pc();
            break;
        }
        }
        if (prog_.size() > 100000) return core::unimplemented("pattern too large");
        return Status::ok_status();
    }

private:
    std::uint32_t pc() const { return static_cast<std::uint32_t>(prog_.size()); }
    std::uint32_t push(SplitMatcher::Inst in) {
        prog_.push_back(in);
        return pc() - 1;
    }
    std::vector<SplitMatcher::Inst>& prog_;
};

struct Frame {
    std::uint32_t pc;
    std::size_t pos;
    std::size_t floor = 0;  // give-back frames: the repeat may not give back below this position
    bool give_back = false; // a kRepeatClass frame (pc is the repeat), not a split's alternative
};

// The code point at s[pos] (pos < size) and its length. The subject is valid UTF-8 by contract; a
// truncated sequence still stays in bounds (read as U+FFFD, one byte).
inline char32_t decode(std::string_view s, std::size_t pos, std::size_t& len) {
    const auto b = static_cast<unsigned char>(s[pos]);
    if (b < 0x80) {
        len = 1;
        return b;
    }
    len = b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
    if (b < 0xC0 || pos + len > s.size()) {
        len = 1;
        return 0xFFFD;
    }
    char32_t cp = b & (len == 2 ? 0x1F : len == 3 ? 0x0F : 0x07);
    for (std::size_t k = 1; k < len; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[pos + k]) & 0x3F);
    return cp;
}

std::vector<Frame>& backtrack_stack() {
    thread_local std::vector<Frame> stack;
    return stack;
}

} // namespace

bool SplitMatcher::CharClass::contains_slow(char32_t cp) const {
    bool in = false;
    for (const auto& [lo, hi] : ranges)
        if (cp >= lo && cp <= hi) {
            in = true;
            break;
        }
    if (!in && (gc != 0 || has_not_gc)) {
        const unicode::GcMask bit = unicode::gc_bit(unicode::general_category(cp));
        in = (gc & bit) != 0 || (has_not_gc && (not_gc & bit) == 0);
    }
    if (!in && (space || not_space)) {
        const bool ws = unicode::is_white_space(cp);
        in = (space && ws) || (not_space && !ws);
    }
    return in != negated;
}

Result<SplitMatcher> SplitMatcher::compile(std::string_view pattern) {
    SplitMatcher m;
    Parser parser(pattern, m.classes_);
    auto root = parser.parse();
    if (!root.ok()) return root.status();
    Compiler compiler(m.prog_);
    Status st = compiler.emit(root.value());
    if (!st.ok()) return core::unimplemented("split pattern '" + std::string(pattern) + "': " + st.message());
    m.prog_.push_back({Inst::kMatch, false, 0, 0});
    m.compute_first_classes();
    return m;
}

void SplitMatcher::compute_first_classes() {
    first_classes_.clear();
    std::vector<bool> seen(prog_.size(), false);
    std::vector<std::uint32_t> todo{0};
    while (!todo.empty()) {
        const std::uint32_t pc = todo.back();
        todo.pop_back();
        if (seen[pc]) continue;
        seen[pc] = true;
        const Inst& in = prog_[pc];
        switch (in.op) {
        case Inst::kRepeatClass:
            if (in.y == 0) todo.push_back(pc + 1); // may match nothing: what follows can start
            [[fallthrough]];
        case Inst::kClass:
            first_classes_.push_back(in.x);
            first_ascii_[0] |= classes_[in.x].ascii[0];
            first_ascii_[1] |= classes_[in.x].ascii[1];
            break;
        case Inst::kSplit:
            todo.push_back(in.x);
            todo.push_back(in.y);
            break;
        case Inst::kJmp:
            todo.push_back(in.x);
            break;
        case Inst::kLookahead:
        case Inst::kMatch:
            first_classes_.clear();
            return; // no filter
        }
    }
}

void SplitMatcher::find_all(std::string_view s, std::vector<Span>& out) const {
    std::size_t pos = 0, next_check = kCancelCheckBytes;
    while (pos <= s.size()) {
        if (pos >= next_check) { // a huge subject: stop early when the encode is cancelled (cancel.h)
            if (encode_cancelled()) return;
            next_check = pos + kCancelCheckBytes;
        }
        std::size_t start = pos, end = kNoMatch;
        while (start < s.size()) {
            std::size_t len = 1;
            const char32_t cp = decode(s, start, len);
            bool may_start = first_classes_.empty();
            if (!may_start && cp < 128) {
                may_start = (first_ascii_[cp >> 6] >> (cp & 63)) & 1;
            } else {
                for (std::uint32_t c : first_classes_)
                    if (classes_[c].contains_slow(cp)) {
                        may_start = true;
                        break;
                    }
            }
            if (may_start && (end = run(s, 0, start)) != kNoMatch) break;
            start += len;
        }
        if (start >= s.size() && end == kNoMatch && first_classes_.empty()) end = run(s, 0, start);
        if (end == kNoMatch) return;
        if (end > start) {
            out.push_back({start, end});
            pos = end;
        } else {
            // Empty match: step over one character.
            if (start >= s.size()) return;
            std::size_t len = 1;
            decode(s, start, len);
            pos = start + len;
        }
    }
}

SplitMatcher SplitMatcher::literal(std::string_view text) {
    SplitMatcher m;
    for (std::size_t i = 0; i < text.size();) {
        std::size_t len = utf8::valid_sequence_length(text, i), n = 0;
        const char32_t cp = len ? utf8::decode_at(text, i, &n) : 0xFFFD;
        i += len ? len : 1;
        CharClass cc;
        cc.ranges.push_back({cp, cp});
        if (cp < 128) cc.ascii[cp >> 6] |= std::uint64_t{1} << (cp & 63);
        m.prog_.push_back({Inst::kClass, false, static_cast<std::uint32_t>(m.classes_.size()), 0});
        m.classes_.push_back(std::move(cc));
    }
    m.prog_.push_back({Inst::kMatch, false, 0, 0});
    m.compute_first_classes();
    return m;
}

std::size_t SplitMatcher::match_at(std::string_view s, std::size_t pos) const {
    return run(s, 0, pos);
}

std::size_t SplitMatcher::run(std::string_view s, std::uint32_t pc, std::size_t pos) const {
    std::vector<Frame>& st = backtrack_stack();
    const std::size_t base = st.size();
    for (;;) {
        const Inst& in = prog_[pc];
        bool fail = false;
        switch (in.op) {
        case Inst::kClass: {
            if (pos >= s.size()) {
                fail = true;
                break;
            }
            std::size_t len = 1;
            const char32_t cp = decode(s, pos, len);
            if (classes_[in.x].contains(cp)) {
                pos += len;
                ++pc;
            } else {
                fail = true;
            }
            break;
        }
        case Inst::kRepeatClass: {
            const std::size_t start = pos;
            std::size_t floor = in.y == 0 ? start : kNoMatch;
            std::uint32_t count = 0;
            while (count < in.max && pos < s.size()) {
                std::size_t len = 1;
                const char32_t cp = decode(s, pos, len);
                if (!classes_[in.x].contains(cp)) break;
                pos += len;
                if (++count == in.y) floor = pos;
            }
            if (count < in.y) {
                fail = true;
                break;
            }
            if (pos > floor) st.push_back({pc, pos, floor, true});
            ++pc;
            break;
        }
        case Inst::kSplit:
            st.push_back({in.y, pos});
            pc = in.x;
            break;
        case Inst::kJmp:
            pc = in.x;
            break;
        case Inst::kLookahead: {
            const bool matched = run(s, in.x, pos) != kNoMatch;
            if (matched != in.negate)
                pc = in.y;
            else
                fail = true;
            break;
        }
        case Inst::kMatch:
            st.resize(base);
            return pos;
        }
        if (fail) {
            if (st.size() == base) return kNoMatch;
            const Frame f = st.back();
            st.pop_back();
            if (f.give_back) {
                // Give back the last character of the repeat and retry what follows it.
                std::size_t p = f.pos - 1;
                while (p > f.floor && (static_cast<unsigned char>(s[p]) & 0xC0) == 0x80) --p;
                if (p > f.floor) st.push_back({f.pc, p, f.floor, true});
                pc = f.pc + 1;
                pos = p;
            } else {
                pc = f.pc;
                pos = f.pos;
            }
        }
    }
}

} // namespace deepinfer::tokenizer
