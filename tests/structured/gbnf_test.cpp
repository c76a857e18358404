// GBNF grammars on a toy vocabulary: what the matcher accepts, what the mask allows, errors named.

#include "structured/gbnf.h"

#include <gtest/gtest.h>

#include <random>

#include "structured/compiled_grammar.h"
#include "structured/matcher.h"
#include "toy_vocab.h"

namespace deepinfer::structured {
namespace {

TEST(Gbnf, AcceptsExactlyTheLanguage) {
    auto g = testing_util::compile("root ::= \"a\" (\"b\" | \"cd\")* [0-9]{2,3}\n");
    ASSERT_TRUE(g) << testing_util::last_error();
    for (const char* ok : {"a12", "abcd123", "acdcdb99"}) EXPECT_TRUE(testing_util::matches(g, ok)) << ok;
    for (const char* bad : {"", "a", "a1", "a1234", "ab", "b12", "acb12", "a12x"})
        EXPECT_FALSE(testing_util::matches(g, bad)) << bad;
}

TEST(Gbnf, RecursionAndUnicodeClasses) {
    auto g = testing_util::compile(R"(
root ::= list
list ::= "[" ( item ( "," item )* )? "]"
item ::= list | [^\x00-\x7F\[\],]+   # non-ASCII words or nested lists
)");
    ASSERT_TRUE(g) << testing_util::last_error();
    for (const char* ok : {"[]", "[é]", "[[],[日本]]", "[[[]],ü]"})
        EXPECT_TRUE(testing_util::matches(g, ok)) << ok;
    for (const char* bad : {"[", "[a]", "[[]", "[é,]", "[\xC3]"})
        EXPECT_FALSE(testing_util::matches(g, bad)) << bad;
}

TEST(Gbnf, ErrorsNameTheProblem) {
    EXPECT_NE(testing_util::compile_error("root ::= foo\n").find("'foo' is used but not defined"),
              std::string::npos);
    EXPECT_NE(testing_util::compile_error("root ::= \"a\nx").find("unterminated"), std::string::npos);
    EXPECT_NE(testing_util::compile_error("root ::= root \"a\" | \"b\"\n").find("left-recursive"),
              std::string::npos);
    EXPECT_NE(testing_util::compile_error("root ::= \"a\"{3,1}\n").find("n < m"), std::string::npos);
    EXPECT_NE(testing_util::compile_error("start ::= \"a\"\n").find("no 'root' rule"), std::string::npos);
    EXPECT_NE(testing_util::compile_error("root ::= \"a\" )\n").find("line 1 column 14"), std::string::npos);
}

TEST(Gbnf, MaskFollowsTheGrammarAndEndTokens) {
    // Toy vocabulary: single bytes a..d, "ab", "abc", "cd", "<s>" special, "</s>" end.
    auto vocab = testing_util::toy_vocab();
    auto g = testing_util::compile("root ::= \"ab\" \"c\"? \"d\"\n", vocab);
    ASSERT_TRUE(g) << testing_util::last_error();
    GrammarMatcher m(g);
    EXPECT_EQ(testing_util::allowed(m), (std::vector<std::string>{"a", "ab", "abc"}));
    ASSERT_TRUE(m.accept_token(testing_util::id_of(*vocab, "ab")));
    EXPECT_EQ(testing_util::allowed(m), (std::vector<std::string>{"c", "cd", "d"}));
    EXPECT_FALSE(m.accept_token(testing_util::id_of(*vocab, "a")));
    EXPECT_FALSE(m.accept_token(testing_util::id_of(*vocab, "</s>"))); // not complete yet
    ASSERT_TRUE(m.accept_token(testing_util::id_of(*vocab, "cd")));
    EXPECT_TRUE(m.is_accepting());
    EXPECT_EQ(testing_util::allowed(m), (std::vector<std::string>{"</s>"}));
    ASSERT_TRUE(m.accept_token(testing_util::id_of(*vocab, "</s>")));
    EXPECT_TRUE(m.is_terminated());
    EXPECT_TRUE(testing_util::allowed(m).empty());
    // Rollback restores earlier states exactly, and a copy is independent.
    ASSERT_TRUE(m.rollback(2));
    EXPECT_FALSE(m.is_terminated());
    EXPECT_EQ(testing_util::allowed(m), (std::vector<std::string>{"c", "cd", "d"}));
    GrammarMatcher copy = m;
    ASSERT_TRUE(copy.accept_token(testing_util::id_of(*vocab, "d")));
    EXPECT_TRUE(copy.is_accepting());
    EXPECT_FALSE(m.is_accepting());
    EXPECT_FALSE(m.rollback(5));
    EXPECT_TRUE(m.rollback(1));
    EXPECT_EQ(testing_util::allowed(m), (std::vector<std::string>{"a", "ab", "abc"}));
    // The special token is never allowed.
    EXPECT_FALSE(m.accept_token(testing_util::id_of(*vocab, "<s>")));
}

} // namespace
} // namespace deepinfer::structured

namespace deepinfer::structured {
namespace {

// Malformed grammars of every shape fail cleanly (no crash, a message); the ones that parse compile or
// are refused with a reason.
TEST(Gbnf, RandomTextNeverCrashes) {
    std::mt19937 rng(99);
    const std::vector<std::string> pieces = {"root", " ::= ", "a",  "b",     "\"x\"", "\"", "[a-z]", "[^",
                                             "]",    "(",     ")",  "|",     "*",     "+",  "?",     "{2}",
                                             "{1,",  "}",     "\n", "# c\n", "\\",    "."};
    for (int iter = 0; iter < 3000; ++iter) {
        std::string text;
        const int n = 1 + static_cast<int>(rng() % 12);
        for (int i = 0; i < n; ++i) text += pieces[rng() % pieces.size()];
        auto ast = parse_gbnf(text);
        if (!ast.ok()) {
            EXPECT_FALSE(ast.status().message().empty());
            continue;
        }
        auto g = compile_grammar(*ast);
        if (!g.ok()) {
            EXPECT_FALSE(g.status().message().empty());
        }
    }
}

} // namespace
} // namespace deepinfer::structured
