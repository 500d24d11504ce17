// Time to solution over seeds: the statistics (hand-computed), the grouping of a recipe run's
// runs by entry and grid point, and the result file `d5 compare` reads.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "../../support/temp_dir.h"
#include "deep500/core/error.h"
#include "deep500/experiment/recipe.h"
#include "deep500/experiment/recipe_run.h"
#include "deep500/experiment/time_to_solution.h"
#include "deep500/metrics/compare.h"
#include "deep500/metrics/statistics.h"

namespace d5 {
namespace {

namespace fs = std::filesystem;

TEST(TimeToSolution, MedianCountsAFailedSeedAsInfinitelySlow) {
  // 5 seeds, 4 reached: sorted 10, 20, 30, 40, inf -> 30.
  EXPECT_EQ(median_counting_failures({40, 10, 30, 20}, 5), 30);
  // 4 seeds, 3 reached: 10, 20, 30, inf -> (20 + 30) / 2.
  EXPECT_EQ(median_counting_failures({30, 10, 20}, 4), 25);
  // Half or fewer reached: no median.
  EXPECT_FALSE(median_counting_failures({10, 20}, 4).has_value());
  EXPECT_FALSE(median_counting_failures({}, 3).has_value());
  EXPECT_THROW(median_counting_failures({1, 2, 3}, 2), InvalidArgument);
}

TEST(TimeToSolution, OlympicScoreDropsTheFastestAndTheSlowest) {
  std::string why;
  // 10, 20, 30, 70, 100: the mean of 20, 30, 70.
  EXPECT_DOUBLE_EQ(*olympic_mean({100, 30, 10, 70, 20}, 5, &why), 40.0);
  // One failure is the slowest run: 10 dropped, the mean of 20 and 30.
  EXPECT_DOUBLE_EQ(*olympic_mean({30, 10, 20}, 4, &why), 25.0);
  // Three runs, all reached: the middle one.
  EXPECT_DOUBLE_EQ(*olympic_mean({5, 1, 3}, 3, &why), 3.0);
  EXPECT_FALSE(olympic_mean({1, 2, 3}, 5, &why).has_value());
  EXPECT_NE(why.find("2 of 5 runs did not reach"), std::string::npos) << why;
  EXPECT_FALSE(olympic_mean({1, 2}, 2, &why).has_value());
  EXPECT_NE(why.find("at least 3 runs"), std::string::npos) << why;
}

TEST(TimeToSolution, SeedsAreACountOrAListForTheRecipeOrAnEntry) {
  const Recipe r = parse_recipe(R"(
recipe: s
seeds: 3
entries:
  - name: a
    command: train
    fixed: {model: lenet5, dataset: mnist}
  - name: b
    command: train
    fixed: {model: lenet5, dataset: mnist}
    seeds: [7, 9]
)");
  const auto runs = plan_runs(r, {}, 100);
  ASSERT_EQ(runs.size(), 5u);
  EXPECT_EQ(runs[0].seed, 100u);
  EXPECT_EQ(runs[2].seed, 102u);
  EXPECT_EQ(runs[2].label, "seed=102");
  EXPECT_EQ(runs[2].point, "");
  EXPECT_EQ(runs[3].seed, 7u);
  EXPECT_EQ(runs[4].id, "b-seed=9");
  // --set seeds=N: N seeds for every entry (or ENTRY.seeds=N for one), unless the entry's command
  // takes a 'seeds' option of its own, which the override then sets as any other.
  const auto two = plan_runs(r, parse_overrides({"seeds=2"}), 100);
  ASSERT_EQ(two.size(), 4u);
  EXPECT_EQ(two[3].seed, 101u);
  EXPECT_EQ(plan_runs(r, parse_overrides({"a.seeds=1"}), 100).size(), 3u);
  EXPECT_THROW(plan_runs(r, parse_overrides({"seeds=0"}), 100), InvalidArgument);
  const Recipe rl = parse_recipe("recipe: rl\nentries:\n  - command: rl\n    mutable: {seeds: \"1,2,3\"}\n");
  const auto rl_runs = plan_runs(rl, parse_overrides({"seeds=1"}), 100);
  ASSERT_EQ(rl_runs.size(), 1u);
  EXPECT_EQ(rl_runs[0].params["seeds"], 1);
  auto message = [](const std::string& text) {
    try {
      parse_recipe(text);
    } catch (const FormatError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message("recipe: x\nseeds: 0\nentries:\n  - command: net\n").find("count of at least 1"), std::string::npos);
  EXPECT_NE(message("recipe: x\nentries:\n  - command: net\n    seeds: {a: 1}\n").find("'seeds' must be a count"),
            std::string::npos);
  EXPECT_NE(message("recipe: x\nseeds: [1, -2]\nentries:\n  - command: net\n").find("seed '-2'"), std::string::npos);
  // A ranked list's score over the runs: the median (default) or the olympic mean.
  const std::string scored = "recipe: x\nentries:\n  - command: train\nscore: {quantity: time_to_target, better: lower";
  EXPECT_FALSE(parse_recipe(scored + "}\n").score.olympic);
  EXPECT_TRUE(parse_recipe(scored + ", over_runs: olympic}\n").score.olympic);
  EXPECT_NE(message(scored + ", over_runs: mean}\n").find("'over_runs' must be 'median' or 'olympic'"),
            std::string::npos);
}

// A recipe of two grid points x four seeds and an entry without a target; the fake runs write
// the result files `d5 train` writes (target, reached_target, time_to_target), one seed of lr=0.2
// never reaching the target and one seed of lr=0.1 leaving no result at all.
struct FakeRecipeRun {
  test::TempDir dir{"d5-time-to-solution"};
  RecipeRun run;

  FakeRecipeRun() {
    const Recipe recipe = parse_recipe(R"(
recipe: t
seeds: [1, 2, 3, 4]
entries:
  - name: tta
    command: train
    fixed: {model: lenet5, dataset: mnist, target-accuracy: 0.9}
    grid: {lr: [0.1, 0.2]}
  - name: bench
    command: ops bench
    fixed: {suite: deepbench-gemm-training}
)");
    RecipeRunOptions o;
    o.results_dir = (dir.path / "results").string();
    run = run_recipe(recipe, plan_runs(recipe, {}, 1), o, [&](const std::vector<std::string>& args, const std::string& log) {
      std::ofstream(log) << "log\n";
      const std::string joined = fmt::format("{}", fmt::join(args, " "));
      const bool tta = joined.find(" train ") != std::string::npos;
      const bool slow = joined.find("--lr 0.2") != std::string::npos;
      const int seed = std::stoi(args[1]);
      if (tta && !slow && seed == 3) return ProcessOutcome{2, 0, 1.0};  // a usage error: no result file
      if (tta && slow && seed == 1) {  // a result file that is not one: judged, not a crash
        std::ofstream(args.back()) << "{not json";
        return ProcessOutcome{0, 0, 1.0};
      }
      Results res;
      CaseResult c;
      c.name = tta ? "lenet5" : "gemm";
      if (tta) {
        c.extra["target"] = "accuracy>=0.9";
        const bool reached = !(slow && seed == 4);
        c.extra["reached_target"] = reached;
        c.extra["stop_reason"] = reached ? "target" : "epochs";
        if (reached) c.extra["time_to_target"] = {{"training_time_s", (slow ? 20.0 : 10.0) * seed}, {"step", 100 * seed}};
      }
      res.cases.push_back(c);
      write_results(args.back(), res);
      return ProcessOutcome{0, 0, 1.0};
    });
  }
};

TEST(TimeToSolution, GroupsRunsByEntryAndGridPointAndReadsEachSeedsOutcome) {
  FakeRecipeRun f;
  const auto groups = solution_groups(f.run);
  ASSERT_EQ(groups.size(), 2u);  // the bench entry names no target
  EXPECT_EQ(groups[0].entry, "tta");
  EXPECT_EQ(groups[0].point, "lr=0.1");
  EXPECT_EQ(groups[0].target, "accuracy>=0.9");
  ASSERT_EQ(groups[0].seeds.size(), 4u);
  EXPECT_TRUE(groups[0].seeds[1].reached);
  EXPECT_EQ(groups[0].seeds[1].time_to_target_s, 20.0);
  EXPECT_EQ(groups[0].seeds[1].steps_to_target, 200);
  EXPECT_FALSE(groups[0].seeds[2].reached);
  EXPECT_EQ(groups[0].seeds[2].why_not, "exited 2 without results");
  EXPECT_EQ(groups[1].point, "lr=0.2");
  EXPECT_FALSE(groups[1].seeds[0].reached);
  EXPECT_EQ(groups[1].seeds[0].why_not.rfind("unreadable result file: ", 0), 0u) << groups[1].seeds[0].why_not;
  EXPECT_FALSE(f.run.runs[4].valid);
  ASSERT_EQ(f.run.runs[4].invalid_reasons.size(), 1u);
  EXPECT_NE(f.run.runs[4].invalid_reasons[0].find("wrote an unreadable result file"), std::string::npos);
  EXPECT_FALSE(groups[1].seeds[3].reached);
  EXPECT_EQ(groups[1].seeds[3].why_not, "stopped: epochs");

  const Results res = time_to_solution_results(groups, nlohmann::json::object());
  ASSERT_EQ(res.cases.size(), 2u);
  const CaseResult& slow = res.cases[1];
  EXPECT_EQ(slow.name, "tta lr=0.2");
  EXPECT_EQ(slow.state, CaseState::Failed);
  ASSERT_EQ(slow.metrics.size(), 2u);
  EXPECT_EQ(slow.metrics[0].name, "time_to_target");
  EXPECT_EQ(slow.metrics[0].samples, (std::vector<double>{40, 60}));
  EXPECT_EQ(slow.metrics[1].samples, (std::vector<double>{200, 300}));
  EXPECT_EQ(slow.extra["success_rate"], 0.5);
  EXPECT_TRUE(slow.extra["median_time_to_target_s"].is_null());  // 40, 60, inf, inf: half failed
  EXPECT_TRUE(slow.extra["olympic_time_to_target_s"].is_null());
  EXPECT_NE(slow.extra["olympic_why_not"].get<std::string>().find("2 of 4 runs did not reach"), std::string::npos);
  EXPECT_EQ(slow.extra["runs"][3]["why_not"], "stopped: epochs");
  EXPECT_NE(slow.detail.find("2 of 4 seeds reached accuracy>=0.9"), std::string::npos) << slow.detail;
  EXPECT_NE(slow.detail.find("no 95% CI"), std::string::npos) << slow.detail;  // 2 samples are too few
  const CaseResult& quick = res.cases[0];  // 10, 20, fail, 40
  EXPECT_EQ(quick.extra["median_time_to_target_s"], 30.0);  // 10, 20, 40, inf
  EXPECT_EQ(quick.extra["median_steps_to_target"], 300.0);

  const std::string text = format_time_to_solution(groups);
  EXPECT_NE(text.find("tta lr=0.1"), std::string::npos) << text;
  EXPECT_NE(text.find("olympic score    30.0 s"), std::string::npos) << text;  // 10, 20, 40: 10 and the failure dropped
  EXPECT_NE(text.find("median 20.0 s over the 3 that reached it"), std::string::npos) << text;
}

// Reference convergence points: six seeds that need a fifth of the reference's steps are flagged,
// their runs made INVALID with the reason; six seeds like the reference's are not.
TEST(TimeToSolution, RunsConvergingImplausiblyFastAgainstTheReferenceAreFlagged) {
  const Recipe recipe = parse_recipe(R"(
recipe: r
entries:
  - name: tta
    command: train
    fixed: {model: lenet5, dataset: mnist, target-accuracy: 0.9}
    seeds: 6
    reference_steps_to_target: [500, 500, 625, 625, 750, 750]
)");
  auto make = [](const std::vector<int64_t>& steps, RecipeRun& run, int batch = 64) {
    SolutionGroup g;
    g.entry = "tta";
    g.target = "accuracy>=0.9";
    for (size_t i = 0; i < steps.size(); ++i) {
      g.seeds.push_back({i, "tta-" + std::to_string(i), true, 1.0, steps[i], ""});
      RunRecord r;
      r.entry = "tta";
      r.run.params["batch"] = batch;
      r.valid = true;
      run.runs.push_back(r);
    }
    run.valid = true;
    return std::vector<SolutionGroup>{g};
  };
  RecipeRun fast;
  auto groups = make({100, 125, 125, 150, 125, 100}, fast);
  check_against_references(recipe, groups, fast);
  ASSERT_TRUE(groups[0].reference.has_value());
  EXPECT_TRUE(groups[0].reference->flagged);
  EXPECT_EQ(groups[0].reference->reference_median, 625);
  EXPECT_EQ(groups[0].reference->median, 125);
  EXPECT_LT(groups[0].reference->p_value, 0.01);
  EXPECT_FALSE(fast.valid);
  ASSERT_EQ(fast.runs[0].invalid_reasons.size(), 1u);
  EXPECT_NE(fast.runs[0].invalid_reasons[0].find("converges implausibly fast"), std::string::npos);
  const Results res = time_to_solution_results(groups, {});
  EXPECT_EQ(res.cases[0].state, CaseState::Mistrusted);
  EXPECT_EQ(res.cases[0].extra["reference"]["flagged"], true);
  EXPECT_NE(format_time_to_solution(groups).find("FLAGGED"), std::string::npos);

  RecipeRun usual;
  groups = make({500, 625, 500, 750, 625, 625}, usual);
  check_against_references(recipe, groups, usual);
  EXPECT_FALSE(groups[0].reference->flagged);
  EXPECT_GT(groups[0].reference->p_value, 0.05);
  EXPECT_TRUE(usual.valid);
  EXPECT_EQ(time_to_solution_results(groups, {}).cases[0].state, CaseState::Passed);

  EXPECT_THROW(parse_recipe("recipe: r\nentries:\n  - command: train\n    reference_steps_to_target: [10, x]\n"),
               FormatError);

  // A reference measured at batch 64 says nothing about batch 128, which takes fewer steps.
  const Recipe at64 = parse_recipe(R"(
recipe: r
entries:
  - name: tta
    command: train
    mutable: {batch: 64}
    reference_steps_to_target: [500, 500, 625, 625, 750, 750]
    reference_for: {batch: 64}
)");
  RecipeRun bigger;
  groups = make({100, 125, 125, 150, 125, 100}, bigger, 128);
  check_against_references(at64, groups, bigger);
  EXPECT_FALSE(groups[0].reference->flagged);
  EXPECT_EQ(groups[0].reference->detail, "not checked against the reference: batch=128 where the reference used 64");
  EXPECT_TRUE(bigger.valid);
  RecipeRun same;
  groups = make({100, 125, 125, 150, 125, 100}, same, 64);
  check_against_references(at64, groups, same);
  EXPECT_TRUE(groups[0].reference->flagged);
}

// The cases carry every seed's time, so two grid points (or two recipe runs) compare as
// distributions: lr=0.2's times are twice lr=0.1's.
TEST(TimeToSolution, TwoDistributionsCompareWithMannWhitney) {
  std::vector<SolutionGroup> a(1), b(1);
  a[0].entry = b[0].entry = "tta";
  a[0].target = b[0].target = "accuracy>=0.9";
  for (uint64_t s = 1; s <= 8; ++s) {
    a[0].seeds.push_back({s, "r", true, 10.0 + static_cast<double>(s), 100, ""});
    b[0].seeds.push_back({s, "r", true, 2 * (10.0 + static_cast<double>(s)), 200, ""});
  }
  // With a recipe run's manifest, as d5 run writes it: the file must not read as a run.json, whose
  // cases compare expands from their result files (none here).
  const nlohmann::json manifest = {{"extra", {{"recipe", {{"name", "t"}}}, {"run", {{"results_dir", "r"}}}}}};
  const Results ra = time_to_solution_results(a, manifest), rb = time_to_solution_results(b, manifest);
  EXPECT_FALSE(is_recipe_run(ra));
  EXPECT_EQ(ra.manifest["extra"]["time_to_solution_of"]["recipe"]["name"], "t");
  const Comparison c = compare_results(ra, rb, {});
  ASSERT_EQ(c.cases.size(), 1u);
  EXPECT_EQ(c.cases[0].metric, "time_to_target");
  EXPECT_EQ(c.cases[0].verdict, Verdict::Slower);
  EXPECT_NEAR(c.cases[0].ratio.estimate, 2.0, 0.1);  // the median of all pairwise ratios
}

}  // namespace
}  // namespace d5
