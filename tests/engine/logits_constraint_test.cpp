// Structured outputs through the engine (FakeModel): every completion of every request follows its
// grammar, also with n > 1, sampling at temperature 1, and a pool small enough to preempt (recompute must
// not disturb the per-sequence grammar state); greedy requests, whose unconstrained argmax would break
// the grammar, are forced to follow it too.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>

#include "engine/engine.h"
#include "engine/grammar_constraint.h"
#include "engine_harness.h"
#include "fake_model.h"
#include "structured/gbnf.h"

namespace deepinfer::engine::testing {
namespace {

constexpr int64_t kVocab = 64;

// Token 0 is EOS (FakeModel's); tokens 1..63 are one character each.
std::shared_ptr<const structured::TokenVocabulary> fake_vocab() {
    const std::string chars = "0123456789[],{}:\" abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRS";
    std::vector<std::string> bytes{"<eos>"};
    for (int64_t i = 1; i < kVocab; ++i) bytes.push_back(std::string(1, chars[i - 1]));
    std::vector<bool> special(kVocab, false);
    special[0] = true;
    return std::make_shared<structured::TokenVocabulary>(bytes, special, std::vector<int32_t>{0});
}

std::string text_of(const std::vector<int32_t>& ids, const structured::TokenVocabulary& v) {
    std::string s;
    for (int32_t id : ids)
        if (id != 0) s += v.bytes(id);
    return s;
}

TEST(LogitsConstraint, EveryCompletionFollowsItsGrammarThroughPreemption) {
    auto vocab = fake_vocab();
    const std::string list_gbnf = "root ::= \"[\" num (\",\" num){0,3} \"]\"\nnum ::= [1-9] [0-9]{0,2}\n";
    auto list = make_grammar_constraint(GrammarKind::kGbnf, list_gbnf, vocab);
    ASSERT_TRUE(list.ok()) << list.status().to_string();
    auto schema = make_grammar_constraint(
        GrammarKind::kJsonSchema,
        R"({"type":"object","properties":{"k":{"enum":["ab","cd"]},"v":{"type":"integer","minimum":0,"maximum":99}},
            "required":["k","v"],"additionalProperties":false})",
        vocab);
    ASSERT_TRUE(schema.ok()) << schema.status().to_string();

    EngineConfig c;
    c.block_size = 16;
    c.num_kv_blocks = 40;
    c.max_num_seqs = 8;
    c.max_num_batched_tokens = 256;
    FakeModel model(kVocab);
    auto engine = LLMEngine::create(&model, c);
    ASSERT_TRUE(engine.ok()) << engine.status().to_string();
    std::vector<Request> reqs = mixed_workload(24, 200, 1, kVocab, 77);
    for (std::size_t i = 0; i < reqs.size(); ++i) {
        Request& r = reqs[i];
        r.params.max_tokens = 64;
        r.params.constraint = i % 2 == 0 ? *list : *schema;
        r.params.temperature = i % 3 == 0 ? 0.0f : 1.0f;
        r.params.seed = i;
        r.params.n = i % 4 == 1 ? 2 : 1;
    }
    RunResult res = run_engine(**engine, reqs);
    ASSERT_TRUE(res.ok);
    EXPECT_GT(res.counters.preemptions, 0) << "the pool was meant to be too small";
    for (std::size_t i = 0; i < reqs.size(); ++i) {
        const auto& outs = res.tokens.at(reqs[i].id);
        ASSERT_EQ(outs.size(), static_cast<std::size_t>(reqs[i].params.n));
        for (std::size_t k = 0; k < outs.size(); ++k) {
            SCOPED_TRACE(reqs[i].id + " completion " + std::to_string(k));
            // Replay on a fresh copy of the prototype: every token allowed, and EOS ends a full sentence.
            auto check = reqs[i].params.constraint->clone();
            for (int32_t t : outs[k])
                EXPECT_TRUE(check->accept(t)) << "token " << t << " in " << text_of(outs[k], *vocab);
            EXPECT_EQ(res.finish.at(reqs[i].id)[k], "stop") << text_of(outs[k], *vocab);
            EXPECT_TRUE(check->is_terminated());
        }
    }
}

// A step's constrained rows are masked and sampled on the engine's pool (one thread: in order; 2 and 3:
// rows split over the threads, masked and sampled there, next to unconstrained ones): the same tokens.
TEST(LogitsConstraint, RowsMaskedAndSampledInParallelGiveTheSameTokens) {
    auto vocab = fake_vocab();
    auto list = make_grammar_constraint(
        GrammarKind::kGbnf, "root ::= \"[\" num (\",\" num){0,5} \"]\"\nnum ::= [1-9] [0-9]{0,2}\n", vocab);
    ASSERT_TRUE(list.ok()) << list.status().to_string();
    std::vector<Request> reqs = mixed_workload(24, 120, 1, kVocab, 91);
    for (std::size_t i = 0; i < reqs.size(); ++i) {
        Request& r = reqs[i];
        r.params.max_tokens = 40;
        if (i % 3 != 2) r.params.constraint = *list; // every third row unconstrained
        r.params.temperature = 1.0f;
        r.params.seed = i;
        r.params.n = i % 5 == 1 ? 2 : 1;
    }
    std::map<std::string, std::vector<std::vector<int32_t>>> first;
    for (int threads = 1; threads <= 3; ++threads) {
        EngineConfig c;
        c.block_size = 16;
        c.num_kv_blocks = 200;
        c.max_num_seqs = 16;
        c.max_num_batched_tokens = 512;
        c.num_threads = threads;
        FakeModel model(kVocab);
        auto engine = LLMEngine::create(&model, c);
        ASSERT_TRUE(engine.ok()) << engine.status().to_string();
        RunResult res = run_engine(**engine, reqs);
        ASSERT_TRUE(res.ok);
        EXPECT_GT(res.max_batch, 2);
        if (threads == 1) {
            first = res.tokens;
            continue;
        }
        for (const Request& r : reqs)
            EXPECT_EQ(res.tokens.at(r.id), first.at(r.id)) << r.id << ", " << threads;
    }
    for (std::size_t i = 0; i < reqs.size(); i += 3) { // the constrained outputs follow the grammar
        for (const auto& out : first.at(reqs[i].id)) {
            auto check = reqs[i].params.constraint->clone();
            for (int32_t t : out) EXPECT_TRUE(check->accept(t)) << text_of(out, *vocab);
        }
    }
}

TEST(LogitsConstraint, MaskAndRollback) {
    auto vocab = fake_vocab();
    auto c = make_grammar_constraint(GrammarKind::kRegex, "a[bc]", vocab);
    ASSERT_TRUE(c.ok());
    auto seq = (*c)->clone();
    std::vector<float> row(kVocab, 1.0f), scratch;
    std::vector<uint32_t> mask;
    int64_t allowed = 0;
    auto masked = apply_logits_constraint(*seq, row, scratch, mask, &allowed);
    EXPECT_EQ(allowed, 1);
    int32_t a = 0;
    while (vocab->bytes(a) != "a") ++a;
    ASSERT_EQ(vocab->bytes(a + 1), "b");
    for (int64_t t = 0; t < kVocab; ++t) EXPECT_EQ(std::isinf(masked[t]), t != a) << t;
    EXPECT_FALSE(seq->accept(0)); // EOS before the sentence is complete
    ASSERT_TRUE(seq->accept(a));
    apply_logits_constraint(*seq, row, scratch, mask, &allowed);
    EXPECT_EQ(allowed, 2);
    ASSERT_TRUE(seq->accept(a + 1)); // 'b'
    ASSERT_TRUE(seq->accept(0));
    EXPECT_TRUE(seq->is_terminated());
    ASSERT_TRUE(seq->rollback(2));
    EXPECT_FALSE(seq->is_terminated());
    apply_logits_constraint(*seq, row, scratch, mask, &allowed);
    EXPECT_EQ(allowed, 2);
    // Compile errors reach the caller with the reason.
    auto bad = make_grammar_constraint(GrammarKind::kRegex, "a(b", vocab);
    ASSERT_FALSE(bad.ok());
    EXPECT_NE(bad.status().message().find("missing ')'"), std::string::npos);
}

// Thinking, then the grammar: free tokens (never EOS) until the trigger, at most `budget` of them, then the
// grammar from the next token on; through preemption and n > 1, at temperature 0 and 1.
TEST(LogitsConstraint, GrammarStartsAfterTheThinkingTrigger) {
    auto vocab = fake_vocab();
    const int32_t trigger = kVocab - 1; // 'S' plays </think>
    const int32_t budget = 12;
    auto list =
        make_grammar_constraint(GrammarKind::kGbnf, "root ::= \"[\" [1-9] (\",\" [1-9]){0,3} \"]\"\n", vocab);
    ASSERT_TRUE(list.ok()) << list.status().to_string();
    auto deferred =
        std::make_shared<DeferredConstraint>((*list)->clone(), trigger, std::vector<int32_t>{0}, budget);

    EngineConfig c;
    c.block_size = 16;
    c.num_kv_blocks = 40;
    c.max_num_seqs = 8;
    c.max_num_batched_tokens = 256;
    FakeModel model(kVocab);
    auto engine = LLMEngine::create(&model, c);
    ASSERT_TRUE(engine.ok()) << engine.status().to_string();
    std::vector<Request> reqs = mixed_workload(16, 200, 1, kVocab, 91);
    for (std::size_t i = 0; i < reqs.size(); ++i) {
        reqs[i].params.max_tokens = 64;
        reqs[i].params.constraint = deferred;
        reqs[i].params.temperature = i % 3 == 0 ? 0.0f : 1.0f;
        reqs[i].params.seed = i;
        reqs[i].params.n = i % 4 == 1 ? 2 : 1;
    }
    RunResult res = run_engine(**engine, reqs);
    ASSERT_TRUE(res.ok);
    EXPECT_GT(res.counters.preemptions, 0) << "the pool was meant to be too small";
    int thought = 0;
    for (const Request& r : reqs) {
        const auto& outs = res.tokens.at(r.id);
        for (std::size_t k = 0; k < outs.size(); ++k) {
            SCOPED_TRACE(r.id + " completion " + std::to_string(k) + ": " + text_of(outs[k], *vocab));
            auto end = std::find(outs[k].begin(), outs[k].end(), trigger);
            ASSERT_NE(end, outs[k].end()) << "no trigger";
            const auto free = static_cast<int32_t>(end - outs[k].begin());
            EXPECT_LE(free, budget);
            thought += free > 0;
            EXPECT_EQ(std::count(outs[k].begin(), end, 0), 0) << "EOS while thinking";
            auto check = (*list)->clone();
            for (auto it = end + 1; it != outs[k].end(); ++it) EXPECT_TRUE(check->accept(*it)) << *it;
            EXPECT_TRUE(check->is_terminated());
            EXPECT_EQ(res.finish.at(r.id)[k], "stop");
        }
    }
    EXPECT_GT(thought, 0) << "every completion closed its thinking at once";
}

TEST(LogitsConstraint, DeferredMaskBudgetAndRollback) {
    auto vocab = fake_vocab();
    const int32_t trigger = kVocab - 1;
    auto inner = make_grammar_constraint(GrammarKind::kRegex, "a", vocab);
    ASSERT_TRUE(inner.ok());
    DeferredConstraint d((*inner)->clone(), trigger, {0}, 2);
    std::vector<float> row(kVocab, 1.0f), scratch;
    std::vector<uint32_t> mask;
    int64_t allowed = 0;
    apply_logits_constraint(d, row, scratch, mask, &allowed);
    EXPECT_EQ(allowed, kVocab - 1); // everything but EOS
    EXPECT_FALSE(d.accept(0));
    ASSERT_TRUE(d.accept(5));
    ASSERT_TRUE(d.accept(6));
    auto masked = apply_logits_constraint(d, row, scratch, mask, &allowed); // budget spent: only the trigger
    EXPECT_EQ(allowed, 1);
    EXPECT_FALSE(std::isinf(masked[trigger]));
    EXPECT_FALSE(d.accept(7));
    ASSERT_TRUE(d.accept(trigger));
    EXPECT_TRUE(d.active());
    int32_t a = 0;
    while (vocab->bytes(a) != "a") ++a;
    apply_logits_constraint(d, row, scratch, mask, &allowed);
    EXPECT_EQ(allowed, 1); // the grammar's mask: 'a'
    ASSERT_TRUE(d.accept(a));
    ASSERT_TRUE(d.accept(0));
    EXPECT_TRUE(d.is_terminated());
    auto copy = d.clone();
    ASSERT_TRUE(d.rollback(3)); // EOS, 'a', the trigger
    EXPECT_FALSE(d.active());
    EXPECT_FALSE(d.is_terminated());
    EXPECT_TRUE(copy->is_terminated()); // the copy kept its own state
    apply_logits_constraint(d, row, scratch, mask, &allowed);
    EXPECT_EQ(allowed, 1); // still two free tokens: only the trigger
    ASSERT_TRUE(d.rollback(1));
    apply_logits_constraint(d, row, scratch, mask, &allowed);
    EXPECT_EQ(allowed, kVocab - 1);
    EXPECT_FALSE(d.rollback(2));
}

// Tokens that would spell the trigger's text ("S" plays </think>: "ab" here, with a toy vocabulary where
// "a", "b", "ab" and "xab" are tokens) are not allowed while thinking, whole or as the completing piece.
TEST(LogitsConstraint, DeferredRefusesTokensSpellingTheTrigger) {
    std::vector<std::string> bytes{"<eos>", "a", "b", "ab", "xab", "c", "<T>"};
    std::vector<bool> special(bytes.size(), false);
    special[0] = special[6] = true;
    auto vocab = std::make_shared<structured::TokenVocabulary>(bytes, special, std::vector<int32_t>{0});
    auto text = make_trigger_text("ab", vocab->size(), [&](int32_t t) { return vocab->bytes(t); });
    ASSERT_EQ(text->n, 2);
    EXPECT_EQ(text->completes[0], (std::vector<int32_t>{3, 4}));
    EXPECT_EQ(text->completes[1], (std::vector<int32_t>{2, 3, 4})); // after "a": "b", "a"+"ab", "a"+"xab"
    auto inner = make_grammar_constraint(GrammarKind::kRegex, "c", vocab);
    ASSERT_TRUE(inner.ok());
    DeferredConstraint d((*inner)->clone(), 6, {0}, -1, text);
    std::vector<float> row(bytes.size(), 1.0f), scratch;
    std::vector<uint32_t> mask;
    int64_t allowed = 0;
    apply_logits_constraint(d, row, scratch, mask, &allowed);
    EXPECT_EQ(allowed, 4); // a, b, c, <T>: not <eos>, ab, xab
    EXPECT_FALSE(d.accept(3));
    ASSERT_TRUE(d.accept(1)); // "a": now "b" and "ab" would complete it
    auto masked = apply_logits_constraint(d, row, scratch, mask, &allowed);
    EXPECT_TRUE(std::isinf(masked[2]));
    EXPECT_FALSE(d.accept(2));
    ASSERT_TRUE(d.accept(5)); // "c" resets the match
    EXPECT_TRUE(d.accept(2));
    ASSERT_TRUE(d.rollback(1));
    ASSERT_TRUE(d.rollback(1));
    EXPECT_FALSE(d.accept(2)); // back after "a"
    ASSERT_TRUE(d.accept(6));
    EXPECT_TRUE(d.active());
    EXPECT_TRUE(d.accept(5));
}

} // namespace
} // namespace deepinfer::engine::testing

namespace deepinfer::engine::testing {
namespace {

// Token 0 is EOS, 1..256 the 256 bytes, then a few longer tokens: every byte is a token, so the budget
// rule applies.
std::shared_ptr<const structured::TokenVocabulary> byte_complete_vocab(int64_t* size) {
    std::vector<std::string> bytes{"<eos>"};
    for (int b = 0; b < 256; ++b) bytes.push_back(std::string(1, static_cast<char>(b)));
    for (const char* t : {"{\"id\":", "\"tags\":[", "\",\"", "abc", "[{", "}]}"}) bytes.emplace_back(t);
    std::vector<bool> special(bytes.size(), false);
    special[0] = true;
    *size = static_cast<int64_t>(bytes.size());
    return std::make_shared<structured::TokenVocabulary>(bytes, special, std::vector<int32_t>{0});
}

// Budget-aware completion: random logits write endless strings, yet with max_tokens barely above the
// schema's shortest output every completion closes in time (finish stop, a whole sentence), in thinking
// mode too (the trigger forced early enough for the answer to fit).
TEST(LogitsConstraint, TinyMaxTokensForcesClosure) {
    int64_t n_vocab = 0;
    auto vocab = byte_complete_vocab(&n_vocab);
    auto schema = make_grammar_constraint(GrammarKind::kJsonSchema, R"({"type":"object","properties":{
        "id":{"type":"string"},"tags":{"type":"array","items":{"type":"object",
        "properties":{"k":{"type":"string"},"v":{"type":"integer"}},"required":["k","v"]}}},
        "required":["id","tags"],"additionalProperties":false})",
                                          vocab);
    ASSERT_TRUE(schema.ok()) << schema.status().to_string();
    const int32_t shortest = (*schema)->tokens_to_end(); // {"id":"","tags":[]} + EOS
    ASSERT_EQ(shortest, 20);
    const int32_t trigger = static_cast<int32_t>(n_vocab) - 1; // "}]}" plays </think>
    auto thinking = std::make_shared<DeferredConstraint>((*schema)->clone(), trigger, std::vector<int32_t>{0},
                                                         /*budget=*/1000);

    EngineConfig c;
    c.block_size = 16;
    c.num_kv_blocks = 64;
    c.max_num_seqs = 8;
    c.max_num_batched_tokens = 256;
    FakeModel model(n_vocab);
    auto engine = LLMEngine::create(&model, c);
    ASSERT_TRUE(engine.ok()) << engine.status().to_string();
    std::vector<Request> reqs = mixed_workload(24, 40, 1, n_vocab, 5);
    for (std::size_t i = 0; i < reqs.size(); ++i) {
        Request& r = reqs[i];
        const bool think = i % 3 == 2;
        r.params.max_tokens = shortest + static_cast<int32_t>(i % 8) * 4 + (think ? 12 : 0);
        r.params.constraint = think ? std::shared_ptr<const LogitsConstraint>(thinking) : *schema;
        r.params.temperature = 1.0f;
        r.params.seed = i;
    }
    RunResult res = run_engine(**engine, reqs);
    ASSERT_TRUE(res.ok);
    int at_limit = 0, thought = 0;
    for (std::size_t i = 0; i < reqs.size(); ++i) {
        const auto& out = res.tokens.at(reqs[i].id).at(0);
        SCOPED_TRACE(reqs[i].id + ": " + text_of(out, *vocab));
        EXPECT_EQ(res.finish.at(reqs[i].id)[0], "stop");
        EXPECT_LE(static_cast<int64_t>(out.size()), reqs[i].params.max_tokens);
        at_limit += static_cast<int64_t>(out.size()) == reqs[i].params.max_tokens;
        auto begin = out.begin();
        if (i % 3 == 2) {
            begin = std::find(out.begin(), out.end(), trigger);
            ASSERT_NE(begin, out.end()) << "no trigger";
            thought += begin != out.begin();
            ++begin;
        }
        auto check = (*schema)->clone();
        for (auto it = begin; it != out.end(); ++it) EXPECT_TRUE(check->accept(*it)) << *it;
        EXPECT_TRUE(check->is_terminated());
    }
    EXPECT_GT(at_limit, 0) << "no completion used its whole budget: random strings were meant to run long";
    EXPECT_GT(thought, 0);
}

// Masking in place (what the engine does with its own logits rows) gives the row apply_logits_constraint
// builds in a copy, with the same allowed count, along a sampled output and under tight budgets.
TEST(LogitsConstraint, InPlaceMaskMatchesTheCopy) {
    int64_t n_vocab = 0;
    auto vocab = byte_complete_vocab(&n_vocab);
    auto c = make_grammar_constraint(GrammarKind::kJsonSchema,
                                     R"({"type":"object","properties":{"s":{"type":"string"},
                                         "n":{"type":"array","items":{"type":"number"}}},"required":["s","n"]})",
                                     vocab);
    ASSERT_TRUE(c.ok()) << c.status().to_string();
    auto seq = (*c)->clone();
    std::mt19937 rng(3);
    std::uniform_real_distribution<float> u(-4.0f, 4.0f);
    std::vector<float> scratch;
    std::vector<uint32_t> mask_a, mask_b;
    int steps = 0;
    for (int32_t left = 60; left > 0 && !seq->is_terminated(); --left, ++steps) {
        std::vector<float> row(static_cast<size_t>(n_vocab));
        for (float& v : row) v = u(rng);
        int64_t allowed_copy = 0;
        auto copy = apply_logits_constraint(*seq, row, scratch, mask_a, &allowed_copy, left);
        std::vector<float> expected(copy.begin(), copy.end());
        const int64_t allowed = mask_logits_in_place(*seq, row, mask_b, left);
        ASSERT_EQ(allowed, allowed_copy);
        ASSERT_GT(allowed, 0);
        ASSERT_EQ(row, expected);
        std::vector<int32_t> ok;
        for (int32_t t = 0; t < n_vocab; ++t)
            if (!std::isinf(row[t])) ok.push_back(t);
        ASSERT_TRUE(seq->accept(ok[rng() % ok.size()]));
    }
    EXPECT_TRUE(seq->is_terminated()) << "60 tokens are enough for this schema under the budget";
    EXPECT_GT(steps, 10);
}

} // namespace
} // namespace deepinfer::engine::testing
