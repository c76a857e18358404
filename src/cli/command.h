#pragma once
// Subcommands of the `deepinfer` binary register themselves here; main.cpp dispatches on argv[1].
// cli/ is the only place that parses flags and environment into config structs.

#include <functional>
#include <string>
#include <vector>

namespace deepinfer::cli {

struct Command {
    std::string name;
    std::string summary; // one line for `deepinfer --help`
    // args excludes the program name and the subcommand; returns the process exit code.
    std::function<int(const std::vector<std::string>& args)> run;
};

std::vector<Command>& command_registry();

struct CommandRegistrar {
    explicit CommandRegistrar(Command c) { command_registry().push_back(std::move(c)); }
};

} // namespace deepinfer::cli

#define DI_CLI_CONCAT_INNER(a, b) a##b
#define DI_CLI_CONCAT(a, b) DI_CLI_CONCAT_INNER(a, b)
#define DI_REGISTER_COMMAND(...)                                                                             \
    static ::deepinfer::cli::CommandRegistrar DI_CLI_CONCAT(di_cmd_registrar_, __LINE__)(                    \
        ::deepinfer::cli::Command{__VA_ARGS__})
