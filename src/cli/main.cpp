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
    std::printf("\n`deepinfer <command> --help` describes a command's options.\n");
}
} // namespace

int main(int argc, char** argv) {
    if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h") {
        print_usage();
        return argc < 2 ? 2 : 0;
    }
    // Matmul numerics for every command, read once here (the --numerics flag will set the same).
    if (const char* env = std::getenv("DEEPINFER_NUMERICS"); env != nullptr && *env != '\0') {
        deepinfer::kernels::Numerics num;
        if (!deepinfer::kernels::cpu::parse_numerics(env, &num)) {
            std::fprintf(stderr, "deepinfer: DEEPINFER_NUMERICS=%s: expected exact or fast\n", env);
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
        if (c.name == name) return c.run(std::vector<std::string>(argv + 2, argv + argc));
    }
    std::fprintf(stderr, "deepinfer: unknown command '%s'\n\n", name.c_str());
    print_usage();
    return 2;
}
