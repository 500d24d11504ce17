// The recipe engine's bookkeeping around each run: result and log files, cost, and energy from
// RAPL counters (a powercap tree in a temporary directory whose counters the run advances).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "../../support/temp_dir.h"
#include "deep500/experiment/recipe.h"
#include "deep500/experiment/recipe_run.h"

namespace d5 {
namespace {

namespace fs = std::filesystem;

void write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

TEST(RecipeRun, CostAndEnergyPerSampleAroundEachRun) {
  test::TempDir dir("d5-recipe-run");
  const fs::path powercap = dir.path / "powercap";
  write(powercap / "intel-rapl:0" / "name", "package-0");
  write(powercap / "intel-rapl:0" / "energy_uj", "1000000");
  write(powercap / "intel-rapl:0" / "max_energy_range_uj", "262143328850");
  write(powercap / "intel-rapl:0:0" / "name", "core");  // part of package-0: not added again
  write(powercap / "intel-rapl:0:0" / "energy_uj", "0");
  write(powercap / "intel-rapl:0:0" / "max_energy_range_uj", "262143328850");
  std::string why;
  RecipeRunOptions o;
  o.results_dir = (dir.path / "results").string();
  o.energy_domains = probe_rapl_domains(powercap.string(), &why);
  ASSERT_EQ(o.energy_domains.size(), 2u) << why;
  o.price_per_node_hour = 3.6;
  o.nodes = 2;

  const Recipe recipe = parse_recipe(R"(
recipe: e
entries:
  - command: train
    fixed: {model: lenet5, dataset: mnist}
    grid: {lr: [0.1, 0.2]}
)");
  const auto plan = plan_runs(recipe, {}, 1);
  std::vector<std::vector<std::string>> seen;
  // Each "run" writes a training result of 500 samples, uses 2.5 J of package energy (and 1 J of
  // core energy inside it) and reports 10 s.
  int64_t package_uj = 1000000, core_uj = 0;
  const RecipeRun run = run_recipe(recipe, plan, o, [&](const std::vector<std::string>& args, const std::string& log) {
    seen.push_back(args);
    std::ofstream(log) << "log\n";
    Results res;
    CaseResult c;
    c.name = "lenet5";
    c.extra["samples"] = 500;
    res.cases.push_back(c);
    write_results(args.back(), res);
    package_uj += 2500000;
    core_uj += 1000000;
    write(powercap / "intel-rapl:0" / "energy_uj", std::to_string(package_uj));
    write(powercap / "intel-rapl:0:0" / "energy_uj", std::to_string(core_uj));
    return ProcessOutcome{0, 0, 10.0};
  });
  ASSERT_EQ(run.runs.size(), 2u);
  ASSERT_EQ(seen.size(), 2u);
  // The engine adds the output options; the result lands under the run's id.
  EXPECT_EQ(seen[1][seen[1].size() - 4], "--format");
  EXPECT_EQ(seen[1].back(), o.results_dir + "/train-lr=0.2.json");
  EXPECT_TRUE(fs::exists(o.results_dir + "/train-lr=0.2.log"));
  for (const auto& r : run.runs) {
    EXPECT_TRUE(r.valid);
    EXPECT_TRUE(r.passed);
    EXPECT_EQ(r.samples, 500);
    ASSERT_TRUE(r.energy_j.has_value());
    EXPECT_NEAR(*r.energy_j, 2.5, 1e-9);
    EXPECT_NEAR(*r.energy_per_sample_j, 0.005, 1e-12);
    EXPECT_NEAR(r.cost, 3.6 * 2 * 10 / 3600, 1e-12);  // price x nodes x hours
  }
  const Results summary = recipe_run_results(run, recipe, {}, nlohmann::json::object());
  EXPECT_NEAR(summary.cases[0].extra["energy_per_sample_j"].get<double>(), 0.005, 1e-12);
  const std::string text = format_recipe_run(run, recipe, false);
  EXPECT_NE(text.find("energy 2.5 J (0.005 J/sample)"), std::string::npos) << text;
  EXPECT_NE(text.find("cost 0.0200"), std::string::npos) << text;
}

}  // namespace
}  // namespace d5
