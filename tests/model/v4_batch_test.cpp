// DeepSeek V4 over the engine contract: ragged batches mixing prompt chunks, decodes and padding of several
// sequences in ONE ForwardBatch; prefix-cache hits restored from a block's boundary snapshot; forks through
// copy_block / copy_slot; weights resident at their stored size; clear errors for bad batches.
// Logit metric everywhere: max|got - ref| <= 1e-4 * max|ref| against the transformers goldens.

#include <cstdio>

#include "golden_util.h"
#include "model/sequence_runner.h"

namespace deepinfer::testing {
namespace {

using model::ForwardBatch;
using model::SequenceChunk;
using model::deepseek_v4::DeepseekV4Model;

// A golden prompt followed by its greedy continuation: the token at any position and its expected logits.
struct GoldenSeq {
    GoldenSeq(const Goldens& g, int prompt, int32_t slot_, std::vector<int32_t> blocks_)
        : ids(g.ids("prompt." + std::to_string(prompt) + ".ids")),
          gen(g.ids("prompt." + std::to_string(prompt) + ".gen_tokens")),
          prefill(g.f32("prompt." + std::to_string(prompt) + ".prefill_logits")),
          steps(g.f32("prompt." + std::to_string(prompt) + ".step_logits")), id(prompt), slot(slot_),
          blocks(std::move(blocks_)) {}
    int64_t L() const { return static_cast<int64_t>(ids.size()); }
    int32_t token(int64_t q) const { return q < L() ? ids[q] : gen[q - L()]; }
    const float* expected(int64_t q, int64_t V) const {
        return q < L() ? prefill.data() + q * V : steps.data() + (q - L() + 1) * V;
    }
    std::vector<int32_t> ids, gen;
    std::vector<float> prefill, steps;
    int id;
    int32_t slot;
    std::vector<int32_t> blocks;
    int64_t pos = 0;
};

// Appends `n` tokens of `s` (from its current position) as one chunk, all rows wanting logits.
void add_chunk(ForwardBatch* b, GoldenSeq* s, int32_t n, std::vector<std::pair<GoldenSeq*, int64_t>>* rows) {
    SequenceChunk ch;
    ch.seq_id = s->id;
    ch.slot = s->slot;
    ch.start_pos = s->pos;
    ch.num_tokens = n;
    ch.token_offset = static_cast<int32_t>(b->token_ids.size());
    ch.block_table = s->blocks;
    ch.reset_slot = s->pos == 0;
    for (int32_t i = 0; i < n; ++i) {
        b->logits_rows.push_back(static_cast<int32_t>(b->token_ids.size()));
        b->token_ids.push_back(s->token(s->pos + i));
        b->positions.push_back(s->pos + i);
        rows->push_back({s, s->pos + i});
    }
    b->chunks.push_back(ch);
    s->pos += n;
}

void add_padding(ForwardBatch* b, int32_t n) {
    SequenceChunk ch;
    ch.is_padding = true;
    ch.num_tokens = n;
    ch.token_offset = static_cast<int32_t>(b->token_ids.size());
    for (int32_t i = 0; i < n; ++i) {
        b->token_ids.push_back(7);
        b->positions.push_back(i);
    }
    b->chunks.push_back(ch);
}

double run_and_check(DeepseekV4Model* m, const ForwardBatch& b,
                     const std::vector<std::pair<GoldenSeq*, int64_t>>& rows) {
    const int64_t V = m->vocab_size();
    std::vector<float> logits(b.logits_rows.size() * V);
    core::Status st = m->forward(b, logits.data());
    EXPECT_TRUE(st.ok()) << st.to_string();
    double worst = 0.0;
    for (size_t r = 0; r < rows.size(); ++r) {
        const double e = max_rel_error(logits.data() + r * V, rows[r].first->expected(rows[r].second, V), V);
        worst = std::max(worst, e);
        EXPECT_LE(e, kLogitTol) << "prompt " << rows[r].first->id << " position " << rows[r].second;
    }
    return worst;
}

class V4Batch : public ::testing::TestWithParam<std::string> {
protected:
    void SetUp() override { g_ = std::make_unique<Goldens>(GetParam()); }
    std::unique_ptr<Goldens> g_;
};

// Four sequences in flight: prompt chunks of different sizes, decodes, padding rows, a late arrival.
TEST_P(V4Batch, MixedBatchMatchesSoloGoldens) {
    auto m = load_model(GetParam(), 16, 24, 4);
    ASSERT_TRUE(m);
    GoldenSeq a(*g_, 8, 0, iota_blocks(0, 11)), b(*g_, 7, 1, iota_blocks(11, 5)),
        c(*g_, 4, 2, iota_blocks(16, 3)), d(*g_, 2, 3, iota_blocks(19, 3));
    double worst = 0.0;
    {
        ForwardBatch fb;
        std::vector<std::pair<GoldenSeq*, int64_t>> rows;
        add_chunk(&fb, &a, 40, &rows);
        add_chunk(&fb, &b, 17, &rows);
        add_padding(&fb, 3);
        add_chunk(&fb, &c, 8, &rows);
        worst = std::max(worst, run_and_check(m.get(), fb, rows));
    }
    {
        ForwardBatch fb;
        std::vector<std::pair<GoldenSeq*, int64_t>> rows;
        add_chunk(&fb, &c, 1, &rows); // decode
        add_chunk(&fb, &a, 90, &rows);
        add_padding(&fb, 2);
        add_chunk(&fb, &b, 23, &rows);
        add_chunk(&fb, &d, 4, &rows); // arrives now
        worst = std::max(worst, run_and_check(m.get(), fb, rows));
    }
    for (int step = 0; step < 12; ++step) {
        ForwardBatch fb;
        std::vector<std::pair<GoldenSeq*, int64_t>> rows;
        for (GoldenSeq* s : {&d, &b, &a, &c}) add_chunk(&fb, s, 1, &rows);
        if (step % 3 == 0) add_padding(&fb, 1);
        worst = std::max(worst, run_and_check(m.get(), fb, rows));
    }
    std::printf("[%s] mixed batch (4 sequences, chunks + decodes + padding): max logit rel err %.3g\n",
                GetParam().c_str(), worst);
}

// A prefix-cache hit at block k: blocks 0..k-1 shared with a finished sequence, the slot restored from
// block k-1's boundary snapshot, the rest of the prompt and 31 decode steps match the goldens. Without
// the restore the same run must diverge (the snapshot is what makes the hit exact).
TEST_P(V4Batch, PrefixHitRestoresFromBlockSnapshot) {
    const int64_t bs = 16;
    auto m = load_model(GetParam(), bs, 64, 3);
    ASSERT_TRUE(m);
    const int64_t V = m->vocab_size();
    GoldenSeq a(*g_, 8, 0, iota_blocks(0, 11));
    {
        ForwardBatch fb;
        std::vector<std::pair<GoldenSeq*, int64_t>> rows;
        add_chunk(&fb, &a, 130, &rows);
        run_and_check(m.get(), fb, rows);
    }
    int32_t next_block = 11;
    for (int64_t k : {1, 4, 7}) {
        for (bool restore : {true, false}) {
            std::vector<int32_t> blocks(a.blocks.begin(), a.blocks.begin() + k);
            for (int i = 0; i < 11 - k; ++i) blocks.push_back(next_block++);
            GoldenSeq s(*g_, 8, 1, blocks);
            s.pos = k * bs;
            ForwardBatch fb;
            std::vector<std::pair<GoldenSeq*, int64_t>> rows;
            add_chunk(&fb, &s, static_cast<int32_t>(130 - k * bs), &rows);
            fb.chunks[0].restore_slot_from_block = restore;
            fb.chunks[0].reset_slot = true;
            std::vector<float> logits(fb.logits_rows.size() * V);
            ASSERT_TRUE(m->forward(fb, logits.data()).ok());
            double worst = 0.0;
            for (size_t r = 0; r < rows.size(); ++r)
                worst =
                    std::max(worst, max_rel_error(logits.data() + r * V, s.expected(rows[r].second, V), V));
            if (!restore) {
                EXPECT_GT(worst, kLogitTol)
                    << "k=" << k << ": a hit without the snapshot should not be exact";
                continue;
            }
            EXPECT_LE(worst, kLogitTol) << "prefix hit at block " << k;
            for (int step = 0; step < 31; ++step) { // positions 130..160: golden steps 1..31
                ForwardBatch db;
                std::vector<std::pair<GoldenSeq*, int64_t>> drows;
                add_chunk(&db, &s, 1, &drows);
                EXPECT_LE(run_and_check(m.get(), db, drows), kLogitTol) << "k=" << k << " step " << step;
            }
        }
    }
}

// Fork after a partially filled block: copy_slot + copy_block give the child the parent's exact state.
TEST_P(V4Batch, ForkWithCopyBlockAndCopySlot) {
    auto m = load_model(GetParam(), 16, 12, 2);
    ASSERT_TRUE(m);
    GoldenSeq a(*g_, 7, 0, {0, 1, 2, 3, 4});
    ForwardBatch fb;
    std::vector<std::pair<GoldenSeq*, int64_t>> rows;
    add_chunk(&fb, &a, 40, &rows); // block 2 holds positions 32..39
    run_and_check(m.get(), fb, rows);
    m->copy_slot(0, 1);
    m->copy_block(2, 5);
    GoldenSeq child(*g_, 7, 1, {0, 1, 5, 6, 7});
    child.pos = 40;
    for (int step = 0; step < 31; ++step) {
        ForwardBatch db;
        std::vector<std::pair<GoldenSeq*, int64_t>> drows;
        add_chunk(&db, &a, 1, &drows);
        add_chunk(&db, &child, 1, &drows);
        EXPECT_LE(run_and_check(m.get(), db, drows), kLogitTol) << "step " << step;
    }
}

INSTANTIATE_TEST_SUITE_P(TinyV4, V4Batch, ::testing::Values("tiny-v4", "tiny-v4-fp8"),
                         [](const auto& param_info) {
                             return param_info.param == "tiny-v4" ? "bf16" : "fp8_fp4";
                         });

// Loading the quantized checkpoint keeps weights at their stored size: FP8 blocks and packed FP4 are bound
// as views, so resident weight bytes ~ file bytes (only small per-channel vectors are copied to F32).
TEST(V4Weights, QuantizedWeightsStayAtStoredSize) {
    auto m = DeepseekV4Model::load(source_path("models/tiny-v4-fp8"));
    ASSERT_TRUE(m.ok()) << m.status().to_string();
    const auto& w = (*m)->weights();
    const int64_t resident = w.resident_weight_bytes();
    const int64_t file = static_cast<int64_t>((*m)->checkpoint().mapped_bytes());
    int64_t f32_expanded = 0;
    for (const auto& t : (*m)->checkpoint().tensors())
        if (t.dtype == core::DType::kF8E4M3)
            f32_expanded += t.shape.numel() * 4;
        else if (t.dtype == core::DType::kI8)
            f32_expanded += t.shape.numel() * 2 * 4;
        else if (t.dtype != core::DType::kF8E8M0)
            f32_expanded += static_cast<int64_t>(t.nbytes);
    std::printf(
        "tiny-v4-fp8: resident weight bytes %lld, file bytes %lld (ratio %.3f); F32-expanded would be %lld\n",
        static_cast<long long>(resident), static_cast<long long>(file), double(resident) / double(file),
        static_cast<long long>(f32_expanded));
    EXPECT_GT(resident, file * 8 / 10);
    EXPECT_LT(resident, file * 11 / 10);
    EXPECT_LT(resident * 2, f32_expanded);
    EXPECT_EQ(w.layers[1].ffn.experts[0].w1.format, core::WeightFormat::kFp4Group);
    EXPECT_EQ(w.layers[1].attn.wq_b.format, core::WeightFormat::kFp8Block);
}

TEST(V4Errors, BadInputsAreStatuses) {
    auto m = DeepseekV4Model::load(source_path("models/tiny-v4"));
    ASSERT_TRUE(m.ok());
    DeepseekV4Model& lm = **m;
    model::SequenceRunner run(&lm, 0, {0});
    std::vector<float> logits;
    core::Status st = run.feed({3, 4}, 0, false, &logits);
    EXPECT_EQ(st.code(), core::StatusCode::kFailedPrecondition) << st.to_string();

    model::KvCacheSpec spec;
    spec.block_size = 6; // not a multiple of 4 and 8
    spec.num_blocks = 2;
    spec.num_slots = 1;
    st = lm.init_kv_cache(spec);
    EXPECT_EQ(st.code(), core::StatusCode::kInvalidArgument);
    EXPECT_NE(st.message().find("compression ratio"), std::string::npos) << st.message();
    EXPECT_TRUE(lm.kv_geometry(16).ok());

    spec.block_size = 16;
    ASSERT_TRUE(lm.init_kv_cache(spec).ok());
    st = run.feed({3, 600}, 0, false, &logits);
    EXPECT_EQ(st.code(), core::StatusCode::kInvalidArgument);
    EXPECT_NE(st.message().find("vocabulary"), std::string::npos) << st.message();
    std::vector<int32_t> long_prompt(40, 5); // 40 positions, one block of 16
    st = run.feed(long_prompt, 0, false, &logits);
    EXPECT_EQ(st.code(), core::StatusCode::kInvalidArgument);
    EXPECT_NE(st.message().find("block table"), std::string::npos) << st.message();

    model::ForwardBatch twice = run.next_batch({3, 4}, false);
    twice.token_ids.push_back(5);
    twice.positions.push_back(2);
    model::SequenceChunk again = twice.chunks[0];
    again.start_pos = 2;
    again.num_tokens = 1;
    again.token_offset = 2;
    twice.chunks.push_back(again);
    std::vector<float> out(lm.vocab_size());
    st = lm.forward(twice, out.data());
    EXPECT_EQ(st.code(), core::StatusCode::kInvalidArgument);
    EXPECT_NE(st.message().find("slot"), std::string::npos) << st.message();

    auto missing = DeepseekV4Model::load("/nonexistent/model");
    EXPECT_FALSE(missing.ok());
}

} // namespace
} // namespace deepinfer::testing
