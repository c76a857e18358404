#pragma once
// The engine's flags, shared by the subcommands that run an LLMEngine (generate over JSONL, serve).
// Header-only so commands can include it without touching the CLI's CMake:
//
//   auto args = Args::parse(argv, merged(kMyValueFlags, engine_value_flags()), merged(kMyBools,
//                           engine_bool_flags()));
//   DI_ASSIGN_OR_RETURN(engine::EngineConfig config, engine_config_from_args(*args));

#include <cctype>
#include <set>
#include <string>

#include "cli/args.h"
#include "engine/engine_config.h"

namespace deepinfer::cli {

inline std::set<std::string> engine_value_flags() {
    return {"block-size",   "num-kv-blocks", "kv-cache-memory",
            "max-num-seqs", "max-model-len", "max-num-batched-tokens",
            "seed",         "threads"};
}
inline std::set<std::string> engine_bool_flags() {
    return {"no-prefix-caching"};
}

inline const char* engine_flags_help() {
    return "  --kv-cache-memory SIZE       KV pool budget, e.g. 8GiB, 512MiB or bytes\n"
           "  --num-kv-blocks N            KV pool size in blocks (instead of --kv-cache-memory)\n"
           "  --block-size N               positions per KV block (default 256)\n"
           "  --max-num-seqs N             running sequences (default 64)\n"
           "  --max-num-batched-tokens N   tokens per step (default 2048)\n"
           "  --max-model-len N            longest prompt + output (default: the model's)\n"
           "  --no-prefix-caching          disable prefix caching\n"
           "  --seed N                     seed of requests that give none\n"
           "  --threads N                  the engine's compute threads (default: the hardware's)\n";
}

// "8GiB", "512MiB", "1.5G", "1000000" -> bytes.
inline core::Result<long long> parse_byte_size(const std::string& flag, const std::string& text) {
    size_t i = 0;
    while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) ++i;
    std::string num = text.substr(0, i), unit = text.substr(i);
    double scale = 1;
    if (unit == "" || unit == "B")
        scale = 1;
    else if (unit == "K" || unit == "KB" || unit == "KiB")
        scale = 1024.0;
    else if (unit == "M" || unit == "MB" || unit == "MiB")
        scale = 1024.0 * 1024;
    else if (unit == "G" || unit == "GB" || unit == "GiB")
        scale = 1024.0 * 1024 * 1024;
    else if (unit == "T" || unit == "TB" || unit == "TiB")
        scale = 1024.0 * 1024 * 1024 * 1024;
    else
        return core::invalid_argument("flag --" + flag + ": unknown size unit '" + unit + "' in '" + text +
                                      "'");
    char* end = nullptr;
    double v = std::strtod(num.c_str(), &end);
    if (num.empty() || *end != '\0' || v <= 0)
        return core::invalid_argument("flag --" + flag + ": '" + text + "' is not a positive size");
    return static_cast<long long>(v * scale);
}

inline core::Result<engine::EngineConfig> engine_config_from_args(const Args& args) {
    engine::EngineConfig c;
    DI_ASSIGN_OR_RETURN(long long block_size, args.get_int("block-size", c.block_size));
    DI_ASSIGN_OR_RETURN(long long blocks, args.get_int("num-kv-blocks", 0));
    DI_ASSIGN_OR_RETURN(long long seqs, args.get_int("max-num-seqs", c.max_num_seqs));
    DI_ASSIGN_OR_RETURN(long long tokens, args.get_int("max-num-batched-tokens", c.max_num_batched_tokens));
    DI_ASSIGN_OR_RETURN(long long max_len, args.get_int("max-model-len", 0));
    DI_ASSIGN_OR_RETURN(long long seed, args.get_int("seed", static_cast<long long>(c.default_seed)));
    DI_ASSIGN_OR_RETURN(long long threads, args.get_int("threads", 0));
    if (threads < 0 || threads > 1024) return core::invalid_argument("flag --threads must be 0..1024");
    c.num_threads = static_cast<int32_t>(threads);
    if (auto mem = args.get("kv-cache-memory")) {
        DI_ASSIGN_OR_RETURN(c.kv_cache_memory_bytes, parse_byte_size("kv-cache-memory", *mem));
    }
    for (auto [name, v] : {std::pair<const char*, long long>{"block-size", block_size},
                           {"max-num-seqs", seqs},
                           {"max-num-batched-tokens", tokens}})
        if (v <= 0 || v > (1 << 30))
            return core::invalid_argument(std::string("flag --") + name + " must be positive");
    if (blocks < 0 || max_len < 0)
        return core::invalid_argument("flag --num-kv-blocks / --max-model-len is negative");
    c.block_size = static_cast<int32_t>(block_size);
    c.num_kv_blocks = blocks;
    c.max_num_seqs = static_cast<int32_t>(seqs);
    c.max_num_batched_tokens = static_cast<int32_t>(tokens);
    c.max_model_len = max_len;
    c.default_seed = static_cast<uint64_t>(seed);
    c.enable_prefix_caching = !args.has("no-prefix-caching");
    return c;
}

} // namespace deepinfer::cli
