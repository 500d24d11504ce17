// Integration: `d5 compare` on result files with known samples: verdicts, exit codes as a CI gate.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include <nlohmann/json.hpp>

#include "../support/spread_samples.h"
#include "../support/temp_dir.h"
#include "process.h"

namespace d5::test {

namespace {

using nlohmann::json;

json timed_case(const std::string& name, const std::string& backend, const std::vector<double>& s) {
  return {{"name", name},     {"level", "L0"},  {"backend", backend},
          {"params", json::object()}, {"state", "PASSED"}, {"detail", ""},
          {"metrics", {{{"name", "wall_time"}, {"unit", "s"}, {"available", true}, {"samples", s}}}}};
}

std::string write(const TempDir& dir, const std::string& name, const json& cases) {
  const std::string path = dir.file(name);
  std::ofstream(path) << json{{"schema", "deep500.results"}, {"schema_version", 1}, {"manifest", json::object()},
                              {"cases", cases}}
                             .dump();
  return path;
}

class CliCompare : public ::testing::Test {
 protected:
  TempDir dir_{"d5-compare"};
};

TEST_F(CliCompare, ASlowerCaseFailsTheGate) {
  const auto a = write(dir_, "a.json",
                      {timed_case("gemm", "onednn", spread_samples(1e-3, 20, 0)), timed_case("conv", "onednn", spread_samples(2e-3, 20, 0)),
                       timed_case("rnn", "onednn", spread_samples(3e-3, 20, 0))});
  const auto b = write(dir_, "b.json",
                      {timed_case("gemm", "onednn", spread_samples(1.5e-3, 20, 1)), timed_case("conv", "onednn", spread_samples(1e-3, 20, 1)),
                       timed_case("rnn", "onednn", spread_samples(3e-3, 20, 0))});
  const auto r = run_d5({"compare", a, b, "--format", "json"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["schema"], "deep500.compare");
  ASSERT_EQ(j["cases"].size(), 3u);
  EXPECT_EQ(j["cases"][0]["verdict"], "SLOWER");
  EXPECT_NEAR(j["cases"][0]["ratio"]["estimate"].get<double>(), 1.5, 0.05);
  EXPECT_LT(j["cases"][0]["mann_whitney"]["p_value"].get<double>(), 1e-4);
  EXPECT_EQ(j["cases"][1]["verdict"], "FASTER");
  EXPECT_EQ(j["cases"][2]["verdict"], "SAME");  // identical samples: the CI is [1, 1]
  EXPECT_EQ(j["summary"]["slower"], 1);

  const auto console = run_d5({"compare", a, b});
  EXPECT_EQ(console.exit_code, 1);
  EXPECT_NE(console.out.find("SLOWER"), std::string::npos) << console.out;
  EXPECT_NE(console.out.find("1 faster, 1 slower, 1 same, 0 uncertain"), std::string::npos) << console.out;
}

TEST_F(CliCompare, NoRegressionPassesAndOptionsTightenTheGate) {
  const auto a = write(dir_, "a.json", {timed_case("gemm", "onednn", spread_samples(1e-3, 20, 0)),
                                        timed_case("conv", "onednn", spread_samples(1e-3, 4, 0))});
  const auto b = write(dir_, "b.json", {timed_case("gemm", "onednn", spread_samples(0.7e-3, 20, 2)),
                                        timed_case("conv", "onednn", spread_samples(1.02e-3, 4, 1)),
                                        timed_case("new", "onednn", spread_samples(1e-3, 4, 1))});
  // FASTER and UNCERTAIN (4 samples each, 2% apart) pass; a case only in B is listed.
  const auto r = run_d5({"compare", a, b});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("UNCERTAIN"), std::string::npos);
  EXPECT_NE(r.out.find("only in the new result"), std::string::npos);
  EXPECT_EQ(run_d5({"compare", a, b, "--fail-on-uncertain"}).exit_code, 1);
  EXPECT_EQ(run_d5({"compare", a, b, "--fail-on-missing"}).exit_code, 1);
  // Saying the metric is a rate turns 30% less time into a regression.
  EXPECT_EQ(run_d5({"compare", a, b, "--higher-is-better"}).exit_code, 1);
}

TEST_F(CliCompare, BadInputIsNamed) {
  const auto a = write(dir_, "a.json", {timed_case("gemm", "onednn", spread_samples(1e-3, 20, 0))});
  std::ofstream(dir_.file("bad.json")) << "{\"schema\": \"something.else\"}";
  const auto bad = run_d5({"compare", a, dir_.file("bad.json")});
  EXPECT_EQ(bad.exit_code, 4);
  EXPECT_NE(bad.err.find("schema"), std::string::npos) << bad.err;
  EXPECT_EQ(run_d5({"compare", a, dir_.file("missing.json")}).exit_code, 2);
  EXPECT_EQ(run_d5({"compare", a}).exit_code, 2);
}

// Scripts ask `d5 report --help` whether a command exists (scripts/run-default-suite.sh): an
// unknown command must not answer with the main help and exit 0.
TEST(CliCommands, AnUnknownCommandWithHelpIsAnError) {
  const auto r = run_d5({"--threads", "1", "nosuchcommand", "--help"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("unknown command 'nosuchcommand'"), std::string::npos) << r.err;
  EXPECT_EQ(run_d5({"--seed", "3", "compare", "--help"}).exit_code, 0);
}

}  // namespace

}  // namespace d5::test
