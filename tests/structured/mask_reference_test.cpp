// Every mask the fast path hands out (trie walk, per-state cache, its eviction, the budget rule on the
// cached distance lists) is bit-identical to the definition computed token by token: a token is allowed
// iff the grammar survives its bytes and, under a budget, the grammar can still end in the tokens left
// (CompiledGrammar::fill_mask); end tokens iff the grammar accepts. Checked along random walks under the
// mask over several grammars (JSON Schemas with $ref / anyOf / patterns, free-form JSON, a regex, GBNF),
// with and without a budget, on a vocabulary with multi-byte tokens, shared prefixes, duplicates and
// special ids; once with the default cache and once with a cache so small that it evicts all the time.

#include <gtest/gtest.h>

#include <fstream>
#include <random>
#include <sstream>

#include "structured/json_schema.h"
#include "structured/regex.h"
#include "toy_vocab.h"

namespace deepinfer::structured {
namespace {

std::string read_file(const std::string& rel) {
    std::ifstream f(std::string(DEEPINFER_SOURCE_DIR) + "/" + rel);
    EXPECT_TRUE(f.good()) << rel;
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

// Every single byte, then ~3000 multi-byte tokens over the characters JSON and the grammars below use
// (with UTF-8 pieces), a few duplicates of earlier tokens' bytes, special ids in the middle and at the
// end, and an end token.
std::shared_ptr<const TokenVocabulary> mixed_vocab() {
    std::vector<std::string> bytes;
    for (int b = 0; b < 256; ++b) bytes.push_back(std::string(1, static_cast<char>(b)));
    const std::vector<std::string> pieces = {
        "{", "}", "[",  "]",    "\"",    ":",    ",",    " ",  "\n", "\t", "a", "e", "n",  "r", "s",
        "t", "u", "l",  "A",    "Z",     "0",    "1",    "5",  "9",  "-",  ".", "+", "\\", "/", "T",
        "_", "é", "中", "true", "false", "null", "name", "id", "(",  ")",  "*", "x", "=",  "@"};
    std::mt19937 rng(12345);
    for (int i = 0; i < 3000; ++i) {
        const int n = 1 + static_cast<int>(rng() % 4);
        std::string t;
        for (int k = 0; k < n; ++k) t += pieces[rng() % pieces.size()];
        if (t.size() < 2) t += pieces[rng() % pieces.size()];
        bytes.push_back(t);
        if (i % 500 == 7) bytes.push_back(t); // the same bytes under another id
        if (i == 1500) bytes.push_back("<special>");
    }
    bytes.push_back("</s>");
    std::vector<bool> special(bytes.size(), false);
    for (std::size_t i = 0; i < bytes.size(); ++i) special[i] = bytes[i] == "<special>";
    special.back() = true;
    return std::make_shared<TokenVocabulary>(bytes, special,
                                             std::vector<int32_t>{static_cast<int32_t>(bytes.size()) - 1});
}

// The definition, token by token through advance() (no trie, no cache).
std::vector<uint32_t> reference_mask(CompiledGrammar& g, int32_t state, int32_t tokens_left) {
    const TokenVocabulary& v = g.vocab();
    std::vector<uint32_t> mask(static_cast<std::size_t>(v.mask_words()), 0u);
    auto set = [&](int32_t id) { mask[static_cast<std::size_t>(id) >> 5] |= 1u << (id & 31); };
    if (state < 0) return mask;
    const int64_t here = g.distance(state);
    // After this token, tokens_left - 1 remain, the end token among them; where nothing fits any more,
    // only tokens that bring the end nearer.
    const int64_t limit = std::max<int64_t>(static_cast<int64_t>(tokens_left) - 2, here - 1);
    for (int32_t id = 0; id < v.size(); ++id) {
        if (v.is_end(id)) {
            if (g.is_accepting(state)) set(id);
            continue;
        }
        if (v.is_special(id) || v.bytes(id).empty()) continue;
        const int32_t next = g.advance(state, v.bytes(id));
        if (next == CompiledGrammar::kDead) continue;
        if (g.budget_aware() && g.distance(next) > limit) continue;
        set(id);
    }
    return mask;
}

std::string first_difference(const TokenVocabulary& v, const std::vector<uint32_t>& want,
                             const std::vector<uint32_t>& got) {
    for (int32_t id = 0; id < v.size(); ++id) {
        const bool a = (want[id >> 5] >> (id & 31)) & 1u, b = (got[id >> 5] >> (id & 31)) & 1u;
        if (a != b)
            return "token " + std::to_string(id) + " '" + v.bytes(id) + "': reference " +
                   (a ? "allows" : "forbids") + " it";
    }
    return "";
}

struct Case {
    std::string name;
    std::string gbnf;
};

std::vector<Case> cases() {
    std::vector<Case> out;
    for (const char* schema : {"tests/structured/data/schemas/017_flight_booking.json",
                               "tests/structured/data/schemas/001_person.json",
                               "tests/structured/data/schemas/003_product.json"}) {
        auto g = json_schema_to_gbnf(read_file(schema));
        EXPECT_TRUE(g.ok()) << schema;
        if (g.ok()) out.push_back({schema, *g});
    }
    out.push_back({"json_object", json_object_gbnf()});
    auto re = regex_to_gbnf("[A-Z]{2}-\\d{3,5}( \\((cat|dog)s?\\))*");
    EXPECT_TRUE(re.ok());
    if (re.ok()) out.push_back({"regex", *re});
    out.push_back({"arith.gbnf", read_file("tests/structured/data/gbnf/arith.gbnf")});
    return out;
}

// Random walks under the mask; at every step the fast mask (without a budget and with the walk's) must
// equal the reference. Returns the number of masks compared.
int64_t check_walks(const Case& c, std::size_t cache_bytes, CompiledGrammarStats* stats_out) {
    auto vocab = mixed_vocab();
    auto ast = parse_gbnf(c.gbnf);
    EXPECT_TRUE(ast.ok()) << c.name;
    auto grammar = compile_grammar(*ast);
    EXPECT_TRUE(grammar.ok()) << c.name;
    auto g = std::make_shared<CompiledGrammar>(std::move(*grammar), vocab, cache_bytes);
    EXPECT_TRUE(g->budget_aware());
    std::vector<uint32_t> fast(static_cast<std::size_t>(vocab->mask_words()));
    std::mt19937 rng(7);
    int64_t compared = 0;
    for (int walk = 0; walk < 4; ++walk) {
        GrammarMatcher m(g);
        const int32_t start = g->distance(g->initial_state());
        const int32_t budget = start + 1 + static_cast<int32_t>(rng() % 40);
        for (int32_t left = budget; left > 0 && !m.is_terminated(); --left) {
            for (int32_t tokens_left : {CompiledGrammar::kNoBudget, left, std::max(1, left - 5)}) {
                m.fill_mask(fast, tokens_left);
                const std::vector<uint32_t> want = reference_mask(*g, m.state(), tokens_left);
                EXPECT_EQ(want, fast) << c.name << ", walk " << walk << ", tokens_left " << tokens_left
                                      << ": " << first_difference(*vocab, want, fast);
                if (want != fast) return compared;
                ++compared;
            }
            m.fill_mask(fast, left);
            std::vector<int32_t> ids;
            for (int32_t id = 0; id < vocab->size(); ++id)
                if ((fast[id >> 5] >> (id & 31)) & 1u) ids.push_back(id);
            if (ids.empty()) break;
            EXPECT_TRUE(m.accept_token(ids[rng() % ids.size()]));
        }
    }
    *stats_out = g->stats();
    return compared;
}

TEST(MaskReference, FastMasksEqualTheDefinition) {
    for (const Case& c : cases()) {
        CompiledGrammarStats stats;
        const int64_t compared = check_walks(c, CompiledGrammar::kDefaultMaskCacheBytes, &stats);
        EXPECT_GT(compared, 30) << c.name;
        EXPECT_GT(stats.mask_hits, 0) << c.name; // the cache served some of them
        EXPECT_EQ(stats.mask_evictions, 0) << c.name;
    }
}

TEST(MaskReference, EvictingCacheGivesTheSameMasks) {
    for (const Case& c : cases()) {
        CompiledGrammarStats stats;
        // Room for about three masks of this vocabulary: nearly every new state evicts.
        const int64_t compared = check_walks(c, 3 * (mixed_vocab()->mask_words() * sizeof(uint32_t)), &stats);
        EXPECT_GT(compared, 30) << c.name;
        EXPECT_GT(stats.mask_evictions, 0) << c.name;
        EXPECT_LE(stats.cached_masks, 4) << c.name;
    }
}

} // namespace
} // namespace deepinfer::structured
