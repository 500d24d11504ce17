// A submission's score over its runs: the median, or MLPerf's olympic mean (the best and the
// worst run dropped, a run without a value being the worst), in either direction.
#include <gtest/gtest.h>

#include <filesystem>

#include "../../support/temp_dir.h"
#include "deep500/history/submission.h"
#include "deep500/metrics/metric.h"

namespace d5 {
namespace {

namespace fs = std::filesystem;

// run.json's cases for runs whose result files hold time_to_target = values[i] (none for nullopt).
Results runs_with(const std::vector<std::optional<double>>& values, const fs::path& dir) {
  Results summary;
  for (size_t i = 0; i < values.size(); ++i) {
    CaseResult run;
    run.name = "tta seed=" + std::to_string(i);
    run.extra = {{"entry", "tta"}, {"id", "tta-" + std::to_string(i)}, {"result_file", "tta-" + std::to_string(i) + ".json"}};
    Results r;
    CaseResult c;
    c.name = "lenet5";
    if (values[i]) c.metrics.push_back(metric_record("time_to_target", "s", {*values[i]}));
    r.cases.push_back(c);
    write_results((dir / run.extra["result_file"].get<std::string>()).string(), r);
    summary.cases.push_back(run);
  }
  return summary;
}

double scored(const Recipe& recipe, const std::vector<std::optional<double>>& values, Submission& s) {
  test::TempDir dir("d5-score");
  score_submission(recipe, runs_with(values, dir.path), dir.path.string(), s);
  return s.score.value_or(-1);
}

TEST(SubmissionScore, MedianOrOlympicMeanOverRuns) {
  Recipe recipe;
  recipe.score.quantity = "time_to_target";
  recipe.score.declared = true;
  Submission s;
  EXPECT_EQ(scored(recipe, {10, 50, 20, 30, 100}, s), 30);
  EXPECT_EQ(s.score_detail, "median of 5 runs");
  EXPECT_EQ(scored(recipe, {10, std::nullopt, 20}, s), -1);  // the median needs every run's value
  EXPECT_NE(s.score_detail.find("has no value"), std::string::npos) << s.score_detail;

  recipe.score.olympic = true;
  EXPECT_EQ(scored(recipe, {10, 50, 20, 30, 100}, s), (20.0 + 30 + 50) / 3);
  EXPECT_NE(s.score_detail.find("olympic mean of 5 runs"), std::string::npos) << s.score_detail;
  EXPECT_EQ(scored(recipe, {10, std::nullopt, 20, 30}, s), 25);  // 10 and the run without a value dropped
  EXPECT_EQ(scored(recipe, {10, std::nullopt, std::nullopt, 30}, s), -1);
  EXPECT_NE(s.score_detail.find("2 of 4 runs did not reach"), std::string::npos) << s.score_detail;

  // Higher is better: the worst run is the lowest, and a run without a value is the worst.
  recipe.score.lower_is_better = false;
  EXPECT_EQ(scored(recipe, {10, std::nullopt, 20, 30}, s), 15);  // 30 (the best) and the missing run dropped
}

}  // namespace
}  // namespace d5
