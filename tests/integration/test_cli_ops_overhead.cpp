// `d5 ops overhead` (docs/ops-overhead.md) through the real binary: a results file whose ratios
// are the rounds' d5 / native medians, visible skips, usage errors.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "process.h"

namespace d5::test {

namespace {

using nlohmann::json;

bool built(const std::string& backend) {
  static const json info = json::parse(run_d5({"info", "--format", "json"}).out);
  for (const auto& b : info["backends"])
    if (b["name"] == backend) return true;
  return false;
}

}  // namespace

TEST(CliOpsOverhead, WritesRatiosOfTheRoundsMediansAndSkipsVisibly) {
  if (!built("onednn")) GTEST_SKIP() << "the onednn backend is not built (libdnnl-dev): no native side to compare";
  const auto r = run_d5({"ops", "overhead", "--suite", "deepbench-gemm-training", "--filter", "m1760n16k1760_NN$",
                         "--rounds", "6", "--round-seconds", "0.002", "--min-us", "0", "--backend", "onednn,reference",
                         "--format", "json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  ASSERT_EQ(j["cases"].size(), 2u);  // onednn, reference
  const json& c = j["cases"][0];
  EXPECT_EQ(c["backend"], "onednn");
  EXPECT_EQ(c["state"], "PASSED");
  ASSERT_EQ(c["metrics"][0]["name"], "ratio");
  const auto& ratio = c["metrics"][0]["samples"];
  const auto& d5 = c["metrics"][1]["samples"];
  const auto& native = c["metrics"][2]["samples"];
  ASSERT_EQ(ratio.size(), 6u);
  for (size_t i = 0; i < 6; ++i)
    EXPECT_DOUBLE_EQ(ratio[i].get<double>(), d5[i].get<double>() / native[i].get<double>());
  EXPECT_EQ(c["extra"]["target"], "<= 1.005");
  EXPECT_EQ(c["params"]["suite"], "deepbench-gemm-training");
  const json& ref = j["cases"][1];
  EXPECT_EQ(ref["state"], "SKIPPED");
  EXPECT_NE(ref["detail"].get<std::string>().find("wraps no library"), std::string::npos) << ref["detail"];
  const json& overall = j["manifest"]["extra"]["overall"]["host"];
  EXPECT_EQ(overall["cases"], 1);
  EXPECT_DOUBLE_EQ(overall["median_ratio"].get<double>(), c["metrics"][0]["summary"]["median"].get<double>());
  EXPECT_TRUE(overall["ci_95"].is_null());  // one case: no CI of the median
}

TEST(CliOpsOverhead, RefusesWhatCannotBeMeasured) {
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"ops", "overhead", "--suite", "deepbench-gemm-training", "--rounds", "5"},
           {"ops", "overhead", "--suite", "deepbench-gemm-training", "--filter", "no-such-problem"},
           {"ops", "overhead", "--suite", "deepbench-gemm-training", "--backend", "nonesuch"},
           {"ops", "overhead"}}) {
    const auto r = run_d5(args);
    EXPECT_EQ(r.exit_code, 2) << args.back() << ": " << r.err;
  }
}

}  // namespace d5::test
