// Encoding throughput of the native tokenizer on the golden corpus (tests/tokenizer/data), in bytes/s.
// The peer number (HF `tokenizers`, same corpus, same machine, same run) comes from
// tools/tokenizer/bench_hf.py, which runs this binary and reports the ratio; see docs/tokenizer.md.
//
//   tokenizer_bench [--benchmark_filter=...]   (DEEPINFER_TOKENIZER_JSON overrides the tokenizer path)

#include <benchmark/benchmark.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tokenizer/chat_encoding.h"
#include "tokenizer/dsml_parser.h"
#include "tokenizer/tokenizer.h"

namespace {

using deepinfer::tokenizer::Tokenizer;

const Tokenizer& tok() {
    static const Tokenizer* t = [] {
        const char* env = std::getenv("DEEPINFER_TOKENIZER_JSON");
        const std::string path =
            env ? env : std::string(DEEPINFER_SOURCE_DIR) + "/data/tokenizer/deepseek-v4/tokenizer.json";
        auto r = Tokenizer::from_file(path);
        if (!r.ok()) {
            std::fprintf(stderr, "%s\n", r.status().to_string().c_str());
            std::exit(1);
        }
        return new Tokenizer(std::move(r).value());
    }();
    return *t;
}

// The golden corpus strings (same bytes the HF peer encodes).
const std::vector<std::string>& corpus() {
    static const std::vector<std::string> c = [] {
        std::vector<std::string> out;
        std::ifstream f(std::string(DEEPINFER_SOURCE_DIR) + "/tests/tokenizer/data/encode_golden.jsonl");
        std::string line;
        std::getline(f, line);
        while (std::getline(f, line))
            out.push_back(nlohmann::json::parse(line).at("text").get<std::string>());
        return out;
    }();
    return c;
}

std::size_t total_bytes(const std::vector<std::string>& v) {
    std::size_t n = 0;
    for (const auto& s : v) n += s.size();
    return n;
}

// One encode() call per corpus string.
void BM_EncodeCorpusPerString(benchmark::State& state) {
    const auto& c = corpus();
    const Tokenizer& t = tok();
    std::size_t ids = 0;
    for (auto _ : state) {
        for (const auto& s : c) {
            auto v = t.encode(s);
            ids += v.size();
            benchmark::DoNotOptimize(v.data());
        }
    }
    state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * total_bytes(c)));
    state.counters["strings"] = static_cast<double>(c.size());
}
BENCHMARK(BM_EncodeCorpusPerString)->Unit(benchmark::kMillisecond);

// The whole corpus joined with newlines, one encode() call.
void BM_EncodeCorpusJoined(benchmark::State& state) {
    std::string joined;
    for (const auto& s : corpus()) joined += s + "\n";
    const Tokenizer& t = tok();
    for (auto _ : state) {
        auto v = t.encode(joined);
        benchmark::DoNotOptimize(v.data());
    }
    state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * joined.size()));
}
BENCHMARK(BM_EncodeCorpusJoined)->Unit(benchmark::kMillisecond);

void BM_DecodeCorpus(benchmark::State& state) {
    std::vector<std::vector<deepinfer::tokenizer::TokenId>> ids;
    for (const auto& s : corpus()) ids.push_back(tok().encode(s));
    for (auto _ : state) {
        for (const auto& v : ids) benchmark::DoNotOptimize(tok().decode(v).data());
    }
    state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * total_bytes(corpus())));
}
BENCHMARK(BM_DecodeCorpus)->Unit(benchmark::kMillisecond);

void BM_ParseDsmlStream(benchmark::State& state) {
    std::string out = "Let me think about which tool to use.</think>\n\n<｜DSML｜tool_calls>\n";
    for (int i = 0; i < 20; ++i)
        out +=
            "<｜DSML｜invoke name=\"search\">\n<｜DSML｜parameter name=\"q\" string=\"true\">query number " +
            std::to_string(i) + "</｜DSML｜parameter>\n</｜DSML｜invoke>\n";
    out += "</｜DSML｜tool_calls>";
    for (auto _ : state) {
        deepinfer::tokenizer::DsmlStreamParser p({.thinking = true});
        for (std::size_t i = 0; i < out.size(); i += 4)
            benchmark::DoNotOptimize(p.feed(out.substr(i, 4)).size());
        benchmark::DoNotOptimize(p.finish(deepinfer::tokenizer::FinishReason::kStop).size());
    }
    state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * out.size()));
}
BENCHMARK(BM_ParseDsmlStream);

} // namespace

BENCHMARK_MAIN();
