#pragma once
// What `d5 run` and `d5 rerun` share: executing a recipe the way the CLI does (d5's global options
// passed to every run, each run a child d5 process, a progress bar, run.json written).
#include <string>
#include <vector>

#include "cli_common.h"
#include "deep500/experiment/recipe.h"
#include "deep500/experiment/recipe_run.h"
#include "deep500/experiment/time_to_solution.h"

namespace d5::cli {

struct ExecutedRecipe {
  RecipeRun run;
  Results summary;  // run.json's content
  std::string summary_path;
  std::vector<SolutionGroup> solutions;  // training entries run with several seeds
  std::string solutions_path;            // solutions.json, when there are any
};

ExecutedRecipe execute_recipe(const Recipe& recipe, const std::vector<std::string>& sets, const GlobalOptions& g,
                              RecipeRunOptions options, bool show_progress);

// Where the shipped recipes are ($D5_RECIPES_DIR, else the installed or source tree's recipes/).
std::string recipes_directory();
// A path, or the name of a shipped recipe ("quickstart" -> recipes/quickstart.yaml); IoError
// naming both places when neither exists.
std::string resolve_recipe(const std::string& name);

// This d5's own executable, for child processes.
std::string self_executable();

}  // namespace d5::cli
