#pragma once
// Offline batch generation: JSONL in, JSONL out (`deepinfer generate --input-jsonl`). cmd_generate calls
// run_offline_jsonl; text prompts go through the tokenizer hooks once one exists.
//
// Input line:  {"prompt_ids": [1, 2, 3], "max_tokens": 16, "temperature": 0.7, "top_p": 0.9, "seed": 1, ...}
//              or {"prompt": "text"} when OfflineOptions::tokenize is set.
// Output line: {"index": 0, "prompt_ids": [...], "output_ids": [...], "finish_reason": "stop"}
//              plus "text" when detokenize is set, "outputs" (one entry per completion) when n > 1,
//              "logprobs" when requested, and "error" for a rejected line.

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <string>
#include <vector>

#include "core/status.h"
#include "engine/engine.h"

namespace deepinfer::engine {

struct OfflineOptions {
    bool progress = true;    // progress bar on stderr
    SamplingParams defaults; // fields a line does not set
    std::function<core::Result<std::vector<int32_t>>(const std::string&)> tokenize; // for "prompt"
    std::function<std::string(const std::vector<int32_t>&)> detokenize;             // adds "text"
};

struct OfflineSummary {
    int64_t num_requests = 0;
    int64_t num_errors = 0;
    int64_t prompt_tokens = 0;
    int64_t output_tokens = 0;
    double seconds = 0.0;
};

// Parses one line into a request (exposed for tests). Unknown fields are errors naming the field.
core::Result<Request> parse_offline_line(const std::string& line, const OfflineOptions& options);

// Reads every line of `in`, generates, writes one output line per input line in input order.
core::Result<OfflineSummary> run_offline_jsonl(LLMEngine& engine, std::istream& in, std::ostream& out,
                                               const OfflineOptions& options);

} // namespace deepinfer::engine
