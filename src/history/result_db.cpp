// The result history on SQLite (docs/db.md).
#include "deep500/history/result_db.h"

#include <fmt/format.h>

#include "core/digest.h"
#include "sqlite_db.h"
#include "deep500/core/error.h"
#include "deep500/core/system_info.h"
#include "deep500/metrics/results.h"

namespace d5 {

namespace {

// Schema version 1. Samples are a JSON array: they are read back whole, never queried by value.
constexpr const char* kSchemaV1 = R"sql(
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS runs(
  hash TEXT PRIMARY KEY, source TEXT NOT NULL, imported_utc TEXT NOT NULL, start_utc TEXT NOT NULL,
  machine TEXT NOT NULL, cpu TEXT NOT NULL, commit_id TEXT NOT NULL, dirty INTEGER NOT NULL,
  version TEXT NOT NULL, manifest TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS cases(
  run_hash TEXT NOT NULL REFERENCES runs(hash), ordinal INTEGER NOT NULL, name TEXT NOT NULL,
  backend TEXT NOT NULL, level TEXT NOT NULL, state TEXT NOT NULL, detail TEXT NOT NULL,
  PRIMARY KEY(run_hash, ordinal));
CREATE TABLE IF NOT EXISTS measurements(
  run_hash TEXT NOT NULL REFERENCES runs(hash), case_ordinal INTEGER NOT NULL, metric TEXT NOT NULL,
  unit TEXT NOT NULL, n INTEGER NOT NULL, median REAL, ci_lower REAL, ci_upper REAL, samples TEXT NOT NULL,
  PRIMARY KEY(run_hash, case_ordinal, metric));
CREATE INDEX IF NOT EXISTS runs_by_machine ON runs(machine, start_utc);
CREATE INDEX IF NOT EXISTS cases_by_name ON cases(name, backend);
)sql";

// Version 2 adds submissions to a ranked list (docs/db.md#submissions): a submission is a recipe
// run's bundle, its files kept as runs; the score and verdicts are what `d5 db submit` verified.
constexpr const char* kSchemaV2 = R"sql(
CREATE TABLE IF NOT EXISTS submissions(
  id TEXT PRIMARY KEY, recipe TEXT NOT NULL, recipe_hash TEXT NOT NULL, division TEXT NOT NULL,
  submitter TEXT NOT NULL, system TEXT NOT NULL, submitted_utc TEXT NOT NULL,
  summary_run TEXT NOT NULL REFERENCES runs(hash), score_quantity TEXT NOT NULL,
  lower_is_better INTEGER NOT NULL, score REAL, score_detail TEXT NOT NULL, validity TEXT NOT NULL,
  invalid_reasons TEXT NOT NULL, outputs_verified INTEGER NOT NULL, backends TEXT NOT NULL,
  score_unit TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS submission_files(
  submission_id TEXT NOT NULL REFERENCES submissions(id), name TEXT NOT NULL,
  run_hash TEXT NOT NULL REFERENCES runs(hash), PRIMARY KEY(submission_id, name));
CREATE INDEX IF NOT EXISTS submissions_by_recipe ON submissions(recipe, division);
)sql";

// Filters as SQL: the clause and its bound values in order.
struct Where {
  std::string sql;
  std::vector<std::string> values;
  // Binds `value` to each of the clause's `uses` placeholders (the until filter reads it twice).
  void add(const std::string& clause, const std::string& value, int uses = 1) {
    if (value.empty()) return;
    sql += (sql.empty() ? " WHERE " : " AND ") + clause;
    for (int i = 0; i < uses; ++i) values.push_back(value);
  }
  void bind(Statement& s) const {
    for (size_t i = 0; i < values.size(); ++i) s.bind(static_cast<int>(i + 1), values[i]);
  }
};

Where run_filter(const DbFilter& f) {
  Where w;
  w.add("r.machine = ?", f.machine);
  w.add("r.commit_id LIKE ? || '%'", f.commit);  // a commit prefix, as git takes it
  w.add("r.start_utc >= ?", f.since);
  // "until 2026-11-27" includes that whole day: compare with the prefix's length.
  w.add("substr(r.start_utc, 1, length(?)) <= ?", f.until, 2);
  return w;
}

}  // namespace

ResultDb::ResultDb(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ResultDb::ResultDb(ResultDb&&) noexcept = default;
ResultDb& ResultDb::operator=(ResultDb&&) noexcept = default;
ResultDb::~ResultDb() = default;
int ResultDb::schema_version() const { return impl_->version; }
const std::string& ResultDb::path() const { return impl_->path; }

ResultDb ResultDb::open(const std::string& path) {
  auto impl = std::make_unique<Impl>();
  impl->path = path;
  if (sqlite3_open_v2(path.c_str(), &impl->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr) != SQLITE_OK)
    D5_THROW(IoError, "cannot open result database {}: {}", path,
             impl->db ? sqlite3_errmsg(impl->db) : "out of memory");
  sqlite3_busy_timeout(impl->db, kBusyTimeoutMs);
  try {
    // WAL: readers do not block the importer, and a killed writer's pages are never committed.
    exec(impl->db, "PRAGMA journal_mode=WAL");
  } catch (const IoError& e) {
    D5_THROW(FormatError, "{} is not a result database: {}", path, e.what());
  }
  Transaction t(impl->db);
  bool has_meta = false;
  {
    Statement s(impl->db, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'meta'");
    has_meta = s.step() && s.integer(0) > 0;
  }
  if (has_meta) {
    Statement s(impl->db, "SELECT value FROM meta WHERE key = 'schema_version'");
    impl->version = s.step() ? std::stoi(s.text(0)) : 0;
  } else {
    Statement s(impl->db, "SELECT count(*) FROM sqlite_master");
    if (s.step() && s.integer(0) > 0)
      D5_THROW(FormatError, "{} is an SQLite database, but not d5's (it has tables and no 'meta' table)", path);
  }
  if (impl->version > kResultDbSchemaVersion)
    D5_THROW(FormatError,
             "result database {} has schema version {}, this d5 knows up to {}: use the d5 that wrote it, or a "
             "newer one",
             path, impl->version, kResultDbSchemaVersion);
  // Migrations, oldest first: a new database runs them all, an older one those it lacks. Each
  // only adds tables, so a database that migrated still reads with the older d5's queries.
  const int found = impl->version;
  if (impl->version < 1) exec(impl->db, kSchemaV1), impl->version = 1;
  if (impl->version < 2) exec(impl->db, kSchemaV2), impl->version = 2;
  if (impl->version != found)
    exec(impl->db, fmt::format("INSERT OR REPLACE INTO meta(key, value) VALUES ('schema_version', '{}')",
                               impl->version));
  t.commit();
  return ResultDb(std::move(impl));
}

Results parse_result_bytes(const std::string& path, const std::string& bytes) {
  try {
    return results_from_json(nlohmann::json::parse(bytes));
  } catch (const nlohmann::json::exception& e) {
    D5_THROW(FormatError, "{} is not a result file: {}", path, e.what());
  } catch (const FormatError& e) {
    D5_THROW(FormatError, "{} is not a result file: {}", path, e.what());
  }
}

ImportOutcome import_result(sqlite3* db, const std::string& path, const std::string& hash, const Results& results) {
  ImportOutcome out;
  out.hash = hash;
  const auto& m = results.manifest;
  Statement run(db,
                "INSERT OR IGNORE INTO runs(hash, source, imported_utc, start_utc, machine, cpu, commit_id, dirty, "
                "version, manifest) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
  const std::string cpu = m.contains("cpu") && m["cpu"].is_object() ? text_at(m["cpu"], "model") : "";
  run.bind(1, out.hash).bind(2, path).bind(3, utc_now_iso8601()).bind(4, text_at(m, "start_time_utc"));
  run.bind(5, text_at(m, "hostname")).bind(6, cpu).bind(7, text_at(m, "git_revision"));
  run.bind(8, int64_t{m.contains("git_dirty") && m["git_dirty"].is_boolean() && m["git_dirty"].get<bool>()});
  run.bind(9, text_at(m, "version")).bind(10, m.dump());
  run.step();
  if (sqlite3_changes(db) == 0) return out;  // these bytes are in already: nothing to add
  out.added = true;
  Statement add_case(db, "INSERT INTO cases VALUES (?, ?, ?, ?, ?, ?, ?)");
  // A case with two metrics of one name keeps the last (the key is case and metric).
  Statement add_metric(db, "INSERT OR REPLACE INTO measurements VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)");
  for (size_t i = 0; i < results.cases.size(); ++i) {
    const CaseResult& c = results.cases[i];
    add_case.reset();
    add_case.bind(1, out.hash).bind(2, static_cast<int64_t>(i)).bind(3, c.name).bind(4, c.backend);
    add_case.bind(5, c.level).bind(6, std::string(to_string(c.state))).bind(7, c.detail);
    add_case.step();
    ++out.cases;
    for (const MetricRecord& r : c.metrics) {
      if (!r.available || r.samples.empty()) continue;
      // The file's summary when it has one (it is what the file reported), else the samples'.
      const Summary sum = r.summary ? *r.summary : summarize(r.samples);
      const bool ci = sum.median_ci.available;
      add_metric.reset();
      add_metric.bind(1, out.hash).bind(2, static_cast<int64_t>(i)).bind(3, r.name).bind(4, r.unit);
      add_metric.bind(5, static_cast<int64_t>(r.samples.size()));
      add_metric.bind(6, std::optional<double>(sum.median));
      add_metric.bind(7, ci ? std::optional<double>(sum.median_ci.lower) : std::nullopt);
      add_metric.bind(8, ci ? std::optional<double>(sum.median_ci.upper) : std::nullopt);
      add_metric.bind(9, nlohmann::json(r.samples).dump());
      add_metric.step();
      ++out.measurements;
    }
  }
  return out;
}

ImportOutcome ResultDb::import_file(const std::string& path, const ImportOptions& options) {
  const std::string bytes = read_bytes(path);
  const Results results = parse_result_bytes(path, bytes);
  Transaction t(impl_->db);
  ImportOutcome out = import_result(impl_->db, path, sha256_hex(bytes), results);
  if (!out.added) return out;
  if (options.before_commit) options.before_commit();
  t.commit();
  return out;
}

std::vector<DbRun> ResultDb::runs(const DbFilter& filter) const {
  const Where w = run_filter(filter);
  Statement s(impl_->db,
              "SELECT r.hash, r.source, r.imported_utc, r.start_utc, r.machine, r.cpu, r.commit_id, r.dirty, "
              "r.version, (SELECT count(*) FROM cases c WHERE c.run_hash = r.hash) FROM runs r" +
                  w.sql + " ORDER BY r.start_utc, r.hash");
  w.bind(s);
  std::vector<DbRun> out;
  while (s.step())
    out.push_back({s.text(0), s.text(1), s.text(2), s.text(3), s.text(4), s.text(5), s.text(6), s.integer(7) != 0,
                   s.text(8), s.integer(9)});
  return out;
}

std::vector<DbMeasurement> ResultDb::measurements(const DbFilter& filter) const {
  Where w = run_filter(filter);
  w.add("c.name GLOB ?", filter.case_glob);
  w.add("c.backend = ?", filter.backend);
  w.add("m.metric = ?", filter.metric);
  Statement s(impl_->db,
              "SELECT r.hash, r.start_utc, r.machine, r.commit_id, c.name, c.backend, c.state, m.metric, m.unit, m.n, "
              "m.median, m.ci_lower, m.ci_upper, m.samples FROM measurements m "
              "JOIN cases c ON c.run_hash = m.run_hash AND c.ordinal = m.case_ordinal "
              "JOIN runs r ON r.hash = m.run_hash" +
                  w.sql + " ORDER BY c.name, c.backend, m.metric, r.machine, r.start_utc, r.hash");
  w.bind(s);
  std::vector<DbMeasurement> out;
  while (s.step()) {
    DbMeasurement d{s.text(0), s.text(1), s.text(2), s.text(3), s.text(4), s.text(5), s.text(6), s.text(7),
                    s.text(8), s.integer(9), s.real(10), s.real(11), s.real(12), {}};
    d.samples = nlohmann::json::parse(s.text(13)).get<std::vector<double>>();
    out.push_back(std::move(d));
  }
  return out;
}

}  // namespace d5
