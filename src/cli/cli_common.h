#pragma once
// Pieces every d5 subcommand shares: output options, writing results.
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "deep500/core/registry.h"
#include "deep500/metrics/compare.h"
#include "deep500/metrics/exit_codes.h"
#include "deep500/metrics/experiment.h"
#include "deep500/metrics/results.h"

namespace d5 {
struct Problem;  // deep500/op/suites.h
}  // namespace d5

namespace d5::cli {

struct OutputOptions {
  std::string format = "console";
  std::string output;  // empty: stdout
};

// Adds --format console|json and -o/--output FILE to a subcommand.
void add_output_options(CLI::App& cmd, OutputOptions& opts);
// --tolerance and --alpha: how d5 compare (and d5 rerun) turn ratios into verdicts.
void add_verdict_options(CLI::App& cmd, CompareOptions& opts);

// Prints or writes (atomically) `results` in the chosen format.
void emit(const Results& results, const OutputOptions& opts);
// Same for a free-form JSON document with a console rendering supplied by the caller.
void emit_text(const std::string& console_text, const nlohmann::json& json, const OutputOptions& opts);

// Options every command takes (set on the top-level app): --threads, --seed.
struct GlobalOptions {
  int threads = 0;
  uint64_t seed = 0x5eed;
  bool deterministic = false;
  std::string math = "strict";
  std::string malloc = "system";
};
ExperimentSettings settings_from(const GlobalOptions& g);

// "KEY=VALUE" -> {KEY, VALUE}; InvalidArgument naming `option` (e.g. "--set") otherwise.
std::pair<std::string, std::string> split_key_value(const std::string& item, const std::string& option);
// --hyper KEY=VALUE items, each VALUE a number (optimizer hyperparameters).
std::map<std::string, double> parse_hyperparameters(const std::vector<std::string>& items);

// For a case run on one graph executor: true after marking `c` SKIPPED, saying why, when `backend`
// names an executor this build left out; InvalidArgument listing the executors when it names none.
bool skip_unbuilt_executor(const std::string& backend, CaseResult& c);

// A subcommand: its CLI11 node and what to run once parsing (and global set-up) is done.
struct Command {
  CLI::App* app;
  std::function<int()> run;  // returns the exit code
};

Command register_info(CLI::App& app, const GlobalOptions& g);
Command register_stats(CLI::App& app, const GlobalOptions& g);
Command register_ops(CLI::App& app, const GlobalOptions& g);
Command register_onnx_test(CLI::App& app, const GlobalOptions& g);
Command register_peak(CLI::App& app, const GlobalOptions& g);
Command register_net(CLI::App& app, const GlobalOptions& g);
Command register_models(CLI::App& app, const GlobalOptions& g);
Command register_data(CLI::App& app, const GlobalOptions& g);
Command register_divergence(CLI::App& app, const GlobalOptions& g);
Command register_train(CLI::App& app, const GlobalOptions& g);
Command register_compare(CLI::App& app, const GlobalOptions& g);
Command register_run(CLI::App& app, const GlobalOptions& g);
Command register_report(CLI::App& app, const GlobalOptions& g);
Command register_rerun(CLI::App& app, const GlobalOptions& g);
Command register_scaling(CLI::App& app, const GlobalOptions& g);
Command register_db(CLI::App& app, const GlobalOptions& g);
Command register_serve_bench(CLI::App& app, const GlobalOptions& g);
Command register_rl(CLI::App& app, const GlobalOptions& g);
Command register_tune(CLI::App& app, const GlobalOptions& g);
// Every top-level command, in the order `d5 --help` lists them (commands.cpp: one line each).
using CommandFactory = Command (*)(CLI::App& app, const GlobalOptions& g);
const Registry<CommandFactory>& command_registry();
// `d5 ops bench`: adds its Command to `subcommands`, which `d5 ops` dispatches to.
void register_ops_bench(CLI::App& ops, const GlobalOptions& g, std::vector<Command>& subcommands);
// `d5 ops overhead` (cmd_ops_overhead.cpp), likewise.
void register_ops_overhead(CLI::App& ops, const GlobalOptions& g, std::vector<Command>& subcommands);
// A suite's problems matching --filter (ECMAScript), the first --limit of them (0: all);
// InvalidArgument for a bad expression or a filter that matches nothing.
std::vector<Problem> select_problems(const std::vector<Problem>& all, const std::string& suite,
                                     const std::string& filter, int64_t limit);
// --backend's names (default: every backend built in); InvalidArgument for a name no build has.
std::vector<std::string> chosen_backends(const std::vector<std::string>& requested);
// A new directory `base`/`prefix`-<unique suffix>, created (mkdtemp): two processes never get the
// same one. IoError naming `base` when it cannot be created.
std::string make_unique_directory(const std::string& base, const std::string& prefix);

}  // namespace d5::cli
