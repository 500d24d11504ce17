// Integration: --deterministic training is bitwise reproducible on every executor, and `d5 rerun`
// reruns result files and recipe runs from their manifests and compares.
#include <gtest/gtest.h>

#include <filesystem>
#include <cmath>
#include <fstream>

#include <nlohmann/json.hpp>

#include "../support/temp_dir.h"
#include "process.h"

namespace d5::test {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const std::string kMnist = D5_SOURCE_DIR "/../shared/data/mnist";

class CliRerun : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(kMnist)) GTEST_SKIP() << "no MNIST at " << kMnist;
  }
  // LeNet-5 on 256 shuffled images for two epochs, tested on 200 others, with d5's default thread
  // count (two here): the reductions must not depend on thread timing.
  std::vector<std::string> train(const std::string& backend, const std::string& out,
                                 const std::vector<std::string>& more = {}) const {
    std::vector<std::string> a = {"--deterministic", "--seed",  "3",          "train",         "--model",
                                  "lenet5",          "--dataset", "mnist",    "--data-dir",    kMnist,
                                  "--train-split",   "test",      "--train-range", "0:256",    "--test-split",
                                  "test",            "--test-range", "8000:8200", "--optimizer", "adam",
                                  "--lr",            "0.003",     "--batch",  "32",            "--epochs",
                                  "2",               "--backend", backend,    "--format",      "json",
                                  "-o",              out};
    a.insert(a.end(), more.begin(), more.end());
    return a;
  }
  static json load(const std::string& path) {
    std::ifstream in(path);
    return json::parse(in);
  }
  static std::string bytes(const std::string& path) { return read_file(path); }
  TempDir dir_{"d5-rerun"};
};

const json& metric(const json& c, const std::string& name) {
  for (const auto& m : c["metrics"])
    if (m["name"] == name) return m;
  static const json none;
  return none;
}

TEST_F(CliRerun, DeterministicTrainingIsBitwiseIdenticalOnEveryExecutor) {
  for (const std::string backend : {"reference", "onednn", "torch"}) {
    SCOPED_TRACE(backend);
    std::vector<json> results;
    std::vector<std::string> models;
    for (int i = 0; i < 2; ++i) {
      const std::string out = dir_.file(backend + "-" + std::to_string(i) + ".json");
      const std::string model = dir_.file(backend + "-" + std::to_string(i) + ".onnx");
      const auto r = run_d5(train(backend, out, {"--save-model", model}));
      if (r.exit_code == kExitNotBuilt) GTEST_SKIP() << backend << " not built: " << r.err;
      ASSERT_EQ(r.exit_code, 0) << r.err;
      results.push_back(load(out));
      models.push_back(model);
    }
    EXPECT_TRUE(results[0]["manifest"]["deterministic"].get<bool>());
    const json &a = results[0]["cases"][0], &b = results[1]["cases"][0];
    // Outputs: every step's loss and every test pass's accuracy, bit for bit (JSON keeps 17 digits).
    EXPECT_EQ(metric(a, "loss")["samples"].size(), 16u);
    EXPECT_EQ(metric(a, "loss")["samples"], metric(b, "loss")["samples"]);
    EXPECT_EQ(metric(a, "test_accuracy")["samples"], metric(b, "test_accuracy")["samples"]);
    // Parameters: the trained models, byte for byte.
    // The runs succeeded with --save-model, so the models must be there.
    ASSERT_TRUE(fs::exists(models[0]) && fs::exists(models[1])) << models[0];
    EXPECT_GT(fs::file_size(models[0]), 100000u);  // LeNet-5 has 61,706 float parameters
    EXPECT_EQ(bytes(models[0]), bytes(models[1]));
  }
}

TEST_F(CliRerun, RerunReproducesAResultFileAndCatchesADifferentOutput) {
  const std::string out = dir_.file("r.json");
  ASSERT_EQ(run_d5(train("reference", out)).exit_code, 0);
  // Step times under a parallel test run moved by 8x once; outputs may not move at all. The timing
  // verdict is tested below, against times made 1000 times longer.
  const auto r = run_d5({"rerun", out, "--outputs-only"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("outputs: 1 of 1 case(s) bitwise identical"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("times: shown, not judged"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(": REPRODUCED"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("taskset"), std::string::npos) << r.out;  // same CPUs: nothing to say
  EXPECT_TRUE(fs::exists(dir_.file("r.rerun.json")));

  // The same rerun against a result whose fourth loss differs in the last place.
  // It also ran bound to a CPU set this rerun does not have: the rerun says how to bind it.
  json tampered = load(out);
  tampered["manifest"]["threads"]["allowed_cpus"] = "4095";
  for (auto& m : tampered["cases"][0]["metrics"])
    if (m["name"] == "loss") m["samples"][3] = std::nextafter(m["samples"][3].get<double>(), 10.0);
  std::ofstream(dir_.file("t.json")) << tampered.dump();
  const auto t = run_d5({"rerun", dir_.file("t.json"), "--outputs-only", "--format", "json"});
  EXPECT_EQ(t.exit_code, 1) << t.out << t.err;
  const json j = json::parse(t.out);
  EXPECT_EQ(j["verdict"], "NOT REPRODUCED");
  EXPECT_FALSE(j["times_judged"].get<bool>());
  ASSERT_EQ(j["outputs"]["differences"].size(), 1u);
  EXPECT_NE(j["outputs"]["differences"][0].get<std::string>().find("loss sample 3"), std::string::npos);
  EXPECT_EQ(j["cpus"]["original"], "4095");
  EXPECT_EQ(j["cpus"]["rerun"], load(dir_.file("t.rerun.json"))["manifest"]["threads"]["allowed_cpus"]);
  const auto text = run_d5({"rerun", dir_.file("t.json"), "--outputs-only"});
  EXPECT_NE(text.out.find("taskset -c 4095 d5 rerun"), std::string::npos) << text.out;
}

// The original with its step times scaled by `factor`.
json with_step_times_scaled(json result, double factor) {
  bool found = false;
  for (auto& m : result["cases"][0]["metrics"])
    if (m["name"] == "step_time") {
      for (auto& x : m["samples"]) x = x.get<double>() * factor;
      found = true;
    }
  EXPECT_TRUE(found) << "no step_time metric";
  return result;
}

// The step_time comparison of a rerun's JSON.
json step_time_case(const json& rerun) {
  for (const auto& c : rerun["comparison"]["cases"])
    if (c["metric"] == "step_time") return c;
  ADD_FAILURE() << "no step_time case in " << rerun.dump();
  return json::object();
}

// Times are judged unless --outputs-only says not to, in both directions: against an original whose
// step times were made 1000 times longer the rerun is FASTER, against one made 1000 times shorter
// it is SLOWER; either is NOT REPRODUCED, beyond any load of a shared machine (step times under
// ctest -j2 moved by 8x at most). The ratio of medians (new / baseline) must sit near 1/1000 and
// 1000: within a factor 30 either way, beyond that load, and still far from 1. With the flag the
// same rerun is REPRODUCED. The rerun repeats the original's global options (--malloc keep).
TEST_F(CliRerun, TimesDecideInBothDirectionsUnlessOutputsOnlyAndGlobalOptionsAreRepeated) {
  const std::string out = dir_.file("m.json");
  std::vector<std::string> args = train("reference", out);
  args.insert(args.begin(), {"--malloc", "keep"});
  ASSERT_EQ(run_d5(args).exit_code, 0);
  const json original = load(out);
  EXPECT_EQ(original["manifest"]["malloc"], "keep");
  struct Direction {
    std::string file;
    double factor;
    std::string verdict;
  };
  for (const Direction& d : {Direction{"slow", 1000.0, "FASTER"}, Direction{"fast", 0.001, "SLOWER"}}) {
    SCOPED_TRACE(d.file);
    std::ofstream(dir_.file(d.file + ".json")) << with_step_times_scaled(original, d.factor).dump();
    const auto judged = run_d5({"rerun", dir_.file(d.file + ".json"), "--format", "json"});
    EXPECT_EQ(judged.exit_code, 1) << judged.out << judged.err;
    const json j = json::parse(judged.out);
    EXPECT_EQ(j["verdict"], "NOT REPRODUCED");
    EXPECT_TRUE(j["times_judged"].get<bool>());
    EXPECT_TRUE(j["outputs"]["differences"].empty()) << "the outputs still agree";
    const json st = step_time_case(j);
    EXPECT_EQ(st["verdict"], d.verdict) << st.dump();
    const double ratio = st["ratio_of_medians"].get<double>();
    EXPECT_GT(ratio, 1 / d.factor / 30) << st.dump();
    EXPECT_LT(ratio, 1 / d.factor * 30) << st.dump();
    EXPECT_EQ(load(dir_.file(d.file + ".rerun.json"))["manifest"]["malloc"], "keep");

    const auto shown = run_d5({"rerun", dir_.file(d.file + ".json"), "--outputs-only", "--format", "json"});
    EXPECT_EQ(shown.exit_code, 0) << shown.out << shown.err;
    EXPECT_EQ(json::parse(shown.out)["verdict"], "REPRODUCED");
  }
}

TEST_F(CliRerun, RerunOfARecipeRunComparesEveryRun) {
  const std::string recipe = dir_.file("recipe.yaml");
  std::ofstream(recipe) << R"(
recipe: tiny-train
entries:
  - name: lenet5
    command: train
    fixed: {model: lenet5, optimizer: sgd, dataset: mnist, train-split: test, train-range: "0:128",
            test-split: test, test-range: "8000:8100"}
    mutable: {data-dir: ")" << kMnist << R"(", batch: 32, epochs: 1}
    grid: {lr: [0.01, 0.05]}
)";
  const std::string results = dir_.file("results");
  ASSERT_EQ(run_d5({"--deterministic", "run", recipe, "--results-dir", results, "--set", "epochs=2"}).exit_code, 0);
  const auto r = run_d5({"rerun", results + "/run.json", "--outputs-only"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("outputs: 2 of 2 case(s) bitwise identical"), std::string::npos) << r.out;
  // The rerun used the recorded overrides and seed: two epochs of 4 steps.
  const json again = load(results + "-rerun/lenet5-lr=0.05.json");
  EXPECT_EQ(again["cases"][0]["extra"]["steps"], 8);
  EXPECT_TRUE(again["manifest"]["deterministic"].get<bool>());
}

}  // namespace

}  // namespace d5::test
