// Integration: `d5 rl` — agents learn on every executor built in, results carry each seed's run,
// the distribution over seeds and the success rate; unreached targets and usage errors. The
// PyTorch twins are in test_rl_twins.cpp.
#include <gtest/gtest.h>


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
