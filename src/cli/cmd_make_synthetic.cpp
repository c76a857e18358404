// `deepinfer make-synthetic`: a random DeepSeek V4 or V4.1 checkpoint in the release format (official
// names, BF16 or FP8 + FP4 experts), from a preset or a config.json, deterministic from --seed.

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "cli/args.h"
#include "cli/command.h"
#include "core/thread_pool.h"
#include "model/deepseek_v4/synthetic.h"
#include "model/deepseek_v41/synthetic.h"

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
    "--quant defaults to the config's own (presets: none).\n"
    "V4.1 (DeepSeek V4.1 config.json, or a V4.1 preset): the released composite config and layout (fp8: "
    "32x32\n"
    "blocks, FP4 experts, Engram tables F8_E4M3 [rows, 256] + F8_E8M0 scales), engram_hash.safetensors (the\n"
    "preset's, or --engram-hash FILE) and tokenizer.json (--tokenizer FILE, default the shipped V4 one) "
    "beside\n"
    "it. Tables of more than --engram-dense-rows rows (default 1048576) are written sparse: a shard each,\n"
    "ftruncate'd, only the first --engram-seeded-rows (default 4096) rows written; the rest read as zeros,\n"
    "except the rows of --engram-fill-prompts FILE (one prompt of token ids per line), written so that a\n"
    "benchmark of those prompts reads real rows from disk.\n"
    "V4.1 presets: tiny-text-v41 (tiny-v41 dims, every V4.1 feature, the V4 vocabulary; bf16),\n"
    "flash-v41-engram (V4.1-Flash layer dims, 4 layers, 8 experts, Flash's two ~98 GB Engram tables, "
    "sparse;\n"
    "fp8, ~4 GB of dense weights).\n";

int fail(const core::Status& s) {
    std::fprintf(stderr, "deepinfer make-synthetic: %s\n", s.to_string().c_str());
    return 1;
}

int usage_error(const std::string& msg) {
    std::fprintf(stderr, "deepinfer make-synthetic: %s\n%s", msg.c_str(), kUsage);
    return 2;
}

// The shipped data file `rel` (under data/): PREFIX/share/deepinfer/REL next to an installed binary, else
// the source tree's data/REL.
std::string data_file(const std::string& rel) {
    std::error_code ec;
    const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
    if (!ec && !exe.empty()) {
        const auto p = exe.parent_path().parent_path() / "share/deepinfer" / rel;
        if (std::filesystem::exists(p, ec)) return p.string();
    }
    return std::string(DEEPINFER_SOURCE_DIR) + "/data/" + rel;
}

bool is_v41_config_file(const std::string& path) {
    std::ifstream f(path);
    std::stringstream ss;
    ss << f.rdbuf();
    return f && model::deepseek_v41::is_deepseek_v41_config(ss.str());
}

int make_v41(const Args& args, uint64_t seed) {
    namespace v41 = model::deepseek_v41;
    std::string config_json, hash_data;
    if (auto preset = args.get("preset")) {
        bool fp8 = *preset == "flash-v41-engram";
        if (auto q = args.get("quant")) {
            if (*q != "fp8" && *q != "none")
                return usage_error("--quant must be none or fp8, got '" + *q + "'");
            fp8 = *q == "fp8";
        }
        auto j = v41::synthetic_preset_json(*preset, fp8);
        if (!j.ok()) return fail(j.status());
        config_json = *j;
        hash_data = data_file(v41::synthetic_preset_hash_data(*preset));
    } else {
        if (args.get("quant"))
            return usage_error("--quant applies to presets; a V4.1 config.json says it itself");
        std::ifstream f(*args.get("config"));
        std::stringstream ss;
        ss << f.rdbuf();
        config_json = ss.str();
    }
    if (auto h = args.get("engram-hash")) hash_data = *h;
    if (hash_data.empty())
        return usage_error("a V4.1 config.json needs --engram-hash FILE (its Engram hash data, "
                           "tools/oracle/make_engram_hash.py)");
    const std::string tokenizer =
        args.get("tokenizer") ? *args.get("tokenizer") : data_file("tokenizer/deepseek-v4/tokenizer.json");
    v41::SyntheticOptions o;
    o.seed = seed;
    auto dense = args.get_int("engram-dense-rows", o.engram_dense_rows);
    auto seeded = args.get_int("engram-seeded-rows", o.engram_seeded_rows);
    if (!dense.ok()) return fail(dense.status());
    if (!seeded.ok()) return fail(seeded.status());
    if (*dense < 0 || *seeded < 0)
        return usage_error("--engram-dense-rows and --engram-seeded-rows must be >= 0");
    o.engram_dense_rows = *dense;
    o.engram_seeded_rows = *seeded;
    if (auto fill = args.get("engram-fill-prompts")) {
        std::ifstream f(*fill);
        if (!f) return fail(core::not_found(*fill + ": cannot open --engram-fill-prompts"));
        std::string line;
        while (std::getline(f, line)) {
            for (char& ch : line)
                if (ch == ',') ch = ' ';
            std::istringstream ls(line);
            std::vector<int64_t> ids;
            for (long long id; ls >> id;) ids.push_back(id);
            if (!ls.eof()) return fail(core::invalid_argument(*fill + ": a line is not token ids: " + line));
            if (!ids.empty()) o.engram_fill_prompts.push_back(std::move(ids));
        }
    }
    const std::string out = *args.get("out");
    if (core::Status s = v41::write_synthetic_checkpoint(config_json, o, hash_data, tokenizer, out); !s.ok())
        return fail(s);
    std::printf("wrote %s (DeepSeek V4.1, seed %llu)\n", out.c_str(), static_cast<unsigned long long>(seed));
    return 0;
}

int run_make_synthetic(const std::vector<std::string>& argv) {
    using namespace model::deepseek_v4;
    auto args = Args::parse(argv,
                            {"out", "preset", "config", "quant", "seed", "shard-mb", "threads", "engram-hash",
                             "tokenizer", "engram-dense-rows", "engram-seeded-rows", "engram-fill-prompts"},
                            {"help"});
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
    const auto v41_presets = model::deepseek_v41::synthetic_preset_names();
    if (args->has("preset") ? std::count(v41_presets.begin(), v41_presets.end(), *args->get("preset")) > 0
                            : is_v41_config_file(*args->get("config")))
        return make_v41(*args, static_cast<uint64_t>(*seed));

    core::Result<ModelConfig> config = args->has("preset")
                                           ? synthetic_preset(*args->get("preset"))
                                           : ModelConfig::from_json_file(*args->get("config"));
    if (!config.ok()) {
        if (!args->has("preset")) return fail(config.status());
        std::string v41_names;
        for (const std::string& n : v41_presets) v41_names += (v41_names.empty() ? "" : ", ") + n;
        std::fprintf(stderr, "deepinfer make-synthetic: %s; DeepSeek V4.1 presets: %s\n",
                     config.status().to_string().c_str(), v41_names.c_str());
        return 1;
    }
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
