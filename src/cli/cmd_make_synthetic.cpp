// `deepinfer make-synthetic`: a random DeepSeek V4 checkpoint in the release format (official names,
// BF16 or FP8 + FP4 experts), from a preset or a config.json, deterministic from --seed.

#include <cstdio>
#include <string>
#include <vector>

#include "cli/args.h"
#include "cli/command.h"
#include "core/thread_pool.h"
#include "model/deepseek_v4/synthetic.h"

namespace deepinfer::cli {
namespace {

constexpr const char* kUsage =
    "usage: deepinfer make-synthetic --out DIR [--preset NAME | --config FILE] [--quant none|fp8]\n"
    "                                [--seed S] [--shard-mb N] [--threads T]\n"
    "Writes DIR/config.json (DeepSeek's official field names) and random weights under the official tensor\n"
    "names: BF16 (--quant none), or FP8 e4m3 linear weights with e8m0 block scales and FP4 routed experts\n"
    "(--quant fp8; block from the config's quantization_config, default 128x128). Shards of at most N MB\n"
    "(default 4096) with model.safetensors.index.json when larger. The same seed gives identical files.\n"
    "presets: tiny-text (tiny-v4 with the 129280-token V4 vocabulary), flash-mini (V4-Flash shapes, 4\n"
    "layers, 256 experts), flash-small (the same with 64 experts: < 8 GB in fp8), pro-mini (V4-Pro shapes,\n"
    "2 layers, 16 experts), bench-small (hidden 1024, 8 layers, 64 experts; loads in transformers).\n"
    "--quant defaults to the config's own (presets: none).\n";

int fail(const core::Status& s) {
    std::fprintf(stderr, "deepinfer make-synthetic: %s\n", s.to_string().c_str());
    return 1;
}

int usage_error(const std::string& msg) {
    std::fprintf(stderr, "deepinfer make-synthetic: %s\n%s", msg.c_str(), kUsage);
    return 2;
}

int run_make_synthetic(const std::vector<std::string>& argv) {
    using namespace model::deepseek_v4;
    auto args =
        Args::parse(argv, {"out", "preset", "config", "quant", "seed", "shard-mb", "threads"}, {"help"});
    if (!args.ok()) return usage_error(args.status().message());
    if (args->has("help")) {
        std::printf("%s", kUsage);
        return 0;
    }
    if (!args->get("out")) return usage_error("--out is required");
    if (args->has("preset") == args->has("config"))
        return usage_error("give exactly one of --preset and --config");
    auto seed = args->get_int("seed", 0);
    auto shard_mb = args->get_int("shard-mb", 4096);
    auto threads = args->get_int("threads", 0);
    if (!seed.ok()) return fail(seed.status());
    if (!shard_mb.ok()) return fail(shard_mb.status());
    if (!threads.ok()) return fail(threads.status());
    if (*seed < 0) return usage_error("--seed must be >= 0");
    if (*shard_mb <= 0) return usage_error("--shard-mb must be positive");
    if (*threads > 0) core::ThreadPool::set_default_threads(static_cast<int>(*threads));

    core::Result<ModelConfig> config = args->has("preset")
                                           ? synthetic_preset(*args->get("preset"))
                                           : ModelConfig::from_json_file(*args->get("config"));
    if (!config.ok()) return fail(config.status());
    if (auto q = args->get("quant")) {
        if (*q == "fp8")
            config->quant.fp8 = true;
        else if (*q == "none")
            config->quant.fp8 = false;
        else
            return usage_error("--quant must be none or fp8, got '" + *q + "'");
    }
    SyntheticOptions o;
    o.seed = static_cast<uint64_t>(*seed);
    o.shard_bytes = *shard_mb * 1000 * 1000;
    const std::string out = *args->get("out");
    if (core::Status s = write_synthetic_checkpoint(*config, o, out); !s.ok()) return fail(s);
    std::printf("wrote %s (%s, seed %lld)\n", out.c_str(), config->quant.fp8 ? "fp8 + fp4 experts" : "bf16",
                static_cast<long long>(*seed));
    return 0;
}

} // namespace

DI_REGISTER_COMMAND("make-synthetic", "write a random DeepSeek V4 checkpoint in the release format",
                    run_make_synthetic);

} // namespace deepinfer::cli
