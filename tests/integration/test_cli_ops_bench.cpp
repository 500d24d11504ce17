// Integration: `d5 ops bench` and `d5 peak`, the real binary on real suites with small limits.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "process.h"

namespace d5::test {

namespace {

using nlohmann::json;

const json* metric(const json& c, const std::string& name) {
  for (const auto& m : c["metrics"])
    if (m["name"] == name) return &m;
  return nullptr;
}

// Points the child's $D5_SUITES_DIR at the test suites for the life of the object.
struct TinySuites {
  TinySuites() { setenv("D5_SUITES_DIR", D5_SOURCE_DIR "/tests/data/suites", 1); }
  ~TinySuites() { unsetenv("D5_SUITES_DIR"); }
};

void expect_measured_and_passed(const json& c) {
  EXPECT_EQ(c["state"], "PASSED") << c.dump(2);
  EXPECT_EQ(c["level"], "L0");
  ASSERT_TRUE(c.contains("outcome"));
  EXPECT_GE(c["outcome"]["runs"].get<int>(), 6);
  const json* wall = metric(c, "wall_time");
  ASSERT_NE(wall, nullptr);
  EXPECT_TRUE(wall->at("summary")["median_ci"]["available"].get<bool>());
  EXPECT_GT(wall->at("summary")["median"].get<double>(), 0);
  const json* gflops = metric(c, "gflops");
  ASSERT_NE(gflops, nullptr) << c.dump(2);
  EXPECT_GT(gflops->at("summary")["median"].get<double>(), 0);
  EXPECT_TRUE(gflops->at("summary")["median_ci"]["available"].get<bool>());
  // Microsecond runs may repeat the same clock reading, so the bounds may coincide.
  EXPECT_LE(gflops->at("summary")["median_ci"]["lower"].get<double>(),
            gflops->at("summary")["median_ci"]["upper"].get<double>());
  for (const char* name : {"cpu_time", "cpu_utilization", "peak_fraction", "gbps"})
    EXPECT_NE(metric(c, name), nullptr) << name;
}

}  // namespace

TEST(CliOpsBench, DeepBenchGemmOnTheReferenceChecksAndTimes) {
  const auto path = (std::filesystem::temp_directory_path() / "d5-ops-bench-test.json").string();
  std::filesystem::remove(path);
  const auto r = run_d5({"ops", "bench", "--suite", "deepbench-gemm-training", "--backend", "reference", "--limit",
                         "2", "--mode", "check", "--min-time", "0.01", "--max-time", "0.05", "--format", "json",
                         "-o", path});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(read_file(path));
  std::filesystem::remove(path);
  EXPECT_EQ(j["schema"], "deep500.results");
  ASSERT_EQ(j["cases"].size(), 2u);
  // The first two rows of DeepBench's training list: 1760 x {16, 32} x 1760.
  EXPECT_EQ(j["cases"][0]["name"], "#1 m1760n16k1760_NN");
  EXPECT_EQ(j["cases"][1]["params"]["n"], 32);
  EXPECT_EQ(j["cases"][0]["params"]["k"], 1760);
  EXPECT_DOUBLE_EQ(j["cases"][0]["extra"]["flops"].get<double>(), 2.0 * 1760 * 16 * 1760);
  for (const auto& c : j["cases"]) {
    EXPECT_EQ(c["backend"], "reference");
    expect_measured_and_passed(c);
  }
  const json& extra = j["manifest"]["extra"];
  EXPECT_EQ(extra["suite"]["name"], "deepbench-gemm-training");
  EXPECT_EQ(extra["suite"]["rows"], 160);
  EXPECT_EQ(extra["mode"], "check");
  EXPECT_GT(extra["peak"]["fma_gflops"]["median"].get<double>(), 0);
  // Only the figure the fractions divide by: the triad would cost seconds per invocation for nothing.
  EXPECT_FALSE(extra["peak"].contains("triad_gbps"));
  EXPECT_EQ(extra["peak"]["isa"], extra["peak"]["fma_gflops"]["isa"]);
  EXPECT_TRUE(extra["peak"]["fma_gflops"]["ci_95"].is_array());
}

TEST(CliOpsBench, GradModeOnATinySuite) {
  TinySuites dir;
  const auto r = run_d5({"ops", "bench", "--suite", "tiny-rnn-small", "--backend", "reference", "--mode", "grad",
                         "--filter", "lstm|gru", "--min-time", "0.001", "--max-time", "0.02", "--format", "json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  ASSERT_EQ(j["cases"].size(), 2u);  // 2 rows match the filter
  for (const auto& c : j["cases"]) {
    expect_measured_and_passed(c);
    EXPECT_EQ(c["extra"]["measured"], "backward");
  }
  EXPECT_EQ(j["cases"][0]["params"]["type"], "lstm");
}

// A misspelt backend ends the run as a usage error before anything runs, never as SKIPPED cases
// that a comparison would silently lack.
TEST(CliOpsBench, AnUnknownBackendIsAUsageError) {
  TinySuites dir;
  const auto r = run_d5({"ops", "bench", "--suite", "tiny-rnn-small", "--backend", "reference,nonesuch",
                         "--min-time", "0.001", "--max-time", "0.02", "--format", "json"});
  EXPECT_EQ(r.exit_code, kExitUsage) << r.err;
  EXPECT_NE(r.err.find("no backend 'nonesuch'"), std::string::npos) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
}

TEST(CliOpsBench, ConsoleShowsStatesAndRates) {
  TinySuites dir;
  const auto r = run_d5({"ops", "bench", "--suite", "tiny-rnn-small", "--backend", "reference", "--limit", "1",
                         "--min-time", "0.001", "--max-time", "0.02", "--max-memory", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("#1 vanilla_h4mb2t3"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("SKIPPED"), std::string::npos) << r.out;  // 1 byte of budget
  EXPECT_NE(r.out.find("--max-memory"), std::string::npos) << r.out;
}

TEST(CliOpsBench, UnknownSuiteExitsWithUsageAndListsTheSuites) {
  const auto r = run_d5({"ops", "bench", "--suite", "deepbench-nope"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(count_lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("unknown suite 'deepbench-nope'"), std::string::npos) << r.err;
  for (const char* s : {"deepbench-gemm-training", "deepbench-conv-inference-device", "deepbench-rnn-inference-server"})
    EXPECT_NE(r.err.find(s), std::string::npos) << s;
  EXPECT_TRUE(r.out.empty());
}

TEST(CliOpsBench, BadOptionsAreUsageErrors) {
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"ops", "bench"},
           {"ops", "bench", "--suite", "deepbench-gemm-training", "--filter", "(["},
           {"ops", "bench", "--suite", "deepbench-gemm-training", "--mode", "fast"},
           {"ops", "bench", "--suite", "deepbench-gemm-training", "--min-time", "0"}}) {
    const auto r = run_d5(args);
    EXPECT_EQ(r.exit_code, 2) << args.back() << ": " << r.err;
    EXPECT_EQ(count_lines(r.err), 1) << r.err;
  }
  // Anchored on the bare GEMM name, this filter selects nothing (names start with the row number):
  // refused, showing a name, rather than a run that checked nothing and passed.
  const auto r = run_d5({"ops", "bench", "--suite", "deepbench-gemm-training", "--filter", "^m1760n16k1760_NN$"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("no problem of suite deepbench-gemm-training matches --filter '^m1760n16k1760_NN$' (its names "
                       "look like '#1 m1760n16k1760_NN')"),
            std::string::npos)
      << r.err;
}

TEST(CliOpsBench, ListSuites) {
  const auto r = run_d5({"ops", "bench", "--list-suites", "--format", "json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  ASSERT_EQ(j.size(), 9u);
  EXPECT_EQ(j[0]["name"], "deepbench-conv-inference-device");
  EXPECT_EQ(j[0]["rows"], 16);
}

TEST(CliPeak, PrintsFmaRateAndBandwidthWithCis) {
  const auto r = run_d5({"--threads", "1", "peak", "--format", "json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  ASSERT_EQ(j["cases"].size(), 3u);
  EXPECT_EQ(j["cases"][0]["name"], "fma_all_threads");
  EXPECT_EQ(j["cases"][2]["metrics"][0]["unit"], "GB/s");
  for (const auto& c : j["cases"]) {
    EXPECT_GT(c["metrics"][0]["summary"]["median"].get<double>(), 0);
    EXPECT_TRUE(c["metrics"][0]["summary"]["median_ci"]["available"].get<bool>());
  }
  EXPECT_EQ(j["manifest"]["extra"]["peak"]["fma_gflops"]["threads"], 1);
  const auto bad = run_d5({"peak", "--isa", "avx9000"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("not usable on this CPU"), std::string::npos) << bad.err;
}

}  // namespace d5::test
