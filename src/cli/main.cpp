// The `deepinfer` binary: dispatches to the registered subcommands (cmd_*.cpp).

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "cli/command.h"
#include "kernels/cpu/linear.h"
#include "model/lm_head.h"
#include "weights/placement.h"

namespace deepinfer::cli {
std::vector<Command>& command_registry() {
    static std::vector<Command> registry;
    return registry;
}
} // namespace deepinfer::cli

namespace {
void print_usage() {
    auto cmds = deepinfer::cli::command_registry();
    std::sort(cmds.begin(), cmds.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
    std::printf("usage: deepinfer <command> [options]\n\ncommands:\n");
    for (const auto& c : cmds) std::printf("  %-14s %s\n", c.name.c_str(), c.summary.c_str());
    std::printf(
        "\n`deepinfer <command> --help` describes a command's options. Every command also takes\n"
        "--numerics exact|fast (matmul numerics; default exact, or DEEPINFER_NUMERICS) and\n"
        "--weights-placement mmap|hugepages|auto (where linear weights live: the file maps, or copied at\n"
        "load into 2 MiB pages; default auto = hugepages where the kernel offers transparent huge pages, or\n"
        "DEEPINFER_WEIGHTS_PLACEMENT) and --head-fp8 auto|off|on (an LM head stored BF16 / F16 / F32 held "
        "as\n"
        "FP8 128x128 blocks, quantized at load: auto = under --numerics fast; default auto, or\n"
        "DEEPINFER_HEAD_FP8); docs/kernels.md.\n");
}

// Takes `--name VALUE` or `--name=VALUE` out of args into *value (*from: the flag's name). False (after a
// message) when the value is missing.
bool take_flag(std::vector<std::string>* args, const char* name, const char* expected, std::string* value,
               const char** from) {
    const std::string flag = name, joined_prefix = flag + "=";
    for (size_t i = 0; i < args->size(); ++i) {
        const std::string& a = (*args)[i];
        if (a != flag && a.rfind(joined_prefix, 0) != 0) continue;
        const bool joined = a != flag;
        if (!joined && i + 1 >= args->size()) {
            std::fprintf(stderr, "deepinfer: %s needs a value: %s\n", name, expected);
            return false;
        }
        *value = joined ? a.substr(joined_prefix.size()) : (*args)[i + 1];
        *from = name;
        args->erase(args->begin() + static_cast<std::ptrdiff_t>(i),
                    args->begin() + static_cast<std::ptrdiff_t>(i + (joined ? 1 : 2)));
        return true;
    }
    return true;
}
} // namespace

int main(int argc, char** argv) {
    if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h") {
        print_usage();
        return argc < 2 ? 2 : 0;
    }
    // Options every command takes, read once here and taken out before the command parses its own flags:
    // matmul numerics (docs/kernels.md): `--numerics exact|fast`, else DEEPINFER_NUMERICS, else exact;
    // weight placement (docs/kernels.md, "Weight placement"): `--weights-placement mmap|hugepages|auto`,
    // else DEEPINFER_WEIGHTS_PLACEMENT, else auto; the LM head's format (docs/kernels.md, "fast: the LM head
    // as FP8 blocks"): `--head-fp8 auto|off|on`, else DEEPINFER_HEAD_FP8, else auto.
    std::vector<std::string> rest(argv + 2, argv + argc);
    std::string numerics, placement, head_fp8;
    const char* numerics_from = "DEEPINFER_NUMERICS";
    const char* placement_from = "DEEPINFER_WEIGHTS_PLACEMENT";
    const char* head_fp8_from = "DEEPINFER_HEAD_FP8";
    if (const char* env = std::getenv("DEEPINFER_NUMERICS"); env != nullptr) numerics = env;
    if (const char* env = std::getenv("DEEPINFER_WEIGHTS_PLACEMENT"); env != nullptr) placement = env;
    if (const char* env = std::getenv("DEEPINFER_HEAD_FP8"); env != nullptr) head_fp8 = env;
    if (!take_flag(&rest, "--numerics", "exact or fast", &numerics, &numerics_from)) return 2;
    if (!take_flag(&rest, "--weights-placement", "mmap, hugepages or auto", &placement, &placement_from))
        return 2;
    if (!take_flag(&rest, "--head-fp8", "auto, off or on", &head_fp8, &head_fp8_from)) return 2;
    if (!numerics.empty()) {
        deepinfer::kernels::Numerics num;
        if (!deepinfer::kernels::cpu::parse_numerics(numerics, &num)) {
            std::fprintf(stderr, "deepinfer: %s %s: expected exact or fast\n", numerics_from,
                         numerics.c_str());
            return 2;
        }
        deepinfer::kernels::cpu::set_default_numerics(num);
    }
    if (!placement.empty()) {
        deepinfer::weights::Placement p;
        if (!deepinfer::weights::parse_placement(placement, &p)) {
            std::fprintf(stderr, "deepinfer: %s %s: expected mmap, hugepages or auto\n", placement_from,
                         placement.c_str());
            return 2;
        }
        deepinfer::weights::set_default_placement(p);
    }
    if (!head_fp8.empty()) {
        deepinfer::model::HeadFp8 mode;
        if (!deepinfer::model::parse_head_fp8(head_fp8, &mode)) {
            std::fprintf(stderr, "deepinfer: %s %s: expected auto, off or on\n", head_fp8_from,
                         head_fp8.c_str());
            return 2;
        }
        deepinfer::model::set_head_fp8(mode);
    }
    std::string name = argv[1];
    if (name == "--version") {
        std::printf("deepinfer 0.1.0\n");
        return 0;
    }
    for (const auto& c : deepinfer::cli::command_registry()) {
        if (c.name == name) return c.run(rest);
    }
    std::fprintf(stderr, "deepinfer: unknown command '%s'\n\n", name.c_str());
    print_usage();
    return 2;
}
