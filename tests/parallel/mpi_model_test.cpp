// Runs under `mpirun -np N` (ctest: N = 2 and 4, shared memory and TCP): tp in {1, 2, 4} dividing N and
// ep = N / tp (EP N, TP N, TP 2 x EP 2) on tiny-v4, tiny-v4-fp8, tiny-v41 and tiny-v41-fp8. Rank 0 drives the
// sharded model through LeaderLm (every step published on the StepChannel), the other ranks replay it with
// run_model_follower; rank 0 also runs the unsharded model in-process on the same batches. Every logit must
// be bit-identical (the EP all-reduce only assembles exactly-owned slots, docs/parallelism.md), hence the
// same greedy tokens, and the EP load statistics (interval 1) must equal the unsharded model's router choices
// counted over all layers.

#include "model/deepseek_v4/model.h"
#include "model/deepseek_v4/step_sync.h"
#include "model/deepseek_v41/model.h"
#include "model/sequence_runner.h"
#include "parallel/layout_groups.h"

#include "../model/golden_util.h"
#include "mpi_test_main.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <span>
#include <thread>

namespace deepinfer::model::deepseek_v4 {
namespace {

using parallel::mpi_test::g_world;

using testing::Goldens;
using testing::source_path;

constexpr int64_t kBlockSize = 16;

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Max |a - b| (for the message when the bits differ).
double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
    double d = 0;
    for (size_t i = 0; i < std::min(a.size(), b.size()); ++i)
        d = std::max(d, std::fabs(static_cast<double>(a[i]) - b[i]));
    return d;
}

// Per-expert routed rows of one forward, summed over layers, from the unsharded model's probes.
std::vector<int64_t> routed_rows(const std::vector<std::vector<int32_t>>& router, int64_t E) {
    std::vector<int64_t> n(E, 0);
    for (const auto& layer : router)
        for (int32_t e : layer)
            if (e >= 0) ++n[e];
    return n;
}

bool is_v41(const std::string& name) {
    return name.rfind("tiny-v41", 0) == 0;
}

// The rank's shard and (rank 0) the unsharded reference with its router probes, either family.
class EpRun {
public:
    EpRun(const std::string& name, int tp)
        : dir_(source_path("models/" + name)), tp_(tp), v41_(is_v41(name)) {}

    std::vector<int64_t> routed_rows_of_ref() const {
        const int64_t E = ref_->info().n_routed_experts;
        return v41_ ? routed_rows(probes41_.router, E) : routed_rows(probes_.router, E);
    }

    // Every rank: the layout's groups, then the shard (stats every step). Rank 0 also loads the unsharded
    // reference.
    void load() {
        auto layout = parallel::make_parallel_layout(tp_, g_world->size() / tp_, 1, g_world->size());
        ASSERT_TRUE(layout.ok()) << layout.status().to_string();
        auto groups = parallel::make_layout_groups(*g_world, *layout);
        ASSERT_TRUE(groups.ok()) << groups.status().to_string();
        groups_ = std::move(*groups);
        ShardSpec spec;
        spec.moe = groups_.moe.get();
        spec.tp = groups_.tp.get();
        spec.stats_interval = 1;
        const int64_t n = spec.moe->size(), r = spec.moe->rank();
        if (v41_) {
            using deepseek_v41::DeepseekV41Model;
            auto m = DeepseekV41Model::load(dir_, spec);
            ASSERT_TRUE(m.ok()) << m.status().to_string();
            const auto& c = (*m)->config();
            const int64_t E = c.n_routed_experts;
            EXPECT_EQ((*m)->expert_range(), std::make_pair(r * E / n, (r + 1) * E / n));
            shared_macs_per_row_ = 3 * c.moe_intermediate_size * c.n_shared_experts * c.hidden_size;
            layers_ = c.num_hidden_layers;
            shard_ = std::move(*m);
            if (g_world->rank() == 0) {
                auto ref = DeepseekV41Model::load(dir_);
                ASSERT_TRUE(ref.ok()) << ref.status().to_string();
                (*ref)->set_probes(&probes41_);
                ref_ = std::move(*ref);
            }
            return;
        }
        auto m = DeepseekV4Model::load(dir_, spec);
        ASSERT_TRUE(m.ok()) << m.status().to_string();
        const ModelConfig& c = (*m)->config();
        const int64_t E = c.n_routed_experts;
        EXPECT_EQ((*m)->expert_range(), std::make_pair(r * E / n, (r + 1) * E / n));
        shared_macs_per_row_ = 3 * c.moe_intermediate_size * c.n_shared_experts * c.hidden_size;
        layers_ = c.num_hidden_layers;
        // The shard binds fewer expert bytes than the whole model.
        EXPECT_LT((*m)->weights().resident_weight_bytes(),
                  DeepseekV4Model::load(dir_)->get()->weights().resident_weight_bytes());
        shard_ = std::move(*m);
        if (g_world->rank() == 0) {
            auto ref = DeepseekV4Model::load(dir_);
            ASSERT_TRUE(ref.ok()) << ref.status().to_string();
            (*ref)->set_probes(&probes_);
            ref_ = std::move(*ref);
        }
    }

    parallel::LayoutGroups groups_;
    std::unique_ptr<ShardedLm> shard_;
    std::unique_ptr<CausalLm> ref_;
    ForwardProbes probes_;
    deepseek_v41::V41Probes probes41_;
    std::string dir_;
    int tp_;
    bool v41_;
    int64_t shared_macs_per_row_ = 0; // the shared expert's multiply-adds per row (w1, w3, w2)
    int64_t layers_ = 0;              // MoE layers (every layer)
};

// Rank 0 runs `lead` against the shard (through LeaderLm) and the reference; the others follow.
template <typename Lead> void run_ep(EpRun& run, Lead lead) {
    parallel::StepChannel channel(*g_world);
    if (g_world->rank() != 0) {
        core::Status s = run_model_follower(*run.shard_, channel);
        EXPECT_TRUE(s.ok()) << s.to_string();
        return;
    }
    LeaderLm leader(run.shard_.get(), &channel);
    lead(leader);
    core::Status s = channel.publish_shutdown();
    EXPECT_TRUE(s.ok()) << s.to_string();
}

// (model, tp): ep = world / tp, the experts split over all tp x ep ranks of the MoE group.
class MpiEp : public ::testing::TestWithParam<std::tuple<std::string, int>> {
protected:
    void SetUp() override {
        if (g_world->size() % std::get<1>(GetParam()) != 0) GTEST_SKIP() << "tp does not divide the world";
    }
    std::string model() const { return std::get<0>(GetParam()); }
    int tp() const { return std::get<1>(GetParam()); }
};

// Each golden prompt: prefill in chunks of 5 (all rows' logits), 8 greedy decode steps; logits, tokens and
// the per-step EP load statistics compared with the unsharded model.
TEST_P(MpiEp, GreedyDecodeIsBitIdenticalToOneProcess) {
    EpRun run(model(), tp());
    run.load();
    ASSERT_TRUE(run.shard_);
    const Goldens g(model());
    const int n_prompts = g.num_prompts();
    ASSERT_GT(n_prompts, 0);
    run_ep(run, [&](LeaderLm& leader) {
        const int64_t V = leader.vocab_size();
        for (int p = 0; p < n_prompts; ++p) {
            const std::vector<int32_t> ids = g.ids("prompt." + std::to_string(p) + ".ids");
            const int64_t total = static_cast<int64_t>(ids.size()) + 8;
            KvCacheSpec spec{kBlockSize, (total + kBlockSize - 1) / kBlockSize, 1};
            for (CausalLm* lm : {static_cast<CausalLm*>(&leader), static_cast<CausalLm*>(run.ref_.get())}) {
                ASSERT_TRUE(lm->configure_runtime({8, 1}).ok());
                ASSERT_TRUE(lm->init_kv_cache(spec).ok());
            }
            std::vector<int32_t> blocks;
            for (int32_t b = 0; b < spec.num_blocks; ++b) blocks.push_back(b);
            SequenceRunner a(&leader, 0, blocks), b(run.ref_.get(), 0, blocks);
            std::vector<float> la, lb;
            std::vector<int32_t> tokens_a, tokens_b;
            std::vector<int32_t> next = ids;
            for (int step = 0; step <= 8; ++step) {
                // Prefill chunk by chunk so every forward's statistics can be checked.
                for (size_t s = 0; s < next.size(); s += 5) {
                    std::vector<int32_t> part(next.begin() + s, next.begin() + std::min(next.size(), s + 5));
                    core::Status sa = a.feed(part, 0, true, &la), sb = b.feed(part, 0, true, &lb);
                    ASSERT_TRUE(sa.ok()) << sa.to_string();
                    ASSERT_TRUE(sb.ok()) << sb.to_string();
                    ASSERT_TRUE(same_bits(la, lb))
                        << model() << " tp " << tp() << " prompt " << p << " step " << step
                        << ": logits differ by up to " << max_abs_diff(la, lb);
                    const parallel::ExpertLoadSnapshot* snap = run.shard_->expert_load();
                    ASSERT_NE(snap, nullptr);
                    EXPECT_EQ(snap->expert_tokens, run.routed_rows_of_ref()) << "prompt " << p;
                }
                const int32_t ta = argmax(la.data() + la.size() - V, V),
                              tb = argmax(lb.data() + lb.size() - V, V);
                tokens_a.push_back(ta);
                tokens_b.push_back(tb);
                next = {ta};
            }
            EXPECT_EQ(tokens_a, tokens_b) << "prompt " << p;
        }
    });
}

// Two sequences, padding rows, then a slot fork (copy_slot, replayed by the followers before the next
// forward) continuing both branches: still bit-identical.
TEST_P(MpiEp, BatchWithPaddingAndSlotCopyIsBitIdentical) {
    EpRun run(model(), tp());
    run.load();
    ASSERT_TRUE(run.shard_);
    const Goldens g(model());
    run_ep(run, [&](LeaderLm& leader) {
        const int64_t V = leader.vocab_size();
        // 40 and 17 tokens: several blocks each, partial last blocks.
        const std::vector<int32_t> p0 = g.ids("prompt.7.ids"), p1 = g.ids("prompt.6.ids");
        KvCacheSpec spec{kBlockSize, 24, 4};
        for (CausalLm* lm : {static_cast<CausalLm*>(&leader), static_cast<CausalLm*>(run.ref_.get())}) {
            ASSERT_TRUE(lm->configure_runtime({64, 4}).ok());
            ASSERT_TRUE(lm->init_kv_cache(spec).ok());
        }
        auto chunk = [](ForwardBatch* fb, int32_t slot, int64_t start, const std::vector<int32_t>& toks,
                        std::vector<int32_t> blocks, bool padding) {
            SequenceChunk ch;
            ch.seq_id = slot;
            ch.slot = slot;
            ch.start_pos = start;
            ch.num_tokens = static_cast<int32_t>(toks.size());
            ch.token_offset = static_cast<int32_t>(fb->token_ids.size());
            ch.block_table = std::move(blocks);
            ch.reset_slot = start == 0;
            ch.is_padding = padding;
            for (size_t i = 0; i < toks.size(); ++i) {
                if (!padding) fb->logits_rows.push_back(static_cast<int32_t>(fb->token_ids.size()));
                fb->token_ids.push_back(toks[i]);
                fb->positions.push_back(padding ? static_cast<int64_t>(i) : start + static_cast<int64_t>(i));
            }
            fb->chunks.push_back(std::move(ch));
        };
        auto both = [&](const ForwardBatch& fb) {
            std::vector<float> la(fb.logits_rows.size() * V), lb(la.size());
            core::Status sa = leader.forward(fb, la.data()), sb = run.ref_->forward(fb, lb.data());
            EXPECT_TRUE(sa.ok()) << sa.to_string();
            EXPECT_TRUE(sb.ok()) << sb.to_string();
            EXPECT_TRUE(same_bits(la, lb)) << "logits differ by up to " << max_abs_diff(la, lb);
            return la;
        };
        const std::vector<int32_t> b0 = {0, 1, 2, 3, 4, 5}, b1 = {6, 7, 8, 9, 10, 11},
                                   b2 = {12, 13, 14, 15, 16, 17};
        ForwardBatch fb;
        chunk(&fb, 0, 0, p0, b0, false);
        chunk(&fb, 0, 0, {7, 7, 7}, {}, true); // padding rows (never routed)
        chunk(&fb, 1, 0, p1, b1, false);
        std::vector<float> l = both(fb);
        // Fork sequence 1 into slot 2 (its blocks copied too), then decode all three.
        const int64_t n1 = static_cast<int64_t>(p1.size());
        for (int32_t i = 0; i < static_cast<int32_t>((n1 + kBlockSize - 1) / kBlockSize); ++i) {
            leader.copy_block(b1[i], b2[i]);
            run.ref_->copy_block(b1[i], b2[i]);
        }
        leader.copy_slot(1, 2);
        run.ref_->copy_slot(1, 2);
        int64_t pos0 = static_cast<int64_t>(p0.size()), pos1 = n1, pos2 = n1;
        for (int step = 0; step < 6; ++step) {
            ForwardBatch d;
            chunk(&d, 0, pos0++, {static_cast<int32_t>(3 + step)}, b0, false);
            chunk(&d, 1, pos1++, {static_cast<int32_t>(11 + step)}, b1, false);
            if (step % 2 == 0) chunk(&d, 0, 0, {7}, {}, true);
            chunk(&d, 2, pos2++, {static_cast<int32_t>(29 + 3 * step)}, b2, false);
            l = both(d);
        }
    });
}

// Which work each rank does, from the op census (kernels/profiler.h) of one prefill: with TP every rank's
// sparse attention covers exactly 1/tp of the heads (its flops are the one-process flops / tp, the same
// keys), and the shared expert no longer runs inside any rank's moe_experts op (split over the MoE group
// through linear ops): the ranks' moe_experts flops sum to the one-process flops minus the shared expert's.
TEST_P(MpiEp, RanksSplitHeadsAndSharedExpert) {
    EpRun run(model(), tp());
    run.load();
    ASSERT_TRUE(run.shard_);
    const Goldens g(model());
    const std::vector<int32_t> ids = g.ids("prompt.7.ids");
    run.shard_->profiler()->set_enabled(true);
    double ref_attn = 0, ref_moe = 0;
    run_ep(run, [&](LeaderLm& leader) {
        run.ref_->profiler()->set_enabled(true);
        const int64_t blocks = (static_cast<int64_t>(ids.size()) + kBlockSize - 1) / kBlockSize;
        for (CausalLm* lm : {static_cast<CausalLm*>(&leader), static_cast<CausalLm*>(run.ref_.get())}) {
            ASSERT_TRUE(lm->configure_runtime({64, 1}).ok());
            ASSERT_TRUE(lm->init_kv_cache({kBlockSize, blocks, 1}).ok());
        }
        std::vector<int32_t> table(blocks);
        for (int32_t b = 0; b < blocks; ++b) table[b] = b;
        SequenceRunner a(&leader, 0, table), b(run.ref_.get(), 0, table);
        std::vector<float> la, lb;
        ASSERT_TRUE(a.feed(ids, 0, false, &la).ok());
        ASSERT_TRUE(b.feed(ids, 0, false, &lb).ok());
        EXPECT_TRUE(same_bits(la, lb));
        const kernels::ProfileSnapshot ref = run.ref_->profiler()->snapshot();
        ref_attn = ref.ops[static_cast<size_t>(kernels::OpKind::kSparseAttention)].flops;
        ref_moe = ref.ops[static_cast<size_t>(kernels::OpKind::kMoeExperts)].flops;
    });
    const kernels::ProfileSnapshot mine = run.shard_->profiler()->snapshot();
    // Whole numbers below 2^53: exact in doubles, moved as bytes.
    const double local[2] = {mine.ops[static_cast<size_t>(kernels::OpKind::kSparseAttention)].flops,
                             mine.ops[static_cast<size_t>(kernels::OpKind::kMoeExperts)].flops};
    std::vector<double> all(2 * g_world->size());
    ASSERT_TRUE(g_world
                    ->all_gather(std::as_bytes(std::span<const double>(local, 2)),
                                 std::as_writable_bytes(std::span<double>(all)))
                    .ok());
    if (g_world->rank() != 0) return;
    ASSERT_GT(ref_attn, 0);
    const double shared = 2.0 * static_cast<double>(ids.size()) * run.shared_macs_per_row_ * run.layers_;
    double moe_sum = 0;
    for (int r = 0; r < g_world->size(); ++r) {
        EXPECT_EQ(all[2 * r] * tp(), ref_attn) << "rank " << r << " attention heads";
        moe_sum += all[2 * r + 1];
    }
    EXPECT_EQ(moe_sum, ref_moe - shared)
        << "routed experts once over the group, the shared expert outside the op";
}

// A leader idle for longer than the deadline (a server with no requests) keeps its followers alive with
// the keep-alive thread; without it their receive would fail after 3 s.
TEST_P(MpiEp, KeepAliveThreadCarriesAnIdleLeader) {
    if (model() != "tiny-v4" || tp() != 1) GTEST_SKIP() << "one layout is enough";
    EpRun run(model(), tp());
    run.load();
    ASSERT_TRUE(run.shard_);
    const std::chrono::milliseconds saved = g_world->deadline();
    g_world->set_deadline(std::chrono::milliseconds(3000));
    run_ep(run, [&](LeaderLm& leader) {
        leader.start_keep_alive();
        const std::vector<int32_t> ids = {5, 6, 7};
        for (CausalLm* lm : {static_cast<CausalLm*>(&leader), static_cast<CausalLm*>(run.ref_.get())}) {
            ASSERT_TRUE(lm->configure_runtime({8, 1}).ok());
            ASSERT_TRUE(lm->init_kv_cache({kBlockSize, 1, 1}).ok());
        }
        SequenceRunner a(&leader, 0, {0}), b(run.ref_.get(), 0, {0});
        std::vector<float> la, lb;
        ASSERT_TRUE(a.feed(ids, 0, false, &la).ok());
        std::this_thread::sleep_for(std::chrono::milliseconds(7000)); // > 2 deadlines, idle
        core::Status s = a.feed({9}, 0, false, &la);
        ASSERT_TRUE(s.ok()) << s.to_string();
        ASSERT_TRUE(b.feed(ids, 0, false, &lb).ok());
        ASSERT_TRUE(b.feed({9}, 0, false, &lb).ok());
        EXPECT_TRUE(same_bits(la, lb));
        EXPECT_GE(run.shard_->expert_load()->step, 5u); // idle steps between the two forwards (3, 4 without)
    });
    g_world->set_deadline(saved);
}

// Named MODEL_tpN (tiny_v41_fp8_tp2), so that ctest can run the V4 and V4.1 halves as separate tests.
INSTANTIATE_TEST_SUITE_P(TinyModels, MpiEp,
                         ::testing::Combine(::testing::Values("tiny-v4", "tiny-v4-fp8", "tiny-v41",
                                                              "tiny-v41-fp8"),
                                            ::testing::Values(1, 2, 4)),
                         [](const ::testing::TestParamInfo<std::tuple<std::string, int>>& param_info) {
                             std::string name = std::get<0>(param_info.param) + "_tp" +
                                                std::to_string(std::get<1>(param_info.param));
                             std::replace(name.begin(), name.end(), '-', '_');
                             return name;
                         });

} // namespace
} // namespace deepinfer::model::deepseek_v4
