// Acceptance criteria on results with known values, and the judging of a finished run.
#include <gtest/gtest.h>

#include "../../support/temp_dir.h"
#include "deep500/experiment/criteria.h"
#include "deep500/core/error.h"
#include "deep500/experiment/recipe.h"
#include "deep500/experiment/recipe_run.h"

namespace d5 {
namespace {

CaseResult training(double final_accuracy, bool reached) {
  CaseResult c;
  c.name = "lenet5";
  c.backend = "reference";
  c.extra = {{"final_test_accuracy", final_accuracy}, {"reached_target", reached}, {"time_to_accuracy", {{"step", 40}}}};
  MetricRecord acc;
  acc.name = "test_accuracy";
  acc.unit = "fraction";
  acc.samples = {0.5, 0.8, final_accuracy};
  acc.summary = summarize(acc.samples);
  c.metrics.push_back(acc);
  return c;
}

TEST(Criteria, Parse) {
  const Criterion c = parse_criterion("final_test_accuracy >= 0.97");
  EXPECT_EQ(c.quantity, "final_test_accuracy");
  EXPECT_EQ(c.op, ">=");
  EXPECT_DOUBLE_EQ(c.threshold, 0.97);
  EXPECT_EQ(parse_criterion("wall_time<600").op, "<");
  EXPECT_EQ(parse_criterion("time_to_accuracy reached").op, "reached");
  EXPECT_EQ(parse_criterion("step_time.p90 <= 1e-3").quantity, "step_time.p90");
  EXPECT_THROW(parse_criterion("accuracy >= high"), FormatError);
  EXPECT_THROW(parse_criterion("accuracy => 0.9"), FormatError);
  EXPECT_THROW(parse_criterion(""), FormatError);
}

TEST(Criteria, ExtraKeysMetricsAndStatistics) {
  Results r;
  r.cases = {training(0.98, true), training(0.96, false)};
  r.cases[1].backend = "onednn";
  // The worst case decides and is named.
  const CriterionResult lower = evaluate(parse_criterion("final_test_accuracy >= 0.97"), r, 1);
  EXPECT_FALSE(lower.passed);
  EXPECT_DOUBLE_EQ(*lower.value, 0.96);
  EXPECT_NE(lower.detail.find("lenet5 on onednn"), std::string::npos) << lower.detail;
  EXPECT_TRUE(evaluate(parse_criterion("final_test_accuracy >= 0.95"), r, 1).passed);
  EXPECT_TRUE(evaluate(parse_criterion("test_accuracy.last > 0.95"), r, 1).passed);
  const CriterionResult median = evaluate(parse_criterion("test_accuracy <= 0.8"), r, 1);  // median of 3 samples
  EXPECT_TRUE(median.passed) << median.detail;
  EXPECT_DOUBLE_EQ(*median.value, 0.8);
  EXPECT_TRUE(evaluate(parse_criterion("time_to_accuracy.step == 40"), r, 1).passed);
  EXPECT_FALSE(evaluate(parse_criterion("reached_target reached"), r, 1).passed);
  r.cases[1].extra["reached_target"] = true;
  EXPECT_TRUE(evaluate(parse_criterion("reached_target reached"), r, 1).passed);
  const CriterionResult missing = evaluate(parse_criterion("gflops >= 1"), r, 1);
  EXPECT_FALSE(missing.passed);
  EXPECT_NE(missing.detail.find("no value 'gflops'"), std::string::npos);
  EXPECT_TRUE(evaluate(parse_criterion("wall_time <= 2"), r, 1.5).passed);
  EXPECT_FALSE(evaluate(parse_criterion("wall_time <= 1"), r, 1.5).passed);
}

TEST(Criteria, TheWorstValueOfARunIsTheLargestWhenLowerIsBetter) {
  Results r;
  r.cases = {training(0.91, true), training(0.97, true)};
  CaseResult skipped = training(0.1, false);
  skipped.state = CaseState::Skipped;
  r.cases.push_back(skipped);
  EXPECT_EQ(worst_value(r, "final_test_accuracy", false), 0.91);
  EXPECT_EQ(worst_value(r, "final_test_accuracy", true), 0.97);
  EXPECT_EQ(worst_value(r, "test_accuracy.first", true), 0.5);
  EXPECT_EQ(worst_value(r, "time_to_accuracy.step", true), 40);
  EXPECT_FALSE(worst_value(r, "no_such_thing", true));
  r.cases[1].extra.erase("final_test_accuracy");  // one case without a value: the run has none
  EXPECT_FALSE(worst_value(r, "final_test_accuracy", false));
  EXPECT_FALSE(worst_value(Results{}, "final_test_accuracy", false));
}

TEST(Criteria, CasesThatDidNotRunAreNotChecked) {
  Results r;
  r.cases = {training(0.98, true), training(0.1, false)};
  r.cases[1].state = CaseState::Unimplemented;
  EXPECT_TRUE(evaluate(parse_criterion("final_test_accuracy >= 0.97"), r, 1).passed);
  r.cases[0].state = CaseState::Skipped;
  const CriterionResult none = evaluate(parse_criterion("final_test_accuracy >= 0.97"), r, 1);
  EXPECT_FALSE(none.passed);
  EXPECT_EQ(none.detail, "no case ran");
}

TEST(Criteria, NoFailedCases) {
  Results r;
  r.cases = {training(0.98, true), training(0.5, false), training(0.5, false)};
  EXPECT_TRUE(no_failed_cases(r).passed);
  r.cases[1].state = CaseState::Failed;
  r.cases[1].detail = "target accuracy 0.9 not reached";
  r.cases[2].state = CaseState::Mistrusted;  // the run's validity, not this criterion
  const CriterionResult c = no_failed_cases(r);
  EXPECT_FALSE(c.passed);
  EXPECT_EQ(*c.value, 1);
  EXPECT_NE(c.detail.find("FAILED: target accuracy 0.9 not reached"), std::string::npos) << c.detail;
  r.cases[2].state = CaseState::Failed;
  const CriterionResult two = no_failed_cases(r);
  EXPECT_EQ(*two.value, 2);
  EXPECT_NE(two.detail.find("(and 1 more)"), std::string::npos) << two.detail;
}

// A finished run is judged from the result file it wrote: validity from the runner's outcomes,
// criteria from the values.
TEST(JudgeRun, ValidityAndCriteriaFromTheResultFile) {
  test::TempDir dir("d5-judge");
  const Recipe recipe = parse_recipe(R"(
recipe: j
entries:
  - command: train
    fixed: {model: lenet5, dataset: mnist}
    criteria: ["final_test_accuracy >= 0.97"]
)");
  const auto plan = plan_runs(recipe, {}, 1);
  Results res;
  res.cases = {training(0.98, true)};
  RunOutcome measured;
  measured.validity = Validity::Invalid;
  measured.reason = "CI ±3.4% after 5.0 s (limit)";
  res.cases[0].outcome = measured;
  write_results(dir.file("train.json"), res);

  const auto judged = [&](const std::string& file, int exit_code) {
    RunRecord r;
    r.run = plan[0];
    r.result_file = file + ".json";
    r.log_file = file + ".log";
    r.process.exit_code = exit_code;
    judge_run(recipe, dir.path.string(), r);
    return r;
  };
  const RunRecord r = judged("train", 0);
  EXPECT_FALSE(r.valid);
  ASSERT_EQ(r.invalid_reasons.size(), 1u);
  EXPECT_NE(r.invalid_reasons[0].find("CI ±3.4%"), std::string::npos);
  ASSERT_EQ(r.criteria.size(), 2u);
  EXPECT_TRUE(r.passed);

  // A process that died without results: INVALID, and every criterion FAILs for want of values.
  const RunRecord dead = judged("missing", 4);
  EXPECT_FALSE(dead.valid);
  EXPECT_NE(dead.invalid_reasons[0].find("d5 train exited 4 without results"), std::string::npos);
  EXPECT_FALSE(dead.passed);
  EXPECT_EQ(dead.criteria[0].detail, "no results to check");
}

}  // namespace
}  // namespace d5
