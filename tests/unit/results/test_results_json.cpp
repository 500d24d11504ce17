#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "deep500/core/error.h"
#include "deep500/metrics/experiment.h"
#include "deep500/core/math_mode.h"
#include "deep500/metrics/manifest.h"
#include "deep500/metrics/reporter.h"
#include "deep500/metrics/results.h"

namespace d5 {
namespace reference {
void register_all();
}

namespace {
Results sample_results() {
  Results r;
  r.manifest = {{"version", "0.1.0"}, {"git_revision", "abc"}};
  CaseResult c;
  c.name = "gemm-1024";
  c.level = "L0";
  c.backend = "reference";
  c.params = {{"m", 1024}, {"n", 1024}};
  c.state = CaseState::Passed;
  RunOutcome o;
  o.validity = Validity::Valid;
  o.reason = "95% CI ±1.00% of the median after 12 runs (0.50 s)";
  o.warmup_runs = 2;
  o.runs = 12;
  o.seconds = 0.5;
  o.ci_ratio = 0.01;
  c.outcome = o;
  MetricRecord m;
  m.name = "wall_time";
  m.unit = "s";
  m.samples = {0.5, 0.25, 0.125, 0.3, 0.31, 0.29, 0.28, 0.27, 0.26, 0.4};
  m.summary = summarize(m.samples);
  m.info = {{"clock", "wall"}};
  c.metrics.push_back(m);
  MetricRecord e;
  e.name = "energy";
  e.unit = "J";
  e.available = false;
  e.unavailable_reason = "no RAPL";
  c.metrics.push_back(e);
  r.cases.push_back(c);
  CaseResult f;
  f.name = "conv";
  f.state = CaseState::Unimplemented;
  f.detail = "op Conv has no onednn implementation for groups=3";
  r.cases.push_back(f);
  return r;
}
}  // namespace

TEST(ResultsJson, RoundTripPreservesEverything) {
  const Results r = sample_results();
  const nlohmann::json j = to_json(r);
  EXPECT_EQ(j["schema"], "deep500.results");
  EXPECT_EQ(j["schema_version"], 1);
  // Through text, as a file would be.
  const Results back = results_from_json(nlohmann::json::parse(j.dump()));
  EXPECT_EQ(to_json(back), j);
  ASSERT_EQ(back.cases.size(), 2u);
  const auto& m = back.cases[0].metrics[0];
  EXPECT_EQ(m.samples, r.cases[0].metrics[0].samples);  // raw samples are kept exactly
  ASSERT_TRUE(m.summary.has_value());
  EXPECT_DOUBLE_EQ(m.summary->median, r.cases[0].metrics[0].summary->median);
  EXPECT_EQ(m.summary->median_ci.lower_rank, 2);  // n = 10: ranks 2..9
  EXPECT_EQ(m.summary->median_ci.upper_rank, 9);
  EXPECT_FALSE(back.cases[0].metrics[1].available);
  EXPECT_EQ(back.cases[0].metrics[1].unavailable_reason, "no RAPL");
  EXPECT_EQ(back.cases[1].state, CaseState::Unimplemented);
  EXPECT_EQ(back.cases[0].outcome->validity, Validity::Valid);
}

TEST(ResultsJson, NonFiniteValuesDoNotBecomeZero) {
  Results r = sample_results();
  r.cases[0].outcome->ci_ratio = INFINITY;
  const Results back = results_from_json(nlohmann::json::parse(to_json(r).dump()));
  EXPECT_TRUE(std::isinf(back.cases[0].outcome->ci_ratio));
}

TEST(ResultsJson, SchemaErrorsNameTheProblem) {
  nlohmann::json j = to_json(sample_results());
  j["schema_version"] = 99;
  try {
    results_from_json(j);
    FAIL();
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("schema_version 99"), std::string::npos);
  }
  j = to_json(sample_results());
  j["cases"][0].erase("state");
  try {
    results_from_json(j);
    FAIL();
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("'state'"), std::string::npos);
  }
  j = to_json(sample_results());
  j["cases"][0]["state"] = "GREAT";
  EXPECT_THROW(results_from_json(j), FormatError);
  EXPECT_THROW(results_from_json(nlohmann::json::array()), FormatError);
}

// Found by fuzz_results (fuzz/regressions/results): values of the wrong type or range escaped as
// nlohmann exceptions, were converted with undefined behaviour (1e300 to int), or wrapped silently
// (4294967297 read as schema_version 1). Each is a FormatError naming the key now.
TEST(ResultsJson, WrongTypesAndRangesAreFormatErrors) {
  const auto expect_format_error = [](const nlohmann::json& j, const std::string& part) {
    try {
      results_from_json(j);
      ADD_FAILURE() << "accepted: " << j.dump();
    } catch (const FormatError& e) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  };
  nlohmann::json j = to_json(sample_results());
  j["schema_version"] = 1e300;
  expect_format_error(j, "'schema_version' is not an integer");
  j["schema_version"] = 4294967297u;
  expect_format_error(j, "'schema_version' is 4294967297, outside the range");
  j = to_json(sample_results());
  j["cases"][0]["metrics"][0]["samples"].push_back("x");
  expect_format_error(j, "sample that is not a number");
  j = to_json(sample_results());
  j["cases"][0]["metrics"][0]["samples"] = {{"a", 1.0}};
  expect_format_error(j, "'samples' is not a list");
  j = to_json(sample_results());
  j["cases"][0]["outcome"].erase("ci_ratio");
  expect_format_error(j, "'ci_ratio'");
  j = to_json(sample_results());
  j["cases"][0]["outcome"]["runs"] = -1e300;
  expect_format_error(j, "'runs' is not an integer");
  j = to_json(sample_results());
  j["cases"] = 3;
  expect_format_error(j, "'cases' is not a list");
}

// The stored inputs of those findings, as files (read_results is what d5 compare and rerun call).
TEST(ResultsJson, FuzzRegressionFilesAreFormatErrors) {
  const std::filesystem::path dir = std::filesystem::path(D5_SOURCE_DIR) / "fuzz" / "regressions" / "results";
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    // report-*: valid results whose data the report cannot draw (tests/unit/report).
    if (e.path().filename().string().starts_with("report-")) continue;
    EXPECT_THROW(read_results(e.path().string()), FormatError) << e.path();
    ++files;
  }
  EXPECT_GE(files, 4);
}

TEST(ResultsJson, FileRoundTripAndCorruptFile) {
  const auto dir = std::filesystem::temp_directory_path();
  const auto path = (dir / "d5-results-test.json").string();
  write_results(path, sample_results());
  EXPECT_EQ(to_json(read_results(path)), to_json(sample_results()));
  {
    std::ofstream(path) << "{\"schema\": \"deep500.res";  // truncated
  }
  EXPECT_THROW(read_results(path), FormatError);
  std::filesystem::remove(path);
  EXPECT_THROW(read_results(path), IoError);
}

TEST(Reporters, ConsoleShowsStatesCiAndCounts) {
  std::ostringstream s;
  ConsoleReporter().write(sample_results(), s);
  const std::string out = s.str();
  EXPECT_NE(out.find("gemm-1024"), std::string::npos);
  EXPECT_NE(out.find("UNIMPLEMENTED"), std::string::npos);
  EXPECT_NE(out.find("groups=3"), std::string::npos);
  EXPECT_NE(out.find("unavailable: no RAPL"), std::string::npos);
  EXPECT_NE(out.find("1 passed, 0 failed, 0 skipped, 1 unimplemented, 0 mistrusted"), std::string::npos);
  // The median of the samples (interpolated: (0.28 + 0.29) / 2 = 0.285 s) is printed in ms.
  EXPECT_NE(out.find("285.000 ms"), std::string::npos);
}

TEST(Reporters, JsonReporterIsTheSchema) {
  std::ostringstream s;
  make_reporter("json")->write(sample_results(), s);
  EXPECT_EQ(nlohmann::json::parse(s.str()), to_json(sample_results()));
  EXPECT_THROW(make_reporter("xml"), InvalidArgument);
}

TEST(Reporters, Formatting) {
  EXPECT_EQ(format_seconds(12.3e-6), "12.30 us");
  EXPECT_EQ(format_seconds(0.5), "500.000 ms");
  EXPECT_EQ(format_seconds(2), "2.000 s");
  EXPECT_EQ(format_bytes(512), "512 B");
  EXPECT_EQ(format_bytes(3.0 * 1024 * 1024), "3.00 MiB");
}

TEST(Manifest, CarriesBuildHostSeedsAndInvocation) {
  reference::register_all();
  const char* argv[] = {"d5", "info", "--seed", "7"};
  set_invocation(4, argv);
  ExperimentSettings s;
  s.seed = 7;
  (void)s.stream("weights");
  const auto m = make_manifest(s);
  for (const char* key : {"version", "git_revision", "git_dirty", "compiler", "build_type", "cpu", "os",
                          "libraries", "backends", "hostname", "threads", "environment", "seeds",
                          "command_line", "start_time_utc", "clocks", "memory_bytes"})
    EXPECT_TRUE(m.contains(key)) << key;
  EXPECT_EQ(m["seeds"]["master"], 7);
  EXPECT_EQ(m["seeds"]["streams"], nlohmann::json::array({"weights"}));
  EXPECT_EQ(m["command_line"][1], "info");
  EXPECT_GT(m["cpu"]["logical_cores"].get<int>(), 0);
  EXPECT_EQ(m["backends"][0]["name"], "reference");
  EXPECT_GT(m["clocks"]["wall"]["call_overhead_ns"].get<double>(), 0);
}

TEST(Manifest, RecordsHowF32ProductsMayRound) {
  EXPECT_EQ(make_manifest({})["f32_math"], "strict");
  set_f32_math(parse_f32_math("tf32"));
  EXPECT_EQ(make_manifest({})["f32_math"], "tf32");
  set_f32_math(parse_f32_math("fast"));
  EXPECT_EQ(make_manifest({})["f32_math"], "fast");
  set_f32_math(F32Math::strict);
  EXPECT_THROW(parse_f32_math("tf16"), InvalidArgument);
}

}  // namespace d5
