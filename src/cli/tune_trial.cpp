#include "tune_trial.h"

#include <filesystem>

#include <fmt/format.h>

#include "deep500/core/error.h"
#include "deep500/experiment/criteria.h"
#include "deep500/experiment/recipe_run.h"

namespace d5::cli {

namespace {

namespace fs = std::filesystem;

std::string text_of(const nlohmann::json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

// The training case: the one naming a quality target.
const CaseResult* target_case(const Results& r) {
  for (const auto& c : r.cases)
    if (c.extra.contains("target") && c.extra["target"].is_string() && !c.extra["target"].get<std::string>().empty())
      return &c;
  return nullptr;
}

EvaluationResult failed(std::string why) {
  EvaluationResult r;
  r.tier = 2;
  r.final = true;
  r.detail = std::move(why);
  return r;
}

// Reached: the objective, final. Not reached: minus the quality (higher is better) or the quality,
// final only when the trial was stopped early.
EvaluationResult to_target_outcome(const CaseResult& c, const TuneObjective& o, nlohmann::json& record) {
  EvaluationResult r;
  const std::string stop = c.extra.value("stop_reason", std::string("unknown"));
  record["stop_reason"] = stop;
  if (c.extra.value("reached_target", false) && c.extra.contains("time_to_target")) {
    const nlohmann::json& t = c.extra["time_to_target"];
    record["time_to_target_s"] = t.value("training_time_s", 0.0);
    record["steps_to_target"] = t.value("step", int64_t{0});
    r.tier = 0;
    r.value = o.quantity == "steps_to_target" ? t.value("step", 0.0) : t.value("training_time_s", 0.0);
    r.final = true;
    r.detail = fmt::format("reached {} at step {} after {:.3f} s of training", c.extra["target"].get<std::string>(),
                           t.value("step", int64_t{0}), t.value("training_time_s", 0.0));
    return r;
  }
  std::string measure = "accuracy";
  bool higher = true;
  if (c.extra.contains("quality") && c.extra["quality"].is_array() && !c.extra["quality"].empty()) {
    measure = c.extra["quality"][0].value("measure", measure);
    higher = c.extra["quality"][0].value("higher_is_better", true);
  }
  const std::string key = "final_test_" + measure;
  if (!c.extra.contains(key) || !c.extra[key].is_number())
    return failed(fmt::format("target not reached (stopped: {}) and no {} to rank the trial by", stop, key));
  const double q = c.extra[key].get<double>();
  record[key] = q;
  r.tier = 1;
  r.value = higher ? -q : q;
  r.final = stop == "time_limit";
  r.detail = fmt::format("not reached: {} {:.4g} (stopped: {})", measure, q,
                         r.final ? "early, slower than the best so far" : stop);
  return r;
}

EvaluationResult read_outcome(const TrialSetup& s, const RunRecord& rec, nlohmann::json& record) {
  if (!rec.valid) return failed(fmt::format("INVALID: {}", fmt::join(rec.invalid_reasons, "; ")));
  const Results results = read_results((fs::path(s.dir) / rec.result_file).string());
  if (s.objective.to_target) {
    const CaseResult* c = target_case(results);
    if (!c) return failed("the run names no quality target: tune --objective QUANTITY instead");
    return to_target_outcome(*c, s.objective, record);
  }
  const auto v = worst_value(results, s.objective.quantity, s.objective.lower_is_better);
  if (!v) return failed(fmt::format("the results have no value of {}", s.objective.quantity));
  record[s.objective.quantity] = *v;
  EvaluationResult r;
  r.tier = 0;
  r.value = s.objective.lower_is_better ? *v : -*v;
  r.detail = fmt::format("{} {:.6g}", s.objective.quantity, *v);
  return r;
}

}  // namespace

std::string evaluation_id(const Evaluation& e, bool baseline) {
  return baseline ? fmt::format("baseline-r{}", e.rung) : fmt::format("trial-{:03}-r{}", e.trial, e.rung);
}

EvaluationResult run_trial(const TrialSetup& s, const Evaluation& e, bool baseline) {
  const RecipeEntry& entry = s.recipe.entries.front();
  std::vector<Override> overrides = s.sets;
  for (const auto& [k, v] : e.config.items()) overrides.push_back({entry.name, k, text_of(v)});
  const bool integer = e.resource == std::floor(e.resource);
  overrides.push_back({entry.name, s.resource_key,
                       integer ? fmt::format("{}", static_cast<int64_t>(e.resource)) : fmt::format("{}", e.resource)});
  std::vector<PlannedRun> runs = plan_runs(s.recipe, overrides, s.globals.seed);
  add_run_globals(runs, {s.globals.threads, s.globals.deterministic, s.globals.math});
  D5_CHECK_ARG(runs.size() == 1,
               "entry '{}' plans {} runs per configuration (a grid): pin its grid options with --set KEY=VALUE",
               entry.name, runs.size());
  const std::string id = evaluation_id(e, baseline);
  RunRecord rec;
  rec.run = runs.front();
  rec.entry = entry.name;
  rec.result_file = id + ".json";
  rec.log_file = id + ".log";
  std::vector<std::string> args = rec.run.args;
  const bool trains = entry.command.size() == 1 && entry.command.front() == "train";
  nlohmann::json record = {{"result_file", rec.result_file}, {"log_file", rec.log_file}};
  if (s.objective.to_target && trains && e.incumbent && s.early_stop_factor > 0 &&
      !rec.run.params.contains("time-limit")) {
    const double limit = *e.incumbent * s.early_stop_factor;
    args.insert(args.end(), {"--time-limit", fmt::format("{:.3f}", limit)});
    record["time_limit_s"] = limit;
  }
  const std::string result_path = (fs::path(s.dir) / rec.result_file).string();
  std::error_code ec;
  fs::remove(result_path, ec);
  add_result_file_options(args, result_path);
  record["args"] = args;
  rec.process = run_process(s.executable, args, (fs::path(s.dir) / rec.log_file).string());
  record["wall_s"] = rec.process.wall_s;
  record["exit_code"] = rec.process.exit_code;
  judge_run(s.recipe, s.dir, rec);
  EvaluationResult r;
  try {
    r = read_outcome(s, rec, record);
  } catch (const Error& err) {  // a trial that wrote garbage is a failed trial, not a failed search
    r = failed(fmt::format("unreadable result file {}: {}", rec.result_file, err.what()));
  }
  r.record = std::move(record);
  return r;
}

}  // namespace d5::cli
