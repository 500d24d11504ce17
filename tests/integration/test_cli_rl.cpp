// Integration: `d5 rl` — agents learn on every executor built in, results carry each seed's run,
// the distribution over seeds and the success rate; unreached targets and usage errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <iostream>
#include <sstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "../support/temp_dir.h"
#include "process.h"

namespace d5::test {
namespace {

using nlohmann::json;

TEST(CliRl, AgentsLearnCartPoleOnEveryExecutor) {
  TempDir dir("d5-rl");
  const auto r = run_d5({"rl", "cartpole", "--agent", "a2c,reinforce", "--backend", "reference,torch,onednn", "--seeds",
                         "1,2", "--max-env-steps", "20000", "--target", "return>=60", "--window", "20", "--lr", "0.003",
                         "--format", "json", "-o", dir.file("rl.json")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(read_file(dir.file("rl.json")));
  EXPECT_EQ(j["manifest"]["extra"]["env"], "cartpole");
  int ran = 0;
  for (const auto& c : j["cases"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    if (c["state"] == "SKIPPED") {  // only a backend this build left out
      EXPECT_NE(c["detail"].get<std::string>().find("built without"), std::string::npos) << c["detail"];
      continue;
    }
    ++ran;
    ASSERT_EQ(c["state"], "PASSED") << c["detail"];
    EXPECT_EQ(c["level"], "L2");
    EXPECT_EQ(c["extra"]["success_rate"], 1.0);
    ASSERT_EQ(c["extra"]["runs"].size(), 2u);
    const auto& m = c["metrics"];
    ASSERT_EQ(m[0]["name"], "env_steps_to_target");
    ASSERT_EQ(m[0]["samples"].size(), 2u);
    for (size_t s = 0; s < 2; ++s) {
      const json& run = c["extra"]["runs"][s];
      EXPECT_EQ(run["seed"], s + 1);
      EXPECT_TRUE(run["reached"].get<bool>());
      EXPECT_EQ(run["env_steps_to_target"], m[0]["samples"][s]);
      EXPECT_LE(run["env_steps_to_target"].get<int64_t>(), 20000);
      // The curve's points are [environment steps, seconds, mean return]; its end met the target.
      EXPECT_GE(run["curve"].back()[2].get<double>(), 60.0);
      EXPECT_GE(run["episodes_to_target"].get<int64_t>(), 20);
    }
    // The median over two seeds that both reached the target is their mean.
    const double a = m[0]["samples"][0], b = m[0]["samples"][1];
    EXPECT_DOUBLE_EQ(c["extra"]["env_steps_to_target"].get<double>(), (a + b) / 2);
    EXPECT_EQ(m[1]["name"], "time_to_target");
  }
  EXPECT_GE(ran, 2);  // the reference executor, both agents
}

TEST(CliRl, AnUnreachedTargetIsASuccessRateOfZeroNotATime) {
  TempDir dir("d5-rl");
  const auto r = run_d5({"rl", "acrobot", "--agent", "dqn", "--max-env-steps", "1500", "--learning-starts", "500",
                         "--format", "json", "-o", dir.file("rl.json")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json c = json::parse(read_file(dir.file("rl.json")))["cases"][0];
  EXPECT_EQ(c["name"], "rl/acrobot/dqn/reference");
  EXPECT_EQ(c["extra"]["success_rate"], 0.0);
  EXPECT_TRUE(c["extra"]["time_to_target"].is_null());
  EXPECT_FALSE(c["extra"]["runs"][0]["reached"].get<bool>());
  EXPECT_NE(c["extra"]["runs"][0]["stop_reason"].get<std::string>().find("max_env_steps 1500 reached before return>=-100"),
            std::string::npos);
  for (const auto& m : c["metrics"]) EXPECT_NE(m["name"], "env_steps_to_target");
}

// A twin: the same agent in PyTorch on CartPole transcribed from Gym (tests/rl/twin_*.py), the same
// seeds, hyperparameters and budget. Both must reach the target on every seed; the steps they need
// differ by their random streams, not by a factor the seeds' spread cannot explain.
void expect_twin_agrees(const std::string& script, const std::vector<std::string>& shared,
                        const std::vector<std::string>& d5_only, const std::string& target) {
  const std::string python = D5_TWIN_PYTHON;
  if (run_process(python, {"-c", "import numpy, torch"}).exit_code != 0)
    GTEST_SKIP() << "the twin needs NumPy and PyTorch for " << python << " (Debian: python3-numpy, python3-torch)";
  std::vector<std::string> twin_args = {D5_SOURCE_DIR "/tests/rl/" + script, "--target", target};
  twin_args.insert(twin_args.end(), shared.begin(), shared.end());
  const auto twin = run_process(python, twin_args);
  ASSERT_EQ(twin.exit_code, 0) << twin.err;
  TempDir dir("d5-rl");
  std::vector<std::string> args = {"rl", "cartpole", "--target", "return>=" + target, "--format", "json", "-o",
                                   dir.file("rl.json")};
  args.insert(args.end(), shared.begin(), shared.end());
  args.insert(args.end(), d5_only.begin(), d5_only.end());
  const auto r = run_d5(args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json c = json::parse(read_file(dir.file("rl.json")))["cases"][0];
  std::vector<double> twin_steps, d5_steps;
  std::istringstream lines(twin.out);
  for (std::string line; std::getline(lines, line);) {
    const json t = json::parse(line);
    ASSERT_FALSE(t["env_steps_to_target"].is_null()) << "the twin did not reach " << target << " on seed " << t["seed"];
    twin_steps.push_back(t["env_steps_to_target"].get<double>());
  }
  for (const auto& run : c["extra"]["runs"]) {
    ASSERT_TRUE(run["reached"].get<bool>()) << "d5 did not reach the target on seed " << run["seed"] << ": "
                                            << run["stop_reason"];
    d5_steps.push_back(run["env_steps_to_target"].get<double>());
  }
  ASSERT_EQ(twin_steps.size(), d5_steps.size());
  ASSERT_FALSE(d5_steps.empty());
  std::sort(twin_steps.begin(), twin_steps.end());
  std::sort(d5_steps.begin(), d5_steps.end());
  std::cout << script << ": environment steps to " << target << ", d5:";
  for (double v : d5_steps) std::cout << " " << v;
  std::cout << "; PyTorch twin:";
  for (double v : twin_steps) std::cout << " " << v;
  std::cout << "\n";
  const size_t mid = d5_steps.size() / 2;
  EXPECT_LT(d5_steps[mid], 3 * twin_steps[mid]);
  EXPECT_LT(twin_steps[mid], 3 * d5_steps[mid]);
}

TEST(CliRl, A2cReachesTheTargetItsPyTorchTwinReaches) {
  expect_twin_agrees("twin_a2c_cartpole.py", {"--seeds", "1,2,3", "--lr", "0.003", "--max-env-steps", "300000"},
                     {"--agent", "a2c"}, "475");
}

// DQN with the rl recipe's settings, to the recipe's target (CartPole-v0's 195): neither d5 nor the
// twin holds 475 over 100 episodes with them (docs/rl.md#measured).
TEST(CliRl, DqnReachesTheTargetItsPyTorchTwinReaches) {
  expect_twin_agrees("twin_dqn_cartpole.py",
                     {"--seeds", "1,2,3", "--lr", "0.001", "--hidden", "128", "--target-every", "1000",
                      "--epsilon-fraction", "0.1", "--max-env-steps", "150000"},
                     {"--agent", "dqn"}, "195");
}

TEST(CliRl, ListsAndUsageErrors) {
  auto r = run_d5({"rl", "list"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* name : {"cartpole", "acrobot", "reinforce", "a2c", "dqn"})
    EXPECT_NE(r.out.find(name), std::string::npos) << name;
  r = run_d5({"rl", "pong"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("unknown environment 'pong' (known: cartpole, acrobot)"), std::string::npos) << r.err;
  r = run_d5({"rl", "cartpole", "--target", "accuracy>=0.9"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("write e.g. \"return>=475\""), std::string::npos) << r.err;
  r = run_d5({"rl", "cartpole", "--agent", "ppo", "--max-env-steps", "10"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("unknown agent 'ppo' (known: reinforce, a2c, dqn)"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace d5::test
