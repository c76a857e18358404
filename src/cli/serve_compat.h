#pragma once
// vLLM / SGLang launch compatibility for `deepinfer serve`: their common flags are translated into
// deepinfer's before parsing, so a typical command line works unchanged (`vllm serve MODEL
// --tensor-parallel-size 1 --max-model-len 65536 --reasoning-parser deepseek_v4 ...` -> `deepinfer serve
// MODEL ...`):
//   - same meaning, other name: --model-path -> --model, --context-length -> --max-model-len,
//     --no-enable-prefix-caching -> --no-prefix-caching, a positional MODEL -> --model MODEL;
//   - no-ops where deepinfer has the feature built in (each logged): --reasoning-parser / --tool-call-parser
//     deepseek_v4, --tokenizer-mode deepseek_v4, --enable-auto-tool-choice, --trust-remote-code, ...;
//   - validated against what this build runs: --tensor-parallel-size / --tp / -tp 1 (one process),
//     --gpu-memory-utilization / --mem-fraction-static (no GPU backend: the KV pool is sized by
//     --kv-cache-memory / --num-kv-blocks);
//   - refused with the reason and what to use instead (--swap-space, --cpu-offload-gb, --kv-cache-dtype fp8,
//     --chat-template, ...).

#include <set>
#include <string>
#include <vector>

#include "core/status.h"

namespace deepinfer::cli {

struct ServeCompat {
    std::vector<std::string> argv;  // deepinfer's flags only
    std::vector<std::string> notes; // one line per flag accepted as a no-op or mapped (for the log)
};

// `native_flags`: deepinfer's own flags; a compat flag of the same name is left to them (so once `serve`
// registers --tp / --tensor-parallel-size itself for multi-process runs, parallel/parallel_layout.h, these
// rules step aside).
core::Result<ServeCompat> translate_serve_compat_flags(const std::vector<std::string>& argv,
                                                       const std::set<std::string>& native_flags);

// The compat flags' names (so that an unknown flag can be matched against them too).
std::set<std::string> serve_compat_flag_names();

} // namespace deepinfer::cli
