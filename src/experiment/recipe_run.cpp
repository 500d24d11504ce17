#include "deep500/experiment/recipe_run.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "deep500/core/error.h"
#include "deep500/experiment/criteria.h"

extern char** environ;

namespace d5 {

namespace {

namespace fs = std::filesystem;

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The last lines of a log, for a run that ended without results.
std::string log_tail(const std::string& path, size_t lines = 3) {
  std::ifstream in(path);
  std::vector<std::string> all;
  for (std::string l; std::getline(in, l);)
    if (!l.empty()) all.push_back(l);
  const size_t from = all.size() > lines ? all.size() - lines : 0;
  std::string s;
  for (size_t i = from; i < all.size(); ++i) s += (s.empty() ? "" : " | ") + all[i];
  return s;
}

std::string command_text(const Recipe& recipe, const RunRecord& r) {
  return fmt::format("d5 {}", fmt::join(recipe.entries[r.run.entry].command, " "));
}

}  // namespace

ProcessOutcome run_process(const std::string& executable, const std::vector<std::string>& args,
                           const std::string& log_path) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  std::vector<std::string> argv_s = {executable};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  const auto t0 = std::chrono::steady_clock::now();
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, executable.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) D5_THROW(IoError, "cannot start '{}': {}", executable, std::strerror(rc));
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) D5_THROW(IoError, "waiting for '{}' failed: {}", executable, std::strerror(errno));
  ProcessOutcome out;
  out.wall_s = seconds_since(t0);
  if (WIFEXITED(status)) out.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) out.signal = WTERMSIG(status);
  return out;
}

void judge_run(const Recipe& recipe, const std::string& results_dir, RunRecord& r) {
  const RecipeEntry& e = recipe.entries[r.run.entry];
  const std::string path = (fs::path(results_dir) / r.result_file).string();
  // 0: all passed; 1: a case failed; 3: a case was unimplemented. Each still wrote its results.
  const int code = r.process.exit_code;
  Results results;
  bool have = false;
  std::string unreadable;
  if ((code == 0 || code == 1 || code == 3) && fs::exists(path)) {
    try {
      results = read_results(path);
      have = true;
    } catch (const Error& e) {  // a run that wrote garbage is judged, not a crash of the whole recipe
      unreadable = e.what();
    }
  }
  if (!unreadable.empty()) {
    r.invalid_reasons.push_back(fmt::format("{} wrote an unreadable result file {}: {}", command_text(recipe, r),
                                            r.result_file, unreadable));
  } else if (!have) {
    r.invalid_reasons.push_back(
        r.process.signal != 0
            ? fmt::format("{} was killed by signal {} (log: {})", command_text(recipe, r), r.process.signal, r.log_file)
            : fmt::format("{} exited {} without results: {} (log: {})", command_text(recipe, r), code,
                          log_tail((fs::path(results_dir) / r.log_file).string()), r.log_file));
  }
  for (const auto& c : results.cases) {
    if (c.extra.contains("samples") && c.extra["samples"].is_number_integer())
      r.samples += c.extra["samples"].get<int64_t>();
    if (c.state == CaseState::Mistrusted)
      r.invalid_reasons.push_back(fmt::format("{}: MISTRUSTED: {}", case_label(c), c.detail));
    if (c.outcome && c.outcome->validity == Validity::Invalid)
      r.invalid_reasons.push_back(fmt::format("{}: {}", case_label(c), c.outcome->reason));
  }
  r.valid = r.invalid_reasons.empty();
  for (const auto& c : e.criteria) {
    if (have || c.quantity == "wall_time") {
      r.criteria.push_back(evaluate(c, results, r.process.wall_s));
    } else {
      r.criteria.push_back({c.text, false, std::nullopt, "no results to check"});
    }
  }
  r.criteria.push_back(have ? no_failed_cases(results)
                            : CriterionResult{"no case FAILED", false, std::nullopt, "no results"});
  r.passed = std::all_of(r.criteria.begin(), r.criteria.end(), [](const auto& c) { return c.passed; });
}

RecipeRun run_recipe(const Recipe& recipe, const std::vector<PlannedRun>& runs, const RecipeRunOptions& o,
                     const ProcessRunner& runner) {
  D5_CHECK_ARG(!o.results_dir.empty(), "a recipe run needs a results directory");
  std::error_code ec;
  fs::create_directories(o.results_dir, ec);
  if (ec) D5_THROW(IoError, "cannot create the results directory '{}': {}", o.results_dir, ec.message());
  RecipeRun out;
  out.results_dir = o.results_dir;
  const auto t0 = std::chrono::steady_clock::now();
  for (size_t i = 0; i < runs.size(); ++i) {
    RunRecord r;
    r.run = runs[i];
    r.entry = recipe.entries[r.run.entry].name;
    r.result_file = r.run.id + ".json";
    r.log_file = r.run.id + ".log";
    if (o.progress) o.progress(i, runs.size(), r.run.label.empty() ? r.entry : r.entry + " " + r.run.label);
    std::vector<std::string> args = r.run.args;
    const std::string result_path = (fs::path(o.results_dir) / r.result_file).string();
    fs::remove(result_path, ec);  // a stale file from an earlier run must not pass for this one
    add_result_file_options(args, result_path);
    const auto e0 = o.energy_domains.empty() ? std::nullopt : read_energy(o.energy_domains);
    r.process = runner(args, (fs::path(o.results_dir) / r.log_file).string());
    const auto e1 = e0 ? read_energy(o.energy_domains) : std::nullopt;
    judge_run(recipe, o.results_dir, r);
    if (e0 && e1) r.energy_j = package_joules_between(o.energy_domains, *e0, *e1);
    if (r.energy_j && r.samples > 0) r.energy_per_sample_j = *r.energy_j / static_cast<double>(r.samples);
    r.cost = o.price_per_node_hour * o.nodes * r.process.wall_s / 3600;
    out.runs.push_back(std::move(r));
  }
  if (o.progress) o.progress(runs.size(), runs.size(), "");
  out.wall_s = seconds_since(t0);
  out.cost = o.price_per_node_hour * o.nodes * out.wall_s / 3600;
  for (const auto& c : recipe.criteria) out.criteria.push_back(evaluate_wall_time(c, out.wall_s));
  out.valid = std::all_of(out.runs.begin(), out.runs.end(), [](const auto& r) { return r.valid; });
  out.passed = std::all_of(out.runs.begin(), out.runs.end(), [](const auto& r) { return r.passed; }) &&
               std::all_of(out.criteria.begin(), out.criteria.end(), [](const auto& c) { return c.passed; });
  return out;
}

namespace {

nlohmann::json to_json(const CriterionResult& c) {
  nlohmann::json j = {{"criterion", c.criterion}, {"verdict", c.passed ? "PASS" : "FAIL"}, {"detail", c.detail}};
  if (c.value) j["value"] = *c.value;
  return j;
}

nlohmann::json to_json(const std::vector<CriterionResult>& cs) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& c : cs) a.push_back(to_json(c));
  return a;
}

}  // namespace

Results recipe_run_results(const RecipeRun& run, const Recipe& recipe, const std::vector<std::string>& overrides,
                           nlohmann::json manifest) {
  Results res;
  for (const auto& r : run.runs) {
    CaseResult c;
    c.name = r.run.label.empty() ? r.entry : r.entry + " " + r.run.label;
    c.level = "recipe";
    if (r.run.params.contains("backend") && r.run.params["backend"].is_string())
      c.backend = r.run.params["backend"].get<std::string>();
    c.params = nlohmann::json::parse(r.run.params.dump());
    c.state = r.passed ? CaseState::Passed : CaseState::Failed;
    for (const auto& k : r.criteria)
      if (!k.passed) {
        c.detail = fmt::format("FAIL {}: {}", k.criterion, k.detail);
        break;
      }
    if (c.detail.empty()) c.detail = fmt::format("{} criteria PASS", r.criteria.size());
    c.extra = {{"entry", r.entry},
               {"id", r.run.id},
               {"seed", r.run.seed},
               {"args", r.run.args},
               {"result_file", r.result_file},
               {"log_file", r.log_file},
               {"exit_code", r.process.exit_code},
               {"wall_time_s", r.process.wall_s},
               {"validity", r.valid ? "VALID" : "INVALID"},
               {"invalid_reasons", r.invalid_reasons},
               {"criteria", to_json(r.criteria)}};
    if (r.process.signal != 0) c.extra["signal"] = r.process.signal;
    if (r.cost > 0) c.extra["cost"] = r.cost;
    if (r.energy_j) c.extra["energy_j"] = *r.energy_j;
    if (r.energy_per_sample_j) c.extra["energy_per_sample_j"] = *r.energy_per_sample_j;
    res.cases.push_back(std::move(c));
  }
  manifest["extra"]["recipe"] = {{"name", recipe.name},
                                 {"description", recipe.description},
                                 {"source", recipe.source},
                                 {"text", recipe.text},
                                 {"division", to_string(recipe.division)},
                                 {"require_valid", recipe.require_valid},
                                 {"overrides", overrides}};
  manifest["extra"]["run"] = {{"results_dir", run.results_dir},
                              {"working_directory", fs::current_path().string()},
                              {"wall_time_s", run.wall_s},
                              {"criteria", to_json(run.criteria)},
                              {"verdict", run.passed ? "PASS" : "FAIL"},
                              {"validity", run.valid ? "VALID" : "INVALID"}};
  if (run.cost > 0) manifest["extra"]["run"]["cost"] = run.cost;
  res.manifest = std::move(manifest);
  return res;
}

bool is_recipe_run(const Results& r) {
  return r.manifest.contains("extra") && r.manifest["extra"].is_object() && r.manifest["extra"].contains("recipe");
}

Results recipe_run_cases(const Results& summary, const std::string& dir) {
  Results all;
  all.manifest = summary.manifest;
  for (const auto& c : summary.cases) {
    const std::string file = (fs::path(dir) / c.extra.value("result_file", "")).string();
    if (!c.extra.contains("result_file") || !fs::exists(file)) continue;
    for (auto rc : read_results(file).cases) {
      rc.name = c.extra.value("id", c.name) + ": " + rc.name;
      all.cases.push_back(std::move(rc));
    }
  }
  return all;
}

std::string format_recipe_run(const RecipeRun& run, const Recipe& recipe, bool require_valid) {
  std::ostringstream s;
  s << fmt::format("recipe {} ({} division): {} run(s), results in {}\n", recipe.name, to_string(recipe.division),
                   run.runs.size(), run.results_dir);
  int passed = 0, failed = 0;
  for (const auto& r : run.runs) {
    std::string extras = r.cost > 0 ? fmt::format("  cost {:.4f}", r.cost) : "";
    if (r.energy_j) extras += fmt::format("  energy {:.1f} J", *r.energy_j);
    if (r.energy_per_sample_j) extras += fmt::format(" ({:.3g} J/sample)", *r.energy_per_sample_j);
    s << fmt::format("\n{:<48} {:<8} {:<5} {:>8.1f} s{}\n", r.run.label.empty() ? r.entry : r.entry + " " + r.run.label,
                     r.valid ? "VALID" : "INVALID", r.passed ? "PASS" : "FAIL", r.process.wall_s, extras);
    for (const auto& why : r.invalid_reasons) s << "    INVALID: " << why << "\n";
    for (const auto& c : r.criteria) {
      (c.passed ? passed : failed)++;
      s << fmt::format("    {:<5} {:<40} {}\n", c.passed ? "PASS" : "FAIL", c.criterion, c.detail);
    }
  }
  if (!run.criteria.empty()) s << "\nrecipe criteria\n";
  for (const auto& c : run.criteria) {
    (c.passed ? passed : failed)++;
    s << fmt::format("    {:<5} {:<40} {}\n", c.passed ? "PASS" : "FAIL", c.criterion, c.detail);
  }
  const bool ok = run.passed && (run.valid || !require_valid);
  s << fmt::format("\n{}: {}, {} ({} criteria passed, {} failed) in {:.1f} s{}\n", recipe.name, ok ? "PASS" : "FAIL",
                   run.valid ? "VALID" : "INVALID", passed, failed, run.wall_s,
                   run.cost > 0 ? fmt::format(", cost {:.4f}", run.cost) : "");
  if (!run.valid && !require_valid)
    s << "(INVALID runs do not fail the recipe unless it sets require_valid or --require-valid is given)\n";
  return s.str();
}

}  // namespace d5
