// d5 run: a recipe (docs/recipes.md) executed run by run, each run a d5 subcommand in its own
// process writing its result file; VALID/INVALID per run, PASS/FAIL per criterion, run.json.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <iostream>

#include <fmt/format.h>

#include "cli_common.h"
#include "deep500/core/data_paths.h"
#include "deep500/core/error.h"
#include "deep500/metrics/manifest.h"
#include "progress.h"
#include "recipe_cli.h"

namespace d5::cli {

namespace {

namespace fs = std::filesystem;

struct RunOpts {
  OutputOptions out;
  std::string recipe, results_dir;
  std::vector<std::string> sets;
  bool require_valid = false, dry_run = false, list = false;
  double price = 0;
  int nodes = 1;
};

std::string default_results_dir(const std::string& recipe) {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
  return (fs::path("results") / (recipe + "-" + stamp)).string();
}

int list_recipes(const OutputOptions& out) {
  nlohmann::json j = nlohmann::json::array();
  std::string text = fmt::format("recipes in {}\n", recipes_directory());
  // Subdirectories too: recipes/paper/fig9-optimizers.yaml is `d5 run paper/fig9-optimizers`.
  std::vector<fs::path> files;
  std::error_code ec;
  const fs::path root = recipes_directory();
  for (const auto& f : fs::recursive_directory_iterator(root, ec))
    if (f.path().extension() == ".yaml") files.push_back(f.path().lexically_relative(root));
  std::sort(files.begin(), files.end());
  for (const auto& f : files) {
    const Recipe r = load_recipe((root / f).string());
    const std::string shown = (f.parent_path() / f.stem()).generic_string();
    j.push_back({{"name", r.name}, {"shipped_as", shown}, {"path", (root / f).string()},
                 {"division", to_string(r.division)}, {"description", r.description}});
    text += fmt::format("  {:<30} {:<7} {}\n", shown, to_string(r.division), r.description);
  }
  emit_text(text, j, out);
  return kExitOk;
}


std::vector<PlannedRun> plan_with_globals(const Recipe& recipe, const std::vector<std::string>& sets,
                                          const GlobalOptions& g) {
  std::vector<PlannedRun> runs = plan_runs(recipe, parse_overrides(sets), g.seed);
  add_run_globals(runs, {g.threads, g.deterministic, g.math});
  return runs;
}

int run_recipe_command(const RunOpts& o, const GlobalOptions& g) {
  if (o.list) return list_recipes(o.out);
  D5_CHECK_ARG(!o.recipe.empty(), "name a recipe file or a shipped recipe (see 'd5 run --list')");
  const Recipe recipe = load_recipe(resolve_recipe(o.recipe));
  if (o.dry_run) {
    std::string text;
    nlohmann::json j = nlohmann::json::array();
    for (const auto& r : plan_with_globals(recipe, o.sets, g)) {
      text += fmt::format("{}: d5 {}\n", r.id, fmt::join(r.args, " "));
      j.push_back({{"id", r.id}, {"args", r.args}});
    }
    emit_text(text, j, o.out);
    return kExitOk;
  }
  RecipeRunOptions ro;
  ro.results_dir = o.results_dir.empty() ? default_results_dir(recipe.name) : o.results_dir;
  ro.price_per_node_hour = o.price;
  ro.nodes = o.nodes;
  const ExecutedRecipe done = execute_recipe(recipe, o.sets, g, ro, o.out.format != "json");
  const bool require_valid = o.require_valid || recipe.require_valid;
  std::string text = format_recipe_run(done.run, recipe, require_valid);
  if (!done.solutions.empty())
    text += format_time_to_solution(done.solutions) + fmt::format("distributions: {}\n", done.solutions_path);
  emit_text(text + fmt::format("summary: {}\n", done.summary_path), to_json(done.summary), o.out);
  return done.run.passed && (done.run.valid || !require_valid) ? kExitOk : kExitFailed;
}

}  // namespace

std::string recipes_directory() {
  return locate_data("D5_RECIPES_DIR", D5_RECIPES_DIR_DEFAULT, "share/deep500/recipes");
}

// A path, or the name of a shipped recipe ("quickstart" -> recipes/quickstart.yaml).
std::string resolve_recipe(const std::string& name) {
  if (fs::exists(name)) return name;
  const fs::path shipped = fs::path(recipes_directory()) / (name + ".yaml");
  const fs::path relative(name);
  const bool inside = !relative.is_absolute() &&
                      std::none_of(relative.begin(), relative.end(), [](const fs::path& p) { return p == ".."; });
  if (inside && fs::exists(shipped)) return shipped.string();
  D5_THROW(IoError, "no recipe '{}': not a file, and not one of the shipped recipes in {} (see 'd5 run --list')",
           name, recipes_directory());
}

std::string self_executable() {
  std::error_code ec;
  const auto p = fs::read_symlink("/proc/self/exe", ec);
  if (ec) D5_THROW(IoError, "cannot find the d5 executable through /proc/self/exe: {}", ec.message());
  return p.string();
}

ExecutedRecipe execute_recipe(const Recipe& recipe, const std::vector<std::string>& sets, const GlobalOptions& g,
                              RecipeRunOptions options, bool show_progress) {
  const std::vector<PlannedRun> runs = plan_with_globals(recipe, sets, g);
  std::string no_energy;
  options.energy_domains = rapl_domains(&no_energy);
  Progress progress(show_progress);
  options.progress = [&](size_t done, size_t total, const std::string& what) { progress.update(done, total, what); };
  const std::string exe = self_executable();
  ExecutedRecipe out;
  out.run = run_recipe(recipe, runs, options, [&](const std::vector<std::string>& args, const std::string& log) {
    return run_process(exe, args, log);
  });
  progress.finish();
  // Before run.json: a run that converged implausibly fast against the recipe's reference is INVALID.
  out.solutions = solution_groups(out.run);
  check_against_references(recipe, out.solutions, out.run);
  out.summary = recipe_run_results(out.run, recipe, sets, make_manifest(settings_from(g)));
  out.summary.manifest["extra"]["run"]["energy"] =
      options.energy_domains.empty() ? "unavailable: " + no_energy : "RAPL package domains around each run";
  if (!out.solutions.empty()) {
    out.solutions_path = (fs::path(options.results_dir) / "solutions.json").string();
    write_results(out.solutions_path, time_to_solution_results(out.solutions, out.summary.manifest));
    out.summary.manifest["extra"]["run"]["time_to_solution"] = "solutions.json";
  }
  out.summary_path = (fs::path(options.results_dir) / "run.json").string();
  write_results(out.summary_path, out.summary);
  return out;
}

Command register_run(CLI::App& app, const GlobalOptions& g) {
  auto* cmd = app.add_subcommand(
      "run", "Run a recipe: its entries over their grids and seeds, results with manifests, VALID/INVALID per run, "
             "PASS/FAIL per criterion (exit 1 on FAIL)");
  auto o = std::make_shared<RunOpts>();
  cmd->add_option("recipe", o->recipe, "A recipe file, or a shipped recipe's name (quickstart, mnist-lenet-tta, ...)");
  cmd->add_flag("--list", o->list, "List the shipped recipes");
  cmd->add_option("--set", o->sets,
                  "[ENTRY.]KEY=VALUE: a new value for a mutable option (one value for a grid option); repeatable");
  cmd->add_option("--results-dir", o->results_dir, "Where the result files go (default: results/RECIPE-UTCSTAMP)");
  cmd->add_flag("--require-valid", o->require_valid, "INVALID runs fail the recipe too");
  cmd->add_flag("--dry-run", o->dry_run, "Print the d5 command of every run and stop");
  cmd->add_option("--price-per-node-hour", o->price, "Price of one node for an hour: prints the cost of each run")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--nodes", o->nodes, "Nodes the cost is charged for")->check(CLI::PositiveNumber)->default_val(1);
  add_output_options(*cmd, o->out);
  return {cmd, [o, &g] { return run_recipe_command(*o, g); }};
}

}  // namespace d5::cli
