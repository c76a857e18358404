// `deepinfer generate`: greedy decoding of one prompt given as token ids, straight on the model (a trivial
// block table and one slot), printing the generated ids. --dump-probes writes every layer's hidden
// streams, router choices and indexer top-k for the whole run, to find the first stage that diverges.

#include <cstdio>
#include <string>
#include <vector>

#include "cli/args.h"
#include "cli/command.h"
#include "model/deepseek_v4/model.h"
#include "model/sequence_runner.h"

namespace deepinfer::cli {
namespace {

constexpr const char* kUsage =
    "usage: deepinfer generate --model DIR --prompt-ids 1,2,3 --max-tokens N [--chunk-size C]\n"
    "                          [--block-size B] [--dump-probes FILE.safetensors]\n"
    "Greedy decoding; prints the generated token ids, comma-separated, on one line.\n";

core::Result<std::vector<int32_t>> parse_ids(const std::string& s) {
    std::vector<int32_t> ids;
    size_t i = 0;
    while (i <= s.size()) {
        const size_t j = s.find(',', i);
        const std::string tok = s.substr(i, j == std::string::npos ? std::string::npos : j - i);
        if (tok.empty() || tok.find_first_not_of("0123456789") != std::string::npos || tok.size() > 9)
            return core::invalid_argument("--prompt-ids: '" + tok +
                                          "' is not a token id (expected e.g. 1,2,3)");
        ids.push_back(std::stoi(tok));
        if (j == std::string::npos) break;
        i = j + 1;
    }
    return ids;
}

int fail(const core::Status& s) {
    std::fprintf(stderr, "deepinfer generate: %s\n", s.to_string().c_str());
    return 1;
}

int run_generate(const std::vector<std::string>& argv) {
    using model::deepseek_v4::DeepseekV4Model;
    auto args = Args::parse(
        argv, {"model", "prompt-ids", "max-tokens", "chunk-size", "block-size", "dump-probes"}, {"help"});
    if (!args.ok()) {
        std::fprintf(stderr, "deepinfer generate: %s\n%s", args.status().message().c_str(), kUsage);
        return 2;
    }
    if (args->has("help")) {
        std::printf("%s", kUsage);
        return 0;
    }
    if (!args->get("model") || !args->get("prompt-ids")) {
        std::fprintf(stderr, "deepinfer generate: --model and --prompt-ids are required\n%s", kUsage);
        return 2;
    }
    auto ids = parse_ids(*args->get("prompt-ids"));
    if (!ids.ok()) return fail(ids.status());
    auto max_tokens = args->get_int("max-tokens", 16);
    auto chunk = args->get_int("chunk-size", 0);
    auto block_size = args->get_int("block-size", 256);
    if (!max_tokens.ok()) return fail(max_tokens.status());
    if (!chunk.ok()) return fail(chunk.status());
    if (!block_size.ok()) return fail(block_size.status());
    if (*max_tokens < 0) return fail(core::invalid_argument("--max-tokens must be >= 0"));

    auto lm = DeepseekV4Model::load(*args->get("model"));
    if (!lm.ok()) return fail(lm.status());
    DeepseekV4Model& m = **lm;
    for (int32_t id : *ids)
        if (id >= m.vocab_size())
            return fail(core::invalid_argument("--prompt-ids: token id " + std::to_string(id) +
                                               " is outside the vocabulary of " +
                                               std::to_string(m.vocab_size())));
    const int64_t total = static_cast<int64_t>(ids->size()) + *max_tokens;
    model::KvCacheSpec spec;
    spec.block_size = *block_size;
    spec.num_blocks = (total + spec.block_size - 1) / spec.block_size;
    spec.num_slots = 1;
    if (core::Status s = m.init_kv_cache(spec); !s.ok()) return fail(s);
    std::vector<int32_t> blocks;
    for (int32_t b = 0; b < spec.num_blocks; ++b) blocks.push_back(b);

    model::deepseek_v4::ForwardProbes probes;
    model::deepseek_v4::ProbeLog log;
    const auto dump = args->get("dump-probes");
    if (dump) m.set_probes(&probes);
    model::SequenceRunner runner(&m, 0, blocks);
    std::vector<float> logits;
    // Prefill chunk by chunk so every chunk's probes are logged.
    const int64_t c = *chunk > 0 ? *chunk : std::max<int64_t>(1, static_cast<int64_t>(ids->size()));
    for (size_t s = 0; s < ids->size(); s += c) {
        std::vector<int32_t> part(ids->begin() + s, ids->begin() + std::min(ids->size(), s + c));
        if (core::Status st = runner.feed(part, 0, false, &logits); !st.ok()) return fail(st);
        if (dump) log.append(probes, part);
    }
    std::vector<int32_t> out;
    for (int64_t i = 0; i < *max_tokens; ++i) {
        const int32_t next = model::argmax(logits.data(), m.vocab_size());
        out.push_back(next);
        if (i + 1 == *max_tokens) break;
        if (core::Status st = runner.feed({next}, 0, false, &logits); !st.ok()) return fail(st);
        if (dump) log.append(probes, {next});
    }
    for (size_t i = 0; i < out.size(); ++i) std::printf("%s%d", i ? "," : "", out[i]);
    std::printf("\n");
    if (dump) {
        const auto& cfg = m.config();
        if (core::Status s = log.write_safetensors(*dump, cfg.hc_mult, cfg.hidden_size,
                                                   cfg.num_experts_per_tok, cfg.index_topk);
            !s.ok())
            return fail(s);
    }
    return 0;
}

} // namespace

DI_REGISTER_COMMAND("generate", "greedy generation from token ids on the CPU model (debugging, probes)",
                    run_generate);

} // namespace deepinfer::cli
