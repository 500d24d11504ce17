// The result history: imports idempotent by content, filters, histories in time order, the
// schema's refusals, regressions between consecutive runs, and imports from several processes at
// once or killed halfway that lose nothing and leave nothing half-written.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <csignal>

#include <fmt/format.h>
#include <sqlite3.h>

#include "../../support/spread_samples.h"
#include "../../support/temp_dir.h"
#include "deep500/core/error.h"
#include "deep500/history/result_db.h"
#include "deep500/metrics/results.h"

namespace d5 {
namespace {

CaseResult timed(const std::string& name, const std::string& backend, std::vector<double> s) {
  CaseResult c;
  c.name = name;
  c.backend = backend;
  MetricRecord m;
  m.name = "latency";
  m.unit = "s";
  m.samples = std::move(s);
  c.metrics.push_back(m);
  return c;
}

// A result file of one run: `gemm` and `conv` on onednn with the given medians, and a FAILED case.
std::string write_run(const test::TempDir& dir, const std::string& file, const std::string& start,
                      const std::string& machine, const std::string& commit, double gemm, double conv, double phase = 0) {
  Results r;
  r.manifest = {{"start_time_utc", start}, {"hostname", machine}, {"git_revision", commit},
                {"git_dirty", false},      {"version", "0.1.0"},  {"cpu", {{"model", "Test CPU"}}}};
  r.cases = {timed("gemm", "onednn", test::spread_samples(gemm, 20, phase)), timed("conv", "onednn", test::spread_samples(conv, 20, phase))};
  CaseResult failed;
  failed.name = "rnn";
  failed.backend = "onednn";
  failed.state = CaseState::Failed;
  failed.detail = "output 0 differs";
  r.cases.push_back(failed);
  const std::string path = dir.file(file);
  write_results(path, r);
  return path;
}

class ResultDbTest : public ::testing::Test {
 protected:
  test::TempDir dir_{"d5-db"};
  std::string db_path() const { return dir_.file("history.db"); }
};

TEST_F(ResultDbTest, ImportsAreIdempotentByContentAndKeepEveryCaseAndSample) {
  ResultDb db = ResultDb::open(db_path());
  EXPECT_EQ(db.schema_version(), kResultDbSchemaVersion);
  const auto a = write_run(dir_, "a.json", "2026-11-01T10:00:00Z", "m1", "aaaa1111", 1e-3, 2e-3);
  const ImportOutcome first = db.import_file(a);
  EXPECT_TRUE(first.added);
  EXPECT_EQ(first.cases, 3);
  EXPECT_EQ(first.measurements, 2);  // the FAILED case has no samples
  EXPECT_FALSE(db.import_file(a).added);
  std::filesystem::copy_file(a, dir_.file("copy.json"));  // same bytes under another name
  EXPECT_FALSE(db.import_file(dir_.file("copy.json")).added);
  const auto runs = db.runs();
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].hash, first.hash);
  EXPECT_EQ(runs[0].machine, "m1");
  EXPECT_EQ(runs[0].commit, "aaaa1111");
  EXPECT_EQ(runs[0].cpu, "Test CPU");
  EXPECT_EQ(runs[0].cases, 3);
  const auto m = db.measurements({.case_glob = "gemm"});
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0].samples, test::spread_samples(1e-3, 20, 0));  // raw samples back, bit for bit
  EXPECT_EQ(m[0].state, "PASSED");
  ASSERT_TRUE(m[0].median && m[0].ci_lower && m[0].ci_upper);
  EXPECT_LE(*m[0].ci_lower, *m[0].median);
  EXPECT_GE(*m[0].ci_upper, *m[0].median);
  // Reopened, it is all still there.
  EXPECT_EQ(ResultDb::open(db_path()).measurements().size(), 2u);
}

TEST_F(ResultDbTest, FiltersSelectByCaseBackendMachineCommitAndDate) {
  ResultDb db = ResultDb::open(db_path());
  db.import_file(write_run(dir_, "1.json", "2026-11-01T10:00:00Z", "m1", "aaaa1111", 1e-3, 2e-3));
  db.import_file(write_run(dir_, "2.json", "2026-11-02T10:00:00Z", "m2", "bbbb2222", 1e-3, 2e-3));
  db.import_file(write_run(dir_, "3.json", "2026-11-03T23:59:00Z", "m1", "cccc3333", 1e-3, 2e-3));
  EXPECT_EQ(db.measurements().size(), 6u);
  EXPECT_EQ(db.measurements({.case_glob = "g*"}).size(), 3u);
  EXPECT_EQ(db.measurements({.case_glob = "x*"}).size(), 0u);
  EXPECT_EQ(db.measurements({.backend = "torch"}).size(), 0u);
  EXPECT_EQ(db.measurements({.machine = "m1"}).size(), 4u);
  EXPECT_EQ(db.measurements({.commit = "bbbb"}).size(), 2u);  // a prefix, as git takes it
  EXPECT_EQ(db.runs({.since = "2026-11-02"}).size(), 2u);
  EXPECT_EQ(db.runs({.until = "2026-11-02"}).size(), 2u);      // that whole day included
  EXPECT_EQ(db.runs({.until = "2026-11-03"}).size(), 3u);      // 23:59 of the 3rd too
  EXPECT_EQ(db.runs({.since = "2026-11-02", .until = "2026-11-02"}).size(), 1u);
}

TEST_F(ResultDbTest, HistoryIsInTimeOrderWhateverTheImportOrder) {
  ResultDb db = ResultDb::open(db_path());
  db.import_file(write_run(dir_, "late.json", "2026-11-05T00:00:00Z", "m1", "c3", 3e-3, 1));
  db.import_file(write_run(dir_, "early.json", "2026-11-01T00:00:00Z", "m1", "c1", 1e-3, 1));
  db.import_file(write_run(dir_, "mid.json", "2026-11-03T00:00:00Z", "m1", "c2", 2e-3, 1));
  const auto m = db.measurements({.case_glob = "gemm"});
  ASSERT_EQ(m.size(), 3u);
  EXPECT_EQ(m[0].commit, "c1");
  EXPECT_EQ(m[1].commit, "c2");
  EXPECT_EQ(m[2].commit, "c3");
  EXPECT_NEAR(*m[2].median, 3e-3, 3e-3 * 0.05);
}

// gemm: 1.0 ms, 1.0 ms, then 1.5 ms on m1 (a regression in the last pair); conv gets faster; runs
// on m2 form their own series, never paired with m1's.
TEST_F(ResultDbTest, ConsecutiveRunsOfACaseAndMachineAreComparedAsDistributions) {
  ResultDb db = ResultDb::open(db_path());
  db.import_file(write_run(dir_, "1.json", "2026-11-01T00:00:00Z", "m1", "c1", 1e-3, 2e-3, 0));
  db.import_file(write_run(dir_, "2.json", "2026-11-02T00:00:00Z", "m1", "c2", 1e-3, 2e-3, 1));
  db.import_file(write_run(dir_, "3.json", "2026-11-03T00:00:00Z", "m1", "c3", 1.5e-3, 1e-3, 2));
  db.import_file(write_run(dir_, "4.json", "2026-11-04T00:00:00Z", "m2", "c3", 9e-3, 9e-3, 3));
  const auto pairs = consecutive_pairs(db.measurements(), CompareOptions{});
  ASSERT_EQ(pairs.size(), 4u);  // (conv, gemm) x (1->2, 2->3) on m1; m2 has one run
  std::map<std::string, Verdict> verdict;
  for (const auto& p : pairs) {
    EXPECT_EQ(p.before.machine, p.after.machine);
    EXPECT_LT(p.before.start_utc, p.after.start_utc);
    verdict[p.after.case_name + "@" + p.after.commit] = p.comparison.verdict;
  }
  EXPECT_EQ(verdict["gemm@c2"], Verdict::Same);
  EXPECT_EQ(verdict["gemm@c3"], Verdict::Slower);
  EXPECT_EQ(verdict["conv@c3"], Verdict::Faster);
  for (const auto& p : pairs)
    if (p.after.case_name == "gemm" && p.after.commit == "c3") {
      EXPECT_NEAR(p.comparison.ratio.estimate, 1.5, 0.05);
      EXPECT_LT(p.comparison.test.p_value, 1e-4);
    }
}

TEST_F(ResultDbTest, RefusesWhatIsNotItsOwnAndStoresNothingOfABadFile) {
  {
    ResultDb db = ResultDb::open(db_path());
    std::ofstream(dir_.file("not-results.json")) << R"({"schema": "something.else", "cases": []})";
    EXPECT_THROW(db.import_file(dir_.file("not-results.json")), FormatError);
    std::ofstream(dir_.file("broken.json")) << "{\"schema\": ";
    EXPECT_THROW(db.import_file(dir_.file("broken.json")), FormatError);
    EXPECT_TRUE(db.runs().empty());
  }
  // A newer schema: the message says whose it is.
  sqlite3* raw = nullptr;
  ASSERT_EQ(sqlite3_open(db_path().c_str(), &raw), SQLITE_OK);
  sqlite3_exec(raw, "UPDATE meta SET value = '99' WHERE key = 'schema_version'", nullptr, nullptr, nullptr);
  sqlite3_close(raw);
  try {
    ResultDb::open(db_path());
    FAIL() << "a newer schema must be refused";
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find(fmt::format("schema version 99, this d5 knows up to {}", kResultDbSchemaVersion)),
              std::string::npos)
        << e.what();
  }
  // Someone else's SQLite database, and a file that is not a database at all.
  const std::string other = dir_.file("other.db");
  ASSERT_EQ(sqlite3_open(other.c_str(), &raw), SQLITE_OK);
  sqlite3_exec(raw, "CREATE TABLE t(x)", nullptr, nullptr, nullptr);
  sqlite3_close(raw);
  EXPECT_THROW(ResultDb::open(other), FormatError);
  std::ofstream(dir_.file("text.db")) << "not a database, just text that is long enough to have a header\n";
  EXPECT_THROW(ResultDb::open(dir_.file("text.db")), FormatError);
}

// A database as version 1 of the schema made it (its tables written out here, not taken from the
// library): opening it migrates it to the current version and keeps every run.
TEST_F(ResultDbTest, AVersionOneDatabaseIsMigratedAndKeepsItsRuns) {
  sqlite3* raw = nullptr;
  ASSERT_EQ(sqlite3_open(db_path().c_str(), &raw), SQLITE_OK);
  const char* v1 = R"sql(
    CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
    CREATE TABLE runs(hash TEXT PRIMARY KEY, source TEXT NOT NULL, imported_utc TEXT NOT NULL, start_utc TEXT NOT NULL,
      machine TEXT NOT NULL, cpu TEXT NOT NULL, commit_id TEXT NOT NULL, dirty INTEGER NOT NULL, version TEXT NOT NULL,
      manifest TEXT NOT NULL);
    CREATE TABLE cases(run_hash TEXT NOT NULL, ordinal INTEGER NOT NULL, name TEXT NOT NULL, backend TEXT NOT NULL,
      level TEXT NOT NULL, state TEXT NOT NULL, detail TEXT NOT NULL, PRIMARY KEY(run_hash, ordinal));
    CREATE TABLE measurements(run_hash TEXT NOT NULL, case_ordinal INTEGER NOT NULL, metric TEXT NOT NULL,
      unit TEXT NOT NULL, n INTEGER NOT NULL, median REAL, ci_lower REAL, ci_upper REAL, samples TEXT NOT NULL,
      PRIMARY KEY(run_hash, case_ordinal, metric));
    INSERT INTO meta VALUES ('schema_version', '1');
    INSERT INTO runs VALUES ('abc', 'old.json', '2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z', 'm1', 'cpu', 'c0ffee',
      0, '0.1.0', '{}');
    INSERT INTO cases VALUES ('abc', 0, 'gemm', 'onednn', 'L0', 'PASSED', '');
    INSERT INTO measurements VALUES ('abc', 0, 'latency', 's', 3, 2.0, 1.0, 3.0, '[1.0, 2.0, 3.0]');
  )sql";
  ASSERT_EQ(sqlite3_exec(raw, v1, nullptr, nullptr, nullptr), SQLITE_OK) << sqlite3_errmsg(raw);
  sqlite3_close(raw);
  for (int open = 0; open < 2; ++open) {  // migrating, then opening the migrated one
    ResultDb db = ResultDb::open(db_path());
    EXPECT_EQ(db.schema_version(), 2);
    ASSERT_EQ(db.runs().size(), 1u + open);  // the old run, and after the first open the new one
    EXPECT_EQ(db.runs()[0].commit, "c0ffee");
    DbFilter old_run;
    old_run.commit = "c0ffee";
    const auto m = db.measurements(old_run);
    ASSERT_EQ(m.size(), 1u);
    EXPECT_EQ(m[0].samples, (std::vector<double>{1, 2, 3}));
    EXPECT_TRUE(db.submissions().empty());
    // The new tables work beside the old: a file imports (once).
    db.import_file(write_run(dir_, "new.json", "2026-02-01T00:00:00Z", "m1", "beef", 1e-3, 2e-3));
    EXPECT_EQ(db.runs().size(), 2u);
  }
  ASSERT_EQ(sqlite3_open(db_path().c_str(), &raw), SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  sqlite3_prepare_v2(raw, "SELECT value FROM meta WHERE key = 'schema_version'", -1, &st, nullptr);
  ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
  EXPECT_STREQ(reinterpret_cast<const char*>(sqlite3_column_text(st, 0)), "2");
  sqlite3_finalize(st);
  sqlite3_close(raw);
}

// Runs `body` in a child process; returns its exit status as waitpid reports it.
int in_child(const std::function<int()>& body) {
  const pid_t pid = fork();
  if (pid == 0) {
    int code = 1;
    try {
      code = body();
    } catch (...) {
      code = 2;
    }
    _exit(code);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return status;
}

// Four processes import twelve files at once, each in its own order, every file by two of them:
// every file is in exactly once, with all its cases, and no process failed on a busy database.
TEST_F(ResultDbTest, ConcurrentImportsFromSeveralProcessesLoseNothing) {
  ResultDb::open(db_path());  // created before the children race for it
  std::vector<std::string> files;
  for (int i = 0; i < 12; ++i)
    files.push_back(write_run(dir_, fmt::format("{}.json", i), fmt::format("2026-11-{:02}T00:00:00Z", i + 1), "m1",
                              fmt::format("c{}", i), 1e-3 * (i + 1), 2e-3, i));
  std::vector<pid_t> children;
  for (int k = 0; k < 4; ++k) {
    const pid_t pid = fork();
    if (pid == 0) {
      int code = 0;
      try {
        ResultDb db = ResultDb::open(db_path());
        for (int j = 0; j < 6; ++j) db.import_file(files[(k * 3 + j * (k % 2 ? 5 : 7)) % 12]);
        for (int j = 0; j < 12; ++j)
          if (j % 4 == k) db.import_file(files[j]);  // each file at least once overall
      } catch (...) {
        code = 3;
      }
      _exit(code);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
  }
  const ResultDb db = ResultDb::open(db_path());
  const auto runs = db.runs();
  EXPECT_EQ(runs.size(), 12u);
  for (const auto& r : runs) EXPECT_EQ(r.cases, 3) << r.source;
  EXPECT_EQ(db.measurements().size(), 24u);
}

// An importer killed after writing its rows but before the commit leaves nothing of the file; the
// next import of it adds it whole.
TEST_F(ResultDbTest, AnImporterKilledMidImportLeavesNothingBehind) {
  ResultDb::open(db_path()).import_file(write_run(dir_, "kept.json", "2026-11-01T00:00:00Z", "m1", "c1", 1e-3, 2e-3));
  const auto victim = write_run(dir_, "victim.json", "2026-11-02T00:00:00Z", "m1", "c2", 1e-3, 2e-3);
  const int status = in_child([&] {
    ResultDb db = ResultDb::open(db_path());
    db.import_file(victim, {.before_commit = [] { kill(getpid(), SIGKILL); }});
    return 0;
  });
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "status " << status;
  ResultDb db = ResultDb::open(db_path());
  ASSERT_EQ(db.runs().size(), 1u);
  EXPECT_EQ(db.runs()[0].commit, "c1");
  EXPECT_EQ(db.measurements().size(), 2u);
  const ImportOutcome again = db.import_file(victim);
  EXPECT_TRUE(again.added);
  EXPECT_EQ(again.cases, 3);
  EXPECT_EQ(db.runs().size(), 2u);
}

}  // namespace
}  // namespace d5
