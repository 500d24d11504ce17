#include "deep500/experiment/time_to_solution.h"

#include <algorithm>
#include <filesystem>
#include <sstream>

#include <fmt/format.h>

#include "deep500/core/error.h"
#include "deep500/metrics/statistics.h"

namespace d5 {

namespace {

namespace fs = std::filesystem;

// The training case of a run's result file: the one that names a quality target.
const CaseResult* target_case(const Results& r) {
  for (const auto& c : r.cases)
    if (c.extra.contains("target") && c.extra["target"].is_string() && !c.extra["target"].get<std::string>().empty())
      return &c;
  return nullptr;
}

// The outcome of one run, and its target ("" when the run names none).
std::string read_outcome(const RecipeRun& run, const RunRecord& r, SeedOutcome& o) {
  o.seed = r.run.seed;
  o.run_id = r.run.id;
  const fs::path file = fs::path(run.results_dir) / r.result_file;
  const int code = r.process.exit_code;  // the codes judge_run reads results of
  if (!fs::exists(file) || (code != 0 && code != 1 && code != 3)) {
    o.why_not = r.process.signal != 0 ? fmt::format("killed by signal {}", r.process.signal)
                                      : fmt::format("exited {} without results", code);
    return "";
  }
  Results results;
  try {
    results = read_results(file.string());
  } catch (const Error& e) {
    o.why_not = fmt::format("unreadable result file: {}", e.what());
    return "";
  }
  const CaseResult* c = target_case(results);
  if (!c) return "";
  o.reached = c->extra.value("reached_target", false) && c->extra.contains("time_to_target");
  if (o.reached) {
    const nlohmann::json& t = c->extra["time_to_target"];
    o.time_to_target_s = t.value("training_time_s", 0.0);
    o.steps_to_target = t.value("step", int64_t{0});
  } else {
    o.why_not = "stopped: " + c->extra.value("stop_reason", std::string("unknown"));
  }
  return c->extra["target"].get<std::string>();
}

nlohmann::json or_null(std::optional<double> v) { return v ? nlohmann::json(*v) : nlohmann::json(); }

std::string group_name(const SolutionGroup& g) { return g.point.empty() ? g.entry : g.entry + " " + g.point; }

struct Distribution {
  std::vector<double> times, steps;  // of the seeds that reached the target
};

Distribution reached_samples(const SolutionGroup& g) {
  Distribution d;
  for (const auto& s : g.seeds)
    if (s.reached) {
      d.times.push_back(s.time_to_target_s);
      d.steps.push_back(static_cast<double>(s.steps_to_target));
    }
  return d;
}

// The median over the seeds that reached the target (the metric's samples), with its CI.
std::string median_text(const std::vector<double>& v, size_t seeds, const char* unit, int precision) {
  if (v.empty()) return "none reached";
  const Summary s = summarize(v);
  std::string t = fmt::format("median {:.{}f}{}", s.median, precision, unit);
  if (v.size() < seeds) t += fmt::format(" over the {} that reached it", v.size());
  if (s.median_ci.available)
    t += fmt::format(", 95% CI [{:.{}f}, {:.{}f}]", s.median_ci.lower, precision, s.median_ci.upper, precision);
  else
    t += " (no 95% CI: " + s.median_ci.reason + ")";
  return t;
}

// "" when the group's runs used the options the reference was measured with; else which differ.
std::string differs_from_reference(const RecipeEntry& e, const RecipeRun& run, const SolutionGroup& g) {
  for (const auto& r : run.runs) {
    if (r.entry != g.entry || r.run.point != g.point) continue;
    for (const auto& [k, v] : e.reference_for.items()) {
      const bool same = r.run.params.contains(k) && r.run.params[k] == v;
      if (!same)
        return fmt::format("{}={} where the reference used {}", k, r.run.params.contains(k) ? r.run.params[k].dump() : "(unset)",
                           v.dump());
    }
    return "";
  }
  return "";
}

}  // namespace

std::vector<SolutionGroup> solution_groups(const RecipeRun& run) {
  std::vector<SolutionGroup> groups;
  std::vector<bool> has_target;
  for (const auto& r : run.runs) {
    auto g = std::find_if(groups.begin(), groups.end(),
                          [&](const SolutionGroup& x) { return x.entry == r.entry && x.point == r.run.point; });
    if (g == groups.end()) {
      groups.push_back({r.entry, r.run.point, "", {}, std::nullopt});
      has_target.push_back(false);
      g = groups.end() - 1;
    }
    SeedOutcome o;
    const std::string target = read_outcome(run, r, o);
    if (!target.empty()) {
      has_target[static_cast<size_t>(g - groups.begin())] = true;
      g->target = target;
    }
    g->seeds.push_back(std::move(o));
  }
  std::vector<SolutionGroup> out;
  for (size_t i = 0; i < groups.size(); ++i)
    if (has_target[i] && groups[i].seeds.size() >= 2) out.push_back(std::move(groups[i]));
  return out;
}

void check_against_references(const Recipe& recipe, std::vector<SolutionGroup>& groups, RecipeRun& run) {
  for (auto& g : groups) {
    const auto e = std::find_if(recipe.entries.begin(), recipe.entries.end(),
                                [&](const RecipeEntry& x) { return x.name == g.entry; });
    if (e == recipe.entries.end() || e->reference_steps_to_target.empty()) continue;
    ReferenceCheck c;
    c.reference = e->reference_steps_to_target;
    c.reference_median = summarize(c.reference).median;
    const Distribution d = reached_samples(g);
    const std::string differs = differs_from_reference(*e, run, g);
    if (!differs.empty()) {
      c.detail = "not checked against the reference: " + differs;
    } else if (d.steps.empty()) {
      c.detail = "no seed reached the target: nothing to check against the reference";
    } else {
      c.median = summarize(d.steps).median;
      c.p_value = mann_whitney_u(d.steps, c.reference).p_value;
      c.flagged = c.p_value < 0.05 && c.median < c.reference_median;
      c.detail = fmt::format("median {:.0f} steps to the target against the reference's {:.0f} (Mann-Whitney p = {:.3g}, "
                             "{} seeds, {} reference runs){}",
                             c.median, c.reference_median, c.p_value, d.steps.size(), c.reference.size(),
                             c.flagged ? ": converges implausibly fast" : "");
    }
    if (c.flagged)
      for (auto& r : run.runs)
        if (r.entry == g.entry && r.run.point == g.point) {
          r.invalid_reasons.push_back(fmt::format("{}: {}", group_name(g), c.detail));
          r.valid = false;
        }
    g.reference = std::move(c);
  }
  run.valid = std::all_of(run.runs.begin(), run.runs.end(), [](const RunRecord& r) { return r.valid; });
}

Results time_to_solution_results(const std::vector<SolutionGroup>& groups, const nlohmann::json& manifest) {
  Results res;
  res.manifest = manifest;
  // The recipe run's manifest, but not marked as a run.json: readers (d5 compare, d5 report)
  // would look for each case's result file instead of reading these cases.
  if (res.manifest.contains("extra") && res.manifest["extra"].is_object()) {
    nlohmann::json& extra = res.manifest["extra"];
    nlohmann::json of = nlohmann::json::object();
    if (extra.contains("recipe")) of["recipe"] = extra["recipe"];
    if (extra.contains("run") && extra["run"].is_object() && extra["run"].contains("results_dir"))
      of["results_dir"] = extra["run"]["results_dir"];
    extra.erase("recipe");
    extra.erase("run");
    extra["time_to_solution_of"] = of;
  }
  for (const auto& g : groups) {
    const Distribution d = reached_samples(g);
    const size_t n = g.seeds.size();
    CaseResult c;
    c.name = group_name(g);
    c.level = "recipe";
    c.params = {{"entry", g.entry}, {"point", g.point}, {"target", g.target}};
    if (!d.times.empty()) {
      c.metrics.push_back(metric_record("time_to_target", "s", d.times));
      c.metrics.push_back(metric_record("steps_to_target", "steps", d.steps));
    }
    std::string olympic_why;
    const std::optional<double> olympic = olympic_mean(d.times, n, &olympic_why);
    nlohmann::json seeds = nlohmann::json::array();
    for (const auto& s : g.seeds) {
      nlohmann::json j = {{"seed", s.seed}, {"run", s.run_id}, {"reached", s.reached}};
      if (s.reached) {
        j["time_to_target_s"] = s.time_to_target_s;
        j["steps_to_target"] = s.steps_to_target;
      } else {
        j["why_not"] = s.why_not;
      }
      seeds.push_back(std::move(j));
    }
    c.extra = {{"target", g.target},
               {"seeds", n},
               {"reached", d.times.size()},
               {"success_rate", static_cast<double>(d.times.size()) / static_cast<double>(n)},
               {"median_time_to_target_s", or_null(median_counting_failures(d.times, n))},
               {"median_steps_to_target", or_null(median_counting_failures(d.steps, n))},
               {"olympic_time_to_target_s", or_null(olympic)},
               {"runs", seeds}};
    if (!olympic) c.extra["olympic_why_not"] = olympic_why;
    c.state = d.times.size() == n ? CaseState::Passed : CaseState::Failed;
    c.detail = fmt::format("{} of {} seeds reached {}; time to it {}", d.times.size(), n, g.target,
                           median_text(d.times, n, " s", 1));
    if (g.reference) {
      c.extra["reference"] = {{"steps_to_target", g.reference->reference},
                              {"median", g.reference->reference_median},
                              {"p_value", g.reference->p_value},
                              {"flagged", g.reference->flagged},
                              {"detail", g.reference->detail}};
      if (g.reference->flagged) {
        c.state = CaseState::Mistrusted;
        c.detail += "; " + g.reference->detail;
      }
    }
    res.cases.push_back(std::move(c));
  }
  return res;
}

std::string format_time_to_solution(const std::vector<SolutionGroup>& groups) {
  std::ostringstream s;
  s << "\ntime to solution over seeds\n";
  for (const auto& g : groups) {
    const Distribution d = reached_samples(g);
    const size_t n = g.seeds.size();
    std::string why;
    const std::optional<double> olympic = olympic_mean(d.times, n, &why);
    s << fmt::format("  {:<46} {} of {} seeds reached {}\n", group_name(g), d.times.size(), n, g.target);
    s << fmt::format("    time to target   {}\n", median_text(d.times, n, " s", 1));
    s << fmt::format("    steps to target  {}\n", median_text(d.steps, n, "", 0));
    s << (olympic ? fmt::format("    olympic score    {:.1f} s\n", *olympic)
                  : fmt::format("    olympic score    none: {}\n", why));
    if (g.reference)
      s << fmt::format("    {:<16} {}\n", g.reference->flagged ? "FLAGGED" : "reference", g.reference->detail);
  }
  return s.str();
}

}  // namespace d5
