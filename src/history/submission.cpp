// Checking a submission's bundle (docs/db.md#submissions): everything run.json claims is derived
// again from the published recipe and the runs' result files.
#include "deep500/history/submission.h"

#include <algorithm>
#include <filesystem>
#include <map>

#include <fmt/format.h>

#include "core/digest.h"
#include "core/sysfs_parse.h"
#include "deep500/core/error.h"
#include "deep500/experiment/recipe_run.h"
#include "deep500/experiment/time_to_solution.h"
#include "deep500/metrics/statistics.h"

namespace d5 {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string text_field(const json& j, const char* key) {
  return j.is_object() && j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : "";
}

// A run's result file name as run.json records it: a plain name inside the bundle, nothing that
// could reach outside it.
bool plain_name(const std::string& name) {
  return !name.empty() && name.find('/') == std::string::npos && name != "." && name != "..";
}

std::string value_text(const std::optional<double>& v) { return v ? fmt::format("{:.6g}", *v) : "no value"; }

// run.json's record of one run against the judgement of its result file now.
void compare_judgement(const json& recorded, const RunRecord& now, const std::string& id,
                       std::vector<std::string>& problems) {
  const std::string validity = now.valid ? "VALID" : "INVALID";
  if (text_field(recorded, "validity") != validity)
    problems.push_back(fmt::format("run {}: run.json says {}, its result file makes it {}", id,
                                   text_field(recorded, "validity"), validity));
  const json crit = recorded.value("criteria", json::array());
  if (!crit.is_array() || crit.size() != now.criteria.size()) {
    problems.push_back(fmt::format("run {}: run.json lists {} criteria, the recipe gives {}", id,
                                   crit.is_array() ? crit.size() : 0, now.criteria.size()));
    return;
  }
  for (size_t i = 0; i < crit.size(); ++i) {
    const CriterionResult& c = now.criteria[i];
    // A plain double and a flag: GCC's -O3 flow analysis takes an optional here for uninitialized.
    const bool has_was = crit[i].contains("value") && crit[i]["value"].is_number();
    const double was = has_was ? crit[i]["value"].get<double>() : 0.0;
    const std::string verdict = c.passed ? "PASS" : "FAIL";
    const bool same_value = has_was == c.value.has_value() && (!has_was || was == *c.value);
    if (text_field(crit[i], "criterion") != c.criterion || text_field(crit[i], "verdict") != verdict || !same_value)
      problems.push_back(fmt::format("run {}: criterion '{}' is recorded {} ({}), its result file gives {} ({})", id,
                                     c.criterion, text_field(crit[i], "verdict"),
                                     has_was ? fmt::format("{:.6g}", was) : "no value", verdict, value_text(c.value)));
  }
}

// The bundle's id: its files' names and hashes, in name order, hashed once more.
std::string bundle_id(std::vector<BundleFile> files) {
  std::sort(files.begin(), files.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  std::string text;
  for (const auto& f : files) text += f.name + "\t" + f.sha256 + "\n";
  return sha256_hex(text);
}

struct Plan {
  Recipe recipe;
  std::vector<PlannedRun> runs;
};

// The recipe run.json recorded, against the published one, and the runs it plans.
std::optional<Plan> plan_from_manifest(const json& m, const std::string& published, BundleCheck& out) {
  auto& problems = out.problems;
  const json& rec = m["extra"]["recipe"];
  const std::string text = text_field(rec, "text");
  Submission& s = out.submission;
  s.recipe_hash = sha256_hex(text);
  const std::string published_hash = sha256_hex(published);
  if (s.recipe_hash != published_hash)
    problems.push_back(fmt::format("the recipe it ran is not the published one (SHA-256 {} against {}): a ranked "
                                   "list compares runs of one recipe; run it unmodified, changing only its mutable "
                                   "options with --set",
                                   s.recipe_hash.substr(0, 12), published_hash.substr(0, 12)));
  else
    out.checks.push_back(fmt::format("recipe: the published text (SHA-256 {})", s.recipe_hash.substr(0, 12)));
  Plan plan;
  try {
    plan.recipe = parse_recipe(text, "run.json's recipe");
  } catch (const Error& e) {
    problems.push_back(fmt::format("the recorded recipe does not read: {}", e.what()));
    return std::nullopt;
  }
  s.recipe = plan.recipe.name;
  s.division = to_string(plan.recipe.division);
  if (text_field(rec, "division") != s.division)
    problems.push_back(fmt::format("run.json records the {} division; the recipe is in the {} division",
                                   text_field(rec, "division"), s.division));
  if (!m.contains("seeds") || !m["seeds"].contains("master") || !m["seeds"]["master"].is_number_unsigned()) {
    problems.push_back("the manifest has no master seed (seeds.master): the runs cannot be planned again");
    return std::nullopt;
  }
  const auto overrides = rec.value("overrides", std::vector<std::string>{});
  RunGlobals g;
  g.threads = m.contains("threads") && m["threads"].is_object() ? m["threads"].value("requested", 0) : 0;
  g.deterministic = m.value("deterministic", false);
  g.math = m.value("f32_math", std::string("strict"));
  out.deterministic = g.deterministic;
  try {
    plan.runs = plan_runs(plan.recipe, parse_overrides(overrides), m["seeds"]["master"].get<uint64_t>());
  } catch (const Error& e) {
    problems.push_back(fmt::format("the recorded --set overrides are not allowed by the recipe: {}", e.what()));
    return std::nullopt;
  }
  add_run_globals(plan.runs, g);
  out.checks.push_back(fmt::format("plan: {} run(s) from the recipe with --set [{}], seed {}", plan.runs.size(),
                                   fmt::join(overrides, " "), m["seeds"]["master"].get<uint64_t>()));
  return plan;
}

struct JudgedRun {
  const CaseResult* recorded;
  RunRecord now;
};

// One run of the bundle: its result file present, made by the planned command, judged as recorded.
void check_run(const Plan& plan, const PlannedRun& planned, const CaseResult& c, const fs::path& dir,
               BundleCheck& out, std::vector<std::string>& backends, std::vector<JudgedRun>& judged) {
  auto& problems = out.problems;
  const std::string id = c.extra.value("id", std::string());
  if (id != planned.id) {
    problems.push_back(fmt::format("run '{}' is not the planned run '{}'", id, planned.id));
    return;
  }
  if (c.extra.value("args", std::vector<std::string>{}) != planned.args)
    problems.push_back(fmt::format("run {}: its recorded command is not the planned 'd5 {}'", id,
                                   fmt::join(planned.args, " ")));
  RunRecord r;
  r.run = planned;
  r.entry = plan.recipe.entries[planned.entry].name;
  r.result_file = c.extra.value("result_file", std::string());
  r.log_file = c.extra.value("log_file", std::string());
  r.process.exit_code = c.extra.value("exit_code", -1);
  r.process.signal = c.extra.value("signal", 0);
  r.process.wall_s = c.extra.value("wall_time_s", 0.0);
  if (!plain_name(r.result_file)) {
    problems.push_back(fmt::format("run {}: result file '{}' is not a file name inside the bundle", id, r.result_file));
    return;
  }
  const fs::path file = dir / r.result_file;
  std::string why;
  const auto bytes = detail::read_text_file(file.string(), &why);
  if (!bytes) {
    problems.push_back(fs::exists(file) ? fmt::format("run {}: its result file {} cannot be read: {}", id, r.result_file, why)
                                        : fmt::format("run {}: its result file {} is missing", id, r.result_file));
    return;
  }
  Results results;
  try {
    results = results_from_json(json::parse(*bytes));
  } catch (const std::exception& e) {
    problems.push_back(fmt::format("run {}: {} is not a result file: {}", id, r.result_file, e.what()));
    return;
  }
  out.submission.files.push_back({r.result_file, file.string(), sha256_hex(*bytes)});
  const json& cl = results.manifest.contains("command_line") ? results.manifest["command_line"] : json();
  const auto argv = cl.is_array() ? cl.get<std::vector<std::string>>() : std::vector<std::string>{};
  if (argv.empty() || without_result_file_options({argv.begin() + 1, argv.end()}) != planned.args)
    problems.push_back(fmt::format("run {}: {} was not written by the planned command 'd5 {}'", id, r.result_file,
                                   fmt::join(planned.args, " ")));
  for (const auto& rc : results.cases)
    if (!rc.backend.empty() && std::find(backends.begin(), backends.end(), rc.backend) == backends.end())
      backends.push_back(rc.backend);
  judge_run(plan.recipe, dir.string(), r);
  judged.push_back({&c, std::move(r)});
}

// The judged runs against run.json's record, once the runs of each grid point were checked
// against the recipe's reference steps to the target, as d5 run checked them.
void compare_judgements(const Plan& plan, const fs::path& dir, std::vector<JudgedRun>& judged, BundleCheck& out) {
  RecipeRun now;
  now.results_dir = dir.string();
  for (const auto& j : judged) now.runs.push_back(j.now);
  std::vector<SolutionGroup> groups = solution_groups(now);
  check_against_references(plan.recipe, groups, now);
  for (size_t i = 0; i < judged.size(); ++i) {
    const CaseResult& c = *judged[i].recorded;
    const RunRecord& r = now.runs[i];
    const std::string id = c.extra.value("id", std::string());
    compare_judgement(c.extra, r, id, out.problems);
    const bool recorded_pass = c.state == CaseState::Passed;
    if (recorded_pass != r.passed)
      out.problems.push_back(fmt::format("run {}: run.json says {}, its criteria {}", id,
                                         recorded_pass ? "PASSED" : "FAILED", r.passed ? "pass" : "fail"));
    if (!r.valid)
      out.submission.invalid_reasons.insert(out.submission.invalid_reasons.end(), r.invalid_reasons.begin(),
                                            r.invalid_reasons.end());
  }
}

// The unit of a score that is a metric (its median or a statistic of its samples, except the
// count); "" for a fact of the cases' extra.
std::string metric_unit(const Results& r, const std::string& quantity) {
  const size_t dot = quantity.find('.');
  if (dot != std::string::npos && quantity.substr(dot + 1) == "n") return "";
  for (const auto& c : r.cases) {
    if (c.extra.is_object() && c.extra.contains(quantity.substr(0, dot))) return "";
    for (const auto& m : c.metrics)
      if (m.name == quantity.substr(0, dot)) return m.unit;
  }
  return "";
}

json run_record(const json& manifest) {
  const json& extra = manifest.contains("extra") ? manifest["extra"] : json();
  return extra.is_object() && extra.contains("run") && extra["run"].is_object() ? extra["run"] : json::object();
}

void check_manifest(const json& m, std::vector<std::string>& problems) {
  for (const char* key : {"hostname", "git_revision", "start_time_utc", "version"})
    if (text_field(m, key).empty())
      problems.push_back(fmt::format("the manifest has no '{}': the list could not say where and what ran", key));
}

}  // namespace

void score_submission(const Recipe& recipe, const Results& summary, const std::string& dir, Submission& s) {
  const RecipeScore& sc = recipe.score;
  s.score_quantity = sc.quantity;
  s.lower_is_better = sc.lower_is_better;
  s.score.reset();
  const json run = run_record(summary.manifest);
  if (sc.quantity == "wall_time" && sc.entry.empty()) {
    if (run.contains("wall_time_s") && run["wall_time_s"].is_number()) s.score = run["wall_time_s"].get<double>();
    s.score_unit = "s";
    s.score_detail = s.score ? "the whole recipe's wall time" : "run.json has no wall time";
    return;
  }
  std::vector<double> values;
  size_t runs = 0;
  for (const auto& c : summary.cases) {
    const std::string entry = c.extra.value("entry", std::string()), id = c.extra.value("id", std::string());
    if (!sc.entry.empty() && entry != sc.entry) continue;
    std::optional<double> v;
    if (sc.quantity == "wall_time") {
      v = c.extra.value("wall_time_s", 0.0);
      s.score_unit = "s";
    } else {
      const std::string file = c.extra.value("result_file", std::string());
      try {
        if (plain_name(file) && fs::exists(fs::path(dir) / file)) {
          const Results r = read_results((fs::path(dir) / file).string());
          v = worst_value(r, sc.quantity, sc.lower_is_better);
          if (s.score_unit.empty()) s.score_unit = metric_unit(r, sc.quantity);
        }
      } catch (const Error&) {
        // An unreadable result file is a problem check_bundle reports; here it only has no value.
      }
    }
    if (!v && !sc.olympic) {
      s.score_detail = fmt::format("run {} has no value of {}", id, sc.quantity);
      return;
    }
    if (v) values.push_back(*v);
    ++runs;
  }
  if (runs == 0) {
    s.score_detail = fmt::format("no run of entry '{}'", sc.entry);
    return;
  }
  if (sc.olympic) {
    // olympic_mean counts a run without a value as the slowest: negated, a higher-is-better
    // quantity's worst run is the slowest too.
    const double sign = sc.lower_is_better ? 1 : -1;
    for (double& x : values) x *= sign;
    std::string why;
    const std::optional<double> o = olympic_mean(values, runs, &why);
    if (!o) {
      s.score_detail = "no olympic score: " + why;
      return;
    }
    s.score = sign * *o;
    s.score_detail = fmt::format("olympic mean of {} runs (the best and the worst dropped)", runs);
    return;
  }
  s.score = summarize(values).median;
  s.score_detail = values.size() == 1 ? "one run" : fmt::format("median of {} runs", values.size());
}

namespace {

void check_summary(const Results& sum, const fs::path& dir, const std::string& published, BundleCheck& out) {
  Submission& s = out.submission;
  check_manifest(sum.manifest, out.problems);
  s.system = text_field(sum.manifest, "hostname");  // the list's default name for the system
  const auto plan = plan_from_manifest(sum.manifest, published, out);
  if (!plan) return;
  if (plan->runs.size() != sum.cases.size()) {
    out.problems.push_back(fmt::format("run.json has {} run(s); the recipe plans {}", sum.cases.size(), plan->runs.size()));
    return;
  }
  std::vector<std::string> backends;
  const size_t problems_before = out.problems.size();
  std::vector<JudgedRun> judged;
  for (size_t i = 0; i < plan->runs.size(); ++i)
    check_run(*plan, plan->runs[i], sum.cases[i], dir, out, backends, judged);
  compare_judgements(*plan, dir, judged, out);
  if (out.problems.size() == problems_before)
    out.checks.push_back(fmt::format("runs: {} result file(s) present, written by the planned commands, judged as "
                                     "run.json records",
                                     plan->runs.size()));
  s.backends = fmt::format("{}", fmt::join(backends, ","));
  const json run = run_record(sum.manifest);
  s.validity = s.invalid_reasons.empty() ? "VALID" : "INVALID";
  if (text_field(run, "validity") != s.validity)
    out.problems.push_back(fmt::format("run.json says the recipe run was {}; its runs make it {}",
                                       text_field(run, "validity"), s.validity));
  if (text_field(run, "verdict") != "PASS")
    out.problems.push_back("the recipe run FAILed its criteria (run.json: manifest.extra.run.verdict): only runs "
                           "that pass are submitted");
  const double wall = run.value("wall_time_s", 0.0);
  for (const auto& c : plan->recipe.criteria)
    if (!evaluate_wall_time(c, wall).passed)
      out.problems.push_back(fmt::format("the recipe's criterion '{}' fails: wall time {:.1f} s", c.text, wall));
  score_submission(plan->recipe, sum, dir.string(), s);
}

}  // namespace

std::string bundle_summary_path(const std::string& path) {
  return fs::is_directory(path) ? (fs::path(path) / "run.json").string() : path;
}

std::string recorded_recipe_name(const std::string& path) {
  const auto text = detail::read_text_file(bundle_summary_path(path));
  const json j = text ? json::parse(*text, nullptr, false) : json();
  const json::json_pointer at("/manifest/extra/recipe/name");
  return j.is_object() && j.contains(at) && j[at].is_string() ? j[at].get<std::string>() : "";
}

BundleCheck check_bundle(const std::string& path, const std::string& published) {
  BundleCheck out;
  const fs::path summary = bundle_summary_path(path);
  const fs::path dir = summary.parent_path().empty() ? fs::path(".") : summary.parent_path();
  out.summary_path = summary.string();
  const auto bytes = detail::read_text_file(summary.string());
  if (!bytes)
    D5_THROW(IoError, "cannot read {}: a submission is the results directory `d5 run` wrote (with its run.json)",
             summary.string());
  Submission& s = out.submission;
  s.files.push_back({"run.json", summary.string(), sha256_hex(*bytes)});
  Results sum;
  try {
    sum = results_from_json(json::parse(*bytes));
  } catch (const std::exception& e) {
    out.problems.push_back(fmt::format("{} is not a result file: {}", summary.string(), e.what()));
    return out;
  }
  if (!is_recipe_run(sum) || !sum.manifest["extra"]["recipe"].is_object()) {
    out.problems.push_back(fmt::format("{} is a result file, but not of a recipe run (no manifest.extra.recipe): "
                                       "submit what `d5 run RECIPE` wrote",
                                       summary.string()));
    return out;
  }
  try {
    check_summary(sum, dir, published, out);
  } catch (const nlohmann::json::exception& e) {
    // A field of the wrong type: run.json was not written by d5 run, or was edited.
    out.problems.push_back(fmt::format("{}: a malformed field: {}", summary.string(), e.what()));
  }
  s.id = bundle_id(s.files);
  return out;
}

}  // namespace d5
