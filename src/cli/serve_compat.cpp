#include "cli/serve_compat.h"

#include <cstdlib>
#include <string_view>

namespace deepinfer::cli {
namespace {

enum class Action {
    kAlias,    // same meaning as deepinfer's `target`
    kNoOp,     // built in; a value, when taken, must be one of `accepted`
    kOne,      // a parallel size: only 1 runs in this build
    kFraction, // a GPU memory fraction: validated, then ignored (no GPU backend)
    kRefuse,   // not supported: `detail` says why and what to use instead
};

struct Rule {
    const char* name;
    bool takes_value;
    Action action;
    const char* target;                // kAlias: deepinfer's flag
    std::vector<std::string> accepted; // kNoOp with a value: the values accepted
    const char* detail;                // why (notes and errors)
};

const std::vector<Rule>& rules() {
    static const std::vector<Rule> kRules = {
        {"model-path", true, Action::kAlias, "model", {}, "SGLang's name"},
        {"context-length", true, Action::kAlias, "max-model-len", {}, "SGLang's name"},
        {"no-enable-prefix-caching", false, Action::kAlias, "no-prefix-caching", {}, "vLLM's name"},
        {"disable-radix-cache", false, Action::kAlias, "no-prefix-caching", {}, "SGLang's name"},
        {"tensor-parallel-size", true, Action::kOne, "", {}, "tensor parallelism"},
        {"tp", true, Action::kOne, "", {}, "tensor parallelism"},
        {"tp-size", true, Action::kOne, "", {}, "tensor parallelism"},
        {"pipeline-parallel-size", true, Action::kOne, "", {}, "pipeline parallelism"},
        {"pp-size", true, Action::kOne, "", {}, "pipeline parallelism"},
        {"data-parallel-size", true, Action::kOne, "", {}, "data parallelism"},
        {"dp-size", true, Action::kOne, "", {}, "data parallelism"},
        {"gpu-memory-utilization", true, Action::kFraction, "", {}, ""},
        {"mem-fraction-static", true, Action::kFraction, "", {}, ""},
        {"reasoning-parser",
         true,
         Action::kNoOp,
         "",
         {"deepseek_v4", "deepseek-v4"},
         "the DeepSeek V4 reasoning parser is built in"},
        {"tool-call-parser",
         true,
         Action::kNoOp,
         "",
         {"deepseek_v4", "deepseek-v4"},
         "the DeepSeek V4 DSML tool-call parser is built in"},
        {"tokenizer-mode",
         true,
         Action::kNoOp,
         "",
         {"deepseek_v4", "auto"},
         "the DeepSeek V4 encoder is built in"},
        {"dtype", true, Action::kNoOp, "", {"auto"}, "weights run in the checkpoint's own dtypes"},
        {"kv-cache-dtype", true, Action::kNoOp, "", {"auto"}, "the KV cache layout is DeepSeek V4's own"},
        {"enable-auto-tool-choice",
         false,
         Action::kNoOp,
         "",
         {},
         "tool calls are parsed whenever tools are given"},
        {"trust-remote-code", false, Action::kNoOp, "", {}, "no remote code is run: the model is built in"},
        {"enable-prefix-caching", false, Action::kNoOp, "", {}, "prefix caching is on by default"},
        {"enforce-eager", false, Action::kNoOp, "", {}, "this build has no CUDA graphs"},
        {"disable-log-requests", false, Action::kNoOp, "", {}, "requests are not logged"},
        {"enable-log-requests", false, Action::kNoOp, "", {}, "use --log-level debug"},
        {"disable-log-stats", false, Action::kNoOp, "", {}, "statistics are at GET /metrics"},
        {"swap-space",
         true,
         Action::kRefuse,
         "",
         {},
         "not supported: preempted sequences are recomputed, never swapped; drop the flag"},
        {"cpu-offload-gb",
         true,
         Action::kRefuse,
         "",
         {},
         "not supported: the weights are memory-mapped; drop the flag"},
        {"chat-template",
         true,
         Action::kRefuse,
         "",
         {},
         "DeepSeek V4 has no Jinja template; the built-in encoder renders prompts (see render-chat); drop "
         "the "
         "flag"},
        {"speculative-config",
         true,
         Action::kRefuse,
         "",
         {},
         "speculative decoding is not served yet; drop the flag"},
        {"quantization",
         true,
         Action::kRefuse,
         "",
         {},
         "the checkpoint's own quantization is used; drop the flag"},
    };
    return kRules;
}

const Rule* find_rule(std::string_view name) {
    for (const Rule& r : rules())
        if (name == r.name) return &r;
    return nullptr;
}

std::string join(const std::vector<std::string>& v) {
    std::string out;
    for (const auto& s : v) out += (out.empty() ? "" : ", ") + s;
    return out;
}

} // namespace

std::set<std::string> serve_compat_flag_names() {
    std::set<std::string> names;
    for (const Rule& r : rules()) names.insert(r.name);
    return names;
}

core::Result<ServeCompat> translate_serve_compat_flags(const std::vector<std::string>& argv,
                                                       const std::set<std::string>& native_flags) {
    ServeCompat out;
    for (size_t i = 0; i < argv.size(); ++i) {
        std::string arg = argv[i];
        if (arg == "-tp") arg = "--tensor-parallel-size"; // vLLM's short form
        if (arg.rfind("--", 0) != 0 || arg == "--") {
            out.argv.push_back(arg);
            continue;
        }
        std::string name = arg.substr(2), value;
        bool inline_value = false;
        if (auto eq = name.find('='); eq != std::string::npos) {
            value = name.substr(eq + 1);
            name = name.substr(0, eq);
            inline_value = true;
        }
        const Rule* rule = native_flags.count(name) ? nullptr : find_rule(name);
        if (!rule) {
            out.argv.push_back(argv[i]);
            continue;
        }
        const std::string flag = "--" + name;
        if (rule->takes_value && !inline_value) {
            if (i + 1 >= argv.size()) return core::invalid_argument("flag " + flag + " needs a value");
            value = argv[++i];
        } else if (!rule->takes_value && inline_value) {
            return core::invalid_argument("flag " + flag + " takes no value");
        }
        switch (rule->action) {
        case Action::kAlias:
            out.argv.push_back("--" + std::string(rule->target));
            if (rule->takes_value) out.argv.push_back(value);
            out.notes.push_back(flag + ": read as --" + rule->target + " (" + rule->detail + ")");
            break;
        case Action::kNoOp:
            if (rule->takes_value && !rule->accepted.empty()) {
                bool ok = false;
                for (const auto& a : rule->accepted) ok = ok || value == a;
                if (!ok) {
                    return core::invalid_argument(
                        "flag " + flag + " " + value + " is not supported: " + rule->detail +
                        " (accepted: " + join(rule->accepted) + "; or drop the flag)");
                }
            }
            out.notes.push_back(flag + (rule->takes_value ? " " + value : "") + ": no-op, " + rule->detail);
            break;
        case Action::kOne: {
            char* end = nullptr;
            long n = std::strtol(value.c_str(), &end, 10);
            if (value.empty() || *end != '\0' || n < 1)
                return core::invalid_argument("flag " + flag + ": '" + value + "' is not a positive integer");
            if (n != 1) {
                return core::invalid_argument("flag " + flag + " " + value + ": this build serves from one " +
                                              "process without " + rule->detail + "; use --" + name +
                                              " 1 or drop the flag");
            }
            out.notes.push_back(flag + " 1: one process (" + rule->detail + " is not used)");
            break;
        }
        case Action::kFraction: {
            char* end = nullptr;
            double f = std::strtod(value.c_str(), &end);
            if (value.empty() || *end != '\0' || !(f > 0.0 && f <= 1.0))
                return core::invalid_argument("flag " + flag + ": '" + value +
                                              "' must be a fraction in (0, 1]");
            out.notes.push_back(flag + " " + value +
                                ": ignored, this build has no GPU backend; the KV pool is sized by "
                                "--kv-cache-memory SIZE or --num-kv-blocks N");
            break;
        }
        case Action::kRefuse:
            return core::invalid_argument("flag " + flag +
                                          " is not supported by deepinfer serve: " + rule->detail);
        }
    }
    return out;
}

} // namespace deepinfer::cli
