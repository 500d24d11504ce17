// d5 db: the result history (docs/db.md): import result files, query them, a case's history,
// regressions between consecutive runs (exit 1 when there is one).
#include <cstdlib>
#include <set>

#include <fmt/format.h>

#include "cli_common.h"
#include "deep500/history/result_db.h"

namespace d5::cli {

namespace {

struct DbOpts {
  std::string db;
  OutputOptions out;
  DbFilter filter;
  std::vector<std::string> files;
  CompareOptions cmp;
  bool all_pairs = false;
};

std::string default_db() {
  const char* env = std::getenv("D5_DB");
  return env && *env ? env : "deep500.db";
}

std::string format_value(const std::optional<double>& v) { return v ? fmt::format("{:.4g}", *v) : "-"; }

std::string short_commit(const std::string& c) { return c.substr(0, 12); }

nlohmann::json to_json(const DbMeasurement& m, bool with_samples) {
  nlohmann::json j = {{"run", m.run_hash},      {"start_utc", m.start_utc}, {"machine", m.machine},
                      {"commit", m.commit},     {"case", m.case_name},      {"backend", m.backend},
                      {"state", m.state},       {"metric", m.metric},       {"unit", m.unit},
                      {"n", m.n},               {"median", nullptr},        {"ci", nullptr}};
  if (m.median) j["median"] = *m.median;
  if (m.ci_lower && m.ci_upper) j["ci"] = {*m.ci_lower, *m.ci_upper};
  if (with_samples) j["samples"] = m.samples;
  return j;
}

int run_import(const DbOpts& o) {
  ResultDb db = ResultDb::open(o.db);
  nlohmann::json files = nlohmann::json::array();
  std::string text;
  int added = 0;
  for (const auto& f : o.files) {
    const ImportOutcome r = db.import_file(f);
    added += r.added;
    files.push_back({{"file", f}, {"hash", r.hash}, {"added", r.added}, {"cases", r.cases},
                     {"measurements", r.measurements}});
    text += r.added ? fmt::format("added    {}: {} cases, {} measurements (run {})\n", f, r.cases, r.measurements,
                                  r.hash.substr(0, 12))
                    : fmt::format("kept     {}: imported before (run {})\n", f, r.hash.substr(0, 12));
  }
  text += fmt::format("{} of {} file(s) added to {}\n", added, o.files.size(), o.db);
  emit_text(text, {{"schema", "deep500.db.import"}, {"database", o.db}, {"files", files}}, o.out);
  return kExitOk;
}

int run_query(const DbOpts& o) {
  const ResultDb db = ResultDb::open(o.db);
  const auto rows = db.measurements(o.filter);
  std::string text = fmt::format("{:<36} {:<10} {:<10} {:<18} {:<20} {:<12} {:>10} {:>22}\n", "case", "backend",
                                 "state", "metric", "start (UTC)", "commit", "median", "95% CI");
  nlohmann::json j = nlohmann::json::array();
  for (const auto& m : rows) {
    const std::string ci = m.ci_lower && m.ci_upper ? fmt::format("[{:.4g}, {:.4g}]", *m.ci_lower, *m.ci_upper) : "-";
    text += fmt::format("{:<36} {:<10} {:<10} {:<18} {:<20} {:<12} {:>10} {:>22}  {}\n", m.case_name, m.backend,
                        m.state, m.metric, m.start_utc.substr(0, 19), short_commit(m.commit),
                        format_value(m.median), ci, m.unit);
    j.push_back(to_json(m, false));
  }
  std::set<std::string> runs;
  for (const auto& m : rows) runs.insert(m.run_hash);
  text += fmt::format("{} measurement(s) of {} run(s) in {}\n", rows.size(), runs.size(), o.db);
  emit_text(text, {{"schema", "deep500.db.query"}, {"database", o.db}, {"measurements", j}}, o.out);
  return kExitOk;
}

int run_history(const DbOpts& o) {
  const ResultDb db = ResultDb::open(o.db);
  const auto rows = db.measurements(o.filter);
  if (rows.empty())
    throw InvalidArgument(fmt::format("no measurements of '{}' in {} (d5 db query lists what is there)",
                                      o.filter.case_glob, o.db));
  std::string text, series;
  nlohmann::json j = nlohmann::json::array();
  for (const auto& m : rows) {
    const std::string key = fmt::format("{} @ {} · {} ({}) on {}", m.case_name, m.backend, m.metric, m.unit, m.machine);
    if (key != series) text += (series.empty() ? "" : "\n") + key + "\n", series = key;
    const std::string ci = m.ci_lower && m.ci_upper ? fmt::format("[{:.4g}, {:.4g}]", *m.ci_lower, *m.ci_upper) : "-";
    text += fmt::format("  {:<20} {:<12} {:<10} n={:<5} median {:>10} {:>22}\n", m.start_utc.substr(0, 19),
                        short_commit(m.commit), m.state, m.n, format_value(m.median), ci);
    j.push_back(to_json(m, false));
  }
  emit_text(text, {{"schema", "deep500.db.history"}, {"database", o.db}, {"measurements", j}}, o.out);
  return kExitOk;
}

int run_regressions(const DbOpts& o) {
  const ResultDb db = ResultDb::open(o.db);
  const auto pairs = consecutive_pairs(db.measurements(o.filter), o.cmp);
  std::string text;
  nlohmann::json j = nlohmann::json::array();
  int64_t regressions = 0;
  for (const auto& p : pairs) {
    const Verdict v = p.comparison.verdict;
    regressions += v == Verdict::Slower;
    if (!o.all_pairs && v != Verdict::Slower) continue;
    const auto& c = p.comparison;
    const std::string ratio = c.ratio.available ? fmt::format("{:.3f} [{:.3f}, {:.3f}]", c.ratio.estimate,
                                                              c.ratio.lower, c.ratio.upper)
                                                : "-";
    text += fmt::format("{:<9} {} · {} on {}: {} ({}) -> {} ({}), ratio {}, p {:.3g}\n",
                        v == Verdict::Slower ? "REGRESSED" : to_string(v), c.key, c.metric, p.after.machine,
                        short_commit(p.before.commit), p.before.start_utc.substr(0, 19), short_commit(p.after.commit),
                        p.after.start_utc.substr(0, 19), ratio, c.test.p_value);
    nlohmann::json e = {{"case", p.after.case_name},       {"backend", p.after.backend},
                        {"metric", c.metric},              {"unit", c.unit},
                        {"machine", p.after.machine},      {"verdict", to_string(v)},
                        {"before", to_json(p.before, false)}, {"after", to_json(p.after, false)},
                        {"ratio", nullptr},                {"p_value", c.test.p_value},
                        {"reason", c.reason}};
    if (c.ratio.available) e["ratio"] = {{"estimate", c.ratio.estimate}, {"lower", c.ratio.lower}, {"upper", c.ratio.upper}};
    j.push_back(e);
  }
  text += fmt::format("{} regression(s) in {} pair(s) of consecutive runs (alpha {}, tolerance {}: a ratio "
                      "outside [1/{:.3g}, {:.3g}] with p < alpha)\n",
                      regressions, pairs.size(), o.cmp.alpha, o.cmp.tolerance, 1 + o.cmp.tolerance, 1 + o.cmp.tolerance);
  emit_text(text,
            {{"schema", "deep500.db.regressions"},
             {"database", o.db},
             {"alpha", o.cmp.alpha},
             {"tolerance", o.cmp.tolerance},
             {"level", o.cmp.level},
             {"pairs", pairs.size()},
             {"regressions", regressions},
             {"entries", j}},
            o.out);
  return regressions > 0 ? kExitFailed : kExitOk;
}

void add_filter_options(CLI::App& cmd, DbFilter& f, bool with_case) {
  if (with_case) cmd.add_option("--case", f.case_glob, "Case names matching this pattern (e.g. 'resnet*/torch')");
  cmd.add_option("--backend", f.backend, "Only this backend");
  cmd.add_option("--metric", f.metric, "Only this metric (e.g. latency)");
  cmd.add_option("--machine", f.machine, "Only runs on this host (the manifest's hostname)");
  cmd.add_option("--commit", f.commit, "Only runs of this commit (a prefix of the git revision)");
  cmd.add_option("--since", f.since, "Only runs that started at or after this UTC date or time (2026-11-01)");
  cmd.add_option("--until", f.until, "Only runs that started up to this UTC date or time, inclusive");
}

}  // namespace

Command register_db(CLI::App& app, const GlobalOptions&) {
  auto* db = app.add_subcommand("db", "The result history in SQLite: import, query, history, regressions");
  db->require_subcommand(1);
  auto o = std::make_shared<DbOpts>();
  o->db = default_db();
  auto with_db = [&o](CLI::App* cmd) {
    cmd->add_option("--db", o->db, "The database file (default: $D5_DB, else deep500.db); created when missing")
        ->capture_default_str();
    add_output_options(*cmd, o->out);
    return cmd;
  };
  auto* import = with_db(db->add_subcommand("import", "Store result files with their manifests (again: no change)"));
  import->add_option("files", o->files, "Result files (d5 ... --format json -o FILE)")->required()->check(CLI::ExistingFile);
  auto* query = with_db(db->add_subcommand("query", "Measurements by case, backend, metric, machine, commit, date"));
  add_filter_options(*query, o->filter, true);
  auto* history = with_db(db->add_subcommand("history", "One case's medians and CIs over time, per metric and machine"));
  history->add_option("case", o->filter.case_glob, "The case name, or a pattern ('lenet5/*')")->required();
  add_filter_options(*history, o->filter, false);
  auto* regressions = with_db(db->add_subcommand(
      "regressions", "Consecutive runs of each case and machine compared (Mann-Whitney, ratio CI); exit 1 on a regression"));
  add_filter_options(*regressions, o->filter, true);
  add_verdict_options(*regressions, o->cmp);
  regressions->add_flag("--all", o->all_pairs, "List every pair, not only the regressions");
  return {db, [=]() -> int {
            if (import->parsed()) return run_import(*o);
            if (query->parsed()) return run_query(*o);
            if (history->parsed()) return run_history(*o);
            if (regressions->parsed()) return run_regressions(*o);
            return kExitUsage;
          }};
}

}  // namespace d5::cli
