// Command-line arguments: the input, split at NUL bytes, is d5's argument vector. The harness
// builds the very application d5 runs (src/cli/app.h: every command and option, CLI11's parser
// and d5's validators), looks for an unknown command word as main() does, parses, and reads the
// global options back through d5's parsers. It never runs a command: what a command checks once
// it runs is fuzzed through the parsers of its inputs (the other harnesses). Accepted answers:
// CLI11's ParseError family (usage errors, --help, --version) and d5's typed errors.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "app.h"
#include "deep500/core/malloc_policy.h"
#include "deep500/core/math_mode.h"
#include "fuzz_common.h"

namespace {

// Building the application (every command's options, validators and help texts) took nearly all of
// an input's time under the sanitizers (15 inputs/s), so it is built once. Each input starts from
// CLI11's cleared parse state and d5's default global options, the only option values read back;
// the commands' own option structs may keep values of earlier inputs, which nothing here reads.
d5::cli::CliApp& application() {
  static const std::unique_ptr<d5::cli::CliApp> cli = d5::cli::make_cli_app();
  cli->app.clear();
  cli->global = d5::cli::GlobalOptions{};
  return *cli;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::string> args = {"d5"};
  std::string current;
  for (size_t i = 0; i < size && args.size() < 64; ++i) {
    if (data[i] == 0) {
      args.push_back(current);
      current.clear();
    } else {
      current.push_back(static_cast<char>(data[i]));
    }
  }
  if (!current.empty()) args.push_back(current);
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  const int argc = static_cast<int>(argv.size());

  d5::cli::CliApp& cli = application();
  if (d5::cli::unknown_command(cli.app, argc, argv.data())) return 0;
  try {
    cli.app.parse(argc, argv.data());
  } catch (const CLI::ParseError&) {  // usage errors, and --help / --version (CLI::Success)
    return 0;
  }
  int parsed = 0;
  for (const auto& c : cli.commands) parsed += c.app->parsed() ? 1 : 0;
  d5::fuzz::require(parsed == 1, "a parsed command line names exactly one command");
  d5::fuzz::accepts([&] {
    d5::parse_f32_math(cli.global.math);
    d5::parse_malloc_policy(cli.global.malloc);
  });
  return 0;
}
