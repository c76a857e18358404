// The budget rule: a state's distance (fewest bytes to an accepting state) on grammars with known answers
// and against a breadth-first search over the byte automaton, and masks under a token budget: with any
// budget at least the distance + 1, a random walk under the mask always ends with the end token in time.

#include <gtest/gtest.h>

#include <random>
#include <unordered_map>

#include "structured/json_schema.h"
#include "toy_vocab.h"

namespace deepinfer::structured {
namespace {

using testing_util::compile;

std::shared_ptr<CompiledGrammar> compile_schema(const std::string& schema,
                                                std::shared_ptr<const TokenVocabulary> vocab) {
    auto gbnf = json_schema_to_gbnf(schema);
    if (!gbnf.ok()) return nullptr;
    return compile(*gbnf, std::move(vocab));
}

int32_t distance_after(const std::shared_ptr<CompiledGrammar>& g, const std::string& prefix) {
    const int32_t s = g->advance(g->initial_state(), prefix);
    EXPECT_NE(s, CompiledGrammar::kDead) << prefix;
    return g->distance(s);
}

// Fewest bytes to an accepting state by breadth-first search over the automaton (the oracle: it shares
// nothing with the distance computation but the transition function); -1 past max_depth.
int32_t bfs_distance(const std::shared_ptr<CompiledGrammar>& g, int32_t start, int32_t max_depth) {
    std::vector<int32_t> frontier{start};
    std::unordered_map<int32_t, int32_t> seen{{start, 0}};
    for (int32_t depth = 0; depth <= max_depth; ++depth) {
        std::vector<int32_t> next;
        for (int32_t s : frontier) {
            if (g->is_accepting(s)) return depth;
            for (int b = 0; b < 256; ++b) {
                const int32_t t = g->advance(s, std::string(1, static_cast<char>(b)));
                if (t != CompiledGrammar::kDead && seen.emplace(t, depth + 1).second) next.push_back(t);
            }
        }
        frontier.swap(next);
    }
    return -1;
}

const char* kNestedSchema = R"({
  "type": "object",
  "properties": {
    "a": {"type": "array", "items": {"type": "integer"}},
    "o": {"type": "object", "properties": {"s": {"type": "string"}, "b": {"type": "boolean"}},
          "required": ["s", "b"], "additionalProperties": false}
  },
  "required": ["a"], "additionalProperties": false})";

TEST(Budget, DistanceHasTheKnownAnswers) {
    auto g = compile_schema(kNestedSchema, testing_util::byte_vocab());
    ASSERT_TRUE(g) << testing_util::last_error();
    EXPECT_EQ(g->distance(g->initial_state()), 8);                          // {"a":[]}
    EXPECT_EQ(distance_after(g, "{\"a\":[1,2"), 2);                         // ]}
    EXPECT_EQ(distance_after(g, "{\"a\":[1,2,"), 3);                        // 0]}
    EXPECT_EQ(distance_after(g, "{\"a\":[],"), 22);                         // "o":{"s":"","b":true}}
    EXPECT_EQ(distance_after(g, "{\"a\":[], \"o\":{\"s\":\"ab"), 12);       // ","b":true}}
    EXPECT_EQ(distance_after(g, "{\"a\":[],\"o\":{\"s\":\"\",\"b\":f"), 6); // alse}}
    EXPECT_EQ(distance_after(g, "{\"a\":[]}"), 0);
    // Recursion: the stack says what must close.
    auto paren = compile("root ::= \"(\" root \")\" | \"x\"\n");
    ASSERT_TRUE(paren) << testing_util::last_error();
    EXPECT_EQ(distance_after(paren, ""), 1);
    EXPECT_EQ(distance_after(paren, "((("), 4);
    EXPECT_EQ(distance_after(paren, "(((x"), 3);
    auto digits = compile("root ::= [0-9]{3} (\"-\" [a-z]+)?\n");
    ASSERT_TRUE(digits);
    EXPECT_EQ(distance_after(digits, "1"), 2);
    EXPECT_EQ(distance_after(digits, "123-"), 1);
    // A grammar that can never end from some state.
    auto endless = compile("root ::= \"a\" | \"b\" loop\nloop ::= \"c\" loop\n");
    ASSERT_TRUE(endless);
    EXPECT_EQ(distance_after(endless, ""), 1);
    EXPECT_EQ(distance_after(endless, "b"), CompiledGrammar::kUnreachable);
}

TEST(Budget, DistanceAgreesWithSearchAlongRandomWalks) {
    const std::vector<std::string> grammars = {
        R"(root ::= "[" (item ("," item)*)? "]"
item ::= root | [a-z]{2,4} | "\"" [^"]* "\""
)",
        "root ::= (\"ab\" | \"c\"{3,5})+ \"!\" [0-9]?\n",
    };
    std::vector<std::shared_ptr<CompiledGrammar>> gs;
    for (const auto& t : grammars) gs.push_back(compile(t));
    auto schema = json_schema_to_gbnf(kNestedSchema);
    ASSERT_TRUE(schema.ok());
    gs.push_back(compile(*schema));
    std::mt19937 rng(7);
    int checked = 0;
    for (const auto& g : gs) {
        ASSERT_TRUE(g) << testing_util::last_error();
        for (int walk = 0; walk < 6; ++walk) {
            int32_t s = g->initial_state();
            for (int step = 0; step < 24; ++step) {
                const int32_t d = g->distance(s);
                const int32_t want = bfs_distance(g, s, 6);
                if (want >= 0) {
                    EXPECT_EQ(d, want);
                    ++checked;
                } else {
                    EXPECT_GT(d, 6);
                }
                std::vector<int32_t> next;
                for (int b = 0; b < 256; ++b) {
                    const int32_t t = g->advance(s, std::string(1, static_cast<char>(b)));
                    if (t != CompiledGrammar::kDead) next.push_back(t);
                }
                if (next.empty()) break;
                s = next[rng() % next.size()];
            }
        }
    }
    EXPECT_GT(checked, 100);
}

// All 256 bytes, some longer tokens (so one token can move the end farther by several bytes), an end token.
std::shared_ptr<const TokenVocabulary> rich_vocab() {
    std::vector<std::string> bytes;
    for (int b = 0; b < 256; ++b) bytes.push_back(std::string(1, static_cast<char>(b)));
    for (const char* t : {"{\"a\":[", "{\"a\":[1,", "],\"o\":{\"s\":\"", "xyzw", "\",\"b\":", "true}}",
                          "12345", ",", "\"}", "]}", ",\"o\":{"})
        bytes.emplace_back(t);
    bytes.push_back("</s>");
    std::vector<bool> special(bytes.size(), false);
    special.back() = true;
    const auto end = static_cast<int32_t>(bytes.size()) - 1;
    return std::make_shared<TokenVocabulary>(bytes, special, std::vector<int32_t>{end});
}

std::vector<int32_t> allowed_ids(const GrammarMatcher& m, int32_t tokens_left) {
    std::vector<uint32_t> mask(m.vocab().mask_words());
    m.fill_mask(mask, tokens_left);
    std::vector<int32_t> ids;
    for (int32_t i = 0; i < m.vocab().size(); ++i)
        if (mask[i >> 5] >> (i & 31) & 1) ids.push_back(i);
    return ids;
}

TEST(Budget, EveryWalkEndsInTimeWhenTheBudgetAllows) {
    auto vocab = rich_vocab();
    ASSERT_TRUE(vocab->has_all_bytes());
    auto g = compile_schema(kNestedSchema, vocab);
    ASSERT_TRUE(g) << testing_util::last_error();
    const int32_t end = vocab->end_ids()[0];
    const int32_t start = g->distance(g->initial_state());
    std::mt19937 rng(11);
    int ended = 0;
    for (int32_t max_tokens = start + 1; max_tokens <= start + 40; ++max_tokens) {
        for (int rep = 0; rep < 20; ++rep) {
            GrammarMatcher m(g);
            int32_t produced = 0;
            while (!m.is_terminated() && produced < max_tokens) {
                const int32_t left = max_tokens - produced;
                ASSERT_LE(m.distance_to_end() + 1, left) << "the end went out of reach";
                auto ids = allowed_ids(m, left);
                ASSERT_FALSE(ids.empty());
                ASSERT_TRUE(m.accept_token(ids[rng() % ids.size()]));
                ++produced;
            }
            ASSERT_TRUE(m.is_terminated()) << "cut at max_tokens " << max_tokens;
            ended += produced == max_tokens;
        }
    }
    EXPECT_GT(ended, 0) << "no walk used its whole budget: the test does not exercise the limit";
    // A generous budget leaves the mask as it is; the last token of a budget is the end token alone.
    GrammarMatcher m(g);
    ASSERT_TRUE(m.accept_bytes("{\"a\":[1]"));
    EXPECT_EQ(allowed_ids(m, 1000), allowed_ids(m, CompiledGrammar::kNoBudget));
    EXPECT_EQ(allowed_ids(m, 2), (std::vector<int32_t>{'}'}));
    ASSERT_TRUE(m.accept_bytes("}"));
    EXPECT_EQ(allowed_ids(m, 1), (std::vector<int32_t>{end}));
}

TEST(Budget, TooSmallABudgetHeadsForTheEndAnyway) {
    auto vocab = rich_vocab();
    auto g = compile_schema(kNestedSchema, vocab);
    ASSERT_TRUE(g);
    GrammarMatcher m(g);
    ASSERT_TRUE(m.accept_bytes("{\"a\":[1,2,3"));
    const int32_t d = m.distance_to_end();
    ASSERT_EQ(d, 2);
    for (int32_t id : allowed_ids(m, 1)) { // no room even for the end: every token still brings it nearer
        GrammarMatcher copy = m;
        ASSERT_TRUE(copy.accept_token(id));
        EXPECT_LT(copy.distance_to_end(), d) << vocab->bytes(id);
    }
    EXPECT_FALSE(allowed_ids(m, 1).empty());
}

TEST(Budget, VocabularyWithoutEveryByteIgnoresTheBudget) {
    auto vocab = testing_util::toy_vocab();
    EXPECT_FALSE(vocab->has_all_bytes());
    auto g = compile("root ::= \"ab\" \"c\"? \"d\"\n", vocab);
    ASSERT_TRUE(g);
    GrammarMatcher m(g);
    EXPECT_EQ(allowed_ids(m, 1), allowed_ids(m, CompiledGrammar::kNoBudget));
}

} // namespace
} // namespace deepinfer::structured
