// A result history over time (d5 report --db, docs/report.md#history): per metric, each series'
// medians by run start time with their 95% CIs as error bars; the commit in the tooltip.
#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "sections.h"

namespace d5::report {

using nlohmann::json;

namespace {

constexpr size_t kMaxTrendPlots = 24;  // metrics (with units); `d5 db query` lists everything

std::string trend_cell(double v, const std::optional<double>& lo, const std::optional<double>& hi,
                       const std::string& unit) {
  return lo && hi ? fmt::format("{} [{}, {}]", format_quantity(v, unit), format_quantity(*lo, unit),
                                format_quantity(*hi, unit))
                  : format_quantity(v, unit) + " [no CI]";
}

}  // namespace

void add_trends(const ReportInputs& in, Page& page) {
  if (in.trends.empty()) return;
  std::map<std::pair<std::string, std::string>, std::vector<const TrendPoint*>> by_metric;
  for (const auto& t : in.trends) by_metric[{t.metric, t.unit}].push_back(&t);
  page.section("history", "History",
               fmt::format("{} measurement(s) of the result history {}: each series is one case on one backend and "
                           "machine; points are runs by start time, bars their medians' 95% CIs, the tooltip names "
                           "the commit. `d5 db regressions` tests consecutive runs against each other.",
                           in.trends.size(), display_path(in.trends_source)));
  size_t plots = 0;
  for (const auto& [key, points] : by_metric) {
    if (plots++ == kMaxTrendPlots) {
      page.paragraph(fmt::format("{} more metric(s) not drawn; `d5 db query --metric M` lists them.",
                                 by_metric.size() - kMaxTrendPlots));
      break;
    }
    const auto& [metric, unit] = key;
    // Seconds are drawn in one readable unit for the whole plot, as the time plots do.
    double factor = 1;
    std::string axis_unit = unit;
    if (unit == "s") {
      std::vector<double> medians;
      for (const auto* p : points) medians.push_back(p->median);
      std::nth_element(medians.begin(), medians.begin() + static_cast<std::ptrdiff_t>(medians.size() / 2), medians.end());
      const TimeUnit tu = time_unit_for(medians[medians.size() / 2]);
      factor = tu.factor;
      axis_unit = tu.name;
    }
    json values = json::array();
    for (const auto* p : points)
      values.push_back({{"series", p->series},
                        {"metric", p->metric},
                        {"start", p->start_utc},
                        {"commit", p->commit.substr(0, 12)},
                        {"value", p->median * factor},
                        {"lo", p->ci_lower.value_or(p->median) * factor},
                        {"hi", p->ci_upper.value_or(p->median) * factor},
                        {"n", p->n},
                        {"median [95% CI]", trend_cell(p->median, p->ci_lower, p->ci_upper, unit)}});
    const std::string y_title = axis_unit.empty() ? metric : fmt::format("{} [{}]", metric, axis_unit);
    const json x = {{"field", "start"}, {"type", "temporal"}, {"title", "run start (UTC)"}};
    const json color = {{"field", "series"}, {"type", "nominal"}, {"title", "case @ backend on machine"},
                        {"legend", {{"labelLimit", 420}}}};
    const json y = {{"field", "value"}, {"type", "quantitative"}, {"title", y_title}, {"scale", {{"zero", false}}}};
    json spec = base_spec(std::move(values));
    spec["layer"] = json::array(
        {{{"mark", "rule"},
          {"encoding", {{"x", x}, {"y", {{"field", "lo"}, {"type", "quantitative"}, {"title", y_title}}},
                        {"y2", {{"field", "hi"}}}, {"color", color}}}},
         {{"mark", {{"type", "line"}, {"point", true}}},
          {"encoding",
           {{"x", x},
            {"y", y},
            {"color", color},
            {"tooltip", json::array({{{"field", "series"}}, {{"field", "start"}}, {{"field", "commit"}},
                                     {{"field", "median [95% CI]"}}, {{"field", "n"}}})}}}}});
    page.plot(std::move(spec), fmt::format("{} over time, median per run with its 95% CI", metric));
  }
}

}  // namespace d5::report
