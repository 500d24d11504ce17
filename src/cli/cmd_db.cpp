// d5 db: the result history (docs/db.md): import result files, query them, a case's history,
// regressions between consecutive runs (exit 1 when there is one), submissions of recipe runs to
// ranked lists (exit 1 when a bundle is refused).
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>

#include <fmt/format.h>

#include "cli_common.h"
#include "deep500/experiment/recipe_run.h"
#include "deep500/history/ranked_list.h"
#include "deep500/history/result_db.h"
#include "recipe_cli.h"

namespace d5::cli {

namespace {

struct DbOpts {
  std::string db;
  std::string bundle, recipe, submitter, system;
  bool verify_outputs = false;
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

// `d5 rerun --outputs-only` of the bundle in a child process: true when it reproduced every output;
// else a problem naming the differences (or the log).
bool rerun_outputs(const std::string& summary, std::vector<std::string>& problems) {
  namespace fs = std::filesystem;
  // Two submissions verified at once never rerun into one place.
  const fs::path work(make_unique_directory(fs::temp_directory_path().string(), "d5-submit"));
  const std::string out = (work / "rerun.json").string(), log = (work / "rerun.log").string();
  const ProcessOutcome p = run_process(self_executable(),
                                       {"rerun", "--outputs-only", summary, "--into", (work / "runs").string(),
                                        "--format", "json", "-o", out},
                                       log);
  std::ifstream in(out);
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  bool ok = p.exit_code == 0 && !j.is_discarded() && j.value("verdict", "") == "REPRODUCED";
  const nlohmann::json::json_pointer cases("/outputs/cases");
  if (ok && !(j.contains(cases) && j[cases].is_number() && j[cases].get<int>() > 0)) {
    problems.push_back("--verify-outputs: the recipe's runs have no outputs (loss, accuracies, steps) to compare, so "
                       "a rerun verifies nothing");
    ok = false;
  } else if (!ok) {
    std::string why = fmt::format("d5 rerun --outputs-only exited {}", p.exit_code);
    if (!j.is_discarded() && j.contains("outputs") && j["outputs"].contains("differences"))
      for (const auto& d : j["outputs"]["differences"]) why += "; " + d.get<std::string>();
    std::ifstream l(log);
    std::string line, last;
    while (std::getline(l, line))
      if (!line.empty()) last = line;
    problems.push_back(fmt::format("outputs not reproduced: {} (last line of its log: {})", why, last));
  }
  std::error_code ec;
  fs::remove_all(work, ec);
  return ok;
}

int run_submit(const DbOpts& o) {
  const std::string name = o.recipe.empty() ? recorded_recipe_name(o.bundle) : o.recipe;
  if (name.empty())
    throw InvalidArgument(fmt::format("{} names no recipe: give the published recipe with --recipe", o.bundle));
  const std::string published_path = resolve_recipe(name);
  // The text as d5 run records it (load_recipe keeps it byte for byte); a published recipe that
  // does not read is an error of its own, before any bundle is judged against it.
  BundleCheck check = check_bundle(o.bundle, load_recipe(published_path).text);
  Submission& s = check.submission;
  if (o.verify_outputs && check.problems.empty()) {
    if (!check.deterministic)
      check.problems.push_back("--verify-outputs needs a bundle run with --deterministic (d5 --deterministic run "
                               "...): without it outputs may differ from run to run, and a rerun verifies nothing");
    else if ((s.outputs_verified = rerun_outputs(check.summary_path, check.problems)))
      check.checks.push_back("outputs: d5 rerun --outputs-only reproduced every output bit for bit");
  }
  s.submitter = o.submitter;
  if (!o.system.empty()) s.system = o.system;
  std::string text = fmt::format("bundle {} against the published recipe {}\n", o.bundle, published_path);
  for (const auto& c : check.checks) text += "  ok       " + c + "\n";
  for (const auto& p : check.problems) text += "  PROBLEM  " + p + "\n";
  nlohmann::json j = {{"schema", "deep500.db.submit"}, {"database", o.db},       {"bundle", o.bundle},
                      {"recipe", published_path},      {"checks", check.checks}, {"problems", check.problems},
                      {"accepted", false}};
  if (!check.problems.empty()) {
    text += fmt::format("refused: {} problem(s); nothing was stored\n", check.problems.size());
    emit_text(text, j, o.out);
    return kExitFailed;
  }
  ResultDb db = ResultDb::open(o.db);
  const SubmitOutcome added = db.add_submission(s);
  const std::string score = s.score ? fmt::format("{:.6g}{}{}", *s.score, s.score_unit.empty() ? "" : " ", s.score_unit)
                                    : "none (" + s.score_detail + ")";
  text += added.added ? fmt::format("accepted: submission {} of {} ({} division), {} {}, {}; {} new file(s) in {}\n",
                                    s.id.substr(0, 12), s.recipe, s.division, s.score_quantity, score, s.validity,
                                    added.files, o.db)
                      : fmt::format("kept: submission {} is in {} already\n", s.id.substr(0, 12), o.db);
  j["accepted"] = true;
  j["added"] = added.added;
  j["submission"] = {{"id", s.id},       {"recipe", s.recipe},       {"division", s.division},
                     {"score", nullptr}, {"quantity", s.score_quantity}, {"unit", s.score_unit},
                     {"validity", s.validity}, {"outputs_verified", s.outputs_verified}};
  if (s.score) j["submission"]["score"] = *s.score;
  emit_text(text, j, o.out);
  return kExitOk;
}

int run_submissions(const DbOpts& o) {
  const ResultDb db = ResultDb::open(o.db);
  std::string text;
  nlohmann::json lists = nlohmann::json::array();
  for (const auto& l : ranked_lists(db.submissions(o.recipe))) {
    text += fmt::format("{} ({} division, recipe {}): by {}, {} is better\n", l.recipe, l.division,
                        l.recipe_hash.substr(0, 12), l.quantity, l.lower_is_better ? "lower" : "higher");
    nlohmann::json rows = nlohmann::json::array();
    auto row = [&](const DbSubmission& d, int rank) {
      const Submission& s = d.submission;
      const std::string reason = unranked_reason(d);
      text += fmt::format("  {:>4} {:>12} {:<16} {:<20} {:<16} {:<10} {}\n", rank > 0 ? std::to_string(rank) : "-",
                          s.score ? fmt::format("{:.6g}", *s.score) : "-", s.submitter, s.system, d.machine,
                          s.backends, rank > 0 ? s.id.substr(0, 12) : reason);
      rows.push_back({{"rank", rank > 0 ? nlohmann::json(rank) : nlohmann::json()},
                      {"id", s.id},
                      {"score", s.score ? nlohmann::json(*s.score) : nlohmann::json()},
                      {"submitter", s.submitter},
                      {"system", s.system},
                      {"machine", d.machine},
                      {"backends", s.backends},
                      {"validity", s.validity},
                      {"outputs_verified", s.outputs_verified},
                      {"submitted_utc", d.submitted_utc},
                      {"unranked_reason", reason}});
    };
    int rank = 0;
    for (const auto& d : l.ranked) row(d, ++rank);
    for (const auto& d : l.unranked) row(d, 0);
    lists.push_back({{"recipe", l.recipe}, {"recipe_hash", l.recipe_hash}, {"division", l.division},
                     {"quantity", l.quantity}, {"unit", l.unit}, {"lower_is_better", l.lower_is_better},
                     {"submissions", rows}});
  }
  if (lists.empty()) text += fmt::format("no submissions in {} (d5 db submit adds them)\n", o.db);
  emit_text(text, {{"schema", "deep500.db.submissions"}, {"database", o.db}, {"lists", lists}}, o.out);
  return kExitOk;
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
  auto* db = app.add_subcommand("db", "The result history in SQLite: import, query, history, regressions, submissions to ranked lists");
  db->require_subcommand(1);
  auto o = std::make_shared<DbOpts>();
  o->db = default_db();
  const char* user = std::getenv("USER");
  o->submitter = user && *user ? user : "anonymous";
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
  auto* submit = with_db(db->add_subcommand(
      "submit", "Check a recipe run's bundle against the published recipe and keep it for the ranked list; exit 1 "
                "when refused"));
  submit->add_option("bundle", o->bundle, "The results directory d5 run wrote (or its run.json)")
      ->required()
      ->check(CLI::ExistingPath);
  submit->add_option("--recipe", o->recipe,
                     "The published recipe (a file or a shipped recipe's name; default: the name run.json records)");
  submit->add_option("--submitter", o->submitter, "Who submits (default: $USER)");
  submit->add_option("--system", o->system, "The system's name on the list (default: the manifest's hostname)");
  submit->add_flag("--verify-outputs", o->verify_outputs,
                   "Run the recipe again (d5 rerun --outputs-only) and require every output bit for bit; needs a "
                   "bundle run with --deterministic");
  auto* submissions = with_db(db->add_subcommand("submissions", "The ranked lists of the submissions, per recipe and division"));
  submissions->add_option("--recipe", o->recipe, "Only this recipe's lists");
  return {db, [=]() -> int {
            if (import->parsed()) return run_import(*o);
            if (query->parsed()) return run_query(*o);
            if (history->parsed()) return run_history(*o);
            if (regressions->parsed()) return run_regressions(*o);
            if (submit->parsed()) return run_submit(*o);
            if (submissions->parsed()) return run_submissions(*o);
            return kExitUsage;
          }};
}

}  // namespace d5::cli
