// Integration tests of `d5 divergence`: the real binary on the zoo's MLP.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "process.h"

namespace d5::test {

TEST(CliDivergence, AnOptimizerAgainstItselfDoesNotDiverge) {
  const auto r = run_d5({"divergence", "--model", "mlp", "--optimizer", "adam", "--twin", "adam", "--steps", "3",
                         "--batch", "4", "--schedule", "warmup:2:0.5", "--format", "json"});
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  const auto results = nlohmann::json::parse(r.out);
  ASSERT_EQ(results["cases"].size(), 1u);
  EXPECT_EQ(results["cases"][0]["name"], "adam vs adam");
  EXPECT_EQ(results["cases"][0]["state"], "PASSED");
  EXPECT_TRUE(results["manifest"].contains("git_revision"));
  const auto& j = results["cases"][0]["extra"];
  EXPECT_EQ(j["linf_max"], 0.0);
  EXPECT_EQ(j["l2_final"], 0.0);
  EXPECT_EQ(j["optimizer"], "adam");
  EXPECT_EQ(j["parameters"], 535818);
  EXPECT_EQ(j["schedule"], "linear warm-up from x0.5 over 2 steps");
  ASSERT_EQ(j["steps"].size(), 3u);
  for (const auto& s : j["steps"]) {
    EXPECT_EQ(s["l2"].get<double>(), 0) << s;
    EXPECT_EQ(s["loss_a"], s["loss_b"]);
  }
  // Training on random data still moves the loss: the steps really ran.
  EXPECT_NE(j["steps"][0]["loss_a"], j["steps"][2]["loss_a"]);
}

TEST(CliDivergence, ReferenceAdamStaysCloseToTorchAdam) {
  const auto dir = std::filesystem::temp_directory_path() / "d5_test_cli_divergence";
  std::filesystem::create_directories(dir);
  const auto file = (dir / "adam.json").string();
  const auto r = run_d5({"divergence", "--model", "mlp", "--optimizer", "adam", "--steps", "3", "--batch", "4",
                         "--lr", "0.01", "--per-param", "--format", "json", "-o", file});
  if (r.exit_code == kExitNotBuilt) GTEST_SKIP() << "this build has no torch backend: " << r.err;
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  std::ifstream in(file);
  const auto results = nlohmann::json::parse(in);
  const auto& j = results["cases"][0]["extra"];
  EXPECT_EQ(j["twin"], "torch-adam");
  EXPECT_EQ(j["hyperparameters"]["lr"], 0.01);
  ASSERT_EQ(j["steps"].size(), 3u);
  // One Adam step moves each weight by about lr; the two implementations agree to float rounding.
  EXPECT_LE(j["steps"][0]["linf"].get<double>(), 1e-6);
  EXPECT_EQ(j["steps"][0]["params"].size(), 6u);  // fc1..fc3 weight and bias
  for (const auto& s : j["steps"]) EXPECT_NEAR(s["loss_a"].get<double>(), s["loss_b"].get<double>(), 1e-4);
  // The norms criteria read are the steps' own: the largest and the last.
  double linf_max = 0;
  for (const auto& s : j["steps"]) linf_max = std::max(linf_max, s["linf"].get<double>());
  EXPECT_EQ(j["linf_max"], linf_max);
  EXPECT_EQ(j["linf_final"], j["steps"][2]["linf"]);
  EXPECT_EQ(j["l2_final"], j["steps"][2]["l2"]);
}

TEST(CliDivergence, BadInputIsAUsageError) {
  EXPECT_EQ(run_d5({"divergence", "--model", "mlp", "--optimizer", "no-such", "--twin", "adam"}).exit_code, 2);
  const auto r = run_d5({"divergence", "--model", "mlp", "--optimizer", "adam", "--twin", "adam", "--hyper",
                         "momentum=0.9"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("beta1"), std::string::npos) << r.err;
  EXPECT_EQ(run_d5({"divergence", "--model", "no-such-model"}).exit_code, 2);
  EXPECT_EQ(run_d5({"divergence", "--model", "mlp", "--twin", "adam", "--schedule", "linear:3"}).exit_code, 2);
  EXPECT_EQ(run_d5({"divergence", "--model", "mlp", "--optimizer", "accelegrad"}).exit_code, 2);
}

}  // namespace d5::test
