// Where an executor's time goes: per op type and pass, stacked, from `d5 net --breakdown`.
#include <algorithm>

#include <fmt/format.h>

#include "deep500/metrics/reporter.h"
#include "sections.h"

namespace d5::report {

using nlohmann::json;

void add_breakdown(const ReportInputs& in, Page& page) {
  json bars = json::array();
  std::vector<std::vector<std::string>> nodes;
  std::vector<double> totals;
  for (const auto& r : all_cases(in)) {
    if (!r.c->extra.contains("breakdown")) continue;
    // The layout of to_json(Breakdown) (executor_metrics.h), read field by field: a row without a
    // field is left out rather than failing the page.
    const json& b = r.c->extra["breakdown"];
    if (!b.is_object() || !b.contains("op_types") || !b["op_types"].is_array()) continue;
    const double executor_s = b.value("executor_seconds", 0.0), operator_s = b.value("operator_seconds", 0.0);
    const MetricRecord* t = primary_time(*r.c);
    const std::string label = r.c->name + file_suffix(r, in);
    const std::string call = t ? t->name + " " + format_with_ci(*t->summary, "s") : "";
    for (const auto& row : b["op_types"]) {
      const double s = row.value("seconds", 0.0);
      bars.push_back({{"case", label},
                      {"part", fmt::format("{} ({})", row.value("op_type", "?"), row.value("pass", "?"))},
                      {"seconds", s},
                      {"percent", row.value("percent", 0.0)},
                      {"nodes", row.value("nodes", 0)},
                      {"mean per call", format_seconds(s)},
                      {"call", call}});
    }
    // What the executor spends outside operators, so the bar adds up to the call.
    const double outside = executor_s - operator_s;
    bars.push_back({{"case", label},
                    {"part", "outside operators"},
                    {"seconds", std::max(0.0, outside)},
                    {"percent", b.value("outside_operators_percent", 0.0)},
                    {"nodes", 0},
                    {"mean per call", format_seconds(outside)},
                    {"call", call}});
    totals.push_back(executor_s);
    if (b.contains("nodes") && b["nodes"].is_array())
      for (const auto& n : b["nodes"])
        nodes.push_back({label, n.value("node", "?"), n.value("op_type", "?"), n.value("pass", "?"),
                         n.value("implementation", ""), format_seconds(n.value("seconds", 0.0)),
                         format_seconds(n.value("median_seconds", 0.0)), fmt::format("{:.1f}%", n.value("percent", 0.0))});
  }
  if (bars.empty()) return;
  std::sort(totals.begin(), totals.end());
  const TimeUnit u = time_unit_for(totals[totals.size() / 2]);
  for (auto& b : bars) b["time"] = b["seconds"].get<double>() * u.factor;
  page.section("breakdown", "Time per operator type",
               "Mean time per executor call spent in each operator type and pass (d5 net --breakdown), and outside "
               "operators. These are means over the timed calls, which add up to the call's mean; the call's "
               "median with its 95% CI is in each bar's tooltip and in the tables.");
  const int rows = static_cast<int>(totals.size());
  json spec = base_spec(std::move(bars), 640, std::max(60, rows * 34));
  spec["mark"] = "bar";
  spec["encoding"] = {
      {"y", {{"field", "case"}, {"type", "nominal"}, {"title", nullptr}, {"sort", nullptr}}},
      {"x", {{"field", "time"}, {"type", "quantitative"}, {"stack", "zero"},
             {"title", fmt::format("mean time per call ({})", u.name)}}},
      {"color", {{"field", "part"}, {"type", "nominal"}, {"title", "op type (pass)"}, {"sort", "-x"}}},
      {"order", {{"field", "seconds"}, {"sort", "descending"}}},
      {"tooltip", json::array({{{"field", "case"}}, {{"field", "part"}}, {{"field", "nodes"}},
                               {{"field", "mean per call"}}, {{"field", "percent"}, {"format", ".1f"}, {"title", "% of call"}},
                               {{"field", "call"}, {"title", "call median [95% CI]"}}})}};
  page.plot(std::move(spec), "Stacked per executor: one colour per op type and pass.");
  page.table({"case", "node", "op type", "pass", "implementation", "mean per call", "median per call", "% of call"},
             nodes, fmt::format("Per node ({} rows)", nodes.size()), true);
}

}  // namespace d5::report
