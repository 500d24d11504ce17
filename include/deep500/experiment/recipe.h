#pragma once
// Recipes: YAML experiment descriptions (docs/recipes.md). A recipe names entries, each one d5
// subcommand with its options split into a fixed part (what the experiment is) and a mutable
// part (what a user may change with --set), grid sweeps over mutable options, seeds, and
// acceptance criteria. Planning turns a recipe into concrete runs; running them is
// recipe_run.h's business.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "deep500/experiment/criteria.h"

namespace d5 {

// After MLPerf: in the closed division the model and optimizer are part of the fixed part; in
// the open division only the dataset and the quality target are.
enum class Division { Closed, Open };
const char* to_string(Division d);

using Params = nlohmann::ordered_json;  // option name -> scalar or list, in recipe order

// Which seeds a run is repeated with: a list, or a count N (d5's --seed and the N - 1 after it).
// Neither: d5's --seed alone.
struct SeedPlan {
  std::vector<uint64_t> list;
  int64_t count = 0;
  bool given() const { return !list.empty() || count > 0; }
  std::vector<uint64_t> seeds(uint64_t default_seed) const;
};

struct RecipeEntry {
  std::string name;
  std::vector<std::string> command;     // the subcommand words: {"ops", "bench"}
  std::vector<std::string> positional;  // parameters passed as positional arguments, in order
  // Parameters passed after "--", in order: options of the command a command runs (d5 scaling's
  // d5 train). They are parameters like the others: fixed or mutable, --set and division rules.
  std::vector<std::string> after;
  Params fixed = Params::object();
  Params mutable_params = Params::object();
  Params grid = Params::object();  // option -> list of values; every combination runs
  std::vector<Criterion> criteria;
  SeedPlan seeds;  // given: replaces the recipe's seeds for this entry
  // Steps to the target of reference runs (reference convergence points, after MLPerf's RCPs):
  // runs that converge significantly faster are flagged (time_to_solution.h).
  std::vector<double> reference_steps_to_target;
  // The options the reference was measured with (batch, lr, ...): runs with other values are not
  // checked against it. Empty: every run is.
  Params reference_for = Params::object();
  // What `d5 tune` may try for some mutable options: option -> a list of choices or a text form
  // (search_space.h).
  Params search = Params::object();
};

// What a ranked list of the recipe's submissions orders by (docs/recipes.md#score). A quantity as
// criteria name it: per run the worst value over its cases (as criteria take it), over runs the
// median or the olympic mean. The default is the whole recipe's wall time.
struct RecipeScore {
  std::string quantity = "wall_time";
  bool lower_is_better = true;
  std::string entry;  // only this entry's runs; empty: every run
  // Over runs: the median, or MLPerf's olympic mean (the best and the worst run dropped; at least
  // three runs, at most one without a value, which is the worst).
  bool olympic = false;
  bool declared = false;  // false: the default, the recipe named no score
};

struct Recipe {
  std::string name, description;
  std::string source;  // path or "<text>"
  std::string text;    // the YAML as read, recorded in the results
  Division division = Division::Closed;
  SeedPlan seeds;
  bool require_valid = false;   // INVALID runs fail the recipe
  std::vector<RecipeEntry> entries;
  std::vector<Criterion> criteria;  // over the whole recipe (wall_time)
  RecipeScore score;
};

// Throws FormatError naming the key for malformed recipes and InvalidArgument when a recipe
// breaks its division's rules.
Recipe parse_recipe(const std::string& yaml_text, const std::string& source = "<text>");
Recipe load_recipe(const std::string& path);  // IoError when unreadable

// The recipe's YAML with new values for mutable options of entry `entry` (an index), set in the
// entry's own `mutable:` map, and `header` as comment lines on top; the rest as it was (YAML
// comments are not kept). What `d5 tune` writes back.
std::string recipe_with_values(const std::string& yaml_text, size_t entry, const Params& values,
                               const std::string& header);

// `--set [ENTRY.]KEY=VALUE`: a new value for a mutable option (or one grid value), in every entry
// that has the option or only in ENTRY.
struct Override {
  std::string entry;  // empty: every entry with the key
  std::string key;
  std::string value;
};
std::vector<Override> parse_overrides(const std::vector<std::string>& items);
// An override's text as the value it stands for: true/false, an integer, a number, else the text.
nlohmann::json parse_override_value(const std::string& text);

// Options that go before the subcommand (d5's global options) rather than after it.
bool is_global_option(const std::string& key);

struct PlannedRun {
  size_t entry = 0;   // index into Recipe::entries
  std::string id;     // unique, file-name safe: "train-backend=onednn-seed=1"
  std::string label;  // the grid point and seed: "backend=onednn seed=1"
  std::string point;  // the grid point alone: "backend=onednn"; runs of one point differ in their seed
  Params params;      // every option with its value for this run
  uint64_t seed = 0;
  std::vector<std::string> args;  // d5's arguments (no program name, no output options)
};

// Applies the overrides (InvalidArgument for a fixed or unknown key) and expands grids and seeds.
// Adds "--format json -o PATH" to a d5 command line: before a "--", whose words belong to the
// command the subcommand runs (d5 scaling's d5 train), else at the end.
void add_result_file_options(std::vector<std::string>& args, const std::string& path);
// The inverse, for a recorded command line: its output options (-o, --output, --format, also in
// their --opt=value forms) removed before a "--"; what follows "--" is kept as it is.
std::vector<std::string> without_result_file_options(const std::vector<std::string>& args);

std::vector<PlannedRun> plan_runs(const Recipe& recipe, const std::vector<Override>& overrides,
                                  uint64_t default_seed);

// d5's global options of a recipe run (`d5 --threads 2 --deterministic run ...`): they reach every
// run, before its subcommand, unless the recipe sets the option itself.
struct RunGlobals {
  int threads = 0;  // 0: not given
  bool deterministic = false;
  std::string math = "strict";
};
void add_run_globals(std::vector<PlannedRun>& runs, const RunGlobals& globals);

}  // namespace d5
