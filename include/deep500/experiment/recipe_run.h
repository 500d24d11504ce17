#pragma once
// Running a planned recipe: every run is one d5 subcommand in its own process (the harness never
// shares an address space, a thread pool or an allocator with the workload), writing a result
// file with its manifest; then each run is judged VALID or INVALID and each criterion PASS or
// FAIL, and the whole is summarized in run.json (docs/run.md).
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "deep500/experiment/criteria.h"
#include "deep500/metrics/energy.h"
#include "deep500/experiment/recipe.h"
#include "deep500/metrics/results.h"

namespace d5 {

struct ProcessOutcome {
  int exit_code = -1;  // -1 when killed by a signal
  int signal = 0;
  double wall_s = 0;
};
// Runs d5 with `args` (no program name), stdout and stderr going to `log_path`.
using ProcessRunner = std::function<ProcessOutcome(const std::vector<std::string>& args, const std::string& log_path)>;
// The ProcessRunner of the d5 CLI: `executable` in a child process.
ProcessOutcome run_process(const std::string& executable, const std::vector<std::string>& args,
                           const std::string& log_path);

struct RecipeRunOptions {
  std::string results_dir;         // created if missing
  double price_per_node_hour = 0;  // > 0: a cost per run and in total
  int nodes = 1;
  // RAPL domains to read around every run (energy.h); empty: energy is not measured. The package
  // counters count the whole socket, so other work on the machine is in the figure too.
  std::vector<RaplDomain> energy_domains;
  // Told before each run (done runs so far, all runs, what starts); may be empty.
  std::function<void(size_t, size_t, const std::string&)> progress;
};

struct RunRecord {
  PlannedRun run;
  std::string entry;        // the entry's name
  std::string result_file;  // relative to the results directory
  std::string log_file;
  ProcessOutcome process;
  bool valid = false;
  std::vector<std::string> invalid_reasons;
  std::vector<CriterionResult> criteria;  // the entry's, then the implicit no-failed-cases one
  bool passed = false;
  double cost = 0;
  int64_t samples = 0;                    // training samples processed (cases' extra.samples)
  std::optional<double> energy_j;         // package energy over the run, where RAPL is readable
  std::optional<double> energy_per_sample_j;
};

struct RecipeRun {
  std::string results_dir;
  std::vector<RunRecord> runs;
  std::vector<CriterionResult> criteria;  // the recipe's own (wall_time)
  double wall_s = 0;
  double cost = 0;
  bool passed = false;  // every criterion of every run and of the recipe
  bool valid = false;   // every run VALID
};

RecipeRun run_recipe(const Recipe& recipe, const std::vector<PlannedRun>& runs, const RecipeRunOptions& options,
                     const ProcessRunner& runner);

// Judges one finished run from its result file (absent when the process wrote none).
void judge_run(const Recipe& recipe, const std::string& results_dir, RunRecord& record);

// run.json: one case per run (PASSED when all its criteria pass), the manifest given plus the
// recipe (name, text, division, overrides) under manifest.extra.recipe.
Results recipe_run_results(const RecipeRun& run, const Recipe& recipe, const std::vector<std::string>& overrides,
                           nlohmann::json manifest);
// Whether `r` is a recipe run's run.json, and the cases of its runs' result files (in `dir`),
// each named "RUN-ID: case" so that runs stay apart; runs without a result file are left out.
bool is_recipe_run(const Results& r);
Results recipe_run_cases(const Results& summary, const std::string& dir);

std::string format_recipe_run(const RecipeRun& run, const Recipe& recipe, bool require_valid);

}  // namespace d5
