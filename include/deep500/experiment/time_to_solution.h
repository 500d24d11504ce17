#pragma once
// Time to solution over seeds (docs/recipes.md#time-to-solution): a training entry run with
// several seeds is one sample of a distribution, not one number. For every grid point of a recipe
// run whose runs differ only in their seed and train to a quality target, the times and steps to
// that target per seed, the success rate, medians with distribution-free 95% CIs and MLPerf's
// olympic score. Written as a result file of its own (solutions.json) whose cases carry the
// per-seed samples, so that `d5 compare` sets two such distributions against each other.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "deep500/experiment/recipe_run.h"
#include "deep500/metrics/results.h"

namespace d5 {

struct SeedOutcome {
  uint64_t seed = 0;
  std::string run_id;
  bool reached = false;
  double time_to_target_s = 0;  // training time to the target (the metric `time_to_target`)
  int64_t steps_to_target = 0;
  std::string why_not;  // when not reached: the stop reason, or why the run has no result
};

// The group's steps to the target against the entry's reference runs: flagged when it converges
// significantly faster (Mann-Whitney, two-sided p < 0.05, its median below the reference's). A
// result that beats every reference run by luck is not flagged; one that a changed schedule,
// a leak of test data into training or a wrong target made faster is, given enough seeds.
struct ReferenceCheck {
  std::vector<double> reference;  // the recipe's steps to the target
  double reference_median = 0, median = 0;
  double p_value = 1;
  bool flagged = false;
  std::string detail;
};

struct SolutionGroup {
  std::string entry, point;  // point: the grid point, "" without a grid
  std::string target;        // "exact_match>=0.98"
  std::vector<SeedOutcome> seeds;
  std::optional<ReferenceCheck> reference;  // when the entry has reference_steps_to_target
};

// The groups of `run`: runs of one entry and grid point, at least two seeds, whose result files
// name a quality target. A run whose process wrote no result counts as not reached.
std::vector<SolutionGroup> solution_groups(const RecipeRun& run);

// Checks every group whose entry carries reference_steps_to_target, and makes each run of a
// flagged group INVALID with the reason (run.valid follows).
void check_against_references(const Recipe& recipe, std::vector<SolutionGroup>& groups, RecipeRun& run);

// One case per group (name "ENTRY POINT"), metrics time_to_target (s) and steps_to_target over the
// seeds that reached the target; extra: seeds, reached, success_rate, the medians counting a
// failed seed as infinitely slow, the olympic score (or why there is none) and every seed's
// outcome (and the reference check's figures). PASSED when every seed reached the target,
// FAILED otherwise, MISTRUSTED when the reference check flagged the group. `manifest` is the recipe
// run's (run.json's); its extra.recipe and extra.run move under extra.time_to_solution_of, so that
// the file reads as plain results, not as a recipe run (is_recipe_run).
Results time_to_solution_results(const std::vector<SolutionGroup>& groups, const nlohmann::json& manifest);

// A few lines per group for `d5 run`'s report.
std::string format_time_to_solution(const std::vector<SolutionGroup>& groups);

}  // namespace d5
