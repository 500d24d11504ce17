// Integration: `d5 run` executing recipes with the real binary: result files with manifests,
// VALID/INVALID and PASS/FAIL, grids, --set, exit codes; the shipped recipes parse and plan.
#include <gtest/gtest.h>

#include <cstdlib>
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

// Small GEMMs (tests/data/suites) on the reference backend: a run takes a second or two.
const char* kGemmRecipe = R"(
recipe: tiny-gemm
description: small GEMMs
entries:
  - name: gemm
    command: ops bench
    fixed: {suite: tiny-gemm-small, mode: check}
    mutable: {backend: reference, min-time: 0.01, max-time: 0.05}
    grid: {limit: [1, 2]}
    criteria:
      - gflops > 0
      - wall_time < 300
criteria:
  - wall_time < 600
)";

class CliRun : public ::testing::Test {
 protected:
  void SetUp() override { setenv("D5_SUITES_DIR", D5_SOURCE_DIR "/tests/data/suites", 1); }
  void TearDown() override { unsetenv("D5_SUITES_DIR"); }
  std::string recipe(const std::string& text) const {
    const std::string path = dir_.file("recipe.yaml");
    std::ofstream(path) << text;
    return path;
  }
  std::string results() const { return dir_.file("results"); }
  static json load(const std::string& path) {
    std::ifstream in(path);
    return json::parse(in);
  }
  TempDir dir_{"d5-run"};
};

TEST_F(CliRun, RunsAGridWritesResultsWithManifestsAndPasses) {
  const auto r = run_d5({"run", recipe(kGemmRecipe), "--results-dir", results()});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("gemm limit=1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("PASS  gflops > 0"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("PASS  no case FAILED"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("PASS  wall_time < 600"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("tiny-gemm: PASS"), std::string::npos) << r.out;
  // Each run says VALID or INVALID (a loaded machine may miss the CI target in 0.05 s).
  EXPECT_TRUE(r.out.find("VALID") != std::string::npos);

  const json summary = load(results() + "/run.json");
  EXPECT_EQ(summary["schema"], "deep500.results");
  EXPECT_EQ(summary["manifest"]["extra"]["recipe"]["name"], "tiny-gemm");
  EXPECT_EQ(summary["manifest"]["extra"]["recipe"]["division"], "closed");
  EXPECT_EQ(summary["manifest"]["extra"]["run"]["verdict"], "PASS");
  ASSERT_EQ(summary["cases"].size(), 2u);
  for (int i = 0; i < 2; ++i) {
    const json& c = summary["cases"][i];
    EXPECT_EQ(c["state"], "PASSED");
    EXPECT_EQ(c["backend"], "reference");
    EXPECT_EQ(c["params"]["limit"], i + 1);
    EXPECT_EQ(c["extra"]["exit_code"], 0);
    EXPECT_EQ(c["extra"]["criteria"].size(), 3u);
    // The run's own result file, with its manifest and the command that made it.
    const json run = load(results() + "/" + c["extra"]["result_file"].get<std::string>());
    EXPECT_EQ(run["cases"].size(), static_cast<size_t>(i + 1));
    const json& argv = run["manifest"]["command_line"];
    EXPECT_NE(std::find(argv.begin(), argv.end(), "tiny-gemm-small"), argv.end()) << argv.dump();
    EXPECT_EQ(run["manifest"]["seeds"]["master"], 0x5eed);
  }
}

TEST_F(CliRun, AFailedCriterionFailsTheRecipe) {
  std::string text = kGemmRecipe;
  text.replace(text.find("gflops > 0"), 10, "gflops > 1e12");
  const auto r = run_d5({"--seed", "7", "run", recipe(text), "--results-dir", results(), "--set", "limit=1"});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("FAIL  gflops > 1e12"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("tiny-gemm: FAIL"), std::string::npos) << r.out;
  const json summary = load(results() + "/run.json");
  ASSERT_EQ(summary["cases"].size(), 1u);  // --set narrowed the grid to one value
  EXPECT_EQ(summary["cases"][0]["state"], "FAILED");
  EXPECT_EQ(summary["cases"][0]["extra"]["seed"], 7);
  EXPECT_NE(summary["cases"][0]["detail"].get<std::string>().find("FAIL gflops > 1e12"), std::string::npos);
}

TEST_F(CliRun, ARunThatCannotStartIsInvalidAndFails) {
  std::string text = kGemmRecipe;
  text.replace(text.find("tiny-gemm-small"), 15, "no-such-suite");
  const auto r = run_d5({"run", recipe(text), "--results-dir", results(), "--set", "limit=1"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("INVALID: d5 ops bench exited 2 without results"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("unknown suite 'no-such-suite'"), std::string::npos) << r.out;
  EXPECT_TRUE(fs::exists(results() + "/gemm.log"));
}

TEST_F(CliRun, SetRefusesFixedAndUnknownOptions) {
  const auto fixed = run_d5({"run", recipe(kGemmRecipe), "--results-dir", results(), "--set", "suite=x"});
  EXPECT_EQ(fixed.exit_code, 2);
  EXPECT_NE(fixed.err.find("'suite' is fixed"), std::string::npos) << fixed.err;
  const auto unknown = run_d5({"run", recipe(kGemmRecipe), "--set", "limt=3"});
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_NE(unknown.err.find("mutable: backend, limit, max-time, min-time"), std::string::npos) << unknown.err;
  EXPECT_FALSE(fs::exists(results()));
  EXPECT_EQ(run_d5({"run", dir_.file("none.yaml")}).exit_code, 4);
}

TEST_F(CliRun, TwoRecipeRunsCompareRunByRun) {
  const std::string r = recipe(kGemmRecipe);
  for (const char* d : {"/a", "/b"})
    ASSERT_LE(run_d5({"run", r, "--results-dir", results() + d, "--set", "limit=2"}).exit_code, 1);
  // Timings on a shared machine: only ask whether they are within a factor of 6.
  const auto c = run_d5({"compare", results() + "/a/run.json", results() + "/b/run.json", "--tolerance", "5",
                         "--format", "json"});
  EXPECT_EQ(c.exit_code, 0) << c.out << c.err;
  const json j = json::parse(c.out);
  ASSERT_EQ(j["cases"].size(), 2u);  // the two GEMMs of the one run, from the result files beside run.json
  EXPECT_EQ(j["cases"][0]["case"], "gemm: #1 m8n6k5_NN @ reference");
  EXPECT_NE(j["cases"][0]["verdict"], "SLOWER");
}

TEST_F(CliRun, DryRunPrintsEveryCommand) {
  const auto r = run_d5({"--threads", "1", "run", recipe(kGemmRecipe), "--dry-run"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(count_lines(r.out), 2);
  EXPECT_NE(r.out.find("gemm-limit=2: d5 --threads 1 --seed 24301 ops bench --suite tiny-gemm-small --mode check "
                       "--backend reference --min-time 0.01 --max-time 0.05 --limit 2"),
            std::string::npos)
      << r.out;
}

TEST_F(CliRun, ShippedRecipesParseAndPlan) {
  const auto list = run_d5({"run", "--list", "--format", "json"});
  ASSERT_EQ(list.exit_code, 0) << list.err;
  std::vector<std::string> names;
  for (const auto& r : json::parse(list.out)) names.push_back(r["name"]);
  for (const char* n : {"quickstart", "deepbench-gemm", "deepbench-conv", "deepbench-rnn", "mnist-lenet-tta",
                        "cifar10-resnet20", "optimizers-compare", "distributed-schemes"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), n), names.end()) << n;
    const auto plan = run_d5({"run", n, "--dry-run"});
    EXPECT_EQ(plan.exit_code, 0) << n << ": " << plan.err;
    EXPECT_GT(count_lines(plan.out), 0) << n;
  }
}

TEST_F(CliRun, TrainingToATargetOnMnist) {
  if (!fs::exists(kMnist)) GTEST_SKIP() << "no MNIST at " << kMnist;
  const std::string text = R"(
recipe: mnist-small
entries:
  - name: lenet5
    command: train
    fixed: {model: lenet5, optimizer: adam, dataset: mnist, train-split: test, train-range: "0:512",
            test-split: test, test-range: "8000:8200", target-accuracy: 0.5}
    mutable: {data-dir: ")" + kMnist + R"(", batch: 32, lr: 0.003, epochs: 3, sampler: ordered}
    criteria:
      - final_test_accuracy >= 0.5
      - time_to_target reached
)";
  const auto r = run_d5({"run", recipe(text), "--results-dir", results()});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("PASS  time_to_target reached"), std::string::npos) << r.out;
  const json run = load(results() + "/lenet5.json");
  EXPECT_GE(run["cases"][0]["extra"]["final_test_accuracy"].get<double>(), 0.5);
  EXPECT_EQ(run["manifest"]["extra"]["dataset"]["train"]["samples"], 512);
}

}  // namespace

}  // namespace d5::test
