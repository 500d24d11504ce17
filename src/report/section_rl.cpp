// Level 2, reinforcement learning (`d5 rl`): every seed's learning curve (the windowed mean return
// against environment steps) and, per agent, the distribution of steps and time to the target.
#include <fmt/format.h>

#include "sections.h"

namespace d5::report {

using nlohmann::json;

namespace {

std::string metric_or_dash(const CaseResult& c, const std::string& name) {
  const MetricRecord* m = find_metric(c, name);
  return m ? metric_cell(*m) : "-";
}

}  // namespace

void add_reinforcement_learning(const ReportInputs& in, Page& page) {
  json points = json::array();
  std::vector<std::vector<std::string>> rows;
  std::vector<double> targets;
  for (const auto& r : all_cases(in)) {
    const json& e = r.c->extra;
    if (!r.c->name.starts_with("rl/") || !e.contains("runs") || !e["runs"].is_array()) continue;
    const std::string series = series_of(r, in);
    for (const auto& run : e["runs"]) {
      const std::string label = fmt::format("{} · {} · seed {}", r.c->name, series, run.value("seed", 0));
      for (const auto& p : run.value("curve", json::array()))
        points.push_back({{"run", label}, {"case", r.c->name}, {"series", series}, {"seed", run.value("seed", 0)},
                          {"env_steps", p[0]}, {"seconds", p[1]}, {"mean_return", p[2]}});
    }
    rows.push_back({r.c->name + " · " + series, e.value("target", std::string()),
                    fmt::format("{:.0f}%", 100 * e.value("success_rate", 0.0)),
                    metric_or_dash(*r.c, "env_steps_to_target"), metric_or_dash(*r.c, "time_to_target"),
                    metric_or_dash(*r.c, "best_mean_return"), metric_or_dash(*r.c, "env_steps_per_second")});
  }
  if (rows.empty()) return;
  page.section("reinforcement-learning", "Reinforcement learning",
               "Agents of d5 rl: the mean return of the last episodes (the window of the run) against environment "
               "steps, one line per seed, and per agent the seeds' environment steps and seconds to the target.");
  if (!points.empty()) {
    json spec = base_spec(std::move(points));
    spec["mark"] = {{"type", "line"}, {"strokeWidth", 1}};
    spec["encoding"] = {
        {"x", {{"field", "env_steps"}, {"type", "quantitative"}, {"title", "environment steps"}}},
        {"y", {{"field", "mean_return"}, {"type", "quantitative"}, {"title", "mean return (window)"}}},
        {"color", {{"field", "case"}, {"type", "nominal"}}},
        {"detail", {{"field", "run"}, {"type", "nominal"}}},
        {"tooltip", json::array({{{"field", "run"}}, {{"field", "env_steps"}}, {{"field", "seconds"}, {"format", ".2f"}},
                                 {{"field", "mean_return"}, {"format", ".1f"}}})}};
    spec["params"] = json::array({{{"name", "zoom"}, {"select", "interval"}, {"bind", "scales"}}});
    page.plot(std::move(spec), "Windowed mean return against environment steps, every seed of every agent.");
  }
  page.table({"agent", "target", "seeds that reached it", "environment steps to it: median [95% CI]",
              "seconds to it", "best mean return", "environment steps/s"},
             rows);
}

}  // namespace d5::report
