#include "structured/grammar.h"

#include <algorithm>
#include <map>

namespace deepinfer::structured {

CodepointRanges normalize_ranges(CodepointRanges r) {
    std::sort(r.begin(), r.end());
    CodepointRanges out;
    for (auto [lo, hi] : r) {
        if (lo > hi) continue;
        hi = std::min(hi, kMaxCodepoint);
        if (lo > kMaxCodepoint) continue;
        if (!out.empty() && lo <= out.back().second + 1) {
            out.back().second = std::max(out.back().second, hi);
        } else {
            out.emplace_back(lo, hi);
        }
    }
    return out;
}

CodepointRanges complement_ranges(const CodepointRanges& r) {
    CodepointRanges out;
    uint32_t next = 0;
    for (auto [lo, hi] : normalize_ranges(r)) {
        if (lo > next) out.emplace_back(next, lo - 1);
        next = hi + 1;
    }
    if (next <= kMaxCodepoint) out.emplace_back(next, kMaxCodepoint);
    return out;
}

Expr Expr::seq(std::vector<Expr> items) {
    Expr e;
    e.kind = Kind::kSeq;
    e.items = std::move(items);
    return e;
}
Expr Expr::alt(std::vector<Expr> items) {
    Expr e;
    e.kind = Kind::kAlt;
    e.items = std::move(items);
    return e;
}
Expr Expr::literal(std::string bytes) {
    Expr e;
    e.kind = Kind::kBytes;
    e.bytes = std::move(bytes);
    return e;
}
Expr Expr::cls(CodepointRanges ranges) {
    Expr e;
    e.kind = Kind::kClass;
    e.ranges = normalize_ranges(std::move(ranges));
    return e;
}
Expr Expr::ref(int32_t rule) {
    Expr e;
    e.kind = Kind::kRef;
    e.rule = rule;
    return e;
}
Expr Expr::repeat(Expr item, int32_t min, int32_t max) {
    Expr e;
    e.kind = Kind::kRepeat;
    e.items.push_back(std::move(item));
    e.min = min;
    e.max = max;
    return e;
}

namespace {

void encode(uint32_t cp, uint8_t* out, int n) {
    if (n == 1) {
        out[0] = static_cast<uint8_t>(cp);
        return;
    }
    for (int i = n - 1; i > 0; --i) {
        out[i] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
        cp >>= 6;
    }
    const uint8_t lead[] = {0, 0, 0xC0, 0xE0, 0xF0};
    out[0] = static_cast<uint8_t>(lead[n] | cp);
}

int encoded_length(uint32_t cp) {
    return cp <= 0x7F ? 1 : cp <= 0x7FF ? 2 : cp <= 0xFFFF ? 3 : 4;
}

// The classic split: ranges that cross an encoded-length boundary or whose continuation bytes do not
// span full [80-BF] ranges are cut until each is a product of byte ranges.
void split(uint32_t lo, uint32_t hi, std::vector<std::vector<std::pair<uint8_t, uint8_t>>>& out) {
    if (lo > hi) return;
    if (lo <= 0xDFFF && hi >= 0xD800) {
        if (lo < 0xD800) split(lo, 0xD7FF, out);
        if (hi > 0xDFFF) split(0xE000, hi, out);
        return;
    }
    for (uint32_t b : {0x7Fu, 0x7FFu, 0xFFFFu}) {
        if (lo <= b && hi > b) {
            split(lo, b, out);
            split(b + 1, hi, out);
            return;
        }
    }
    const int n = encoded_length(lo);
    for (int i = 1; i < n; ++i) {
        const uint32_t m = (1u << (6 * i)) - 1;
        if ((lo & ~m) != (hi & ~m)) {
            if ((lo & m) != 0) {
                split(lo, lo | m, out);
                split((lo | m) + 1, hi, out);
                return;
            }
            if ((hi & m) != m) {
                split(lo, (hi & ~m) - 1, out);
                split(hi & ~m, hi, out);
                return;
            }
        }
    }
    uint8_t a[4], b[4];
    encode(lo, a, n);
    encode(hi, b, n);
    std::vector<std::pair<uint8_t, uint8_t>> seq;
    for (int i = 0; i < n; ++i) seq.emplace_back(a[i], b[i]);
    out.push_back(std::move(seq));
}

class Builder {
public:
    explicit Builder(Grammar& g) : g_(g) {}

    int32_t node() {
        g_.nodes.emplace_back();
        return static_cast<int32_t>(g_.nodes.size() - 1);
    }
    void eps(int32_t a, int32_t b) { g_.nodes[a].eps.push_back(b); }

    struct Frag {
        int32_t start, end;
    };

    core::Result<Frag> build(const Expr& e) {
        if (g_.nodes.size() > kMaxNodes)
            return core::resource_exhausted("grammar too large (over " + std::to_string(kMaxNodes) +
                                            " automaton nodes); lower repetition bounds");
        switch (e.kind) {
        case Expr::Kind::kBytes: {
            const int32_t s = node();
            int32_t cur = s;
            for (unsigned char c : e.bytes) {
                const int32_t n = node();
                g_.nodes[cur].edges.push_back({c, c, n});
                cur = n;
            }
            return Frag{s, cur};
        }
        case Expr::Kind::kClass: {
            const int32_t s = node(), end = node();
            // Sequences sharing leading byte ranges share nodes, so fewer alternatives stay live.
            std::map<std::pair<int32_t, std::pair<uint8_t, uint8_t>>, int32_t> next;
            for (auto [lo, hi] : e.ranges) {
                std::vector<std::vector<std::pair<uint8_t, uint8_t>>> seqs;
                split(lo, hi, seqs);
                for (const auto& seq : seqs) {
                    int32_t cur = s;
                    for (std::size_t i = 0; i + 1 < seq.size(); ++i) {
                        auto [it, fresh] = next.try_emplace({cur, seq[i]}, 0);
                        if (fresh) {
                            it->second = node();
                            g_.nodes[cur].edges.push_back({seq[i].first, seq[i].second, it->second});
                        }
                        cur = it->second;
                    }
                    g_.nodes[cur].edges.push_back({seq.back().first, seq.back().second, end});
                }
            }
            return Frag{s, end};
        }
        case Expr::Kind::kRef: {
            const int32_t s = node(), end = node();
            g_.nodes[s].calls.push_back({e.rule, end});
            return Frag{s, end};
        }
        case Expr::Kind::kSeq: {
            const int32_t s = node();
            int32_t cur = s;
            for (const Expr& item : e.items) {
                DI_ASSIGN_OR_RETURN(Frag f, build(item));
                eps(cur, f.start);
                cur = f.end;
            }
            return Frag{s, cur};
        }
        case Expr::Kind::kAlt: {
            const int32_t s = node(), end = node();
            for (const Expr& item : e.items) {
                DI_ASSIGN_OR_RETURN(Frag f, build(item));
                eps(s, f.start);
                eps(f.end, end);
            }
            return Frag{s, end};
        }
        case Expr::Kind::kRepeat: {
            if (e.min < 0 || e.min > kMaxRepeat || e.max > kMaxRepeat || (e.max >= 0 && e.max < e.min))
                return core::invalid_argument("repetition {" + std::to_string(e.min) + "," +
                                              std::to_string(e.max) + "} out of range (at most " +
                                              std::to_string(kMaxRepeat) + ")");
            const int32_t s = node();
            int32_t cur = s;
            for (int32_t i = 0; i < e.min; ++i) {
                DI_ASSIGN_OR_RETURN(Frag f, build(e.items[0]));
                eps(cur, f.start);
                cur = f.end;
            }
            if (e.max < 0) {
                const int32_t loop = node();
                eps(cur, loop);
                DI_ASSIGN_OR_RETURN(Frag f, build(e.items[0]));
                eps(loop, f.start);
                eps(f.end, loop);
                return Frag{s, loop};
            }
            const int32_t end = node();
            for (int32_t i = e.min; i < e.max; ++i) {
                eps(cur, end);
                DI_ASSIGN_OR_RETURN(Frag f, build(e.items[0]));
                eps(cur, f.start);
                cur = f.end;
            }
            eps(cur, end);
            return Frag{s, end};
        }
        }
        return core::internal_error("unknown expression kind");
    }

private:
    Grammar& g_;
};

// Nodes reachable from `from` by epsilon moves and calls of nullable rules (continuing at their return
// node); `on_call(rule)` sees every call met on the way.
template <typename F>
void left_closure(const Grammar& g, const std::vector<bool>& nullable, int32_t from, std::vector<bool>& seen,
                  F&& on_node) {
    std::vector<int32_t> stack{from};
    std::vector<int32_t> touched;
    while (!stack.empty()) {
        const int32_t n = stack.back();
        stack.pop_back();
        if (seen[n]) continue;
        seen[n] = true;
        touched.push_back(n);
        on_node(n);
        for (int32_t e : g.nodes[n].eps) stack.push_back(e);
        for (const CallEdge& c : g.nodes[n].calls)
            if (nullable[c.rule]) stack.push_back(c.ret);
    }
    for (int32_t n : touched) seen[n] = false;
}

} // namespace

std::vector<std::vector<std::pair<uint8_t, uint8_t>>> utf8_sequences(uint32_t lo, uint32_t hi) {
    std::vector<std::vector<std::pair<uint8_t, uint8_t>>> out;
    split(lo, std::min(hi, kMaxCodepoint), out);
    return out;
}

core::Result<Grammar> compile_grammar(const GrammarAst& ast) {
    const int32_t num_rules = static_cast<int32_t>(ast.bodies.size());
    if (ast.root < 0 || ast.root >= num_rules) return core::invalid_argument("grammar has no root rule");
    Grammar g;
    g.rule_names = ast.names;
    g.root = ast.root;
    Builder b(g);
    g.rule_start.resize(num_rules);
    for (int32_t r = 0; r < num_rules; ++r) {
        g.rule_start[r] = b.node();
        auto f = b.build(ast.bodies[r]);
        if (!f.ok()) return f.status().with_context("rule '" + ast.names[r] + "'");
        b.eps(g.rule_start[r], f->start);
        const int32_t fin = b.node();
        g.nodes[fin].final = true;
        b.eps(f->end, fin);
    }
    for (const Node& n : g.nodes)
        for (const CallEdge& c : n.calls)
            if (c.rule < 0 || c.rule >= num_rules) return core::internal_error("call of an unknown rule");

    // Nullable rules (fixpoint), then the left-call graph, which must be acyclic.
    std::vector<bool> nullable(num_rules, false), seen(g.nodes.size(), false);
    for (bool changed = true; changed;) {
        changed = false;
        for (int32_t r = 0; r < num_rules; ++r) {
            if (nullable[r]) continue;
            bool fin = false;
            left_closure(g, nullable, g.rule_start[r], seen, [&](int32_t n) { fin |= g.nodes[n].final; });
            if (fin) nullable[r] = changed = true;
        }
    }
    std::vector<std::vector<int32_t>> left_calls(num_rules);
    for (int32_t r = 0; r < num_rules; ++r)
        left_closure(g, nullable, g.rule_start[r], seen, [&](int32_t n) {
            for (const CallEdge& c : g.nodes[n].calls) left_calls[r].push_back(c.rule);
        });
    std::vector<int8_t> color(num_rules, 0); // 0 new, 1 on the path, 2 done
    for (int32_t r0 = 0; r0 < num_rules; ++r0) {
        if (color[r0]) continue;
        std::vector<std::pair<int32_t, std::size_t>> stack{{r0, 0}};
        color[r0] = 1;
        while (!stack.empty()) {
            auto& [r, i] = stack.back();
            if (i < left_calls[r].size()) {
                const int32_t c = left_calls[r][i++];
                if (color[c] == 1)
                    return core::invalid_argument("grammar is left-recursive at rule '" + ast.names[c] +
                                                  "' (it can reach itself without consuming input); "
                                                  "rewrite it with repetition");
                if (color[c] == 0) {
                    color[c] = 1;
                    stack.push_back({c, 0});
                }
            } else {
                color[r] = 2;
                stack.pop_back();
            }
        }
    }

    // Tail nodes: nothing but epsilon moves to the rule's end follow.
    for (std::size_t n = 0; n < g.nodes.size(); ++n) {
        bool fin = false, more = false;
        std::vector<int32_t> stack{static_cast<int32_t>(n)}, touched;
        while (!stack.empty() && !more) {
            const int32_t m = stack.back();
            stack.pop_back();
            if (seen[m]) continue;
            seen[m] = true;
            touched.push_back(m);
            const Node& node = g.nodes[m];
            if (!node.edges.empty() || !node.calls.empty()) more = true;
            fin |= node.final;
            for (int32_t e : node.eps) stack.push_back(e);
        }
        for (int32_t m : touched) seen[m] = false;
        g.nodes[n].tail = fin && !more;
    }
    return g;
}

} // namespace deepinfer::structured
