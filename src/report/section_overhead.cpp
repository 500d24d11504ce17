// Level 0, deep500 against native calls (`d5 ops overhead`, docs/ops-overhead.md): per problem and
// backend the ratio of deep500's time to the library's own call, median and 95% CI, beside 1.
#include <fmt/format.h>

#include "sections.h"

namespace d5::report {

using nlohmann::json;

void add_native_overhead(const ReportInputs& in, Page& page) {
  json values = json::array();
  std::vector<std::vector<std::string>> rows;
  for (const auto& r : all_cases(in)) {
    const CaseResult& c = *r.c;
    const MetricRecord* ratio = find_metric(c, "ratio");
    const MetricRecord* d5 = find_metric(c, "d5_time");
    const MetricRecord* native = find_metric(c, "native_time");
    if (c.state != CaseState::Passed || !ratio || !ratio->summary || !d5 || !native || !d5->summary ||
        !native->summary)
      continue;
    const Summary& s = *ratio->summary;
    values.push_back({{"case", c.name},
                      {"series", series_of(r, in)},
                      {"ratio", s.median},
                      {"ratio_lo", s.median_ci.available ? s.median_ci.lower : s.median},
                      {"ratio_hi", s.median_ci.available ? s.median_ci.upper : s.median},
                      {"ratio [95% CI]", format_with_ci(s, ratio->unit)},
                      {"d5", format_with_ci(*d5->summary, d5->unit)},
                      {"native", format_with_ci(*native->summary, native->unit)}});
    rows.push_back({c.name, series_of(r, in), metric_cell(*d5), metric_cell(*native), metric_cell(*ratio),
                    c.extra.value("native_implementation", std::string("-"))});
  }
  if (rows.empty()) return;
  page.section("native-overhead", "d5 against native calls",
               "d5 ops overhead: each backend's operator called through deep500 and timed by its runner, against the "
               "same library called directly in a hand-written loop, in alternating rounds in one process. A ratio "
               "of 1 is no cost; the CI says whether a difference is more than noise.");
  const json y = {{"field", "case"}, {"type", "nominal"}, {"sort", nullptr}, {"title", nullptr}};
  const json x_title = "d5 time / native time (median per round, 95% CI)";
  const json color = series_color(in);
  const json offset = {{"field", "series"}, {"type", "nominal"}};
  json spec = base_spec(std::move(values), 560, static_cast<int>(rows.size() * 22 + 20));
  spec["layer"] = json::array(
      {{{"mark", {{"type", "rule"}, {"strokeDash", json::array({4, 4})}, {"color", "#888"}}},
        {"encoding", {{"x", {{"datum", 1}, {"type", "quantitative"}}}}}},
       {{"mark", "rule"},
        {"encoding", {{"y", y}, {"yOffset", offset}, {"x", {{"field", "ratio_lo"}, {"type", "quantitative"},
                                                           {"scale", {{"zero", false}}}, {"title", x_title}}},
                      {"x2", {{"field", "ratio_hi"}}}, {"color", color}}}},
       {{"mark", {{"type", "point"}, {"filled", true}}},
        {"encoding", {{"y", y}, {"yOffset", offset}, {"x", {{"field", "ratio"}, {"type", "quantitative"},
                                                           {"scale", {{"zero", false}}}, {"title", x_title}}},
                      {"color", color},
                      {"tooltip", json::array({{{"field", "case"}}, {{"field", "series"}, {"title", "backend"}},
                                               {{"field", "ratio [95% CI]"}}, {{"field", "d5"}}, {{"field", "native"}}})}}}}});
  page.plot(std::move(spec), "deep500's time over the library's own call per problem and backend (dashed: 1).");
  page.table({"problem", "backend", "d5: median per round [95% CI]", "native", "ratio", "native call"}, rows);
}

}  // namespace d5::report
