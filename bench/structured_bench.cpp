// Token-mask cost of constrained decoding over the real DeepSeek V4 vocabulary (129,280 ids), per decode
// step, for a JSON Schema of real-world shape (tests/structured/data/schemas/017_flight_booking.json) and
// free-form JSON (json_object mode). A trajectory of tokens is sampled once under the mask (uniformly among
// allowed tokens, the same law as random logits); the benchmarks replay it:
//   - Warm: the grammar's tables and mask cache already hold this trajectory's states (a long-running
//     server on a recurring schema);
//   - Cold: a freshly compiled grammar each iteration (a schema never seen before: every new state walks
//     the vocabulary trie once);
//   - FullWalk: one uncached mask (trie walk) at a structural state and inside a string;
//   - CopyMask: the floor -- copying one 16 KB mask, the work of a cache hit.
//   - MaskRow: one engine step's masking of a 129,280-logit row (mask cached), at a structural state and
//     inside a string: the word-by-word copy the engine did before (baseline), apply_logits_constraint's
//     copy by runs, and mask_logits_in_place (what the engine does now).
//   - BudgetedOutputs: the server's workload -- outputs of at most N tokens under the budget rule, a fresh
//     seed each, one warm grammar: mask-cache misses per step and the time per step.
//   - SampleStep: one engine step for a row (refill, mask in place, sample at temperature 1), without a
//     constraint, at an object start and inside a string: what the constraint adds, the sampler included.
// Counters: us_per_step (mask + accept), and the ratio to CopyMask measured in the same run.
//
//   structured_bench [--benchmark_filter=...]

#include <benchmark/benchmark.h>

#include <bit>
#include <cstring>
#include <fstream>
#include <limits>
#include <random>
#include <sstream>

#include "engine/grammar_constraint.h"
#include "engine/sampler.h"
#include "real_vocab.h"
#include "structured/compiled_grammar.h"
#include "structured/gbnf.h"
#include "structured/json_schema.h"
#include "structured/matcher.h"

namespace {

using namespace deepinfer;
using namespace deepinfer::structured;

std::shared_ptr<const TokenVocabulary> vocab() {
    static const std::shared_ptr<const TokenVocabulary> v = [] {
        auto tok = tokenizer::Tokenizer::from_file(std::string(DEEPINFER_SOURCE_DIR) +
                                                   "/data/tokenizer/deepseek-v4/tokenizer.json");
        if (!tok.ok()) {
            std::fprintf(stderr, "%s\n", tok.status().to_string().c_str());
            std::exit(1);
        }
        return testing_util::vocab_from_tokenizer(*tok);
    }();
    return v;
}

std::string schema_gbnf() {
    std::ifstream f(std::string(DEEPINFER_SOURCE_DIR) +
                    "/tests/structured/data/schemas/017_flight_booking.json");
    std::stringstream ss;
    ss << f.rdbuf();
    auto g = json_schema_to_gbnf(ss.str());
    if (!g.ok()) {
        std::fprintf(stderr, "%s\n", g.status().to_string().c_str());
        std::exit(1);
    }
    return *g;
}

std::shared_ptr<CompiledGrammar> compile(const std::string& gbnf) {
    auto ast = parse_gbnf(gbnf);
    auto g = compile_grammar(*ast);
    return std::make_shared<CompiledGrammar>(std::move(*g), vocab());
}

// A complete output under the grammar, sampled uniformly among allowed tokens (seeded).
std::vector<int32_t> trajectory(const std::string& gbnf, uint64_t seed) {
    auto g = compile(gbnf);
    GrammarMatcher m(g);
    std::vector<uint32_t> mask(vocab()->mask_words());
    std::mt19937_64 rng(seed);
    std::vector<int32_t> out;
    while (!m.is_terminated() && out.size() < 20000) {
        m.fill_mask(mask);
        int64_t n = 0;
        for (uint32_t w : mask) n += std::popcount(w);
        int64_t k = std::uniform_int_distribution<int64_t>(0, n - 1)(rng);
        for (std::size_t w = 0; w < mask.size(); ++w) {
            const int c = std::popcount(mask[w]);
            if (k >= c) {
                k -= c;
                continue;
            }
            uint32_t bits = mask[w];
            while (k-- > 0) bits &= bits - 1;
            out.push_back(static_cast<int32_t>(w * 32 + std::countr_zero(bits)));
            break;
        }
        m.accept_token(out.back());
    }
    return out;
}

struct Workload {
    std::string gbnf;
    std::vector<int32_t> tokens;
};

const Workload& workload(int which) {
    static const Workload w[2] = {{schema_gbnf(), {}}, {json_object_gbnf(), {}}};
    static bool init = [] {
        for (auto& x : const_cast<Workload(&)[2]>(w)) x.tokens = trajectory(x.gbnf, 7);
        return true;
    }();
    (void)init;
    return w[which];
}

void replay(benchmark::State& state, bool cold) {
    const Workload& w = workload(static_cast<int>(state.range(0)));
    std::vector<uint32_t> mask(vocab()->mask_words());
    auto warm = compile(w.gbnf);
    int64_t steps = 0;
    for (auto _ : state) {
        auto g = cold ? compile(w.gbnf) : warm;
        GrammarMatcher m(g);
        for (int32_t t : w.tokens) {
            m.fill_mask(mask);
            benchmark::DoNotOptimize(mask.data());
            m.accept_token(t);
        }
        steps += static_cast<int64_t>(w.tokens.size());
    }
    state.counters["steps_per_output"] = static_cast<double>(w.tokens.size());
    state.counters["us_per_step"] = benchmark::Counter(
        static_cast<double>(steps) * 1e-6, benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
    state.SetLabel(state.range(0) == 0 ? "json-schema flight_booking" : "json_object");
}

void BM_MaskPerStepWarm(benchmark::State& state) {
    replay(state, false);
}
void BM_MaskPerStepCold(benchmark::State& state) {
    replay(state, true);
}
BENCHMARK(BM_MaskPerStepWarm)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_MaskPerStepCold)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

// The server's workload (tools/bench/structured_mask_cost.py): outputs of at most `tokens` tokens under the
// budget rule, each with a fresh seed, over one grammar that stays warm across outputs (a long-running
// server on a recurring schema: the states seen by earlier outputs are cached, new seeds still reach new
// ones). arg 0: the budget in tokens. Counters: us per step (mask + accept), cache misses per step.
void BM_BudgetedOutputs(benchmark::State& state) {
    const int32_t budget = static_cast<int32_t>(state.range(0));
    auto g = compile(schema_gbnf());
    std::vector<uint32_t> mask(vocab()->mask_words());
    uint64_t seed = 1;
    int64_t steps = 0;
    const CompiledGrammarStats before = g->stats();
    for (auto _ : state) {
        GrammarMatcher m(g);
        std::mt19937_64 rng(seed++);
        for (int32_t left = budget; left > 0 && !m.is_terminated(); --left) {
            m.fill_mask(mask, left);
            int64_t n = 0;
            for (uint32_t w : mask) n += std::popcount(w);
            if (n == 0) break;
            int64_t k = std::uniform_int_distribution<int64_t>(0, n - 1)(rng);
            for (std::size_t w = 0; w < mask.size(); ++w) {
                const int c = std::popcount(mask[w]);
                if (k >= c) {
                    k -= c;
                    continue;
                }
                uint32_t bits = mask[w];
                while (k-- > 0) bits &= bits - 1;
                m.accept_token(static_cast<int32_t>(w * 32 + std::countr_zero(bits)));
                break;
            }
            ++steps;
        }
    }
    const CompiledGrammarStats after = g->stats();
    state.counters["misses_per_step"] =
        static_cast<double>(after.mask_misses - before.mask_misses) / static_cast<double>(steps);
    state.counters["states"] = static_cast<double>(after.states);
    state.counters["us_per_step"] = benchmark::Counter(
        static_cast<double>(steps) * 1e-6, benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_BudgetedOutputs)->Arg(120)->Arg(500)->Iterations(200)->Unit(benchmark::kMillisecond);

// One uncached mask: at the start of the object (few tokens live) and inside a string (nearly all live).
void BM_FullWalk(benchmark::State& state) {
    // Inside the free-form "name" string of the first passenger.
    const std::string prefix =
        state.range(0) == 0 ? "" : "{\"pnr\": \"AB12CD\", \"passengers\": [{\"name\": \"Jo";
    std::vector<uint32_t> mask(vocab()->mask_words());
    const std::string gbnf = schema_gbnf();
    for (auto _ : state) {
        state.PauseTiming();
        auto g = compile(gbnf);
        GrammarMatcher m(g);
        m.accept_bytes(prefix);
        state.ResumeTiming();
        m.fill_mask(mask);
        benchmark::DoNotOptimize(mask.data());
    }
    int64_t allowed = 0;
    for (uint32_t w : mask) allowed += std::popcount(w);
    state.counters["allowed"] = static_cast<double>(allowed);
    state.SetLabel(state.range(0) == 0 ? "object start" : "inside a string");
}
BENCHMARK(BM_FullWalk)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);

void BM_CopyMask(benchmark::State& state) {
    std::vector<uint32_t> a(vocab()->mask_words(), 0x5a5a5a5au), b(a.size());
    for (auto _ : state) {
        std::memcpy(b.data(), a.data(), a.size() * sizeof(uint32_t));
        benchmark::DoNotOptimize(b.data());
    }
}
BENCHMARK(BM_CopyMask)->Unit(benchmark::kMicrosecond);

// The masking pass as the engine ran it before mask_logits_in_place (a copy of the row, word by word).
void mask_row_word_by_word(const std::vector<uint32_t>& mask, std::span<const float> row,
                           std::vector<float>& out) {
    constexpr float kOff = -std::numeric_limits<float>::infinity();
    out.resize(row.size());
    for (std::size_t w = 0; w < row.size() / 32; ++w) {
        const uint32_t bits = mask[w];
        const float* src = row.data() + w * 32;
        float* dst = out.data() + w * 32;
        if (bits == ~0u)
            std::copy(src, src + 32, dst);
        else if (bits == 0)
            std::fill(dst, dst + 32, kOff);
        else
            for (int b = 0; b < 32; ++b) dst[b] = (bits >> b) & 1u ? src[b] : kOff;
    }
}

// arg 0: 0 = object start, 1 = inside a string; arg 1: 0 = word-by-word copy (before), 1 = copy by runs
// (apply_logits_constraint), 2 = in place (the engine now).
void BM_MaskRow(benchmark::State& state) {
    const std::string prefix =
        state.range(0) == 0 ? "" : "{\"pnr\": \"AB12CD\", \"passengers\": [{\"name\": \"Jo";
    engine::GrammarConstraint c(compile(schema_gbnf()));
    std::vector<uint32_t> mask(vocab()->mask_words());
    for (unsigned char ch : prefix) { // feed the prefix byte by byte (single-byte tokens exist)
        int32_t id = 0;
        while (vocab()->bytes(id) != std::string(1, static_cast<char>(ch)) || vocab()->is_special(id)) ++id;
        c.accept(id);
    }
    std::vector<float> row(static_cast<std::size_t>(vocab()->size()));
    std::mt19937 rng(1);
    for (float& v : row) v = std::uniform_real_distribution<float>(-8.0f, 8.0f)(rng);
    std::vector<float> scratch;
    c.fill_mask(mask); // cache the state's mask
    for (auto _ : state) {
        switch (state.range(1)) {
        case 0:
            c.fill_mask(mask);
            mask_row_word_by_word(mask, row, scratch);
            benchmark::DoNotOptimize(scratch.data());
            break;
        case 1:
            benchmark::DoNotOptimize(engine::apply_logits_constraint(c, row, scratch, mask).data());
            break;
        default:
            benchmark::DoNotOptimize(engine::mask_logits_in_place(c, row, mask));
            break;
        }
    }
    static const char* kWhat[] = {"word by word (before)", "copy by runs", "in place (now)"};
    state.SetLabel(std::string(state.range(0) == 0 ? "object start, " : "inside a string, ") +
                   kWhat[state.range(1)]);
}
BENCHMARK(BM_MaskRow)->ArgsProduct({{0, 1}, {0, 1, 2}})->Unit(benchmark::kMicrosecond);

// One engine step for a constrained row, as the engine runs it: refill the row with fresh logits (the
// forward's output), mask it in place, sample (temperature 1). arg 0: 0 = no constraint (the baseline),
// 1 = object start, 2 = inside a string. The difference to arg 0 is what the constraint adds per step.
void BM_SampleStep(benchmark::State& state) {
    const std::string prefix =
        state.range(0) == 2 ? "{\"pnr\": \"AB12CD\", \"passengers\": [{\"name\": \"Jo" : "";
    engine::GrammarConstraint c(compile(schema_gbnf()));
    for (unsigned char ch : prefix) {
        int32_t id = 0;
        while (vocab()->bytes(id) != std::string(1, static_cast<char>(ch)) || vocab()->is_special(id)) ++id;
        c.accept(id);
    }
    std::vector<float> logits(static_cast<std::size_t>(vocab()->size())), row(logits.size());
    std::mt19937 rng(1);
    for (float& v : logits) v = std::uniform_real_distribution<float>(-8.0f, 8.0f)(rng);
    std::vector<uint32_t> mask;
    engine::Sampler sampler;
    engine::SamplingParams params;
    params.temperature = 1.0f;
    int64_t pos = 0;
    for (auto _ : state) {
        std::copy(logits.begin(), logits.end(), row.begin());
        if (state.range(0) != 0) engine::mask_logits_in_place(c, row, mask);
        engine::SampleInput in;
        in.logits = row;
        in.params = &params;
        in.position = pos++;
        benchmark::DoNotOptimize(sampler.sample(in).token);
    }
    static const char* kWhat[] = {"no constraint", "object start", "inside a string"};
    state.SetLabel(kWhat[state.range(0)]);
}
BENCHMARK(BM_SampleStep)->DenseRange(0, 2)->Unit(benchmark::kMicrosecond);

} // namespace

BENCHMARK_MAIN();
