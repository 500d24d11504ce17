#pragma once
// A result history (docs/db.md): result files with their manifests in one SQLite database, so
// that runs are kept over time and compared across commits and machines.
//
// A run is one imported result file, keyed by the SHA-256 of its bytes: importing the same file
// again adds nothing. Its manifest gives the machine (hostname), the commit (git revision) and the
// date (start time, UTC). Each case of the file is kept with its state, and each metric with raw
// samples as a measurement: the median and its 95% CI as the file gave them, and the samples, so
// that later comparisons (regressions) test the distributions rather than two numbers.
//
// Several processes may import into one database at once: an import is one transaction that
// waits for the others (SQLite's write lock, WAL journal), and a process killed mid-import leaves
// nothing of its file behind.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "deep500/history/submission.h"
#include "deep500/metrics/compare.h"

namespace d5 {

// Version 1: tables meta, runs, cases, measurements; version 2 adds submissions and
// submission_files (docs/db.md#schema). Opening an older database migrates it.
inline constexpr int kResultDbSchemaVersion = 2;

struct DbRun {
  std::string hash;          // SHA-256 of the file's bytes, hex
  std::string source;        // the path it was imported from
  std::string imported_utc;  // when
  std::string start_utc;     // the manifest's start_time_utc ("" when it has none)
  std::string machine;       // the manifest's hostname ("" when it has none)
  std::string cpu;           // the manifest's cpu.model
  std::string commit;        // the manifest's git_revision
  bool dirty = false;        // the manifest's git_dirty
  std::string version;       // d5's version that wrote the file
  int64_t cases = 0;
};

struct DbMeasurement {
  std::string run_hash, start_utc, machine, commit;
  std::string case_name, backend, state;
  std::string metric, unit;
  int64_t n = 0;
  std::optional<double> median, ci_lower, ci_upper;  // absent without samples / without a CI
  std::vector<double> samples;
};

// Empty fields match everything. case_glob is a shell pattern ("resnet*/torch", SQLite GLOB, case
// sensitive); since and until compare with the run's start time as text, so a date
// ("2026-11-27") or a full time stamp both work (until is inclusive of that prefix).
struct DbFilter {
  std::string case_glob = {}, backend = {}, machine = {}, commit = {}, metric = {}, since = {}, until = {};
};

struct ImportOutcome {
  std::string hash;
  bool added = false;  // false: a file with these bytes was imported before
  int64_t cases = 0, measurements = 0;
};

// A submission as the database keeps it (submission.h's Submission, without its files' list):
// where and when it ran from its run.json's manifest.
struct DbSubmission {
  Submission submission;
  std::string submitted_utc, summary_run;
  std::string start_utc, machine, cpu, commit;
  bool dirty = false;
};

struct SubmitOutcome {
  bool added = false;  // false: this bundle (by id) was submitted before
  int64_t files = 0;   // files stored (as runs) that were not there yet
};

struct ImportOptions {
  // Runs inside the import's transaction, after its rows are written and before the commit
  // (tests kill the process there to show that nothing of the file survives).
  std::function<void()> before_commit = {};
};

class ResultDb {
 public:
  // Opens or creates the database. FormatError when the file is not a d5 database or was made by
  // a newer schema; IoError when it cannot be opened; NotBuilt in a d5 built without SQLite.
  static ResultDb open(const std::string& path);
  ResultDb(ResultDb&&) noexcept;
  ResultDb& operator=(ResultDb&&) noexcept;
  ~ResultDb();

  int schema_version() const;
  const std::string& path() const;

  // Reads, validates (the results schema) and stores a result file. FormatError naming the file
  // for one that is not a result file; nothing is stored then.
  ImportOutcome import_file(const std::string& path, const ImportOptions& options = {});

  // Stores a checked submission (check_bundle): its files as runs, and the submission, in one
  // transaction. IoError when a file's bytes changed since they were checked (their hash).
  SubmitOutcome add_submission(const Submission& submission);
  // Submissions of `recipe` (all when empty), in order of submission.
  std::vector<DbSubmission> submissions(const std::string& recipe = {}) const;

  // Runs matching the filter's machine, commit, since and until, oldest first.
  std::vector<DbRun> runs(const DbFilter& filter = {}) const;
  // Measurements matching the filter, ordered by case, backend, metric, machine, then start time.
  std::vector<DbMeasurement> measurements(const DbFilter& filter = {}) const;

 private:
  struct Impl;
  explicit ResultDb(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Consecutive runs of one case, backend, metric and machine (ordered by start time), compared as
// `d5 compare` compares two files: before = the earlier run's samples.
struct RunPair {
  DbMeasurement before, after;
  CaseComparison comparison;
};

// Every consecutive pair in `ordered` (as measurements() returns them; measurements without
// samples are skipped). A pair's verdict SLOWER is a regression, FASTER an improvement.
std::vector<RunPair> consecutive_pairs(const std::vector<DbMeasurement>& ordered, const CompareOptions& options);

}  // namespace d5
