// Integration: `d5 tune` with the real binary on a small MNIST recipe: every evaluation's result
// file kept and agreeing with tune.json, the best configuration the best of what ran, the tuned
// recipe readable and carrying it, the cost's arithmetic; usage errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "../support/temp_dir.h"
#include "process.h"

namespace d5::test {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const std::string kMnist = D5_SOURCE_DIR "/../shared/data/mnist";

std::string tiny_recipe(const TempDir& dir) {
  const std::string path = dir.file("tiny.yaml");
  std::ofstream(path) << R"(
recipe: mnist-tune
entries:
  - name: lenet5
    command: train
    fixed: {model: lenet5, optimizer: adam, dataset: mnist, train-split: test, train-range: "0:512",
            test-split: test, test-range: "8000:8200", target-accuracy: 0.75}
    mutable: {data-dir: ")" + kMnist + R"(", batch: 64, lr: 0.001, epochs: 4, sampler: ordered}
    search:
      lr: log:0.0005:0.01
      batch: [16, 32, 64]
)";
  return path;
}

json load(const std::string& path) {
  std::ifstream in(path);
  return json::parse(in);
}

TEST(CliTune, SuccessiveHalvingOnMnistKeepsEveryTrialAndWritesTheBestBack) {
  if (!fs::exists(kMnist)) GTEST_SKIP() << "no MNIST at " << kMnist;
  TempDir dir("d5-tune");
  const std::string results = dir.file("search");
  const auto r = run_d5({"--threads", "1", "tune", tiny_recipe(dir), "--budget", "6", "--results-dir", results,
                         "--price-per-node-hour", "2"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const json tune = load(results + "/tune.json");
  const json& summary = tune["manifest"]["extra"]["tune"];
  EXPECT_EQ(summary["rungs"], json::array({1.0, 4.0}));  // 1 epoch, then the recipe's 4 (log_3 4 = 1.26: one step)
  EXPECT_EQ(summary["trials_drawn"], 6);
  EXPECT_EQ(summary["space"]["lr"], "log:0.0005:0.01");
  const json& cases = tune["cases"];
  ASSERT_GE(cases.size(), 7u);  // the baseline and six configurations, some promoted
  EXPECT_EQ(cases[0]["name"], "baseline-r1");
  EXPECT_EQ(cases[0]["params"], json({{"lr", 0.001}, {"batch", 64}}));
  double best = INFINITY, process_s = 0;
  std::string best_name;
  for (const auto& c : cases) {
    SCOPED_TRACE(c["name"].get<std::string>());
    // Each evaluation's own result file is there and says what tune.json says of it.
    const json run = load(results + "/trials/" + c["extra"]["result_file"].get<std::string>());
    const json& train = run["cases"][0];
    const json& args = c["extra"]["args"];
    EXPECT_NE(std::find(args.begin(), args.end(), c["params"]["lr"].dump()), args.end()) << args;
    EXPECT_LE(train["extra"]["epochs_completed"].get<double>(), c["extra"]["resource"].get<double>());
    process_s += c["extra"]["wall_s"].get<double>();
    if (train["extra"]["reached_target"].get<bool>()) {
      EXPECT_EQ(c["extra"]["tier"], 0);
      EXPECT_EQ(c["extra"]["objective"], train["extra"]["time_to_target"]["training_time_s"]);
      if (c["extra"]["objective"].get<double>() < best) {
        best = c["extra"]["objective"].get<double>();
        best_name = c["name"];
      }
    } else {
      EXPECT_EQ(c["extra"]["tier"], 1);
      EXPECT_EQ(c["extra"]["final_test_accuracy"], train["extra"]["final_test_accuracy"]);
    }
  }
  ASSERT_LT(best, INFINITY) << "no evaluation reached 75% test accuracy";
  EXPECT_EQ(summary["best"]["evaluation"], best_name);
  EXPECT_EQ(summary["best"]["objective"], best);
  const json& cost = summary["cost"];
  EXPECT_NEAR(cost["node_hours"].get<double>(), cost["wall_s"].get<double>() / 3600, 1e-12);
  EXPECT_NEAR(cost["price"].get<double>(), 2 * cost["node_hours"].get<double>(), 1e-12);
  EXPECT_NEAR(cost["trial_process_s"].get<double>(), process_s, 1e-6);
  EXPECT_LE(process_s, cost["wall_s"].get<double>());  // one slot: trials one after another
  EXPECT_NE(r.out.find("search cost:"), std::string::npos) << r.out;
  if (best_name.rfind("baseline", 0) == 0) {
    EXPECT_FALSE(fs::exists(results + "/tuned.yaml"));
    return;
  }
  // The tuned recipe plans runs with the best configuration's values.
  const auto plan = run_d5({"run", results + "/tuned.yaml", "--dry-run"});
  ASSERT_EQ(plan.exit_code, 0) << plan.err;
  const json& config = summary["best"]["config"];
  EXPECT_NE(plan.out.find("--lr " + config["lr"].dump()), std::string::npos) << plan.out;
  EXPECT_NE(plan.out.find("--batch " + config["batch"].dump()), std::string::npos) << plan.out;
  EXPECT_NE(plan.out.find("--epochs 4"), std::string::npos) << plan.out;
}

// Random search maximizing a quantity: each case's objective is its run's value, the best the
// largest. Then --confirm-seeds with a time-to-target search: two seeds per side, whose samples are
// the seeds' own times; two against two never reach p < 0.05 (exact minimum 1/3, normal
// approximation at least 0.22), so the verdict is NOT SIGNIFICANT whatever the times.
TEST(CliTune, RandomSearchMaximizesAQuantityAndConfirmationComparesSeeds) {
  if (!fs::exists(kMnist)) GTEST_SKIP() << "no MNIST at " << kMnist;
  TempDir dir("d5-tune");
  const std::string recipe = tiny_recipe(dir);
  const auto r = run_d5({"--threads", "1", "tune", recipe, "--budget", "2", "--method", "random", "--objective",
                         "final_test_accuracy", "--maximize", "--no-baseline", "--results-dir", dir.file("max")});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const json tune = load(dir.file("max") + "/tune.json");
  double most = -1;
  ASSERT_EQ(tune["cases"].size(), 2u);
  for (const auto& c : tune["cases"]) {
    const json run = load(dir.file("max") + "/trials/" + c["extra"]["result_file"].get<std::string>());
    EXPECT_EQ(c["extra"]["resource"], 4.0);  // random search: the full resource
    EXPECT_EQ(c["extra"]["objective"], run["cases"][0]["extra"]["final_test_accuracy"]);
    most = std::max(most, c["extra"]["objective"].get<double>());
  }
  EXPECT_EQ(tune["manifest"]["extra"]["tune"]["best"]["objective"], most);

  const auto c = run_d5({"--threads", "1", "tune", recipe, "--budget", "3", "--method", "random", "--confirm-seeds",
                         "2", "--results-dir", dir.file("confirm")});
  ASSERT_EQ(c.exit_code, 0) << c.out << c.err;
  const json summary = load(dir.file("confirm") + "/tune.json")["manifest"]["extra"]["tune"];
  ASSERT_TRUE(summary.contains("confirmation")) << summary.dump();
  const json& k = summary["confirmation"];
  for (const char* side : {"shipped", "tuned"}) {
    SCOPED_TRACE(side);
    EXPECT_EQ(k[side]["seeds"], 2);
    EXPECT_EQ(k[side]["reached"].get<size_t>(), k[side]["samples"].size());
    // Each sample is a seed's own training time to the target, from its result file.
    std::vector<double> times;
    for (const auto& f : fs::directory_iterator(k[side]["results_dir"].get<std::string>())) {
      if (f.path().extension() != ".json" || f.path().filename() == "run.json" ||
          f.path().filename() == "solutions.json")
        continue;
      const json run = load(f.path().string());
      const json& x = run["cases"][0]["extra"];
      if (x["reached_target"].get<bool>()) times.push_back(x["time_to_target"]["training_time_s"].get<double>());
    }
    std::vector<double> samples = k[side]["samples"].get<std::vector<double>>();
    std::sort(times.begin(), times.end());
    std::sort(samples.begin(), samples.end());
    EXPECT_EQ(samples, times);
  }
  EXPECT_EQ(k["verdict"], "NOT SIGNIFICANT");
  if (k["tuned"]["reached"] == 2 && k["shipped"]["reached"] == 0) {
    // Complete separation against two tied "never" samples: the normal approximation with tie and
    // continuity correction, by hand: sigma^2 = 2*2/12 * (5 - (2^3 - 2)/(4*3)) = 1.5,
    // z = (|0 - 2| - 0.5) / sqrt(1.5) = 1.2247, p = 2 (1 - Phi(z)) = 0.22067.
    EXPECT_NEAR(k["mann_whitney_p"].get<double>(), 0.22067, 5e-5);
  }
}

TEST(CliTune, UsageErrorsSayWhatToFix) {
  TempDir dir("d5-tune");
  const std::string recipe = tiny_recipe(dir);
  const auto fixed = run_d5({"tune", recipe, "--budget", "2", "--space", "model=choice:lenet5", "--results-dir",
                             dir.file("a")});
  EXPECT_EQ(fixed.exit_code, 2);
  EXPECT_NE(fixed.err.find("'model' is fixed"), std::string::npos) << fixed.err;
  const auto budget = run_d5({"tune", recipe, "--budget", "5 minutes", "--results-dir", dir.file("b")});
  EXPECT_EQ(budget.exit_code, 2);
  EXPECT_NE(budget.err.find("90s, 15m, 2h"), std::string::npos) << budget.err;
  const auto maximize = run_d5({"tune", recipe, "--budget", "2", "--maximize", "--results-dir", dir.file("c")});
  EXPECT_EQ(maximize.exit_code, 2);
  EXPECT_NE(maximize.err.find("time_to_target is minimized"), std::string::npos) << maximize.err;
  const auto resource = run_d5({"tune", recipe, "--budget", "2", "--space", "epochs=int:1:3", "--results-dir",
                                dir.file("d")});
  EXPECT_EQ(resource.exit_code, 2);
  EXPECT_NE(resource.err.find("is the resource"), std::string::npos) << resource.err;
}

}  // namespace

}  // namespace d5::test
