// Integration: `d5 db` on result files with known samples: imports by content, query and history
// in JSON, regressions as a gate (exit 1), and the errors' exit codes.
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

// One run: gemm at `gemm` seconds per call on onednn, started at `start` on machine `host`.
std::string write_run(const TempDir& dir, const std::string& name, const std::string& start, const std::string& host,
                      const std::string& commit, double gemm, double phase) {
  const json c = {{"name", "gemm"},     {"level", "L0"},  {"backend", "onednn"},
                  {"params", json::object()}, {"state", "PASSED"}, {"detail", ""},
                  {"metrics", {{{"name", "wall_time"}, {"unit", "s"}, {"available", true}, {"samples", spread_samples(gemm, 20, phase)}}}}};
  const std::string path = dir.file(name);
  std::ofstream(path) << json{{"schema", "deep500.results"},
                              {"schema_version", 1},
                              {"manifest", {{"start_time_utc", start}, {"hostname", host}, {"git_revision", commit}}},
                              {"cases", {c}}}
                             .dump();
  return path;
}

class CliDb : public ::testing::Test {
 protected:
  TempDir dir_{"d5-cli-db"};
  std::string db() const { return dir_.file("h.db"); }
};

TEST_F(CliDb, ImportQueryHistoryAndARegressionThatFailsTheGate) {
  const auto a = write_run(dir_, "a.json", "2026-11-01T00:00:00Z", "m1", "1111aaaa", 1e-3, 0);
  const auto b = write_run(dir_, "b.json", "2026-11-02T00:00:00Z", "m1", "2222bbbb", 1e-3, 1);
  auto r = run_d5({"db", "import", a, b, a, "--db", db(), "--format", "json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json j = json::parse(r.out);
  ASSERT_EQ(j["files"].size(), 3u);
  EXPECT_TRUE(j["files"][0]["added"].get<bool>());
  EXPECT_TRUE(j["files"][1]["added"].get<bool>());
  EXPECT_FALSE(j["files"][2]["added"].get<bool>());  // a again

  // Two equal runs: no regression, exit 0.
  r = run_d5({"db", "regressions", "--db", db()});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("0 regression(s) in 1 pair(s)"), std::string::npos) << r.out;

  // A third run 1.4x slower: exit 1, the pair named with both commits.
  const auto c = write_run(dir_, "c.json", "2026-11-03T00:00:00Z", "m1", "3333cccc", 1.4e-3, 2);
  ASSERT_EQ(run_d5({"db", "import", c, "--db", db()}).exit_code, 0);
  r = run_d5({"db", "regressions", "--db", db(), "--format", "json"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  j = json::parse(r.out);
  EXPECT_EQ(j["regressions"], 1);
  EXPECT_EQ(j["pairs"], 2);
  EXPECT_EQ(j["alpha"], 0.05);
  ASSERT_EQ(j["entries"].size(), 1u);
  EXPECT_EQ(j["entries"][0]["verdict"], "SLOWER");
  EXPECT_EQ(j["entries"][0]["before"]["commit"], "2222bbbb");
  EXPECT_EQ(j["entries"][0]["after"]["commit"], "3333cccc");
  EXPECT_NEAR(j["entries"][0]["ratio"]["estimate"].get<double>(), 1.4, 0.05);
  // A tolerance wider than the slowdown accepts it.
  EXPECT_EQ(run_d5({"db", "regressions", "--db", db(), "--tolerance", "0.6"}).exit_code, 0);

  r = run_d5({"db", "history", "gemm", "--db", db(), "--format", "json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  j = json::parse(r.out);
  ASSERT_EQ(j["measurements"].size(), 3u);
  EXPECT_EQ(j["measurements"][2]["commit"], "3333cccc");
  EXPECT_NEAR(j["measurements"][2]["median"].get<double>(), 1.4e-3, 1.4e-3 * 0.05);

  r = run_d5({"db", "query", "--db", db(), "--since", "2026-11-02", "--format", "json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["measurements"].size(), 2u);
}

TEST_F(CliDb, BadInputsEndWithTheirExitCodes) {
  std::ofstream(dir_.file("junk.json")) << "[1, 2";
  auto r = run_d5({"db", "import", dir_.file("junk.json"), "--db", db()});
  EXPECT_EQ(r.exit_code, 4) << r.err;  // FormatError
  EXPECT_NE(r.err.find("is not a result file"), std::string::npos) << r.err;
  r = run_d5({"db", "history", "nothing-like-this", "--db", db()});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("no measurements of 'nothing-like-this'"), std::string::npos) << r.err;
  std::ofstream(dir_.file("text.db")) << "plain text, not a database of any kind, long enough for a header\n";
  EXPECT_EQ(run_d5({"db", "query", "--db", dir_.file("text.db")}).exit_code, 4);
}

}  // namespace
}  // namespace d5::test
