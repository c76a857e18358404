// The `deepinfer` binary: dispatches to the registered subcommands (cmd_*.cpp).

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "cli/command.h"
#include "kernels/cpu/linear.h"

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
        "--numerics exact|fast (matmul numerics; default exact, or DEEPINFER_NUMERICS; docs/kernels.md).\n");
}
} // namespace

int main(int argc, char** argv) {
    if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h") {
        print_usage();
        return argc < 2 ? 2 : 0;
    }
    // Matmul numerics for every command (docs/kernels.md): `--numerics exact|fast` anywhere after the
    // command, else DEEPINFER_NUMERICS, else exact. Read once here; the flag is taken out before the
    // command parses its own flags.
    std::vector<std::string> rest(argv + 2, argv + argc);
    std::string numerics;
    const char* numerics_from = "DEEPINFER_NUMERICS";
    if (const char* env = std::getenv("DEEPINFER_NUMERICS"); env != nullptr) numerics = env;
    for (size_t i = 0; i < rest.size(); ++i) {
        if (rest[i] == "--numerics" || rest[i].rfind("--numerics=", 0) == 0) {
            const bool joined = rest[i].size() > 10;
            if (!joined && i + 1 >= rest.size()) {
                std::fprintf(stderr, "deepinfer: --numerics needs a value: exact or fast\n");
                return 2;
            }
            numerics = joined ? rest[i].substr(11) : rest[i + 1];
            numerics_from = "--numerics";
            rest.erase(rest.begin() + static_cast<std::ptrdiff_t>(i),
                       rest.begin() + static_cast<std::ptrdiff_t>(i + (joined ? 1 : 2)));
            break;
        }
    }
    if (!numerics.empty()) {
        deepinfer::kernels::Numerics num;
        if (!deepinfer::kernels::cpu::parse_numerics(numerics, &num)) {
            std::fprintf(stderr, "deepinfer: %s %s: expected exact or fast\n", numerics_from,
                         numerics.c_str());
            return 2;
        }
        deepinfer::kernels::cpu::set_default_numerics(num);
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
