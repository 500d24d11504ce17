#pragma once
// d5's command line as a value: the CLI11 application with the global options and every command
// registered, without running anything. main.cpp parses and runs it; the CLI fuzz harness
// (fuzz/fuzz_cli.cpp) parses arbitrary argument vectors with exactly the same application.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli_common.h"

namespace d5::cli {

struct CliApp {
  CLI::App app{"deep500: fair, validated and reproducible deep-learning benchmarks", "d5"};
  GlobalOptions global;
  std::vector<Command> commands;
};

// The application with --version, the global options and every command of command_registry().
// Heap-allocated: the commands' callbacks refer to `global` and to the application by address.
std::unique_ptr<CliApp> make_cli_app();

// The command word of a command line, when it names no command. CLI11 answers `d5 NOSUCH --help`
// with the main help and exit 0, so a script asking whether a command exists would hear yes.
std::optional<std::string> unknown_command(CLI::App& app, int argc, const char* const* argv);

// The global options' values applied to the process: backends registered, threads, determinism,
// f32 math and the allocator policy. InvalidArgument for a value the parser let through.
void apply_global_options(const GlobalOptions& global);

}  // namespace d5::cli
