// Recipes: parsing, division rules, overrides, grid and seed expansion into d5 command lines.
#include <gtest/gtest.h>

#include "deep500/core/error.h"
#include "deep500/experiment/recipe.h"

namespace d5 {
namespace {

const char* kTraining = R"(
recipe: tiny
description: LeNet on MNIST
division: closed
entries:
  - name: train
    command: train
    fixed:
      model: lenet5
      dataset: mnist
      optimizer: sgd
      target-accuracy: 0.9
    mutable:
      batch: 32
      lr: 0.05
      data-dir: "../data/mnist"
      no-test: false
      threads: 1
    grid:
      backend: [reference, onednn]
      sampler: [ordered, shuffle]
    criteria:
      - final_test_accuracy >= 0.9
      - time_to_accuracy reached
  - name: net
    command: net
    positional: [model]
    fixed:
      model: lenet5
      breakdown: true
    mutable:
      batch: [1, 8]
criteria:
  - wall_time <= 600
)";

bool has(const std::vector<std::string>& v, const std::vector<std::string>& seq) {
  return std::search(v.begin(), v.end(), seq.begin(), seq.end()) != v.end();
}

TEST(Recipe, ParsesEntriesCriteriaAndParameters) {
  const Recipe r = parse_recipe(kTraining);
  EXPECT_EQ(r.name, "tiny");
  EXPECT_EQ(r.division, Division::Closed);
  ASSERT_EQ(r.entries.size(), 2u);
  const RecipeEntry& e = r.entries[0];
  EXPECT_EQ(e.command, std::vector<std::string>{"train"});
  EXPECT_EQ(e.fixed["target-accuracy"], 0.9);
  EXPECT_EQ(e.mutable_params["batch"], 32);
  EXPECT_EQ(e.mutable_params["data-dir"], "../data/mnist");
  EXPECT_EQ(e.grid["backend"].size(), 2u);
  ASSERT_EQ(e.criteria.size(), 2u);
  EXPECT_EQ(e.criteria[1].op, "reached");
  ASSERT_EQ(r.criteria.size(), 1u);
  EXPECT_EQ(r.criteria[0].quantity, "wall_time");
}

TEST(Recipe, PlansTheGridInOrderWithCommandLines) {
  const auto runs = plan_runs(parse_recipe(kTraining), {}, 7);
  ASSERT_EQ(runs.size(), 5u);  // 2 x 2 grid points for train, 1 for net
  EXPECT_EQ(runs[0].label, "backend=reference sampler=ordered");
  EXPECT_EQ(runs[1].label, "backend=reference sampler=shuffle");
  EXPECT_EQ(runs[3].label, "backend=onednn sampler=shuffle");
  EXPECT_EQ(runs[3].id, "train-backend=onednn-sampler=shuffle");
  const auto& a = runs[0].args;
  // Global options first, then the subcommand and its options; false leaves a flag out.
  EXPECT_TRUE(has(a, {"--seed", "7", "--threads", "1", "train"})) << fmt::format("{}", fmt::join(a, " "));
  EXPECT_TRUE(has(a, {"--model", "lenet5"}));
  EXPECT_TRUE(has(a, {"--target-accuracy", "0.9"}));
  EXPECT_TRUE(has(a, {"--data-dir", "../data/mnist"}));
  EXPECT_TRUE(has(a, {"--backend", "reference"}));
  EXPECT_EQ(std::count(a.begin(), a.end(), "--no-test"), 0);
  // Positional options come right after the command; lists are comma-joined; true is a flag.
  EXPECT_EQ(runs[4].id, "net");
  EXPECT_TRUE(has(runs[4].args, {"net", "lenet5", "--breakdown", "--batch", "1,8"}))
      << fmt::format("{}", fmt::join(runs[4].args, " "));
}

// Options listed in `after` follow "--" in their listed order (d5 scaling passes them to d5 train),
// and --set reaches them like any other mutable option.
TEST(Recipe, AfterOptionsFollowTheSeparatorInOrder) {
  const Recipe r = parse_recipe(R"(
recipe: s
entries:
  - command: scaling
    after: [model, steps, no-test]
    fixed: {ranks: "1,2", model: lenet5, no-test: true}
    mutable: {batch: 8, steps: 20}
)");
  const auto runs = plan_runs(r, parse_overrides({"steps=5"}), 1);
  ASSERT_EQ(runs.size(), 1u);
  const auto& a = runs[0].args;
  const auto sep = std::find(a.begin(), a.end(), "--");
  ASSERT_NE(sep, a.end()) << fmt::format("{}", fmt::join(a, " "));
  EXPECT_EQ(std::vector<std::string>(sep + 1, a.end()),
            (std::vector<std::string>{"--model", "lenet5", "--steps", "5", "--no-test"}));
  EXPECT_TRUE(has(std::vector<std::string>(a.begin(), sep), {"--ranks", "1,2"}));
  EXPECT_TRUE(has(std::vector<std::string>(a.begin(), sep), {"--batch", "8"}));
  EXPECT_THROW(parse_recipe("recipe: s\nentries:\n  - command: scaling\n    after: [model]\n"), FormatError);
  // The result file options belong to the subcommand, not to what follows "--".
  std::vector<std::string> with_out = a;
  add_result_file_options(with_out, "r.json");
  const auto sep2 = std::find(with_out.begin(), with_out.end(), "--");
  EXPECT_EQ(std::vector<std::string>(sep2 - 4, sep2), (std::vector<std::string>{"--format", "json", "-o", "r.json"}));
  std::vector<std::string> plain = {"train", "--steps", "1"};
  add_result_file_options(plain, "r.json");
  EXPECT_EQ(plain.back(), "r.json");
}

TEST(Recipe, OverridesChangeMutableOptionsAndNarrowGrids) {
  const Recipe r = parse_recipe(kTraining);
  const auto runs = plan_runs(r, parse_overrides({"backend=onednn", "train.batch=8", "lr=0.1"}), 1);
  ASSERT_EQ(runs.size(), 3u);  // the backend grid collapsed to one value
  EXPECT_EQ(runs[0].params["backend"], "onednn");
  EXPECT_EQ(runs[0].params["batch"], 8);
  EXPECT_TRUE(has(runs[0].args, {"--lr", "0.1"}));
  EXPECT_EQ(runs[2].params["batch"], nlohmann::ordered_json::array({1, 8}));  // only the train entry's batch changed
}

TEST(Recipe, OverridesRefuseFixedAndUnknownOptions) {
  const Recipe r = parse_recipe(kTraining);
  try {
    plan_runs(r, parse_overrides({"model=resnet18"}), 1);
    FAIL() << "a fixed option changed";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("'model' is fixed"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("closed division"), std::string::npos) << e.what();
  }
  EXPECT_THROW(plan_runs(r, parse_overrides({"epochz=3"}), 1), InvalidArgument);
  EXPECT_THROW(plan_runs(r, parse_overrides({"nosuch.batch=3"}), 1), InvalidArgument);
  EXPECT_THROW(parse_overrides({"batch"}), InvalidArgument);
}

TEST(Recipe, SeedsMultiplyRuns) {
  const auto runs = plan_runs(parse_recipe(R"(
recipe: s
seeds: [1, 2, 3]
entries:
  - command: ops bench
    fixed: {suite: deepbench-gemm-training}
)"),
                              {}, 99);
  ASSERT_EQ(runs.size(), 3u);
  EXPECT_EQ(runs[2].label, "seed=3");
  EXPECT_EQ(runs[2].id, "ops-bench-seed=3");
  EXPECT_TRUE(has(runs[2].args, {"--seed", "3", "ops", "bench", "--suite", "deepbench-gemm-training"}));
}

TEST(Recipe, DivisionRules) {
  // Closed: the optimizer may not be mutable; a grid of them is the recipe's choice, and --set
  // may only pick one of its values.
  EXPECT_THROW(parse_recipe(R"(
recipe: c
entries:
  - command: train
    fixed: {model: lenet5, dataset: mnist}
    mutable: {optimizer: sgd}
)"),
               InvalidArgument);
  const Recipe closed = parse_recipe(R"(
recipe: c
entries:
  - command: train
    fixed: {model: lenet5, dataset: mnist}
    grid: {optimizer: [sgd, adam]}
)");
  EXPECT_EQ(plan_runs(closed, parse_overrides({"optimizer=adam"}), 1).size(), 1u);
  EXPECT_THROW(plan_runs(closed, parse_overrides({"optimizer=adagrad"}), 1), InvalidArgument);
  // Open: it may, given the dataset and a quality target are fixed.
  EXPECT_NO_THROW(parse_recipe(R"(
recipe: o
division: open
entries:
  - command: train
    fixed: {dataset: mnist, target-accuracy: 0.97}
    grid: {optimizer: [sgd, adam], model: [lenet5, mlp]}
)"));
  // Open without a quality target, or with a mutable dataset, is refused.
  EXPECT_THROW(parse_recipe(R"(
recipe: o
division: open
entries:
  - command: train
    fixed: {dataset: mnist}
    grid: {optimizer: [sgd, adam]}
)"),
               InvalidArgument);
  EXPECT_THROW(parse_recipe(R"(
recipe: o
division: open
entries:
  - command: train
    fixed: {target-accuracy: 0.9}
    mutable: {dataset: mnist}
)"),
               InvalidArgument);
}

TEST(Recipe, MalformedRecipesNameWhatIsWrong) {
  const auto message = [](const char* text) {
    try {
      parse_recipe(text);
    } catch (const FormatError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message("recipe: x\nentries:\n  - command: train\n    fixd: {a: 1}\n").find("unknown key 'fixd'"),
            std::string::npos);
  EXPECT_NE(message("recipe: x\nentries: []\n").find("'entries' must be a non-empty list"), std::string::npos);
  EXPECT_NE(message("recipe: x\nentries:\n  - name: a\n").find("'command' is missing"), std::string::npos);
  EXPECT_NE(message("recipe: x\nentries:\n  - command: net\n    grid: {batch: 4}\n").find("non-empty list"),
            std::string::npos);
  EXPECT_NE(message("recipe: x\nentries:\n  - command: net\n    fixed: {batch: 4}\n    mutable: {batch: 8}\n")
                .find("both fixed and mutable"),
            std::string::npos);
  EXPECT_NE(message("recipe: x\nentries:\n  - command: net\n    criteria: [\"speed is good\"]\n").find("criterion"),
            std::string::npos);
  EXPECT_NE(message("recipe: x\nseeds: five\nentries:\n  - command: net\n").find("'seeds' must be a count"),
            std::string::npos);
  EXPECT_NE(message("recipe: [unclosed\n").find("not valid YAML"), std::string::npos);
  EXPECT_NE(message("recipe: x\ndivision: half\nentries:\n  - command: net\n").find("division 'half'"),
            std::string::npos);
}

TEST(Recipe, AScoreSaysWhatRanksAndWhichWayAndDefaultsToWallTime) {
  const Recipe plain = parse_recipe("recipe: x\nentries:\n  - name: a\n    command: net\n");
  EXPECT_FALSE(plain.score.declared);
  EXPECT_EQ(plain.score.quantity, "wall_time");
  EXPECT_TRUE(plain.score.lower_is_better);
  const Recipe r = parse_recipe(
      "recipe: x\nscore: {quantity: test_accuracy.last, better: higher, entry: a}\nentries:\n  - name: a\n"
      "    command: net\n");
  EXPECT_TRUE(r.score.declared);
  EXPECT_EQ(r.score.quantity, "test_accuracy.last");
  EXPECT_FALSE(r.score.lower_is_better);
  EXPECT_EQ(r.score.entry, "a");
  const auto message = [](const std::string& score) {
    try {
      parse_recipe("recipe: x\nscore: " + score + "\nentries:\n  - name: a\n    command: net\n");
    } catch (const FormatError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message("{quantity: latency}").find("'better' must be 'lower' or 'higher'"), std::string::npos);
  EXPECT_NE(message("{quantity: latency, better: faster}").find("'better' must be"), std::string::npos);
  EXPECT_NE(message("{better: lower}").find("'quantity' is missing"), std::string::npos);
  EXPECT_NE(message("{quantity: latency, better: lower, entry: b}").find("no entry is named 'b'"), std::string::npos);
  EXPECT_NE(message("{quantity: 'two words', better: lower}").find("criterion"), std::string::npos);
  EXPECT_NE(message("{quantity: latency, better: lower, weight: 2}").find("unknown key 'weight'"), std::string::npos);
  EXPECT_NE(message("latency").find("expected a map"), std::string::npos);
}

TEST(Recipe, GlobalOptionsGoBeforeTheSubcommandUnlessTheRecipeSetsThem) {
  const Recipe r = parse_recipe(kTraining);
  std::vector<PlannedRun> runs = plan_runs(r, {}, 7);
  const std::vector<std::string> before = runs[0].args;
  add_run_globals(runs, {4, true, "fast"});
  // The recipe sets threads (1) itself: only --deterministic and --math are added, in front.
  std::vector<std::string> expected = {"--deterministic", "--math", "fast"};
  expected.insert(expected.end(), before.begin(), before.end());
  EXPECT_EQ(runs[0].args, expected);
  // And the result file options come off a recorded command line again, whatever their form.
  std::vector<std::string> recorded = expected;
  add_result_file_options(recorded, "out.json");
  recorded.push_back("--output=x.json");
  EXPECT_EQ(without_result_file_options(recorded), expected);
  const std::vector<std::string> scaling = {"scaling", "-o", "a.json", "--", "train", "-o", "kept"};
  EXPECT_EQ(without_result_file_options(scaling), (std::vector<std::string>{"scaling", "--", "train", "-o", "kept"}));
}

}  // namespace
}  // namespace d5
