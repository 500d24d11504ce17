// Integration: `d5 serve-bench` on LeNet-5 with every executor built in: each scenario VALID with
// the query counts its rule asks for, results with raw samples, usage errors with their code.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "../support/temp_dir.h"
#include "process.h"

namespace d5::test {
namespace {

using nlohmann::json;

TEST(CliServeBench, BothScenariosOnEveryExecutorAreValid) {
  TempDir dir("d5-serve");
  const auto r = run_d5({"serve-bench", "lenet5", "--min-duration", "0.2", "--offline-batch", "16", "--format", "json",
                         "-o", dir.file("s.json")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(read_file(dir.file("s.json")));
  int single = 0, offline = 0;
  for (const auto& c : j["cases"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    EXPECT_EQ(c["state"], "PASSED");
    EXPECT_EQ(c["outcome"]["validity"], "VALID") << c["outcome"]["reason"];
    EXPECT_GE(c["extra"]["duration_s"].get<double>(), 0.2);
    if (c["extra"]["scenario"] == "single-stream") {
      ++single;
      EXPECT_EQ(c["params"]["batch"], 1);
      EXPECT_GE(c["extra"]["queries"].get<int64_t>(), 44);  // what the p90 bound at 99% needs
      EXPECT_TRUE(c["extra"]["latency_bound"]["available"].get<bool>());
      EXPECT_EQ(c["metrics"][0]["name"], "latency");
      EXPECT_EQ(c["metrics"][0]["samples"].size(), c["extra"]["queries"].get<size_t>());
      // The bound is a sample at or above the median.
      EXPECT_GE(c["extra"]["latency_bound"]["value_s"].get<double>(), c["metrics"][0]["summary"]["median"].get<double>());
    } else {
      ++offline;
      EXPECT_EQ(c["params"]["batch"], 16);
      EXPECT_GE(c["extra"]["samples"].get<int64_t>(), 1024);
      EXPECT_EQ(c["metrics"][0]["name"], "throughput");
    }
  }
  EXPECT_EQ(single, offline);
  EXPECT_GE(single, 1);
}

TEST(CliServeBench, MultiStreamQueriesCarryOneSamplePerStreamAndBoundTheP99) {
  TempDir dir("d5-serve");
  const auto r = run_d5({"serve-bench", "lenet5", "--backend", "reference", "--scenario", "multi-stream", "--streams",
                         "4", "--min-duration", "0.1", "--format", "json", "-o", dir.file("m.json")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json c = json::parse(read_file(dir.file("m.json")))["cases"][0];
  EXPECT_EQ(c["name"], "lenet5/reference/multi-stream");
  EXPECT_EQ(c["outcome"]["validity"], "VALID") << c["outcome"]["reason"];
  EXPECT_EQ(c["params"]["batch"], 4);
  EXPECT_EQ(c["params"]["percentile"], 0.99);
  EXPECT_GE(c["extra"]["queries"].get<int64_t>(), 459);
  EXPECT_EQ(c["extra"]["samples"].get<int64_t>(), 4 * c["extra"]["queries"].get<int64_t>());
}

TEST(CliServeBench, TheServerScenarioMeetsAGenerousBoundAndSearchesARate) {
  TempDir dir("d5-serve");
  auto r = run_d5({"serve-bench", "lenet5", "--backend", "reference", "--scenario", "server", "--target-qps", "500",
                   "--latency-bound", "1", "--min-duration", "0.2", "--format", "json", "-o", dir.file("s.json")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json c = json::parse(read_file(dir.file("s.json")))["cases"][0];
  EXPECT_EQ(c["outcome"]["validity"], "VALID") << c["outcome"]["reason"];
  EXPECT_GE(c["extra"]["queries"].get<int64_t>(), 459);  // what a p99 bound at 99% needs
  EXPECT_TRUE(c["extra"]["latency_bound"]["met"].get<bool>());
  EXPECT_LE(c["extra"]["latency_bound"]["value_s"].get<double>(), 1.0);
  r = run_d5({"serve-bench", "lenet5", "--backend", "reference", "--scenario", "server", "--search-qps",
              "--search-steps", "3", "--latency-bound", "1", "--min-duration", "0.1", "--format", "json", "-o",
              dir.file("search.json")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  c = json::parse(read_file(dir.file("search.json")))["cases"][0];
  ASSERT_EQ(c["extra"]["search"]["runs"].size(), 3u);
  EXPECT_GT(c["extra"]["search"]["best_qps"].get<double>(), 0);
  EXPECT_EQ(c["extra"]["target_qps"], c["extra"]["search"]["best_qps"]);

  // Two searches: every search's best rate kept, the median theirs, no CI from two.
  r = run_d5({"serve-bench", "lenet5", "--backend", "reference", "--scenario", "server", "--search-qps",
              "--search-steps", "2", "--search-repeats", "2", "--latency-bound", "1", "--min-duration", "0.1",
              "--format", "json", "-o", dir.file("repeats.json")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  c = json::parse(read_file(dir.file("repeats.json")))["cases"][0];
  const json& s = c["extra"]["search"];
  ASSERT_EQ(s["best_qps_per_search"].size(), 2u);
  const double a = s["best_qps_per_search"][0].get<double>(), b = s["best_qps_per_search"][1].get<double>();
  EXPECT_DOUBLE_EQ(s["best_qps_median"].get<double>(), (a + b) / 2);
  EXPECT_TRUE(s["best_qps_ci"].is_null());
  EXPECT_TRUE(s["best_qps"] == a || s["best_qps"] == b);  // the reported search is one of the two
}

TEST(CliServeBench, UsageErrorsSayWhatToFix) {
  auto r = run_d5({"serve-bench", "lenet5", "--scenario", "interactive"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("no inference scenario 'interactive' (scenarios: single-stream, multi-stream, offline, server)"),
            std::string::npos)
      << r.err;
  r = run_d5({"serve-bench", "lenet5", "--backend", "reference", "--scenario", "server"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("needs a target rate (--target-qps)"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace d5::test
