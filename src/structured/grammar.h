#pragma once
// The grammar IR every front end (GBNF, regex, JSON Schema) compiles to, and its compiled form.
//
//   GrammarAst: named rules, each an expression over literals, code point classes, rule references,
//               sequences, alternatives and bounded/unbounded repetition (what GBNF can write).
//   Grammar:    a byte-level recursive transition network: every rule becomes a small NFA whose edges
//               are byte ranges (code point classes expanded to UTF-8 byte-range sequences), epsilon
//               moves, or calls of other rules. Repetition is a loop inside the rule's NFA (no stack
//               growth); rule references are calls (a stack, so nesting and recursion are exact).
//
// compile_grammar() rejects left recursion (a rule that can reach itself without consuming a byte), which
// a pushdown matcher could not run; write such rules with repetition instead (`a ::= b ("," b)*`).

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"

namespace deepinfer::structured {

// Inclusive code point ranges, sorted and disjoint after normalize_ranges().
using CodepointRanges = std::vector<std::pair<uint32_t, uint32_t>>;
constexpr uint32_t kMaxCodepoint = 0x10FFFF;

CodepointRanges normalize_ranges(CodepointRanges r);
CodepointRanges complement_ranges(const CodepointRanges& r); // within [0, kMaxCodepoint]

struct Expr {
    enum class Kind { kSeq, kAlt, kBytes, kClass, kRef, kRepeat };
    Kind kind = Kind::kSeq;
    std::vector<Expr> items; // kSeq / kAlt: the parts; kRepeat: items[0]
    std::string bytes;       // kBytes: literal bytes (UTF-8)
    CodepointRanges ranges;  // kClass: normalized
    int32_t rule = -1;       // kRef
    int32_t min = 0;         // kRepeat
    int32_t max = -1;        // kRepeat: -1 = unbounded

    static Expr seq(std::vector<Expr> items);
    static Expr alt(std::vector<Expr> items);
    static Expr literal(std::string bytes);
    static Expr cls(CodepointRanges ranges);
    static Expr ref(int32_t rule);
    static Expr repeat(Expr item, int32_t min, int32_t max);
};

struct GrammarAst {
    std::vector<std::string> names;
    std::vector<Expr> bodies; // [names.size()]
    int32_t root = -1;
};

struct ByteEdge {
    uint8_t lo = 0, hi = 0; // inclusive
    int32_t target = 0;
};
struct CallEdge {
    int32_t rule = 0;
    int32_t ret = 0; // node to continue at when the rule ends
};
struct Node {
    std::vector<ByteEdge> edges;
    std::vector<int32_t> eps;
    std::vector<CallEdge> calls;
    bool final = false; // the rule may end here
    bool tail = false;  // only epsilon moves to the rule's end follow: returning here = returning further
};

struct Grammar {
    std::vector<Node> nodes;
    std::vector<int32_t> rule_start; // [rules]
    std::vector<std::string> rule_names;
    int32_t root = 0;
};

// Limits that keep a hostile grammar from exhausting memory: repetition bounds and total NFA size.
constexpr int32_t kMaxRepeat = 10000;
constexpr std::size_t kMaxNodes = 1'000'000;

core::Result<Grammar> compile_grammar(const GrammarAst& ast);

// UTF-8 encodings of a code point range as sequences of byte ranges (surrogates excluded), e.g.
// [0x80, 0x7FF] -> {[C2-DF][80-BF]}. Exposed for tests.
std::vector<std::vector<std::pair<uint8_t, uint8_t>>> utf8_sequences(uint32_t lo, uint32_t hi);

} // namespace deepinfer::structured
