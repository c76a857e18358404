// Structured outputs through the engine (FakeModel): every completion of every request follows its
// grammar, also with n > 1, sampling at temperature 1, and a pool small enough to preempt (recompute must
// not disturb the per-sequence grammar state); greedy requests, whose unconstrained argmax would break
// the grammar, are forced to follow it too.

#include <gtest/gtest.h>

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

} // namespace
} // namespace deepinfer::engine::testing
