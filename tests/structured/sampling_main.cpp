// Sampling under the mask over the real DeepSeek V4 vocabulary, for every fixture grammar:
// tests/structured/data/schemas/*.json (JSON Schema), data/regex.txt (one regex a line) and
// data/gbnf/*.gbnf, and data/tools/*.json (tool sets: DSML tool calls whose arguments follow the tools'
// schemas; `only` = named tool_choice, `max_calls` = 1 for parallel_tool_calls false). For each, 3 seeds;
// every step draws a token from random logits at temperature 1 under the mask until the end token. With
// i.i.d. random logits the sampled token is uniform over the allowed ones (by symmetry), so the draw picks
// uniformly among them -- the same distribution without the cost of 129k random numbers a step. Each output
// must be accepted again byte by byte by a fresh matcher; JSON outputs must parse; tool-call outputs must
// parse with the DSML parser into complete calls. The outputs go to a JSONL file that validate_samples.py
// checks with independent validators (the jsonschema package, Python's re.fullmatch, a checker named in each
// GBNF fixture).
//
//   structured_sampling OUT.jsonl [--seeds N] [--max-tokens N] [name filter]

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include <nlohmann/json.hpp>

#include "real_vocab.h"
#include "structured/compiled_grammar.h"
#include "structured/dsml_tools.h"
#include "structured/gbnf.h"
#include "structured/json_schema.h"
#include "structured/matcher.h"
#include "structured/regex.h"
#include "tokenizer/dsml_parser.h"

namespace fs = std::filesystem;
using namespace deepinfer;
using namespace deepinfer::structured;

namespace {

std::string read(const fs::path& p) {
    std::ifstream f(p, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

struct Fixture {
    std::string kind, name, source, gbnf;
};

} // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr,
                     "usage: structured_sampling OUT.jsonl [--seeds N] [--max-tokens N] [name filter]\n");
        return 2;
    }
    int seeds = 3, max_tokens = 60000;
    std::string filter;
    for (int i = 2; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--seeds" && i + 1 < argc)
            seeds = std::atoi(argv[++i]);
        else if (a == "--max-tokens" && i + 1 < argc)
            max_tokens = std::atoi(argv[++i]);
        else
            filter = a;
    }
    const fs::path data = fs::path(DEEPINFER_SOURCE_DIR) / "tests/structured/data";
    auto tok = tokenizer::Tokenizer::from_file(std::string(DEEPINFER_SOURCE_DIR) +
                                               "/data/tokenizer/deepseek-v4/tokenizer.json");
    if (!tok.ok()) {
        std::fprintf(stderr, "%s\n", tok.status().to_string().c_str());
        return 1;
    }
    const auto vocab = testing_util::vocab_from_tokenizer(*tok);
    const int32_t eos = vocab->end_ids().at(0);

    std::vector<Fixture> fixtures;
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(data / "schemas")) files.push_back(e.path());
    for (const auto& e : fs::directory_iterator(data / "gbnf")) files.push_back(e.path());
    std::sort(files.begin(), files.end());
    int failures = 0;
    auto fail = [&](const std::string& name, const std::string& what) {
        std::fprintf(stderr, "FAIL %s: %s\n", name.c_str(), what.c_str());
        ++failures;
    };
    for (const fs::path& p : files) {
        const std::string text = read(p);
        const bool schema = p.extension() == ".json";
        auto g = schema ? json_schema_to_gbnf(text) : core::Result<std::string>(text);
        if (!g.ok()) {
            fail(p.filename().string(), g.status().message());
            continue;
        }
        fixtures.push_back({schema ? "schema" : "gbnf", p.filename().string(), text, *g});
    }
    std::vector<fs::path> tool_files;
    for (const auto& e : fs::directory_iterator(data / "tools")) tool_files.push_back(e.path());
    std::sort(tool_files.begin(), tool_files.end());
    for (const fs::path& p : tool_files) {
        const std::string text = read(p);
        const nlohmann::ordered_json spec = nlohmann::ordered_json::parse(text, nullptr, false);
        if (spec.is_discarded() || !spec.contains("tools")) {
            fail(p.filename().string(), "bad tool set fixture");
            continue;
        }
        DsmlToolsOptions opt;
        if (spec.contains("only")) opt.only = spec["only"].get<std::vector<std::string>>();
        if (spec.contains("max_calls")) opt.max_calls = spec["max_calls"].get<int32_t>();
        auto g = dsml_tool_calls_gbnf(spec["tools"].dump(), opt);
        if (!g.ok()) {
            fail(p.filename().string(), g.status().message());
            continue;
        }
        fixtures.push_back({"tools", p.filename().string(), text, *g});
    }
    {
        std::istringstream lines(read(data / "regex.txt"));
        std::string line;
        int n = 0;
        while (std::getline(lines, line)) {
            ++n;
            if (line.empty() || line[0] == '#') continue;
            auto g = regex_to_gbnf(line);
            if (!g.ok()) {
                fail("regex.txt:" + std::to_string(n), g.status().message());
                continue;
            }
            fixtures.push_back({"regex", "regex.txt:" + std::to_string(n), line, *g});
        }
    }

    std::ofstream out(argv[1], std::ios::binary);
    std::vector<uint32_t> mask(vocab->mask_words());
    int64_t steps = 0, samples = 0;
    double mask_seconds = 0;
    const auto t_all = std::chrono::steady_clock::now();
    for (const Fixture& f : fixtures) {
        if (!filter.empty() && f.name.find(filter) == std::string::npos) continue;
        auto ast = parse_gbnf(f.gbnf);
        if (!ast.ok()) {
            fail(f.name, ast.status().message());
            continue;
        }
        auto grammar = compile_grammar(*ast);
        if (!grammar.ok()) {
            fail(f.name, grammar.status().message());
            continue;
        }
        auto compiled = std::make_shared<CompiledGrammar>(std::move(*grammar), vocab);
        for (int seed = 0; seed < seeds; ++seed) {
            std::mt19937_64 rng(std::hash<std::string>{}(f.name) ^ (0x9E3779B97F4A7C15ull * (seed + 1)));
            GrammarMatcher m(compiled);
            std::string text;
            bool finished = false;
            for (int step = 0; step < max_tokens; ++step) {
                const auto t0 = std::chrono::steady_clock::now();
                m.fill_mask(mask);
                mask_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
                ++steps;
                int64_t allowed = 0;
                for (uint32_t w : mask) allowed += std::popcount(w);
                if (allowed == 0) {
                    fail(f.name,
                         "dead end: no token allowed after " + std::to_string(text.size()) + " bytes");
                    break;
                }
                int64_t k = std::uniform_int_distribution<int64_t>(0, allowed - 1)(rng);
                int32_t id = -1;
                for (std::size_t w = 0; w < mask.size(); ++w) {
                    const int c = std::popcount(mask[w]);
                    if (k >= c) {
                        k -= c;
                        continue;
                    }
                    uint32_t bits = mask[w];
                    while (k-- > 0) bits &= bits - 1;
                    id = static_cast<int32_t>(w * 32 + std::countr_zero(bits));
                    break;
                }
                if (!m.accept_token(id)) {
                    fail(f.name,
                         "the mask allowed token " + std::to_string(id) + " but accept_token refused it");
                    break;
                }
                if (id == eos) {
                    finished = true;
                    break;
                }
                text += vocab->bytes(id);
            }
            ++samples;
            // A fresh matcher must accept the text byte by byte and be complete.
            GrammarMatcher check(compiled);
            if (finished && !(check.accept_bytes(text) && check.is_accepting()))
                fail(f.name, "output not accepted on replay: " + text);
            if (finished && f.kind == "schema" && !nlohmann::json::accept(text))
                fail(f.name, "output is not JSON: " + text);
            nlohmann::json rec = {{"kind", f.kind},     {"name", f.name}, {"seed", seed},
                                  {"source", f.source}, {"output", text}, {"finished", finished}};
            if (finished && f.kind == "tools") {
                // What the server would return: the DSML parser's calls.
                tokenizer::DsmlStreamParser parser({.thinking = false});
                parser.feed(text);
                parser.finish(tokenizer::FinishReason::kStop);
                const auto& msg = parser.message();
                if (msg.tool_calls.empty() || msg.finish_reason != "tool_calls" || !msg.content.empty())
                    fail(f.name, "not parsed as tool calls only: " + text);
                nlohmann::json calls = nlohmann::json::array();
                for (const auto& c : msg.tool_calls) {
                    if (!c.complete || !nlohmann::json::accept(c.arguments))
                        fail(f.name, "incomplete call or arguments not JSON: " + c.arguments);
                    calls.push_back({{"name", c.name}, {"arguments", c.arguments}});
                }
                rec["calls"] = calls;
            }
            out << rec.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
        }
        const auto st = compiled->stats();
        std::fprintf(stderr, "%-40s states %6lld masks computed %5lld cached %6lld\n", f.name.c_str(),
                     static_cast<long long>(st.states), static_cast<long long>(st.mask_misses),
                     static_cast<long long>(st.mask_hits));
    }
    const double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_all).count();
    std::fprintf(stderr, "%lld samples, %lld steps, mask %.1f us/step, total %.1f s, %d failures\n",
                 static_cast<long long>(samples), static_cast<long long>(steps),
                 1e6 * mask_seconds / std::max<int64_t>(steps, 1), total, failures);
    return failures == 0 ? 0 : 1;
}
