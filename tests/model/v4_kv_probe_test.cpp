// KV geometry arithmetic for the tiny config, and the probe dump (what `generate --dump-probes` writes)
// read back as safetensors with the goldens' key names.

#include <cstdio>
#include <unistd.h>

#include "golden_util.h"
#include "model/sequence_runner.h"

namespace deepinfer::testing {
namespace {

using model::deepseek_v4::DeepseekV4Model;

// tiny-v4: d = d_I = 32, layers [sliding, CSA m=4, HCA m=8, CSA m=4]. Per block of 16 (floats):
// raw 4 x 16 x 32; CSA: entries 4 x 32 + snapshot 2 x 4 x 32, same for the indexer (x2 layers);
// HCA: entries 2 x 32. Per slot: CSA buffers 2 x 4 x 64 + overlap 2 x 4 x 32, same for the indexer
// (x2 layers); HCA buffers 2 x 8 x 32.
TEST(V4KvCache, GeometryMatchesHandCount) {
    auto m = DeepseekV4Model::load(source_path("models/tiny-v4"));
    ASSERT_TRUE(m.ok()) << m.status().to_string();
    auto g = (*m)->kv_geometry(16);
    ASSERT_TRUE(g.ok());
    const int64_t block = 4 * 16 * 32 + 2 * 2 * (4 * 32 + 2 * 4 * 32) + 2 * 32;
    const int64_t slot = 2 * 2 * (2 * 4 * 64 + 2 * 4 * 32) + 2 * 8 * 32;
    EXPECT_EQ(g->bytes_per_block, block * 4);
    EXPECT_EQ(g->bytes_per_slot, slot * 4);
    EXPECT_EQ(g->block_size, 16);
    EXPECT_FALSE((*m)->kv_geometry(12).ok()); // not a multiple of 8
}

TEST(V4Probes, DumpRoundTripsWithGoldenNames) {
    Goldens g("tiny-v4");
    auto m = load_model("tiny-v4", 16, 4, 1);
    ASSERT_TRUE(m);
    const auto ids = g.ids("prompt.5.ids"); // 9 tokens
    model::deepseek_v4::ForwardProbes probes;
    model::deepseek_v4::ProbeLog log;
    m->set_probes(&probes);
    model::SequenceRunner run(m.get(), 0, iota_blocks(0, 4));
    std::vector<float> logits;
    for (size_t s = 0; s < ids.size(); s += 4) { // chunks of 4, 4, 1
        std::vector<int32_t> part(ids.begin() + s, ids.begin() + std::min(ids.size(), s + 4));
        ASSERT_TRUE(run.feed(part, 0, false, &logits).ok());
        log.append(probes, part);
    }
    const auto& c = m->config();
    const std::string path = ::testing::TempDir() + "probes_" + std::to_string(::getpid()) + ".safetensors";
    ASSERT_TRUE(
        log.write_safetensors(path, c.hc_mult, c.hidden_size, c.num_experts_per_tok, c.index_topk).ok());
    auto f = weights::SafetensorsFile::open(path, "probes");
    ASSERT_TRUE(f.ok()) << f.status().to_string();
    std::map<std::string, const weights::HeaderEntry*> idx;
    for (const auto& e : (*f)->header().tensors) idx[e.name] = &e;
    ASSERT_TRUE(idx.count("hidden.3") && idx.count("indexer_topk.1") && idx.count("router_weights.0"));
    EXPECT_FALSE(idx.count("indexer_topk.0")) << "sliding layers have no indexer";
    EXPECT_EQ(idx["hidden.3"]->shape, (core::Shape{9, 4, 64}));
    EXPECT_EQ(idx["indexer_topk.1"]->shape, (core::Shape{9, 3}));
    // Chunked probes equal the golden one-shot ones.
    const float* h = static_cast<const float*>((*f)->data(*idx["hidden.3"]));
    const auto ref = g.f32("prompt.5.hidden.3");
    EXPECT_LE(max_rel_error(h, ref.data(), ref.size()), kHiddenTol);
    const int64_t* r = static_cast<const int64_t*>((*f)->data(*idx["router.2"]));
    const auto rref = g.ids("prompt.5.router.2");
    for (int t = 0; t < 9; ++t)
        EXPECT_EQ((std::set<int64_t>{r[2 * t], r[2 * t + 1]}),
                  (std::set<int64_t>{rref[2 * t], rref[2 * t + 1]}));
    f->reset();
    std::remove(path.c_str());
}

} // namespace
} // namespace deepinfer::testing
